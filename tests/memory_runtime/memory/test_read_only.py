"""A memory this process cannot write opens read-only and says so; a new memory's unwritable location
is named. In-process, "cannot write" is os.access saying so (the tests run as root, where chmod stops
nothing), the file then really opened read-only by SQLite; test_real_permissions runs memlm where chmod
holds (a user namespace of no privilege when run as root)."""

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlm.cli import app
from memory_runtime.memory import sqlite_database
from memory_runtime.memory.database import (
    APPLICATION_ID,
    CannotCreateDatabaseError,
    InvalidDatabaseError,
    ReadOnlyDatabaseError,
)
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.transfer import write_export

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def make_memory(path: Path) -> None:
    with TripletStore(path) as store:
        store.write("Tia Batres", "works for", "Siemens")
        store.write("Tia Batres", "works for", "Bosch")  # Siemens superseded: a history
        store.write("Dorothea Altemus", "works for", "Pfizer")


def state(path: Path) -> tuple:
    """The file's bytes and mtime, and what lies beside it."""
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_mtime_ns,
        sorted(p.name for p in path.parent.iterdir()),
    )


def deny_writes(monkeypatch, *paths: Path) -> None:
    """os.access says `paths` cannot be written (what it says of a chmod-ed file, for anyone but root)."""
    denied = {str(Path(p).absolute()) for p in paths}
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and str(Path(path).absolute()) in denied:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


@pytest.fixture
def memory(tmp_path):
    path = tmp_path / "m.sqlite"
    make_memory(path)
    return path


def test_a_file_without_write_permission_opens_read_only_and_reads(memory, monkeypatch):
    before = state(memory)
    deny_writes(monkeypatch, memory)
    with TripletStore(memory) as store:
        assert store.read_only and store._db.read_only
        assert store.read_only_notice == (
            f"memory {memory} is read-only (no write permission on the file): opened for reading"
        )
        assert sorted(f.object for f in store.facts()) == ["Bosch", "Pfizer"]
        assert store.query(subject="Tia Batre").triplets == [("Tia Batres", "employed by", "Bosch")]  # fuzzy
        assert [f.object for f in store.history("Tia Batres")] == ["Siemens", "Bosch"]
        assert store.count() == 2 and store.count(current=False) == 3 and store.namespaces() == ["default"]
        assert store.broken_links() == [] and store.history_problems() == []
        export = __import__("io").StringIO()
        write_export(store, "default", export)
        assert "Siemens" in export.getvalue()
        siemens = store.history("Tia Batres")[0]
        writes = [
            lambda: store.write("Marcus Feld", "works for", "Roche"),
            lambda: store.write_many([("Marcus Feld", "works for", "Roche")]),
            lambda: store.forget("Tia Batres"),
            lambda: store.forget("Tia Batres", purge=True),
            lambda: store.restore(siemens.id),
            lambda: store.import_versions(store.facts()),
            store.unlink_broken,
            store.refuse_writes,
            lambda: store._db.execute("DELETE FROM triplets"),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyDatabaseError) as err:
                write()
            assert str(err.value) == (
                f"memory {memory} was opened read-only (no write permission on the file): nothing can be written to it"
            )
        assert store.count() == 2
    assert state(memory) == before  # nothing written, nothing made beside it


def test_a_file_whose_directory_cannot_hold_the_wal_files_is_read_as_it_is(memory, monkeypatch):
    before = state(memory)
    deny_writes(monkeypatch, memory.parent)
    with TripletStore(memory) as store:
        assert store.read_only
        assert store.read_only_notice == (
            f"memory {memory} is read-only (its directory {memory.parent} is not writable: SQLite cannot make its"
            " -wal and -shm files there): opened for reading"
        )
        assert "immutable=1" in store._db._target  # no -shm to read through, none made
        assert sorted(f.object for f in store.facts()) == ["Bosch", "Pfizer"]
        assert state(memory) == before
        with pytest.raises(ReadOnlyDatabaseError, match="was opened read-only"):
            store.write("Marcus Feld", "works for", "Roche")
    assert state(memory) == before


def test_a_file_sqlite_refuses_to_write_opens_read_only(memory, monkeypatch):
    def refused(conn):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(sqlite_database, "_probe_write", refused)  # e.g. a -shm file left read-only by another user
    with TripletStore(memory) as store:
        assert store.read_only and "(SQLite: attempt to write a readonly database)" in store.read_only_notice
        assert store.count() == 2
        with pytest.raises(ReadOnlyDatabaseError, match="was opened read-only"):
            store.write("Marcus Feld", "works for", "Roche")


def test_a_read_only_memory_that_needs_an_upgrade_is_one_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE triplets (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, subject TEXT NOT NULL,"
        " relation TEXT NOT NULL, object TEXT NOT NULL, subject_norm TEXT NOT NULL, relation_norm TEXT NOT NULL,"
        " object_norm TEXT NOT NULL, valid_from REAL NOT NULL, valid_to REAL, ended_by TEXT, superseded_by INTEGER)"
    )
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    before = state(path)
    deny_writes(monkeypatch, path)
    with pytest.raises(ReadOnlyDatabaseError) as err:
        TripletStore(path)
    assert str(err.value).startswith(f"memory {path} is read-only (no write permission on the file) and needs an")
    assert "schema version 1 -> 2" in str(err.value) and "open a writable copy of it once" in str(err.value)
    assert state(path) == before
    r = runner.invoke(app, ["memory", "facts", "--db", str(path)])
    assert r.exit_code == 2 and "needs an upgrade" in r.output and "Traceback" not in r.output
    monkeypatch.undo()
    with TripletStore(path) as store:  # writable again: upgraded on open
        assert not store.read_only and store.count() == 0


def test_a_new_memory_where_no_file_can_be_made_is_named_and_nothing_is_left(tmp_path, monkeypatch):
    missing = tmp_path / "nope" / "m.sqlite"
    with pytest.raises(CannotCreateDatabaseError) as err:
        TripletStore(missing)
    assert str(err.value) == f"cannot create memory {missing}: directory {missing.parent} does not exist"
    assert not missing.parent.exists()
    deny_writes(monkeypatch, tmp_path)
    path = tmp_path / "m.sqlite"
    with pytest.raises(CannotCreateDatabaseError) as err:
        TripletStore(path)
    assert str(err.value) == f"cannot create memory {path}: directory {tmp_path} is read-only (no write permission)"
    assert list(tmp_path.iterdir()) == []
    assert isinstance(err.value, InvalidDatabaseError)  # what every caller already turns into one line


def test_a_new_file_sqlite_cannot_write_is_removed(tmp_path, monkeypatch):
    def refused(self, conn):
        conn.close()
        raise sqlite_database._WriteRefused(sqlite3.OperationalError("attempt to write a readonly database"))

    monkeypatch.setattr(sqlite_database.SqliteDatabase, "_checked", refused)
    path = tmp_path / "m.sqlite"
    with pytest.raises(CannotCreateDatabaseError, match=f"cannot create memory {path}: attempt to write"):
        TripletStore(path)
    assert list(tmp_path.iterdir()) == []


def test_cli_reads_a_read_only_memory_and_refuses_its_writes_in_one_line(memory, tmp_path, monkeypatch):
    deny_writes(monkeypatch, memory)
    db = str(memory)
    notice = f"memory {db} is read-only (no write permission on the file): opened for reading"
    r = runner.invoke(app, ["memory", "facts", "--db", db, "--json"])
    assert r.exit_code == 0 and notice in r.output and '"Pfizer"' in r.output
    r = runner.invoke(app, ["memory", "query", "-s", "Tia Batres", "--db", db], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and notice in r.output and "Bosch" in r.output
    r = runner.invoke(app, ["memory", "export", "--db", db])
    assert r.exit_code == 0 and "Siemens" in r.output
    r = runner.invoke(app, ["memory", "check", "--db", db])
    assert r.exit_code == 0 and notice in r.output
    export = tmp_path.parent / f"{tmp_path.name}-export.json"  # not beside the memory: its folder is compared
    export.write_text('[{"subject": "Marcus Feld", "relation": "works for", "object": "Roche"}]')
    before = state(memory)
    refused = f"error: memory {db} was opened read-only (no write permission on the file): nothing can be written to it"
    for args in (
        ["write", "Marcus Feld", "works for", "Roche"],
        ["forget", "-s", "Tia Batres"],
        ["forget", "-s", "Tia Batres", "--purge"],
        ["import", str(export)],
    ):
        r = runner.invoke(app, ["memory", *args, "--db", db])
        assert r.exit_code == 2, (args, r.output)
        assert r.output.strip() == refused and "Traceback" not in r.output, args
    assert state(memory) == before


def test_cli_names_a_new_memory_location_that_cannot_hold_it(tmp_path, monkeypatch):
    db = tmp_path / "nope" / "m.sqlite"
    r = runner.invoke(app, ["memory", "write", "Marcus Feld", "works for", "Roche", "--db", str(db)])
    assert r.exit_code == 2 and r.output.strip() == (
        f"error: cannot create memory {db}: directory {db.parent} does not exist"
    )
    deny_writes(monkeypatch, tmp_path)
    db = tmp_path / "m.sqlite"
    r = runner.invoke(app, ["memory", "write", "Marcus Feld", "works for", "Roche", "--db", str(db)])
    assert r.exit_code == 2 and r.output.strip() == (
        f"error: cannot create memory {db}: directory {tmp_path} is read-only (no write permission)"
    )
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- real permissions


def _unprivileged() -> list[str]:
    """How to run a command where chmod holds: as it is, or (as root) in a user namespace of no privilege."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None:
        pytest.skip("running as root, and no unshare to drop the privilege that ignores chmod")
    probe = subprocess.run(["unshare", "--map-user=1000", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root, and no user namespace: {probe.stderr.decode().strip()}")
    return ["unshare", "--map-user=1000"]


@pytest.mark.parametrize("denied", ["file", "directory"])
def test_real_permissions(tmp_path, denied):
    prefix = _unprivileged()
    folder = tmp_path / "memories"
    folder.mkdir()
    path = folder / "m.sqlite"
    make_memory(path)
    before = state(path)

    def memlm(*args):
        return subprocess.run(
            [*prefix, sys.executable, "-m", "memlm", "memory", *args], cwd=ROOT, capture_output=True, text=True
        )

    (path if denied == "file" else folder).chmod(0o444 if denied == "file" else 0o555)
    try:
        read = memlm("facts", "--db", str(path), "--json")
        write = memlm("write", "Marcus Feld", "works for", "Roche", "--db", str(path))
        new = memlm("write", "Marcus Feld", "works for", "Roche", "--db", str(folder / "new.sqlite"))
    finally:
        path.chmod(0o644)
        folder.chmod(0o755)
    assert read.returncode == 0, read.stderr
    assert '"Pfizer"' in read.stdout and f"memory {path} is read-only (" in read.stderr
    assert "opened for reading" in read.stderr and read.stderr.count("\n") == 1
    assert write.returncode == 2 and write.stderr.startswith(f"error: memory {path} was opened read-only (")
    assert write.stderr.count("\n") == 1 and "Traceback" not in write.stderr
    if denied == "directory":
        assert new.returncode == 2 and new.stderr == (
            f"error: cannot create memory {folder / 'new.sqlite'}: directory {folder} is read-only (no write permission)\n"
        )
    else:
        assert new.returncode == 0, new.stderr
        (folder / "new.sqlite").unlink()
    assert state(path) == before  # not a byte changed, no -wal or -shm left beside it
