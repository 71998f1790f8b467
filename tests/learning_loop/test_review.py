"""learning_loop.review: feedback is kept per namespace and trains nothing until it is accepted; a bad
rating never reaches SFT's file; only accepted feedback is exported as KTO / DPO data."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from learning_loop import review
from learning_loop.review import decide, export, summary
from memlm.cli import app
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.turn import TurnRequest, turn_messages
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import render_read, render_write
from memory_runtime.records import LabelledTurn, PreferencePair, Record, Segment, prompt_segments, turn_segments
from memory_runtime.serving.feedback import (
    ACCEPTED_LABELLED,
    Exchange,
    Feedback,
    FeedbackLog,
    pending_path,
    read_pending,
)
from training.data import load_extra_records


def trajectory(i: int) -> Record:
    segments = turn_segments(f"Person {i} works for Acme.", f"[MEM_WRITE{{Person {i}>>employed by>>Acme}}] Noted.")
    return Record(id=f"feedback-{i}", type="feedback", source="feedback", split="train", segments=segments)


@pytest.fixture
def folder(tmp_path):
    log = FeedbackLog(tmp_path)
    for i, namespace in enumerate(["alice", "alice", "bob", "a/../b c"]):
        log.trajectory(namespace, trajectory(i), rating="good")
    return tmp_path


FIX = "No, Dorothea works for BMW now."


def rate_and_correct(directory) -> dict[str, str]:
    """A feedback folder as a chat leaves it: alice rates one reply good and another bad, corrects the
    bad one (the model leaves the name partial: its turn is kept as a DPO pair's rejected run) and
    states a fact as a correction the model writes exactly as stored (no pair). Returns kind -> id."""
    read = render_read("Dorothea Altemus", "employed by", None)
    backend = ScriptedBackend(
        [
            [read, " Dorothea Altemus is employed by Pfizer."],
            "Marcus Feld works for Pfizer.",
            render_write("Dorothea", "employed by", "BMW") + " Noted.",
            render_write("Marcus Feld", "investor in", "Siemens") + " Noted.",
        ]
    )
    with TripletStore(":memory:") as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
        feedback, engine = Feedback(store, FeedbackLog(directory)), OneAtATime(lambda _: backend)

        def ask(text: str) -> Exchange:
            return Exchange(text, engine.run_turn(TurnRequest(turn_messages(text), store, namespace="alice")))

        def correct(text: str, exchange: Exchange | None = None):
            return engine.run_sessions([feedback.correction("alice", text, exchange, Generation())])[0]

        good, bad = ask("Where does Dorothea Altemus work?"), ask("Who works for Pfizer?")
        ids = {"good": feedback.rate("alice", good, good=True)["record"]}
        ids["bad"] = feedback.rate("alice", bad, good=False)["record"]
        ids["pair"] = correct(FIX, bad).record.id
        ids["same"] = correct("Marcus Feld invests in Siemens.").record.id
    return ids


@pytest.fixture
def rated(tmp_path):
    return tmp_path, rate_and_correct(tmp_path)


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


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
    assert [t.record.id for t in decide(folder, ["feedback-1"], accept=True)] == ["feedback-1"]
    assert [t.record.id for t in decide(folder, None, accept=False, namespace="bob")] == ["feedback-2"]
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
        writer = threading.Thread(target=lambda: (started.set(), log.trajectory("alice", trajectory(9), rating="good")))
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


def test_accepting_a_bad_rating_never_puts_it_where_sft_reads(rated):
    directory, ids = rated
    assert [row["rating"] for row in summary(directory)] == ["good", "bad", "correction", "correction"]
    decide(directory, None, accept=True)
    sft = [row["id"] for row in load_extra_records([str(directory / "accepted.jsonl")])]
    assert sft == [ids["good"], ids["pair"], ids["same"]]  # the wrong answer is not there
    labelled = lines(directory / ACCEPTED_LABELLED)
    assert [(row["record"]["id"], row["rating"]) for row in labelled] == [
        (ids["good"], "good"),
        (ids["bad"], "bad"),
        (ids["pair"], "correction"),
        (ids["same"], "correction"),
    ]
    with pytest.raises(ValueError, match="not a data_gen Record"):  # and SFT refuses the labelled file
        load_extra_records([str(directory / ACCEPTED_LABELLED)])


def test_kto_export_labels_only_accepted_turns(rated, tmp_path):
    directory, ids = rated
    decide(directory, [ids["good"], ids["bad"], ids["pair"]], accept=True)  # "same" stays pending
    written = export(directory, tmp_path / "kto.jsonl", "kto")
    assert written == {"good": 1, "bad": 1, "correction": 1}
    turns = {t.id: t for t in map(LabelledTurn.model_validate, lines(tmp_path / "kto.jsonl"))}
    assert {i: t.desirable for i, t in turns.items()} == {ids["good"]: True, ids["bad"]: False, ids["pair"]: True}
    assert all(t.source == "feedback" and t.score is None for t in turns.values())
    bad = turns[ids["bad"]].record  # the wrong turn as the model ran it
    assert bad.segments == turn_segments("Who works for Pfizer?", "Marcus Feld works for Pfizer.")
    fixed = turns[ids["pair"]].record  # the correction's chosen turn, on the correction alone
    assert [(s.role, s.text) for s in fixed.segments] == [
        ("user", FIX),
        ("assistant", "[MEM_WRITE{Dorothea Altemus>>employed by>>BMW}] Noted."),
    ]


def test_dpo_export_pairs_each_accepted_correction_with_the_models_own_turn(rated, tmp_path):
    directory, ids = rated
    decide(directory, None, accept=True)
    assert export(directory, tmp_path / "dpo.jsonl", "dpo") == {"correction": 1}  # "same" has no pair
    (pair,) = map(PreferencePair.model_validate, lines(tmp_path / "dpo.jsonl"))
    assert pair.id == ids["pair"] and pair.source == "feedback" and pair.margin is None
    assert (
        prompt_segments(pair.chosen) == prompt_segments(pair.rejected) == [Segment(role="user", text=FIX, train=False)]
    )
    assert pair.rejected.segments[-1].text == "[MEM_WRITE{Dorothea>>employed by>>BMW}] Noted."


def test_export_refuses_what_it_cannot_do_and_writes_nothing(rated, tmp_path):
    directory, ids = rated
    out = tmp_path / "out" / "pairs.jsonl"
    with pytest.raises(ValueError, match=r"nothing accepted to export .*; 4 pending .*memlm feedback accept"):
        export(directory, out, "kto")
    decide(directory, [ids["good"], ids["same"]], accept=True)
    with pytest.raises(ValueError, match=r"no DPO pair to export: none of the 2 accepted .*; 2 pending"):
        export(directory, out, "dpo")
    with pytest.raises(ValueError, match="unknown export format 'sft'"):
        export(directory, out, "sft")
    assert not out.exists()
    out.parent.mkdir()
    out.write_text("mine\n")
    with pytest.raises(FileExistsError, match="pairs.jsonl exists: pass --overwrite"):
        export(directory, out, "kto")
    assert out.read_text() == "mine\n"
    assert export(directory, out, "kto", overwrite=True) == {"good": 1, "correction": 1}
    labelled = directory / ACCEPTED_LABELLED
    first, second = labelled.read_text().splitlines()
    broken = json.loads(second)
    broken["rating"] = "meh"
    labelled.write_text(first + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(ValueError, match=rf"accepted_labelled.jsonl:2: accepted trajectory {ids['same']} is malformed"):
        export(directory, out, "kto", overwrite=True)
    assert len(lines(out)) == 2  # the earlier export is left as it was


def test_pending_lines_written_before_ratings_still_load_review_and_export(tmp_path):
    good = trajectory(0)
    wrote = "[MEM_WRITE{Dorothea Altemus>>employed by>>BMW}] Noted."
    segments = [Segment(role="user", text=FIX, train=False), Segment(role="assistant", text=wrote, train=True)]
    fixed = Record(
        id="feedback-fix",
        type="feedback",
        source="feedback",
        split="train",
        segments=segments,
        gold_triplets=[("Dorothea Altemus", "employed by", "BMW")],
    )
    path = pending_path(tmp_path, "alice")
    path.parent.mkdir(parents=True)
    path.write_text(  # as FeedbackLog wrote them before ratings were kept
        "".join(json.dumps({"namespace": "alice", "record": r.model_dump(mode="json")}) + "\n" for r in (good, fixed))
    )
    assert [(t.rating, t.rejected) for t in read_pending(tmp_path)] == [("good", None), ("correction", None)]
    assert [row["rating"] for row in summary(tmp_path)] == ["good", "correction"]
    decide(tmp_path, None, accept=True)
    assert [row["id"] for row in load_extra_records([str(tmp_path / "accepted.jsonl")])] == [
        "feedback-0",
        "feedback-fix",
    ]
    assert export(tmp_path, tmp_path / "kto.jsonl", "kto") == {"good": 1, "correction": 1}
