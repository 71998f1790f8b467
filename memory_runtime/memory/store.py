"""The triplet memory: SQLite is the record, MinHash-LSH indexes are derived from it.

Every operation is scoped to a namespace (a user or a session) and nothing crosses
namespaces. A query tries an exact match of each given field (after normalising case,
whitespace, punctuation and relation aliases); a field with no exact match falls back to the
most similar stored term of that field (see fuzzy.py). Writes of functional relations
supersede the older fact, which stays in history with its validity interval; a relation's `ends`
lets a new fact end others of the same subject at other objects (a new employer ends the roles
held at the old one).

The fuzzy indexes are rebuilt from SQLite, never persisted: one per (namespace, field),
built the first time a fuzzy lookup needs it and kept in sync by every later write and
purge; at most `MemoryConfig.max_indexes` stay resident (least recently used are dropped),
so 10,000 users cost neither 10,000 indexes nor a slow start.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, model_validator

from memory_runtime.memory.databases import Cursor, Database, open_database
from memory_runtime.memory.fuzzy import FuzzyConfig, FuzzyIndex, FuzzyMatch
from memory_runtime.memory.terms import checked_namespace, checked_term, normalize_term, relation_words
from memory_runtime.protocol import Triplet
from memory_runtime.yaml_config import Strict, read_mapping

FIELDS = ("subject", "relation", "object")

_COLUMNS = "id, namespace, subject, relation, object, valid_from, valid_to, ended_by, superseded_by, source"
# A lookup by a field's value that wants its rows in id order says ORDER BY +id: with a bare `id`,
# SQLite's planner walks the (namespace, id) index to skip a sort, which reads the whole namespace
# (18 ms a fuzzy lookup at 100k facts); `+id` keeps it on the field's index. PostgreSQL is unaffected.


# --------------------------------------------------------------------------- configuration


class RelationSpec(Strict):
    name: str = Field(min_length=1)
    aliases: list[str] = []
    functional: Literal["subject", "object", "both"] | None = None
    ends: list[str] = Field(
        default_factory=list,
        description="relations of the same subject that a new fact of "
        "this one ends at every other object (a new employer ends the roles at the old one)",
    )
    symmetric: bool = Field(
        False,
        description="it holds both ways (A spouse of B: B spouse of A): a query with its names either way round "
        "finds the fact (the schema's `symmetric: true`)",
    )
    common_object: bool = Field(
        False,
        description="its objects are common nouns, written in small letters (a food: peanuts), which the "
        "decoding's copy rules otherwise refuse as naming nobody (the schema's type `common: true`)",
    )


# The relation table a dataset was generated with (`memlm generate` writes it from the schema), kept in
# every run trained on it: the memory of a trained model is opened with the relations it learned.
RELATION_TABLE_FILE = "relations.yaml"
ANY_RELATION = "*"  # in MemoryConfig.common_objects: every relation outside the table (open relations)


class MemoryConfig(Strict):
    """The store's settings: the relation table, the fuzzy fallback, how many indexes stay resident."""

    what = "memory config"

    relations: list[RelationSpec] = []
    open_relations: bool = Field(
        False,
        description="relations outside the table are what the memory is mostly about (a conversation's 'went to',"
        " 'painted', 'adopted'): kept as written, decoded freely, their objects may be common nouns",
    )
    fuzzy: FuzzyConfig = FuzzyConfig()
    max_indexes: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _aliases_unique(self) -> MemoryConfig:
        _ = self.canonical_names  # raises on an alias claimed by two relations
        names = {spec.name for spec in self.relations}
        for spec in self.relations:
            unknown = [name for name in spec.ends if name not in names]
            if unknown:
                raise ValueError(f"relation {spec.name!r}: ends {unknown}, which are not relation names of the table")
        return self

    @property
    def canonical_names(self) -> dict[str, str]:
        """The table's alias map: every name and alias, normalised -> its canonical relation name."""
        owner: dict[str, str] = {}
        for spec in self.relations:
            for surface in [spec.name, *spec.aliases]:
                key = normalize_term(surface)
                if owner.get(key, spec.name) != spec.name:
                    raise ValueError(f"relation alias {surface!r} is claimed by both {owner[key]!r} and {spec.name!r}")
                owner[key] = spec.name
        return owner

    @property
    def symmetric(self) -> frozenset[str]:
        """The relations that hold both ways (RelationSpec.symmetric)."""
        return frozenset(spec.name for spec in self.relations if spec.symmetric)

    @property
    def common_objects(self) -> frozenset[str]:
        """The relations whose objects are common nouns (RelationSpec.common_object); with open relations also
        ANY_RELATION, which stands for every relation outside the table ("went to": "pottery class")."""
        named = frozenset(spec.name for spec in self.relations if spec.common_object)
        return named | {ANY_RELATION} if self.open_relations else named

    @property
    def relation_names(self) -> list[str] | None:
        """The canonical relation names (None for an empty table or open relations: relations are then free)."""
        if self.open_relations:
            return None
        return [spec.name for spec in self.relations] or None

    @classmethod
    def of_model(cls, model: str | Path | None, path: str | Path | None = None) -> MemoryConfig:
        """The memory config at `path` (None: memlm's defaults), with the relation table of the run
        `model` was trained in where it keeps one (RELATION_TABLE_FILE) and `path` gives none."""
        table = Path(str(model)).expanduser() / RELATION_TABLE_FILE if model else None
        if table is None or not table.is_file():
            return cls.load(path)
        learned = read_mapping(table, cls.what)
        settings = read_mapping(Path(path), cls.what) if path is not None else {}
        merged = {**cls.read_yaml(None), **settings, "relations": settings.get("relations", learned.get("relations"))}
        if "open_relations" in learned and "open_relations" not in settings:
            merged["open_relations"] = learned["open_relations"]
        return cls.from_dict(merged, source=f"{path or 'defaults'} with the relation table {table}")

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict:
        """A memory config file over memlm's defaults: None gives them; a file without `relations`
        keeps the relation table shipped with memlm (memory_runtime/memory/relations.yaml)."""
        shipped = yaml.safe_load(resources.files("memory_runtime.memory").joinpath("relations.yaml").read_text())
        return shipped if path is None else {"relations": shipped["relations"], **read_mapping(path, cls.what)}


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Fact:
    """One stored triplet with its validity interval (valid_to None = current)."""

    subject: str
    relation: str
    object: str
    id: int
    namespace: str
    valid_from: float
    valid_to: float | None = None
    ended_by: str | None = None
    superseded_by: int | None = None
    source: str | None = None  # what wrote it: a served chat turn's id (chatcmpl-...), "import", "page", "correction"

    @property
    def triplet(self) -> Triplet:
        return Triplet(self.subject, self.relation, self.object)

    @property
    def current(self) -> bool:
        return self.valid_to is None


def local_time(seconds: float | None) -> str:
    """A fact's time as people read it, as the memory page shows it: YYYY-MM-DD HH:MM:SS, local
    ('' for none: a current fact's end)."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0")


@dataclass(frozen=True)
class FieldMatch:
    """A query field answered by a fuzzy match rather than an exact one."""

    field: str
    asked: str
    matched: str  # the stored term as written
    score: float  # exact Jaccard of 3-gram shingles


@dataclass(frozen=True)
class QueryResult:
    """All matching facts (aggregation), and which fields were matched fuzzily."""

    facts: list[Fact]
    fuzzy: dict[str, FieldMatch] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)

    @property
    def triplets(self) -> list[Triplet]:
        return [f.triplet for f in self.facts]


@dataclass(frozen=True)
class BrokenLink:
    """A fact whose `superseded_by` points at no fact (`target_namespace` None) or at another namespace's."""

    fact: Fact
    target_namespace: str | None

    def __str__(self) -> str:
        f = self.fact
        where = (
            "which does not exist"
            if self.target_namespace is None
            else f"a fact of namespace {self.target_namespace!r}"
        )
        return (
            f"namespace {f.namespace!r}: fact {f.id} ({f.subject} >> {f.relation} >> {f.object},"
            f" {f.ended_by or 'current'}) says it was superseded by fact {f.superseded_by}, {where}"
        )


@dataclass(frozen=True)
class HistoryProblem:
    """A fact whose history cannot have happened (TripletStore.history_problems), with why."""

    fact: Fact
    reason: str

    def __str__(self) -> str:
        f = self.fact
        return f"namespace {f.namespace!r}: fact {f.id} ({f.subject} >> {f.relation} >> {f.object}): {self.reason}"


def superseding_cycles(successors: dict[int, int]) -> list[list[int]]:
    """The chains of `successors` (a fact's id -> the id of the fact that superseded it) that come back
    to where they started, each once, from its smallest id: no history can have happened so."""
    state: dict[int, int] = {}  # 1: on the path being walked, 2: done
    cycles = []
    for start in successors:
        path = []
        node: int | None = start
        while node is not None and node not in state:
            state[node] = 1
            path.append(node)
            node = successors.get(node)
        if node is not None and state[node] == 1:  # the walk met itself: the path from `node` on is a cycle
            cycle = path[path.index(node) :]
            first = cycle.index(min(cycle))
            cycles.append(cycle[first:] + cycle[:first])
        for seen in path:
            state[seen] = 2
    return cycles


@dataclass(frozen=True)
class WriteResult:
    fact: Fact
    status: Literal["stored", "duplicate"]
    superseded: list[Fact] = field(default_factory=list)


@dataclass(frozen=True)
class ImportResult:
    """What TripletStore.import_versions did: the versions it stored (new ids, as they ended up),
    how many were in the namespace already, and the facts that stored current versions ended."""

    stored: list[Fact]
    duplicate: int
    superseded: list[Fact]


class RestoreRefused(ValueError):
    """A restore the store will not make (TripletStore.restore), with the sentence that says why;
    `missing`: the fact is not in the namespace (purged, or never there)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


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
    for any write (databases.py), writes take turns in the database's transactions, and `_lock` guards
    the resident fuzzy indexes, which a write updates once its transaction has committed.
    """

    def __init__(self, path: str | Path = ":memory:", config: MemoryConfig | None = None) -> None:
        self.config = config or MemoryConfig.load()
        self.path = str(path)  # an SQLite file (":memory:" included) or a postgresql:// URL
        self._lock = threading.RLock()  # the fuzzy indexes' state (never held while waiting for a write)
        self._db = open_database(self.path)
        self._seen: dict[tuple[str, str], int] = {}  # (namespace, field) -> last row id its resident index has
        self._indexes: OrderedDict[tuple[str, str], FuzzyIndex] = OrderedDict()
        self._purges: dict[str, int] = {}  # namespace -> purges so far (an index built across one is discarded)
        self._building: dict[tuple[str, str], threading.Event] = {}  # builds in flight: others wait, not rebuild
        self._canonical = self.config.canonical_names  # normalised alias -> canonical relation name
        self._functional: dict[str, str] = {}  # normalised canonical name -> "subject"/"object"/"both"
        self._ends: dict[str, list[str]] = {}  # normalised canonical name -> the relations its new facts end
        self._relation_cache: dict[str, tuple[str, str]] = {}
        # content words of every name and alias -> canonical name ("customer" -> "customer of"); None: ambiguous
        self._canonical_words: dict[frozenset[str], str | None] = {}
        for spec in self.config.relations:
            for surface in [spec.name, *spec.aliases]:
                words = relation_words(normalize_term(surface))
                owner = self._canonical_words.get(words, spec.name)
                self._canonical_words[words] = spec.name if owner == spec.name else None
            if spec.functional:
                self._functional[normalize_term(spec.name)] = spec.functional
            if spec.ends:
                self._ends[normalize_term(spec.name)] = [normalize_term(name) for name in spec.ends]

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
        with self._lock:
            self._db.close()
            self._indexes.clear()

    def __enter__(self) -> TripletStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ normalising input

    def canonical_relation(self, relation: str) -> str:
        """The canonical name of a relation (an alias, or the same content words as a name or alias:
        "customer" -> "customer of"), or the relation as written when the table does not know it."""
        return self._relation_terms(relation)[0]

    def _relation_terms(self, relation: object) -> tuple[str, str]:
        """(display, norm) of a relation after alias resolution; cached, relations are few."""
        cached = self._relation_cache.get(relation) if isinstance(relation, str) else None
        if cached is None:
            display, norm = checked_term(relation, "relation")
            display = self._canonical.get(norm) or self._canonical_words.get(relation_words(norm)) or display
            cached = (display, normalize_term(display))
            if len(self._relation_cache) < 10_000:
                self._relation_cache[relation] = cached  # type: ignore[index]
        return cached

    def _terms(self, subject: object, relation: object, object_: object) -> tuple[tuple[str, str], ...]:
        return checked_term(subject, "subject"), self._relation_terms(relation), checked_term(object_, "object")

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
            terms = self._terms(subject, relation, object_)
            if terms[0][1] == terms[2][1]:
                raise ValueError(
                    f"triplet #{i} relates {terms[0][0]!r} to itself: a fact is between two different things"
                )
            checked.append(terms)
        with self._db.transaction(namespace) as cur:
            results = [self._write_one(cur, namespace, terms, when, source) for terms in checked]
        self._index_terms(namespace, checked)
        return results

    def _index_terms(self, namespace: str, checked: Sequence[tuple[tuple[str, str], ...]]) -> None:
        """Add committed terms to the namespace's resident fuzzy indexes (after the transaction: a
        writer never waits for the lock that readers hold while it holds the database)."""
        with self._lock:
            for i, name in enumerate(FIELDS):
                index = self._indexes.get((namespace, name))
                if index is not None:
                    index.add(terms[i][1] for terms in checked)

    def _write_one(
        self, cur: Cursor, namespace: str, terms, when: float, source: str | None, *, end_roles: bool = True
    ) -> WriteResult:
        """One write in two statements when nothing is ended (an insert unless the fact is already
        current, then the facts it ends on each functional side, and with `end_roles` those its
        relation's `ends` names): on PostgreSQL every statement is a round trip, and a bulk import
        is made of them."""
        (s, s_norm), (r, r_norm), (o, o_norm) = terms
        current = (
            "FROM triplets WHERE namespace=? AND subject_norm=? AND relation_norm=? AND object_norm=?"
            " AND valid_to IS NULL"
        )
        key = (namespace, s_norm, r_norm, o_norm)
        inserted = cur.row(
            "INSERT INTO triplets (namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
            f" valid_from, source) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 {current}) RETURNING id",
            (namespace, s, r, o, s_norm, r_norm, o_norm, when, source, *key),
        )
        if inserted is None:
            return WriteResult(_fact(cur.row(f"SELECT {_COLUMNS} {current}", key)), "duplicate")
        (new_id,) = inserted
        # The facts this one ends, one query per side that holds (each answered by that side's index):
        # the subject's other objects in this relation (functional subject) and in the relations a
        # new fact of it ends ("employed by" ends "CEO of"), the object's other subjects (functional object).
        functional = self._functional.get(r_norm)
        by_side = {
            ("subject", s_norm, "object", o_norm): ([r_norm] if functional in ("subject", "both") else [])
            + (self._ends.get(r_norm, []) if end_roles else []),
            ("object", o_norm, "subject", s_norm): [r_norm] if functional in ("object", "both") else [],
        }
        superseded = []
        for (held, held_norm, other, other_norm), relations in by_side.items():
            if not relations:
                continue
            marks = ", ".join("?" * len(relations))
            for row in cur.rows(
                f"SELECT {_COLUMNS} FROM triplets WHERE namespace = ? AND {held}_norm = ? AND relation_norm IN"
                f" ({marks}) AND valid_to IS NULL AND {other}_norm != ? ORDER BY +id",  # +id: see _COLUMNS
                (namespace, held_norm, *relations, other_norm),
            ):
                old = _fact(row)
                ended = replace(old, valid_to=max(when, old.valid_from), ended_by="superseded", superseded_by=new_id)
                cur.execute(
                    "UPDATE triplets SET valid_to = ?, ended_by = ?, superseded_by = ? WHERE id = ?",
                    (ended.valid_to, ended.ended_by, new_id, old.id),
                )
                superseded.append(ended)
        return WriteResult(Fact(s, r, o, new_id, namespace, when, source=source), "stored", superseded)

    def checked_triplet(self, subject: object, relation: object, object_: object) -> Triplet:
        """The fact as the store would keep it (whitespace collapsed, the relation canonical), or
        TypeError / ValueError naming what is wrong: what a write checks, without writing."""
        (s, s_norm), (r, _), (o, o_norm) = self._terms(subject, relation, object_)
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
            terms = self._terms(fact.subject, fact.relation, fact.object)
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
        # Planned outside the write transaction, against what the namespace holds now, with provisional
        # ids; inside it, the plan stands if the namespace has not changed meanwhile (else it is made again
        # there), takes real ids and is written in two statements: the transaction holds the database for
        # the writes only (60,000 facts: 4.1 s with a statement per fact and the plan made inside; every
        # other user's write waited that long)
        signature = self._namespace_signature(self._db, namespace)
        plan = self._import_plan(self._db, namespace, checked, versions, source)
        with self._db.transaction(namespace) as cur:
            if self._namespace_signature(cur, namespace) != signature:
                plan = self._import_plan(cur, namespace, checked, versions, source)
            real = dict(zip(plan.stored, self._db.new_ids(cur, len(plan.stored))))  # provisional id -> its id
            inserts, updates = plan.rows(real)
            cur.many(
                "INSERT INTO triplets (id, namespace, subject, relation, object, subject_norm, relation_norm,"
                " object_norm, valid_from, valid_to, ended_by, superseded_by, source)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                inserts,
            )
            cur.many("UPDATE triplets SET valid_to = ?, ended_by = ?, superseded_by = ? WHERE id = ?", updates)
        plan.renumber(real)  # the result's facts, once the database holds them
        self._index_terms(namespace, [terms for _, terms in checked])
        return ImportResult(list(plan.stored.values()), plan.duplicate, list(plan.superseded.values()))

    @staticmethod
    def _namespace_signature(db: Database | Cursor, namespace: str) -> tuple:
        """What changes whenever a namespace's facts do (ids are never reused: a write or a restore raises
        the largest id or the count, a purge lowers the count, an end raises the ended count)."""
        return db.row("SELECT COUNT(*), MAX(id), COUNT(valid_to) FROM triplets WHERE namespace = ?", (namespace,))

    def _import_plan(self, db: Database | Cursor, namespace: str, checked: list, versions: Sequence[Fact], source: str):
        """What import_versions writes, decided against what `db` shows of the namespace, its new versions
        under provisional (negative) ids."""
        known, current = self._met_by(db, namespace, checked)
        plan = _ImportPlan()
        provisional = itertools.count(-1, -1)
        for fact, terms in sorted(checked, key=lambda item: item[0].valid_from):  # stable: file order
            (s, s_norm), (r, r_norm), (o, o_norm) = terms
            here = known.setdefault((s_norm, r_norm, o_norm), [])
            there = next((id_ for id_, start in here if start == fact.valid_from), None)
            if there is None and fact.valid_to is None:
                there = next((id_ for id_, _ in here if id_ in current.facts), None)
            if there is not None:
                plan.new_ids[fact.id] = there
                plan.duplicate += 1
                continue
            new_id = next(provisional)
            plan.new_ids[fact.id] = new_id
            dates = (fact.valid_from, fact.valid_to, fact.ended_by)
            plan.stored[new_id] = Fact(s, r, o, new_id, namespace, *dates, None, fact.source or source)
            plan.norms[new_id] = (s_norm, r_norm, o_norm)
            here.append((new_id, fact.valid_from))
            if fact.valid_to is None:
                current.add(plan.stored[new_id], plan.norms[new_id])
                self._settle(current, plan.stored, plan.superseded, plan.ended_here, new_id)
        for fact in versions:  # the file's links, now that every version has its id here
            new_id = plan.new_ids[fact.id]
            if fact.superseded_by is not None and new_id in plan.stored:
                plan.stored[new_id] = replace(plan.stored[new_id], superseded_by=plan.new_ids[fact.superseded_by])
        return plan

    def _met_by(self, cur: Database | Cursor, namespace: str, checked: list) -> tuple[dict, _Current]:
        """What an import meets in the namespace, read a few hundred names a statement (a query per
        imported fact would be a round trip each on PostgreSQL): every version of the facts about its
        subjects, (subject, relation, object) norms -> [(id, valid_from)], and the current facts it
        may end or be ended by (of its subjects; of its objects in object-functional relations)."""
        known: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
        current = _Current()
        norms = "subject_norm, relation_norm, object_norm"
        subjects = sorted({terms[0][1] for _, terms in checked})
        for chunk in _chunks(subjects):
            for row in cur.rows(
                f"SELECT {_COLUMNS}, {norms} FROM triplets WHERE namespace = ? AND subject_norm IN"
                f" ({', '.join('?' * len(chunk))})",
                (namespace, *chunk),
            ):
                fact, key = _fact(row[:-3]), row[-3:]
                known.setdefault(key, []).append((fact.id, fact.valid_from))
                if fact.current:
                    current.add(fact, key)
        object_functional = [terms for _, terms in checked if self._functional.get(terms[1][1]) in ("object", "both")]
        held = {(terms[2][1], terms[1][1]) for terms in object_functional}
        for chunk in _chunks(sorted(held)):  # (object, relation) pairs
            pairs = " OR ".join(["(object_norm = ? AND relation_norm = ?)"] * len(chunk))
            for row in cur.rows(
                f"SELECT {_COLUMNS}, {norms} FROM triplets WHERE namespace = ? AND valid_to IS NULL AND ({pairs})",
                (namespace, *(norm for pair in chunk for norm in pair)),
            ):
                current.add(_fact(row[:-3]), row[-3:])
        return known, current

    def _settle(self, current: _Current, stored: dict, superseded: dict, ended_here: dict, new_id: int) -> None:
        """An imported current version against the current facts it meets, as writes in time order
        would have left them: of the relations either ends (a functional one, `ends`), the older fact
        is ended, superseded by the newer (a tie: the import is the newer). What changes is recorded:
        a version of the import in `stored`, a fact of the namespace in `ended_here`."""
        new, (s_norm, r_norm, o_norm) = current.facts[new_id]
        functional = self._functional.get(r_norm)
        own = {r_norm} if functional in ("subject", "both") else set()
        ends = own | set(self._ends.get(r_norm, []))
        ended_by = own | {name for name, ended in self._ends.items() if r_norm in ended}
        met = [(i, ends, ended_by) for i in current.by_subject.get(s_norm, ()) if current.facts[i][1][2] != o_norm]
        if functional in ("object", "both"):
            others = current.by_object.get(o_norm, ())
            met += [(i, {r_norm}, {r_norm}) for i in others if current.facts[i][1][0] != s_norm]
        ender = None
        for old_id, ends, ended_by in sorted(met, key=lambda item: item[0]):
            old, (_, old_relation, _) = current.facts[old_id]
            if old_relation in ends and old.valid_from <= new.valid_from:
                ended = replace(old, valid_to=new.valid_from, ended_by="superseded", superseded_by=new_id)
                superseded[old.id] = ended
                current.end(old.id)
                (stored if old.id in stored else ended_here)[old.id] = ended
            elif old_relation in ended_by and old.valid_from > new.valid_from:
                if ender is None or old.valid_from < ender.valid_from:
                    ender = old
        if ender is not None:  # a newer fact of the namespace ends it: into history
            stored[new_id] = replace(new, valid_to=ender.valid_from, ended_by="superseded", superseded_by=ender.id)
            current.end(new_id)

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
            except _IndexMissing as missing:  # built outside the lock: other users' queries go on meanwhile
                self._build_index(namespace, missing.field)

    def _query(self, namespace: str, given: dict[str, str], as_of, fuzzy: bool) -> QueryResult:
        where, params, matches = ["namespace = ?"], [namespace], {}
        with self._lock:
            for name, value in given.items():
                norm = self._relation_terms(value)[1] if name == "relation" else checked_term(value, name)[1]
                if not self._has_term(namespace, name, norm):
                    match = None
                    if fuzzy and name == "relation":
                        match = self._relation_word_match(namespace, norm)
                    if fuzzy and match is None:
                        match = self._resident_index(namespace, name).search(norm)
                    display = None if match is None else self._display(namespace, name, match.term)
                    if display is None:  # no match, or a term another process purged since the index learned it
                        if match is not None:
                            self._resident_index(namespace, name).remove(match.term)
                        return QueryResult([], matches)
                    norm = match.term
                    matches[name] = FieldMatch(name, value, display, match.score)
                where.append(f"{name}_norm = ?")
                params.append(norm)
            where.append(self._validity_clause(as_of, params))
            rows = self._db.rows(
                f"SELECT {_COLUMNS} FROM triplets WHERE {' AND '.join(where)} ORDER BY valid_from, id", params
            )
        return QueryResult([_fact(row) for row in rows], matches)

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
        rows = self._db.rows(f"SELECT {_COLUMNS} FROM triplets WHERE {where} ORDER BY {order}{page}", params)
        return [_fact(row) for row in rows]

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
        rows = self._db.rows(f"SELECT {_COLUMNS} FROM triplets WHERE {where} ORDER BY valid_from, id", params)
        return [_fact(row) for row in rows]

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
            doomed = self._versions(cur, namespace, cur.rows(f"SELECT {_VERSION} FROM triplets WHERE {where}", params))
            for ids in _chunks(list(doomed)):
                marks = ", ".join("?" * len(ids))
                cur.execute(f"DELETE FROM triplets WHERE namespace = ? AND id IN ({marks})", (namespace, *ids))
                cur.execute(  # what they ended of other subjects or relations
                    f"UPDATE triplets SET superseded_by = NULL WHERE namespace = ? AND superseded_by IN ({marks})",
                    (namespace, *ids),
                )
        with self._lock:  # committed: the resident indexes let go of the terms no fact has any more
            self._purges[namespace] = self._purges.get(namespace, 0) + 1  # an index being built is stale
            for i, name in enumerate(FIELDS):
                index = self._indexes.get((namespace, name))
                if index is None:
                    continue
                for norm in {row[i + 2] for row in doomed.values()}:
                    if not self._has_term(namespace, name, norm):  # (a write since may have brought it back)
                        index.remove(norm)
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
        with self._db.transaction(namespace) as cur:  # the restored terms are the forgotten fact's: indexed already
            row = cur.row(f"SELECT {_COLUMNS} FROM triplets WHERE namespace = ? AND id = ?", (namespace, fact_id))
            if row is None:
                raise RestoreRefused(
                    f"fact {fact_id} is not in namespace {namespace!r}: it was purged (erased for good, "
                    "which no restore undoes), or never was",
                    missing=True,
                )
            old = _fact(row)
            if old.current:
                raise RestoreRefused(f"fact {fact_id} ({_said(old)}) is current: there is nothing to restore")
            if old.ended_by != "forgotten":
                raise RestoreRefused(
                    f"fact {fact_id} ({_said(old)}) was {old.ended_by or 'ended'} by a newer fact, not forgotten: "
                    "correct the fact to bring this value back"
                )
            terms = self._terms(old.subject, old.relation, old.object)
            result = self._write_one(cur, namespace, terms, max(when, old.valid_to), "restore", end_roles=False)
            if result.status == "duplicate":
                raise RestoreRefused(f"{_said(old)} is current again already (fact {result.fact.id})")
            if result.superseded:  # raised in the transaction: nothing is written, nothing ended
                newer = result.superseded[0]
                raise RestoreRefused(
                    f"restoring {_said(old)} would end {_said(newer)} (fact {newer.id}), which holds its "
                    "place now: correct that fact instead"
                )
            return result.fact

    @staticmethod
    def _versions(cur: Cursor, namespace: str, rows: list[tuple]) -> dict[int, tuple]:
        """`rows` (of _VERSION) with every earlier version of each, by id: the facts each superseded
        of the same subject and relation, and theirs, back to the first."""
        found = {row[0]: row for row in rows}
        frontier = list(found)
        while frontier:
            later = []
            for ids in _chunks(frontier):
                for row in cur.rows(
                    f"SELECT {_VERSION} FROM triplets WHERE namespace = ? AND superseded_by IN"
                    f" ({', '.join('?' * len(ids))})",
                    (namespace, *ids),
                ):
                    newer = found[row[1]]
                    if row[0] not in found and row[2:4] == newer[2:4]:  # same subject_norm, relation_norm
                        found[row[0]] = row
                        later.append(row[0])
            frontier = later
        return found

    def broken_links(self) -> list[BrokenLink]:
        """Every fact, of any namespace, whose `superseded_by` points at no fact or at a fact of
        another namespace (`memlm memory check`); none in a memory this memlm wrote."""
        columns = ", ".join(f"a.{name}" for name in _COLUMNS.split(", "))
        rows = self._db.rows(
            f"SELECT {columns}, b.namespace FROM triplets a LEFT JOIN triplets b ON b.id = a.superseded_by"
            " WHERE a.superseded_by IS NOT NULL AND (b.id IS NULL OR b.namespace <> a.namespace)"
            " ORDER BY a.namespace, a.id"
        )
        return [BrokenLink(_fact(row[:-1]), row[-1]) for row in rows]

    def history_problems(self) -> list[HistoryProblem]:
        """Every fact, of any namespace, whose history cannot have happened (`memlm memory check`): its
        superseded_by links lead back to it, it is current yet names a successor, it ended before it
        began, or it has an end without how it ended (or the other way round). None in a memory this
        memlm wrote; an import refuses such a history (memory_runtime/memory/transfer.py)."""
        problems: list[HistoryProblem] = []
        with self._db.snapshot() as cur:  # one view across its statements
            for row in cur.rows(
                f"SELECT {_COLUMNS} FROM triplets WHERE (valid_to IS NULL AND superseded_by IS NOT NULL)"
                " OR valid_to < valid_from OR (valid_to IS NULL) <> (ended_by IS NULL) ORDER BY namespace, id"
            ):
                fact = _fact(row)
                if fact.current and fact.superseded_by is not None:
                    reason = f"it is current, yet says fact {fact.superseded_by} superseded it"
                elif fact.valid_to is not None and fact.valid_to < fact.valid_from:
                    reason = f"it ended ({local_time(fact.valid_to)}) before it began ({local_time(fact.valid_from)})"
                else:
                    reason = "it has an end without how it ended, or how it ended without an end"
                problems.append(HistoryProblem(fact, reason))
            links = dict(cur.rows("SELECT id, superseded_by FROM triplets WHERE superseded_by IS NOT NULL"))
            for cycle in superseding_cycles(links):
                marks = ", ".join("?" * len(cycle))
                rows = cur.rows(f"SELECT {_COLUMNS} FROM triplets WHERE id IN ({marks}) ORDER BY id", cycle)
                chain = " -> ".join(map(str, [*cycle, cycle[0]]))
                problems += [HistoryProblem(_fact(row), f"its successors lead back to it ({chain})") for row in rows]
        return problems

    def unlink_cycles(self) -> int:
        """Break the cycles history_problems() finds: each fact of one keeps its end, without a successor
        (as when its successor is purged); how many links it removed."""
        self._db.refuse_writes()
        removed = 0
        links = dict(self._db.rows("SELECT id, superseded_by FROM triplets WHERE superseded_by IS NOT NULL"))
        for cycle in superseding_cycles(links):
            marks = ", ".join("?" * len(cycle))
            with self._db.transaction("memlm check") as cur:
                removed += cur.execute(f"UPDATE triplets SET superseded_by = NULL WHERE id IN ({marks})", cycle)
        return removed

    def unlink_broken(self) -> int:
        """Remove the broken links broken_links() finds (the facts stay, ended as they were); how many."""
        self._db.refuse_writes()
        removed = 0
        for link in self.broken_links():
            with self._db.transaction(link.fact.namespace) as cur:
                removed += cur.execute(
                    "UPDATE triplets SET superseded_by = NULL WHERE id = ? AND superseded_by = ?",
                    (link.fact.id, link.fact.superseded_by),
                )
        return removed

    # ------------------------------------------------------------------ helpers

    def _exact_where(self, namespace, subject, relation, object_, *, require: bool) -> tuple[str, list]:
        namespace = checked_namespace(namespace)
        where, params = ["namespace = ?"], [namespace]
        for name, value in zip(FIELDS, (subject, relation, object_)):
            if value is None:
                continue
            norm = self._relation_terms(value)[1] if name == "relation" else checked_term(value, name)[1]
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
            params.append(self._relation_terms(relation)[1])
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
            # +id: see _COLUMNS
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
        """The resident index of one (namespace, field), built from SQLite if it is not resident."""
        while True:
            try:
                with self._lock:
                    return self._resident_index(namespace, name)
            except _IndexMissing:
                self._build_index(namespace, name)

    def _resident_index(self, namespace: str, name: str) -> FuzzyIndex:
        """The index if resident (now the most recently used); _IndexMissing if not. Under the lock."""
        if name not in FIELDS:
            raise ValueError(f"no field {name!r}: a fuzzy index is of one of {', '.join(FIELDS)}")
        key = (namespace, name)
        index = self._indexes.get(key)
        if index is None:
            raise _IndexMissing(name)
        self._indexes.move_to_end(key)
        self._catch_up(key, index)
        return index

    def _catch_up(self, key: tuple[str, str], index: FuzzyIndex) -> None:
        """Add the terms written since the index last looked, by any process (a second server on the
        same database): the rows of the namespace past the last id it has seen. Writers of a
        namespace take turns (databases.py), so its ids commit in order. Under the lock."""
        namespace, name = key
        rows = self._db.rows(
            f"SELECT id, {name}_norm FROM triplets WHERE namespace = ? AND id > ? ORDER BY id",
            (namespace, self._seen.get(key, 0)),
        )
        if rows:
            index.add(row[1] for row in rows)
            self._seen[key] = rows[-1][0]

    def _build_index(self, namespace: str, name: str) -> None:
        """Build one (namespace, field) index and make it resident. The terms are read under the lock,
        the MinHash signatures (most of the time: ~56 s at a million terms) are computed outside it,
        then the terms written meanwhile are added; a purge meanwhile discards the build (the caller
        retries)."""
        if name not in FIELDS:
            raise ValueError(f"no field {name!r}: a fuzzy index is of one of {', '.join(FIELDS)}")
        key = (namespace, name)
        with self._lock:
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
            with self._lock:
                self._building.pop(key).set()

    def _build_unlocked(self, key: tuple[str, str]) -> None:
        """_build_index's work, by the one thread building this key."""
        namespace, name = key
        with self._lock:
            purges = self._purges.get(namespace, 0)
            last_id = self._db.row("SELECT COALESCE(MAX(id), 0) FROM triplets WHERE namespace = ?", (namespace,))[0]
            terms = [
                row[0]
                for row in self._db.rows(
                    f"SELECT DISTINCT {name}_norm FROM triplets WHERE namespace = ? AND id <= ?", (namespace, last_id)
                )
            ]
        index = FuzzyIndex(self.config.fuzzy)
        index.add(terms)  # one add for all terms: the signature matrix is allocated once, at its final size
        with self._lock:
            if key in self._indexes or self._purges.get(namespace, 0) != purges:
                return
            self._indexes[key] = index
            self._seen[key] = last_id
            self._catch_up(key, index)  # the terms written meanwhile
            while len(self._indexes) > self.config.max_indexes:
                evicted, _ = self._indexes.popitem(last=False)
                self._seen.pop(evicted, None)


_VERSION = "id, superseded_by, subject_norm, relation_norm, object_norm"  # what a purge reads of a version


class _Current:
    """The current facts an import meets, by id with their (subject, relation, object) norms, and by
    subject and by object; kept as the import adds and ends facts (TripletStore.import_versions)."""

    def __init__(self) -> None:
        self.facts: dict[int, tuple[Fact, tuple[str, str, str]]] = {}
        self.by_subject: dict[str, set[int]] = {}
        self.by_object: dict[str, set[int]] = {}

    def add(self, fact: Fact, norms: tuple[str, str, str]) -> None:
        self.facts[fact.id] = (fact, norms)
        self.by_subject.setdefault(norms[0], set()).add(fact.id)
        self.by_object.setdefault(norms[2], set()).add(fact.id)

    def end(self, fact_id: int) -> None:
        _, (s_norm, _, o_norm) = self.facts.pop(fact_id)
        self.by_subject[s_norm].discard(fact_id)
        self.by_object[o_norm].discard(fact_id)


def _paged(db: Database | Cursor, namespace: str, current: bool, page: int) -> Iterator[Fact]:
    """A namespace's facts (current ones, or every version) in id order, `page` rows per statement."""
    clause = " AND valid_to IS NULL" if current else ""
    last = 0
    while True:
        rows = db.rows(
            f"SELECT {_COLUMNS} FROM triplets WHERE namespace = ? AND id > ?{clause} ORDER BY id LIMIT ?",
            (namespace, last, page),
        )
        if not rows:
            return
        yield from (_fact(row) for row in rows)
        last = rows[-1][0]


@dataclass
class _ImportPlan:
    """An import decided before it is written: the versions to store, the namespace's facts they end,
    by ids that are provisional (negative) until renumber gives them the database's."""

    stored: dict[int, Fact] = field(default_factory=dict)  # the versions to store (ended by a later one, maybe)
    norms: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # their (subject, relation, object) norms
    ended_here: dict[int, Fact] = field(default_factory=dict)  # the namespace's own facts the import ends
    superseded: dict[int, Fact] = field(default_factory=dict)  # every fact the import's current versions end
    new_ids: dict[int, int] = field(default_factory=dict)  # the file's id -> its id here (a duplicate's: held)
    duplicate: int = 0

    def rows(self, real: dict[int, int]) -> tuple[list[tuple], list[tuple]]:
        """The rows to insert and the (valid_to, ended_by, superseded_by, id) updates of the namespace's
        facts, `real` giving each provisional id its id (tuples only: this runs in the write transaction)."""
        inserts = [
            (
                real[k],
                f.namespace,
                f.subject,
                f.relation,
                f.object,
                *self.norms[k],
                f.valid_from,
                f.valid_to,
                f.ended_by,
                real.get(f.superseded_by, f.superseded_by),
                f.source,
            )  # fmt: skip
            for k, f in self.stored.items()
        ]
        updates = [
            (f.valid_to, f.ended_by, real.get(f.superseded_by, f.superseded_by), f.id) for f in self.ended_here.values()
        ]
        return inserts, updates

    def renumber(self, real: dict[int, int]) -> None:
        """The provisional ids of what import_versions returns (stored, superseded) replaced by `real`'s,
        links included."""

        def mapped(fact: Fact) -> Fact:
            link = real.get(fact.superseded_by, fact.superseded_by) if fact.superseded_by is not None else None
            return replace(fact, id=real.get(fact.id, fact.id), superseded_by=link)

        self.stored = {real[k]: mapped(f) for k, f in self.stored.items()}
        self.superseded = {real.get(k, k): mapped(f) for k, f in self.superseded.items()}


def _chunks(ids: list[int], size: int = 500) -> Iterator[list[int]]:
    """Ids a few hundred at a time: one statement's placeholders stay well under any database's limit."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


class _IndexMissing(Exception):
    """A query needs a fuzzy index that is not resident: it is built outside the lock, then the query runs again."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def _said(fact: Fact) -> str:
    """A fact as a sentence of a message: “Dorothea Altemus employed by BMW”."""
    return f"“{fact.subject} {fact.relation} {fact.object}”"


def _fact(row: tuple) -> Fact:
    id_, namespace, subject, relation, object_, valid_from, valid_to, ended_by, superseded_by, source = row
    return Fact(subject, relation, object_, id_, namespace, valid_from, valid_to, ended_by, superseded_by, source)
