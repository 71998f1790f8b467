import json

from data_gen.real import load_real_file
from eval.real_probe import evaluate_real, summarise_real
from eval.systems import System
from memory_runtime.backend import ScriptedBackend


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
