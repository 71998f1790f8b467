"""The write gate: the signals computed as defined, unsure writes held back with the reason in the
trace, the operating point validated and shared by eval, chat and serve configs."""

import pytest
import torch
from pydantic import ValidationError

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.write_gate import (
    VERIFY_NO,
    VERIFY_YES,
    WriteGate,
    WriteGateConfig,
    WriteScorer,
    verification_messages,
    verification_question,
    write_gate,
)
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import NOT_STORED
from tests.memory_runtime.generation.test_controller import one_turn

CALL = "[MEM_WRITE{Ada Lin>>employed by>>Pfizer}]"


class FixedScorer:
    """Scores every write the same: what the gate does with the numbers, without a model."""

    def __init__(self, call: float, verify: float) -> None:
        self.scores = {"call": call, "verify": verify}
        self.asked: list[tuple] = []

    def call(self, messages, prefix, call_text):
        self.asked.append(("call", prefix, call_text))
        return self.scores["call"], self.scores["call"] / 2

    def verify(self, text, triplet):
        self.asked.append(("verify", text, triplet))
        return self.scores["verify"]


def gated_turn(gate: WriteGate, text: str = f"{CALL} Noted."):
    store = TripletStore()
    result = one_turn(ScriptedBackend([text]), store, "Ada Lin works for Pfizer.", write_gate=gate)
    return result, store


def test_a_write_below_the_threshold_is_held_back_and_the_trace_says_why():
    scorer = FixedScorer(call=0.3, verify=0.9)
    result, store = gated_turn(WriteGate(WriteGateConfig(signal="call", threshold=0.5), scorer))
    (call,) = result.calls
    assert call.kind == "error" and call.status == "held back: call score 0.30 < threshold 0.50"
    assert call.scores == {"call": 0.3, "call_min": 0.15} and store.facts() == []
    assert result.reply == NOT_STORED  # "Noted." would say it was stored


def test_a_write_at_or_above_the_threshold_is_stored_with_its_scores():
    scorer = FixedScorer(call=0.3, verify=0.5)
    result, store = gated_turn(WriteGate(WriteGateConfig(signal="verify", threshold=0.5, score=True), scorer))
    (call,) = result.calls
    assert call.kind == "write" and call.status == "stored"
    assert call.scores == {"call": 0.3, "call_min": 0.15, "verify": 0.5}  # score=True: every signal
    assert [f.triplet for f in store.facts()] == [("Ada Lin", "employed by", "Pfizer")]
    # the verify pass asks about the user's text; the call signal sees the assistant text before the call
    assert ("verify", "Ada Lin works for Pfizer.", ("Ada Lin", "employed by", "Pfizer")) in scorer.asked
    assert ("call", "", CALL) in scorer.asked


def test_scoring_without_gating_stores_everything():
    scorer = FixedScorer(call=0.01, verify=0.01)
    result, store = gated_turn(WriteGate(WriteGateConfig(signal="none", score=True), scorer))
    assert result.calls[0].kind == "write" and result.calls[0].scores == {
        "call": 0.01,
        "call_min": 0.005,
        "verify": 0.01,
    }
    assert len(store.facts()) == 1


def test_the_prefix_is_the_assistant_text_before_each_call():
    scorer = FixedScorer(call=0.9, verify=0.9)
    second = "[MEM_WRITE{Bo Chen>>employed by>>Pfizer}]"
    gated_turn(WriteGate(WriteGateConfig(signal="call"), scorer), f"{CALL} {second} Noted.")
    assert [a[1:] for a in scorer.asked] == [("", CALL), (f"{CALL} ", second)]


def test_no_gate_without_a_config_that_asks_for_one():
    assert write_gate(None) is None and write_gate(WriteGateConfig()) is None
    with pytest.raises(ValueError, match="needs the model"):
        write_gate(WriteGateConfig(signal="call", threshold=0.9))
    with pytest.raises(ValueError, match="needs a model"):
        WriteGate(WriteGateConfig(score=True))


@pytest.mark.parametrize("bad", [{"threshold": 1.5}, {"signal": "logprob"}, {"treshold": 0.5}])
def test_the_operating_point_is_validated(bad):
    with pytest.raises(ValidationError):
        WriteGateConfig.model_validate(bad)


def test_the_call_signal_is_the_geometric_mean_probability_of_the_call_tokens(tiny_model, smollm2_tokenizer):
    tok = smollm2_tokenizer
    scorer = WriteScorer(tiny_model, tok)
    messages = [{"role": "user", "content": "Ada Lin works for Pfizer."}]
    prefix = "Sure.\n"
    got = scorer.call(messages, prefix, CALL)
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefix
    context = tok(prompt, add_special_tokens=False)["input_ids"]
    full = tok(prompt + CALL, add_special_tokens=False)["input_ids"]
    assert full[: len(context)] == context  # the call starts on a token boundary here
    with torch.no_grad():
        logp = torch.log_softmax(tiny_model(input_ids=torch.tensor([full])).logits[0].float(), -1)
    token_logp = torch.stack([logp[i - 1, full[i]] for i in range(len(context), len(full))])
    assert got == pytest.approx((token_logp.mean().exp().item(), token_logp.min().exp().item()), rel=1e-4)
    assert 0 < got[1] < got[0] < 1
    # after a space the first call token takes the space in: it is scored with the call
    assert 0 < scorer.call(messages, "Sure. ", CALL)[0] < 1


def test_the_verify_signal_is_yes_against_no(tiny_model, smollm2_tokenizer):
    tok = smollm2_tokenizer
    scorer = WriteScorer(tiny_model, tok)
    triplet = ("Ada Lin", "employed by", "Pfizer")
    got = scorer.verify("Ada Lin works for Pfizer.", triplet)
    prompt = tok.apply_chat_template(
        verification_messages("Ada Lin works for Pfizer.", triplet), tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        last = tiny_model(input_ids=torch.tensor([ids])).logits[0, -1].float()
    yes, no = (
        tok(VERIFY_YES, add_special_tokens=False)["input_ids"][0],
        tok(VERIFY_NO, add_special_tokens=False)["input_ids"][0],
    )
    assert got == pytest.approx(torch.softmax(last[[yes, no]], -1)[0].item(), rel=1e-4)


def test_a_bfloat16_model_is_scored_through_a_float32_head(tiny_model, smollm2_tokenizer):
    """bfloat16 logits of a trained model's size (tens) come in steps of 0.125-0.25; the scores must not."""
    import copy

    tok = smollm2_tokenizer
    model = copy.deepcopy(tiny_model)
    with torch.no_grad():
        model.lm_head.weight.mul_(400.0)  # logits in the tens, as a trained model's are
    model = model.to(torch.bfloat16)
    triplet = ("Ada Lin", "employed by", "Pfizer")
    prompt = tok.apply_chat_template(
        verification_messages("Ada Lin works for Pfizer.", triplet), tokenize=False, add_generation_prompt=True
    )
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        hidden = out.hidden_states[-1][0, -1].float()
    assert out.logits.dtype == torch.bfloat16 and out.logits[0, -1].float().abs().max() > 16
    yes, no = (tok(w, add_special_tokens=False)["input_ids"][0] for w in (VERIFY_YES, VERIFY_NO))
    exact = hidden @ model.lm_head.weight.float()[[yes, no]].T
    rounded = out.logits[0, -1].float()[[yes, no]]
    assert not torch.allclose(exact, rounded, atol=1e-3)  # the bfloat16 logits are rounded here
    got = WriteScorer(model, tok).verify("Ada Lin works for Pfizer.", triplet)
    assert got == pytest.approx(torch.softmax(exact, -1)[0].item(), abs=1e-4)


def test_the_verification_question_names_the_fact_without_call_syntax():
    question = verification_question("Ada Lin works for Pfizer.", ("Ada Lin", "employed by", "Pfizer"))
    assert question.startswith("Ada Lin works for Pfizer.\n\n")
    assert "Ada Lin | employed by | Pfizer" in question and ">>" not in question


def test_the_batch_decoder_gates_its_turns_like_the_controller(tiny_model, smollm2_tokenizer):
    from memory_runtime.generation.batching import BatchDecoder
    from memory_runtime.generation.turn import TurnRequest, turn_messages

    gate = WriteGate(WriteGateConfig(signal="call"), FixedScorer(0.1, 0.1))
    decoder = BatchDecoder(tiny_model, smollm2_tokenizer, write_gate=gate)
    store = TripletStore()
    decoder.submit(TurnRequest(turn_messages("Ada Lin works for Pfizer."), store, max_new_tokens=2))
    decoder.step()
    turns = list(decoder.active.values())
    assert not turns or turns[0].controller.write_gate is gate
    assert decoder._alone.write_gate is gate  # models whose cache cannot be stacked: the same gate


def test_serving_a_gate_needs_the_hf_engine():
    from memory_runtime.serving.serve_config import Generation

    assert Generation(write_gate=WriteGateConfig(signal="call")).write_gate.signal == "call"
    with pytest.raises(ValidationError, match="engine: hf"):
        Generation(engine="vllm", write_gate=WriteGateConfig(signal="call"))


def test_a_turn_that_asks_for_no_gate_stores_every_write():
    """A correction: the user said it, so the engine's gate holds nothing back (TurnRequest.gate_writes)."""
    scorer = FixedScorer(call=0.1, verify=0.1)
    gate = WriteGate(WriteGateConfig(signal="call", threshold=0.5), scorer)
    store = TripletStore()
    result = one_turn(
        ScriptedBackend([f"{CALL} Noted."]), store, "Ada Lin works for Pfizer.", write_gate=gate, gate_writes=False
    )
    assert [c.status for c in result.calls] == ["stored"] and scorer.asked == []
