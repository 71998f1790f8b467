"""Real-text probe: does the model write the facts real sentences state, and nothing for
passages that state none?

Each passage of data/real/ (read by data_gen's loader: Re-DocRED, KnowledgeNet, or any
file in their formats) is one user turn against an empty memory. Scored per source: pair
precision/recall/F1 (subject, object: the person and the organisation, place or other person;
relation ignored), triplet F1 with the canonical relation, the false-write rate on passages with
no gold fact, and recall over the gold facts whose names the passage actually mentions
(KnowledgeNet often names a person the passage only calls "he"). A fact of a symmetric relation of the table
(spouse of, sibling of) is one unordered pair: a write either way states it. KnowledgeNet
passages are annotated for a few relations only, Re-DocRED's for those of its own relations that
are mapped: predictions in other relations are not counted against them, neither in the pair
scores nor as false writes (a founder write on a passage checked only for CEO facts may be a true
fact nobody annotated); `any_write_rate` counts every write on a no-fact passage.

With a scoring write gate (memory_runtime.generation.write_gate, ``score: true``) every write the model made,
stored or held back, is kept with its scores, and :func:`gate_curve` gives the precision–recall
curve of each signal: the figures as if only writes scoring at least t had been stored.

The passages are those of `real=` (a file or a directory), else $MEMLM_REAL_DIR, else the shipped
data/real/ (its person–organisation files), up to `limit` per source. The second schema's sentences
are a file of their own, measured when named, with the model's relation table (a run trained on
people-places-things keeps it; else pass it as generation.memory_config):

    memlm eval --model RUN --out DIR --parts real real=data/real/redocred_dev_people_places_things.jsonl
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from data_gen.real import (
    ENV_VAR,
    KNOWLEDGENET_FILE,
    REDOCRED_FILE,
    default_real_dir,
    is_mentioned,
)
from eval.metrics import PRF, counted_writes, pair_prf, triplet_prf
from eval.parts import Part
from eval.render import markdown_table, num, pct
from eval.systems import Session, System, run_sessions
from memory_runtime.generation.proposals import close_scratch, sampled_runs
from memory_runtime.generation.write_gate import HELD_BACK
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term, triplet_key
from memory_runtime.progress import Advance
from memory_runtime.records import Record

if TYPE_CHECKING:
    from eval.eval_config import EvalConfig

logger = logging.getLogger(__name__)


def real_sample(path: str | None = None, limit: int | None = None, seed: int = 0) -> list[Record]:
    """The real passages (a file in either format, a directory, or the shipped data/real/), up to
    `limit` per source in a seeded sample."""
    from data_gen.real import load_real, load_real_file

    records = load_real_file(path) if path and Path(path).is_file() else load_real(path)
    by_source: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_source[r.source or "unknown"].append(r)
    rng = random.Random(seed)
    return [
        r
        for source in sorted(by_source)
        for r in (
            by_source[source]
            if limit is None or len(by_source[source]) <= limit
            else rng.sample(by_source[source], limit)
        )
    ]


def real_path(config: EvalConfig) -> tuple[Path, str]:
    """The real-text file or directory the run reads, and what chose it."""
    if config.real:
        return Path(config.real), "--real"
    return default_real_dir(), f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "default"


def sources(config: EvalConfig, records: list[Record]) -> dict:
    path, chosen_by = real_path(config)
    files = [path] if path.is_file() else [path / REDOCRED_FILE, path / KNOWLEDGENET_FILE]
    by_source: dict[str, dict[str, int]] = {}
    for record in records:
        counts = by_source.setdefault(record.source or "unknown", {"passages": 0, "no_fact": 0})
        counts["passages"] += 1
        counts["no_fact"] += not record.gold_triplets
    return {
        "path": str(path.resolve()),
        "chosen_by": chosen_by,
        "files": [str(f.resolve()) for f in files],
        "by_source": by_source,
    }


def passage_session(
    system: System, record: Record, memory_config: MemoryConfig | None = None, propose: int = 1
) -> Session:
    """One passage against an empty memory (a session of one turn), or of `propose` runs, decoded together:
    the greedy one, then propose - 1 sampled ones, each on an empty memory (memory_runtime.generation.proposals),
    their writes pooled (the candidates a verifier judges: the pool's recall is what a verifier can keep); its
    scores, and every write with the first run that proposed it (the curve of k' < k runs)."""
    store = TripletStore(":memory:", memory_config)
    request = system.request(record.segments[0].text, store)
    runs = sampled_runs(request, propose)
    started = time.perf_counter()
    try:
        results = (yield [request, *runs]) if runs else [(yield request)]
    finally:
        close_scratch(runs)
    elapsed = time.perf_counter() - started  # the runs decoded together where the engine batches
    calls = [c for result in results for c in result.calls]
    proposed_by = {id(c): index for index, result in enumerate(results) for c in result.calls}  # its first run

    def key(fields) -> tuple:
        return triplet_key(fields, store.canonical_relation)

    def first_of_each(items):
        seen: dict[tuple, object] = {}
        for call in items:
            seen.setdefault(key(call.fields), call)
        return list(seen.values())

    written = first_of_each(c for c in calls if c.kind == "write" and all(c.fields))
    writes = [tuple(c.fields) for c in written]
    held = first_of_each(c for c in calls if c.fields and all(c.fields) and c.status.startswith(HELD_BACK))
    held = [c for c in held if key(c.fields) not in {key(w.fields) for w in written}]

    def counted(t) -> bool:
        return bool(counted_writes([t], record.annotated_relations, store.canonical_relation))

    def one_order(triplets) -> list[tuple]:
        return in_one_order(triplets, store.canonical_relation, store.config.symmetric)

    scored = one_order(counted_writes(writes, record.annotated_relations, store.canonical_relation))
    proposed = one_order(
        counted_writes(
            [*writes, *(tuple(c.fields) for c in held)], record.annotated_relations, store.canonical_relation
        )
    )
    # every write the gate scored, stored or held back by it (not those the store refused after it)
    gated = [
        {
            "triplet": list(one_order([c.fields])[0]),
            "scores": c.scores,
            "held": c.kind != "write",
            "counted": counted(c.fields),
            "run": proposed_by[id(c)],  # 0: the greedy run; the figures of k runs keep run < k
        }
        for c in [*written, *held]
        if c.scores
    ]
    gold = one_order(record.gold_triplets)
    mentioned = [t for t in gold if is_mentioned(record, t)]
    return {
        "id": record.id,
        "source": record.source,
        "has_fact": bool(gold),
        "writes": writes,
        # a false write: a write in a relation the passage was checked for, where it states none
        "gold": gold,
        "false_write": not gold and bool(scored),
        "any_write": not gold and bool(writes),
        "pairs": pair_prf(scored, gold).to_dict(),
        "pairs_mentioned": pair_prf(scored, mentioned).to_dict(),
        "pairs_proposed": pair_prf(proposed, gold).to_dict(),
        "triplets": triplet_prf(scored, gold, store.canonical_relation).to_dict(),
        "gated_writes": gated,
        "tokens": sum(r.generated_tokens for r in results),
        "wall_s": elapsed if runs else results[0].wall_seconds,  # the turn as its user waits for it
    }


def in_one_order(triplets, canonical=lambda r: r, symmetric_relations=frozenset()) -> list[tuple]:
    """The triplets, those of a symmetric relation (the relation table's `symmetric`) with their names
    in one order: Re-DocRED states a sibling fact one way or both, a model writes it either way."""
    symmetric = {normalize_term(r) for r in symmetric_relations}
    out = []
    for s, r, o in (tuple(t) for t in triplets):
        if normalize_term(canonical(r)) in symmetric and normalize_term(o) < normalize_term(s):
            s, o = o, s
        out.append((s, r, o))
    return out


def relations_unknown(records: Iterable[Record], memory_config: MemoryConfig | None) -> list[str]:
    """The relations the passages were checked for that the memory's table lacks: text of another
    schema than the model's (its writes cannot name them; pass that schema's table)."""
    table = (memory_config or MemoryConfig.load()).canonical_names
    if not table:
        return []  # an empty table: relations are free
    checked = {r for record in records for r in record.annotated_relations or ()}
    return sorted(r for r in checked if normalize_term(r) not in table)


def not_for_the_model(records: list[Record], memory_config: MemoryConfig | None) -> str | None:
    """Why the passages say nothing of the model: each was checked only for relations its memory's table
    lacks (text of another schema); None when some of them are its own."""
    checked = {r for record in records for r in record.annotated_relations or ()}
    unknown = relations_unknown(records, memory_config)
    if not checked or len(unknown) < len(checked):
        return None
    return (
        f"its passages are checked for {', '.join(unknown)}, none a relation of the model's memory table "
        "(real=FILE gives text annotated in the model's own relations)"
    )


def evaluate_passage(
    system: System, record: Record, memory_config: MemoryConfig | None = None, propose: int = 1
) -> dict:
    return run_sessions(system, [passage_session(system, record, memory_config, propose)], proposed=False)[0]


def evaluate_real(
    system: System,
    records: Iterable[Record],
    memory_config: MemoryConfig | None = None,
    progress: Advance | None = None,
    batch_size: int = 1,
    propose: int = 1,
) -> list[dict]:
    records = list(records)
    unknown = relations_unknown(records, memory_config)
    if unknown:
        logger.warning(
            "real text checked for relations the memory's table lacks (%s): pass its schema's table "
            "(generation.memory_config; `memlm schema table SCHEMA --out FILE`) or a model trained on it",
            ", ".join(unknown),
        )
    sessions = (passage_session(system, r, memory_config, propose) for r in records)
    return run_sessions(system, sessions, batch_size, progress, proposed=False)


def summarise_real(rows: list[dict]) -> dict:
    """Micro-averaged figures per source and over all sources."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["source"] or "unknown"].append(row)
        groups["all"].append(row)
    out = {}
    for source, group in groups.items():

        def total(key: str, group: list = group) -> PRF:
            return sum((PRF(r[key]["tp"], r[key]["predicted"], r[key]["gold"]) for r in group), PRF(0, 0, 0))

        no_fact = [r for r in group if not r["has_fact"]]
        out[source] = {
            "passages": len(group),
            "pair": total("pairs").to_dict(),
            "pair_mentioned": total("pairs_mentioned").to_dict(),
            # every write the runs proposed, stored or held back: the recall a gate can keep at best (None:
            # cases from before proposals were counted, as a resumed evaluation may hold)
            "pair_proposed": total("pairs_proposed").to_dict() if all("pairs_proposed" in r for r in group) else None,
            "triplet": total("triplets").to_dict(),
            "no_fact_passages": len(no_fact),
            "false_write_rate": sum(r["false_write"] for r in no_fact) / len(no_fact) if no_fact else None,
            "any_write_rate": sum(r["any_write"] for r in no_fact) / len(no_fact) if no_fact else None,
        }
        signals = sorted({k for r in group for w in r.get("gated_writes", ()) for k in w["scores"]})
        if signals:
            out[source]["write_gate"] = {signal: gate_curve(group, signal) for signal in signals}
    return out


GATE_THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(18)) + tuple(round(0.9 + 0.01 * i, 2) for i in range(10))


def gate_curve(rows: list[dict], signal: str, thresholds: Iterable[float] = GATE_THRESHOLDS) -> list[dict]:
    """Pair precision/recall/F1 and the false-write rate of `rows` had only writes whose `signal`
    score is at least t been stored, for each threshold t (the rows' writes must all be scored)."""
    curve = []
    for t in thresholds:
        total, false_writes, no_fact = PRF(0, 0, 0), 0, 0
        for r in rows:
            kept = [w["triplet"] for w in r["gated_writes"] if w["counted"] and w["scores"].get(signal, 0.0) >= t]
            total = total + pair_prf(kept, r["gold"])
            if not r["has_fact"]:
                no_fact += 1
                false_writes += bool(kept)
        curve.append(
            {
                "threshold": t,
                **{k: v for k, v in total.to_dict().items() if k in ("precision", "recall", "f1", "predicted")},
                "false_write_rate": false_writes / no_fact if no_fact else None,
            }
        )
    return curve


# ----------------------------------------------------------------------------- report


def passages_text(n: int, no_fact: int) -> str:
    return f"{n} passage{'s' * (n != 1)}, {no_fact} of them stating no fact"


def source_line(source: dict) -> str:
    counts = "; ".join(
        f"{name} {passages_text(c['passages'], c['no_fact'])}" for name, c in source["by_source"].items()
    )
    return f"- real text: `{source['path']}` ({source['chosen_by']}): {counts or 'none'}"


def sample_groups(summary: dict) -> list[tuple[str, int]]:
    """The passages of each source, and those of them that state no fact (the false-write rate's cases)."""
    groups = []
    for source, r in summary.items():
        if source != "all":
            groups += [
                (f"{source} passages", r["passages"]),
                (f"{source} passages stating no fact", r["no_fact_passages"]),
            ]
    return groups


def real_section(summary: dict, meta: dict) -> list[str]:
    """Every figure per system and source."""
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
                    num(r["pair"]["precision"]),
                    num(r["pair"]["recall"]),
                    num(r["pair"]["f1"]),
                    num(r["pair_mentioned"]["recall"]),
                    num(r["triplet"]["f1"]),
                    pct(r["false_write_rate"]),
                    pct(r["any_write_rate"]),
                ]
            )
    if len(rows) == 1:
        return []
    return [
        "## Real-text probe",
        "",
        "False-write rate: the share of the passages stating no fact (its cases) "
        "where the model wrote a fact in a relation the passage was checked for.",
        "",
        markdown_table(rows),
        "",
    ]


def gate_section(summary: dict, meta: dict) -> list[str]:
    """Each write-gate signal at a few thresholds (real text, all sources): from scored writes."""
    curves = summary.get("memlm", {}).get("real", {}).get("all", {}).get("write_gate")
    if not curves:
        return []
    shown = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
    rows = [["signal", "keep writes scoring ≥", "pair P", "pair R", "pair F1", "false-write rate"]]
    for signal, curve in curves.items():
        for point in curve:
            if point["threshold"] in shown:
                rows.append(
                    [
                        signal,
                        f"{point['threshold']:.2f}",
                        num(point["precision"]),
                        num(point["recall"]),
                        num(point["f1"]),
                        pct(point["false_write_rate"]),
                    ]
                )
    gate = meta.get("write_gate") or {}
    return [
        "## The write gate",
        "",
        f"Writes held back below the operating point (`write_gate`: signal {gate.get('signal')}, threshold "
        f"{gate.get('threshold')}). Every write was scored: the figures as if only the writes scoring at "
        "least t had been stored (memory_runtime/generation/write_gate.py).",
        "",
        markdown_table(rows),
        "",
    ]


PART = Part(
    name="real",
    systems=("memlm", "few_shot"),
    load=lambda config: real_sample(str(real_path(config)[0]), config.limit, config.seed),
    sources=sources,
    evaluate=lambda system, records, config, *run: evaluate_real(
        system, records, *run, propose=config.generation.propose
    ),
    summarise=lambda rows, uses_memory: summarise_real(rows),
    sample_groups=sample_groups,
    applies=lambda records, config, memory_config: not_for_the_model(records, memory_config),
    source_line=source_line,
    sections=lambda summary, meta: real_section(summary, meta) + gate_section(summary, meta),
)
