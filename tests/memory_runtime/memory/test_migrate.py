"""memlm memory migrate: SQLite <-> PostgreSQL, every version with its id, verified."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memlm.cli import app
from memory_runtime.memory.migrate import migrate
from memory_runtime.memory.store import TripletStore

pytestmark = pytest.mark.postgres


def _fill(location: str) -> None:
    with TripletStore(location) as store:
        store.write_many([(f"Person {i}", "employed by", f"Org {i % 3}") for i in range(30)], namespace="alice", at=1.0)
        store.write("Person 0", "employed by", "Org 9", namespace="alice", at=2.0, source="chatcmpl-7")  # history
        store.write("Bo Ek", "founder of", "Acme", namespace="bob", at=3.0)
        store.forget("Bo Ek", namespace="bob", at=4.0)


def test_sqlite_to_postgres_and_back_keeps_every_fact_and_version(tmp_path, postgres_url):
    src, back = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    _fill(src)
    done = migrate(src, postgres_url)
    assert (done.rows, done.namespaces) == (32, 2)
    migrate(postgres_url, back)
    with TripletStore(src) as a, TripletStore(postgres_url) as pg, TripletStore(back) as b:
        for store in (pg, b):
            for ns in ("alice", "bob"):
                assert store.history(namespace=ns) == a.history(namespace=ns)  # ids, intervals, ended_by
            assert store.query("Person 0", namespace="alice").facts[0].source == "chatcmpl-7"
        assert pg.write("New Person", "employed by", "Acme", namespace="alice").fact.id == 33  # ids go on


def test_an_id_given_to_a_purged_fact_is_not_given_out_again_after_a_migration(tmp_path, postgres_url):
    src, back = str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")
    _fill(src)
    with TripletStore(src) as store:
        gone = store.write("Lena Vogt", "employed by", "Roche", namespace="bob").fact.id  # the last row, then purged
        store.forget("Lena Vogt", namespace="bob", purge=True)
    migrate(src, postgres_url)
    migrate(postgres_url, back)
    for location in (postgres_url, back):
        with TripletStore(location) as store:
            assert store.write("New Person", "employed by", "Acme", namespace="carol").fact.id == gone + 1


def test_migrate_refuses_a_memory_that_holds_facts(tmp_path, postgres_url):
    src = str(tmp_path / "a.sqlite")
    _fill(src)
    with TripletStore(postgres_url) as pg:
        pg.write("Kept Person", "employed by", "Acme")
    runner = CliRunner()
    r = runner.invoke(app, ["memory", "migrate", src, postgres_url])
    assert r.exit_code == 2 and "already holds facts" in r.output
    with TripletStore(postgres_url) as pg:
        assert [f.subject for f in pg.facts()] == ["Kept Person"]  # nothing mixed in
    r = runner.invoke(app, ["memory", "migrate", str(tmp_path / "missing.sqlite"), str(tmp_path / "c.sqlite")])
    assert r.exit_code == 2 and "does not exist" in r.output
    ok = runner.invoke(app, ["memory", "migrate", src, str(tmp_path / "c.sqlite")])
    assert ok.exit_code == 0 and "copied and verified 32 facts of 2 namespaces" in ok.output
