"""A stored fact, what the store's reads and writes return, and how a fact is read from a row of the
triplets table (COLUMNS, fact_from_row): the store and its history share these."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memory_runtime.protocol import Triplet

FIELDS = ("subject", "relation", "object")

COLUMNS = "id, namespace, subject, relation, object, valid_from, valid_to, ended_by, superseded_by, source"
# A lookup by a field's value that wants its rows in id order says ORDER BY +id: with a bare `id`,
# SQLite's planner walks the (namespace, id) index to skip a sort, which reads the whole namespace
# (18 ms a fuzzy lookup at 100k facts); `+id` keeps it on the field's index. PostgreSQL is unaffected.


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
class WriteResult:
    fact: Fact
    status: Literal["stored", "duplicate"]
    superseded: list[Fact] = field(default_factory=list)


def id_chunks(ids: list[int], size: int = 500) -> Iterator[list[int]]:
    """Ids a few hundred at a time: one statement's placeholders stay well under any database's limit."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def fact_from_row(row: tuple) -> Fact:
    id_, namespace, subject, relation, object_, valid_from, valid_to, ended_by, superseded_by, source = row
    return Fact(subject, relation, object_, id_, namespace, valid_from, valid_to, ended_by, superseded_by, source)
