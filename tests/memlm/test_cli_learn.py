"""`memlm feedback list | accept | export`: ratings shown, accepted feedback exported as KTO / DPO data,
each refusal one line naming what is wrong."""

import json

from typer.testing import CliRunner

from memlm.cli import app
from memory_runtime.records import LabelledTurn, PreferencePair
from tests.learning_loop.test_review import rate_and_correct

runner = CliRunner()


def feedback(*args):
    return runner.invoke(app, ["feedback", *[str(a) for a in args]])


def test_list_shows_each_rating_and_export_writes_only_what_was_accepted(tmp_path):
    ids = rate_and_correct(tmp_path / "fb")
    listed = feedback("list", "--dir", tmp_path / "fb", "--json")
    assert [json.loads(line)["rating"] for line in listed.stdout.splitlines()] == [
        "good",
        "bad",
        "correction",
        "correction",
    ]
    table = feedback("list", "--dir", tmp_path / "fb")
    assert table.exit_code == 0 and "rating" in table.stdout and "bad" in table.stdout
    done = feedback("accept", "--dir", tmp_path / "fb", ids["good"], ids["bad"], ids["pair"])
    assert done.exit_code == 0 and "accepted 3 trajectories: 2 good or corrections" in done.output
    kto = feedback("export", "--dir", tmp_path / "fb", "--out", tmp_path / "kto.jsonl", "--format", "kto")
    assert kto.exit_code == 0, kto.output
    assert "wrote 3 LabelledTurn lines" in kto.output and "1 bad, 1 correction, 1 good" in kto.output
    turns = [LabelledTurn.model_validate_json(line) for line in (tmp_path / "kto.jsonl").read_text().splitlines()]
    assert sorted(t.id for t in turns) == sorted([ids["good"], ids["bad"], ids["pair"]])  # not the pending one
    dpo = feedback("export", "--dir", tmp_path / "fb", "--out", tmp_path / "dpo.jsonl", "--format", "dpo")
    assert dpo.exit_code == 0 and "wrote 1 PreferencePair line to" in dpo.output
    (pair,) = [PreferencePair.model_validate_json(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()]
    assert pair.id == ids["pair"]


def test_export_refusals_are_one_line_each(tmp_path):
    ids = rate_and_correct(tmp_path / "fb")
    out = tmp_path / "kto.jsonl"

    def refused(*args):
        r = feedback("export", "--dir", tmp_path / "fb", "--out", out, *args)
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
        return r.output

    assert "nothing accepted to export" in refused("--format", "kto")
    assert "4 pending" in refused("--format", "kto") and "memlm feedback accept" in refused("--format", "dpo")
    assert "unknown export format 'sft'" in refused("--format", "sft")
    feedback("accept", "--dir", tmp_path / "fb", ids["bad"])
    out.write_text("")
    assert "kto.jsonl exists: pass --overwrite" in refused("--format", "kto")
    assert feedback("export", "--dir", tmp_path / "fb", "--out", out, "--format", "kto", "--overwrite").exit_code == 0
    (tmp_path / "fb" / "accepted_labelled.jsonl").write_text('{"namespace": "alice", "record": {"id": "feedback-x"}}\n')
    assert "accepted_labelled.jsonl:1: accepted trajectory feedback-x is malformed" in refused(
        "--format", "kto", "--overwrite"
    )
