"""The write verifier: its input keeps the fact whole, a directory is checked before anything loads (one-line
errors), a writer of another base or relation table is refused, and the gate holds back what it scores
below its threshold without the writer's model in this process."""

import json

import pytest
from pydantic import ValidationError

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.verifier import (
    CARD_FILE,
    VerifierCard,
    check_pairing,
    encode,
    read_card,
)
from memory_runtime.generation.write_gate import WriteGate, WriteGateConfig, write_gate
from memory_runtime.memory.store import TripletStore
from tests.memory_runtime.generation.test_controller import one_turn

CALL = "[MEM_WRITE{Ada Lin>>employed by>>Pfizer}]"


def test_a_long_passage_is_cut_and_the_fact_is_read_last(smollm2_tokenizer):
    triplet = ("Ada Lin", "employed by", "Pfizer")
    ids = encode(smollm2_tokenizer, "Ada Lin works for Pfizer. " * 200, triplet, max_length=64)
    fact = smollm2_tokenizer("\n\nFact: Ada Lin | employed by | Pfizer", add_special_tokens=False)["input_ids"]
    assert len(ids) == 64 and ids[-len(fact) :] == fact


def verifier_dir(tmp_path, head=True, **card):
    """A directory that looks like a verifier run: an adapter (with or without the head's weights) and its card."""
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "verifier"
    path.mkdir()
    (path / "adapter_config.json").write_text("{}")
    weights = {"base_model.model.model.layers.0.lora_A.weight": torch.zeros(2, 2)}
    if head:
        weights["base_model.model.score.modules_to_save.default.weight"] = torch.zeros(1, 2)
    save_file(weights, str(path / "adapter_model.safetensors"))
    fields = {"base": "embedded:SmolLM2-135M-Instruct", "relations": ["employed by"], "threshold": 0.7, **card}
    (path / CARD_FILE).write_text(json.dumps(fields))
    return path


def test_a_verifier_directory_is_checked_before_anything_loads(tmp_path):
    assert read_card(verifier_dir(tmp_path)).threshold == 0.7
    with pytest.raises(ValueError, match="is not a directory"):
        read_card(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match=f"has no {CARD_FILE}: not a verifier run"):
        read_card(tmp_path / "plain")


def test_a_verifier_missing_its_head_is_refused(tmp_path):
    with pytest.raises(ValueError, match="missing its classification head"):
        read_card(verifier_dir(tmp_path, head=False))


def test_a_card_threshold_outside_0_1_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"threshold 1.5 is outside \[0, 1\]"):
        read_card(verifier_dir(tmp_path, threshold=1.5))


def test_a_verifier_of_another_base_or_relation_table_is_refused():
    card = VerifierCard("embedded:SmolLM2-135M-Instruct", ["employed by", "CEO of"], 0.6)
    check_pairing(card, "embedded:SmolLM2-135M-Instruct", ["CEO of", "employed by"])
    with pytest.raises(ValueError, match="trained on base embedded:SmolLM2-135M-Instruct, the writer's base is"):
        check_pairing(card, "embedded:gemma-3-270m", ["employed by", "CEO of"])
    with pytest.raises(ValueError, match="another relation table.*lives in"):
        check_pairing(card, "embedded:SmolLM2-135M-Instruct", ["employed by", "CEO of", "lives in"])


def test_the_gate_config_names_its_verifier_and_keeps_thresholds_in_range():
    with pytest.raises(ValidationError, match="needs write_gate.verifier"):
        WriteGateConfig(signal="verifier")
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        WriteGateConfig(signal="call", threshold=1.2)
    card = VerifierCard("b", [], 0.8)
    assert WriteGateConfig(signal="verifier", verifier="v").operating_threshold(card) == 0.8
    assert WriteGateConfig(signal="verifier", verifier="v", threshold=0.3).operating_threshold(card) == 0.3
    assert WriteGateConfig(signal="call").operating_threshold() == 0.5


def test_onnx_and_vllm_take_a_verifier_gate_but_not_the_writers_own_signals():
    Generation(engine="onnx", write_gate={"signal": "verifier", "verifier": "v"})
    with pytest.raises(ValidationError, match="write_gate.signal=verifier"):
        Generation(engine="onnx", write_gate={"signal": "call"})
    with pytest.raises(ValidationError, match="write_gate.signal=verifier"):
        Generation(engine="vllm", write_gate={"signal": "verifier", "verifier": "v", "score": True})


class FixedVerifier:
    """Scores writes about Pfizer high and the rest low, with a card's threshold."""

    card = VerifierCard("b", [], 0.6)

    def __init__(self):
        self.asked = []

    def score(self, text, triplets):
        self.asked.append((text, list(triplets)))
        return [0.9 if t[2] == "Pfizer" else 0.2 for t in triplets]


def test_the_verifier_gate_holds_back_below_its_card_threshold_without_the_writers_model():
    verifier = FixedVerifier()
    gate = WriteGate(WriteGateConfig(signal="verifier", verifier="v"), None, verifier)
    text = f"{CALL} [MEM_WRITE{{Ada Lin>>employed by>>Moderna}}] Noted."
    store = TripletStore()
    result = one_turn(ScriptedBackend([text]), store, "Ada Lin works for Pfizer.", write_gate=gate)
    kept, held = result.calls
    assert kept.kind == "write" and kept.scores == {"verifier": 0.9}
    assert held.status == "held back: verifier score 0.20 < threshold 0.60"
    assert [f.object for f in store.facts()] == ["Pfizer"]
    assert verifier.asked[0][0] == "Ada Lin works for Pfizer."  # the user's text, not the prompt


def test_a_gate_needing_the_writers_model_is_refused_without_it(tmp_path):
    with pytest.raises(ValueError, match="needs the model in this process"):
        write_gate(WriteGateConfig(signal="call"))
