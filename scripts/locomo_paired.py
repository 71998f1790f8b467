"""LoCoMo figures of `memlm eval --parts locomo` runs, pooled over training seeds, and B minus A paired by question.

A side is one or more eval output folders joined by '+' (one recipe, several training seeds, in the same order
on both sides), each with a structure after '@' (default triples) and, after '~', how its reader may refuse: the
rows of a run whose reader refused as its greedy answer (locomo.reader_refusal: greedy, the default) as a run
under `likely` or `never` gives them (eval.locomo_reader.answered_as: decoding is greedy). Run:

    python3 scripts/locomo_paired.py runs/locomo-reader2@chunks runs/locomo-reader2@triples
    python3 scripts/locomo_paired.py A@chunks+A-s1@chunks A@triples+A-s1@triples     # two seeds pooled
    python3 scripts/locomo_paired.py A@triples+A-s1@triples B@triples+B-s1@triples    # two recipes, same structure
    python3 scripts/locomo_paired.py A@triples+A-s1@triples A@triples~never+A-s1@triples~never  # a reader that answers
    python3 scripts/locomo_paired.py --frontier A@triples+A-s1@triples    # every refusal setting and lower margin

Each side prints its pooled figures (overall F1 over categories 1-4, per category, adversarial refused, with
the question counts); then B - A over the pooled pairs (a question under one seed on side A against the same
question under the same seed on side B) with a 95% paired bootstrap interval: two sides' own intervals overlap
long before their difference is noise. An interval that holds 0 is no effect.

--frontier reads one side under each refusal setting of the reader and each other_speaker_margin from the
run's down to 1.0 (eval.locomo_qa.refused_unasked: exact, as a lower margin only refuses more questions
unasked): what each operating point gives of overall F1 and of adversarial questions refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

# LoCoMo's refusal rule comes from eval.locomo: run from anywhere, the repository root is importable
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.locomo import ANSWERED_CATEGORIES, CATEGORY_NAMES, refuses  # noqa: E402
from eval.locomo_qa import refused_unasked  # noqa: E402
from eval.locomo_reader import answered_as  # noqa: E402


def parts_of(spec: str) -> tuple[Path, str, str]:
    """A 'DIR@STRUCTURE~REFUSAL' as (folder, structure, refusal): structure default triples, refusal '' (as run)."""
    head, tilde, refusal = spec.rpartition("~")  # the last '~': a folder's name may hold one
    spec, refusal = (head, refusal) if tilde else (spec, "")
    if refusal not in ("", "greedy", "likely", "never"):
        sys.exit(f"{spec}~{refusal}: the reader's refusal is greedy, likely or never")
    folder, _, structure = spec.partition("@")
    return Path(folder), structure or "triples", refusal


def rows_of(spec: str, system: str = "memlm") -> list[dict]:
    """The locomo rows of one 'DIR@STRUCTURE~REFUSAL', in the order they were asked."""
    folder, structure, refusal = parts_of(spec)
    cases = folder / "cases.jsonl"
    if not cases.is_file():
        sys.exit(f"{folder}: no cases.jsonl (an output folder of `memlm eval --parts locomo`)")
    rows = [json.loads(line) for line in cases.read_text().splitlines() if line.strip()]
    found = [r for r in rows if r.get("part") == "locomo" and r.get("structure") == structure]
    # a structure both systems ran (chunks, with locomo.reader=model) is memlm's; one only the base ran, the base's
    mine = [r for r in found if r.get("system") == system] or found
    if not mine:
        sys.exit(f"{folder}: no locomo rows of structure {structure!r}")
    return [answered_as(row, refusal) for row in mine] if refusal else mine


def pooled(side: str) -> list[dict]:
    """A side's rows, seed after seed."""
    return [row for spec in side.split("+") for row in rows_of(spec)]


def figures(rows: list[dict]) -> str:
    """Overall F1 (1-4), per category, and adversarial refused, each with its question count."""
    answered = [r for r in rows if r["category"] in ANSWERED_CATEGORIES]
    adversarial = [r for r in rows if r["category"] == 5]
    parts = [f"overall F1 {_mean([r['f1'] for r in answered]):.1f} ({len(answered)})"]
    for category in ANSWERED_CATEGORIES:
        scores = [r["f1"] for r in answered if r["category"] == category]
        parts.append(f"{CATEGORY_NAMES[category]} {_mean(scores):.1f} ({len(scores)})")
    refused = [float(refuses(r["prediction"])) for r in adversarial]
    parts.append(f"adversarial refused {_mean(refused):.1f} % ({len(refused)})")
    return ", ".join(parts)


def paired(side_a: str, side_b: str, resamples: int = 4000) -> str:
    """B - A in overall F1 (categories 1-4) and adversarial refusals, question by question, with 95% paired
    bootstrap intervals over the pooled pairs."""
    import numpy as np

    a, b = pooled(side_a), pooled(side_b)
    keys_a = [(r["conversation"], r["question"]) for r in a]
    if len(a) != len(b) or keys_a != [(r["conversation"], r["question"]) for r in b]:
        sys.exit("the two sides were not asked the same questions in the same order (same file, --limit, seeds?)")
    rng = np.random.default_rng(0)
    lines = []
    for label, keep, value in (
        ("overall F1 (1-4)", lambda r: r["category"] in ANSWERED_CATEGORIES, lambda r: 100 * r["f1"]),
        ("adversarial refused", lambda r: r["category"] == 5, lambda r: 100.0 * refuses(r["prediction"])),
    ):
        d = np.array([value(y) - value(x) for x, y in zip(a, b) if keep(x)])
        if not d.size:
            continue
        boots = [d[rng.integers(0, d.size, d.size)].mean() for _ in range(resamples)]
        lo, hi = np.percentile(boots, [2.5, 97.5])
        lines.append(f"{label} {d.mean():+.1f} (95% {lo:+.1f} to {hi:+.1f}, {d.size} pairs)")
    return f"{side_b} - {side_a}: " + "; ".join(lines)


def frontier(side: str) -> str:
    """A table: for each refusal setting and each margin from the run's down to 1.0 by 0.1, overall F1 (1-4),
    adversarial refused and answerable questions refused, pooled over the side's seeds."""
    specs = [parts_of(spec) for spec in side.split("+")]
    margins = set()
    for folder, _, _ in specs:
        config = folder / "eval_config.yaml"
        try:
            saved = yaml.safe_load(config.read_text()) if config.is_file() else None
        except yaml.YAMLError as err:
            sys.exit(f"{config}: not YAML ({err})")
        locomo = saved.get("locomo") if isinstance(saved, dict) else None
        margin = locomo.get("other_speaker_margin") if isinstance(locomo, dict) else None
        if margin is None:
            sys.exit(f"{config}: no locomo.other_speaker_margin (an eval run that refused unasked)")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)):
            sys.exit(f"{config}: locomo.other_speaker_margin is {margin!r}, not a number")
        margins.add(float(margin))
    if len(margins) != 1:
        sys.exit(f"{side}: its runs used different margins {sorted(margins)}: pool runs of one setting")
    steps = range(round(margins.pop() * 10), 9, -1)
    lines = [
        "| reader refusal | margin | overall F1 (1-4) | adversarial refused | answerable refused |",
        "|---|---|---|---|---|",
    ]
    for refusal in ("greedy", "likely", "never"):
        rows = pooled("+".join(f"{folder}@{structure}~{refusal}" for folder, structure, _ in specs))
        for step in steps:
            read = [refused_unasked(r, step / 10) for r in rows]
            answered = [r for r in read if r["category"] in ANSWERED_CATEGORIES]
            adversarial = [float(refuses(r["prediction"])) for r in read if r["category"] == 5]
            lines.append(
                f"| {refusal} | {step / 10:.1f} | {_mean([r['f1'] for r in answered]):.1f} ({len(answered)})"
                f" | {_mean(adversarial):.1f} % ({len(adversarial)})"
                f" | {sum(refuses(r['prediction']) for r in answered)} |"
            )
    return "\n".join(lines)


def _mean(values: list[float]) -> float:
    return 100 * sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="DIR[@STRUCTURE][+DIR[@STRUCTURE]...]: side A (seeds joined by '+')")
    parser.add_argument("b", nargs="?", help="side B, the same questions and seeds in the same order")
    parser.add_argument("--frontier", action="store_true", help="side A under every refusal setting and margin")
    args = parser.parse_args()
    if args.frontier:
        print(frontier(args.a))
        return
    if args.b is None:
        parser.error("side B is needed (or --frontier, for side A alone)")
    for side in (args.a, args.b):
        print(f"{side}: {figures(pooled(side))}")
    print(paired(args.a, args.b))


if __name__ == "__main__":
    main()
