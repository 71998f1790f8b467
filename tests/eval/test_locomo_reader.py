"""eval/locomo_reader.py: the reader's greedy answers and its refusals under each locomo.reader_refusal, on a
tiny random Llama with the real SmolLM2 tokenizer, made to refuse."""

from __future__ import annotations

from eval.locomo import refuses
from eval.locomo_reader import Answerer, reader_refuses
from memory_runtime.memory.conversation import NOT_MENTIONED, reader_system


class RefusalBiased:
    """A model (the rest of it as it is) whose logits lead to refusals: after a prompt each refusal's first
    token raised by `bias` (the first refusal's most), after a refusal's token its next: a reader that answers
    'Not mentioned.' (or another refusal) to everything."""

    def __init__(self, model, tokenizer, bias: float = 100.0, refusals=(NOT_MENTIONED,)) -> None:
        self.model, self.bias = model, bias
        self.refusals = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in refusals]

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, ids, **kwargs):
        out = self.model(ids, **kwargs)
        last = int(ids[0, -1])
        for rank, refusal in enumerate(self.refusals):
            if ids.shape[1] > 1:
                out.logits[..., refusal[0]] += self.bias - rank
            elif last in refusal[:-1]:
                out.logits[..., refusal[refusal.index(last) + 1]] += self.bias
        return out


def test_a_reader_refuses_as_reader_refusal_allows_and_keeps_what_it_would_say_instead(tiny_model, smollm2_tokenizer):
    ids = sum(Answerer(tiny_model, smollm2_tokenizer).prompt_parts("Facts remembered: none.", "Who?"), [])

    def answers(reader):
        return {
            policy: Answerer(reader, smollm2_tokenizer, 6, policy).answer(ids)
            for policy in ("greedy", "likely", "never")
        }

    sure = answers(RefusalBiased(tiny_model, smollm2_tokenizer))  # the refusal's first token: p ~1
    assert sure["greedy"].text.startswith(NOT_MENTIONED) and sure["greedy"].refusal_p > 0.99
    assert sure["greedy"].unrefused and not refuses(sure["greedy"].unrefused)
    assert sure["likely"] == sure["greedy"]  # p > 0.5: likely refuses too
    assert sure["never"].text == sure["greedy"].unrefused and sure["never"].unrefused is None
    # a random model's next token is nearly uniform: a refusal raised by 5 is its greedy answer at p << 0.5
    unsure = answers(RefusalBiased(tiny_model, smollm2_tokenizer, bias=5.0))
    assert unsure["greedy"].text.startswith(NOT_MENTIONED) and unsure["greedy"].refusal_p < 0.5
    assert unsure["likely"].text == unsure["never"].text == unsure["greedy"].unrefused
    # two ways to refuse: both first tokens are tried before the answer that does not refuse
    two = answers(RefusalBiased(tiny_model, smollm2_tokenizer, refusals=(NOT_MENTIONED, "Unknown.")))
    assert two["greedy"].text.startswith(NOT_MENTIONED) and two["greedy"].refusal_p > 0.99
    assert not refuses(two["never"].text) and two["never"].text == two["greedy"].unrefused
    plain = answers(tiny_model)  # a random reader: no refusal, every policy the same
    assert plain["greedy"].refusal_p == 0.0 and plain["greedy"].unrefused is None
    assert plain["never"] == plain["likely"] == plain["greedy"]
    assert reader_refuses("likely", True, 0.4) is False and reader_refuses("greedy", True, 0.4) is True
    assert reader_refuses("greedy", False, 0.9) is False


def test_a_template_that_folds_the_system_prompt_into_the_user_turn_splits_before_the_question(gemma3_tokenizer):
    """Gemma's template has no system turn: the context goes in the head, the question's part does not depend
    on it (a full context is prefilled once), and the two parts are the whole prompt's ids."""
    answerer = Answerer(None, gemma3_tokenizer)
    tails = set()
    for context in ("Facts remembered: none.", "Turns:\n[D1:3] Caroline: I went to a support group yesterday."):
        for question in ("When did Caroline go to the support group?", ""):
            head, tail = answerer.prompt_parts(context, question)
            whole = gemma3_tokenizer.apply_chat_template(
                [{"role": "system", "content": reader_system(context)}, {"role": "user", "content": question}],
                tokenize=False,
                add_generation_prompt=True,
            )
            assert head + tail == gemma3_tokenizer(whole, add_special_tokens=False)["input_ids"]
            assert context in gemma3_tokenizer.decode(head) and "Caroline go" not in gemma3_tokenizer.decode(head)
            if question:
                tails.add(tuple(tail))
                assert tuple(answerer.question_ids(question)) == tuple(tail)
    assert len(tails) == 1


def test_the_chatml_split_stays_after_the_system_message(smollm2_tokenizer):
    head, tail = Answerer(None, smollm2_tokenizer).prompt_parts("Facts remembered: none.", "Who?")
    assert smollm2_tokenizer.decode(head).endswith("<|im_end|>\n")
    assert smollm2_tokenizer.decode(tail).startswith("<|im_start|>user\nWho?")


def test_a_sliding_window_reader_answers_past_its_window_as_generate_does(smollm2_tokenizer):
    """A Gemma 3 (sliding-window layers) reader whose context outruns its window: the answers equal
    transformers' own greedy generate, and a cached context is cropped back after each question."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=512,
    )
    model = Gemma3ForCausalLM(config).eval()
    answerer = Answerer(model, smollm2_tokenizer, max_new_tokens=6)
    context = "Turns:\n" + "\n".join(f"[D1:{i}] Caroline: I adopted dog number {i}." for i in range(8))
    head = answerer.prompt_parts(context, "")[0]
    cache = answerer.prefill(head)
    for question in ("Who adopted a dog?", "How many dogs?"):
        ids = head + answerer.question_ids(question)
        expected = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False)[0, len(ids) :]
        expected = smollm2_tokenizer.decode(expected, skip_special_tokens=True).strip()
        assert answerer.answer(ids).text == expected
        assert answerer.answer(answerer.question_ids(question), cache).text == expected
        assert cache.get_seq_length() == len(head) > 8
