import json
from datetime import datetime

import pytest
from typer.testing import CliRunner

from memlm.cli import app

runner = CliRunner()


def test_write_query_history_forget_round_trip(tmp_path):
    db = str(tmp_path / "m.sqlite")
    r = runner.invoke(app, ["memory", "write", "Dorothea Altemus", "works for", "Pfizer", "--db", db, "-n", "alice"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["memory", "query", "-s", "Dorothea Altemas", "--db", db, "-n", "alice"])
    assert r.exit_code == 0 and "Dorothea Altemus" in r.output and "fuzzy subject" in r.output
    r = runner.invoke(app, ["memory", "facts", "--db", db, "-n", "alice", "--json"])
    fact = json.loads(r.stdout.splitlines()[0])
    assert fact["relation"] == "employed by" and fact["source"] == "cli"
    r = runner.invoke(app, ["memory", "facts", "--db", db, "-n", "alice"], env={"COLUMNS": "200"})
    since = datetime.fromtimestamp(fact["valid_from"]).strftime("%Y-%m-%d %H:%M:%S")  # local, as the page shows
    assert since in r.output and str(int(fact["valid_from"])) not in r.output and " cli " in r.output
    r = runner.invoke(app, ["memory", "forget", "-s", "Dorothea Altemus", "--db", db, "-n", "alice"])
    assert r.exit_code == 0 and "forgot 1" in r.output
    r = runner.invoke(app, ["memory", "history", "-s", "Dorothea Altemus", "--db", db, "-n", "alice"])
    assert "forgotten" in r.output


def test_bad_input_gets_a_clear_error(tmp_path):
    r = runner.invoke(app, ["memory", "facts", "--db", str(tmp_path / "missing.sqlite")])
    assert r.exit_code != 0 and "does not exist" in r.output
    not_ours = tmp_path / "notes.txt"
    not_ours.write_text("hello " * 500)
    r = runner.invoke(app, ["memory", "facts", "--db", str(not_ours)])
    assert r.exit_code == 2 and "not a memlm memory database" in r.output
    assert not_ours.read_text() == "hello " * 500
    db = str(tmp_path / "m.sqlite")
    r = runner.invoke(app, ["memory", "write", "", "works for", "Pfizer", "--db", db])
    assert r.exit_code != 0 and "subject is empty" in r.output


def test_memory_check_finds_links_to_a_missing_or_foreign_fact(memory_location):
    """`memlm memory check` on each backend: exit 0 on an intact memory, 1 with one line per broken
    link (a link to no fact, one into another namespace), 0 again once --fix removed them."""
    from memory_runtime.memory.store import TripletStore

    with TripletStore(memory_location) as store:
        for name in ("Dorothea Altemus", "Tia Batres"):
            store.write(name, "employed by", "Pfizer", namespace="alice", at=1.0)
            store.write(name, "employed by", "BMW", namespace="alice", at=2.0)
        bobs = store.write("Marcus Feld", "employed by", "Roche", namespace="bob").fact.id
        store.forget("Dorothea Altemus", "employed by", "BMW", namespace="alice", purge=True)
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 0 and "every superseded_by link of 2 namespace(s)" in r.output, r.output

    with TripletStore(memory_location) as store:  # what an older memlm's purge and reused ids left behind
        store.write("Dorothea Altemus", "employed by", "Siemens", namespace="alice", at=3.0)
        store.write("Dorothea Altemus", "employed by", "Roche", namespace="alice", at=4.0)
        siemens, roche = store.history("Dorothea Altemus", namespace="alice")
        tia = store.history("Tia Batres", namespace="alice")[0]
        store._db.execute("DELETE FROM triplets WHERE id = ?", (roche.id,))
        store._db.execute("UPDATE triplets SET superseded_by = ? WHERE id = ?", (bobs, tia.id))
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines() == [
        f"namespace 'alice': fact {tia.id} (Tia Batres >> employed by >> Pfizer, superseded) says it was"
        f" superseded by fact {bobs}, a fact of namespace 'bob'",
        f"namespace 'alice': fact {siemens.id} (Dorothea Altemus >> employed by >> Siemens, superseded) says it"
        f" was superseded by fact {roche.id}, which does not exist",
    ]
    assert "2 broken link(s)" in r.output
    r = runner.invoke(app, ["memory", "check", "--db", memory_location, "--fix"])
    assert r.exit_code == 0 and "unlinked 2 fact(s)" in r.output, r.output
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 0, r.output


def test_memory_check_finds_successors_that_go_round_and_fix_breaks_them(memory_location):
    from memory_runtime.memory.store import TripletStore

    with TripletStore(memory_location) as store:
        a, b = (
            store.write(name, "employed by", "Pfizer", namespace="alice", at=1.0).fact for name in ("Ann Lee", "Bo Day")
        )
        for fact, successor in ((a, b), (b, a)):
            store._db.execute(
                "UPDATE triplets SET valid_to = 2.0, ended_by = 'superseded', superseded_by = ? WHERE id = ?",
                (successor.id, fact.id),
            )
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines()[:2] == [
        f"namespace 'alice': fact {a.id} (Ann Lee >> employed by >> Pfizer): its successors lead back to it"
        f" ({a.id} -> {b.id} -> {a.id})",
        f"namespace 'alice': fact {b.id} (Bo Day >> employed by >> Pfizer): its successors lead back to it"
        f" ({a.id} -> {b.id} -> {a.id})",
    ]
    assert "0 broken link(s), 2 fact(s) in cycles of successors" in r.output
    r = runner.invoke(app, ["memory", "check", "--db", memory_location, "--fix"])
    assert r.exit_code == 0 and "unlinked 2 fact(s)" in r.output, r.output
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 0 and "every history could have happened" in r.output, r.output


def test_memory_check_finds_facts_that_ended_when_their_successor_had_not_begun(memory_location):
    """What imports before 2026-11-30 left (a version superseded by the namespace's older copy of its successor):
    named by `memlm memory check`, its export refused on import; --fix unlinks it, and the export imports."""
    from memory_runtime.memory.facts import local_time
    from memory_runtime.memory.store import TripletStore
    from memory_runtime.memory.transfer import BadImport, export_chunks, import_file

    with TripletStore(memory_location) as store:
        beta = store.write("Ann Lee", "employed by", "Beta", namespace="t", at=1000.0).fact
        store.write("Ann Lee", "employed by", "Alpha", namespace="s", at=1500.0)
        alpha = store.write("Ann Lee", "employed by", "Beta", namespace="s", at=2000.0).superseded[0]
        store._db.execute(  # Alpha moved into t, 1500-2000, superseded by t's Beta (since 1000)
            "UPDATE triplets SET namespace = 't', superseded_by = ? WHERE id = ?", (beta.id, alpha.id)
        )
        with pytest.raises(BadImport, match="a superseded fact ends when its successor begins"):
            import_file(store, "".join(export_chunks(store, "t")), namespace="u")
    r = runner.invoke(app, ["memory", "check", "--db", memory_location])
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines() == [
        f"namespace 't': fact {alpha.id} (Ann Lee >> employed by >> Alpha): it ended {local_time(2000.0)}, but fact"
        f" {beta.id}, which superseded it, began {local_time(1000.0)}: a superseded fact ends when its successor begins"
    ]
    r = runner.invoke(app, ["memory", "check", "--db", memory_location, "--fix"])
    assert r.exit_code == 0 and "unlinked 1 fact(s)" in r.output, r.output
    with TripletStore(memory_location) as store:
        assert store.history_problems() == []
        done = import_file(store, "".join(export_chunks(store, "t")), namespace="u")
        assert done.message == "2 stored (1 current, 1 in history), 0 already there, 0 superseded"


def test_export_then_import_restores_the_history_and_refuses_a_bad_file(tmp_path, memory_location):
    """`memlm memory export` and `memlm memory import` share the page's format and code path
    (memory_runtime/memory/transfer.py): every version comes back with its dates; a bad file stores nothing."""
    from memory_runtime.memory.store import TripletStore

    source = str(tmp_path / "source.sqlite")
    with TripletStore(source) as store:
        store.write("Dorothea Altemus", "works for", "Pfizer", namespace="alice", at=1_700_000_000.0)
        store.write("Dorothea Altemus", "works for", "BMW", namespace="alice", at=1_700_086_400.0)
    r = runner.invoke(app, ["memory", "export", "--db", source, "-n", "alice"])
    assert r.exit_code == 0 and [f["object"] for f in json.loads(r.stdout)["history"]] == ["Pfizer", "BMW"]
    out = tmp_path / "alice.json"
    r = runner.invoke(app, ["memory", "export", "--db", source, "-n", "alice", "--out", str(out)])
    assert r.exit_code == 0 and "exported 1 current facts of 'alice' (2 versions)" in r.output, r.output

    r = runner.invoke(app, ["memory", "import", str(out), "--db", memory_location, "-n", "bob"])
    assert r.exit_code == 0, r.output
    assert "into 'bob': 2 stored (1 current, 1 in history), 0 already there, 0 superseded" in r.output
    with TripletStore(memory_location) as store:
        assert [(f.object, f.valid_from, f.valid_to) for f in store.history("Dorothea Altemus", namespace="bob")] == [
            ("Pfizer", 1_700_000_000.0, 1_700_086_400.0),
            ("BMW", 1_700_086_400.0, None),
        ]
    r = runner.invoke(app, ["memory", "import", str(out), "--db", memory_location, "-n", "bob"])
    assert "0 stored, 2 already there" in r.output

    bad = tmp_path / "bad.json"
    facts = [{"subject": "Ann Lee", "relation": "knows", "object": "Tia Batres"}]
    facts.append({"subject": "", "relation": "knows", "object": "Ann Lee"})
    bad.write_text(json.dumps(facts))
    r = runner.invoke(app, ["memory", "import", str(bad), "--db", memory_location, "-n", "carol"])
    assert r.exit_code == 2 and "nothing was stored: [1]: subject is empty" in r.output, r.output
    (tmp_path / "empty.json").write_text("{}")
    r = runner.invoke(app, ["memory", "import", str(tmp_path / "empty.json"), "--db", memory_location, "-n", "carol"])
    assert r.exit_code == 2 and "the file has no facts" in r.output
    r = runner.invoke(app, ["memory", "import", str(tmp_path / "missing.json"), "--db", memory_location])
    assert r.exit_code == 2 and "missing.json" in r.output
    with TripletStore(memory_location) as store:
        assert store.namespaces() == ["bob"]


def test_bench_memory_rejects_a_bad_config(tmp_path):
    bad = tmp_path / "memory.yaml"
    bad.write_text("fuzzy: {bands: 40, rows: 3, num_perm: 48}\n")
    r = runner.invoke(app, ["bench", "memory", "--triplets", "1000", "--config", str(bad)])
    assert r.exit_code == 2 and "exceeds num_perm" in r.output


def test_bench_memory_prints_one_json_line_with_every_figure():
    r = runner.invoke(app, ["bench", "memory", "--triplets", "3000", "--queries", "100", "--namespaces", "3"])
    assert r.exit_code == 0, r.output
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    for key in (
        "ingest_per_s",
        "exact_p50_ms",
        "fuzzy_p50_ms",
        "fuzzy_p99_ms",
        "recall",
        "top1",
        "scan_p50_ms",
        "exact_scan_p50_ms",
        "speedup_vs_scan",
        "peak_rss_mb",
    ):
        assert figures[key] > 0, key
    assert figures["recall"] >= 0.95 and figures["top1"] >= 0.9
    assert figures["resident_indexes"] == 1  # only the queried namespace's subject index was built


@pytest.mark.postgres
def test_bench_memory_on_postgres_times_pg_trgm_and_leaves_the_database_empty(postgres_url):
    from memory_runtime.memory.store import TripletStore

    r = runner.invoke(app, ["bench", "memory", "--triplets", "2000", "--queries", "50", "--db", postgres_url])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["backend"] == "postgresql" and out["triplets"] == 2000
    assert out["top1"] > 0.8 and 0 <= out["trgm_top1"] <= 1 and out["trgm_p50_ms"] > 0
    with TripletStore(postgres_url) as store:
        assert store.namespaces() == []
        store.write("Ada Lin", "employed by", "Pfizer")
    r = runner.invoke(app, ["bench", "memory", "--triplets", "1000", "--db", postgres_url])
    assert r.exit_code == 2 and "already holds facts" in r.output
