"""The fuzzy indexes a store keeps resident: derived from the database, never persisted.

One per (namespace, field), built the first time a fuzzy lookup needs it and kept in sync by every
later write (of this process, and of any other on the same database) and purge; at most
`MemoryConfig.max_indexes` stay resident (least recently used are dropped), so 10,000 users cost
neither 10,000 indexes nor a slow start. `lock` guards them; a store's query holds it while it reads
an index, and a write adds its terms under it once its transaction has committed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from memory_runtime.memory.database import Database
from memory_runtime.memory.facts import FIELDS
from memory_runtime.memory.fuzzy import FuzzyConfig, FuzzyIndex


class IndexMissing(Exception):
    """A query needs a fuzzy index that is not resident: it is built outside the lock, then the query runs again."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class ResidentIndexes:
    """The resident indexes of one store's database, by (namespace, field)."""

    def __init__(self, db: Database, config: FuzzyConfig, max_indexes: int) -> None:
        self.lock = threading.RLock()  # the indexes' state (never held while waiting for a write)
        self._db = db
        self._config = config
        self._max_indexes = max_indexes
        self._seen: dict[tuple[str, str], int] = {}  # (namespace, field) -> last row id its resident index has
        self._indexes: OrderedDict[tuple[str, str], FuzzyIndex] = OrderedDict()
        self._purges: dict[str, int] = {}  # namespace -> purges so far (an index built across one is discarded)
        self._building: dict[tuple[str, str], threading.Event] = {}  # builds in flight: others wait, not rebuild

    def keys(self) -> list[tuple[str, str]]:
        """The (namespace, field) of every resident index, least recently used first."""
        with self.lock:
            return list(self._indexes)

    def clear(self) -> None:
        with self.lock:
            self._indexes.clear()

    def get(self, namespace: str, name: str) -> FuzzyIndex:
        """The resident index of one (namespace, field), built from the database if it is not resident."""
        while True:
            try:
                with self.lock:
                    return self.resident(namespace, name)
            except IndexMissing:
                self.build(namespace, name)

    def resident(self, namespace: str, name: str) -> FuzzyIndex:
        """The index if resident (now the most recently used); IndexMissing if not. Under the lock."""
        if name not in FIELDS:
            raise ValueError(f"no field {name!r}: a fuzzy index is of one of {', '.join(FIELDS)}")
        key = (namespace, name)
        index = self._indexes.get(key)
        if index is None:
            raise IndexMissing(name)
        self._indexes.move_to_end(key)
        self._catch_up(key, index)
        return index

    def add(self, namespace: str, checked: Sequence[tuple[tuple[str, str], ...]]) -> None:
        """Add committed terms, (display, norm) of each field, to the namespace's resident indexes (after
        the transaction: a writer never waits for the lock that readers hold while it holds the database)."""
        with self.lock:
            for i, name in enumerate(FIELDS):
                index = self._indexes.get((namespace, name))
                if index is not None:
                    index.add(terms[i][1] for terms in checked)

    def purged(self, namespace: str, rows: Sequence[tuple], stored: Callable[[str, str], bool]) -> None:
        """After a purge has committed: the resident indexes let go of the terms of `rows` (of
        history.VERSION) that no fact has any more (`stored(field, norm)`: whether one still has it);
        an index being built meanwhile is discarded."""
        with self.lock:
            self._purges[namespace] = self._purges.get(namespace, 0) + 1  # an index being built is stale
            for i, name in enumerate(FIELDS):
                index = self._indexes.get((namespace, name))
                if index is None:
                    continue
                for norm in {row[i + 2] for row in rows}:
                    if not stored(name, norm):  # (a write since may have brought it back)
                        index.remove(norm)

    def _catch_up(self, key: tuple[str, str], index: FuzzyIndex) -> None:
        """Add the terms written since the index last looked, by any process (a second server on the
        same database): the rows of the namespace past the last id it has seen. Writers of a
        namespace take turns (location.py), so its ids commit in order. Under the lock."""
        namespace, name = key
        rows = self._db.rows(
            f"SELECT id, {name}_norm FROM triplets WHERE namespace = ? AND id > ? ORDER BY id",
            (namespace, self._seen.get(key, 0)),
        )
        if rows:
            index.add(row[1] for row in rows)
            self._seen[key] = rows[-1][0]

    def build(self, namespace: str, name: str) -> None:
        """Build one (namespace, field) index and make it resident. The terms are read under the lock,
        the MinHash signatures (most of the time: ~56 s at a million terms) are computed outside it,
        then the terms written meanwhile are added; a purge meanwhile discards the build (the caller
        retries)."""
        if name not in FIELDS:
            raise ValueError(f"no field {name!r}: a fuzzy index is of one of {', '.join(FIELDS)}")
        key = (namespace, name)
        with self.lock:
            if key in self._indexes:
                return
            building = self._building.get(key)
            if building is None:
                self._building[key] = threading.Event()
        if building is not None:  # another thread builds it: wait for that build (the caller looks again)
            building.wait()
            return
        try:
            self._build_unlocked(key)
        finally:
            with self.lock:
                self._building.pop(key).set()

    def _build_unlocked(self, key: tuple[str, str]) -> None:
        """build's work, by the one thread building this key."""
        namespace, name = key
        with self.lock:
            purges = self._purges.get(namespace, 0)
            last_id = self._db.row("SELECT COALESCE(MAX(id), 0) FROM triplets WHERE namespace = ?", (namespace,))[0]
            terms = [
                row[0]
                for row in self._db.rows(
                    f"SELECT DISTINCT {name}_norm FROM triplets WHERE namespace = ? AND id <= ?", (namespace, last_id)
                )
            ]
        index = FuzzyIndex(self._config)
        index.add(terms)  # one add for all terms: the signature matrix is allocated once, at its final size
        with self.lock:
            if key in self._indexes or self._purges.get(namespace, 0) != purges:
                return
            self._indexes[key] = index
            self._seen[key] = last_id
            self._catch_up(key, index)  # the terms written meanwhile
            while len(self._indexes) > self._max_indexes:
                evicted, _ = self._indexes.popitem(last=False)
                self._seen.pop(evicted, None)
