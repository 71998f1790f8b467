"""Episode figures of `memlm eval --parts episodes` runs, pooled over training seeds, and B minus A paired by
question: what a write gate, a verifier or a recipe costs the synthetic episodes.

A side is one or more eval output folders joined by '+' (one recipe, several seeds, in the same order on both
sides). Run:

    python3 scripts/episodes_paired.py runs/none-s0+runs/none-s1 runs/verifier-s0+runs/verifier-s1

Each side prints its pooled figures (episode questions answered right, whole episodes right, the statements'
writes: precision and recall against their gold); then B - A in questions right over the pooled pairs (a
question of an episode under one seed on side A against the same question under the same seed on side B),
with a 95% paired bootstrap interval. An interval that holds 0 is no effect.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def episodes_of(folder: str) -> list[dict]:
    """The episode rows of one eval folder, in the order they were run."""
    cases = Path(folder) / "cases.jsonl"
    if not cases.is_file():
        sys.exit(f"{folder}: no cases.jsonl (an output folder of `memlm eval --parts episodes`)")
    rows = [json.loads(line) for line in cases.read_text().splitlines() if line.strip()]
    found = [r for r in rows if r.get("part") == "episodes" and r.get("system", "memlm") == "memlm"]
    if not found:
        sys.exit(f"{folder}: no episodes of system memlm")
    return found


def seeded(side: str) -> list[tuple[int, dict]]:
    """A side's episodes, each with the index of its folder (its seed), folder after folder."""
    return [(seed, episode) for seed, folder in enumerate(side.split("+")) for episode in episodes_of(folder)]


def questions(episodes: list[tuple[int, dict]]) -> dict[tuple, bool]:
    """(seed index, episode, turn) -> answered right."""
    return {
        (seed, episode["id"], turn["turn"]): bool(turn["correct"])
        for seed, episode in episodes
        for turn in episode["turns"]
        if turn["kind"] == "question"
    }


def figures(episodes: list[tuple[int, dict]]) -> str:
    """Questions right, whole episodes right, and the statements' write precision and recall, pooled."""
    asked = questions(episodes)
    tp = predicted = gold = 0
    for _, episode in episodes:
        for turn in episode["turns"]:
            counts = turn.get("writes_prf")
            if counts:
                tp, predicted, gold = tp + counts["tp"], predicted + counts["predicted"], gold + counts["gold"]
    return (
        f"questions right {_pct(sum(asked.values()), len(asked))} ({len(asked)}), whole episodes "
        f"{_pct(sum(bool(e['correct']) for _, e in episodes), len(episodes))} ({len(episodes)}), writes precision "
        f"{_pct(tp, predicted)} recall {_pct(tp, gold)} ({gold} gold)"
    )


def paired(episodes_a: list[tuple[int, dict]], episodes_b: list[tuple[int, dict]], resamples: int = 4000) -> str:
    """B - A in questions right (points), with a 95% paired bootstrap interval over the pooled pairs."""
    import numpy as np

    a, b = questions(episodes_a), questions(episodes_b)
    keys = [k for k in a if k in b]
    if len(keys) != len(a) or len(keys) != len(b):
        sys.exit(
            f"the two sides were not asked the same questions ({len(a)} and {len(b)}, {len(keys)} shared): "
            "the same data, --limit and seeds in the same order?"
        )
    d = np.array([100.0 * (b[k] - a[k]) for k in keys])
    rng = np.random.default_rng(0)
    boots = [d[rng.integers(0, d.size, d.size)].mean() for _ in range(resamples)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return f"questions right {d.mean():+.1f} (95% {lo:+.1f} to {hi:+.1f}, {d.size} pairs)"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="DIR[+DIR...]: side A (seeds joined by '+')")
    parser.add_argument("b", help="side B, the same episodes and seeds in the same order")
    args = parser.parse_args()
    a, b = seeded(args.a), seeded(args.b)  # each folder read once
    print(f"{args.a}: {figures(a)}")
    print(f"{args.b}: {figures(b)}")
    print(f"{args.b} - {args.a}: {paired(a, b)}")


if __name__ == "__main__":
    main()
