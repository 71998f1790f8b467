import json

from data_gen.real import load_real_file
from eval.real_probe import evaluate_real, summarise_real
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend


def test_false_writes_count_only_the_relations_a_passage_was_checked_for(tmp_path):
    path = tmp_path / "kn.jsonl"
    rows = [
        {"text": "Ann Lee founded Acme.", "annotated": ["CEO"], "triples": []},  # checked for CEO facts only
        {"text": "Bo Chan was at Acme.", "annotated": ["CEO"], "triples": []},
        {
            "text": "Cy Park is the CEO of Initech.",
            "annotated": ["CEO"],
            "triples": [{"person": "Cy Park", "relation": "CEO of", "organization": "Initech"}],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    backend = ScriptedBackend(
        [
            ["[MEM_WRITE{Ann Lee>>founder of>>Acme}] Noted."],  # a true fact nobody annotated: not a false write
            ["[MEM_WRITE{Bo Chan>>CEO of>>Acme}] Noted."],  # a CEO fact the passage does not state: false write
            ["[MEM_WRITE{Cy Park>>CEO of>>Initech}] [MEM_WRITE{Cy Park>>founder of>>Initech}] Noted."],
        ]
    )
    system = System("memlm", None, None, backend_factory=lambda: backend)
    cases = evaluate_real(system, load_real_file(path))
    assert [c["false_write"] for c in cases[:2]] == [False, True]
    assert [c["any_write"] for c in cases[:2]] == [True, True]
    assert cases[2]["pairs"]["tp"] == 1 and cases[2]["pairs"]["predicted"] == 1  # the founder write is not scored
    figures = summarise_real(cases)["knowledgenet"]
    assert figures["false_write_rate"] == 0.5 and figures["any_write_rate"] == 1.0
    assert figures["pair"]["precision"] == 0.5 and figures["pair"]["recall"] == 1.0  # Bo Chan's write counts


class _ScoreByObject:
    """A write scorer that trusts writes about Initech and doubts the rest."""

    def call(self, messages, prefix, call_text):
        return (0.9, 0.8) if "Initech" in call_text else (0.3, 0.1)

    def verify(self, text, triplet):
        return 0.95 if triplet[2] == "Initech" else 0.2


def test_scored_writes_give_each_signal_a_curve_and_the_gate_holds_back_what_it_says(tmp_path):
    from memory_runtime.generation.write_gate import WriteGate, WriteGateConfig

    path = tmp_path / "kn.jsonl"
    rows = [
        {"text": "Bo Chan was at Acme.", "annotated": ["CEO"], "triples": []},
        {
            "text": "Cy Park is the CEO of Initech.",
            "annotated": ["CEO"],
            "triples": [{"person": "Cy Park", "relation": "CEO of", "organization": "Initech"}],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    turns = [
        ["[MEM_WRITE{Acme>>CEO of>>Acme}] [MEM_WRITE{Bo Chan>>CEO of>>Acme}] Noted."],  # the store refuses the first
        ["[MEM_WRITE{Cy Park>>CEO of>>Initech}] Noted."],
    ]

    def run(config):
        backend = ScriptedBackend(turns)
        gate = WriteGate(config, _ScoreByObject())
        system = System("memlm", None, None, backend_factory=lambda: backend, write_gate=gate)
        return evaluate_real(system, load_real_file(path))

    scored = run(WriteGateConfig(score=True))
    assert [c["false_write"] for c in scored] == [True, False]  # scoring alone holds nothing back
    assert scored[0]["gated_writes"] == [  # not the write the store refused after scoring
        {
            "triplet": ["Bo Chan", "CEO of", "Acme"],
            "scores": {"call": 0.3, "call_min": 0.1, "verify": 0.2},
            "held": False,
            "counted": True,
        }
    ]
    curves = summarise_real(scored)["all"]["write_gate"]
    assert set(curves) == {"call", "call_min", "verify"}
    at = {p["threshold"]: p for p in curves["verify"]}
    assert at[0.0]["false_write_rate"] == 1.0 and at[0.0]["precision"] == 0.5
    assert at[0.5]["false_write_rate"] == 0.0 and at[0.5]["precision"] == 1.0 and at[0.5]["recall"] == 1.0
    assert at[0.99]["recall"] == 0.0

    gated = run(WriteGateConfig(signal="verify", threshold=0.5))  # what the curve predicted at 0.5, for real
    assert [c["false_write"] for c in gated] == [False, False] and gated[1]["pairs"]["tp"] == 1
    assert gated[0]["writes"] == [] and gated[0]["gated_writes"][0]["held"]
