"""Typo robustness: the answerable questions of the test records, asked clean and with a
one-character typo in a name the question gives; the fuzzy fallback of the memory must carry it.

Runs on the records part's cases (eval/records.py), for the model under test only.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from eval.metrics import frac
from eval.parts import Part
from eval.records import gold_calls, record_session
from eval.systems import Session, System, run_sessions
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.progress import Advance
from memory_runtime.records import Record, turns

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def one_typo(term: str, rng: random.Random) -> str:
    """Substitute, insert or delete one letter, never the first (names stay recognisable)."""
    i = rng.randrange(1, len(term))
    op = rng.choice("sid")
    if op == "s":
        alternatives = [c for c in _LETTERS if c != term[i].lower()]
        return term[:i] + rng.choice(alternatives) + term[i + 1 :]
    if op == "i":
        return term[:i] + rng.choice(_LETTERS) + term[i:]
    return term[:i] + term[i + 1 :]


def with_typo(record: Record, seed: int) -> tuple[str, str, str] | None:
    """(original user text, typo'd user text, the name that got the typo) for an answerable
    one-turn question whose read names a person or organisation given in the text, else None."""
    record_turns = turns(record)
    if record.type != "read" or len(record_turns) != 1:
        return None
    user, assistant = record_turns[0]
    reads = [c for c in gold_calls(assistant) if c.kind == "read"]
    names = [f for c in reads for f in (c.fields[0], c.fields[2]) if f and f in user and len(f) > 3]
    if not names:
        return None
    rng = random.Random(f"{seed}:{record.id}")
    name = rng.choice(names)
    return user, user.replace(name, one_typo(name, rng)), name


def typo_session(system: System, record: Record, seed: int, memory_config: MemoryConfig | None = None) -> Session:
    """The record's answerable question, clean and with a one-character typo in a given name (None
    for records without one)."""
    typo = with_typo(record, seed)
    if typo is None:
        return None
    clean = (yield from record_session(system, record, memory_config))[-1]
    noisy = (yield from record_session(system, record, memory_config, user_override=typo[1]))[-1]
    return {
        "id": record.id,
        "shape": record.shape,
        "name": typo[2],
        "user": typo[1],
        "clean_correct": clean["answer_correct"],
        "typo_correct": noisy["answer_correct"],
        "typo_calls": noisy["calls"],
        "typo_reply": noisy["reply"],
    }


def evaluate_typos(
    system: System,
    records: Iterable[Record],
    seed: int,
    memory_config: MemoryConfig | None = None,
    progress: Advance | None = None,
    batch_size: int = 1,
) -> list[dict]:
    """The same answerable questions, clean and with a one-character typo in a given name."""
    sessions = (typo_session(system, record, seed, memory_config) for record in records)
    return [row for row in run_sessions(system, sessions, batch_size, progress) if row is not None]


def summarise_typos(rows: list[dict]) -> dict:
    both = [r for r in rows if r["clean_correct"]]
    return {
        "questions": len(rows),
        "clean_correct": frac(r["clean_correct"] for r in rows),
        "typo_correct": frac(r["typo_correct"] for r in rows),
        "typo_correct_when_clean_correct": frac(r["typo_correct"] for r in both),
    }


PART = Part(
    name="typos",
    systems=("memlm",),
    cases_from="records",
    evaluate=lambda system, records, config, *run: evaluate_typos(system, records, config.seed, *run),
    summarise=lambda rows, uses_memory: summarise_typos(rows),
    sample_groups=lambda s: [("typo questions", s["questions"])],
)
