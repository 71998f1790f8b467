"""Call- and answer-level evaluation on data_gen records (teacher-forced, greedy).

Each record is replayed turn by turn. Before turn k the store holds the record's memory plus
the gold writes of turns < k, and the history is the gold conversation so far (teacher
forcing): a mistake in one turn does not spoil the next. Every turn is scored on its calls
(exact text, write triplets, malformed calls) and, when the gold turn reads the memory, on its
answer (exact match, token F1, the names it lists, abstention).

The cases are the test split of a `memlm generate` directory, up to `limit` records of each type
(reads: of each shape). The typos part (eval/typos.py) re-asks their questions.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from eval import SYSTEMS
from eval.metrics import (
    PRF,
    abstains,
    answer_correct,
    answer_exact,
    frac,
    interval,
    name_prf,
    names_in,
    token_f1,
    triplet_prf,
)
from eval.parts import Part
from eval.render import COLOURS, label_bars, markdown_table, pct, pyplot
from eval.systems import Session, System, run_sessions, verbalise
from memory_runtime.jsonl import read_models
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.progress import Advance
from memory_runtime.protocol import Call, parse_calls, strip_calls
from memory_runtime.records import Record, turns

if TYPE_CHECKING:
    from eval.eval_config import EvalConfig


def gold_calls(assistant_text: str) -> list[Call]:
    return [c for c in parse_calls(assistant_text) if isinstance(c, Call)]


def category(record: Record, calls: Sequence[Call]) -> str:
    """What a turn tests: write, passage (a realistic statement), update (the changing write),
    update_question, negative, injection, read/<shape>, unanswerable, two_hop."""
    if any(c.kind == "read" for c in calls):
        if record.type in ("two_hop", "unanswerable"):
            return record.type
        if record.type == "update":
            return "update_question"
        return f"read/{record.shape}"
    if record.type == "injection":
        return "injection"
    if calls:
        return record.type if record.type in ("update", "passage") else "write"
    return "negative"


def record_session(
    system: System,
    record: Record,
    memory_config: MemoryConfig | None = None,
    user_override: str | None = None,
    relation_types: dict[str, tuple[str, str]] | None = None,
) -> Session:
    """Replay one record with `system` (a session: yields its turns' requests); one result row per turn.
    Each row names the relations of its gold calls and, given `relation_types` (relation -> its subject
    and object types, from the data's schema), the entity types they join: eval reports both."""
    record_turns = turns(record)
    store = TripletStore.scratch(memory_config, record.memory)
    candidates = {t[0] for t in record.memory} | {t[2] for t in record.memory} | set(record.gold_names)
    candidates |= {t[0] for t in record.gold_triplets} | {t[2] for t in record.gold_triplets}
    history: list[dict] = []
    rows = []
    for k, (user, gold_text) in enumerate(record_turns):
        if user_override is not None and k == len(record_turns) - 1:
            user = user_override
        gold = gold_calls(gold_text)
        context = verbalise([f.triplet for f in store.facts()]) or None  # what zero-shot gets instead of a memory
        result = yield system.request(user, store, history=history, context=context)
        got = result.calls
        got_texts = [c.text for c in got if c.kind != "error"]
        gold_texts = [gold_text[c.start : c.end] for c in gold]
        gold_writes = [c.fields for c in gold if c.kind == "write"]
        pred_writes = [c.fields for c in got if c.kind == "write"]
        row = {
            "id": record.id,
            "type": record.type,
            "shape": record.shape,
            "turn": k,
            "category": category(record, gold),
            "user": user,
            "gold_calls": gold_texts,
            "calls": [c.text for c in got],
            "calls_exact": got_texts == gold_texts and len(got_texts) == len(got),
            "malformed": sum(c.kind == "error" for c in got),
            "n_calls": len(got),
            "writes": triplet_prf(pred_writes, gold_writes, store.canonical_relation).to_dict(),
            "relations": gold_relations(gold, store.canonical_relation),
            "reply": result.reply,
            "status": result.status,
            "tokens": result.generated_tokens,
            "wall_s": result.wall_seconds,
        }
        if relation_types is not None:
            row["types"] = sorted({t for r in row["relations"] for t in relation_types.get(r, ())})
        if any(c.kind == "read" for c in gold):
            gold_answer = strip_calls(gold_text)
            names = list(record.gold_names) if k == len(record_turns) - 1 else []
            # names the answer may repeat: the question's, and those of the facts the gold reads return
            context = names_in(user, candidates) | {n for c in gold for t in c.results or [] for n in (t[0], t[2])}
            row.update(
                {
                    "gold_answer": gold_answer,
                    "answer_exact": answer_exact(result.reply, gold_answer),
                    "answer_f1": token_f1(result.reply, gold_answer),
                    "names": name_prf(result.reply, names, candidates, context).to_dict(),
                    "answer_correct": answer_correct(result.reply, names, candidates, context),
                    "unanswerable": not names,
                    "abstained": abstains(result.reply),
                }
            )
        rows.append(row)
        # Teacher forcing: the next turn starts from the gold conversation and the gold writes.
        for call in gold:
            if call.kind == "write":
                store.write(*call.fields, at=2.0 + k)
        history += [{"role": "user", "content": user}, {"role": "assistant", "content": gold_text}]
    return rows


def evaluate_record(
    system: System, record: Record, memory_config: MemoryConfig | None = None, user_override: str | None = None
) -> list[dict]:
    """Replay one record with `system`, turn by turn; one result row per turn."""
    return run_sessions(system, [record_session(system, record, memory_config, user_override)])[0]


def gold_relations(gold: list, canonical: Callable[[str], str]) -> list[str]:
    """The relations a turn's gold calls are about: a write's, a read's (or, for a read that names
    none, those of the facts it returns), canonical, sorted."""
    named = set()
    for call in gold:
        relation = call.fields[1] if call.fields else ""
        if relation:
            named.add(canonical(relation))
        elif call.kind == "read":
            named |= {canonical(t[1]) for t in call.results or []}
    return sorted(named)


def relation_types(config: EvalConfig) -> dict[str, tuple[str, str]] | None:
    """relation -> (subject type, object type) from the schema the data was generated with (its
    schema.yaml); None for data without one."""
    from data_gen.schema import Schema

    path = Path(config.data) / "schema.yaml" if config.data else None
    if path is None or not path.is_file():
        return None
    return {r.name: (r.subject, r.object) for r in Schema.load(path).relations}


def evaluate_records(
    system: System,
    records: Iterable[Record],
    memory_config: MemoryConfig | None = None,
    progress: Advance | None = None,
    batch_size: int = 1,
    types: dict[str, tuple[str, str]] | None = None,
) -> list[dict]:
    sessions = (record_session(system, record, memory_config, relation_types=types) for record in records)
    return [row for rows in run_sessions(system, sessions, batch_size, progress) for row in rows]


# ----------------------------------------------------------------------------- cases


def records_path(config: EvalConfig) -> Path:
    return Path(config.data) / "jsonl" / f"{config.split}.jsonl"


def load_records(config: EvalConfig) -> list[Record]:
    """Up to `limit` test records of each type (reads: of each shape), in a seeded order."""
    if config.data is None:
        raise ValueError("--data is needed for records and typos (a `memlm generate` directory)")
    path = records_path(config)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: --data must be a directory written by `memlm generate`")
    records = read_models(path, Record, "a Record")
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.system is not None:  # a reader's record (answering from a context it is given): part locomo measures it
            continue
        groups[r.type + (f"/{r.shape}" if r.type == "read" else "")].append(r)
    rng = random.Random(config.seed)
    limit = config.limit
    return [
        r
        for key in sorted(groups)
        for r in (groups[key] if limit is None or len(groups[key]) <= limit else rng.sample(groups[key], limit))
    ]


def sources(config: EvalConfig, records: list[Record]) -> dict:
    return {
        "data": str(Path(config.data).resolve()),
        "file": str(records_path(config).resolve()),
        "used": len(records),
    }


# ----------------------------------------------------------------------------- summary

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


def order(categories) -> list[str]:
    known = [c for c in CATEGORY_ORDER if c in categories]
    return known + sorted(set(categories) - set(known))


def _sum_prf(dicts) -> PRF:
    return sum((PRF(d["tp"], d["predicted"], d["gold"]) for d in dicts), PRF(0, 0, 0))


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
            "correct": frac(r["answer_correct"] for r in answered),
            "exact_match": frac(r["answer_exact"] for r in answered),
            "token_f1": mean(r["answer_f1"] for r in answered) if answered else None,
            "names": _sum_prf(r["names"] for r in answerable).to_dict(),
            "abstention_accuracy": frac(r["abstained"] for r in unanswerable),
            "false_abstention_rate": frac(r["abstained"] for r in answerable),
        },
        "by_category": {},
    }
    if uses_memory:
        out["calls"] = {
            "exact": frac(r["calls_exact"] for r in rows),
            "exact_interval95": interval(frac(r["calls_exact"] for r in rows), len(rows)),
            "write_triplets": _sum_prf(r["writes"] for r in rows).to_dict(),
            "malformed_rate": sum(r["malformed"] for r in rows) / n_calls if n_calls else 0.0,
        }
    for cat in order(by_cat):
        group = by_cat[cat]
        entry = {"turns": len(group)}
        if uses_memory:
            entry["calls_exact"] = frac(r["calls_exact"] for r in group)
        answers = [r for r in group if "answer_correct" in r]
        if answers:
            entry["answer_correct"] = frac(r["answer_correct"] for r in answers)
            entry["answer_f1"] = mean(r["answer_f1"] for r in answers)
        out["by_category"][cat] = entry
    for key, field in (("by_relation", "relations"), ("by_type", "types")):  # a turn counts for each it names
        groups: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            for name in row.get(field, []):
                groups[name].append(row)
        if groups:
            out[key] = {name: _group_entry(groups[name], uses_memory) for name in sorted(groups)}
    return out


def _group_entry(group: list[dict], uses_memory: bool) -> dict:
    entry: dict = {"turns": len(group)}
    if uses_memory:
        entry["calls_exact"] = frac(r["calls_exact"] for r in group)
    answers = [r for r in group if "answer_correct" in r]
    if answers:
        entry["answer_correct"] = frac(r["answer_correct"] for r in answers)
    return entry


# ----------------------------------------------------------------------------- report


def category_section(summary: dict, meta: dict) -> list[str]:
    """Calls and answers per category, one column of each per system."""
    cats = order({c for s in summary.values() for c in s.get("records", {}).get("by_category", {})})
    if not cats:
        return []
    systems = [s for s in summary if "records" in summary[s]]
    header = ["category", "turns"] + [f"{s} calls" for s in systems if "calls" in summary[s]["records"]]
    header += [f"{s} answers" for s in systems]
    rows = [header]
    for cat in cats:
        entries = [summary[s]["records"]["by_category"].get(cat, {}) for s in systems]
        row = [cat, str(max(e.get("turns", 0) for e in entries))]
        row += [pct(e.get("calls_exact")) for s, e in zip(systems, entries) if "calls" in summary[s]["records"]]
        row += [pct(e.get("answer_correct")) for e in entries]
        rows.append(row)
    return [
        "## Per category (teacher-forced records)",
        "",
        f"{summary[systems[0]]['records']['turns']} turns in all; `turns`: per category. "
        "`calls`: every call of the turn exactly as gold; `answers`: the answer lists exactly the gold names "
        "(or abstains when there are none).",
        "",
        markdown_table(rows),
        "",
    ]


def relation_section(summary: dict, meta: dict) -> list[str]:
    """Calls per relation and per entity type (a turn counts under every relation and type its gold
    calls name), one column per system with a memory."""
    systems = [s for s in summary if "calls" in summary[s].get("records", {})]
    lines: list[str] = []
    for key, what in (("by_relation", "relation"), ("by_type", "type")):
        names = sorted({n for s in systems for n in summary[s]["records"].get(key, {})})
        if not names:
            continue
        rows = [[what, "turns"] + [f"{s} calls" for s in systems] + [f"{s} answers" for s in systems]]
        for name in names:
            entries = [summary[s]["records"][key].get(name, {}) for s in systems]
            row = [name, str(max(e.get("turns", 0) for e in entries))]
            rows.append(
                row + [pct(e.get("calls_exact")) for e in entries] + [pct(e.get("answer_correct")) for e in entries]
            )
        lines += [markdown_table(rows), ""]
    if not lines:
        return []
    return [
        "## Per relation and entity type (teacher-forced records)",
        "",
        "A turn counts under every relation its gold calls name (a read naming none: the relations of what it "
        "returns) and every entity type those relations join (from the data's schema.yaml).",
        "",
        *lines,
    ]


def accuracy_figure(summary: dict):
    """Answers correct per category, one bar per system, the value on every bar, the legend
    outside the axes (it covers no bar); None without answered categories."""
    systems = [s for s in summary if "records" in summary[s]]
    cats = order(
        {
            c
            for s in systems
            for c in summary[s]["records"]["by_category"]
            if "answer_correct" in summary[s]["records"]["by_category"][c]
        }
    )
    if not systems or not cats:
        return None
    plt = pyplot()
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
            color=COLOURS.get(system),
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    f1s = [summary[s]["records"]["answers"]["token_f1"] for s in systems]
    bars = ax.bar(systems, [v or 0 for v in f1s], color=[COLOURS.get(s) for s in systems])
    label_bars(ax, bars, f1s, "{:.2f}")
    ax.set_ylim(0, 1.12)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("answer token F1")
    questions = summary[systems[0]]["records"]["answers"]["questions"]
    ax.set_title(f"Answer F1 per system ({questions} questions)")
    return fig


PART = Part(
    name="records",
    systems=SYSTEMS,
    load=load_records,
    cases_file=records_path,
    sources=sources,
    evaluate=lambda system, records, config, *run: evaluate_records(system, records, *run, relation_types(config)),
    summarise=summarise_records,
    sample_groups=lambda s: [
        (f"{what} {name}", entry["turns"])
        for key, what in (("by_category", "category"), ("by_relation", "relation"), ("by_type", "type"))
        for name, entry in s.get(key, {}).items()
    ],
    source_line=lambda source: f"- test records: `{source['file']}` ({source['used']} records used)",
    sections=lambda summary, meta: category_section(summary, meta) + relation_section(summary, meta),
    figures=lambda summary, raw: {
        "accuracy_by_shape": accuracy_figure(summary),
        "answer_f1": answer_f1_figure(summary),
    },
)
