"""Where a TripletStore keeps its facts: an SQLite file, or a PostgreSQL database.

The store writes its SQL once, with ``?`` placeholders; a :class:`Database` runs it. A location
is a path (SQLite, ``:memory:`` included) or a ``postgresql://`` URL (psycopg 3 and a connection
pool: ``pip install 'memlm[postgres]'``). Both keep the same table, indexes and semantics:

- a write transaction is exclusive per namespace (SQLite: ``BEGIN IMMEDIATE`` locks the file;
  PostgreSQL: a transaction-scoped advisory lock on the namespace), so a functional supersede is
  never raced by a second process or server;
- a database of another application, or of a newer memlm, is refused (SQLite: ``application_id``
  and ``user_version``; PostgreSQL: the ``memlm_meta`` table);
- reads never wait for a write: they see what was last committed (SQLite in WAL mode: each thread
  reads through a connection of its own while one connection writes; PostgreSQL: a pool), so a
  60,000-fact import in its one transaction stalls no other user's listing; a `snapshot` is one
  consistent view for reads that span many statements (an export);
- an id is never given out twice, even after its fact is purged (SQLite: ``AUTOINCREMENT``;
  PostgreSQL: an identity sequence), so a link to an erased fact can never come to point at a
  later fact, of this namespace or another. Schema version 2 says so: a version-1 SQLite file is
  rebuilt on open, every row and id kept (SQLite cannot alter a table to ``AUTOINCREMENT``);
- an SQLite file this process cannot write (no write permission, a read-only mount, or a directory
  where WAL cannot make its -wal and -shm files) opens read-only and says so (``read_only``): it is
  read as it is, nothing is written to it, and a write is refused with :class:`ReadOnlyDatabaseError`;
  a new file in a place that cannot hold one is refused before anything is made.

This module opens the database a location names; database.py holds what both kinds share,
sqlite_database.py and postgres_database.py each kind.
"""

from __future__ import annotations

from pathlib import Path

from memory_runtime.memory.database import Database
from memory_runtime.memory.postgres_database import PostgresDatabase
from memory_runtime.memory.sqlite_database import SqliteDatabase


def is_postgres(location: str | Path) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def open_database(location: str | Path) -> Database:
    """The database at `location`: a ``postgresql://`` URL, else an SQLite file (created if missing)."""
    return PostgresDatabase(str(location)) if is_postgres(location) else SqliteDatabase(str(location))
