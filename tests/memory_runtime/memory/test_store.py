import sqlite3
import threading
import time
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_runtime.memory.database import InvalidDatabaseError
from memory_runtime.memory.history import RestoreRefused
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term


@pytest.fixture
def store(memory_location):
    """A fresh memory on each backend: the semantics are the same on SQLite and PostgreSQL."""
    with TripletStore(memory_location) as s:
        yield s


def names(result):
    return sorted(f.subject for f in result)


def test_write_then_query_each_field(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    store.write("Tia Batres", "employed by", "Pfizer")
    store.write("Cyrus Alfred", "customer of", "Pfizer")
    assert names(store.query(object="Pfizer")) == ["Cyrus Alfred", "Dorothea Altemus", "Tia Batres"]
    assert names(store.query(relation="employed by", object="Pfizer")) == ["Dorothea Altemus", "Tia Batres"]
    assert store.query(subject="Cyrus Alfred").triplets == [("Cyrus Alfred", "customer of", "Pfizer")]
    assert len(store.query("Tia Batres", "employed by", "Pfizer")) == 1  # existence check
    assert len(store.query("Tia Batres", "customer of", "Pfizer")) == 0


def test_normalisation_of_case_whitespace_punctuation():
    assert normalize_term("  Dorothea   ALTEMUS ") == "dorothea altemus"
    assert normalize_term("Pfizer Inc.") == normalize_term("pfizer inc")
    assert normalize_term("Smith-Jones") == "smith jones"
    assert normalize_term("Ｐｆｉｚｅｒ") == "pfizer"  # full-width letters (NFKC)


def test_exact_match_ignores_case_and_punctuation(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer Inc.")
    result = store.query(subject="dorothea  altemus", object="PFIZER INC")
    assert len(result) == 1 and result.fuzzy == {}
    assert result.facts[0].object == "Pfizer Inc."  # returned as written


def test_relation_aliases_resolve_to_canonical(store):
    store.write("Dorothea Altemus", "works for", "Pfizer")
    fact = store.query(relation="Employed by").facts[0]
    assert fact.relation == "employed by"
    assert len(store.query(relation="is an employee of")) == 1


def test_unknown_relation_is_stored_as_written(store):
    store.write("Ada Lovelace", "collaborator of", "Babbage Ltd")
    assert store.query(relation="collaborator of").facts[0].relation == "collaborator of"


def test_a_relation_with_a_table_relation_s_words_is_canonical(store):
    store.write("Dorothea Altemus", "customer", "Pfizer")  # "customer of" without its "of"
    store.write("Tia Batres", "is the president", "Acme Rockets")
    assert {f.relation for f in store.facts()} == {"customer of", "president of"}
    assert store.canonical_relation("coaches") == "coaches"  # no table relation has these words


def test_reads_meet_a_relation_outside_the_table_by_its_words(store):
    store.write("Gianna Russo", "coaches", "Bayern Munich")
    for asked in ("coaches", "coach", "is the coach of", "coached"):
        result = store.query(relation=asked, object="Bayern Munich")
        assert [f.subject for f in result.facts] == ["Gianna Russo"], asked
    assert store.query(relation="coach").fuzzy["relation"].matched == "coaches"
    assert len(store.query(relation="trains", object="Bayern Munich")) == 0
    assert len(store.query(relation="coach", fuzzy=False)) == 0


def test_fuzzy_fallback_on_one_typo_says_what_it_matched(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    store.write("Pasquale Ballif", "employed by", "Siemens")
    result = store.query(subject="Dorothea Altemas")
    assert result.triplets == [("Dorothea Altemus", "employed by", "Pfizer")]
    match = result.fuzzy["subject"]
    assert (match.asked, match.matched) == ("Dorothea Altemas", "Dorothea Altemus")
    assert 0.5 <= match.score < 1.0


def test_fuzzy_relation_typo(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    result = store.query(subject="Dorothea Altemus", relation="employd by")
    assert len(result) == 1 and "relation" in result.fuzzy


def test_no_acceptable_candidate_gives_empty_result(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    assert len(store.query(subject="Zebulon Quartermaine")) == 0
    assert len(store.query(subject="Dorothea Altemas", fuzzy=False)) == 0


def test_fuzzy_threshold_is_configurable():
    strict = MemoryConfig.load().model_copy(
        update={"fuzzy": MemoryConfig().fuzzy.model_copy(update={"threshold": 0.95})}
    )
    with TripletStore(config=strict) as s:
        s.write("Dorothea Altemus", "employed by", "Pfizer")
        assert len(s.query(subject="Dorothea Altemas")) == 0


def test_identical_writes_are_deduplicated(store):
    first = store.write("Tia Batres", "customer of", "Pfizer")
    again = store.write("tia batres", "is a customer of", "pfizer")
    assert first.status == "stored" and again.status == "duplicate"
    assert again.fact.id == first.fact.id
    assert len(store.facts()) == 1


def test_functional_relation_supersedes_and_keeps_history(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer", at=1000.0)
    moved = store.write("Dorothea Altemus", "employed by", "BMW", at=2000.0)
    assert [f.object for f in moved.superseded] == ["Pfizer"]
    assert store.query(subject="Dorothea Altemus").triplets == [("Dorothea Altemus", "employed by", "BMW")]
    assert [f.object for f in store.query(subject="Dorothea Altemus", as_of=1500.0)] == ["Pfizer"]
    assert store.query(subject="Dorothea Altemus", as_of=500.0).facts == []
    old, new = store.history(subject="Dorothea Altemus")
    assert (old.object, old.valid_from, old.valid_to, old.ended_by, old.superseded_by) == (
        "Pfizer",
        1000.0,
        2000.0,
        "superseded",
        new.id,
    )
    assert new.current


def test_object_functional_relation_supersedes_previous_subject(store):
    store.write("Barack Obama", "president of", "United States", at=1.0)
    store.write("Donald Trump", "president of", "United States", at=2.0)
    assert names(store.query(relation="president of", object="United States")) == ["Donald Trump"]


def test_non_functional_relation_accumulates(store):
    store.write("Tia Batres", "investor in", "Pfizer")
    store.write("Tia Batres", "investor in", "BMW")
    assert len(store.query(subject="Tia Batres")) == 2


def test_as_of_accepts_datetime(store):
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    store.write("Tia Batres", "customer of", "Pfizer", at=when)
    assert len(store.query(subject="Tia Batres", as_of=when)) == 1


def test_namespaces_are_isolated(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice")
    store.write("Dorothea Altemus", "employed by", "BMW", namespace="bob")
    assert [f.object for f in store.query(subject="Dorothea Altemus", namespace="alice")] == ["Pfizer"]
    assert [f.object for f in store.query(subject="Dorothea Altemus", namespace="bob")] == ["BMW"]
    # bob's write did not supersede alice's fact, and fuzzy lookups never see other namespaces
    assert store.history(subject="Dorothea Altemus", namespace="alice")[0].current
    assert len(store.query(subject="Dorothea Altemas", namespace="carol")) == 0
    assert store.forget(subject="Dorothea Altemus", namespace="bob") == 1
    assert len(store.facts("alice")) == 1
    assert store.namespaces() == ["alice", "bob"]


def test_listings_page_by_relation_and_time_newest_first(store):
    """What the memory page lists: one relation (aliases resolved), at a time, newest first, counted alike."""
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
    store.write("Tia Batres", "lives in", "Lyon", namespace="alice", at=2.0)
    store.write("Dorothea Altemus", "works for", "BMW", namespace="alice", at=3.0)  # supersedes Pfizer
    store.write("Marcus Feld", "employed by", "Siemens", namespace="bob", at=1.0)
    newest = store.facts("alice", newest_first=True, limit=1)
    assert [f.object for f in newest] == ["BMW"]
    assert [f.object for f in store.facts("alice", relation="works for")] == ["BMW"]
    assert [f.object for f in store.facts("alice", as_of=2.5, newest_first=True)] == ["Lyon", "Pfizer"]
    assert [f.object for f in store.facts("alice", as_of=2.5, relation="employed by")] == ["Pfizer"]
    assert store.count("alice") == 2 and store.count("alice", current=False) == 3
    assert store.count("alice", as_of=2.5, relation="employed by") == 1
    assert store.count("alice", current=False, relation="employed by") == 2
    assert store.count("alice", as_of=0.5) == 0
    assert store.relations("alice") == [("employed by", 1), ("lives in", 1)]
    assert store.relations("bob") == [("employed by", 1)]
    with pytest.raises(ValueError, match="call syntax"):
        store.facts("alice", relation="a>>b")


def test_a_fact_keeps_what_wrote_it(store):
    first = store.write("Tia Batres", "lives in", "Lyon", source="chatcmpl-1")
    again = store.write("Tia Batres", "lives in", "Lyon", source="import")  # a duplicate keeps the first source
    store.write_many([("Marcus Feld", "investor in", "Siemens")], source="page")
    store.write("Tia Batres", "lives in", "Paris")  # no source given
    assert (first.fact.source, again.status, again.fact.source) == ("chatcmpl-1", "duplicate", "chatcmpl-1")
    assert {f.object: f.source for f in store.facts()} == {"Lyon": "chatcmpl-1", "Siemens": "page", "Paris": None}
    assert [f.source for f in store.history("Tia Batres")] == ["chatcmpl-1", None]


def test_a_memory_of_schema_version_1_gains_the_source_column_on_open(tmp_path):
    from memory_runtime.memory.database import APPLICATION_ID

    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)  # the triplets table as memlm wrote it before sources were kept
    conn.executescript(
        "CREATE TABLE triplets (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, subject TEXT NOT NULL,"
        " relation TEXT NOT NULL, object TEXT NOT NULL, subject_norm TEXT NOT NULL, relation_norm TEXT NOT NULL,"
        " object_norm TEXT NOT NULL, valid_from REAL NOT NULL, valid_to REAL, ended_by TEXT, superseded_by INTEGER);"
        "INSERT INTO triplets (namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
        " valid_from) VALUES ('default', 'Tia Batres', 'lives in', 'Lyon', 'tia batres', 'lives in', 'lyon', 1.0);"
        f"PRAGMA application_id={APPLICATION_ID}; PRAGMA user_version=1;"
    )
    conn.close()
    with TripletStore(path) as store:
        assert [(f.object, f.source) for f in store.facts()] == [("Lyon", None)]
        store.write("Marcus Feld", "investor in", "Siemens", source="import")
        assert [f.source for f in store.facts()] == [None, "import"]
    with TripletStore(path) as store:  # opened again: the column is there, nothing added twice
        assert len(store.facts()) == 2


_V1_TABLE = (
    "CREATE TABLE triplets (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, subject TEXT NOT NULL,"
    " relation TEXT NOT NULL, object TEXT NOT NULL, subject_norm TEXT NOT NULL, relation_norm TEXT NOT NULL,"
    " object_norm TEXT NOT NULL, valid_from REAL NOT NULL, valid_to REAL, ended_by TEXT, superseded_by INTEGER,"
    " source TEXT)"
)


def test_a_memory_of_schema_version_1_is_rebuilt_to_never_reuse_ids_keeping_every_row(tmp_path):
    from memory_runtime.memory.database import APPLICATION_ID, SCHEMA_VERSION

    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(_V1_TABLE)
    conn.execute("CREATE INDEX triplets_namespace_id ON triplets(namespace, id)")
    rows = [  # ids with gaps; fact 3 was superseded by fact 9, the last row, since purged
        (1, "alice", "Tia Batres", "lives in", "Lyon", "tia batres", "lives in", "lyon", 1.0, None, None, None, None),
        (3, "alice", "Dorothea Altemus", "employed by", "Pfizer", "dorothea altemus", "employed by", "pfizer",
         1.0, 2.0, "superseded", 9, "import"),
        (7, "bob", "Marcus Feld", "employed by", "Roche", "marcus feld", "employed by", "roche", 1.5, None, None, None,
         "chatcmpl-1"),
    ]  # fmt: skip
    conn.executemany(f"INSERT INTO triplets VALUES ({', '.join('?' * 13)})", rows)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()

    with TripletStore(path) as store:
        assert store._db.rows("SELECT * FROM triplets ORDER BY id") == rows  # every row, with its id
        assert [(link.fact.id, link.target_namespace) for link in store.broken_links()] == [(3, None)]
        assert store.write("Lena Vogt", "employed by", "Roche", namespace="bob").fact.id == 10  # not 8, not 9
        assert store.query(subject="Tia Batre", namespace="alice").triplets == [("Tia Batres", "lives in", "Lyon")]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'triplets'").fetchone()
    assert "AUTOINCREMENT" in ddl
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"triplets_subject", "triplets_object", "triplets_namespace_id", "triplets_superseded_by"} <= indexes
    assert conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%rebuilt%'").fetchall() == []
    conn.close()
    with TripletStore(path) as store:  # opened again: nothing rebuilt, nothing lost
        assert len(store._db.rows("SELECT id FROM triplets")) == 4


def test_a_failed_rebuild_leaves_the_version_1_file_as_it_was(tmp_path, monkeypatch):
    from memory_runtime.memory.database import APPLICATION_ID
    from memory_runtime.memory.sqlite_database import SqliteDatabase

    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(_V1_TABLE)
    conn.execute(
        "INSERT INTO triplets VALUES (4, 'alice', 'Tia Batres', 'lives in', 'Lyon', 'tia batres', 'lives in',"
        " 'lyon', 1.0, NULL, NULL, NULL, NULL)"
    )
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()

    def disk_full(self, cur, last=0):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(SqliteDatabase, "reserve_ids", disk_full)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        TripletStore(path)
    conn = sqlite3.connect(path)
    (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'triplets'").fetchone()
    assert "AUTOINCREMENT" not in ddl and conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT id, subject FROM triplets").fetchall() == [(4, "Tia Batres")]
    conn.close()
    monkeypatch.undo()
    with TripletStore(path) as store:  # the next open rebuilds it
        assert [f.id for f in store.facts("alice")] == [4]


def test_forget_ends_facts_but_keeps_history(store):
    store.write("Tia Batres", "customer of", "Pfizer", at=1.0)
    store.write("Tia Batres", "investor in", "BMW", at=1.0)
    assert store.forget(subject="Tia Batres", relation="customer of", at=5.0) == 1
    assert store.query(subject="Tia Batres").triplets == [("Tia Batres", "investor in", "BMW")]
    assert [f.ended_by for f in store.history(subject="Tia Batres")] == ["forgotten", None]
    assert len(store.query(subject="Tia Batres", as_of=3.0)) == 2


def test_restore_undoes_a_forget_as_a_new_version_and_refuses_what_it_would_overwrite(store):
    """The page's Undo: a forgotten fact current again, the forget and the restore both in its history;
    refused, saying why, where that would end a newer fact, for a fact not forgotten, and once purged."""
    pfizer = store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0).fact
    store.write("Dorothea Altemus", "CEO of", "BMW", namespace="alice", at=1.5)
    store.forget("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=2.0)
    restored = store.restore(pfizer.id, namespace="alice", at=3.0)
    assert (restored.triplet, restored.valid_from, restored.source) == (pfizer.triplet, 3.0, "restore")
    versions = store.history("Dorothea Altemus", "employed by", namespace="alice")
    assert [(f.valid_from, f.valid_to, f.ended_by, f.source) for f in versions] == [
        (1.0, 2.0, "forgotten", None),
        (3.0, None, None, "restore"),
    ]  # the forget stays visible
    assert {f.object for f in store.facts("alice")} == {"Pfizer", "BMW"}  # the role held beside it is not ended
    assert store.query("Dorothea Altemus", "employed by", namespace="alice", as_of=2.5).facts == []
    with pytest.raises(RestoreRefused, match="is current: there is nothing to restore"):
        store.restore(restored.id, namespace="alice")
    with pytest.raises(RestoreRefused, match="current again already"):
        store.restore(pfizer.id, namespace="alice")

    store.forget("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=4.0)
    store.write("Dorothea Altemus", "employed by", "Siemens", namespace="alice", at=5.0)  # ends CEO of BMW
    before = store.history(namespace="alice")
    with pytest.raises(RestoreRefused, match=r"would end “Dorothea Altemus employed by Siemens” \(fact \d+\), which"):
        store.restore(restored.id, namespace="alice")  # employed by is functional: Siemens took its place
    bmw = next(f for f in before if f.object == "BMW")
    with pytest.raises(RestoreRefused, match="superseded by a newer fact, not forgotten: correct the fact"):
        store.restore(bmw.id, namespace="alice")
    assert store.history(namespace="alice") == before  # a refused restore wrote and ended nothing

    with pytest.raises(RestoreRefused, match="not in namespace 'bob'") as other:
        store.restore(restored.id, namespace="bob")  # another namespace's fact is not there, as a purged one
    assert other.value.missing
    store.forget("Dorothea Altemus", namespace="alice", purge=True)
    with pytest.raises(RestoreRefused, match="purged \\(erased for good, which no restore undoes\\)") as purged:
        store.restore(pfizer.id, namespace="alice")
    assert purged.value.missing


def test_purge_deletes_every_version_and_drops_terms_from_the_fuzzy_index(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer", at=1.0)
    store.write("Dorothea Altemus", "employed by", "BMW", at=2.0)
    store.write("Pasquale Ballif", "employed by", "BMW", at=2.0)
    assert len(store.query(subject="Dorothea Altemas")) == 1  # builds the subject index
    assert store.forget(subject="Dorothea Altemus", purge=True) == 2
    assert store.history(subject="Dorothea Altemus") == []
    assert "dorothea altemus" not in store.fuzzy_index("default", "subject")
    assert len(store.query(subject="Dorothea Altemas")) == 0


def test_purge_erases_the_earlier_versions_and_leaves_no_link_to_the_erased(store):
    """The page's "Erase every version for good?": the fact, the values it replaced of its subject and
    relation, back to the first; what it ended of another relation or subject stays, unlinked."""
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
    store.write("Dorothea Altemus", "CEO of", "BMW", namespace="alice", at=2.0)
    store.write("Dorothea Altemus", "employed by", "BMW", namespace="alice", at=2.0)  # supersedes Pfizer
    store.write("Tia Batres", "chairperson of", "Siemens", namespace="alice", at=2.0)
    store.write("Dorothea Altemus", "chairperson of", "Siemens", namespace="alice", at=2.5)  # ends Tia's (object)
    current = store.write("Dorothea Altemus", "employed by", "Siemens", namespace="alice", at=3.0)  # ends CEO of BMW
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="bob", at=1.0)
    store.write("Dorothea Altemus", "employed by", "BMW", namespace="bob", at=2.0)
    bob_before = store.history(namespace="bob")

    assert store.forget("Dorothea Altemus", "works for", "Siemens", namespace="alice", purge=True) == 3
    assert store.history("Dorothea Altemus", "employed by", namespace="alice") == []
    assert [f.object for f in store.iter_facts("alice", current=False)] == ["BMW", "Siemens", "Siemens"]
    ceo = store.history("Dorothea Altemus", "CEO of", namespace="alice")[0]
    assert (ceo.ended_by, ceo.valid_to, ceo.superseded_by) == ("superseded", 3.0, None)
    store.forget("Dorothea Altemus", "chairperson of", namespace="alice", purge=True)
    tia = store.history("Tia Batres", namespace="alice")[0]
    assert (tia.ended_by, tia.superseded_by) == ("superseded", None)  # not a version of Dorothea's fact
    assert store.history(namespace="bob") == bob_before  # another namespace is never touched
    assert store.broken_links() == []
    later = store.write("Marcus Feld", "employed by", "Roche", namespace="bob")
    assert later.fact.id > current.fact.id  # the erased fact's id is not given out again


def test_purging_an_old_version_erases_it_and_those_before_it_not_the_newer(store):
    for at, employer in enumerate(["Pfizer", "BMW", "Siemens", "Roche"]):
        store.write("Dorothea Altemus", "employed by", employer, at=float(at))
    assert store.forget("Dorothea Altemus", "employed by", "BMW", purge=True) == 2
    assert [(f.object, f.ended_by) for f in store.history("Dorothea Altemus")] == [
        ("Siemens", "superseded"),
        ("Roche", None),
    ]
    assert store.broken_links() == []


def test_a_purged_last_row_s_id_is_never_given_out_again(memory_location):
    """SQLite without AUTOINCREMENT gave the purged last row's id to the next fact, of any namespace:
    an earlier version's superseded_by then pointed into another user's memory."""
    with TripletStore(memory_location) as store:
        store.write("Dorothea Altemus", "lives in", "Lyon", namespace="alice")
        gone = store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice").fact.id
        store.forget("Dorothea Altemus", "employed by", namespace="alice", purge=True)
    with TripletStore(memory_location) as store:  # reopened: the counter is stored, not kept in memory
        assert store.write("Marcus Feld", "employed by", "Roche", namespace="bob").fact.id == gone + 1


def test_broken_links_are_found_and_unlinked(store):
    """What an older memlm's purge could leave behind: a link to no fact, and one into another namespace."""
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
    store.write("Dorothea Altemus", "employed by", "BMW", namespace="alice", at=2.0)
    store.write("Tia Batres", "employed by", "Pfizer", namespace="alice", at=1.0)
    store.write("Tia Batres", "employed by", "BMW", namespace="alice", at=2.0)
    bobs = store.write("Marcus Feld", "employed by", "Roche", namespace="bob").fact
    dorothea, tia = (store.history(name, namespace="alice")[0] for name in ("Dorothea Altemus", "Tia Batres"))
    store._db.execute("UPDATE triplets SET superseded_by = ? WHERE id = ?", (bobs.id + 1000, dorothea.id))
    store._db.execute("UPDATE triplets SET superseded_by = ? WHERE id = ?", (bobs.id, tia.id))
    broken = store.broken_links()
    assert [(link.fact.id, link.target_namespace) for link in broken] == [(dorothea.id, None), (tia.id, "bob")]
    assert str(broken[0]) == (
        f"namespace 'alice': fact {dorothea.id} (Dorothea Altemus >> employed by >> Pfizer, superseded)"
        f" says it was superseded by fact {bobs.id + 1000}, which does not exist"
    )
    assert str(broken[1]).endswith(f"superseded by fact {bobs.id}, a fact of namespace 'bob'")
    assert store.unlink_broken() == 2
    assert store.broken_links() == []
    assert [f.ended_by for f in store.history(namespace="alice") if not f.current] == ["superseded", "superseded"]


def test_forget_needs_a_field(store):
    with pytest.raises(ValueError, match="at least one"):
        store.forget()


def test_index_stays_in_sync_with_later_writes(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    assert len(store.query(subject="Dorothea Altemas")) == 1  # index now resident
    store.write("Pasquale Ballif", "customer of", "BMW")
    assert store.query(subject="Pasquale Balif").triplets == [("Pasquale Ballif", "customer of", "BMW")]


def test_warm_fuzzy_builds_each_index_once_while_searches_wait_for_it(store, monkeypatch):
    """The page warms a namespace's indexes when it opens; a search arriving during that build waits
    for it instead of building the same index a second time."""
    from memory_runtime.memory import fuzzy

    store.write_many([(f"Person Number{i}", "employed by", f"Org {i}") for i in range(300)], namespace="big")
    built, started, release = [], threading.Event(), threading.Event()
    add = fuzzy.FuzzyIndex.add

    def slow_add(index, terms):
        terms = list(terms)
        built.append(len(terms))
        if len(terms) == 300:  # the subject index of the warm-up: hold it until the search is waiting
            started.set()
            release.wait(5)
        return add(index, terms)

    monkeypatch.setattr(fuzzy.FuzzyIndex, "add", slow_add)
    warm = threading.Thread(target=store.warm_fuzzy, args=("big",))
    warm.start()
    assert started.wait(5)
    found = []
    search = threading.Thread(target=lambda: found.append(store.query(subject="Person Numbr7", namespace="big")))
    search.start()
    search.join(0.3)
    assert search.is_alive()  # waiting for the build in flight, not building its own
    release.set()
    warm.join(5)
    search.join(5)
    assert found[0].triplets == [("Person Number7", "employed by", "Org 7")]
    assert built.count(300) == 2  # the subject and object indexes, once each; relation: one term
    assert set(store._fuzzy.keys()) == {("big", "subject"), ("big", "relation"), ("big", "object")}


def test_resident_indexes_are_bounded():
    config = MemoryConfig.load().model_copy(update={"max_indexes": 3})
    with TripletStore(config=config) as s:
        for i in range(10):
            s.write(f"Person Number{i}", "employed by", "Pfizer", namespace=f"user{i}")
            assert len(s.query(subject=f"Person Numbr{i}", namespace=f"user{i}")) == 1
        assert len(s._fuzzy.keys()) == 3


@pytest.mark.parametrize(
    "args, error, message",
    [
        (("", "employed by", "Pfizer"), ValueError, "subject is empty"),
        (("   ", "employed by", "Pfizer"), ValueError, "subject is empty"),
        (("Tia", "employed by", 42), TypeError, "object must be a string"),
        (("Tia", None, "Pfizer"), TypeError, "relation must be a string"),
        (("!!!", "employed by", "Pfizer"), ValueError, "no letters or digits"),
        (("Top Rank", "founder of", "top  rank"), ValueError, "relates 'Top Rank' to itself"),
    ],
)
def test_bad_terms_are_rejected_clearly(store, args, error, message):
    with pytest.raises(error, match=message):
        store.write(*args)


@pytest.mark.parametrize(
    "looks_the_same",
    [
        "Dorothea\u200b Altemus",  # a zero-width space
        "Dorothea Alte\u00admus",  # a soft hyphen
        "\ufeffDorothea Altemus",  # a byte-order mark
        "Dorothea \u202aAltemus\u202c",  # bidirectional embedding
        "Dorothea\u00a0Altemus",  # a no-break space
    ],
)
def test_names_that_look_the_same_are_one_name(store, looks_the_same):
    """Invisible characters are dropped before the store compares names: the same Dorothea, whose one
    current employer (a functional relation) the second write supersedes, and a read finds her exactly."""
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
    written = store.write(looks_the_same, "employed by", "BMW", namespace="alice", at=2.0)
    assert written.fact.subject == "Dorothea Altemus" and [f.object for f in written.superseded] == ["Pfizer"]
    result = store.query(looks_the_same, "employed by", namespace="alice")
    assert [f.object for f in result] == ["BMW"] and result.fuzzy == {}
    assert [f.subject for f in store.facts("alice")] == ["Dorothea Altemus"]


def test_names_are_kept_in_nfc_and_refused_with_control_characters_or_over_the_limit(store):
    decomposed = "Jose\u0301 Nun\u0303ez"  # combining accents, as a Mac may type them
    assert store.write(decomposed, "employed by", "Pfizer").fact.subject == "Jos\u00e9 Nu\u00f1ez"  # NFC
    assert [f.object for f in store.query("Jos\u00e9 Nu\u00f1ez", "employed by")] == ["Pfizer"]
    for bad, message in [
        ("Dora\x00", "subject holds a control character \\(U\\+0000\\)"),
        ("Dora\x1b[31m", "subject holds a control character \\(U\\+001B\\)"),
        ("D" * 60_000, "subject is 60,000 characters long: a term has at most 200"),
    ]:
        with pytest.raises(ValueError, match=message):
            store.write(bad, "employed by", "Pfizer")
    assert store.write("D" * 200, "employed by", "Pfizer").status == "stored"
    with pytest.raises(ValueError, match="not a namespace name"):
        store.write("Tia Batres", "employed by", "Pfizer", namespace="alice\x00")
    for moment in (float("inf"), float("nan"), 10**400):
        with pytest.raises(ValueError, match="finite unix time"):
            store.facts(as_of=moment)
    with pytest.raises(ValueError, match="both at most"):
        store.facts(offset=2**63)
    with pytest.raises(RestoreRefused, match="no fact has that id"):
        store.restore(2**63)


def test_impossible_histories_are_found_and_cycles_broken(store):
    """What no memlm writes but a file or a hand could leave: successors that lead back, a current fact
    that names a successor, an end before a start (history_problems, `memlm memory check`)."""
    a, b, c = (
        store.write(name, "employed by", "Pfizer", namespace="alice", at=1.0).fact
        for name in ("Ann Lee", "Bo Day", "Cy Po")
    )
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="bob", at=1.0)
    store.write("Dorothea Altemus", "employed by", "BMW", namespace="bob", at=2.0)
    assert store.history_problems() == []
    for fact, successor in ((a, b), (b, a)):
        store._db.execute(
            "UPDATE triplets SET valid_to = 5.0, ended_by = 'superseded', superseded_by = ? WHERE id = ?",
            (successor.id, fact.id),
        )
    store._db.execute("UPDATE triplets SET superseded_by = ? WHERE id = ?", (a.id, c.id))  # current, yet superseded
    problems = store.history_problems()
    assert [(p.fact.id, p.reason) for p in problems] == [
        (c.id, f"it is current, yet says fact {a.id} superseded it"),
        (a.id, f"its successors lead back to it ({a.id} -> {b.id} -> {a.id})"),
        (b.id, f"its successors lead back to it ({a.id} -> {b.id} -> {a.id})"),
    ]
    assert str(problems[1]).startswith(f"namespace 'alice': fact {a.id} (Ann Lee >> employed by >> Pfizer): its")
    assert store.unlink_cycles() == 2
    assert [p.fact.id for p in store.history_problems()] == [c.id]
    assert [f.ended_by for f in store.history("Ann Lee", namespace="alice")] == ["superseded"]  # kept its end


def test_a_bad_triplet_in_a_batch_stores_nothing(store):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    with pytest.raises(ValueError, match="object is empty"):
        store.write_many([("Tia Batres", "customer of", "BMW"), ("Cyrus Alfred", "customer of", "")])
    assert len(store.facts()) == 1
    with pytest.raises(ValueError, match="triplet #0"):
        store.write_many([("only", "two")])


def test_bad_namespace_and_empty_query(store):
    with pytest.raises(ValueError, match="namespace"):
        store.write("Tia", "employed by", "Pfizer", namespace="")
    with pytest.raises(ValueError, match="at least one"):
        store.query()


def test_reopen_loses_nothing(memory_location):
    path = memory_location
    with TripletStore(path) as s:
        s.write_many(
            [("Dorothea Altemus", "employed by", "Pfizer"), ("Tia Batres", "customer of", "Pfizer")],
            namespace="alice",
            at=1.0,
        )
        s.write("Dorothea Altemus", "employed by", "BMW", namespace="alice", at=2.0)
    with TripletStore(path) as s:
        assert sorted(f.triplet for f in s.facts("alice")) == [
            ("Dorothea Altemus", "employed by", "BMW"),
            ("Tia Batres", "customer of", "Pfizer"),
        ]
        assert len(s.history(subject="Dorothea Altemus", namespace="alice")) == 2
        assert len(s.query(subject="Dorothea Altemas", namespace="alice")) == 1  # index rebuilt from the database
    if not path.startswith("postgresql://"):
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_foreign_files_are_refused_and_left_untouched(tmp_path):
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database at all, just some text that is long enough" * 20)
    with pytest.raises(InvalidDatabaseError, match="not a memlm memory database"):
        TripletStore(text_file)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (name TEXT)")
    conn.execute("INSERT INTO customers VALUES ('kept')")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidDatabaseError, match="another application"):
        TripletStore(other)
    assert sqlite3.connect(other).execute("SELECT name FROM customers").fetchall() == [("kept",)]
    with pytest.raises(InvalidDatabaseError, match="directory"):
        TripletStore(tmp_path)


def test_config_rejects_alias_claimed_twice(tmp_path):
    path = tmp_path / "relations.yaml"
    path.write_text(
        "relations:\n  - {name: employed by, aliases: [works for]}\n  - {name: customer of, aliases: [Works For]}\n"
    )
    with pytest.raises(ValueError, match="(?i)works for.*claimed by both"):
        MemoryConfig.load(path)
    path.write_text("relations:\n  - {name: employed by, functional: sometimes}\n")
    with pytest.raises(ValueError, match="functional"):
        MemoryConfig.load(path)


def test_concurrent_writers_lose_nothing(memory_location):
    store = TripletStore(memory_location)

    def writer(user):
        for i in range(50):
            store.write(f"Person {user}-{i}", "customer of", "Pfizer", namespace=f"user{user}")

    threads = [threading.Thread(target=writer, args=(u,)) for u in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(store.facts(f"user{u}")) for u in range(4)] == [50, 50, 50, 50]
    store.close()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_normalisation_follows_the_documented_rule(term):
    import unicodedata

    reference = "".join(
        " "
        if ch in "-_/" or ch.isspace()
        else ("" if unicodedata.category(ch)[0] == "P" or unicodedata.category(ch) == "Cf" else ch)
        for ch in unicodedata.normalize("NFKC", term).casefold()
    )
    assert normalize_term(term) == " ".join(reference.split())


def test_config_file_without_relations_keeps_the_shipped_table(tmp_path):
    path = tmp_path / "memory.yaml"
    path.write_text("fuzzy: {threshold: 0.7}\nmax_indexes: 8\n")
    config = MemoryConfig.load(path)
    assert config.fuzzy.threshold == 0.7 and config.max_indexes == 8
    assert "employed by" in [r.name for r in config.relations]
    path.write_text("fuzzy: {treshold: 0.7}\n")
    with pytest.raises(ValueError, match="treshold"):
        MemoryConfig.load(path)
    path.write_text("- just\n- a list\n")
    with pytest.raises(ValueError, match="mapping"):
        MemoryConfig.load(path)
    with pytest.raises(ValueError, match="cannot read"):
        MemoryConfig.load(tmp_path / "missing.yaml")


def test_a_new_employer_ends_the_roles_at_the_old_one(store):
    store.write("Lena Vogt", "CEO of", "Novartis")
    store.write("Lena Vogt", "investor in", "Novartis")  # not a role: stays
    store.write("Lena Vogt", "manager of", "Roche")  # a role at the new employer: stays
    result = store.write("Lena Vogt", "works for", "Roche")
    assert [(f.relation, f.object) for f in result.superseded] == [("CEO of", "Novartis")]
    current = {(f.relation, f.object) for f in store.facts()}
    assert current == {("investor in", "Novartis"), ("manager of", "Roche"), ("employed by", "Roche")}
    assert [f.ended_by for f in store.history(subject="Lena Vogt", relation="CEO of")] == ["superseded"]


def test_ends_must_name_relations_of_the_table():
    from memory_runtime.memory.memory_config import MemoryConfig

    with pytest.raises(ValueError, match="not relation names"):
        MemoryConfig.model_validate({"relations": [{"name": "employed by", "ends": ["boss of"]}]})


# --------------------------------------------------------------------------- fuzzy indexes built outside the lock


def _slow_builds(monkeypatch, during):
    """Make the first index build call `during()` between reading the terms and installing the index."""
    from memory_runtime.memory import fuzzy

    real_add, calls = fuzzy.FuzzyIndex.add, []

    def add(self, terms):
        terms = list(terms)
        if not calls:
            calls.append(1)
            during()
        return real_add(self, terms)

    monkeypatch.setattr(fuzzy.FuzzyIndex, "add", add)


def test_other_users_are_served_while_an_index_builds(store, monkeypatch):
    store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice")
    store.write("Marcus Feld", "investor in", "BMW", namespace="bob")
    building, release = threading.Event(), threading.Event()

    def during():
        building.set()
        assert release.wait(10)

    _slow_builds(monkeypatch, during)
    fuzzy = threading.Thread(target=lambda: store.query("Dorothea Altemos", namespace="alice"))
    fuzzy.start()
    assert building.wait(10)
    served = []  # the build is paused: bob writes and reads meanwhile, or waits for the lock

    def bob():
        store.write("Ilse Brandt", "investor in", "BMW", namespace="bob")
        served.append(len(store.query(None, "investor in", "BMW", namespace="bob").facts))

    other = threading.Thread(target=bob)
    other.start()
    other.join(5)
    assert served == [2]  # served while alice's index was being built
    release.set()
    fuzzy.join(10)
    assert not fuzzy.is_alive()


def test_terms_written_during_a_build_are_in_the_index(store, monkeypatch):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    _slow_builds(monkeypatch, lambda: store.write("Wilhelmina Oosterhuis", "employed by", "Siemens"))
    assert store.query("Dorothea Altemos").facts[0].subject == "Dorothea Altemus"
    assert "wilhelmina oosterhuis" in store.fuzzy_index("default", "subject")
    assert store.query("Wilhelmina Oosterhuys").facts[0].object == "Siemens"


def test_a_purge_during_a_build_discards_it(store, monkeypatch):
    store.write("Dorothea Altemus", "employed by", "Pfizer")
    store.write("Marcus Feld", "employed by", "BMW")
    _slow_builds(monkeypatch, lambda: store.forget("Marcus Feld", purge=True))
    assert store.query("Dorothea Altemos").facts[0].subject == "Dorothea Altemus"
    assert "marcus feld" not in store.fuzzy_index("default", "subject")
    assert store.query("Marcus Feldt").facts == []


def test_an_index_is_of_one_of_the_three_fields(store):
    with pytest.raises(ValueError, match="no field 'subject_norm FROM triplets; --'"):
        store.fuzzy_index("default", "subject_norm FROM triplets; --")


# --------------------------------------------------------------------------- two stores on one database


def test_a_second_store_on_the_same_database_sees_every_write(memory_location):
    """Two servers on one database: exact reads are always current; a resident fuzzy index catches
    up with the other's writes, and forgets terms the other purged."""
    with TripletStore(memory_location) as one, TripletStore(memory_location) as two:
        one.write("Dorothea Altemus", "employed by", "Pfizer")
        assert two.query("Dorothea Altemas").facts[0].object == "Pfizer"  # two builds its index
        one.write("Wilhelmina Oosterhuis", "employed by", "Siemens")
        assert two.query("Wilhelmina Oosterhuys").facts[0].object == "Siemens"  # caught up
        one.forget("Dorothea Altemus", purge=True)
        assert two.query("Dorothea Altemas").facts == [] and two.query("Dorothea Altemus").facts == []
        two.write("Dorothea Altemus", "employed by", "BMW")
        assert one.query("Dorothea Altemos").facts[0].object == "BMW"


def test_functional_supersede_holds_across_stores(memory_location):
    """Writers of one namespace take turns (a lock across processes): two stores superseding the
    same person's employer leave exactly one current fact."""
    stores = [TripletStore(memory_location) for _ in range(2)]

    def writer(k):
        for i in range(25):
            stores[k].write("Tia Batres", "employed by", f"Org {k}-{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    current = stores[0].query("Tia Batres", "employed by").facts
    assert len(current) == 1 and len(stores[1].history("Tia Batres")) == 50
    for s in stores:
        s.close()


@pytest.mark.postgres
def test_postgres_refuses_a_foreign_or_newer_database(postgres_url):
    import psycopg

    from memory_runtime.memory.database import InvalidDatabaseError

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE triplets (name TEXT)")
        conn.execute("INSERT INTO triplets VALUES ('kept')")
    with pytest.raises(InvalidDatabaseError, match="another application"):
        TripletStore(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT name FROM triplets").fetchall() == [("kept",)]
        conn.execute("DROP TABLE triplets")
    TripletStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE memlm_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(InvalidDatabaseError, match="schema version 99"):
        TripletStore(postgres_url)
    with pytest.raises(InvalidDatabaseError, match=r"cannot connect to postgresql://memlm:\*\*\*@"):
        TripletStore("postgresql://memlm:secret@/nope?host=/nonexistent&connect_timeout=1")


@pytest.mark.postgres
def test_a_postgres_memory_of_schema_version_1_keeps_its_ids_above_every_link(postgres_url):
    import psycopg

    with TripletStore(postgres_url) as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="alice", at=1.0)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as an older memlm's purge left it
        conn.execute("UPDATE triplets SET superseded_by = 41, valid_to = 2.0, ended_by = 'superseded'")
        conn.execute("UPDATE memlm_meta SET value = '1' WHERE key = 'schema_version'")
    with TripletStore(postgres_url) as store:
        assert [(link.fact.id, link.target_namespace) for link in store.broken_links()] == [(1, None)]
        assert store.write("Marcus Feld", "employed by", "Roche", namespace="bob").fact.id == 42
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM memlm_meta WHERE key = 'schema_version'").fetchone() == ("2",)


def test_sqlite_lookups_by_a_value_use_that_fields_index(tmp_path):
    """Every statement of a functional write, an exact read and a fuzzy read that filters on a field's
    value is planned on that field's index: none walks the namespace (O(facts) per call)."""
    with TripletStore(str(tmp_path / "m.sqlite")) as store:
        store.write_many([(f"Person {i}", "employed by", f"Org {i % 50}") for i in range(500)], namespace="u")
        conn, reader = store._db._conn, store._db._reader()  # writes on one connection, this thread's reads
        statements = []
        for traced in (conn, reader):
            traced.set_trace_callback(statements.append)
        store.write("Person 7", "employed by", "Org 3", namespace="u")  # supersedes Org 7
        store.write("Person 8", "CEO of", "Org 3", namespace="u")
        store.query(subject="Person 9", namespace="u")
        store.query(subject="Persno 11", namespace="u")  # fuzzy: candidate, then its display spelling
        store.query(object="Org 4", namespace="u")
        for traced in (conn, reader):
            traced.set_trace_callback(None)
        by_value = [s for s in statements if "_norm = " in s or "_norm=" in s]
        assert len(by_value) >= 5
        for sql in by_value:
            plan = " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "triplets_namespace_id" not in plan and "SCAN triplets" not in plan, (sql, plan)


def test_a_symmetric_relation_is_found_with_its_names_either_way_round():
    """spouse of holds both ways (the schema's `symmetric: true`): asked with the names the other way
    round, the store finds the fact as it was written; a relation that is not symmetric does not turn."""
    config = MemoryConfig.model_validate(
        {"relations": [{"name": "spouse of", "aliases": ["married to"], "symmetric": True}, {"name": "child of"}]}
    )
    assert config.symmetric == {"spouse of"}
    with TripletStore(":memory:", config) as store:
        store.write("Jonas Weber", "spouse of", "Lena Hartmann", at=1.0)
        store.write("Lena Hartmann", "child of", "Ute Hartmann", at=2.0)
        written = ("Jonas Weber", "spouse of", "Lena Hartmann")
        for query in [("Jonas Weber", "spouse of", None), (None, "married to", "Jonas Weber"),
                      ("Lena Hartmann", "spouse of", None), ("Lena Hartmann", "spouse of", "Jonas Weber")]:  # fmt: skip
            assert [f.triplet for f in store.query(*query)] == [written], query
        assert store.query("Ute Hartmann", "child of", None).facts == []
        assert store.query(None, "spouse of", None).facts[0].triplet == written  # the relation alone: once
        store.write("Ada Lin", "spouse of", "Jonas Weber", at=3.0)  # a second fact naming him: both, oldest first
        assert [f.subject for f in store.query("Jonas Weber", "spouse of", None)] == ["Jonas Weber", "Ada Lin"]
        # one name alone (X>>>>): its own facts, and the symmetric ones that name it as the object
        assert [f.triplet for f in store.query("Lena Hartmann")] == [
            written,
            ("Lena Hartmann", "child of", "Ute Hartmann"),
        ]
        assert store.query(None, None, "Lena Hartmann").facts[0].triplet == written  # >>>>X: as asked
        assert store.query("Ute Hartmann").facts == []  # child of does not turn
        assert [f.triplet for f in store.query(None, None, "Ute Hartmann")] == [
            ("Lena Hartmann", "child of", "Ute Hartmann")
        ]


def test_a_listing_does_not_wait_for_a_long_write_transaction(memory_location):
    """Reads see what was last committed, at once, while a write transaction (a 60,000-fact import, say)
    is open: they waited for its end before (8.5 s behind an import)."""
    import threading

    with TripletStore(memory_location) as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="bob")
        inside, release = threading.Event(), threading.Event()

        def long_import() -> None:
            with store._db.transaction("alice") as cur:
                cur.execute(
                    "INSERT INTO triplets (namespace, subject, relation, object, subject_norm, relation_norm,"
                    " object_norm, valid_from) VALUES ('alice', 'A', 'r', 'B', 'a', 'r', 'b', 1.0)"
                )
                inside.set()
                release.wait(30)

        importer = threading.Thread(target=long_import)
        importer.start()
        try:
            assert inside.wait(10)
            start = time.perf_counter()
            assert [f.object for f in store.facts("bob")] == ["Pfizer"] and store.count("alice") == 0
            assert store.namespaces() == ["bob"]  # nothing uncommitted is seen
            assert time.perf_counter() - start < 5
        finally:
            release.set()
            importer.join()
        assert store.count("alice") == 1


def test_the_reading_connections_of_ended_threads_are_closed(tmp_path):
    """Each thread reads SQLite through a connection of its own, which holds a page cache; a server's
    worker threads end and are replaced (anyio's after 10 s idle), and the connections of ended threads
    were kept open: 200 threads left 200 connections (the soak's RSS grew 5 MB a minute)."""
    import threading

    with TripletStore(str(tmp_path / "memory.sqlite")) as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="bob")
        seen = []
        for _ in range(200):
            reader = threading.Thread(target=lambda: seen.append(store.count("bob")))
            reader.start()
            reader.join()
        assert seen == [1] * 200
        assert store.count("bob") == 1  # this thread's reader: the ended ones' are closed now
        assert len(store._db._readers) <= 2  # 201 before
        for conn in store._db._readers.values():
            conn.execute("SELECT 1")  # still usable: a live thread's connection is never closed


def test_namespaces_are_listed_in_pages(store):
    for name in ("carol", "alice", "bob", "dave"):
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace=name)
    assert store.namespaces() == ["alice", "bob", "carol", "dave"]
    assert store.namespaces(limit=2) == ["alice", "bob"]
    assert store.namespaces(after="bob", limit=2) == ["carol", "dave"]
    assert store.namespaces(after="dave") == []


@pytest.mark.parametrize("held", ["a write transaction", "a read snapshot"])
def test_opening_a_store_waits_for_no_other_transaction(memory_location, held):
    """Opening a memory writes nothing that is there already: a second server or a CLI command opened
    during a long import (a write transaction) or an export (a read snapshot) opens at once, and others'
    reads go on (on PostgreSQL its no-op DDL locked the table, and every session queued behind it)."""
    import threading

    with TripletStore(memory_location) as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="a")
        inside, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store._db.transaction("b") if held == "a write transaction" else store._db.snapshot() as cur:
                cur.rows("SELECT count(*) FROM triplets")
                if held == "a write transaction":
                    cur.execute(
                        "INSERT INTO triplets (namespace, subject, relation, object, subject_norm, relation_norm,"
                        " object_norm, valid_from) VALUES ('b', 'A', 'r', 'B', 'a', 'r', 'b', 1.0)"
                    )
                inside.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert inside.wait(10)
            start = time.perf_counter()
            with TripletStore(memory_location) as second:
                assert second.count("a") == 1 and second.count("b") == 0
            assert store.count("a") == 1
            assert time.perf_counter() - start < 5
        finally:
            release.set()
            holder.join()


def test_open_relations_come_with_a_trained_models_relation_table(tmp_path):
    """A run trained on a schema with open relations opens its memory with them: relations free in decoding,
    objects of relations outside the table may be common nouns."""
    from memory_runtime.memory.memory_config import ANY_RELATION, RELATION_TABLE_FILE, MemoryConfig

    (tmp_path / RELATION_TABLE_FILE).write_text(
        "relations:\n- name: lives in\n  functional: subject\nopen_relations: true\n"
    )
    config = MemoryConfig.of_model(tmp_path)
    assert config.open_relations and config.relation_names is None and ANY_RELATION in config.common_objects
    closed = MemoryConfig.from_dict({"relations": [{"name": "lives in"}]})
    assert closed.relation_names == ["lives in"] and not closed.common_objects


def test_a_scratch_memory_holds_its_facts_from_the_start():
    """TripletStore.scratch: what a record's, task's, sampled run's or correction's turn runs against: facts
    stored at time 1.0 (before anything the turn writes), in the namespace asked; no facts, an empty memory."""
    facts = [("Ada Lin", "employed by", "Pfizer"), ("Bo Chan", "founder of", "Acme")]
    with TripletStore.scratch(MemoryConfig(), facts, namespace="alice") as scratch:
        assert scratch.path == ":memory:"
        stored = scratch.facts("alice")
        assert {f.triplet for f in stored} == set(facts) and scratch.facts("default") == []
        assert {f.valid_from for f in stored} == {1.0}
    with TripletStore.scratch(None, iter(())) as empty:
        assert empty.facts() == []
