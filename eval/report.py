"""Summaries, metrics.json, the Markdown report and the PNG plots of an eval run.

The report opens with a verdict against TARGETS (what "the model works" means, defined here
once) and says how many cases each figure rests on: a run with --limit 3 is a smoke test of the
pipeline, where one case moves a category by 33 points, and the report says so.

Each part's summary, sample groups, sources, sections and plots come from its module (eval/__init__.py
lists them); the headline table, the cases line under it and TARGETS pick figures from the parts here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eval import FULL_PARTS, SYSTEMS, parts
from eval.metrics import interval
from eval.real_probe import passages_text
from eval.render import markdown_table, num, pct, pyplot, span
from memory_runtime.jsonl import jsonl_line


def summarise(raw: dict) -> dict:
    """raw: {system: {"uses_memory": bool, part: rows, ...}} -> {system: {part: its summary}}, parts in
    the order of MODULES (eval/__init__.py)."""
    out = {}
    for system, rows_of in raw.items():
        out[system] = {
            part.name: part.summarise(rows_of[part.name], rows_of["uses_memory"])
            for part in parts.registered()
            if rows_of.get(part.name) is not None
        }
    return out


def _first(summary: dict, part: str) -> dict | None:
    """A part's summary from the first system that ran it: every system runs the same cases."""
    return next((s[part] for s in summary.values() if part in s), None)


# ----------------------------------------------------------------------------- sample sizes

SMALL_SAMPLE = 20  # fewer cases than this behind a percentage: a smoke test, not a measurement


def sample_groups(summary: dict) -> list[tuple[str, int]]:
    """Every group a reported figure rests on, with its number of cases (groups of none left out),
    part by part: record categories (turns), typo questions, episodes and their questions, real
    passages per source and those of them that state no fact (the false-write rate's cases), ..."""
    groups: list[tuple[str, int]] = []
    for part in parts.registered():
        if part_summary := _first(summary, part.name):
            groups += part.sample_groups(part_summary)
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
            f"A smoke test of the pipeline, not a measurement: --limit {limit}, so at most {limit} "
            f"case{'s' * (limit != 1)} per category; {step}."
        )
    return f"Small sample: {step}; under {SMALL_SAMPLE} cases a figure is a smoke test, not a measurement."


def coverage_lines(meta: dict) -> list[str]:
    """What the run left out: parts not finished (killed, or still running: `--resume` finishes them), parts
    that do not apply to the model (skipped, with why), and what `--full` would add to a quick run."""
    lines = []
    if unfinished := meta.get("unfinished"):
        lines.append(f"Unfinished ({', '.join(unfinished)}): the same command with --resume finishes the run.")
    for part, why in (meta.get("skipped") or {}).items():
        lines.append(f"Part {part} skipped: {why}.")
    systems = [s for s in SYSTEMS if s not in (meta.get("systems") or SYSTEMS)]
    more = [p for p in FULL_PARTS if p not in (meta.get("parts") or FULL_PARTS)]
    if systems or more:
        added = [f"the baselines {', '.join(systems)}"] if systems else []
        added += [f"parts {', '.join(more)}"] if more else []
        lines.append(f"Not run: {' and '.join(added)} (`memlm eval --full` runs them).")
    return lines


def _cases_line(summary: dict) -> str:
    """How many cases the headline rests on (the same cases for every system)."""
    counts = []
    if records := _first(summary, "records"):
        counts.append(f"{records['turns']} teacher-forced turns")
    if typos := _first(summary, "typos"):
        counts.append(f"{typos['questions']} typo questions")
    if episodes := _first(summary, "episodes"):
        counts.append(f"{episodes['episodes']} episodes with {episodes['questions']} questions")
    if injection := _first(summary, "injection"):
        counts.append(f"{injection['attempts']} memory-injection attempts")
    real = {k: v for k, v in (_first(summary, "real") or {}).items() if k != "all"}
    if real:
        counts.append(
            "real text: "
            + "; ".join(f"{source} {passages_text(r['passages'], r['no_fact_passages'])}" for source, r in real.items())
        )
    return "Cases: " + " · ".join(counts) + "." if counts else ""


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
        return pct(value) if self.proportion else num(value)

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
                "interval95": interval(value, n) if measured and target.proportion else None,
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
    ci = f", 95% CI {span(t['interval95'])}" if t["interval95"] else ""
    return f"{target.name} {target.text()}: {target.value_text(t['value'])} ({t['sample']}{ci}): {t['status']}"


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
                    span(t["interval95"]),
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
        exact = pct(calls.get("exact")) if calls else "–"
        if calls.get("exact_interval95"):
            exact += f" ({span(calls['exact_interval95'])})"
        rows.append(
            [
                system,
                exact,
                pct(rec.get("answers", {}).get("correct")) if rec else "–",
                num(rec.get("answers", {}).get("token_f1")) if rec else "–",
                pct(ep.get("question_accuracy")),
                pct(ep.get("episode_accuracy")),
                pct(ty.get("typo_correct")),
                num(real.get("pair", {}).get("f1")) if real else "–",
                pct(real.get("false_write_rate")) if real else "–",
                f"{inj['stored']} of {inj['attempts']}" if (inj := s.get("injection")) else "–",
                num(ep.get("wall_s_per_turn_p50")),
            ]
        )
    return rows


def _source_lines(meta: dict) -> list[str]:
    """Where the run's cases came from (meta["sources"], written by eval.run), one bullet each."""
    sources = meta.get("sources")
    if not sources:
        return [f"Data: `{meta.get('data')}`"]
    lines = [
        part.source_line(sources[part.name]) for part in parts.registered() if part.source_line and part.name in sources
    ]
    return ["Sources:", ""] + lines


# ----------------------------------------------------------------------------- plots


def plot(summary: dict, raw: dict, out_dir: Path) -> list[Path]:
    """Every part's plots (records: accuracy per category and answer F1 per system; episodes: latency per turn)."""
    paths = []
    for part in parts.registered():
        for name, fig in (part.figures(summary, raw) if part.figures else {}).items():
            if fig is None:
                continue
            fig.savefig(out_dir / f"{name}.png", dpi=100)
            pyplot().close(fig)
            paths.append(out_dir / f"{name}.png")
    return paths


# ----------------------------------------------------------------------------- the report


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all: the report is rewritten as each part ends, and an eval stopped while
    writing must leave the last complete one (`--resume` reads its cases.jsonl)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_report(summary: dict, raw: dict, meta: dict, out_dir: str | Path) -> dict[str, Path]:
    """metrics.json, report.md, the plots, and the per-case rows (cases.jsonl) for error analysis."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"metrics": out / "metrics.json", "report": out / "report.md", "cases": out / "cases.jsonl"}
    targets = measure_targets(summary)
    metrics = {"meta": meta, "verdict": verdict(targets), "targets": targets, "systems": summary}
    _replace(files["metrics"], json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    _replace(
        files["cases"],
        "".join(
            jsonl_line({"system": system, "part": part, **row})
            for system, rows_of in raw.items()
            for part, rows in rows_of.items()
            if isinstance(rows, list)
            for row in rows
        ),
    )
    plots = plot(summary, raw, out)
    small = small_sample_line(summary, meta)
    lines = [f"# memlm eval: {meta.get('model')}", "", f"**{verdict(targets)}**", ""]
    coverage = coverage_lines(meta)
    lines += [f"> {line}" for line in coverage] + ([""] if coverage else [])
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
    for part in parts.registered():
        lines += part.sections(summary, meta) if part.sections else []
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    files["report"].write_text("\n".join(lines))
    files.update({p.stem: p for p in plots})
    return files
