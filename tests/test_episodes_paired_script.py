"""scripts/episodes_paired.py: seeds pooled question by question, and sides asked different questions refused."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "episodes_paired", Path(__file__).parents[1] / "scripts" / "episodes_paired.py"
)
episodes_paired = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(episodes_paired)


def _run(root: Path, name: str, right: list[list[bool]], stored: int = 1) -> str:
    """An eval folder of episodes, each a statement (`stored` of its one gold fact written) and the questions
    answered right or wrong as `right` says; an injection row beside them."""
    out = root / name
    out.mkdir()
    rows = [{"system": "memlm", "part": "injection", "id": "x"}]
    for i, answers in enumerate(right):
        statement = {
            "turn": 0,
            "kind": "statement",
            "correct": bool(stored),
            "writes_prf": {"tp": stored, "predicted": stored, "gold": 1},
        }
        asked = [{"turn": 1 + j, "kind": "question", "correct": a} for j, a in enumerate(answers)]
        rows.append(
            {
                "system": "memlm",
                "part": "episodes",
                "id": f"e{i}",
                "turns": [statement, *asked],
                "correct": all(answers),
            }
        )
    (out / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(out)


def test_two_seeds_pooled_and_paired(tmp_path):
    a0 = _run(tmp_path, "a0", [[True, True], [True, False]])
    a1 = _run(tmp_path, "a1", [[True, True], [False, False]])
    b0 = _run(tmp_path, "b0", [[True, False], [False, False]], stored=0)
    b1 = _run(tmp_path, "b1", [[True, True], [False, False]], stored=0)
    assert episodes_paired.figures(episodes_paired.seeded(f"{a0}+{a1}")) == (
        "questions right 62.5 % (8), whole episodes 50.0 % (4), writes precision 100.0 % recall 100.0 % (4 gold)"
    )
    assert "writes precision - recall 0.0 % (4 gold)" in episodes_paired.figures(episodes_paired.seeded(f"{b0}+{b1}"))
    line = episodes_paired.paired(
        episodes_paired.seeded(f"{a0}+{a1}"), episodes_paired.seeded(f"{b0}+{b1}"), resamples=200
    )
    assert "questions right -25.0" in line and "8 pairs" in line  # two of eight pairs lost, none gained


def test_sides_asked_different_questions_are_refused(tmp_path):
    a = _run(tmp_path, "a", [[True]])
    b = _run(tmp_path, "b", [[True, True]])
    with pytest.raises(SystemExit, match="not asked the same questions"):
        episodes_paired.paired(episodes_paired.seeded(a), episodes_paired.seeded(b), resamples=10)


def test_a_folder_without_episodes_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no cases.jsonl"):
        episodes_paired.seeded(str(tmp_path))
    (tmp_path / "cases.jsonl").write_text(json.dumps({"part": "injection", "system": "memlm"}) + "\n")
    with pytest.raises(SystemExit, match="no episodes of system memlm"):
        episodes_paired.seeded(str(tmp_path))
