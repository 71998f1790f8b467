"""What a memory's database is, whichever kind (location.py opens one): the interface the store
uses (Database, Cursor), the table both kinds keep (its columns, indexes and schema version), and the
errors of a database that is not a memlm memory, or cannot be written or made."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any, Protocol

APPLICATION_ID = int.from_bytes(b"meml", "big")  # PRAGMA application_id of our SQLite files
# 1: the first release. 2: ids are never reused (SQLite's table rebuilt with AUTOINCREMENT; on both,
# the id counter raised above every id a link points at, so a dangling link never finds a new fact).
SCHEMA_VERSION = 2

# Each statement alone: an SQLite table rebuild runs them inside its transaction (executescript would commit).
INDEXES = (
    # (namespace, subject, relation, object) also answers the duplicate check of every write;
    # relation-only lookups scan the namespace through it.
    "CREATE INDEX IF NOT EXISTS triplets_subject ON triplets(namespace, subject_norm, relation_norm, object_norm)",
    "CREATE INDEX IF NOT EXISTS triplets_object ON triplets(namespace, object_norm, relation_norm)",
    # the current facts only: a write's duplicate check and the facts it supersedes, which otherwise read
    # every earlier version of the subject (a subject of 1,500 versions: 4 s to write its chain)
    "CREATE INDEX IF NOT EXISTS triplets_current_subject"
    " ON triplets(namespace, subject_norm, relation_norm, object_norm) WHERE valid_to IS NULL",
    "CREATE INDEX IF NOT EXISTS triplets_current_object"
    " ON triplets(namespace, object_norm, relation_norm, subject_norm) WHERE valid_to IS NULL",
    # a namespace's rows in id order: exports, and fuzzy indexes catching up with other processes' writes
    "CREATE INDEX IF NOT EXISTS triplets_namespace_id ON triplets(namespace, id)",
    # the facts a fact superseded (a purge erases its earlier versions), and `memlm memory check`;
    # partial: a write of a current fact adds nothing to it
    "CREATE INDEX IF NOT EXISTS triplets_superseded_by ON triplets(superseded_by) WHERE superseded_by IS NOT NULL",
)
INDEX_NAMES = frozenset(re.findall(r"CREATE INDEX IF NOT EXISTS (\w+)", " ".join(INDEXES)))
COLUMNS_DDL = """
    namespace TEXT NOT NULL,
    subject TEXT NOT NULL,
    relation TEXT NOT NULL,
    object TEXT NOT NULL,
    subject_norm TEXT NOT NULL,
    relation_norm TEXT NOT NULL,
    object_norm TEXT NOT NULL,
    valid_from {real} NOT NULL,
    valid_to {real},               -- NULL while the fact is current
    ended_by TEXT,                 -- 'superseded' or 'forgotten'
    superseded_by {integer},       -- the fact that ended it, of the same namespace (NULL once that is purged)
    source TEXT                    -- what wrote it: a chat turn's id (chatcmpl-...), 'import', 'page', 'correction'
"""
# `source` came after schema version 1 was released: a file or database without it gets the column on
# open (nullable, no default: no rewrite), and a memlm that does not know it reads the table unchanged.
ADD_SOURCE = "ALTER TABLE triplets ADD COLUMN source TEXT"
ALL_COLUMNS = (
    "id, namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
    " valid_from, valid_to, ended_by, superseded_by, source"
)


# {greatest}: MAX in SQLite, GREATEST in PostgreSQL.
HIGHEST_ID = (
    "SELECT {greatest}(COALESCE((SELECT MAX(id) FROM triplets), 0),"
    " COALESCE((SELECT MAX(superseded_by) FROM triplets WHERE superseded_by IS NOT NULL), 0))"
)


class InvalidDatabaseError(ValueError):
    """The database exists but is not a memlm memory (or is from a newer memlm)."""


class ReadOnlyDatabaseError(InvalidDatabaseError):
    """A write to a memory opened read-only, or a read-only memory that needs an upgrade written to it."""


class CannotCreateDatabaseError(InvalidDatabaseError):
    """A new memory's location cannot hold a file: its directory is missing or not writable."""


class Cursor(Protocol):
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...
    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None: ...
    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...
    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


class Database(Protocol):
    """What the store needs of a database: statements from any thread (reads see what was last
    committed), exclusive write transactions, and read snapshots."""

    location: str
    read_only: bool  # opened for reading only: every write raises ReadOnlyDatabaseError
    read_only_reason: str | None  # why (None while writable)

    def refuse_writes(self) -> None:
        """ReadOnlyDatabaseError, naming the database and why, where it was opened read-only."""
        ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]: ...
    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None: ...
    def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...
    def transaction(self, namespace: str) -> contextlib.AbstractContextManager[Cursor]: ...
    def snapshot(self) -> contextlib.AbstractContextManager[Cursor]:
        """A read-only cursor on one consistent view of the database, however long it is used (from one
        thread at a time, any thread): writes committed meanwhile are not seen."""
        ...

    def last_id(self) -> int:
        """The highest id given out so far, purged facts' included: the next fact's id is above it."""
        ...

    def reserve_ids(self, cur: Cursor, last: int = 0) -> None:
        """Keep the next id above `last`, every stored id and every id a link points at (in `cur`'s
        transaction; never lowers the counter): for rows copied in with their ids."""
        ...

    def new_ids(self, cur: Cursor, n: int) -> Sequence[int]:
        """`n` ids no fact has had, for rows inserted with their ids in `cur`'s write transaction (an
        import's, written in one statement); the counter then stays above them."""
        ...

    def close(self) -> None: ...


def redacted(url: str) -> str:
    """The URL without its password (error messages end up in logs)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
