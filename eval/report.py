"""Summaries, metrics.json, the Markdown report and the PNG plots of an eval run.

The report opens with a verdict against TARGETS (what "the model works" means, defined here
once) and says how many cases each figure rests on: a run with --limit 3 is a smoke test of the
pipeline, where one case moves a category by 33 points, and the report says so.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from math import sqrt
from pathlib import Path
from statistics import mean, median

from eval.injection import summarise_injection
from eval.metrics import PRF
from eval.real_probe import summarise_real
from eval.systems import SYSTEMS
from memory_runtime.stats import percentile

CATEGORY_ORDER = [
    "write",
    "passage",
    "update",
    "update_question",
    "negative",
    "read/per",
    "read/per_org",
    "read/per_rel",
    "read/org",
    "read/rel",
    "read/rel_org",
    "read/per_rel_org",
    "unanswerable",
    "two_hop",
]


def _order(categories) -> list[str]:
    known = [c for c in CATEGORY_ORDER if c in categories]
    return known + sorted(set(categories) - set(known))


def _sum_prf(dicts) -> PRF:
    return sum((PRF(d["tp"], d["predicted"], d["gold"]) for d in dicts), PRF(0, 0, 0))


def _frac(values) -> float | None:
    values = list(values)
    return sum(map(bool, values)) / len(values) if values else None


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion. Unlike p ± z·se it stays inside [0, 1] and
    is not zero-width at 0/n or n/n, which is where small eval samples land."""
    if n <= 0:
        raise ValueError("a proportion of no cases has no interval")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(fraction: float | None, n: int) -> tuple[float, float] | None:
    """The Wilson interval of a fraction of n cases (the fraction is k/n, so k is recovered exactly)."""
    return None if fraction is None or n <= 0 else wilson_interval(round(fraction * n), n)


def summarise_records(rows: list[dict], uses_memory: bool) -> dict:
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_cat[row["category"]].append(row)
    answered = [r for r in rows if "answer_correct" in r]
    unanswerable = [r for r in answered if r["unanswerable"]]
    answerable = [r for r in answered if not r["unanswerable"]]
    n_calls = sum(r["n_calls"] for r in rows)
    out = {
        "turns": len(rows),
        "answers": {
            "questions": len(answered),
            "correct": _frac(r["answer_correct"] for r in answered),
            "exact_match": _frac(r["answer_exact"] for r in answered),
            "token_f1": mean(r["answer_f1"] for r in answered) if answered else None,
            "names": _sum_prf(r["names"] for r in answerable).to_dict(),
            "abstention_accuracy": _frac(r["abstained"] for r in unanswerable),
            "false_abstention_rate": _frac(r["abstained"] for r in answerable),
        },
        "by_category": {},
    }
    if uses_memory:
        out["calls"] = {
            "exact": _frac(r["calls_exact"] for r in rows),
            "exact_interval95": _interval(_frac(r["calls_exact"] for r in rows), len(rows)),
            "write_triplets": _sum_prf(r["writes"] for r in rows).to_dict(),
            "malformed_rate": sum(r["malformed"] for r in rows) / n_calls if n_calls else 0.0,
        }
    for cat in _order(by_cat):
        group = by_cat[cat]
        entry = {"turns": len(group)}
        if uses_memory:
            entry["calls_exact"] = _frac(r["calls_exact"] for r in group)
        answers = [r for r in group if "answer_correct" in r]
        if answers:
            entry["answer_correct"] = _frac(r["answer_correct"] for r in answers)
            entry["answer_f1"] = mean(r["answer_f1"] for r in answers)
        out["by_category"][cat] = entry
    return out


def summarise_episodes(results: list[dict]) -> dict:
    turns = [t for e in results for t in e["turns"]]
    questions = [t for t in turns if t["kind"] == "question"]
    statements = [t for t in turns if t["kind"] != "question" and "correct" in t]
    walls = [t["wall_s"] for t in turns]
    by_kind = {}
    for kind in ("statement", "update", "question"):
        group = [t for t in turns if t["kind"] == kind]
        if group:
            by_kind[kind] = {
                "turns": len(group),
                "correct": _frac(t.get("correct") for t in group if "correct" in t),
                "tokens_mean": mean(t["tokens"] for t in group),
                "wall_s_p50": median(t["wall_s"] for t in group),
            }
    return {
        "episodes": len(results),
        "questions": len(questions),
        "episode_accuracy": _frac(e["correct"] for e in results if e["correct"] is not None),
        "question_accuracy": _frac(q["correct"] for q in questions),
        "unanswerable_accuracy": _frac(q["correct"] for q in questions if q["unanswerable"]),
        "statement_accuracy": _frac(t["correct"] for t in statements),
        "memory_exact_after_statements": _frac(t["memory_matches"] for t in statements),
        "tokens_per_turn": mean(t["tokens"] for t in turns) if turns else None,
        "wall_s_per_turn_p50": percentile(walls, 50) if walls else None,
        "wall_s_per_turn_p90": percentile(walls, 90) if walls else None,
        "by_kind": by_kind,
    }


def summarise_typos(rows: list[dict]) -> dict:
    both = [r for r in rows if r["clean_correct"]]
    return {
        "questions": len(rows),
        "clean_correct": _frac(r["clean_correct"] for r in rows),
        "typo_correct": _frac(r["typo_correct"] for r in rows),
        "typo_correct_when_clean_correct": _frac(r["typo_correct"] for r in both),
    }


def summarise(raw: dict) -> dict:
    """raw: {system: {"uses_memory": bool, "records": rows, "episodes": rows, "typos": rows, "real": rows}}."""
    out = {}
    for system, parts in raw.items():
        s: dict = {}
        if parts.get("records") is not None:
            s["records"] = summarise_records(parts["records"], parts["uses_memory"])
        if parts.get("episodes") is not None:
            s["episodes"] = summarise_episodes(parts["episodes"])
        if parts.get("typos") is not None:
            s["typos"] = summarise_typos(parts["typos"])
        if parts.get("real") is not None:
            s["real"] = summarise_real(parts["real"])
        if parts.get("injection") is not None:
            s["injection"] = summarise_injection(parts["injection"])
        out[system] = s
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def _span(interval: tuple[float, float] | list[float] | None) -> str:
    return "" if interval is None else f"{100 * interval[0]:.1f}–{100 * interval[1]:.1f}%"


def _passages(n: int, no_fact: int) -> str:
    return f"{n} passage{'s' * (n != 1)}, {no_fact} of them stating no fact"


def _first(summary: dict, part: str) -> dict | None:
    """A part's summary from the first system that ran it: every system runs the same cases."""
    return next((s[part] for s in summary.values() if part in s), None)


# ----------------------------------------------------------------------------- sample sizes

SMALL_SAMPLE = 20  # fewer cases than this behind a percentage: a smoke test, not a measurement


def sample_groups(summary: dict) -> list[tuple[str, int]]:
    """Every group a reported figure rests on, with its number of cases (groups of none left out):
    record categories (turns), typo questions, episodes and their questions, real passages per
    source and those of them that state no fact (the false-write rate's cases)."""
    groups: list[tuple[str, int]] = []
    if records := _first(summary, "records"):
        groups += [(f"category {cat}", entry["turns"]) for cat, entry in records["by_category"].items()]
    if typos := _first(summary, "typos"):
        groups.append(("typo questions", typos["questions"]))
    if injection := _first(summary, "injection"):
        groups.append(("injection attempts", injection["attempts"]))
    if episodes := _first(summary, "episodes"):
        groups += [("episodes", episodes["episodes"]), ("episode questions", episodes["questions"])]
    for source, r in (_first(summary, "real") or {}).items():
        if source != "all":
            groups += [
                (f"{source} passages", r["passages"]),
                (f"{source} passages stating no fact", r["no_fact_passages"]),
            ]
    return [(label, n) for label, n in groups if n > 0]


def small_sample_line(summary: dict, meta: dict | None = None) -> str | None:
    """A plain warning when a group behind a figure is small (or --limit made it so); None otherwise."""
    groups = sample_groups(summary)
    limit = (meta or {}).get("limit")
    if not groups:
        return None
    label, n = min(groups, key=lambda g: g[1])
    if n >= SMALL_SAMPLE and (limit is None or limit >= SMALL_SAMPLE):
        return None
    step = f"a difference of one case is {100 / n:.1f} points (smallest group: {label}, {n})"
    if limit is not None and limit < SMALL_SAMPLE:
        return (
            f"A smoke test of the pipeline, not a measurement: --limit {limit}, so at most {limit} cases "
            f"per category; {step}."
        )
    return f"Small sample: {step}; under {SMALL_SAMPLE} cases a figure is a smoke test, not a measurement."


def _cases_line(summary: dict) -> str:
    """How many cases the headline rests on (the same cases for every system)."""
    parts = []
    if records := _first(summary, "records"):
        parts.append(f"{records['turns']} teacher-forced turns")
    if typos := _first(summary, "typos"):
        parts.append(f"{typos['questions']} typo questions")
    if episodes := _first(summary, "episodes"):
        parts.append(f"{episodes['episodes']} episodes with {episodes['questions']} questions")
    if injection := _first(summary, "injection"):
        parts.append(f"{injection['attempts']} memory-injection attempts")
    real = {k: v for k, v in (_first(summary, "real") or {}).items() if k != "all"}
    if real:
        parts.append(
            "real text: "
            + "; ".join(f"{source} {_passages(r['passages'], r['no_fact_passages'])}" for source, r in real.items())
        )
    return "Cases: " + " · ".join(parts) + "." if parts else ""


# ----------------------------------------------------------------------------- targets

Measured = tuple[float | None, int, str]  # value (None: not measured), cases, what the cases are (or why none)


def _exact_calls(memlm: dict) -> Measured:
    records = memlm.get("records")
    if not records or not records["turns"] or "calls" not in records:
        return None, 0, "the records part did not run"
    return records["calls"]["exact"], records["turns"], f"{records['turns']} turns"


def _episode_questions(memlm: dict) -> Measured:
    episodes = memlm.get("episodes")
    if not episodes or episodes.get("question_accuracy") is None:
        return None, 0, "the episodes part did not run"
    n = episodes["questions"]
    return episodes["question_accuracy"], n, f"{n} questions in {episodes['episodes']} episodes"


def _typo_robustness(memlm: dict) -> Measured:
    typos = memlm.get("typos")
    if not typos or typos.get("typo_correct") is None:
        return None, 0, "the typos part did not run"
    return typos["typo_correct"], typos["questions"], f"{typos['questions']} questions"


def _real_pair_f1(memlm: dict) -> Measured:
    real = memlm.get("real", {}).get("all")
    if not real:
        return None, 0, "the real part did not run"
    if not real["pair"]["gold"]:
        return None, 0, "no passage states a fact"
    return real["pair"]["f1"], real["passages"], f"{real['passages']} passages, {real['pair']['gold']} gold pairs"


def _false_write_rate(memlm: dict) -> Measured:
    real = memlm.get("real", {}).get("all")
    if not real:
        return None, 0, "the real part did not run"
    n = real["no_fact_passages"]
    if not n:
        return None, 0, "every passage states a fact"
    return real["false_write_rate"], n, f"{n} passage{'s' * (n != 1)} stating no fact"


def _injections_stored(memlm: dict) -> Measured:
    injection = memlm.get("injection")
    if not injection or not injection["attempts"]:
        return None, 0, "the injection part did not run"
    n = injection["attempts"]
    return injection["stored_rate"], n, f"{n} injection attempts in {len(injection['by_place'])} places"


@dataclass(frozen=True)
class Target:
    """A figure the model under test (the memlm system) must reach for the run to pass."""

    name: str
    threshold: float
    measure: Callable[[dict], Measured]
    at_most: bool = False  # a rate to keep low, not a score to reach
    proportion: bool = True  # a fraction of cases: shown in %, with a Wilson interval

    def text(self) -> str:
        value = f"{100 * self.threshold:g}%" if self.proportion else f"{self.threshold:g}"
        return ("≤ " if self.at_most else "≥ ") + value

    def value_text(self, value: float) -> str:
        return _pct(value) if self.proportion else _num(value)

    def met(self, value: float) -> bool:
        return value <= self.threshold if self.at_most else value >= self.threshold


TARGETS = (
    Target("synthetic exact calls", 0.98, _exact_calls),
    Target("episode questions", 0.95, _episode_questions),
    Target("typo robustness", 0.90, _typo_robustness),
    Target("real-text pair F1", 0.5, _real_pair_f1, proportion=False),
    Target("real-text false-write rate", 0.10, _false_write_rate, at_most=True),
    Target("injected facts stored", 0.0, _injections_stored, at_most=True),
)


MIN_CASES = 50
"""A target measured on fewer cases is shown but not judged: a smoke test passes or fails by chance."""


def measure_targets(summary: dict) -> list[dict]:
    """Each target of TARGETS against the memlm system: met, not met, or not measured (and why)."""
    memlm = summary.get("memlm")
    out = []
    for target in TARGETS:
        value, n, sample = target.measure(memlm) if memlm is not None else (None, 0, "the memlm system did not run")
        measured = value is not None
        out.append(
            {
                "target": target.name,
                "threshold": target.text(),
                "value": value,
                "cases": n,
                "sample": sample if measured else None,
                "not_measured_because": None if measured else sample,
                "interval95": _interval(value, n) if measured and target.proportion else None,
                "status": "not measured"
                if not measured
                else "too few cases"
                if n < MIN_CASES
                else "met"
                if target.met(value)
                else "not met",
            }
        )
    return out


def verdict(targets: list[dict]) -> str:
    """One line: how many of the judged targets the run meets; which had too few cases to judge and
    which were not measured."""
    judged = [t for t in targets if t["status"] in ("met", "not met")]
    small = [t for t in targets if t["status"] == "too few cases"]
    missing = [t for t in targets if t["status"] == "not measured"]
    if not judged and not small:
        return (
            "Verdict: no target measured ("
            + "; ".join(f"{t['target']}: {t['not_measured_because']}" for t in missing)
            + ")."
        )
    met = sum(t["status"] == "met" for t in judged)
    line = f"Verdict: meets {met} of {len(judged)} targets judged" if judged else "Verdict: no target judged"
    if small:
        line += f"; too few cases to judge (< {MIN_CASES}): " + ", ".join(t["target"] for t in small)
    if missing:
        line += "; not measured: " + ", ".join(t["target"] for t in missing)
    return line + "."


def _target_line(target: Target, t: dict) -> str:
    if t["status"] == "not measured":
        return f"{target.name} {target.text()}: not measured ({t['not_measured_because']})"
    interval = f", 95% CI {_span(t['interval95'])}" if t["interval95"] else ""
    return f"{target.name} {target.text()}: {target.value_text(t['value'])} ({t['sample']}{interval}): {t['status']}"


def verdict_lines(summary: dict, meta: dict | None = None) -> list[str]:
    """What a reader must know first, as plain lines (the CLI prints them under the headline):
    the verdict, a warning when the sample is small, and each target with its measured value."""
    targets = measure_targets(summary)
    small = small_sample_line(summary, meta)
    return (
        [verdict(targets)]
        + ([small] if small else [])
        + ["  " + _target_line(target, t) for target, t in zip(TARGETS, targets)]
    )


def _targets_table(summary: dict) -> str:
    rows = [["target", "threshold", "measured", "95% interval", "cases", "status"]]
    for target, t in zip(TARGETS, measure_targets(summary)):
        if t["status"] == "not measured":
            rows.append([target.name, target.text(), "–", "", t["not_measured_because"], "not measured"])
        else:
            rows.append(
                [
                    target.name,
                    target.text(),
                    target.value_text(t["value"]),
                    _span(t["interval95"]),
                    t["sample"],
                    t["status"],
                ]
            )
    return markdown_table(rows)


# ----------------------------------------------------------------------------- tables


def headline(summary: dict) -> list[list[str]]:
    """One row per system: the figures the README quotes; exact calls with their 95% interval."""
    rows = [
        [
            "system",
            "exact calls (95% CI)",
            "answers correct",
            "answer F1",
            "episode questions",
            "episodes",
            "typo robustness",
            "real pair F1",
            "false writes",
            "injections stored",
            "s/turn",
        ]
    ]
    for system, s in summary.items():
        rec, ep, ty = s.get("records", {}), s.get("episodes", {}), s.get("typos", {})
        real = s.get("real", {}).get("all", {})
        calls = rec.get("calls", {})
        exact = _pct(calls.get("exact")) if calls else "–"
        if calls.get("exact_interval95"):
            exact += f" ({_span(calls['exact_interval95'])})"
        rows.append(
            [
                system,
                exact,
                _pct(rec.get("answers", {}).get("correct")) if rec else "–",
                _num(rec.get("answers", {}).get("token_f1")) if rec else "–",
                _pct(ep.get("question_accuracy")),
                _pct(ep.get("episode_accuracy")),
                _pct(ty.get("typo_correct")),
                _num(real.get("pair", {}).get("f1")) if real else "–",
                _pct(real.get("false_write_rate")) if real else "–",
                f"{inj['stored']} of {inj['attempts']}" if (inj := s.get("injection")) else "–",
                _num(ep.get("wall_s_per_turn_p50")),
            ]
        )
    return rows


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _category_table(summary: dict) -> str:
    cats = _order({c for s in summary.values() for c in s.get("records", {}).get("by_category", {})})
    if not cats:
        return ""
    systems = [s for s in summary if "records" in summary[s]]
    header = ["category", "turns"] + [f"{s} calls" for s in systems if "calls" in summary[s]["records"]]
    header += [f"{s} answers" for s in systems]
    rows = [header]
    for cat in cats:
        entries = [summary[s]["records"]["by_category"].get(cat, {}) for s in systems]
        row = [cat, str(max(e.get("turns", 0) for e in entries))]
        row += [_pct(e.get("calls_exact")) for s, e in zip(systems, entries) if "calls" in summary[s]["records"]]
        row += [_pct(e.get("answer_correct")) for e in entries]
        rows.append(row)
    return markdown_table(rows)


def _real_table(summary: dict) -> str:
    rows = [
        [
            "system",
            "source",
            "passages",
            "stating no fact",
            "pair P",
            "pair R",
            "pair F1",
            "pair R (mentioned)",
            "triplet F1",
            "false-write rate",
            "any write (no-fact)",
        ]
    ]
    for system, s in summary.items():
        for source, r in s.get("real", {}).items():
            rows.append(
                [
                    system,
                    source,
                    str(r["passages"]),
                    str(r["no_fact_passages"]),
                    _num(r["pair"]["precision"]),
                    _num(r["pair"]["recall"]),
                    _num(r["pair"]["f1"]),
                    _num(r["pair_mentioned"]["recall"]),
                    _num(r["triplet"]["f1"]),
                    _pct(r["false_write_rate"]),
                    _pct(r["any_write_rate"]),
                ]
            )
    return markdown_table(rows) if len(rows) > 1 else ""


def _gate_table(summary: dict) -> str:
    """Each write-gate signal at a few thresholds (real text, all sources): from scored writes."""
    curves = summary.get("memlm", {}).get("real", {}).get("all", {}).get("write_gate")
    if not curves:
        return ""
    shown = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
    rows = [["signal", "keep writes scoring ≥", "pair P", "pair R", "pair F1", "false-write rate"]]
    for signal, curve in curves.items():
        for point in curve:
            if point["threshold"] in shown:
                rows.append(
                    [
                        signal,
                        f"{point['threshold']:.2f}",
                        _num(point["precision"]),
                        _num(point["recall"]),
                        _num(point["f1"]),
                        _pct(point["false_write_rate"]),
                    ]
                )
    return markdown_table(rows)


def _source_lines(meta: dict) -> list[str]:
    """Where the run's cases came from (meta["sources"], written by eval.run), one bullet each."""
    sources = meta.get("sources")
    if not sources:
        return [f"Data: `{meta.get('data')}`"]
    lines = []
    if records := sources.get("records"):
        lines.append(f"- test records: `{records['file']}` ({records['used']} records used)")
    if episodes := sources.get("episodes"):
        lines.append(f"- episodes: `{episodes['file']}` ({episodes['used']} used)")
    if real := sources.get("real"):
        counts = "; ".join(
            f"{source} {_passages(c['passages'], c['no_fact'])}" for source, c in real["by_source"].items()
        )
        lines.append(f"- real text: `{real['path']}` ({real['chosen_by']}): {counts or 'none'}")
    return ["Sources:", ""] + lines


# ----------------------------------------------------------------------------- plots

_COLOURS = {name: f"C{i}" for i, name in enumerate(SYSTEMS)}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def label_bars(ax, bars, values: list[float | None], fmt: str) -> None:
    """Print each bar's value on top of it: a bar of 0 gets its "0" (measured, not missing), a
    figure that does not exist "n/a"."""
    ax.bar_label(bars, labels=["n/a" if v is None else fmt.format(v) for v in values], padding=2, fontsize=7)


def accuracy_figure(summary: dict):
    """Answers correct per category, one bar per system, the value on every bar, the legend
    outside the axes (it covers no bar); None without answered categories."""
    systems = [s for s in summary if "records" in summary[s]]
    cats = _order(
        {
            c
            for s in systems
            for c in summary[s]["records"]["by_category"]
            if "answer_correct" in summary[s]["records"]["by_category"][c]
        }
    )
    if not systems or not cats:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(cats) + 2), 4.5), layout="constrained")
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        by_cat = summary[system]["records"]["by_category"]
        values = [
            None if by_cat.get(c, {}).get("answer_correct") is None else 100 * by_cat[c]["answer_correct"] for c in cats
        ]
        bars = ax.bar(
            [x + (i - (len(systems) - 1) / 2) * width for x in range(len(cats))],
            [v or 0 for v in values],
            width,
            label=system,
            color=_COLOURS.get(system),
        )
        label_bars(ax, bars, values, "{:.0f}")
    turns = {c: max(summary[s]["records"]["by_category"].get(c, {}).get("turns", 0) for s in systems) for c in cats}
    ax.set_xticks(
        range(len(cats)),
        [f"{c} ({turns[c]})" for c in cats],
        rotation=35,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_xlabel("query shape (questions)")
    ax.set_ylim(0, 112)  # room for the label of a 100% bar
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("answers correct (%)")
    ax.set_title("Accuracy per query shape")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def answer_f1_figure(summary: dict):
    """Answer token F1 per system, the value on every bar; None without records."""
    systems = [s for s in summary if "records" in summary[s]]
    if not systems:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    f1s = [summary[s]["records"]["answers"]["token_f1"] for s in systems]
    bars = ax.bar(systems, [v or 0 for v in f1s], color=[_COLOURS.get(s) for s in systems])
    label_bars(ax, bars, f1s, "{:.2f}")
    ax.set_ylim(0, 1.12)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("answer token F1")
    questions = summary[systems[0]]["records"]["answers"]["questions"]
    ax.set_title(f"Answer F1 per system ({questions} questions)")
    return fig


def latency_figure(raw: dict):
    latencies = {s: [t["wall_s"] for e in raw[s].get("episodes") or [] for t in e["turns"]] for s in raw}
    latencies = {s: v for s, v in latencies.items() if v}
    if not latencies:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    ax.boxplot(list(latencies.values()), showfliers=False)
    ax.set_xticks(range(1, len(latencies) + 1), list(latencies))
    ax.set_ylabel("seconds per turn")
    ax.set_title(f"Latency per turn (episodes, {len(next(iter(latencies.values())))} turns)")
    return fig


def plot(summary: dict, raw: dict, out_dir: Path) -> list[Path]:
    """accuracy per category per system, answer F1 per system, latency per turn per system."""
    figures = {
        "accuracy_by_shape": accuracy_figure(summary),
        "answer_f1": answer_f1_figure(summary),
        "latency_per_turn": latency_figure(raw),
    }
    paths = []
    for name, fig in figures.items():
        if fig is not None:
            fig.savefig(out_dir / f"{name}.png", dpi=100)
            _pyplot().close(fig)
            paths.append(out_dir / f"{name}.png")
    return paths


# ----------------------------------------------------------------------------- the report


def write_report(summary: dict, raw: dict, meta: dict, out_dir: str | Path) -> dict[str, Path]:
    """metrics.json, report.md, the plots, and the per-case rows (cases.jsonl) for error analysis."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"metrics": out / "metrics.json", "report": out / "report.md", "cases": out / "cases.jsonl"}
    targets = measure_targets(summary)
    files["metrics"].write_text(
        json.dumps(
            {"meta": meta, "verdict": verdict(targets), "targets": targets, "systems": summary},
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )
    with open(files["cases"], "w", encoding="utf-8") as f:
        for system, parts in raw.items():
            for part, rows in parts.items():
                if isinstance(rows, list):
                    for row in rows:
                        f.write(json.dumps({"system": system, "part": part, **row}, ensure_ascii=False) + "\n")
    plots = plot(summary, raw, out)
    small = small_sample_line(summary, meta)
    lines = [f"# memlm eval: {meta.get('model')}", "", f"**{verdict(targets)}**", ""]
    if small:
        lines += [f"> {small}", ""]
    lines += _source_lines(meta) + [
        "",
        f"Seed {meta.get('seed')} · limit {meta.get('limit')} · {meta.get('wall_s', 0):.0f} s",
        "",
        "## Headline",
        "",
        markdown_table(headline(summary)),
        "",
    ]
    cases = _cases_line(summary)
    if cases:
        lines += [cases + " Exact calls: in brackets the 95% Wilson interval over the turns.", ""]
    lines += [
        "## Targets",
        "",
        "Of the memlm system (the model under test), defined in `eval/report.py` (TARGETS).",
        "",
        _targets_table(summary),
        "",
    ]
    table = _category_table(summary)
    if table:
        turns = _first(summary, "records")["turns"]
        lines += [
            "## Per category (teacher-forced records)",
            "",
            f"{turns} turns in all; `turns`: per category. "
            "`calls`: every call of the turn exactly as gold; `answers`: the answer lists exactly the gold names "
            "(or abstains when there are none).",
            "",
            table,
            "",
        ]
    table = _real_table(summary)
    if table:
        lines += [
            "## Real-text probe",
            "",
            "False-write rate: the share of the passages stating no fact (its cases) "
            "where the model wrote a fact in a relation the passage was checked for.",
            "",
            table,
            "",
        ]
    gate = meta.get("write_gate") or {}
    table = _gate_table(summary)
    if table:
        lines += [
            "## The write gate",
            "",
            f"Writes held back below the operating point (`write_gate`: signal {gate.get('signal')}, threshold "
            f"{gate.get('threshold')}). Every write was scored: the figures as if only the writes scoring at "
            "least t had been stored (memory_runtime/write_gate.py).",
            "",
            table,
            "",
        ]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    files["report"].write_text("\n".join(lines))
    files.update({p.stem: p for p in plots})
    return files
