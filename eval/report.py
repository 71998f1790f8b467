"""Summaries, metrics.json, the Markdown report and the PNG plots of an eval run."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean, median

from eval.metrics import PRF
from eval.real_probe import summarise_real

CATEGORY_ORDER = ["write", "passage", "update", "update_question", "negative", "read/per", "read/per_org", "read/per_rel", "read/org",
                  "read/rel", "read/rel_org", "read/per_rel_org", "unanswerable", "two_hop"]


def _order(categories) -> list[str]:
    known = [c for c in CATEGORY_ORDER if c in categories]
    return known + sorted(set(categories) - set(known))


def _sum_prf(dicts) -> PRF:
    return sum((PRF(d["tp"], d["predicted"], d["gold"]) for d in dicts), PRF(0, 0, 0))


def _frac(values) -> float | None:
    values = list(values)
    return sum(map(bool, values)) / len(values) if values else None


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


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
            by_kind[kind] = {"turns": len(group), "correct": _frac(t.get("correct") for t in group if "correct" in t),
                             "tokens_mean": mean(t["tokens"] for t in group),
                             "wall_s_p50": median(t["wall_s"] for t in group)}
    return {
        "episodes": len(results),
        "episode_accuracy": _frac(e["correct"] for e in results if e["correct"] is not None),
        "question_accuracy": _frac(q["correct"] for q in questions),
        "unanswerable_accuracy": _frac(q["correct"] for q in questions if q["unanswerable"]),
        "statement_accuracy": _frac(t["correct"] for t in statements),
        "memory_exact_after_statements": _frac(t["memory_matches"] for t in statements),
        "tokens_per_turn": mean(t["tokens"] for t in turns) if turns else None,
        "wall_s_per_turn_p50": _percentile(walls, 50),
        "wall_s_per_turn_p90": _percentile(walls, 90),
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
        out[system] = s
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def headline(summary: dict) -> list[list[str]]:
    """One row per system: the figures the README quotes."""
    rows = [["system", "exact calls", "answers correct", "answer F1", "episode questions", "episodes",
             "typo robustness", "real pair F1", "false writes", "s/turn"]]
    for system, s in summary.items():
        rec, ep, ty = s.get("records", {}), s.get("episodes", {}), s.get("typos", {})
        real = s.get("real", {}).get("all", {})
        rows.append([
            system,
            _pct(rec.get("calls", {}).get("exact")) if rec else "–",
            _pct(rec.get("answers", {}).get("correct")) if rec else "–",
            _num(rec.get("answers", {}).get("token_f1")) if rec else "–",
            _pct(ep.get("question_accuracy")), _pct(ep.get("episode_accuracy")),
            _pct(ty.get("typo_correct")),
            _num(real.get("pair", {}).get("f1")) if real else "–",
            _pct(real.get("false_write_rate")) if real else "–",
            _num(ep.get("wall_s_per_turn_p50")),
        ])
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
    rows = [["system", "source", "passages", "pair P", "pair R", "pair F1", "pair R (mentioned)", "triplet F1",
             "false-write rate", "any write (no-fact)"]]
    for system, s in summary.items():
        for source, r in s.get("real", {}).items():
            rows.append([system, source, str(r["passages"]), _num(r["pair"]["precision"]), _num(r["pair"]["recall"]),
                         _num(r["pair"]["f1"]), _num(r["pair_mentioned"]["recall"]), _num(r["triplet"]["f1"]),
                         _pct(r["false_write_rate"]), _pct(r["any_write_rate"])])
    return markdown_table(rows) if len(rows) > 1 else ""


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot(summary: dict, raw: dict, out_dir: Path) -> list[Path]:
    """accuracy per category per system, answer F1 per system, latency per turn per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    systems = [s for s in summary if "records" in summary[s]]
    cats = _order({c for s in systems for c in summary[s]["records"]["by_category"]
                   if "answer_correct" in summary[s]["records"]["by_category"][c]})
    if systems and cats:
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cats)), 4))
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            values = [100 * (summary[system]["records"]["by_category"].get(c, {}).get("answer_correct") or 0) for c in cats]
            ax.bar([x + i * width for x in range(len(cats))], values, width, label=system)
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(cats))], cats, rotation=30, ha="right")
        ax.set_ylabel("answers correct (%)")
        ax.set_ylim(0, 100)
        ax.set_title("Accuracy per query shape")
        ax.legend()
        paths.append(_save(fig, out_dir / "accuracy_by_shape.png"))

        fig, ax = plt.subplots(figsize=(5, 3.5))
        f1s = [summary[s]["records"]["answers"]["token_f1"] or 0 for s in systems]
        ax.bar(systems, f1s, color=["C0", "C1", "C2"][: len(systems)])
        ax.set_ylim(0, 1)
        ax.set_ylabel("answer token F1")
        ax.set_title("Answer F1 per system")
        paths.append(_save(fig, out_dir / "answer_f1.png"))

    latencies = {s: [t["wall_s"] for e in raw[s].get("episodes") or [] for t in e["turns"]] for s in raw}
    latencies = {s: v for s, v in latencies.items() if v}
    if latencies:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.boxplot(list(latencies.values()), showfliers=False)
        ax.set_xticks(range(1, len(latencies) + 1), list(latencies))
        ax.set_ylabel("seconds per turn")
        ax.set_title("Latency per turn (episodes)")
        paths.append(_save(fig, out_dir / "latency_per_turn.png"))
    return paths


def write_report(summary: dict, raw: dict, meta: dict, out_dir: str | Path) -> dict[str, Path]:
    """metrics.json, report.md, the plots, and the per-case rows (cases.jsonl) for error analysis."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"metrics": out / "metrics.json", "report": out / "report.md", "cases": out / "cases.jsonl"}
    files["metrics"].write_text(json.dumps({"meta": meta, "systems": summary}, indent=2, ensure_ascii=False) + "\n")
    with open(files["cases"], "w", encoding="utf-8") as f:
        for system, parts in raw.items():
            for part, rows in parts.items():
                if isinstance(rows, list):
                    for row in rows:
                        f.write(json.dumps({"system": system, "part": part, **row}, ensure_ascii=False) + "\n")
    plots = plot(summary, raw, out)
    lines = [f"# memlm eval: {meta.get('model')}", "",
             f"Data: `{meta.get('data')}` · seed {meta.get('seed')} · limit {meta.get('limit')} · "
             f"{meta.get('wall_s', 0):.0f} s", "", "## Headline", "", markdown_table(headline(summary)), ""]
    table = _category_table(summary)
    if table:
        lines += ["## Per category (teacher-forced records)", "",
                  "`calls`: every call of the turn exactly as gold; `answers`: the answer lists exactly the gold names "
                  "(or abstains when there are none).", "", table, ""]
    table = _real_table(summary)
    if table:
        lines += ["## Real-text probe", "", table, ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + [""]
    files["report"].write_text("\n".join(lines))
    files.update({p.stem: p for p in plots})
    return files
