"""A small templated set of write and read records, for smoke runs, benches and tests.

This is *not* the training data (that is data_gen's output, loaded with ``--data``); it
exists so that the trainer, the bench and the tests can run before and without it.  Records
follow the data_gen schema (:class:`data_gen.records.Record`) and use the protocol's
render_* functions, so they are exactly what the controller produces.

Names are split by a stable hash: ``split="train"`` only ever uses people and organisations
from the training buckets, other splits only held-out ones, so accuracy measured on a
validation split is on unseen names.
"""

from __future__ import annotations

import random
import zlib
from typing import Iterator

from data_gen.records import Record, Segment
from memory_runtime.protocol import render_read, render_results, render_write

# relation -> (statement templates, question about the object, question about the subject, answer verb)
RELATIONS: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "employed by": (("{s} works for {o}.", "{s} is employed by {o}.", "{s} works at {o}."),
                    "Where does {s} work?", "Who works for {o}?", "works for"),
    "manager of": (("{s} manages {o}.", "{s} is the manager of {o}."),
                   "What does {s} manage?", "Who manages {o}?", "manages"),
    "investor in": (("{s} invested in {o}.", "{s} is an investor in {o}."),
                    "What has {s} invested in?", "Who invested in {o}?", "invested in"),
    "founder of": (("{s} founded {o}.", "{s} is the founder of {o}."),
                   "What did {s} found?", "Who founded {o}?", "founded"),
    "customer of": (("{s} is a customer of {o}.", "{s} buys from {o}."),
                    "Which company is {s} a customer of?", "Who is a customer of {o}?", "is a customer of"),
}
_PREFIXES = ("", "", "Note that ", "FYI: ", "Remember this: ")
_WRITE_ACKS = (" Noted.", " Got it.", " Saved.")
_HELD_OUT_BUCKETS = 5  # 1 in 5 names is held out


def _is_held_out(name: str) -> bool:
    return zlib.crc32(name.encode()) % _HELD_OUT_BUCKETS == 0


class _Names:
    def __init__(self, seed: int, held_out: bool) -> None:
        from faker import Faker

        self._people, self._orgs = Faker("en_US"), Faker("en_US")
        self._people.seed_instance(seed * 2 + 1)
        self._orgs.seed_instance(seed * 2 + 2)
        self._held_out = held_out

    def _draw(self, make) -> str:
        while True:
            name = make()
            if _is_held_out(name) == self._held_out:
                return name

    def person(self) -> str:
        return self._draw(self._people.name)

    def org(self) -> str:
        return self._draw(self._orgs.company)


def _write(rng: random.Random, names: _Names, rid: str) -> Record:
    s, o = names.person(), names.org()
    rel = rng.choice(list(RELATIONS))
    statement = rng.choice(RELATIONS[rel][0]).format(s=s, o=o)
    user = rng.choice(_PREFIXES) + statement
    return Record(
        id=rid,
        type="write",
        segments=[
            Segment(role="user", text=user, train=False),
            Segment(role="assistant", text=render_write(s, rel, o) + rng.choice(_WRITE_ACKS), train=True),
        ],
        gold_triplets=[(s, rel, o)],
    )


def _read(rng: random.Random, names: _Names, rid: str) -> Record:
    rel = rng.choice(list(RELATIONS))
    _, ask_object, ask_subject, verb = RELATIONS[rel]
    found = rng.random() < 0.8
    if rng.random() < 0.5:  # "Where does S work?" -> [MEM_READ{S>>rel>>}:
        s = names.person()
        objects = [names.org() for _ in range(rng.choice((1, 1, 2)))] if found else []
        facts = [(s, rel, o) for o in objects]
        user, query, shape = ask_object.format(s=s), render_read(s, rel, None), "per_rel"
        answer = f" {s} {verb} {' and '.join(objects)}." if found else " I don't know."
        gold_names = objects
    else:  # "Who works for O?" -> [MEM_READ{>>rel>>O}:
        o = names.org()
        subjects = [names.person() for _ in range(rng.choice((1, 1, 2, 3)))] if found else []
        facts = [(p, rel, o) for p in subjects]
        user, query, shape = ask_subject.format(o=o), render_read(None, rel, o), "rel_org"
        if not found:
            answer = " I don't know."
        elif len(subjects) == 1:
            answer = f" {subjects[0]} {verb} {o}."
        else:
            answer = f" {', '.join(subjects[:-1])} and {subjects[-1]}."
        gold_names = subjects
    distractor = (names.person(), rng.choice(list(RELATIONS)), names.org())
    return Record(
        id=rid,
        type="read" if found else "unanswerable",
        shape=shape,
        segments=[
            Segment(role="user", text=user, train=False),
            Segment(role="assistant", text=query, train=True),
            Segment(role="memory", text=render_results(facts), train=False),
            Segment(role="assistant", text=answer, train=True),
        ],
        gold_triplets=facts,
        gold_names=gold_names,
        memory=facts + [distractor],
    )


def synthetic_records(n: int, *, seed: int = 0, split: str = "train", read_fraction: float = 0.5) -> list[Record]:
    """``n`` templated records (writes and reads); non-train splits use held-out names only."""
    rng = random.Random(f"{seed}:{split}")
    names = _Names(seed if split == "train" else seed + 7919, held_out=split != "train")
    return [
        (_read if rng.random() < read_fraction else _write)(rng, names, f"synthetic-{split}-{seed}-{i}")
        for i in range(n)
    ]


def iter_rows(records: list[Record]) -> Iterator[dict]:
    for r in records:
        yield r.model_dump(mode="json")


def synthetic_dataset_dict(train: int, validation: int = 0, *, seed: int = 0):
    """A ``datasets.DatasetDict`` shaped like data_gen's output (splits train / validation)."""
    from datasets import Dataset, DatasetDict

    splits = {"train": synthetic_records(train, seed=seed, split="train")}
    if validation:
        splits["validation"] = synthetic_records(validation, seed=seed, split="validation")
    return DatasetDict({k: Dataset.from_list(list(iter_rows(v))) for k, v in splits.items()})
