"""The vLLM decoder against a fake engine (no GPU here): submissions stop at a read, resume from
the token ids so far (so the prefix cache hits), carry the adapter and the copy regex, and give
the turns the controller would."""

from __future__ import annotations

import re
from types import SimpleNamespace

from memory_runtime.generation.turn import TurnRequest, turn_messages
from memory_runtime.generation.vllm_decoder import VLLMDecoder
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import render_read, render_results, render_write


class FakeEngine:
    """vLLM's LLMEngine as the decoder uses it: scripted replies streamed 3 tokens per step, stopped
    after "}:" as vLLM's stop strings are (the stop string kept in the output); a reply that ends
    by itself ends with the end token, which vLLM keeps in the output's token ids."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, script  # script(prompt_text) -> the assistant's whole text
        self.live: dict[str, dict] = {}
        self.submissions: list[dict] = []
        self.aborted: list[str] = []

    def add_request(self, request_id, prompt, params, lora_request=None):
        ids = prompt["prompt_token_ids"]
        text = self.tokenizer.decode(ids)
        prompt_end = text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
        done = text[prompt_end:]  # the assistant text so far: what this submission continues
        whole = self.script(text[:prompt_end])
        assert whole.startswith(done), (whole, done)
        rest = whole[len(done) :]
        stop = rest.find("}:")
        reason = None
        if stop >= 0:
            rest, reason = rest[: stop + 2], "}:"
        tokens = self.tokenizer(rest, add_special_tokens=False)["input_ids"]
        if reason is None:
            tokens.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        tokens = tokens[: params["max_tokens"]]
        self.submissions.append({"id": request_id, "prompt_ids": list(ids), "params": params, "lora": lora_request})
        self.live[request_id] = {"tokens": tokens, "sent": 0, "reason": reason}

    def abort_request(self, request_id):
        self.aborted.append(request_id)
        self.live.pop(request_id, None)

    def step(self):
        outputs = []
        for request_id, r in list(self.live.items()):
            r["sent"] = min(len(r["tokens"]), r["sent"] + 3)
            finished = r["sent"] == len(r["tokens"])
            max_tokens = self.submissions[-1]["params"]["max_tokens"]
            finish = ("stop" if r["reason"] or r["sent"] < max_tokens else "length") if finished else None
            outputs.append(
                SimpleNamespace(
                    request_id=request_id,
                    finished=finished,
                    outputs=[
                        SimpleNamespace(
                            token_ids=r["tokens"][: r["sent"]], finish_reason=finish, stop_reason=r["reason"]
                        )
                    ],
                )
            )
            if finished:
                del self.live[request_id]
        return outputs


def script(prompt: str) -> str:
    if not prompt.rsplit("user\n", 1)[-1].startswith("Who"):
        return render_write("Tia Batres", "employed by", "Pfizer") + " Noted."
    read = render_read(None, "employed by", "Pfizer")
    return (
        read + render_results([("Dorothea Altemus", "employed by", "Pfizer")]) + " Dorothea Altemus works for Pfizer."
    )


def decoder(tokenizer, **kw):
    engine = FakeEngine(tokenizer, script)
    params = lambda request, max_tokens, regex: {"max_tokens": max_tokens, "regex": regex}  # noqa: E731
    return engine, VLLMDecoder(engine, tokenizer, adapter="runs/adapter", params=params, lora=lambda a: a, **kw)


def test_a_read_pauses_and_resumes_from_the_token_ids_so_far(smollm2_tokenizer):
    store = TripletStore(":memory:")
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    engine, vllm = decoder(smollm2_tokenizer)
    (result,) = vllm.run([TurnRequest(turn_messages("Who works for Pfizer?"), store, max_new_tokens=64)])
    assert result.reply == "Dorothea Altemus works for Pfizer." and result.status == "ok"
    assert [c.kind for c in result.calls] == ["read"] and result.calls[0].results == [
        ("Dorothea Altemus", "employed by", "Pfizer")
    ]
    first, second = engine.submissions
    assert second["prompt_ids"][: len(first["prompt_ids"])] == first["prompt_ids"]  # the prefix cache hits
    generated = len(second["prompt_ids"]) - len(first["prompt_ids"])
    assert second["params"]["max_tokens"] < 64 and generated > 0
    assert first["lora"] == second["lora"] == "runs/adapter"  # the adapter, per request
    # the calls are held to copies: the regex accepts what the script said and nothing respelled
    assert re.fullmatch(first["params"]["regex"], render_read(None, "employed by", "Pfizer"))
    assert not re.fullmatch(first["params"]["regex"], render_read(None, "employed by", "Pfizzer"))


def test_writes_are_stored_and_turns_share_the_engine(smollm2_tokenizer):
    store = TripletStore(":memory:")
    engine, vllm = decoder(smollm2_tokenizer)
    requests = [
        TurnRequest(turn_messages("Tia Batres works for Pfizer."), store, namespace=f"user{i}", max_new_tokens=64)
        for i in range(3)
    ]
    results = vllm.run(requests)
    assert all(r.reply == "Noted." and r.calls[0].status == "stored" for r in results)
    assert [f.triplet for f in store.facts("user2")] == [("Tia Batres", "employed by", "Pfizer")]
    assert len(engine.submissions) == 3 and not engine.aborted


def test_the_token_budget_ends_a_turn(smollm2_tokenizer):
    store = TripletStore(":memory:")
    engine, vllm = decoder(smollm2_tokenizer, copy_fields=False)
    (result,) = vllm.run([TurnRequest(turn_messages("Who works for Pfizer?"), store, max_new_tokens=5)])
    assert result.status == "max_tokens" and result.generated_tokens <= 5
    assert engine.submissions[0]["params"]["regex"] is None


def test_a_prompt_is_counted_as_it_is_submitted(smollm2_tokenizer):
    store = TripletStore(":memory:")
    engine, vllm = decoder(smollm2_tokenizer)
    request = TurnRequest(turn_messages("Tia Batres works for Pfizer."), store, max_new_tokens=64)
    counted = vllm.prompt_tokens(request)
    vllm.run([request])
    assert counted == len(engine.submissions[0]["prompt_ids"]) > 10


def test_closing_shuts_the_engine_processes_down_for_every_twin(smollm2_tokenizer):
    engine, vllm = decoder(smollm2_tokenizer)
    shut = []
    engine.engine_core = SimpleNamespace(shutdown=lambda: shut.append("engine"))  # vLLM's client of its processes
    vllm.with_adapter(None).close()
    assert shut == ["engine"]


def test_an_aborted_turn_is_aborted_in_the_engine_too(smollm2_tokenizer):
    store = TripletStore(":memory:")
    engine, vllm = decoder(smollm2_tokenizer)
    first, second, third = (
        TurnRequest(turn_messages(f"Tia Batres works for Pfizer {i}."), store, max_new_tokens=64) for i in range(3)
    )
    for request in (first, second, third):
        vllm.submit(request)
    vllm.step()  # all three submitted, a few tokens each
    assert vllm.in_flight == 3 and len(engine.submissions) == 3
    assert vllm.abort(second) and not vllm.abort(second)
    assert engine.aborted == [engine.submissions[1]["id"]] and vllm.in_flight == 2
    vllm.abort_all()
    assert sorted(engine.aborted) == sorted(s["id"] for s in engine.submissions) and not vllm.busy
    assert vllm.step() == [] and not engine.live


def test_a_turn_that_fails_fails_alone_and_the_others_go_on(smollm2_tokenizer):
    """A submission vLLM refuses (a seed it cannot take) and a turn whose memory breaks mid-turn each
    end with their own error; the other turns of the engine finish as they do alone."""

    class BrokenStore(TripletStore):
        def write_many(self, *args, **kwargs):
            raise RuntimeError("the disk is gone")

    def params(request, max_tokens, regex):
        if request.seed is not None and request.seed >= 2**63:
            raise ValueError("seed out of range")  # as vLLM's SamplingParams refuses it
        return {"max_tokens": max_tokens, "regex": regex}

    store = TripletStore(":memory:")
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    engine = FakeEngine(smollm2_tokenizer, script)
    vllm = VLLMDecoder(engine, smollm2_tokenizer, adapter=None, params=params, lora=lambda a: a)
    asks = [TurnRequest(turn_messages("Who works for Pfizer?"), store, max_new_tokens=64) for _ in range(2)]
    seeded = TurnRequest(turn_messages("Who works for Pfizer?"), store, max_new_tokens=64, seed=1)
    broken = TurnRequest(turn_messages("Tia Batres works for Pfizer."), BrokenStore(), max_new_tokens=64)
    for request in (asks[0], seeded, broken, asks[1]):
        vllm.submit(request)
    seeded.seed = 2**64  # as if a door skipped TurnRequest.check
    outcomes = {}
    while vllm.busy:
        outcomes.update({id(request): outcome for request, outcome in vllm.step()})
    assert "seed" in str(outcomes[id(seeded)]) and "disk" in str(outcomes[id(broken)])
    assert [outcomes[id(r)].reply for r in asks] == ["Dorothea Altemus works for Pfizer."] * 2
    assert not vllm.active and not engine.live
