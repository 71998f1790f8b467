import json
from collections import Counter
from pathlib import Path

from data_gen.real import ENV_VAR, load_real_file
from data_gen.real_mapping import PEOPLE_PLACES
from data_gen.schema import Schema
from eval.real_probe import evaluate_real, in_one_order, real_sample, relations_unknown, summarise_real
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.shipped import shipped

REPO = Path(__file__).resolve().parents[2]


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
    system = System("memlm", None, None, decoder=OneAtATime(lambda request: backend))
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
        system = System("memlm", None, None, decoder=OneAtATime(lambda request: backend, gate), write_gate=gate)
        return evaluate_real(system, load_real_file(path))

    scored = run(WriteGateConfig(score=True))
    assert [c["false_write"] for c in scored] == [True, False]  # scoring alone holds nothing back
    assert scored[0]["gated_writes"] == [  # not the write the store refused after scoring
        {
            "triplet": ["Bo Chan", "CEO of", "Acme"],
            "scores": {"call": 0.3, "call_min": 0.1, "verify": 0.2},
            "held": False,
            "counted": True,
            "run": 0,
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


# --------------------------------------------------------------------------- the second schema: people-places-things

PPT_DEV = REPO / "data" / "real" / "redocred_dev_people_places_things.jsonl"


def people_places_memory() -> MemoryConfig:
    """The relation table of configs/schema/people-places-things.yaml, as a model trained on it keeps it."""
    return MemoryConfig.model_validate(
        {"relations": Schema.load(shipped("configs", "schema", "people-places-things.yaml")).table()}
    )


def test_the_second_schema_is_scored_on_subject_object_pairs_with_its_relations(tmp_path):
    path = tmp_path / "redocred_dev_people_places_things.jsonl"  # the name says its mapping
    sibling = {"head": "Ada Lind", "head_type": "PER", "relation": "P3373", "tail": "Per Lind", "tail_type": "PER"}
    born = {"head": "Ada Lind", "head_type": "PER", "relation": "P19", "tail": "Bergen", "tail_type": "LOC"}
    rows = [
        {
            "title": "Ada Lind",
            "sent_id": 0,
            "sentence": "Ada Lind and her brother Per Lind were born in Bergen .",
            "triples": [
                sibling,
                {**sibling, "head": "Per Lind", "tail": "Ada Lind"},
                born,
                {**born, "head": "Per Lind"},
            ],
        },
        {"title": "Ada Lind", "sent_id": 1, "sentence": "Ole Berg visited Oslo .", "triples": []},
        {"title": "Ada Lind", "sent_id": 2, "sentence": "Kari Dahl met Ole Berg .", "triples": []},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    backend = ScriptedBackend(
        [
            # the sibling fact the other way round and by an alias, one of the two births
            ["[MEM_WRITE{Per Lind>>brother of>>Ada Lind}] [MEM_WRITE{Ada Lind>>born in>>Bergen}] Noted."],
            ["[MEM_WRITE{Ole Berg>>lives in>>Oslo}] Noted."],  # a false write
            ["[MEM_WRITE{Kari Dahl>>colleague of>>Ole Berg}] Noted."],  # no Re-DocRED relation: not judged
        ]
    )
    system = System("memlm", None, None, decoder=OneAtATime(lambda request: backend))
    records = load_real_file(path)
    assert relations_unknown(records, None) == sorted(PEOPLE_PLACES.annotated)  # the person-organisation table
    assert relations_unknown(records, people_places_memory()) == []
    cases = evaluate_real(system, records, people_places_memory())
    assert cases[0]["gold"] == [
        ("Ada Lind", "sibling of", "Per Lind"),
        ("Ada Lind", "born in", "Bergen"),
        ("Per Lind", "born in", "Bergen"),
    ]
    assert cases[0]["pairs"]["tp"] == 2 and cases[0]["triplets"]["tp"] == 2  # either order states a sibling fact
    assert [c["false_write"] for c in cases[1:]] == [True, False] and [c["any_write"] for c in cases[1:]] == [
        True,
        True,
    ]
    figures = summarise_real(cases)["redocred"]
    assert figures["pair"]["precision"] == 2 / 3 and figures["pair"]["recall"] == 2 / 3  # Ole Berg's write counts
    assert figures["triplet"]["f1"] == 2 / 3
    assert figures["false_write_rate"] == 0.5 and figures["any_write_rate"] == 1.0


def test_symmetric_facts_are_compared_in_one_order():
    symmetric = {"sibling of"}
    assert in_one_order(
        [("Per Lind", "sibling of", "Ada Lind"), ("Per Lind", "child of", "Ada Lind")], symmetric_relations=symmetric
    ) == [
        ("Ada Lind", "sibling of", "Per Lind"),
        ("Per Lind", "child of", "Ada Lind"),  # not symmetric: as written
    ]


def test_the_default_probe_is_the_first_schema_and_the_second_is_a_file_to_name(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    default = real_sample()
    assert Counter(r.source for r in default) == {"redocred": 183, "knowledgenet": 228}
    assert not {t[1] for r in default for t in r.gold_triplets} & set(PEOPLE_PLACES.annotated)
    second = real_sample(str(PPT_DEV))
    assert Counter(r.type for r in second) == {"negative": 194, "write": 129}
    assert {t[1] for r in second for t in r.gold_triplets} <= set(PEOPLE_PLACES.annotated)


def test_proposals_pool_the_writes_of_k_runs_each_on_an_empty_memory(tmp_path):
    """propose=3: the greedy run, then two sampled ones (temperature 1, their own seeds); their writes pooled
    once each, every write marked with the first run that proposed it."""
    path = tmp_path / "kn.jsonl"
    triple = {"person": "Cy Park", "relation": "CEO of", "organization": "Initech"}
    rows = [{"text": "Cy Park, the CEO of Initech, met Bo Chan of Acme.", "annotated": ["CEO"], "triples": [triple]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    backend = ScriptedBackend(
        [
            ["Nothing to store."],
            ["[MEM_WRITE{Cy Park>>CEO of>>Initech}] Noted."],
            ["[MEM_WRITE{cy park>>CEO of>>Initech}] [MEM_WRITE{Bo Chan>>CEO of>>Acme}] Noted."],
        ]
    )
    requests = []

    def factory(request):
        requests.append(request)
        return backend

    system = System("memlm", None, None, decoder=OneAtATime(factory))
    (case,) = evaluate_real(system, load_real_file(path), propose=3)
    assert [(r.temperature, r.seed) for r in requests][1:] == [(1.0, 1), (1.0, 2)]
    assert requests[0].temperature == system.generation.temperature  # the first run as eval decodes: greedy
    assert case["writes"] == [("Cy Park", "CEO of", "Initech"), ("Bo Chan", "CEO of", "Acme")]  # once each
    assert case["pairs"] == {**case["pairs"], "tp": 1, "predicted": 2, "gold": 1}
    assert case["pairs_proposed"]["recall"] == 1.0
    figures = summarise_real([case])["knowledgenet"]
    assert figures["pair_proposed"]["recall"] == 1.0


def test_an_eval_config_with_the_old_propose_key_names_where_it_went():
    import pytest

    from eval.eval_config import EvalConfig

    with pytest.raises(ValueError, match=r"propose: now generation\.propose .*generation\.propose=4"):
        EvalConfig.model_validate({"propose": 4, "generation": {"model": "m"}})
