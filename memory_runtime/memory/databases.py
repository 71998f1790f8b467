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
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

APPLICATION_ID = int.from_bytes(b"meml", "big")  # PRAGMA application_id of our SQLite files
# 1: the first release. 2: ids are never reused (SQLite's table rebuilt with AUTOINCREMENT; on both,
# the id counter raised above every id a link points at, so a dangling link never finds a new fact).
SCHEMA_VERSION = 2

# Each statement alone: an SQLite table rebuild runs them inside its transaction (executescript would commit).
_INDEXES = (
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
_INDEX_NAMES = frozenset(re.findall(r"CREATE INDEX IF NOT EXISTS (\w+)", " ".join(_INDEXES)))
_COLUMNS_DDL = """
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
_ADD_SOURCE = "ALTER TABLE triplets ADD COLUMN source TEXT"
_ALL_COLUMNS = (
    "id, namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
    " valid_from, valid_to, ended_by, superseded_by, source"
)


def _sqlite_table(name: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {name} (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,"
        + _COLUMNS_DDL.format(real="REAL", integer="INTEGER")
        + ")"
    )


SQLITE_SCHEMA = ";\n".join([_sqlite_table("triplets"), *_INDEXES]) + ";\n"
POSTGRES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS triplets (\n    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
    + _COLUMNS_DDL.format(real="DOUBLE PRECISION", integer="BIGINT")
    + ");\n"
    + "".join(f"{statement};\n" for statement in _INDEXES)
    + "CREATE TABLE IF NOT EXISTS memlm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    + _ADD_SOURCE.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS")
    + ";\n"
)
# The highest id stored or pointed at (a link to a purged fact's id): the id counter is kept above it.
# {greatest}: MAX in SQLite, GREATEST in PostgreSQL.
_HIGHEST_ID = (
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


def is_postgres(location: str | Path) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def open_database(location: str | Path) -> Database:
    """The database at `location`: a ``postgresql://`` URL, else an SQLite file (created if missing)."""
    return PostgresDatabase(str(location)) if is_postgres(location) else SqliteDatabase(str(location))


# --------------------------------------------------------------------------- SQLite


class _SqliteCursor:
    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._cursor.execute(sql, params).fetchall()

    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        return self._cursor.execute(sql, params).fetchone()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._cursor.execute(sql, params).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._cursor.executemany(sql, rows)


class SqliteDatabase:
    """One connection writes (the store's transactions take turns on it); each thread reads through a
    connection of its own, WAL letting readers go on while a write transaction is open. An in-memory
    database (":memory:") is one connection, which reads and writes take turns on."""

    WRITER_CACHE_KB = 65_536  # the writing connection's page cache: index pages of large memories stay cached
    READER_CACHE_KB = 16_384  # each reader's page cache; a server may have dozens

    def __init__(self, path: str) -> None:
        self.location = path
        self.read_only = False
        self.read_only_reason: str | None = None
        self._target, self._uri = path, False  # what sqlite3.connect opens (a file: URI when read-only)
        self._writing = threading.RLock()  # the writing connection: one transaction (or statement) at a time
        self._shared = path == ":memory:"  # no second connection sees it: reads take turns with writes
        self._local = threading.local()  # each thread's reading connection
        self._readers: dict[threading.Thread, sqlite3.Connection] = {}  # to close: at the end, or when its thread ends
        self._readers_lock = threading.Lock()
        file = None if self._shared else Path(path)
        if file is not None and file.is_dir():
            raise InvalidDatabaseError(f"{path} is a directory, not a memory database file")
        created = file is not None and not file.exists()
        if created:
            _check_creatable(path)
        elif file is not None:
            if not os.access(file, os.R_OK):
                raise InvalidDatabaseError(f"{path} cannot be read: no read permission")
            self.read_only_reason = _unwritable_reason(file)
        try:
            if self.read_only_reason is None:
                try:
                    self._open_writable()
                except _WriteRefused as refused:
                    if created:
                        raise CannotCreateDatabaseError(f"cannot create memory {path}: {refused.err}") from None
                    self.read_only_reason = f"SQLite: {refused.err}"
            if self.read_only_reason is not None:
                self._open_read_only()
        except BaseException:
            if created:
                _remove_if_empty(path)
            raise

    def _checked(self, conn: sqlite3.Connection) -> int:
        """The file's application_id, once it is known to be a memlm memory this memlm reads; the
        connection is closed where it is not."""
        path = self.location
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as err:
            conn.close()
            if _write_refused(err):
                raise _WriteRefused(err) from None
            raise InvalidDatabaseError(f"{path} is not a memlm memory database ({err})") from None
        if app_id != APPLICATION_ID and (tables or app_id):
            conn.close()
            raise InvalidDatabaseError(f"{path} is an SQLite database of another application, not a memlm memory")
        if version > SCHEMA_VERSION:
            conn.close()
            raise InvalidDatabaseError(f"{path} has schema version {version}; this memlm reads up to {SCHEMA_VERSION}")
        return app_id

    def _open_writable(self) -> None:
        """The writing connection, the schema made or brought up to date; _WriteRefused where SQLite
        finds the file cannot be written after all (the connection closed)."""
        path = self.location
        try:
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        except sqlite3.OperationalError as err:
            raise _WriteRefused(err) from None
        app_id = self._checked(conn)
        try:
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")  # another process's write transaction: wait, do not fail
            conn.execute(f"PRAGMA cache_size=-{self.WRITER_CACHE_KB}")
            # each step only where it is missing: a write here would wait for another process's write
            # transaction (a long import), up to the busy timeout, where opening needs nothing written
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'triplets'")}
            if not {"triplets", *_INDEX_NAMES} <= names:
                conn.executescript(SQLITE_SCHEMA)
            if "source" not in {row[1] for row in conn.execute("PRAGMA table_info(triplets)")}:
                conn.execute(_ADD_SOURCE)
            self._conn = conn
            self._cursor = _SqliteCursor(conn.cursor())
            if not _has_autoincrement(conn):
                self._rebuild_with_autoincrement()
            if app_id != APPLICATION_ID:
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            if path != ":memory:":
                _probe_write(conn)
        except sqlite3.OperationalError as err:
            conn.close()
            if _write_refused(err):
                raise _WriteRefused(err) from None
            raise
        except ReadOnlyDatabaseError as err:  # the rebuild's transaction could not begin
            conn.close()
            raise _WriteRefused(err.__cause__) from None
        except BaseException:
            conn.close()
            raise

    def _open_read_only(self) -> None:
        """The file opened for reading (``mode=ro``), nothing written to it; ``immutable=1`` where it is in
        WAL mode and SQLite cannot make the -shm file it reads through. A file that needs an upgrade
        written (an older schema) is refused: ReadOnlyDatabaseError."""
        path, file = self.location, Path(self.location)
        quoted = urllib.parse.quote(str(file.absolute()))
        # A WAL file is read through its -shm file, which a read-only connection makes where it can and
        # leaves behind; a file closed cleanly has none (nor a -wal): it is read as it is, nothing made
        # beside it. Immutable also where the -shm cannot be made (its -wal, if any, is then unread).
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        immutable = _wal_mode(file) and not shm.exists()
        immutable = immutable and (not wal.exists() or not wal.stat().st_size or not _side_files_possible(file, "-shm"))
        while True:
            self._target = f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")
            self._uri = True
            try:
                conn = sqlite3.connect(self._target, uri=True, check_same_thread=False, isolation_level=None)
            except sqlite3.Error as err:
                raise InvalidDatabaseError(f"{path} cannot be read: {err}") from None
            try:
                self._checked(conn)
                upgrades = _upgrades(conn)
                break
            except _WriteRefused as refused:  # WAL's -shm could not be made after all: read the file as it is
                if immutable:
                    raise InvalidDatabaseError(f"{path} cannot be read: {refused.err}") from None
                immutable = True
        if immutable and wal.exists() and wal.stat().st_size:
            self.read_only_reason = f"{self.read_only_reason}; its -wal file is not read"
        if upgrades:
            conn.close()
            raise ReadOnlyDatabaseError(
                f"memory {path} is read-only ({self.read_only_reason}) and needs an upgrade written to it "
                f"({', '.join(upgrades)}): open a writable copy of it once with this memlm to upgrade it"
            )
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA query_only=1")
        conn.execute(f"PRAGMA cache_size=-{self.WRITER_CACHE_KB}")
        self._conn = conn
        self._cursor = _SqliteCursor(conn.cursor())
        self.read_only = True

    def refuse_writes(self) -> None:
        """ReadOnlyDatabaseError where the memory was opened read-only: nothing can be written to it."""
        if self.read_only:
            raise ReadOnlyDatabaseError(
                f"memory {self.location} was opened read-only ({self.read_only_reason}): nothing can be written to it"
            )

    def _reader(self) -> sqlite3.Connection:
        """This thread's reading connection (opened on first use, closed with the database, or once its
        thread has ended: a server's worker threads come and go, anyio's after 10 s idle, and each
        connection it kept open held its page cache, up to READER_CACHE_KB: a soak's RSS grew 5 MB a
        minute)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect_reader()
            self._local.conn = conn
            with self._readers_lock:
                for ended in [thread for thread in self._readers if not thread.is_alive()]:
                    self._readers.pop(ended).close()
                self._readers[threading.current_thread()] = conn
        return conn

    def _connect_reader(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._target, uri=self._uri, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA query_only=1")
        conn.execute(f"PRAGMA cache_size=-{self.READER_CACHE_KB}")
        return conn

    def _rebuild_with_autoincrement(self) -> None:
        """Schema version 1 -> 2: SQLite reuses the id of a purged last row unless the table is
        AUTOINCREMENT, and no ALTER TABLE makes it so. The table is copied into a new one, every row
        with its id, which then takes its name and indexes, all in one transaction (a failure leaves
        the file as it was); the id counter starts above every id stored or linked to."""
        with self.transaction("memlm schema") as cur:
            if _has_autoincrement(self._conn):  # another process rebuilt it while this one waited
                return
            cur.execute(_sqlite_table("triplets_rebuilt"))
            cur.execute(f"INSERT INTO triplets_rebuilt ({_ALL_COLUMNS}) SELECT {_ALL_COLUMNS} FROM triplets")
            cur.execute("DROP TABLE triplets")  # its indexes with it
            cur.execute("ALTER TABLE triplets_rebuilt RENAME TO triplets")
            for statement in _INDEXES:
                cur.execute(statement)
            self.reserve_ids(cur)
            cur.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        if self._shared:
            with self._writing:
                return self._cursor.rows(sql, params)
        return self._reader().execute(sql, params).fetchall()

    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        if self._shared:
            with self._writing:
                return self._cursor.row(sql, params)
        return self._reader().execute(sql, params).fetchone()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self.refuse_writes()
        with self._writing:
            return self._cursor.execute(sql, params)

    @contextlib.contextmanager
    def transaction(self, namespace: str) -> Iterator[Cursor]:
        """BEGIN IMMEDIATE ... COMMIT (the file's write lock), rolled back on any error; of a memory opened
        read-only, ReadOnlyDatabaseError before anything is begun."""
        self.refuse_writes()
        with self._writing:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:  # the file (or its -shm) became read-only since it was opened
                if not _write_refused(err) or self._shared:
                    raise
                raise ReadOnlyDatabaseError(
                    f"memory {self.location} cannot be written (SQLite: {err}): nothing was written to it"
                ) from err
            try:
                yield _SqliteCursor(self._conn.cursor())
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Cursor]:
        """A connection of its own in one read transaction (WAL keeps its view while writers go on); of an
        in-memory database, a copy."""
        if self._shared:  # a copy: the one connection cannot hold a view while others write through it
            copy = sqlite3.connect(":memory:", check_same_thread=False)
            try:
                with self._writing:
                    self._conn.backup(copy)
                yield _SqliteCursor(copy.cursor())
            finally:
                copy.close()
            return
        conn = self._connect_reader()
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT 1 FROM triplets LIMIT 1")  # the read transaction starts here, not at the next read
            yield _SqliteCursor(conn.cursor())
            conn.execute("COMMIT")
        finally:
            conn.close()

    def last_id(self) -> int:
        seq = self.row("SELECT seq FROM sqlite_sequence WHERE name = 'triplets'")
        return max(0 if seq is None else seq[0], self.row(_HIGHEST_ID.format(greatest="MAX"))[0])

    def reserve_ids(self, cur: Cursor, last: int = 0) -> None:
        last = max(last, cur.row(_HIGHEST_ID.format(greatest="MAX"))[0])
        if not cur.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'triplets'", (last,)):
            cur.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('triplets', ?)", (last,))

    def new_ids(self, cur: Cursor, n: int) -> Sequence[int]:
        """The next `n` ids (the write transaction is the file's only writer); AUTOINCREMENT's counter
        follows the largest id inserted, and is raised here for the ids drawn but left unused."""
        seq = cur.row("SELECT seq FROM sqlite_sequence WHERE name = 'triplets'")
        first = max(0 if seq is None else seq[0], cur.row(_HIGHEST_ID.format(greatest="MAX"))[0]) + 1
        if n:
            self.reserve_ids(cur, first + n - 1)
        return range(first, first + n)

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers.values():
                conn.close()
            self._readers.clear()
        with self._writing:
            self._conn.close()


def _has_autoincrement(conn: sqlite3.Connection) -> bool:
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'triplets'").fetchone()
    return "AUTOINCREMENT" in sql.upper()


def _upgrades(conn: sqlite3.Connection) -> list[str]:
    """What opening the file writes to bring it up to this memlm's schema (read without writing)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'triplets'")}
    if "triplets" not in names:
        return ["no memlm table yet"]
    needed = []
    if not _INDEX_NAMES <= names:
        needed.append(f"{len(_INDEX_NAMES - names)} missing index(es)")
    if "source" not in {row[1] for row in conn.execute("PRAGMA table_info(triplets)")}:
        needed.append("the source column")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if not _has_autoincrement(conn) or version != SCHEMA_VERSION:
        needed.append(f"schema version {version} -> {SCHEMA_VERSION}")
    if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        needed.append("the memlm application id")
    return needed


class _WriteRefused(Exception):
    """SQLite cannot write the file (or make the files beside it) where memlm's checks saw no reason."""

    def __init__(self, err: sqlite3.Error) -> None:
        super().__init__(str(err))
        self.err = err


def _probe_write(conn: sqlite3.Connection) -> None:
    """Take the file's write lock and let it go (nothing written): sqlite3.OperationalError where SQLite
    cannot write it after all (a -shm file left read-only by another user). Another process writing
    meanwhile (busy) proves nothing either way: not waited for."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as err:
        if _write_refused(err):
            raise
    finally:
        conn.execute("PRAGMA busy_timeout=30000")


def _write_refused(err: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of write access: to the file, or to its directory (-wal, -shm, -journal)."""
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
        return True
    text = str(err).lower()
    return "readonly database" in text or "read-only" in text or "unable to open database file" in text


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _directory(path: Path) -> Path:
    return path.absolute().parent


def _side_files_possible(file: Path, *suffixes: str) -> bool:
    """Whether SQLite can write the files beside `file` (WAL's -wal and -shm): they exist writable, or
    its directory lets them be made."""
    if os.access(_directory(file), os.W_OK | os.X_OK):
        return True
    return all(os.access(f"{file}{suffix}", os.W_OK) for suffix in suffixes)


def _wal_mode(file: Path) -> bool:
    """Whether the SQLite file is in WAL mode (its header's read and write versions are 2)."""
    try:
        with file.open("rb") as stream:
            header = stream.read(20)
    except OSError:
        return False
    return len(header) == 20 and header.startswith(b"SQLite format 3\0") and 2 in (header[18], header[19])


def _unwritable_reason(file: Path) -> str | None:
    """Why this process cannot write the existing SQLite file (None: it can): the file, or its directory
    where WAL's -wal and -shm files could not be made."""
    if not os.access(file, os.W_OK):
        return "on a read-only file system" if _read_only_file_system(file) else "no write permission on the file"
    if not _side_files_possible(file, "-wal", "-shm"):
        directory = _directory(file)
        why = "on a read-only file system" if _read_only_file_system(directory) else "not writable"
        return f"its directory {directory} is {why}: SQLite cannot make its -wal and -shm files there"
    return None


def _remove_if_empty(path: str) -> None:
    """Remove the file a failed first open made, where it holds nothing yet (not a file another process
    has meanwhile made a memory of)."""
    with contextlib.suppress(OSError):
        if Path(path).stat().st_size == 0 and not Path(f"{path}-wal").exists():
            Path(path).unlink()


def _check_creatable(path: str) -> None:
    """CannotCreateDatabaseError where a new SQLite file cannot be made at `path`."""
    directory = _directory(Path(path))
    if not directory.exists():
        raise CannotCreateDatabaseError(f"cannot create memory {path}: directory {directory} does not exist")
    if not directory.is_dir():
        raise CannotCreateDatabaseError(f"cannot create memory {path}: {directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        if _read_only_file_system(directory):
            raise CannotCreateDatabaseError(
                f"cannot create memory {path}: directory {directory} is read-only (a read-only file system)"
            )
        raise CannotCreateDatabaseError(
            f"cannot create memory {path}: directory {directory} is read-only (no write permission)"
        )


# --------------------------------------------------------------------------- PostgreSQL


def _pg(sql: str) -> str:
    """The store's SQL for psycopg: ``?`` placeholders become ``%s`` (no literal ``%`` or ``?`` in it)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _PostgresCursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._cursor.execute(_pg(sql), params).fetchall()

    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        return self._cursor.execute(_pg(sql), params).fetchone()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._cursor.execute(_pg(sql), params).rowcount

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._cursor.executemany(_pg(sql), rows)  # pipelined by psycopg: one round trip per batch


# Every statement autocommits (a write transaction opens its own). psycopg prepares a statement run five
# times on a connection, and PostgreSQL may then plan it once for any values (a generic plan): before the
# partial indexes of current facts, that plan read every version of a subject and bulk write_many ran
# 2-5x slower after five runs. With them the generic plans are good, and planning each statement for its
# values (plan_cache_mode=force_custom_plan) cost more: 18.0 s against 7.9 s for 8,000 facts a run
# (scripts/bench_pg_plans.py), so PostgreSQL's default stays.
CONNECTION_SETTINGS = {"autocommit": True}


class PostgresDatabase:
    """A psycopg connection pool; every statement autocommits, a write transaction takes an
    advisory lock on its namespace (writers of one namespace take turns, across processes)."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise InvalidDatabaseError(
                "a postgresql:// memory needs psycopg 3 and psycopg-pool: pip install 'memlm[postgres]'"
            ) from None
        self.location = url
        self.read_only, self.read_only_reason = False, None
        try:
            # one plain connection first: a wrong URL fails at once with the server's own reason,
            # where the pool would retry for its whole timeout and then say only that it timed out
            psycopg.connect(url, autocommit=True).close()
            self._pool = ConnectionPool(
                url, min_size=min_size, max_size=max_size, kwargs=CONNECTION_SETTINGS, open=True, timeout=30
            )
            self._pool.wait(timeout=30)
        except (psycopg.Error, Exception) as err:
            raise InvalidDatabaseError(f"cannot connect to {redacted(url)}: {err}") from None
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('memlm schema'))")  # two servers starting at once
            has_triplets = conn.execute("SELECT to_regclass('triplets') IS NOT NULL").fetchone()[0]
            has_meta = conn.execute("SELECT to_regclass('memlm_meta') IS NOT NULL").fetchone()[0]
            if has_triplets and not has_meta:
                raise InvalidDatabaseError(f"{redacted(url)} has a triplets table of another application")
            if not (has_triplets and has_meta and _has_schema(conn)):  # its DDL would lock the table, even
                conn.execute(POSTGRES_SCHEMA)  # as a no-op: an open would wait for an import, and stall all
            conn.execute(
                "INSERT INTO memlm_meta (key, value) VALUES ('schema_version', %s) ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            version = int(conn.execute("SELECT value FROM memlm_meta WHERE key = 'schema_version'").fetchone()[0])
            if version < SCHEMA_VERSION:  # 1 -> 2: the identity never reused an id; links to purged ids stay dead
                self.reserve_ids(_PostgresCursor(conn.cursor()))
                conn.execute("UPDATE memlm_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        if version > SCHEMA_VERSION:
            self._pool.close()
            raise InvalidDatabaseError(
                f"{redacted(url)} has schema version {version}; this memlm reads up to {SCHEMA_VERSION}"
            )

    def refuse_writes(self) -> None:
        """Never refused: a PostgreSQL memory is opened for writing (or not at all)."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._pool.connection() as conn:
            return conn.execute(_pg(sql), params).fetchall()

    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        with self._pool.connection() as conn:
            return conn.execute(_pg(sql), params).fetchone()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._pool.connection() as conn:
            return conn.execute(_pg(sql), params).rowcount

    @contextlib.contextmanager
    def transaction(self, namespace: str) -> Iterator[Cursor]:
        with self._pool.connection() as conn, conn.transaction():
            cursor = conn.cursor()
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memlm namespace {namespace}",))
            yield _PostgresCursor(cursor)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Cursor]:
        """A pooled connection in one REPEATABLE READ, READ ONLY transaction: one view for its whole life."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield _PostgresCursor(conn.cursor())

    # the identity's sequence: last_value is the last id given out once is_called, else the next one
    _SEQUENCE = "SELECT pg_get_serial_sequence('triplets', 'id')"

    def last_id(self) -> int:
        (sequence,) = self.row(self._SEQUENCE)
        given, called = self.row(f"SELECT last_value, is_called FROM {sequence}")
        return max(given if called else given - 1, self.row(_HIGHEST_ID.format(greatest="GREATEST"))[0])

    def new_ids(self, cur: Cursor, n: int) -> Sequence[int]:
        """`n` values of the identity's sequence (other sessions draw theirs meanwhile: not consecutive)."""
        (sequence,) = cur.row(self._SEQUENCE)
        return [row[0] for row in cur.rows("SELECT nextval(?::regclass) FROM generate_series(1, ?)", (sequence, n))]

    def reserve_ids(self, cur: Cursor, last: int = 0) -> None:
        (sequence,) = cur.row(self._SEQUENCE)
        given, called = cur.row(f"SELECT last_value, is_called FROM {sequence}")
        last = max(last, cur.row(_HIGHEST_ID.format(greatest="GREATEST"))[0])
        if last > (given if called else given - 1):
            cur.row("SELECT setval(?::regclass, ?)", (sequence, last))

    def close(self) -> None:
        self._pool.close()


def _has_schema(conn: Any) -> bool:
    """Whether the triplets table has every index and column this memlm makes, read from the catalogs
    (which lock no table)."""
    indexes = {
        row[0]
        for row in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'triplets'"
        )
    }
    columns = {
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'triplets'"
        )
    }
    return _INDEX_NAMES <= indexes and "source" in columns


def redacted(url: str) -> str:
    """The URL without its password (error messages end up in logs)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
