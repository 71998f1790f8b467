"""The triplet memory: SQLite is the record, MinHash-LSH indexes are derived from it.

Every operation is scoped to a namespace (a user or a session) and nothing crosses
namespaces. A query tries an exact match of each given field (after normalising case,
whitespace, punctuation and relation aliases); a field with no exact match falls back to the
most similar stored term of that field (see fuzzy.py). Writes of functional relations
supersede the older fact, which stays in history with its validity interval; a relation's `ends`
lets a new fact end others of the same subject at other objects (a new employer ends the roles
held at the old one).

Here: the store's checks of what it is given, its transactions, and its reads. A fact's versions
(what a write supersedes, restore, import, purge, `memlm memory check`) are history.py's, the
relation table memory_config.py's, and the fuzzy indexes, derived from the database and never persisted,
fuzzy_indexes.py's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path

from memory_runtime.memory import history
from memory_runtime.memory.database import Cursor, Database
from memory_runtime.memory.facts import (
    COLUMNS,
    FIELDS,
    Fact,
    FieldMatch,
    QueryResult,
    WriteResult,
    fact_from_row,
    id_chunks,
)
from memory_runtime.memory.fuzzy import FuzzyIndex, FuzzyMatch
from memory_runtime.memory.fuzzy_indexes import IndexMissing, ResidentIndexes
from memory_runtime.memory.history import VERSION, BrokenLink, HistoryProblem, ImportResult, RestoreRefused
from memory_runtime.memory.location import open_database
from memory_runtime.memory.memory_config import MemoryConfig, RelationTable
from memory_runtime.memory.terms import checked_namespace, checked_term, relation_words
from memory_runtime.protocol import Triplet


def _timestamp(value: float | datetime | None, what: str) -> float:
    if value is None:
        return time.time()
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if not math.isfinite(seconds):
            raise ValueError(f"{what} must be a finite unix time, got {value!r}")
        return seconds
    raise TypeError(f"{what} must be a unix time or a datetime, got {type(value).__name__}")


MAX_ROW_NUMBER = 2**63 - 1  # the largest id, offset or limit a database takes (a signed 64-bit integer)


# --------------------------------------------------------------------------- the store


class TripletStore:
    """A namespaced, persistent triplet memory with exact-then-fuzzy lookup.

    Thread-safe, so a server shares one store: listings read what was last committed without waiting
    for any write (location.py), writes take turns in the database's transactions, and the resident
    fuzzy indexes (fuzzy_indexes.py) have a lock of their own; a write updates them once its
    transaction has committed.
    """

    def __init__(self, path: str | Path = ":memory:", config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig.load()
        self.path = str(path)  # an SQLite file (":memory:" included) or a postgresql:// URL
        self._db = open_database(self.path)
        self._fuzzy = ResidentIndexes(self._db, self.config.fuzzy, self.config.max_indexes)
        self._relations = RelationTable(self.config)  # relations as written -> canonical, and their rules

    @classmethod
    def scratch(
        cls, config: MemoryConfig | None = None, facts: Iterable[Triplet | tuple] = (), namespace: str = "default"
    ) -> TripletStore:
        """A throwaway memory in RAM holding `facts` as known from the start (stored at time 1.0, before
        anything a turn writes): what a record's, a task's, a sampled run's or a correction's turn runs against."""
        store = cls(":memory:", config)
        if facts := list(facts):
            store.write_many(facts, namespace=namespace, at=1.0)
        return store

    @property
    def read_only(self) -> bool:
        """Whether the memory was opened for reading only (a file this process cannot write): every
        write raises ReadOnlyDatabaseError, and nothing is written to it."""
        return self._db.read_only

    @property
    def read_only_notice(self) -> str | None:
        """One line saying the memory was opened read-only, and why (None where it is writable)."""
        if not self.read_only:
            return None
        return f"memory {self.path} is read-only ({self._db.read_only_reason}): opened for reading"

    def refuse_writes(self) -> None:
        """ReadOnlyDatabaseError (naming the memory and why) where it was opened read-only: for a caller
        to refuse a write before it begins; every write raises it anyway."""
        self._db.refuse_writes()

    def close(self) -> None:
        with self._fuzzy.lock:
            self._db.close()
            self._fuzzy.clear()

    def __enter__(self) -> TripletStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ normalising input

    def canonical_relation(self, relation: str) -> str:
        """The canonical name of a relation (an alias, or the same content words as a name or alias:
        "customer" -> "customer of"), or the relation as written when the table does not know it."""
        return self._relations.terms(relation)[0]

    # ------------------------------------------------------------------ writing

    def write(
        self,
        subject: str,
        relation: str,
        object: str,
        *,
        namespace: str = "default",
        at: float | datetime | None = None,
        source: str | None = None,
    ) -> WriteResult:
        """Store one fact (deduplicated; superseding for functional relations)."""
        return self.write_many([(subject, relation, object)], namespace=namespace, at=at, source=source)[0]

    def write_many(
        self,
        triplets: Iterable[tuple[str, str, str] | Triplet],
        *,
        namespace: str = "default",
        at: float | datetime | None = None,
        source: str | None = None,
    ) -> list[WriteResult]:
        """Store a batch in one transaction: all of it is validated first, so bad input stores nothing.
        `source` says what wrote it (kept with each stored fact; a duplicate keeps the first one's)."""
        self._db.refuse_writes()  # a memory opened read-only: refused before anything is done
        namespace = checked_namespace(namespace)
        when = _timestamp(at, "at")
        checked = []
        for i, item in enumerate(triplets):
            try:
                subject, relation, object_ = item
            except (TypeError, ValueError):
                raise ValueError(f"triplet #{i} must be (subject, relation, object), got {item!r}") from None
            terms = self._relations.fact_terms(subject, relation, object_)
            if terms[0][1] == terms[2][1]:
                raise ValueError(
                    f"triplet #{i} relates {terms[0][0]!r} to itself: a fact is between two different things"
                )
            checked.append(terms)
        with self._db.transaction(namespace) as cur:
            results = [history.write_version(cur, self._relations, namespace, terms, when, source) for terms in checked]
        self._fuzzy.add(namespace, checked)
        return results

    def checked_triplet(self, subject: object, relation: object, object_: object) -> Triplet:
        """The fact as the store would keep it (whitespace collapsed, the relation canonical), or
        TypeError / ValueError naming what is wrong: what a write checks, without writing."""
        (s, s_norm), (r, _), (o, o_norm) = self._relations.fact_terms(subject, relation, object_)
        if s_norm == o_norm:
            raise ValueError(f"it relates {s!r} to itself: a fact is between two different things")
        return Triplet(s, r, o)

    def import_versions(
        self, versions: Sequence[Fact], *, namespace: str = "default", source: str = "import"
    ) -> ImportResult:
        """Store facts with their history, in one transaction (all or nothing): what an import of an
        export restores (memory_runtime/memory/transfer.py reads and checks the file first).

        Each version is a Fact as exported: its `id` and `superseded_by` are the file's (a link to no
        id of `versions` is refused). It is stored under a new id with its valid_from, valid_to,
        ended_by and source (None: `source`), its link pointing at the new id. A version that is in
        the namespace already (the same fact valid from the same time), or a current version of a
        fact current there, is a duplicate: the namespace keeps its own, so importing an export into
        the namespace it came from stores nothing, whatever was done there since. Current versions
        meet the namespace's current facts as writes do, in time order: of a functional relation, or
        of one that ends another's, the older is ended, superseded by the newer, whichever is new.
        """
        self._db.refuse_writes()
        namespace = checked_namespace(namespace)
        checked = []
        for i, fact in enumerate(versions):
            terms = self._relations.fact_terms(fact.subject, fact.relation, fact.object)
            if terms[0][1] == terms[2][1]:
                raise ValueError(f"version #{i} relates {terms[0][0]!r} to itself")
            ended = fact.valid_to is not None
            if ended != (fact.ended_by is not None) or (ended and fact.valid_to < fact.valid_from):
                raise ValueError(f"version #{i}: valid_to and ended_by must both be set, after valid_from, or neither")
            checked.append((fact, terms))
        ids = {fact.id for fact in versions}
        if len(ids) != len(versions):
            raise ValueError("two versions have the same id: a link could not say which it means")
        for i, fact in enumerate(versions):
            if fact.superseded_by is not None and fact.superseded_by not in ids:
                raise ValueError(f"version #{i} links to {fact.superseded_by}, which is no version of the import")
        result = history.import_versions(self._db, self._relations, namespace, checked, versions, source)
        self._fuzzy.add(namespace, [terms for _, terms in checked])
        return result

    # ------------------------------------------------------------------ reading

    def query(
        self,
        subject: str | None = None,
        relation: str | None = None,
        object: str | None = None,
        *,
        namespace: str = "default",
        as_of: float | datetime | None = None,
        fuzzy: bool = True,
    ) -> QueryResult:
        """Facts matching every given field: current ones, or those valid at `as_of`. Of a symmetric
        relation (MemoryConfig.symmetric), also the facts with the given names the other way round; asked
        for one name alone (``X>>>>``), also the symmetric facts that name it on the other side."""
        namespace = checked_namespace(namespace)
        given = {name: value for name, value in zip(FIELDS, (subject, relation, object)) if value is not None}
        if not given:
            raise ValueError("query needs at least one of subject, relation, object (use facts() to list all)")
        result = self._query_building(namespace, given, as_of, fuzzy)
        symmetric = self.config.symmetric
        both_ways = relation is not None and self.canonical_relation(relation) in symmetric
        one_name = relation is None and (subject is None) != (object is None) and bool(symmetric)
        if not (both_ways or one_name) or (subject is None and object is None) or subject == object:
            return result
        swapped = {**given, "subject": object, "object": subject}
        other = self._query_building(namespace, {k: v for k, v in swapped.items() if v is not None}, as_of, fuzzy)
        seen = {fact.id for fact in result.facts}
        turned = [fact for fact in other.facts if fact.id not in seen]
        if one_name:  # only a symmetric relation holds the other way round
            turned = [fact for fact in turned if self.canonical_relation(fact.relation) in symmetric]
        facts = result.facts + turned
        facts.sort(key=lambda fact: (fact.valid_from, fact.id))
        return QueryResult(facts, {**other.fuzzy, **result.fuzzy})

    def _query_building(self, namespace: str, given: dict[str, str], as_of, fuzzy: bool) -> QueryResult:
        while True:
            try:
                return self._query(namespace, given, as_of, fuzzy)
            except IndexMissing as missing:  # built outside the lock: other users' queries go on meanwhile
                self._fuzzy.build(namespace, missing.field)

    def _query(self, namespace: str, given: dict[str, str], as_of, fuzzy: bool) -> QueryResult:
        where, params, matches = ["namespace = ?"], [namespace], {}
        with self._fuzzy.lock:
            for name, value in given.items():
                norm = self._relations.terms(value)[1] if name == "relation" else checked_term(value, name)[1]
                if not self._has_term(namespace, name, norm):
                    match = None
                    if fuzzy and name == "relation":
                        match = self._relation_word_match(namespace, norm)
                    if fuzzy and match is None:
                        match = self._fuzzy.resident(namespace, name).search(norm)
                    display = None if match is None else self._display(namespace, name, match.term)
                    if display is None:  # no match, or a term another process purged since the index learned it
                        if match is not None:
                            self._fuzzy.resident(namespace, name).remove(match.term)
                        return QueryResult([], matches)
                    norm = match.term
                    matches[name] = FieldMatch(name, value, display, match.score)
                where.append(f"{name}_norm = ?")
                params.append(norm)
            where.append(self._validity_clause(as_of, params))
            rows = self._db.rows(
                f"SELECT {COLUMNS} FROM triplets WHERE {' AND '.join(where)} ORDER BY valid_from, id", params
            )
        return QueryResult([fact_from_row(row) for row in rows], matches)

    def facts(
        self,
        namespace: str = "default",
        *,
        as_of: float | datetime | None = None,
        relation: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[Fact]:
        """The namespace's current facts (or those valid at `as_of`; of one `relation`, matched
        exactly after its aliases), oldest first (or newest first); `limit` and `offset` page
        through them in SQL (a large memory is never loaded to be sliced)."""
        if (limit is not None and not 1 <= limit <= MAX_ROW_NUMBER) or not 0 <= offset <= MAX_ROW_NUMBER:
            raise ValueError(
                f"limit must be >= 1 and offset >= 0, both at most {MAX_ROW_NUMBER}, got {limit} and {offset}"
            )
        where, params = self._listing_where(namespace, as_of, relation)
        page = ""
        if limit is not None or offset:
            page = " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        order = "valid_from DESC, id DESC" if newest_first else "valid_from, id"
        rows = self._db.rows(f"SELECT {COLUMNS} FROM triplets WHERE {where} ORDER BY {order}{page}", params)
        return [fact_from_row(row) for row in rows]

    def count(
        self,
        namespace: str = "default",
        *,
        current: bool = True,
        as_of: float | datetime | None = None,
        relation: str | None = None,
    ) -> int:
        """How many facts the namespace holds: current ones, those valid at `as_of`, or every
        version (current=False); of one `relation` when it is given."""
        where, params = self._listing_where(namespace, as_of, relation, every_version=not current and as_of is None)
        return self._db.row(f"SELECT COUNT(*) FROM triplets WHERE {where}", params)[0]

    def relations(self, namespace: str = "default", *, limit: int = 1000) -> list[tuple[str, int]]:
        """The relations of the namespace's current facts with how many facts each has, most used first."""
        namespace = checked_namespace(namespace)
        rows = self._db.rows(
            "SELECT MAX(relation), COUNT(*) AS n FROM triplets WHERE namespace = ? AND valid_to IS NULL "
            "GROUP BY relation_norm ORDER BY n DESC, 1 LIMIT ?",
            (namespace, limit),
        )
        return [(row[0], row[1]) for row in rows]

    def iter_facts(self, namespace: str = "default", *, current: bool = True, page: int = 1000) -> Iterator[Fact]:
        """The namespace's facts (current ones, or every version) in id order, `page` rows per
        statement: a memory of any size, never held whole (each page as it is when read: an export
        reads snapshot_facts)."""
        namespace = checked_namespace(namespace)
        yield from _paged(self._db, namespace, current, page)

    def snapshot_facts(self, namespace: str = "default", *, page: int = 1000) -> Iterator[tuple[bool, Fact]]:
        """The namespace as one moment saw it, for an export: (True, fact) for each current fact, then
        (False, version) for every version, each in id order, `page` rows per statement, all from one
        read snapshot of the database (what is written meanwhile is not seen, and waits for nothing)."""
        namespace = checked_namespace(namespace)
        with self._db.snapshot() as cur:
            for current in (True, False):
                yield from ((current, fact) for fact in _paged(cur, namespace, current, page))

    def history(
        self,
        subject: str | None = None,
        relation: str | None = None,
        object: str | None = None,
        *,
        namespace: str = "default",
    ) -> list[Fact]:
        """Every version of the matching facts (exact match), oldest first, superseded and forgotten included."""
        where, params = self._exact_where(namespace, subject, relation, object, require=False)
        rows = self._db.rows(f"SELECT {COLUMNS} FROM triplets WHERE {where} ORDER BY valid_from, id", params)
        return [fact_from_row(row) for row in rows]

    def namespaces(self, *, after: str | None = None, limit: int | None = None) -> list[str]:
        """The namespaces that hold facts, in order: all of them, or a page of `limit` after `after`
        (read through the (namespace, id) index, one namespace at a time: no DISTINCT over every row)."""
        if limit is not None and not 1 <= limit <= MAX_ROW_NUMBER:
            raise ValueError(f"limit must be from 1 to {MAX_ROW_NUMBER}, got {limit}")
        names: list[str] = []
        last = after
        while limit is None or len(names) < limit:
            row = self._db.row(
                "SELECT MIN(namespace) FROM triplets" + (" WHERE namespace > ?" if last is not None else ""),
                () if last is None else (last,),
            )
            if row is None or row[0] is None:
                break
            last = row[0]
            names.append(last)
        return names

    # ------------------------------------------------------------------ forgetting

    def forget(
        self,
        subject: str | None = None,
        relation: str | None = None,
        object: str | None = None,
        *,
        namespace: str = "default",
        purge: bool = False,
        at: float | datetime | None = None,
    ) -> int:
        """End the matching current facts (exact match only); they stay in history.

        With purge=True the matching facts are deleted for good (for users who ask that their data
        be erased), every version of them: each with the facts it superseded of the same subject
        and relation (its earlier values, back to the first). A fact of another subject or relation
        that one of them ended (a role at the old employer, the previous holder of an object-
        functional relation) stays ended, its link to the erased fact removed, so nothing points at
        a missing row. Returns how many rows were ended or deleted.
        """
        self._db.refuse_writes()
        where, params = self._exact_where(namespace, subject, relation, object, require=True)
        namespace = params[0]
        with self._db.transaction(namespace) as cur:
            if not purge:
                return cur.execute(
                    f"UPDATE triplets SET valid_to = ?, ended_by = 'forgotten' WHERE {where} AND valid_to IS NULL",
                    [_timestamp(at, "at"), *params],
                )
            doomed = history.earlier_versions(
                cur, namespace, cur.rows(f"SELECT {VERSION} FROM triplets WHERE {where}", params)
            )
            for ids in id_chunks(list(doomed)):
                marks = ", ".join("?" * len(ids))
                cur.execute(f"DELETE FROM triplets WHERE namespace = ? AND id IN ({marks})", (namespace, *ids))
                cur.execute(  # what they ended of other subjects or relations
                    f"UPDATE triplets SET superseded_by = NULL WHERE namespace = ? AND superseded_by IN ({marks})",
                    (namespace, *ids),
                )
        # committed: the resident indexes let go of the terms no fact has any more
        self._fuzzy.purged(namespace, list(doomed.values()), lambda name, norm: self._has_term(namespace, name, norm))
        return len(doomed)

    def restore(self, fact_id: int, *, namespace: str = "default", at: float | datetime | None = None) -> Fact:
        """Undo a forget: the forgotten fact `fact_id` is current again as a new version (valid from
        `at`, source "restore"), the forgotten one staying in history as it was, so the history
        shows the forget and the restore both. Refused (RestoreRefused, saying why) for a fact not in
        the namespace (purged: erased for good; or never there), one that is current or was
        superseded rather than forgotten, one current again already, and one whose return would end
        a current fact (a functional relation's value that took its place). A restore brings one
        fact back and changes nothing else: a restored employer does not end the roles held since
        (`ends`), as they were not ended when they were written beside it."""
        self._db.refuse_writes()
        namespace = checked_namespace(namespace)
        if not isinstance(fact_id, int) or isinstance(fact_id, bool):
            raise TypeError(f"fact_id must be an integer, got {type(fact_id).__name__}")
        if not 1 <= fact_id <= MAX_ROW_NUMBER:
            raise RestoreRefused(f"fact {fact_id} is not in namespace {namespace!r}: no fact has that id", missing=True)
        when = _timestamp(at, "at")
        return history.restore(self._db, self._relations, namespace, fact_id, when)

    def broken_links(self) -> list[BrokenLink]:
        """Every fact, of any namespace, whose `superseded_by` points at no fact or at a fact of
        another namespace (`memlm memory check`); none in a memory this memlm wrote."""
        return history.broken_links(self._db)

    def history_problems(self) -> list[HistoryProblem]:
        """Every fact, of any namespace, whose history cannot have happened (`memlm memory check`):
        history.history_problems says which."""
        return history.history_problems(self._db)

    def unlink_cycles(self) -> int:
        """Break the cycles history_problems() finds: each fact of one keeps its end, without a successor
        (as when its successor is purged); how many links it removed."""
        return history.unlink_cycles(self._db)

    def unlink_mistimed(self) -> int:
        """Remove the links of superseded facts that did not end when their successor began (the facts
        stay, ended as they were); how many."""
        return history.unlink_mistimed(self._db)

    def unlink_broken(self) -> int:
        """Remove the broken links broken_links() finds (the facts stay, ended as they were); how many."""
        return history.unlink_broken(self._db)

    # ------------------------------------------------------------------ helpers

    def _exact_where(self, namespace, subject, relation, object_, *, require: bool) -> tuple[str, list]:
        namespace = checked_namespace(namespace)
        where, params = ["namespace = ?"], [namespace]
        for name, value in zip(FIELDS, (subject, relation, object_)):
            if value is None:
                continue
            norm = self._relations.terms(value)[1] if name == "relation" else checked_term(value, name)[1]
            where.append(f"{name}_norm = ?")
            params.append(norm)
        if require and len(params) == 1:
            raise ValueError("forget needs at least one of subject, relation, object")
        return " AND ".join(where), params

    def _listing_where(self, namespace, as_of, relation, *, every_version: bool = False) -> tuple[str, list]:
        """The WHERE clause of a listing: a namespace, a time (None: now) or every version, maybe one relation."""
        params: list = [checked_namespace(namespace)]
        where = "namespace = ?"
        if relation is not None:
            where += " AND relation_norm = ?"
            params.append(self._relations.terms(relation)[1])
        return (where if every_version else f"{where} AND {self._validity_clause(as_of, params)}"), params

    @staticmethod
    def _validity_clause(as_of: float | datetime | None, params: list) -> str:
        if as_of is None:
            return "valid_to IS NULL"
        t = _timestamp(as_of, "as_of")
        params.extend([t, t])
        return "valid_from <= ? AND (valid_to IS NULL OR valid_to > ?)"

    def _has_term(self, namespace: str, name: str, norm: str, cur: Cursor | None = None) -> bool:
        sql = f"SELECT 1 FROM triplets WHERE namespace = ? AND {name}_norm = ? LIMIT 1"
        return (cur or self._db).row(sql, (namespace, norm)) is not None

    def _relation_word_match(self, namespace: str, norm: str) -> FuzzyMatch | None:
        """The stored relation with the same content words as `norm` ("coach of" -> "coaches"), the
        most used one if several have them; a namespace holds few relations, so they are scanned."""
        words = relation_words(norm)
        rows = self._db.rows(
            "SELECT relation_norm, COUNT(*) AS n FROM triplets WHERE namespace = ? "
            "GROUP BY relation_norm ORDER BY n DESC, relation_norm",
            (namespace,),
        )
        found = next((row[0] for row in rows if relation_words(row[0]) == words), None)
        return FuzzyMatch(norm, found, 1.0) if found is not None else None

    def _display(self, namespace: str, name: str, norm: str) -> str | None:
        row = self._db.row(
            # +id: see COLUMNS
            f"SELECT {name} FROM triplets WHERE namespace = ? AND {name}_norm = ? ORDER BY +id DESC LIMIT 1",
            (namespace, norm),
        )
        return None if row is None else row[0]

    def warm_fuzzy(self, namespace: str = "default") -> float:
        """Make the namespace's fuzzy indexes resident now (a page about to search calls this when
        it opens, so its first search with a typo does not wait for a build); seconds it took."""
        start = time.perf_counter()
        namespace = checked_namespace(namespace)
        for name in FIELDS:
            self.fuzzy_index(namespace, name)
        return time.perf_counter() - start

    def fuzzy_index(self, namespace: str, name: str) -> FuzzyIndex:
        """The resident index of one (namespace, field), built from the database if it is not resident."""
        return self._fuzzy.get(namespace, name)


def _paged(db: Database | Cursor, namespace: str, current: bool, page: int) -> Iterator[Fact]:
    """A namespace's facts (current ones, or every version) in id order, `page` rows per statement."""
    clause = " AND valid_to IS NULL" if current else ""
    last = 0
    while True:
        rows = db.rows(
            f"SELECT {COLUMNS} FROM triplets WHERE namespace = ? AND id > ?{clause} ORDER BY id LIMIT ?",
            (namespace, last, page),
        )
        if not rows:
            return
        yield from (fact_from_row(row) for row in rows)
        last = rows[-1][0]
