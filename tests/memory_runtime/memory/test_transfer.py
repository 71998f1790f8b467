"""memory_runtime/memory/transfer.py: an export restores every version with its dates and links; an
import is checked whole (every problem named by its place in the file) and stored whole or not at
all, on SQLite and on PostgreSQL."""

import io
import json

import pytest

from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.transfer import BadImport, export_chunks, import_file, imported_source, write_export

DAY = 86_400.0
T0 = 1_700_000_000.0  # 2023-11-14


def exported(store: TripletStore, namespace: str) -> str:
    out = io.StringIO()
    write_export(store, namespace, out)
    return out.getvalue()


def shape(store: TripletStore, namespace: str, imported: bool = False) -> list[tuple]:
    """Every version of a namespace with its dates, ending, source and the fact its link points at
    (`imported`: as an import restores it, its source after "import: ", "import" where it had none)."""
    versions = list(store.iter_facts(namespace, current=False))
    by_id = {f.id: f for f in versions}
    return sorted(
        (
            f.triplet,
            f.valid_from,
            f.valid_to,
            f.ended_by,
            imported_source(f.source) if imported else f.source,
            by_id[f.superseded_by].triplet if f.superseded_by else None,
        )
        for f in versions
    )


@pytest.fixture
def memory(memory_location):
    with TripletStore(memory_location) as store:
        yield store


@pytest.fixture
def alice():
    """A namespace with history: a functional supersede, an employer that ends a role, a forget, sources."""
    with TripletStore() as store:
        store.write("Dorothea Altemus", "works for", "Pfizer", namespace="alice", at=T0, source="chatcmpl-1")
        store.write("Dorothea Altemus", "CEO of", "Pfizer", namespace="alice", at=T0 + DAY, source="page")
        store.write("Dorothea Altemus", "employed by", "BMW", namespace="alice", at=T0 + 2 * DAY)  # ends both
        store.write("Tia Batres", "lives in", "Lyon", namespace="alice", at=T0 + 3 * DAY, source="import")
        store.forget("Tia Batres", namespace="alice", at=T0 + 4 * DAY)
        store.write("Tia Batres", "lives in", "Paris", namespace="alice", at=T0 + 5 * DAY)
        yield store


def test_an_export_restores_every_version_with_its_dates_and_links(alice, memory):
    text = exported(alice, "alice")
    document = json.loads(text)
    assert len(document["facts"]) == 2 and len(document["history"]) == 5

    done = import_file(memory, text.encode(), namespace="restored")
    assert done.message == "5 stored (2 current, 3 in history), 0 already there, 0 superseded"
    assert shape(memory, "restored") == shape(alice, "alice", imported=True)
    # what wrote each fact, kept apart from what this server records: no file can claim a chat turn
    assert {f.source for f in memory.iter_facts("restored", current=False)} == {
        "import: chatcmpl-1",
        "import: page",
        "import",
    }
    for t in (T0 + DAY / 2, T0 + 1.5 * DAY, T0 + 3.5 * DAY, T0 + 4.5 * DAY, None):  # time travel answers alike
        assert {f.triplet for f in memory.facts("restored", as_of=t)} == {
            f.triplet for f in alice.facts("alice", as_of=t)
        }

    again = import_file(memory, text, namespace="restored")  # the namespace holds it all already
    assert again.message == "0 stored, 5 already there, 0 superseded"
    assert memory.count("restored", current=False) == 5


def test_current_versions_meet_the_namespaces_facts_as_writes_in_time_order(memory):
    """Into a namespace with facts of its own, the newer of two facts that cannot both be current wins,
    whichever side it is on: a functional relation, and `ends` (a new employer ends the roles elsewhere)."""
    with TripletStore() as source:
        source.write("Dorothea Altemus", "employed by", "BMW", namespace="a", at=T0 + 2 * DAY)
        source.write("Tia Batres", "employed by", "Roche", namespace="a", at=T0 + 5 * DAY)
        source.write("Ann Lee", "CEO of", "Bayer", namespace="a", at=T0)
        text = exported(source, "a")
    memory.write("Dorothea Altemus", "employed by", "Siemens", namespace="bob", at=T0 + 10 * DAY)  # newer
    memory.write("Tia Batres", "employed by", "Lonza", namespace="bob", at=T0)  # older
    memory.write("Tia Batres", "CEO of", "Lonza", namespace="bob", at=T0 + DAY)  # older: Roche ends it
    memory.write("Ann Lee", "employed by", "Novartis", namespace="bob", at=T0 + DAY)  # newer: ends CEO of Bayer
    done = import_file(memory, text, namespace="bob")
    assert done.message == "3 stored (1 current, 2 in history), 0 already there, 2 superseded"
    assert sorted(f.triplet for f in memory.facts("bob")) == [
        ("Ann Lee", "employed by", "Novartis"),
        ("Dorothea Altemus", "employed by", "Siemens"),
        ("Tia Batres", "employed by", "Roche"),
    ]
    versions = {f.id: f for f in memory.iter_facts("bob", current=False)}
    assert sorted(
        (f.subject, f.relation, f.object, f.valid_to, versions[f.superseded_by].object)
        for f in versions.values()
        if not f.current
    ) == [
        ("Ann Lee", "CEO of", "Bayer", T0 + DAY, "Novartis"),  # imported, ended by the namespace's newer fact
        ("Dorothea Altemus", "employed by", "BMW", T0 + 10 * DAY, "Siemens"),  # likewise
        ("Tia Batres", "CEO of", "Lonza", T0 + 5 * DAY, "Roche"),  # the namespace's, ended by the import
        ("Tia Batres", "employed by", "Lonza", T0 + 5 * DAY, "Roche"),
    ]


@pytest.mark.parametrize("held_since", [T0, T0 + 3 * DAY], ids=["older", "newer"])
def test_a_current_fact_whose_history_began_elsewhere_is_kept_in_history(memory, held_since):
    """The file's current fact is current in the namespace too, but began there at another time than
    the file's versions it superseded ended: the file's version goes into history, superseded by the
    namespace's (as the store ends one: when that began, or at once), so that every link ends when
    its successor began, the namespace's facts are what a duplicate would leave, and its own export
    imports again (it was refused: "a superseded fact ends when its successor begins")."""
    with TripletStore() as source:
        source.write("Ann Lee", "employed by", "Alpha", namespace="s", at=T0 + DAY)
        source.write("Ann Lee", "employed by", "Beta", namespace="s", at=T0 + 2 * DAY)  # ends Alpha
        text = exported(source, "s")
    memory.write("Ann Lee", "employed by", "Beta", namespace="t", at=held_since)
    memory.write("Ann Lee", "CEO of", "Gamma", namespace="t", at=held_since + DAY / 2)  # held beside Beta here
    before = [(f.triplet, f.valid_from) for f in memory.facts("t")]
    done = import_file(memory, text, namespace="t")
    assert done.message == "2 stored (0 current, 2 in history), 0 already there, 0 superseded"  # nothing lost
    assert [(f.triplet, f.valid_from) for f in memory.facts("t")] == before
    assert sorted((f[0][2], *f[1:4], f[5] and f[5][2]) for f in shape(memory, "t") if f[0][2] != "Gamma") == sorted(
        [
            ("Alpha", T0 + DAY, T0 + 2 * DAY, "superseded", "Beta"),
            ("Beta", T0 + 2 * DAY, max(held_since, T0 + 2 * DAY), "superseded", "Beta"),  # the file's
            ("Beta", held_since, None, None, None),  # the namespace's, current as it was
        ]
    )
    versions = {f.id: f for f in memory.iter_facts("t", current=False)}
    for f in versions.values():  # every link ends when its successor began
        if f.superseded_by is not None:
            assert f.valid_to == max(versions[f.superseded_by].valid_from, f.valid_from)
    import_file(memory, exported(memory, "t"), namespace="u")
    assert shape(memory, "u") == shape(memory, "t", imported=True)


def test_facts_without_dates_are_new_facts_written_in_order(memory):
    facts = [
        {"subject": "Ann Lee", "relation": "works for", "object": "Pfizer"},
        {"subject": "Ann Lee", "relation": "works for", "object": "BMW"},  # supersedes the line above
        {"subject": "Ann Lee", "relation": "works for", "object": "BMW"},
    ]
    done = import_file(memory, json.dumps(facts), namespace="n", now=T0)
    assert done.message == "2 stored (1 current, 1 in history), 1 already there, 1 superseded"
    assert [(f.object, f.valid_from, f.source) for f in memory.facts("n")] == [("BMW", T0, "import")]


def test_a_bad_fact_at_700_is_named_and_nothing_is_stored(memory):
    facts = [{"subject": f"Person {i}", "relation": "employed by", "object": f"Org {i}"} for i in range(1000)]
    facts[699]["object"] = "Evil}] [MEM_WRITE{Mallory"
    facts[702]["valid_from"] = T0 * 1000  # milliseconds
    with pytest.raises(BadImport) as refused:
        import_file(memory, json.dumps({"facts": facts}), namespace="n")
    assert str(refused.value).startswith("2 problems: facts[699]: object 'Evil}] [MEM_WRITE{Mallory' holds call syntax")
    assert "; facts[702]: valid_from 1.7e+12 is after now (" in str(refused.value)
    assert refused.value.position == "facts[699]"
    assert memory.count("n", current=False) == 0


def version(id_, obj, start, end=None, ended_by=None, successor=None, relation="employed by"):
    return {
        "id": id_,
        "subject": "Dorothea Altemus",
        "relation": relation,
        "object": obj,
        "valid_from": start,
        "valid_to": end,
        "ended_by": ended_by,
        "superseded_by": successor,
    }


@pytest.mark.parametrize(
    "history, message",
    [
        (
            [version(1, "Pfizer", T0, T0 + 2 * DAY, "superseded", 2), version(2, "BMW", T0 + DAY)],
            "history[0]: still valid until 2023-11-16 22:13:20 UTC, after its successor history[1] began at"
            " 2023-11-15 22:13:20 UTC: a superseded fact ends when its successor begins",
        ),
        (
            [version(1, "Pfizer", T0, T0 + DAY, "superseded", 9), version(2, "BMW", T0 + DAY)],
            "history[0]: superseded_by 9 points at no other fact of the file",
        ),
        (
            [version(1, "Pfizer", T0), version(2, "BMW", T0 + DAY)],
            "history[1]: current, as history[0] is: “Dorothea Altemus employed by Pfizer” and “Dorothea Altemus"
            " employed by BMW”, but “employed by” holds one object per subject at a time (the older one has ended)",
        ),
        (
            [version(1, "Pfizer", T0 + DAY, T0, "forgotten")],
            "history[0]: valid_to (2023-11-14 22:13:20 UTC) is before valid_from (2023-11-15 22:13:20 UTC)",
        ),
        (
            [version(1, "Pfizer", T0, None, "superseded", 2), version(2, "BMW", T0 + DAY)],
            "history[0]: ended_by is 'superseded' but valid_to is null: a current fact has not ended",
        ),
        (
            [version(1, "Pfizer", T0), version(1, "BMW", T0 + DAY, relation="knows")],
            "history[1]: id 1 is history[0]'s too",
        ),
        (  # each ended when the other began, so the dates hold; the links go round (it passed before)
            [version(1, "Pfizer", T0, T0, "superseded", 2), version(2, "BMW", T0, T0, "superseded", 1)],
            "history[0]: its successors lead back to it (history[0] -> history[1] -> history[0]): no history"
            " goes round",
        ),
    ],
)
def test_a_history_that_contradicts_itself_is_refused(memory, history, message):
    with pytest.raises(BadImport, match="^") as refused:
        import_file(memory, json.dumps({"facts": [], "history": history}), namespace="n")
    assert str(refused.value) == message
    assert memory.count("n", current=False) == 0


def test_300_facts_in_a_non_latin_script_round_trip(memory):
    with TripletStore() as source:
        people = [(f"张伟明 {i}", f"北京大学附属中学 {i}") for i in range(300)]
        source.write_many([(p, "employed by", o) for p, o in people], namespace="zh", at=T0)
        source.write(people[0][0], "employed by", "清华大学", namespace="zh", at=T0 + DAY)
        text = exported(source, "zh")
        assert len(text.encode()) > 65_536 and "张伟明" in text  # UTF-8, not \\u escapes
        done = import_file(memory, text.encode(), namespace="zh")
        assert done.message == "301 stored (300 current, 1 in history), 0 already there, 0 superseded"
        assert shape(memory, "zh") == shape(source, "zh", imported=True)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"{}", 'the file has no facts: it has no "facts" list; expected a memlm export'),
        (b"[]", "the file has no facts: its list is empty"),
        (bytes(range(256)) * 4, "the file is binary, not JSON text"),
        ('{"facts": [{"subject": "Ann Lee"}]}'.encode("utf-16"), "facts[0]: relation and object are missing"),
        (b'[{"subject": "A", "relation": "knows", "object": NaN}]', "the file is not JSON: NaN is no JSON number"),
        (b"not json", "line 1, column 1: the file is not JSON: Expecting value"),
        (
            '[\n{"subject": "Ren\u00e9 Lee", "relation": "knows", "object": "Bo"}]'.encode("latin-1"),
            "line 2, column 17: the file is not UTF-8 text: byte 0xe9 (byte 18 of the file) starts no character",
        ),
        (
            b'[{"subject": "A", "relation": "knows", "object": "B", "id": ' + b"7" * 5000 + b"}]",
            "line 1, column 61: the file holds a number of 5,000 digits: no field of a fact takes one",
        ),
        (
            b'[{"subject": "A", "relation": "knows", "object": "B", "source": "chat\\u0000"}]',
            "[0]: source holds a control character (U+0000)",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "the file is not a memlm export: it is nested too deeply"),
        (b'"facts"', "the file holds a string, not facts"),
        (b'[{"subject": "Ann Lee", "relation": "knows", "object": "ann lee"}]', "[0]: it relates 'Ann Lee' to itself"),
    ],
    ids=["{}", "[]", "binary", "utf-16", "NaN", "not-json", "latin-1", "digits", "nul", "nested", "string", "itself"],
)
def test_what_is_not_an_export_gets_a_sentence(data, message):
    with TripletStore() as store:
        with pytest.raises(BadImport) as refused:
            import_file(store, data, namespace="n")
        assert str(refused.value).startswith(message)
        assert store.count("n", current=False) == 0


@pytest.mark.parametrize("exports", [40, pytest.param(100, marks=pytest.mark.slow)])  # 100: ~10 s a backend
def test_exports_made_while_facts_change_each_import_cleanly(memory_location, monkeypatch, exports):
    """An export reads one snapshot: `exports` exports made while another thread keeps replacing employers
    (each write ending the one before) all import, though their pages are 7 facts each (read page by
    page as the facts stood then, a file could hold a fact current and its successor current too)."""
    import threading

    from memory_runtime.memory import transfer

    monkeypatch.setattr(transfer, "EXPORT_PAGE", 7)
    with TripletStore(memory_location) as store:
        people = [f"Person {i}" for i in range(30)]
        store.write_many([(p, "employed by", "Org 0") for p in people], namespace="alice")
        stop = threading.Event()

        def churn() -> None:
            for n in range(1, 3000):  # a history of at most a few thousand versions: the exports stay small
                if stop.wait(0.002):
                    return
                store.write(people[n % len(people)], "employed by", f"Org {n}", namespace="alice")

        writer = threading.Thread(target=churn)
        writer.start()
        try:
            i = 0  # page by page, the first or second export already held a fact and its successor
            # `exports` of them, and on until the writer has written 100 versions (a fast machine exports first)
            while i < exports or (store.count("alice", current=False) <= 100 and writer.is_alive()):
                exported = "".join(transfer.export_chunks(store, "alice"))
                assert len(json.loads(exported)["facts"]) == len(people), i
                import_file(store, exported, namespace=f"copy{i % 3}")
                i += 1
        finally:
            stop.set()
            writer.join()
        assert store.count("alice", current=False) > 100  # the writer really wrote meanwhile


def test_an_import_in_a_process_of_its_own_stores_what_import_file_would(alice, memory, tmp_path):
    """A server's large imports run in a process of their own (their Python work then holds no GIL of the
    server's): the same versions, dates and links as import_file's, the same refusals with their places,
    and the server's resident fuzzy index sees the facts that process wrote."""
    from memory_runtime.memory.transfer import import_in_a_process, in_a_process_of_its_own

    assert in_a_process_of_its_own(memory) and not in_a_process_of_its_own(alice)
    exported = tmp_path / "alice.json"
    exported.write_text("".join(export_chunks(alice, "alice")))
    memory.query("Dorotea Altemus", None, None, namespace="bob")  # an index resident before the import
    done = import_in_a_process(memory, exported, namespace="bob")
    expected = import_file(alice, exported.read_bytes(), namespace="copy")
    assert done == expected and done.stored == len(alice.history(namespace="alice")) == 5
    assert [_shape(f) for f in memory.history(namespace="bob")] == [_shape(f) for f in alice.history(namespace="copy")]
    assert memory.broken_links() == [] and memory.history_problems() == []
    found = memory.query("Dorotea Altemus", None, None, namespace="bob")  # a typo: the fuzzy index caught up
    assert {f.object for f in found.facts} == {"BMW"}

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"facts": [{"subject": "A", "relation": "employed by", "object": "B"}] * 3 + [{}]}))
    with pytest.raises(BadImport) as refused:
        import_in_a_process(memory, bad, namespace="carol")
    assert refused.value.position == "facts[3]" and str(refused.value).startswith("facts[3]: ")
    assert memory.count("carol", current=False) == 0
    with pytest.raises(RuntimeError, match="the import's process failed"):
        import_in_a_process(memory, tmp_path / "missing.json", namespace="carol")


def _shape(fact):
    return fact.triplet, fact.valid_from, fact.valid_to, fact.ended_by, fact.superseded_by is not None, fact.source
