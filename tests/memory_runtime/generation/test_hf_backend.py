"""HFBackend: streaming equals generate(), pause/resume reuses the KV cache correctly."""

from __future__ import annotations

import copy

import pytest
import torch

from memory_runtime.generation.hf_backend import HFBackend

MESSAGES = [
    {"role": "system", "content": "You have a memory. Use MEM_READ to look facts up."},
    {"role": "user", "content": "Who employs Alice?"},
]
READ = "[MEM_READ{>>employed by>>Acme}:"
RESULT = " {Alice>>employed by>>Acme}]"


def reference_logits(model, backend: HFBackend) -> torch.Tensor:
    """Next-token logits from one uncached forward over prompt + assistant tokens."""
    ids = torch.tensor([backend.prompt_token_ids + backend.assistant_token_ids])
    with torch.inference_mode():
        return model(input_ids=ids).logits[0, -1].float()


def greedy_generate(model, tokenizer, ids: list[int], n: int, end_ids) -> list[int]:
    """Greedy continuation with transformers' own generate(); trailing end token removed."""
    out = model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=sorted(end_ids),
        pad_token_id=tokenizer.pad_token_id,
    )
    new = out[0, len(ids) :].tolist()
    if new and new[-1] in end_ids:
        new = new[:-1]
    return new


class Scripted(torch.nn.Module):
    """Wraps a model and forces a scripted assistant continuation, then a final token.

    Step i of the assistant turn (counted from ``prompt_len``) gets ``script[i]``; every
    later step gets ``final``.  Only the logits are changed, the cache is the real one.
    """

    def __init__(self, inner, script: list[int], final: int, generation_config=None):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.generation_config = generation_config or inner.generation_config
        self.script = list(script)
        self.final = final
        self.prompt_len = 0

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, input_ids, past_key_values=None, **kwargs):
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        out = self.inner(input_ids=input_ids, past_key_values=past_key_values, **kwargs)
        step = past + input_ids.shape[1] - self.prompt_len
        token = self.script[step] if 0 <= step < len(self.script) else self.final
        out.logits[0, -1, token] = 1e4
        return out


def test_greedy_stream_matches_generate(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    pieces = list(backend.stream(24))
    expected = greedy_generate(tiny_model, smollm2_tokenizer, backend.prompt_token_ids, 24, backend.end_token_ids)
    assert backend.assistant_token_ids == expected
    assert len(expected) == 24  # the random model does not end its turn this early
    assert "".join(pieces) == backend.assistant_text
    assert backend.assistant_text == smollm2_tokenizer.decode(expected).rstrip("\ufffd")
    assert backend.finish_reason == "length"


def test_prompt_is_chat_template_with_generation_prompt(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer, system_prompt="SYS PROMPT")
    backend.start([{"role": "user", "content": "hi"}])
    prompt = smollm2_tokenizer.decode(backend.prompt_token_ids)
    assert prompt == "<|im_start|>system\nSYS PROMPT<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    backend.start(MESSAGES)  # an explicit system message wins over system_prompt
    assert "SYS PROMPT" not in smollm2_tokenizer.decode(backend.prompt_token_ids)


def test_resume_after_mid_text_cut_reuses_cache_correctly(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    list(backend.stream(16))
    generated = backend.assistant_token_ids
    text = backend.assistant_text
    cut = text[: len(text) // 2]
    new_text = cut + RESULT
    backend.resume(new_text)
    assert backend.assistant_text == new_text
    kept = backend.assistant_token_ids
    # a prefix of the generated tokens is kept as is, only the rest is re-tokenized
    common = 0
    while common < len(generated) and common < len(kept) and generated[common] == kept[common]:
        common += 1
    assert 0 < common < len(generated)
    assert smollm2_tokenizer.decode(kept[common:]) == new_text[len(smollm2_tokenizer.decode(kept[:common])) :]

    torch.testing.assert_close(backend.next_token_logits(), reference_logits(tiny_model, backend), atol=1e-4, rtol=1e-4)
    before = backend.prompt_token_ids + backend.assistant_token_ids
    more = "".join(backend.stream(8))
    assert backend.assistant_text == new_text + more
    assert backend.assistant_token_ids[len(before) - len(backend.prompt_token_ids) :] == greedy_generate(
        tiny_model, smollm2_tokenizer, before, 8, backend.end_token_ids
    )


def test_resume_equals_fresh_prefilled_turn(tiny_model, smollm2_tokenizer):
    """Pause at a memory read, insert results: same state as prefilling the whole text."""
    paused = HFBackend(tiny_model, smollm2_tokenizer)
    paused.start(MESSAGES)
    paused.resume("Let me check. " + READ)  # pretend the model wrote the read call ...
    list(paused.stream(5))  # ... and went on generating past it
    paused.resume("Let me check. " + READ + RESULT)  # the controller cuts after '}:' and inserts results

    fresh = HFBackend(tiny_model, smollm2_tokenizer)
    fresh.start(MESSAGES)
    fresh.resume("Let me check. " + READ + RESULT)

    assert paused.assistant_token_ids == fresh.assistant_token_ids
    assert paused.assistant_text == fresh.assistant_text
    torch.testing.assert_close(paused.next_token_logits(), fresh.next_token_logits(), atol=1e-4, rtol=1e-4)
    assert list(paused.stream(10)) == list(fresh.stream(10))
    assert paused.assistant_token_ids == fresh.assistant_token_ids
    # prompt+prefill once, 4 steps, one forward for the inserted text, then 9 steps (the
    # logits computed for the comparison above are reused for the first new token)
    assert paused.stats["forwards"] == 1 + 4 + 1 + 9
    assert paused.stats["resumes"] == 2


@pytest.mark.parametrize("which", ["earlier", "last"])
def test_resume_cut_inside_a_token(tiny_model, smollm2_tokenizer, which):
    tok = smollm2_tokenizer
    backend = HFBackend(tiny_model, tok)
    backend.start(MESSAGES)
    list(backend.stream(12))
    ids = backend.assistant_token_ids
    candidates = [
        i
        for i in range(len(ids))
        if len(tok.decode(ids[i : i + 1]).strip()) >= 3 and "\ufffd" not in tok.decode(ids[: i + 1])
    ]
    assert candidates, "the random model produced no multi-character token"
    i = candidates[0] if which == "earlier" else len(ids) - 1
    if which == "last":
        assert i in candidates
    head = tok.decode(ids[:i])
    piece = tok.decode(ids[i : i + 1])
    cut = head + piece[: len(piece) - 1]  # inside token i
    backend.resume(cut + RESULT)

    assert backend.assistant_text == cut + RESULT
    new_ids = backend.assistant_token_ids
    assert new_ids[:i] == ids[:i]  # everything before the straddling token is kept
    assert new_ids[i:] == tok(piece[: len(piece) - 1] + RESULT, add_special_tokens=False)["input_ids"]
    assert new_ids[i] != ids[i]
    torch.testing.assert_close(backend.next_token_logits(), reference_logits(tiny_model, backend), atol=1e-4, rtol=1e-4)
    # the next forward only fed the re-tokenized remainder (cache reused up to the cut)
    assert backend.stats["forwards"] == 12 + 1


def test_resume_with_unrelated_text_and_before_streaming(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    backend.resume("Sure")  # prefill before any generation
    list(backend.stream(4))
    backend.resume("Completely different")  # nothing in common: all assistant tokens dropped
    assert backend.assistant_text == "Completely different"
    torch.testing.assert_close(backend.next_token_logits(), reference_logits(tiny_model, backend), atol=1e-4, rtol=1e-4)
    backend.resume("")
    assert backend.assistant_token_ids == []
    torch.testing.assert_close(backend.next_token_logits(), reference_logits(tiny_model, backend), atol=1e-4, rtol=1e-4)


def test_max_new_tokens_respected(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    assert list(backend.stream(0)) == []
    list(backend.stream(5))
    assert len(backend.assistant_token_ids) == 5
    assert backend.finish_reason == "length"
    list(backend.stream(3))  # a later stream() continues the same turn
    assert len(backend.assistant_token_ids) == 8
    assert backend.stats["generated_tokens"] == 8


def test_caller_may_stop_iterating_early(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    gen = backend.stream(50)
    got = [next(gen) for _ in range(3)]
    gen.close()
    assert backend.assistant_text == "".join(got)
    assert len(backend.assistant_token_ids) == 3


@pytest.mark.parametrize("source", ["im_end", "generation_config"])
def test_stops_at_end_of_turn(tiny_model, smollm2_tokenizer, source):
    tok = smollm2_tokenizer
    script = tok(" Hello world", add_special_tokens=False)["input_ids"]
    if source == "im_end":
        final, gen_config = tok.convert_tokens_to_ids("<|im_end|>"), None
    else:  # a model whose generation_config names another end token
        final = tok(" STOP", add_special_tokens=False)["input_ids"][0]
        gen_config = copy.deepcopy(tiny_model.generation_config)
        gen_config.eos_token_id = [final]
    model = Scripted(tiny_model, script, final, gen_config)
    backend = HFBackend(model, tok)
    assert final in backend.end_token_ids
    backend.start(MESSAGES)
    model.prompt_len = len(backend.prompt_token_ids)
    pieces = list(backend.stream(20))
    assert "".join(pieces) == " Hello world" == backend.assistant_text
    assert backend.assistant_token_ids == script
    assert backend.finish_reason == "stop"
    assert backend.stats["generated_tokens"] == len(script)
    assert list(backend.stream(20)) == []  # the turn is over
    backend.resume(" Hello world, again")  # the controller may reopen it
    assert backend.finish_reason is None
    assert list(backend.stream(20)) == []  # (the script forces the end token again)
    assert backend.assistant_text == " Hello world, again"


def test_partial_utf8_is_held_back(tiny_model, smollm2_tokenizer):
    tok = smollm2_tokenizer
    text = "héllo 日本 🙂"
    script = tok(text, add_special_tokens=False)["input_ids"]
    assert any("\ufffd" in tok.decode(script[:k]) for k in range(len(script)))  # some tokens split a character
    model = Scripted(tiny_model, script, tok.convert_tokens_to_ids("<|im_end|>"))
    backend = HFBackend(model, tok)
    backend.start(MESSAGES)
    model.prompt_len = len(backend.prompt_token_ids)
    pieces = list(backend.stream(50))
    assert all("\ufffd" not in p for p in pieces)
    assert "".join(pieces) == text == backend.assistant_text


def test_stats_counted(tiny_model, smollm2_tokenizer):
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    assert backend.stats["prompt_tokens"] == len(backend.prompt_token_ids) > 0
    assert backend.stats["forwards"] == backend.stats["generated_tokens"] == 0
    list(backend.stream(6))
    assert backend.stats["generated_tokens"] == 6
    assert backend.stats["forwards"] == 6  # prefill + 5 single-token steps (the 6th token is not fed yet)
    assert backend.stats["forward_seconds"] > 0
    backend.resume(backend.assistant_text + RESULT)
    assert backend.stats["resumes"] == 1
    assert backend.stats["inserted_tokens"] == len(smollm2_tokenizer(RESULT, add_special_tokens=False)["input_ids"])
    backend.start(MESSAGES)
    assert backend.stats["generated_tokens"] == backend.stats["forwards"] == backend.stats["resumes"] == 0


def test_sampling_is_reproducible_with_seed(tiny_model, smollm2_tokenizer):
    def sample(seed):
        backend = HFBackend(tiny_model, smollm2_tokenizer, temperature=0.9, top_p=0.95, seed=seed)
        backend.start(MESSAGES)
        return "".join(backend.stream(8)), backend.assistant_token_ids

    first = sample(7)
    assert first == sample(7)
    assert first != sample(8)
    greedy = HFBackend(tiny_model, smollm2_tokenizer)
    greedy.start(MESSAGES)
    list(greedy.stream(8))
    assert first[1] != greedy.assistant_token_ids


def test_invalid_use(tiny_model, smollm2_tokenizer):
    with pytest.raises(ValueError):
        HFBackend(tiny_model, smollm2_tokenizer, temperature=-1)
    with pytest.raises(ValueError):
        HFBackend(tiny_model, smollm2_tokenizer, top_p=0)
    backend = HFBackend(tiny_model, smollm2_tokenizer)
    assert backend.assistant_text == ""
    with pytest.raises(RuntimeError):
        list(backend.stream(1))
    with pytest.raises(RuntimeError):
        backend.resume("x")


def test_peft_wrapped_model(tiny_model, smollm2_tokenizer):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    peft_model = get_peft_model(
        copy.deepcopy(tiny_model),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    ).eval()
    backend = HFBackend(peft_model, smollm2_tokenizer)
    backend.start(MESSAGES)
    list(backend.stream(10))
    expected = greedy_generate(peft_model, smollm2_tokenizer, backend.prompt_token_ids, 10, backend.end_token_ids)
    assert backend.assistant_token_ids == expected
    text = backend.assistant_text
    backend.resume(text[: len(text) // 2] + RESULT)
    torch.testing.assert_close(backend.next_token_logits(), reference_logits(peft_model, backend), atol=1e-4, rtol=1e-4)


class Preferring(Scripted):
    """Like Scripted, but step i also boosts a runner-up token ``second[i]`` (a bit less)."""

    def __init__(self, inner, script: list[int], second: dict[int, int], final: int):
        super().__init__(inner, script, final)
        self.second = second

    def forward(self, input_ids, past_key_values=None, **kwargs):
        past = past_key_values.get_seq_length() if past_key_values is not None else 0
        step = past + input_ids.shape[1] - self.prompt_len
        out = super().forward(input_ids, past_key_values=past_key_values, **kwargs)
        if step in self.second:
            out.logits[0, -1, self.second[step]] = 9e3
        return out


@pytest.mark.parametrize("copy_fields, temperature", [(True, 0.0), (True, 0.7), (False, 0.0)])
def test_names_in_calls_are_copied_from_the_conversation(tiny_model, smollm2_tokenizer, copy_fields, temperature):
    """A model that prefers "Bret" for the "Brett" it was told about writes "Brett" when its
    runner-up allows it; the same preference outside a call is left alone."""
    tok = smollm2_tokenizer
    good = "[MEM_WRITE{Brett Robson>>employed by>>Acme}] Bret"
    ids = tok(good, add_special_tokens=False)["input_ids"]
    pieces = [tok.decode([i]) for i in ids]
    k = pieces.index("tt")
    t = tok("t", add_special_tokens=False)["input_ids"][0]
    # prefers "t" over "tt": "Bret Robson" unless the constraint steps in
    script = ids[:k] + [t] + ids[k + 1 :]
    model = Preferring(tiny_model, script, {k: ids[k]}, tok.convert_tokens_to_ids("<|im_end|>"))
    backend = HFBackend(model, tok, copy_fields=copy_fields, temperature=temperature, seed=0)
    backend.start([{"role": "user", "content": "Brett Robson works for Acme."}])
    model.prompt_len = len(backend.prompt_token_ids)
    text = "".join(backend.stream(40))
    if copy_fields:
        assert text == good  # the trailing free-text "Bret" is not a call field
        assert backend.stats["backtracks"] == 1  # "Bre"+"t" was a dead end before " Rob"
    else:
        assert text == good.replace("Brett", "Bret", 1)


@pytest.mark.parametrize(
    "relations, copy_fields",
    [(["employed by", "manager of"], True), (None, True), (["employed by", "manager of"], False)],
)
def test_relations_in_calls_come_from_the_relation_table(tiny_model, smollm2_tokenizer, relations, copy_fields):
    """A model that prefers "employed at" (an alias, not a relation name) writes "employed by"
    when the backend knows the memory's relations and its runner-up allows it (not with
    copy_fields off: generation.copy_fields=false frees relations too)."""
    tok = smollm2_tokenizer
    good = "[MEM_WRITE{Brett Robson>>employed by>>Acme}]"
    ids = tok(good, add_special_tokens=False)["input_ids"]
    k = [tok.decode([i]) for i in ids].index(" by")
    script = ids[:k] + tok(" at", add_special_tokens=False)["input_ids"] + ids[k + 1 :]
    model = Preferring(tiny_model, script, {k: ids[k]}, tok.convert_tokens_to_ids("<|im_end|>"))
    backend = HFBackend(model, tok, relations=relations, copy_fields=copy_fields)
    backend.start([{"role": "user", "content": "Brett Robson works at Acme."}])
    model.prompt_len = len(backend.prompt_token_ids)
    text = "".join(backend.stream(40))
    assert text == (good if relations and copy_fields else good.replace("employed by", "employed at"))


@pytest.mark.parametrize("copy_fields", [True, False])
def test_answer_names_stay_copies_of_what_the_read_returned(tiny_model, smollm2_tokenizer, copy_fields):
    """A model that would write "Gustavo" for the "Gustav" its read returned writes "Gustav" when its
    runner-up allows it (not with copy_fields off)."""
    tok = smollm2_tokenizer
    backend = HFBackend(tiny_model, tok, copy_fields=copy_fields)
    backend.start([{"role": "user", "content": "Who works for Pfizer?"}])
    backend.resume("[MEM_READ{>>employed by>>Pfizer}: {Gustav Klein>>employed by>>Pfizer}] Gustav")
    o, works = tok.convert_tokens_to_ids("o"), tok(" works", add_special_tokens=False)["input_ids"][0]
    logits = torch.full((len(tok),), -10.0)
    logits[o], logits[works] = 5.0, 4.0  # prefers "Gustavo"
    backend.turn.step(logits)
    assert backend.turn.assistant_text.endswith("Gustav works" if copy_fields else "Gustavo")


@pytest.mark.parametrize("copy_fields", [True, False])
def test_an_answer_does_not_drop_the_head_of_a_returned_name(tiny_model, smollm2_tokenizer, copy_fields):
    """Issue 46: the read returned "Hector Villalobos" and the reply was "Yes,ector Villalobos": the model put
    "ector" (the name's rest, as the results spell it after "{H") first. Its probability goes to " H", the
    name's start, so the answer is "Yes, Hector" (with copy_fields off the model's choice stands)."""
    tok = smollm2_tokenizer
    backend = HFBackend(tiny_model, tok, copy_fields=copy_fields)
    backend.start([{"role": "user", "content": "Is anyone a customer of Siemens?"}])
    backend.resume("[MEM_READ{>>customer of>>Siemens}: {Hector Villalobos>>customer of>>Siemens}] Yes,")
    ector, h, erik = (tok(p, add_special_tokens=False)["input_ids"][0] for p in ("ector", " H", " Erik"))
    logits = torch.full((len(tok),), -10.0)
    logits[ector], logits[erik], logits[h] = 5.0, 4.5, 4.0  # as the quickstart's adapter ranked them
    backend.turn.step(logits)
    assert backend.turn.assistant_text.endswith("Yes, H" if copy_fields else "Yes,ector")


@pytest.mark.parametrize("copy_fields", [True, False])
def test_an_answer_does_not_drop_the_head_of_a_returned_common_term(tiny_model, smollm2_tokenizer, copy_fields):
    """Issue 47's chat: the read returned "peanuts" and the answer said "allergic to nuts". A word after a space
    that is inside a returned term in small letters, not at its start, gives its probability to the token that
    starts the term spelt whole (" peanuts", one token here)."""
    tok = smollm2_tokenizer
    backend = HFBackend(tiny_model, tok, copy_fields=copy_fields)
    backend.start([{"role": "user", "content": "What is Lena Hartmann allergic to?"}])
    backend.resume(
        "[MEM_READ{Lena Hartmann>>allergic to>>}: {Lena Hartmann>>allergic to>>peanuts}] Lena Hartmann is allergic to"
    )
    nuts, peanuts, fish = (tok(p, add_special_tokens=False)["input_ids"][0] for p in (" nuts", " peanuts", " fish"))
    logits = torch.full((len(tok),), -10.0)
    logits[nuts], logits[fish], logits[peanuts] = 5.0, 4.5, 4.0
    backend.turn.step(logits)
    assert backend.turn.assistant_text.endswith("allergic to peanuts" if copy_fields else "allergic to nuts")
