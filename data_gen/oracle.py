"""The memory oracle: every result in the generated data is what the runtime's TripletStore returns.

A record's memory is written into its own namespace of one shared in-memory TripletStore (a fresh
store is opened every `reset_every` namespaces to keep it small) and its reads are run against it,
so supersedes, aliases, aggregation and result order are exactly the runtime's.

One shortcut, exactly equivalent: the store falls back to a fuzzy (MinHash) match for a query field
whose term is not stored, and building that index costs ~15 ms per namespace. A fallback can only
match a stored term whose 3-gram Jaccard with the asked term reaches `fuzzy.threshold`. So before a
read the oracle compares each unstored field with the stored terms of that field: when none comes
near the threshold the fallback provably finds nothing and the store is queried with fuzzy=False
(same result); when one does, the read is refused (`None`) and the caller picks another question
(unanswerable questions must not be near-misses of stored names). tests/data_gen replays every
record against a fresh store with fuzzy matching on.
"""

from __future__ import annotations

import functools

from memory_runtime.memory.fuzzy import jaccard, shingles
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.protocol import Triplet

_norm = functools.lru_cache(maxsize=1 << 16)(normalize_term)  # our own bookkeeping only; the store normalises itself
NEAR_MISS_MARGIN = 0.1  # refuse reads whose unstored term comes within this of the fuzzy threshold


class MemoryOracle:
    def __init__(self, config: MemoryConfig, reset_every: int = 2000) -> None:
        self.config = config
        self.reset_every = reset_every
        self._store = TripletStore(":memory:", config)
        self._opened = 0
        self.near = config.fuzzy.threshold - NEAR_MISS_MARGIN  # Jaccard at which a term counts as a near miss
        self._relation_norms: dict[str, str] = {}

    def relation_norm(self, relation: str) -> str:
        """The stored key of a relation (aliases resolved to the canonical name, then normalised)."""
        norm = self._relation_norms.get(relation)
        if norm is None:
            norm = self._relation_norms[relation] = _norm(self._store.canonical_relation(relation))
        return norm

    def open(self, memory: list[Triplet] | tuple = ()) -> Session:
        """A fresh memory (a new namespace) holding `memory`, written in order."""
        if self._opened and self._opened % self.reset_every == 0:
            # A new store; sessions still in use keep the old one alive until they are dropped.
            self._store = TripletStore(":memory:", self.config)
        self._opened += 1
        session = Session(self, self._store, f"m{self._opened}")
        if memory:
            session.write_many(memory)
        return session

    def close(self) -> None:
        self._store.close()


class Session:
    """One namespace: writes go to the store, reads come back exactly as the store answers them."""

    def __init__(self, oracle: MemoryOracle, store: TripletStore, namespace: str) -> None:
        self._oracle = oracle
        self._store = store
        self.namespace = namespace
        self._clock = 0.0
        self._terms: tuple[set[str], set[str], set[str]] = (set(), set(), set())  # every norm ever written

    def _norms(self, triplet: Triplet) -> tuple[str, str, str]:
        s, r, o = triplet
        return _norm(s), self._oracle.relation_norm(r), _norm(o)

    def write_many(self, triplets: list[Triplet]) -> None:
        self._clock += 1.0
        self._store.write_many(triplets, namespace=self.namespace, at=self._clock)
        for t in triplets:
            for terms, norm in zip(self._terms, self._norms(t)):
                terms.add(norm)

    def write(self, triplet: Triplet) -> None:
        self.write_many([triplet])

    def facts(self) -> list[Triplet]:
        """The current facts, oldest first."""
        return [f.triplet for f in self._store.facts(self.namespace)]

    def read(self, q1: str | None, q2: str | None, q3: str | None) -> list[Triplet] | None:
        """The store's results for the query, or None when a fuzzy fallback could match (near miss)."""
        for i, value in enumerate((q1, q2, q3)):
            if value is None:
                continue
            norm = self._oracle.relation_norm(value) if i == 1 else _norm(value)
            stored = self._terms[i]
            if norm in stored:
                continue
            asked = shingles(norm)
            if any(jaccard(asked, shingles(t)) >= self._oracle.near for t in stored):
                return None
        result = self._store.query(q1, q2, q3, namespace=self.namespace, fuzzy=False)
        return result.triplets
