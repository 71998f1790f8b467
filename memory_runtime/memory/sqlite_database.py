"""An SQLite memory (a file, or ":memory:"): one connection writes, each thread reads through one of
its own (WAL), a file this process cannot write opens read-only, and a version-1 file is rebuilt on
open (location.py says what both kinds of database promise)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_runtime.memory.database import (
    ADD_SOURCE,
    ALL_COLUMNS,
    APPLICATION_ID,
    COLUMNS_DDL,
    HIGHEST_ID,
    INDEX_NAMES,
    INDEXES,
    SCHEMA_VERSION,
    CannotCreateDatabaseError,
    Cursor,
    InvalidDatabaseError,
    ReadOnlyDatabaseError,
)


def _sqlite_table(name: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {name} (\n    id INTEGER PRIMARY KEY AUTOINCREMENT,"
        + COLUMNS_DDL.format(real="REAL", integer="INTEGER")
        + ")"
    )


SQLITE_SCHEMA = ";\n".join([_sqlite_table("triplets"), *INDEXES]) + ";\n"


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

    def _checked(self, conn: sqlite3.Connection) -> None:
        """Refuse, the connection closed, a file that is not a memlm memory this memlm reads
        (InvalidDatabaseError) or that SQLite cannot read for want of write access (_WriteRefused)."""
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

    def _open_writable(self) -> None:
        """The writing connection, the schema made or brought up to date; _WriteRefused where SQLite
        finds the file cannot be written after all (the connection closed)."""
        path = self.location
        try:
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        except sqlite3.OperationalError as err:
            raise _WriteRefused(err) from None
        self._checked(conn)
        try:
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")  # another process's write transaction: wait, do not fail
            conn.execute(f"PRAGMA cache_size=-{self.WRITER_CACHE_KB}")
            # each step only where it is missing: a write here would wait for another process's write
            # transaction (a long import), up to the busy timeout, where opening needs nothing written
            schema = _Schema.of(conn)
            if not schema.table or schema.missing_indexes:
                conn.executescript(SQLITE_SCHEMA)
            if not schema.source:
                conn.execute(ADD_SOURCE)
            self._conn = conn
            self._cursor = _SqliteCursor(conn.cursor())
            if not schema.autoincrement:
                self._rebuild_with_autoincrement()  # which writes the schema version
            if schema.app_id != APPLICATION_ID:
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            if schema.autoincrement and schema.version != SCHEMA_VERSION:
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
                upgrades = _Schema.of(conn).upgrades()
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
            cur.execute(f"INSERT INTO triplets_rebuilt ({ALL_COLUMNS}) SELECT {ALL_COLUMNS} FROM triplets")
            cur.execute("DROP TABLE triplets")  # its indexes with it
            cur.execute("ALTER TABLE triplets_rebuilt RENAME TO triplets")
            for statement in INDEXES:
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
        return max(0 if seq is None else seq[0], self.row(HIGHEST_ID.format(greatest="MAX"))[0])

    def reserve_ids(self, cur: Cursor, last: int = 0) -> None:
        last = max(last, cur.row(HIGHEST_ID.format(greatest="MAX"))[0])
        if not cur.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'triplets'", (last,)):
            cur.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('triplets', ?)", (last,))

    def new_ids(self, cur: Cursor, n: int) -> Sequence[int]:
        """The next `n` ids (the write transaction is the file's only writer); AUTOINCREMENT's counter
        follows the largest id inserted, and is raised here for the ids drawn but left unused."""
        seq = cur.row("SELECT seq FROM sqlite_sequence WHERE name = 'triplets'")
        first = max(0 if seq is None else seq[0], cur.row(HIGHEST_ID.format(greatest="MAX"))[0]) + 1
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


@dataclass(frozen=True)
class _Schema:
    """What an SQLite file holds of this memlm's schema, read without writing: one reading for both
    opens, the writable one bringing up to date what is missing, the read-only one refusing a file
    that needs anything (upgrades)."""

    table: bool  # the triplets table is there (one made now has every column, and AUTOINCREMENT)
    missing_indexes: int
    source: bool  # the source column, which came after schema version 1
    autoincrement: bool
    version: int  # PRAGMA user_version
    app_id: int  # PRAGMA application_id

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> _Schema:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'triplets'")}
        table = "triplets" in names
        return cls(
            table=table,
            missing_indexes=len(INDEX_NAMES - names),
            source=not table or "source" in {row[1] for row in conn.execute("PRAGMA table_info(triplets)")},
            autoincrement=not table or _has_autoincrement(conn),
            version=conn.execute("PRAGMA user_version").fetchone()[0],
            app_id=conn.execute("PRAGMA application_id").fetchone()[0],
        )

    def upgrades(self) -> list[str]:
        """What opening the file writes to bring it up to this memlm's schema."""
        if not self.table:
            return ["no memlm table yet"]
        needed = []
        if self.missing_indexes:
            needed.append(f"{self.missing_indexes} missing index(es)")
        if not self.source:
            needed.append("the source column")
        if not self.autoincrement or self.version != SCHEMA_VERSION:
            needed.append(f"schema version {self.version} -> {SCHEMA_VERSION}")
        if self.app_id != APPLICATION_ID:
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
