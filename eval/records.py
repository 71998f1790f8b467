"""Call- and answer-level evaluation on data_gen records (teacher-forced, greedy).

Each record is replayed turn by turn. Before turn k the store holds the record's memory plus
the gold writes of turns < k, and the history is the gold conversation so far (teacher
forcing): a mistake in one turn does not spoil the next. Every turn is scored on its calls
(exact text, write triplets, malformed calls) and, when the gold turn reads the memory, on its
answer (exact match, token F1, the names it lists, abstention).

The typo variant asks the same answerable questions with a one-character typo in a name the
question gives; the fuzzy fallback of the memory must carry it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from eval.metrics import (
    abstains,
    answer_correct,
    answer_exact,
    name_prf,
    names_in,
    token_f1,
    triplet_prf,
)
from eval.systems import Session, System, run_sessions, verbalise
from memory_runtime.protocol import Call, parse_calls, strip_calls
from memory_runtime.records import Record, turns
from memory_runtime.store import MemoryConfig, TripletStore

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


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


def record_session(
    system: System, record: Record, memory_config: MemoryConfig | None = None, user_override: str | None = None
) -> Session:
    """Replay one record with `system` (a session: yields its turns' requests); one result row per turn."""
    record_turns = turns(record)
    store = TripletStore(":memory:", memory_config)
    if record.memory:
        store.write_many(record.memory, at=1.0)
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
            "reply": result.reply,
            "status": result.status,
            "tokens": result.generated_tokens,
            "wall_s": result.wall_seconds,
        }
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


def evaluate_records(
    system: System,
    records: Iterable[Record],
    memory_config: MemoryConfig | None = None,
    progress: Callable[[], None] | None = None,
    batch_size: int = 1,
) -> list[dict]:
    sessions = (record_session(system, record, memory_config) for record in records)
    return [row for rows in run_sessions(system, sessions, batch_size, progress) for row in rows]


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
    progress: Callable[[], None] | None = None,
    batch_size: int = 1,
) -> list[dict]:
    """The same answerable questions, clean and with a one-character typo in a given name."""
    sessions = (typo_session(system, record, seed, memory_config) for record in records)
    return [row for row in run_sessions(system, sessions, batch_size, progress) if row is not None]
