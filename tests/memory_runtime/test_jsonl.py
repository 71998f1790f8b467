"""memory_runtime/jsonl.py: what the one writer writes, the one reader reads back, a log appended line by line."""

from __future__ import annotations

from memory_runtime.jsonl import read_dicts, read_models, write_jsonl
from memory_runtime.records import Record, Segment


def test_models_and_mappings_written_are_read_back_as_they_were(tmp_path):
    said = Segment(role="user", text="Zoë Ek works for Nestlé.", train=False)
    record = Record(id="r1", type="write", segments=[said, Segment(role="assistant", text="Noted.", train=True)])
    path = tmp_path / "deep" / "records.jsonl"  # the folder is made
    assert write_jsonl(path, [record, record]) == 2
    assert read_models(path, Record, "a record") == [record, record]
    assert "Zoë" in path.read_text(encoding="utf-8")  # non-ASCII kept as written
    rows = tmp_path / "rows.jsonl"
    assert write_jsonl(rows, ({"step": i, "loss": 0.5} for i in range(3))) == 3
    assert [row for _, row in read_dicts(rows, "a row")] == [{"step": i, "loss": 0.5} for i in range(3)]


def test_append_adds_after_what_the_file_holds_and_a_plain_write_replaces_it(tmp_path):
    log = tmp_path / "log.jsonl"
    write_jsonl(log, [{"round": 1}], append=True)
    write_jsonl(log, [{"round": 2}], append=True)
    assert [row["round"] for _, row in read_dicts(log, "a round")] == [1, 2]
    write_jsonl(log, [{"round": 3}])
    assert [row["round"] for _, row in read_dicts(log, "a round")] == [3]
