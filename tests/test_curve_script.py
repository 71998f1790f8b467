"""scripts/curve.py: the curve's paired comparison refuses cells scored on different passages."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("curve", Path(__file__).parents[1] / "scripts" / "curve.py")
curve = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(curve)


def _cell(root: Path, name: str, cases: list[tuple[str, int, int, int, bool]], folder: str = "eval-real") -> Path:
    """A cell with a real-text evaluation: (id, tp, predicted, gold, false_write) per passage."""
    out = root / name / folder
    out.mkdir(parents=True)
    real = {"all": {"passages": len(cases)}}
    (out / "metrics.json").write_text(json.dumps({"systems": {"memlm": {"real": real}}}))
    with (out / "cases.jsonl").open("w") as f:
        for id_, tp, pred, gold, false in cases:
            pairs = {"tp": tp, "predicted": pred, "gold": gold}
            row = {"system": "memlm", "part": "real", "id": id_, "has_fact": gold > 0, "false_write": false}
            f.write(json.dumps({**row, "pairs": pairs}) + "\n")
    return root / name


def test_paired_difference_on_the_same_passages(tmp_path):
    a = _cell(tmp_path, "a", [("p1", 0, 1, 1, False), ("p2", 1, 1, 1, False), ("p3", 0, 1, 0, True)])
    b = _cell(tmp_path, "b", [("p1", 1, 1, 1, False), ("p2", 1, 1, 1, False), ("p3", 0, 0, 0, False)])
    line = curve.paired(a, b, resamples=50)
    # A: F1 = 2*1/(3+2) = 0.4; B: 2*2/(2+2) = 1.0; false writes 100% -> 0% on the one no-fact passage
    assert "pair F1 +0.600" in line and "false writes -100.0 points" in line and "1 passages" in line
    assert "nan" not in line  # resamples without a no-fact passage are left out, not averaged as NaN


def test_paired_refuses_cells_scored_on_different_passages(tmp_path):
    a = _cell(tmp_path, "a", [("p1", 1, 1, 1, False)])
    b = _cell(tmp_path, "b", [("p9", 1, 1, 1, False)])
    with pytest.raises(SystemExit, match="not evaluated on the same real passages"):
        curve.paired(a, b)
    with pytest.raises(SystemExit, match="not evaluated on the same real passages"):
        curve.paired(a, tmp_path / "missing")


def test_one_cell_evaluated_twice_is_compared_by_folder_and_reported_as_asked(tmp_path):
    old = [("p1", 0, 1, 1, False), ("p2", 0, 1, 0, True)]
    cell = _cell(tmp_path, "a", old, "eval-real-old")
    _cell(tmp_path, "a", [("p1", 1, 1, 1, False), ("p2", 0, 0, 0, False)], "eval-real-new")
    os.utime(cell / "eval-real-old" / "metrics.json", (1_000_000, 1_000_000))  # the older evaluation
    line = curve.paired(cell / "eval-real-old", cell / "eval-real-new", resamples=50)
    assert "pair F1 +1.000" in line and "false writes -100.0 points" in line
    curve.REAL_EVAL = "eval-real-old"
    try:
        assert [c["pairs"]["tp"] for c in curve._real_cases(cell)] == [0, 0]
    finally:
        curve.REAL_EVAL = None
    assert [c["pairs"]["tp"] for c in curve._real_cases(cell)] == [1, 0]  # else the newest


def _scored_cell(root: Path) -> Path:
    """A cell whose writes were scored: p1 right (verify 0.9), p1 wrong (0.2), p2 a false write (0.4)."""
    out = root / "g" / "eval-real"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps({"systems": {"memlm": {"real": {"all": {"passages": 2}}}}}))

    def write(s, o, score):
        return {"triplet": [s, "employed by", o], "scores": {"verify": score}, "held": False, "counted": True}

    rows = [
        {
            "id": "p1",
            "has_fact": True,
            "gold": [["Ada Lin", "employed by", "Pfizer"]],
            "writes": [["Ada Lin", "employed by", "Pfizer"], ["Pfizer", "employed by", "Ada Lin"]],
            "gated_writes": [write("Ada Lin", "Pfizer", 0.9), write("Pfizer", "Ada Lin", 0.2)],
        },
        {
            "id": "p2",
            "has_fact": False,
            "gold": [],
            "writes": [["Bo Chen", "employed by", "Acme"]],
            "gated_writes": [write("Bo Chen", "Acme", 0.4)],
        },
    ]
    with (out / "cases.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps({"system": "memlm", "part": "real", "false_write": not row["has_fact"], **row}) + "\n")
    return root / "g"


def test_a_gated_cell_keeps_only_the_writes_scoring_at_the_threshold(tmp_path):
    cell = _scored_cell(tmp_path)
    gated = curve._real_cases(Path(f"{cell}@verify:0.5"))
    assert [(c["pairs"]["tp"], c["pairs"]["predicted"], c["pairs"]["gold"]) for c in gated] == [(1, 1, 1), (0, 0, 0)]
    assert [c["false_write"] for c in gated] == [False, False]
    kept_all = curve._real_cases(Path(f"{cell}@verify:0.1"))
    assert kept_all[0]["pairs"]["predicted"] == 2 and kept_all[1]["false_write"]
    line = curve.paired(Path(f"{cell}@verify:0.1"), Path(f"{cell}@verify:0.5"), resamples=20)
    assert "false writes -100.0 points" in line


def test_a_gate_needs_scored_writes(tmp_path):
    cell = _cell(tmp_path, "u", [("p1", 1, 1, 1, False)])
    (cell / "eval-real" / "cases.jsonl").write_text(
        json.dumps(
            {
                "system": "memlm",
                "part": "real",
                "id": "p1",
                "has_fact": True,
                "false_write": False,
                "writes": [["A B", "employed by", "C"]],
                "gold": [],
                "pairs": {},
            }
        )
        + "\n"
    )
    with pytest.raises(SystemExit, match="write_gate.score=true"):
        curve._real_cases(Path(f"{cell}@call:0.5"))


def test_seeds_of_one_recipe_are_pooled_per_passage(tmp_path):
    a1 = _cell(tmp_path, "a1", [("p1", 0, 1, 1, False), ("p2", 0, 1, 0, True)])
    a2 = _cell(tmp_path, "a2", [("p1", 1, 1, 1, False), ("p2", 0, 0, 0, False)])
    b = _cell(tmp_path, "b", [("p1", 1, 1, 1, False), ("p2", 0, 0, 0, False)])
    line = curve.paired(Path(f"{a1}+{a2}"), b, resamples=50)
    # pooled A: tp 1 of 3 predicted, 2 gold -> F1 2/5 = 0.4; B: 1.0. False writes: A 50% (one seed of two)
    assert "pair F1 +0.600" in line and "false writes -50.0 points" in line and "a1 + " in line


def test_a_signals_auc_ranks_right_writes_against_wrong_ones(tmp_path):
    out = tmp_path / "c" / "eval-real"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps({"systems": {"memlm": {"real": {"all": {"passages": 1}}}}}))

    def write(subject: str, call: float, verify: float) -> dict:
        scores = {"call": call, "verify": verify}
        return {"triplet": [subject, "employed by", "Pfizer"], "scores": scores, "held": False, "counted": True}

    writes = [write("Ada Lin", 0.9, 0.2), write("Bo Chen", 0.8, 0.9), write("Pfizer", 0.3, 0.5)]
    writes.append({**write("Cy Dee", 0.0, 0.0), "counted": False})  # another relation: not scored
    case = {"system": "memlm", "part": "real", "id": "p1", "has_fact": True, "false_write": False}
    case |= {"gold": [["Ada Lin", "employed by", "Pfizer"], ["Bo Chen", "employed by", "Pfizer"]]}
    (out / "cases.jsonl").write_text(json.dumps({**case, "gated_writes": writes}) + "\n")
    # call ranks both right writes above the wrong one (1.0); verify one of two (0.5); one passage: no spread
    line = curve.signal_auc(tmp_path / "c", resamples=20)
    assert line.endswith("/c: 2 right, 1 wrong writes; AUC call 1.000 (1.000 to 1.000), verify 0.500 (0.500 to 0.500)")
    # the verifier beside them, two cells pooled: its difference from each signal, paired
    for w in writes:
        w["scores"]["verifier"] = 1.0 if w["triplet"][0] in ("Ada Lin", "Bo Chen") else 0.1
    (out / "cases.jsonl").write_text(json.dumps({**case, "gated_writes": writes}) + "\n")
    line = curve.signal_auc(Path(f"{tmp_path / 'c'}+{tmp_path / 'c'}"), resamples=20)
    assert "4 right, 2 wrong writes" in line and "verifier 1.000" in line
    assert "verifier - call +0.000" in line and "verifier - verify +0.500 (0.500 to 0.500)" in line


def test_turn_cost_gives_p50_and_p95_of_every_turn_and_of_write_turns(tmp_path):
    out = tmp_path / "e"
    out.mkdir()
    (out / "metrics.json").write_text(json.dumps({"systems": {"memlm": {"real": {"all": {"passages": 3}}}}}))
    base = {"system": "memlm", "part": "real", "has_fact": True, "false_write": False, "gold": []}
    rows = [
        {**base, "id": "p1", "writes": [["A", "employed by", "B"]], "wall_s": 1.0},
        {**base, "id": "p2", "writes": [], "wall_s": 0.2},
        {**base, "id": "p3", "writes": [["C", "employed by", "D"]], "wall_s": 3.0},
    ]
    (out / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = curve.turn_cost(out)
    assert line.endswith("3 turns p50 1.000 s, p95 3.000 s; 2 write turns p50 1.000 s, p95 3.000 s")


def test_points_pool_seeds_into_one_operating_point_a_row(tmp_path):
    a1 = _cell(tmp_path, "a1", [("p1", 1, 2, 1, False), ("p2", 0, 1, 0, True)])
    a2 = _cell(tmp_path, "a2", [("p1", 1, 1, 1, False), ("p2", 0, 0, 0, False)])
    table = curve.points([Path(f"{a1}+{a2}")])
    # pooled: tp 2 of 4 predicted, 2 gold -> P 0.5, R 1.0, F1 2/3; false writes on p2: one seed of two
    assert table.splitlines()[2].endswith("| 0.500 | 1.000 | 0.667 | 50.0% (1) | 2 |")
