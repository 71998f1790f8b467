"""learning_loop.review: feedback is kept per namespace and trains nothing until it is accepted."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from learning_loop import review
from learning_loop.review import decide, summary
from memlm.cli import app
from memory_runtime.records import Record, turn_segments
from memory_runtime.serving.feedback import FeedbackLog, pending_path, read_pending
from training.data import load_extra_records


def trajectory(i: int) -> Record:
    segments = turn_segments(f"Person {i} works for Acme.", f"[MEM_WRITE{{Person {i}>>employed by>>Acme}}] Noted.")
    return Record(id=f"feedback-{i}", type="feedback", source="feedback", split="train", segments=segments)


@pytest.fixture
def folder(tmp_path):
    log = FeedbackLog(tmp_path)
    for i, namespace in enumerate(["alice", "alice", "bob", "a/../b c"]):
        log.trajectory(namespace, trajectory(i))
    return tmp_path


def test_each_namespace_has_its_own_pending_file_and_none_trains(folder):
    assert sorted(p.name for p in (folder / "pending").iterdir()) == [
        "a%2F..%2Fb%20c.jsonl",
        "alice.jsonl",
        "bob.jsonl",
    ]
    assert [t.record.id for t in read_pending(folder, "alice")] == ["feedback-0", "feedback-1"]
    assert {row["namespace"] for row in summary(folder)} == {"alice", "bob", "a/../b c"}
    with pytest.raises(ValueError, match="waiting for review"):
        load_extra_records([str(pending_path(folder, "alice"))])


def test_accept_and_reject_move_trajectories_and_nothing_else(folder):
    assert decide(folder, ["feedback-1"], accept=True) == ["feedback-1"]
    assert decide(folder, None, accept=False, namespace="bob") == ["feedback-2"]
    assert [t.record.id for t in read_pending(folder)] == ["feedback-3", "feedback-0"]  # by file, then line
    assert not pending_path(folder, "bob").exists()
    (accepted,) = load_extra_records([str(folder / "accepted.jsonl")])
    assert accepted["id"] == "feedback-1"
    rejected = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    assert [(r["namespace"], r["record"]["id"]) for r in rejected] == [("bob", "feedback-2")]
    with pytest.raises(ValueError, match="not pending: feedback-2, nope"):
        decide(folder, ["feedback-0", "feedback-2", "nope"], accept=True)
    assert len(read_pending(folder)) == 2  # nothing moved


def test_a_server_appending_during_a_review_loses_nothing(folder, monkeypatch):
    log, started = FeedbackLog(folder), threading.Event()
    real_rewrite = review._rewrite

    def rewrite(path, lines):
        writer = threading.Thread(target=lambda: (started.set(), log.trajectory("alice", trajectory(9))))
        writer.start()
        started.wait(5)
        writer.join(0.3)  # blocked on the directory's lock while the pending file is rewritten
        assert writer.is_alive()
        real_rewrite(path, lines)
        rewrite.writer = writer

    monkeypatch.setattr(review, "_rewrite", rewrite)
    decide(folder, ["feedback-0"], accept=True)
    rewrite.writer.join(5)
    assert [t.record.id for t in read_pending(folder, "alice")] == ["feedback-1", "feedback-9"]


def test_a_torn_last_line_is_skipped_and_a_damaged_one_named(folder, caplog):
    path = pending_path(folder, "alice")
    with open(path, "a") as fh:
        fh.write('{"namespace": "alice", "record": {"id": "feedb')  # a crash mid-append
    assert [t.record.id for t in read_pending(folder, "alice")] == ["feedback-0", "feedback-1"]
    assert "torn last line" in caplog.text
    path.write_text(path.read_text() + "\n" + path.read_text())  # now the same damage mid-file
    with pytest.raises(ValueError, match=r"alice\.jsonl:3: not JSON|alice\.jsonl:3: not a pending trajectory"):
        read_pending(folder, "alice")


def test_the_cli_lists_accepts_and_refuses_what_it_cannot_do(folder):
    runner = CliRunner()
    listed = runner.invoke(app, ["feedback", "list", "--dir", str(folder), "--json"])
    assert listed.exit_code == 0 and len(listed.stdout.splitlines()) == 4
    done = runner.invoke(app, ["feedback", "accept", "--dir", str(folder), "--all", "-n", "alice"])
    assert done.exit_code == 0 and "accepted 2" in done.output
    both = runner.invoke(app, ["feedback", "reject", "--dir", str(folder), "--all", "feedback-2"])
    assert both.exit_code == 2 and "not both" in both.output
    missing = runner.invoke(app, ["feedback", "list", "--dir", str(folder / "nothing-here")])
    assert missing.exit_code == 0 and "0 pending" in missing.output
    assert runner.invoke(app, ["feedback", "accept", "--dir", str(folder / "x"), "--all"]).exit_code == 2
