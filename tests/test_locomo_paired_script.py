"""scripts/locomo_paired.py: seeds pooled question by question, and sides asked different questions refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "locomo_paired", Path(__file__).parents[1] / "scripts" / "locomo_paired.py"
)
locomo_paired = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(locomo_paired)


def _run(root: Path, name: str, answers: list[tuple[str, int, float, str]]) -> str:
    """An eval folder whose triples answered (question, category, f1, prediction) in order; chunks by the
    base beside them with F1 0."""
    out = root / name
    out.mkdir()
    with (out / "cases.jsonl").open("w") as f:
        for question, category, f1, prediction in answers:
            row = {"part": "locomo", "conversation": "conv-1", "question": question, "category": category}
            f.write(json.dumps({**row, "system": "memlm", "structure": "triples", "f1": f1, "prediction": prediction}))
            f.write(
                "\n"
                + json.dumps({**row, "system": "zero_shot", "structure": "chunks", "f1": 0.0, "prediction": "z"})
                + "\n"
            )
    return str(out)


def test_two_seeds_pooled_and_paired(tmp_path):
    seed0 = _run(tmp_path, "s0", [("q1", 4, 1.0, "x"), ("q2", 2, 0.5, "y"), ("q3", 5, 0.0, "Not mentioned.")])
    seed1 = _run(tmp_path, "s1", [("q1", 4, 0.0, "x"), ("q2", 2, 1.0, "y"), ("q3", 5, 0.0, "Paris")])
    rows = locomo_paired.pooled(f"{seed0}+{seed1}")
    assert len(rows) == 6 and all(r["structure"] == "triples" for r in rows)
    # four answered questions (two a seed): (1 + 0.5 + 0 + 1) / 4; one refusal in two adversarial
    assert locomo_paired.figures(rows).startswith("overall F1 62.5 (4)")
    assert "adversarial refused 50.0 % (2)" in locomo_paired.figures(rows)
    line = locomo_paired.paired(f"{seed0}@chunks+{seed1}@chunks", f"{seed0}+{seed1}", resamples=200)
    assert "overall F1 (1-4) +62.5" in line and "4 pairs" in line and "adversarial refused +50.0" in line


def test_sides_asked_different_questions_are_refused(tmp_path):
    a = _run(tmp_path, "a", [("q1", 4, 1.0, "x")])
    b = _run(tmp_path, "b", [("q2", 4, 1.0, "x")])
    with pytest.raises(SystemExit, match="not asked the same questions"):
        locomo_paired.paired(a, b, resamples=10)


def test_a_folder_without_locomo_rows_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no cases.jsonl"):
        locomo_paired.pooled(str(tmp_path))
    seed = _run(tmp_path, "s0", [("q1", 4, 1.0, "x")])
    with pytest.raises(SystemExit, match="no locomo rows of structure 'mixed'"):
        locomo_paired.pooled(f"{seed}@mixed")


def test_a_greedy_run_is_read_as_a_reader_that_may_not_refuse(tmp_path):
    """'~never' answers each reader refusal with what the reader said instead; '~likely' only those whose
    refusal was at most even odds; a refusal given without the reader (no `unrefused`) stays."""
    out = tmp_path / "run"
    out.mkdir()
    base = {"part": "locomo", "conversation": "conv-1", "system": "memlm", "structure": "triples"}
    rows = [
        {"question": "q1", "category": 4, "f1": 0.0, "prediction": "Not mentioned.", "refusal_p": 0.9},
        {"question": "q2", "category": 4, "f1": 0.0, "prediction": "Not mentioned.", "refusal_p": 0.4},
        {"question": "q3", "category": 5, "f1": 1.0, "prediction": "Not mentioned.", "refusal_p": None},
    ]
    unrefused = [("Boston", 1.0), ("Paris", 0.5), (None, None)]
    with (out / "cases.jsonl").open("w") as f:
        for row, (text, f1) in zip(rows, unrefused):
            f.write(json.dumps({**base, **row, "unrefused": text, "unrefused_f1": f1}) + "\n")
    never = locomo_paired.pooled(f"{out}~never")
    assert [r["prediction"] for r in never] == ["Boston", "Paris", "Not mentioned."]
    likely = locomo_paired.pooled(f"{out}@triples~likely")
    assert [r["f1"] for r in likely] == [0.0, 0.5, 1.0]
    line = locomo_paired.paired(str(out), f"{out}~never", resamples=50)
    assert "overall F1 (1-4) +75.0" in line and "adversarial refused +0.0" in line
    with pytest.raises(SystemExit, match="greedy, likely or never"):
        locomo_paired.pooled(f"{out}~sometimes")


def test_the_frontier_reads_a_run_under_each_refusal_and_lower_margin(tmp_path):
    """A lower margin refuses, unasked, the questions whose margin exceeds it (an answerable one then scores
    "Not mentioned." against its gold, an adversarial one is right); a margin above the run's is not read."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "eval_config.yaml").write_text("locomo:\n  other_speaker_margin: 1.2\n")
    base = {"part": "locomo", "conversation": "conv-1", "system": "memlm", "structure": "triples", "gold": "Boston"}
    rows = [  # question, category, f1, prediction, margin, refusal_p, unrefused
        ("q1", 4, 1.0, "Boston", 1.15, 0.1, None),
        ("q2", 5, 0.0, "Paris", 1.05, 0.2, None),
        ("q3", 5, 1.0, "Not mentioned.", 3.0, None, None),
        ("q4", 4, 0.0, "Not mentioned.", 0.5, 0.3, "Boston"),
    ]
    with (out / "cases.jsonl").open("w") as f:
        for question, category, f1, prediction, margin, p, unrefused in rows:
            row = {"question": question, "category": category, "f1": f1, "prediction": prediction}
            extra = {"other_speaker_margin": margin, "refusal_p": p, "unrefused": unrefused}
            f.write(json.dumps({**base, **row, **extra, "unrefused_f1": unrefused and 1.0}) + "\n")
    table = locomo_paired.frontier(f"{out}@triples").splitlines()
    assert len(table) == 2 + 3 * 3  # header, then greedy, likely, never at 1.2, 1.1, 1.0
    assert table[2] == "| greedy | 1.2 | 50.0 (2) | 50.0 % (2) | 1 |"
    assert table[3] == "| greedy | 1.1 | 0.0 (2) | 50.0 % (2) | 2 |"  # q1 refused unasked
    assert table[4] == "| greedy | 1.0 | 0.0 (2) | 100.0 % (2) | 2 |"  # q2 too
    assert table[-3] == "| never | 1.2 | 100.0 (2) | 50.0 % (2) | 0 |"  # q4 answered
    other = tmp_path / "other"
    other.mkdir()
    (other / "cases.jsonl").write_text((out / "cases.jsonl").read_text())
    (other / "eval_config.yaml").write_text("locomo:\n  other_speaker_margin: 1.5\n")
    with pytest.raises(SystemExit, match="different margins"):
        locomo_paired.frontier(f"{out}+{other}")
    for saved in ("locomo:\n  other_speaker_margin: null\n", "- not a config\n"):
        (other / "eval_config.yaml").write_text(saved)
        with pytest.raises(SystemExit, match="no locomo.other_speaker_margin"):
            locomo_paired.frontier(str(other))
    for saved, says in (
        ("locomo: [unclosed\n", "not YAML"),
        ("locomo:\n  other_speaker_margin: high\n", "not a number"),
    ):
        (other / "eval_config.yaml").write_text(saved)
        with pytest.raises(SystemExit, match=says):
            locomo_paired.frontier(str(other))
