"""What the write verifier learns from: each statement passage's gold facts (holds), those facts with one
field swapped within the passage (a relation, a subject or an object: does not hold), and every distinct
write the writer proposed in its sampled runs, labelled against the gold (issue 57).

A writer's write is labelled only where the gold can judge it: it holds when its pair (either order for a
symmetric relation) and canonical relation are a gold fact's; it does not hold when it is in a relation the
passage was annotated for (all relations for generated passages); a write in a relation the passage was
never checked for (KnowledgeNet annotates a few) may be a true fact nobody annotated, and is left out, as
eval's `counted_writes` leaves it out. The passages are `memlm sample`'s prompts: training text only (dev
passages are never prompts, tests/learning_loop/test_sampling.py), so dev never trains the verifier."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from memory_runtime.memory.terms import normalize_term, triplet_key
from memory_runtime.records import Record, VerifierExample

Canonical = Callable[[str], str]


def _key(triplet: Sequence[str], canonical: Canonical, symmetric: frozenset[str]) -> tuple[str, str, str]:
    s, r, o = triplet_key(triplet, canonical)
    if r in symmetric and o < s:
        s, o = o, s
    return s, r, o


def label_write(
    triplet: Sequence[str],
    record: Record,
    canonical: Canonical = lambda r: r,
    symmetric: frozenset[str] = frozenset(),
) -> bool | None:
    """Whether the passage `record` states the written `triplet` (None: its gold cannot say)."""
    symmetric = frozenset(normalize_term(r) for r in symmetric)
    key = _key(triplet, canonical, symmetric)
    if key in {_key(g, canonical, symmetric) for g in record.gold_triplets}:
        return True
    if record.annotated_relations is None:
        return False
    annotated = {normalize_term(canonical(r)) for r in record.annotated_relations}
    return False if key[1] in annotated else None


def swapped(
    record: Record, relations: Sequence[str], rng: random.Random, canonical: Canonical = lambda r: r
) -> list[tuple[str, str, str]]:
    """Each gold fact with one field swapped, where the result is no gold fact and the gold can say so: the
    relation for another of the table (one the passage was annotated for), the subject or the object for
    another name of the passage's gold facts, or (the object) of a fact in its memory that the passage names:
    what an update ends ("Annika quit H&M and joined Spotify": employed by H&M no longer holds)."""
    gold = [tuple(g) for g in record.gold_triplets]
    keys = {_key(g, canonical, frozenset()) for g in gold}
    annotated = (
        None
        if record.annotated_relations is None
        else {normalize_term(canonical(r)) for r in record.annotated_relations}
    )
    subjects = sorted({g[0] for g in gold})
    text = record.segments[0].text
    objects = sorted({g[2] for g in gold} | {m[2] for m in record.memory if m[2] in text})
    out: list[tuple[str, str, str]] = []
    for s, r, o in gold:
        options = [
            [(s, other, o) for other in relations if normalize_term(other) != normalize_term(canonical(r))],
            [(other, r, o) for other in subjects if other != s],
            [(s, r, other) for other in objects if other != o],
        ]
        for choices in options:
            choices = [
                t
                for t in choices
                if _key(t, canonical, frozenset()) not in keys
                and (annotated is None or normalize_term(canonical(t[1])) in annotated)
                and t[0] != t[2]
            ]
            if choices:
                out.append(rng.choice(choices))
    return out


def verifier_examples(
    proposals: Iterable[tuple[Record, Iterable[Sequence[str]]]],
    relations: Sequence[str],
    *,
    canonical: Canonical = lambda r: r,
    symmetric: frozenset[str] = frozenset(),
    seed: int = 0,
) -> list[VerifierExample]:
    """Labelled (passage, candidate) examples from each statement passage and the writes proposed for it:
    the writes the gold can judge, its gold facts, their swaps; one example per distinct fact of a passage,
    the first kept: a gold fact the writer proposed is a writer's example (what the verifier will judge),
    one it missed a gold one."""
    rng = random.Random(seed)
    symmetric = frozenset(normalize_term(r) for r in symmetric)
    examples: list[VerifierExample] = []
    for record, writes in proposals:
        labelled = []
        for w in writes:
            label = label_write(w, record, canonical, symmetric)
            if label is not None:
                labelled.append((w, label, "writer"))
        labelled += [(g, True, "gold") for g in record.gold_triplets]
        labelled += [(t, False, "swap") for t in swapped(record, relations, rng, canonical)]
        seen: set[tuple[str, str, str]] = set()
        for triplet, holds, origin in labelled:
            key = _key(triplet, canonical, symmetric)
            if key in seen or not all(str(x).strip() for x in triplet):
                continue
            seen.add(key)
            examples.append(
                VerifierExample(
                    id=f"{record.id}-v{len(seen)}",
                    passage_id=record.id,
                    text=record.segments[0].text,
                    triplet=tuple(triplet),
                    holds=holds,
                    origin=origin,
                    source=record.source,
                )
            )
    return examples
