import json
from collections import Counter

import pytest

from data_gen.real import (
    REAL_SPLIT,
    RealDataMissing,
    default_real_dir,
    detokenize,
    is_mentioned,
    load_knowledgenet,
    load_real,
    write_real_jsonl,
)
from memory_runtime.protocol import parse_calls
from memory_runtime.records import Record
from memory_runtime.store import MemoryConfig

REAL = default_real_dir()
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real-text data not at {REAL}")


@pytest.fixture(scope="module")
def real():
    return load_real(REAL)


@needs_real
def test_every_passage_becomes_an_eval_only_record(real):
    assert Counter(r.source for r in real) == {"redocred": 66, "knowledgenet": 443}
    assert all(r.split == REAL_SPLIT for r in real)
    assert len({r.id for r in real}) == len(real)
    assert sum(len(r.gold_triplets) for r in real if r.source == "knowledgenet") == 457
    assert sum(len(r.gold_triplets) for r in real if r.source == "redocred") == 79  # 80, one P102/P463 duplicate


@needs_real
def test_relations_are_mapped_onto_canonical_ones(real):
    canonical = {spec.name for spec in MemoryConfig.load().relations}
    relations = Counter(t[1] for r in real for t in r.gold_triplets)
    assert set(relations) == {"employed by", "founder of", "CEO of", "member of", "chairperson of"}
    assert set(relations) <= canonical
    founded = next(r for r in real if r.source == "redocred" and any(t[1] == "founder of" for t in r.gold_triplets))
    assert founded.gold_triplets[0][:2] == ("Jesus", "founder of")  # the person is the subject (ORG -> PER flipped)


@needs_real
def test_records_follow_the_write_conventions(real):
    for r in real:
        trained = "".join(s.text for s in r.segments if s.train)
        calls = parse_calls(trained)
        assert [c.fields for c in calls] == [tuple(t) for t in r.gold_triplets], r.id
        assert [s.train for s in r.segments] == [s.role == "assistant" for s in r.segments]
        if r.gold_triplets:
            assert r.type == "write" and r.segments[-1].text == " Noted."
        else:
            assert r.type == "negative" and r.segments[-1].text == "Nothing to store."


@needs_real
def test_no_fact_passages_are_kept(real):
    empty = [r for r in real if not r.gold_triplets]
    assert len(empty) == 148 and all(r.source == "knowledgenet" for r in empty)
    assert all(r.annotated_relations for r in empty)


@needs_real
def test_redocred_is_detokenised_and_names_are_mentioned(real):
    first = real[0].segments[0].text
    assert first.endswith("in 1939.") and " ." not in first
    redocred = [(r, t) for r in real if r.source == "redocred" for t in r.gold_triplets]
    assert all(is_mentioned(r, t) for r, t in redocred)


@needs_real
def test_jsonl_export(real, tmp_path):
    path = tmp_path / "real.jsonl"
    write_real_jsonl(real, path)
    assert [Record.model_validate_json(line) for line in path.read_text().splitlines()] == real


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(RealDataMissing, match="not found at .*nowhere"):
        load_real(tmp_path / "nowhere")
    (tmp_path / "half").mkdir()
    with pytest.raises(RealDataMissing, match="redocred_dev_person_org.jsonl"):
        load_real(tmp_path / "half")


def test_unmapped_relation_is_an_error(tmp_path):
    path = tmp_path / "kn.jsonl"
    row = {
        "text": "Ada runs Babbage Ltd.",
        "annotated": ["CEO"],
        "triples": [{"person": "Ada", "relation": "spouse of", "organization": "Babbage Ltd"}],
    }
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="kn.jsonl:1: unmapped relation 'spouse of'"):
        load_knowledgenet(path)


def test_detokenize():
    assert detokenize("Party ( Labour ) , in 1939 .") == "Party (Labour), in 1939."
    assert detokenize("a wake - up song , Jesus ' words") == "a wake-up song, Jesus ' words"
    assert detokenize('it \'s " quoted " here') == 'it\'s "quoted" here'
