"""memory_runtime.records: the record schema, and the one grouping of segments into messages and turns."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memory_runtime.protocol import Triplet
from memory_runtime.records import Record, Segment, message_groups, messages, turn_segments, turns


def _record(*segments: tuple[str, str, bool]) -> Record:
    return Record(id="r", type="read", segments=[Segment(role=r, text=t, train=x) for r, t, x in segments])


TWO_TURNS = _record(
    ("user", "Ada works for Pfizer.", False),
    ("assistant", "[MEM_WRITE{Ada>>employed by>>Pfizer}]", True),
    ("assistant", " Noted.", True),
    ("user", "Where does Ada work?", False),
    ("assistant", "[MEM_READ{Ada>>employed by>>}:", True),
    ("memory", " {Ada>>employed by>>Pfizer}]", False),
    ("assistant", " Pfizer.", True),
)


def test_assistant_and_memory_segments_are_one_message():
    groups = message_groups(TWO_TURNS)
    assert [(role, len(segs)) for role, segs in groups] == [
        ("user", 1),
        ("assistant", 2),
        ("user", 1),
        ("assistant", 3),
    ]
    assert messages(TWO_TURNS) == [
        {"role": "user", "content": "Ada works for Pfizer."},
        {"role": "assistant", "content": "[MEM_WRITE{Ada>>employed by>>Pfizer}] Noted."},
        {"role": "user", "content": "Where does Ada work?"},
        {"role": "assistant", "content": "[MEM_READ{Ada>>employed by>>}: {Ada>>employed by>>Pfizer}] Pfizer."},
    ]


def test_turns_pair_each_user_message_with_the_answer_after_it():
    assert turns(TWO_TURNS) == [
        ("Ada works for Pfizer.", "[MEM_WRITE{Ada>>employed by>>Pfizer}] Noted."),
        ("Where does Ada work?", "[MEM_READ{Ada>>employed by>>}: {Ada>>employed by>>Pfizer}] Pfizer."),
    ]
    unanswered = _record(("user", "Hi", False), ("assistant", "Hello.", True), ("user", "Bye", False))
    assert turns(unanswered)[-1] == ("Bye", "")


def test_turn_segments_split_two_reads():
    text = "[MEM_READ{A>>r>>}: {A>>r>>O}] [MEM_READ{>>s>>O}: NONE] I don't know."
    segs = turn_segments("q?", text)
    assert [s.role for s in segs] == ["user", "assistant", "memory", "assistant", "memory", "assistant"]
    assert [s.train for s in segs] == [False, True, False, True, False, True]
    assert "".join(s.text for s in segs[1:]) == text


def test_gold_triplets_are_protocol_triplets():
    record = Record.model_validate_json(
        '{"id": "w", "type": "write", "segments": [{"role": "user", "text": "x", "train": false},'
        ' {"role": "assistant", "text": "y", "train": true}], "gold_triplets": [["Ada", "employed by", "Pfizer"]]}'
    )
    (triplet,) = record.gold_triplets
    assert isinstance(triplet, Triplet) and triplet == ("Ada", "employed by", "Pfizer")
    assert Record.model_validate_json(record.model_dump_json()) == record


def test_only_assistant_text_is_trained():
    with pytest.raises(ValidationError, match="cannot be trained"):
        Segment(role="memory", text=" NONE]", train=True)
    with pytest.raises(ValidationError, match="first segment must be the user's"):
        _record(("assistant", "x", True))
