"""Crash safety on PostgreSQL (issue 55, part 7): kill -9 during a write storm, an import and a purge.

Each test runs the memory work in a child process (`_child` below, started with sys.executable) that
reports each operation on stdout as it starts and as it returns (a whole line, flushed: the line is the
acknowledgement). The test kills it with SIGKILL at a moment its seed chooses, waits until the server
has ended the dead process's sessions, then opens the database afresh and checks it:

- a write storm (six threads writing batches of facts into two namespaces; functional relations and
  `ends`, so writes of different threads supersede each other): every acknowledged write is there,
  current or ended by a later fact as the relation table says; of the batches in flight when the
  process died (one a thread at most), all of a batch or none of it;
- an import of 10,000 facts (20,000 under -m slow; transfer.import_file, one transaction) into a namespace
  whose 150 earlier facts it supersedes, beside writes into another: all of the import or none of it,
  the earlier facts ended by it exactly when it is there, every acknowledged write kept;
- purges (forget(purge=True)) of four subjects of 662 versions each, one after another, beside writes
  into the same namespace and another: each subject all there or all gone (gone once acknowledged), the
  facts that they ended of another subject unlinked exactly when they are gone.

After every kill TripletStore.broken_links() and history_problems() are empty, every ended fact was ended
by a fact the relation table lets end it, and a functional relation has one current fact per subject
(or object). The moment of the kill: after a seeded number of acknowledged batches (the storm); with the
transaction held up on a row this test has locked (a seeded row, so the kill certainly comes with the
transaction open and part of its work done); once the import has taken a seeded fraction of its ids;
a seeded delay into a purge; or right after the acknowledgement.

Only the client is killed: the server (the session's throwaway cluster, fsync=off) stays up and must roll
back what the dead client left open. Three seeds of each in the default run (~45 s on 2 busy cores, most
of it the children's start, 2.5 s each, and the imports), twelve more of each under -m slow (~3 min).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.memory.transfer import import_file

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[3]
SEEDS = [*range(3), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(3, 15))]
DEADLINE_S = 120  # for anything the test waits for (a loaded machine is slow, a hung one fails)

_RELATIONS = MemoryConfig.load().relations
FUNCTIONAL = {normalize_term(spec.name): spec.functional for spec in _RELATIONS if spec.functional}
ENDS = {normalize_term(spec.name): {normalize_term(name) for name in spec.ends} for spec in _RELATIONS}

IMPORT_FACTS = 10_000  # under -m slow: 20,000 (20,000 round trips take ~10 s on 2 busy cores)
PEOPLE = 150  # employed in the import's namespace before it; the import moves each to a new employer
DOOMED = 4  # subjects purged one after another
VERSIONS = 600  # employers of each doomed subject, one after another (and a role at every tenth)


# --------------------------------------------------------------------------- the child process

_stdout = threading.Lock()


def _say(event: str, **fields: object) -> None:
    """One whole line on stdout, flushed: the parent reads it as done (or, for a start, as begun)."""
    line = json.dumps({"event": event, **fields}) + "\n"
    with _stdout:
        sys.stdout.write(line)
        sys.stdout.flush()


def _batch(rng: random.Random, unique: str) -> list[tuple[str, str, str]]:
    """1-4 facts never written before (no duplicate, so each is stored), most of them ending others:
    a person's employer, role or presidency (functional subject; a new employer ends the roles held
    elsewhere), an organisation's CEO or a club's president (functional object)."""
    batch = []
    for j in range(rng.randint(1, 4)):
        new = f"{unique}-{j}"
        person = f"Person {rng.randrange(12)}"
        kind = rng.randrange(6)
        if kind == 0:
            batch.append((person, "employed by", f"Employer {new}"))
        elif kind == 1:
            batch.append((person, "manager of", f"Team {new}"))
        elif kind == 2:
            batch.append((f"Chief {new}", "CEO of", f"Org {rng.randrange(6)}"))
        elif kind == 3:
            batch.append((person, "president of", f"Club {new}"))
        elif kind == 4:
            batch.append((f"Head {new}", "president of", f"Club {rng.randrange(6)}"))
        else:
            batch.append((person, "member of", f"Guild {new}"))
    return batch


def _writer(store: TripletStore, thread: int, namespaces: list[str], seed: int, pause: float) -> None:
    """Batches, one transaction each, until the process is killed, up to `pause` seconds apart; each
    batch's facts carry its tag as source."""
    rng = random.Random(f"{seed} writer {thread}")
    for i in itertools.count():
        time.sleep(rng.uniform(0, pause))
        namespace = rng.choice(namespaces)
        batch = _batch(rng, f"{thread}-{i}")
        tag = f"w{thread}-{i}"
        _say("start", tag=tag, thread=thread, namespace=namespace, facts=batch)
        results = store.write_many(batch, namespace=namespace, source=tag)
        facts = [{"id": r.fact.id, "status": r.status, "superseded": [f.id for f in r.superseded]} for r in results]
        _say("ack", tag=tag, facts=facts)


def _named(url: str, application: str) -> str:
    """The URL with an application_name, which pg_stat_activity shows (the test finds the child's sessions)."""
    return f"{url}&application_name={application}"


def _guarded(work, *args) -> None:
    try:
        work(*args)
    except BaseException as err:  # the parent fails the test with it
        _say("error", error=f"{type(err).__name__}: {err}", trace=traceback.format_exc())
        os._exit(3)


def _child(argument: str) -> None:
    """The memory work of one test, in a process of its own: writer threads, and an import or purges."""
    config = json.loads(argument)
    url, seed = config["url"], config["seed"]
    writes = TripletStore(_named(url, "crash-writer"))
    work = TripletStore(_named(url, f"crash-{config['scenario']}"))
    _say("ready")  # the stores are open (opening one waits for every transaction on the table: see _RowLock)
    sys.stdin.readline()
    for thread in range(config["writers"]):
        args = (_writer, writes, thread, config["namespaces"], seed, config.get("pause", 0.0))
        threading.Thread(target=_guarded, args=args, daemon=True).start()
    _guarded(_main_work, work, config)
    _say("idle")
    threading.Event().wait()  # the writers go on until the kill


def _main_work(store: TripletStore, config: dict) -> None:
    if config["scenario"] == "import":
        _say("import-begin")
        with open(config["file"], "rb") as file:
            done = import_file(store, file, namespace="imported")
        _say("import-ack", stored=done.stored, superseded=done.superseded)
    elif config["scenario"] == "purge":
        purger = store
        for subject in config["subjects"]:
            _say("purge-begin", subject=subject)
            deleted = purger.forget(subject, namespace="purge", purge=True)
            _say("purge-ack", subject=subject, deleted=deleted)


# --------------------------------------------------------------------------- the test's side


class _Child:
    """The child process and what it said: `events`, every whole line read (a line the kill cut short
    is no acknowledgement)."""

    def __init__(self, tmp_path: Path, config: dict) -> None:
        self._stderr = tmp_path / f"child-{uuid.uuid4().hex[:6]}.stderr"
        code = "import sys; from tests.memory_runtime.memory.test_crash_postgres import _child; _child(sys.argv[1])"
        with self._stderr.open("w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, json.dumps(config)],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.events: list[dict] = []
        self.counts: Counter[str] = Counter()
        self._lines: queue.Queue[dict | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.endswith("\n"):
                self._lines.put(json.loads(line))
        self._lines.put(None)

    def ready(self) -> None:
        """Wait until its stores are open."""
        self.wait_for(lambda event: event["event"] == "ready")

    def go(self) -> None:
        """Let it start its work."""
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def poll(self, timeout: float = 0.0) -> dict | None:
        """The next event if one comes within `timeout` seconds (None if not); an error fails the test."""
        try:
            event = self._lines.get(timeout=timeout) if timeout else self._lines.get_nowait()
        except queue.Empty:
            return None
        if event is None:
            self._lines.put(None)
            raise AssertionError(f"the child ended before it was killed: {self.stderr()}")
        self.events.append(event)
        self.counts[event["event"]] += 1
        if event["event"] == "error":
            raise AssertionError(f"the child failed: {event['trace']}")
        return event

    def wait_for(self, wanted) -> dict:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            event = self.poll(0.5)
            if event is not None and wanted(event):
                return event
        raise AssertionError(f"the child did not get there in {DEADLINE_S} s: {self.stderr()}")

    def kill(self) -> None:
        """SIGKILL, then every line it wrote before."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._reader.join(30)
        while (event := self._lines.get()) is not None:
            self.events.append(event)
            self.counts[event["event"]] += 1
        errors = [event["trace"] for event in self.events if event["event"] == "error"]
        assert not errors, f"the child failed: {errors[0]}"

    def stderr(self) -> str:
        return self._stderr.read_text()[-4000:]


def _new_database(server: str, template: str | None = None) -> str:
    """A new database of the session's cluster (a copy of `template`, a database name, when given); its URL."""
    import psycopg

    name = f"memlm_crash_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    return server.replace("/postgres?", f"/{name}?")


def _database_name(url: str) -> str:
    return url.split("?")[0].rsplit("/", 1)[-1]


def _drop(server: str, url: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {_database_name(url)} WITH (FORCE)")


def _sessions_ended(url: str) -> None:
    """Wait until the server has ended the killed process's sessions (rolling back what they held open),
    so that what is checked is what the server keeps."""
    import psycopg

    deadline = time.monotonic() + DEADLINE_S
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the killed process's sessions are still open"
            time.sleep(0.02)


class _RowLock:
    """A transaction of the test's holding a lock on one row, which a transaction of the child's that
    would delete (FOR KEY SHARE) or update (FOR SHARE) the row waits for: the child's transaction is
    then certainly open, its work up to that row done and uncommitted, when the child is killed. Taken
    once the child's stores are open: opening a store waits for every transaction that holds the table
    (PostgresDatabase runs CREATE INDEX IF NOT EXISTS and ALTER TABLE ... ADD COLUMN IF NOT EXISTS on
    every open, which lock it: SHARE, ACCESS EXCLUSIVE), a row lock's included."""

    def __init__(self, url: str, fact_id: int, strength: str) -> None:
        import psycopg

        self._url = url
        self._conn = psycopg.connect(url)
        row = self._conn.execute(f"SELECT id FROM triplets WHERE id = %s {strength}", (fact_id,)).fetchone()
        assert row is not None, f"no fact {fact_id} to lock"

    def wait_until_it_blocks(self, application: str) -> None:
        import psycopg

        pid = self._conn.info.backend_pid
        deadline = time.monotonic() + DEADLINE_S
        with psycopg.connect(self._url, autocommit=True) as conn:
            while not conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND %s = ANY(pg_blocking_pids(pid))",
                (application, pid),
            ).fetchone()[0]:
                assert time.monotonic() < deadline, f"no session of {application} waited for the locked row"
                time.sleep(0.01)

    def release(self) -> None:
        self._conn.rollback()
        self._conn.close()


@dataclass(frozen=True)
class Row:
    id: int
    namespace: str
    subject: str
    relation: str
    object: str
    s: str
    r: str
    o: str
    valid_from: float
    valid_to: float | None
    ended_by: str | None
    superseded_by: int | None
    source: str | None


def _rows(url: str) -> dict[int, Row]:
    """Every fact of the database as it is now, read afresh."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT id, namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
            " valid_from, valid_to, ended_by, superseded_by, source FROM triplets"
        ).fetchall()
    return {row[0]: Row(*row) for row in found}


def _may_end(old: Row, new: Row) -> bool:
    """Whether the relation table lets `new` end `old` (as a write or an import ends it: at new's start)."""
    if old.namespace != new.namespace or old.valid_to != max(old.valid_from, new.valid_from):
        return False
    by_subject = (
        old.s == new.s
        and old.o != new.o
        and ((old.r == new.r and FUNCTIONAL.get(old.r) in ("subject", "both")) or old.r in ENDS.get(new.r, ()))
    )
    by_object = old.o == new.o and old.s != new.s and old.r == new.r and FUNCTIONAL.get(old.r) in ("object", "both")
    return by_subject or by_object


def _problems(url: str, rows: dict[int, Row], *, unlinked: set[int] = frozenset()) -> list[str]:
    """What is wrong with the memory: the store's own checks (through a store opened afresh), ends the
    relation table does not make, two current facts of a functional relation, a role older than the
    current employer that it should have ended. `unlinked`: facts whose successor may be purged."""
    with TripletStore(url) as store:
        problems = [str(link) for link in store.broken_links()] + [str(p) for p in store.history_problems()]
    holders: defaultdict[tuple, list[int]] = defaultdict(list)
    for row in rows.values():
        if row.ended_by == "superseded":
            later = rows.get(row.superseded_by) if row.superseded_by is not None else None
            if later is None and row.id not in unlinked:
                problems.append(f"{row} was superseded by a fact that is not there")
            elif later is not None and not _may_end(row, later):
                problems.append(f"{row} was ended by {later}, which the relation table does not say")
        elif row.ended_by is not None:
            problems.append(f"{row} ended by {row.ended_by!r}, which nothing here does")
        if row.valid_to is None:
            side = FUNCTIONAL.get(row.r)
            if side in ("subject", "both"):
                holders[("subject", row.namespace, row.s, row.r)].append(row.id)
            if side in ("object", "both"):
                holders[("object", row.namespace, row.o, row.r)].append(row.id)
    problems += [f"{key} has more than one current fact: {ids}" for key, ids in holders.items() if len(ids) > 1]
    current = [row for row in rows.values() if row.valid_to is None]
    roles = defaultdict(list)
    for row in current:
        roles[(row.namespace, row.s, row.r)].append(row)
    for row in current:
        for ended in ENDS.get(row.r, ()):
            problems += [
                f"{old} is current, yet {row} came after it and ends it"
                for old in roles.get((row.namespace, row.s, ended), [])
                if old.o != row.o and old.id < row.id
            ]
    return problems


def _check_writes(events: list[dict], rows: dict[int, Row], *, erased: set[int] = frozenset()) -> dict:
    """Every acknowledged batch is there as written (its facts under the ids it was given, each fact it
    superseded ended by it, unless `erased` by a purge); of the batches not acknowledged, at most the
    last one each thread started is there, and all of it. Returns counts for the report."""
    starts = {event["tag"]: event for event in events if event["event"] == "start"}
    acks = {event["tag"]: event for event in events if event["event"] == "ack"}
    last_started = {event["thread"]: event["tag"] for event in starts.values()}
    by_tag: defaultdict[str, list[Row]] = defaultdict(list)
    for row in rows.values():
        if row.source in starts:
            by_tag[row.source].append(row)
        else:
            assert row.source is None or not row.source.startswith("w"), f"{row}: a write the child never began"
    for tag, ack in acks.items():
        start = starts[tag]
        assert [fact["status"] for fact in ack["facts"]] == ["stored"] * len(start["facts"]), ack
        ids = [fact["id"] for fact in ack["facts"]]
        assert sorted(row.id for row in by_tag[tag]) == sorted(ids), f"acknowledged batch {tag} is not there whole"
        for fact, written in zip(ack["facts"], start["facts"]):
            row = rows[fact["id"]]
            assert (row.namespace, row.subject, row.relation, row.object) == (start["namespace"], *written), row
            for old in fact["superseded"]:
                if old not in erased:
                    assert rows[old].ended_by == "superseded" and rows[old].superseded_by == fact["id"], rows[old]
    in_flight = [tag for tag in by_tag if tag not in acks]
    for tag in in_flight:
        start = starts[tag]
        assert tag == last_started[start["thread"]], f"batch {tag} is there, unacknowledged, yet its thread went on"
        assert len(by_tag[tag]) == len(start["facts"]), f"batch {tag} is there in part: {by_tag[tag]}"
    return {"acknowledged_batches": len(acks), "committed_unacknowledged": len(in_flight)}


def _report(**fields: object) -> None:
    print(json.dumps(fields))


# --------------------------------------------------------------------------- a write storm


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_during_a_write_storm_loses_no_acknowledged_write(postgres_server, tmp_path, seed):
    rng = random.Random(f"storm {seed}")
    url = _new_database(postgres_server)
    kill_after = rng.randint(40, 200)  # acknowledged batches
    config = {"scenario": "storm", "url": url, "seed": seed, "writers": 6, "namespaces": ["storm-a", "storm-b"]}
    child = _Child(tmp_path, config)
    try:
        child.ready()
        child.go()
        child.wait_for(lambda event: event["event"] == "ack" and child.counts["ack"] >= kill_after)
    finally:
        child.kill()
    _sessions_ended(url)
    rows = _rows(url)
    counts = _check_writes(child.events, rows)
    assert counts["acknowledged_batches"] >= kill_after
    assert counts["committed_unacknowledged"] <= config["writers"]
    assert not _problems(url, rows)
    assert sum(row.ended_by == "superseded" for row in rows.values()) > kill_after // 4  # writes ended others
    _report(scenario="storm", seed=seed, kill_after=kill_after, facts=len(rows), **counts)
    _drop(postgres_server, url)


# --------------------------------------------------------------------------- an import


@dataclass(frozen=True)
class ImportTemplate:
    database: str
    files: dict[int, Path]  # size -> a file of that many new facts
    before: dict[int, int]  # person -> the id of their employment before the import


def _import_facts(size: int) -> list[dict]:
    """`size` new facts: each of the PEOPLE moved to a new employer (spread evenly over the file), employers
    that follow one another within it (a history), memberships."""
    facts = []
    step = size // PEOPLE
    for i in range(size):
        if i % step == 0 and i // step < PEOPLE:
            fact = (f"Person {i // step}", "employed by", f"New Org {i}")
        elif i % 5 == 1:
            fact = (f"Mover {i % 97}", "employed by", f"Firm {i}")
        else:
            fact = (f"Member {i}", "member of", f"Guild {i % 50}")
        facts.append(dict(zip(("subject", "relation", "object"), fact)))
    return facts


@pytest.fixture(scope="module")
def import_template(postgres_server, tmp_path_factory):
    url = _new_database(postgres_server)
    with TripletStore(url) as store:
        done = store.write_many(
            [(f"Person {p}", "employed by", f"Old Org {p % 7}") for p in range(PEOPLE)],
            namespace="imported",
            source="before",
        )
        store.write_many([(f"Other {i}", "member of", f"Guild {i % 5}") for i in range(50)], namespace="others")
    files = {size: tmp_path_factory.mktemp("import") / f"facts-{size}.json" for size in (IMPORT_FACTS, 20_000)}
    for size, file in files.items():
        file.write_text(json.dumps(_import_facts(size)))
    yield ImportTemplate(_database_name(url), files, {p: result.fact.id for p, result in enumerate(done)})
    _drop(postgres_server, url)


def _last_id(conn) -> int:
    return conn.execute("SELECT last_value FROM triplets_id_seq").fetchone()[0]


@pytest.mark.parametrize(
    ("seed", "size"),
    [
        *((seed, IMPORT_FACTS) for seed in range(3)),
        *(pytest.param(*p.values, 20_000, marks=p.marks) for p in SEEDS[3:]),
    ],
)
def test_kill_9_during_an_import_leaves_all_of_it_or_none(postgres_server, import_template, tmp_path, seed, size):
    import psycopg

    rng = random.Random(f"import {seed}")
    mode = ("locked", "progress", "acknowledged")[seed % 3]
    url = _new_database(postgres_server, import_template.database)
    lock = moment = None
    config = {
        "scenario": "import",
        "url": url,
        "seed": seed,
        "writers": 1,
        "namespaces": ["others"],
        "pause": 0.05,  # a busy thread would slow the import's 20,000 round trips 4x (each waits for the GIL)
        "file": str(import_template.files[size]),
    }
    child = _Child(tmp_path, config)
    try:
        child.ready()
        if mode == "locked":  # the import waits, part done, to end this person's employment
            person = rng.randrange(PEOPLE)
            lock = _RowLock(url, import_template.before[person], "FOR SHARE")
            moment = f"import waiting to end Person {person}'s employment ({person * (size // PEOPLE)} of {size} in)"
        child.go()
        child.wait_for(lambda event: event["event"] == "import-begin")
        if mode == "locked":
            lock.wait_until_it_blocks("crash-import")
        elif mode == "progress":  # once the import has taken a seeded share of its ids (the writers' too)
            share = rng.uniform(0.05, 0.95)
            with psycopg.connect(url, autocommit=True) as conn:
                threshold = _last_id(conn) + share * size
                deadline = time.monotonic() + DEADLINE_S
                while _last_id(conn) < threshold and not child.counts["import-ack"]:
                    assert time.monotonic() < deadline, "the import did not get there"
                    child.poll(0.02)
            moment = f"{share:.0%} of the import's ids taken"
            if child.counts["import-ack"]:
                moment = "the import acknowledged before " + moment
        else:
            child.wait_for(lambda event: event["event"] == "import-ack")
            moment = "right after the import's acknowledgement"
    finally:
        child.kill()
        if lock is not None:
            lock.release()
    _sessions_ended(url)
    rows = _rows(url)
    imported = [row for row in rows.values() if row.namespace == "imported" and row.source.startswith("import")]
    acknowledged = any(event["event"] == "import-ack" for event in child.events)
    assert len(imported) in (0, size), f"{len(imported)} of the import's {size} facts are there"
    if mode == "locked":
        assert not imported, "the import was killed with its transaction open, yet it is there"
    if acknowledged:
        assert len(imported) == size, "the import was acknowledged, yet it is not there"
    for fact_id in import_template.before.values():  # the namespace's earlier facts: ended iff imported
        before = rows[fact_id]
        if imported:
            assert before.ended_by == "superseded", before
            assert rows[before.superseded_by].object.startswith("New Org"), rows[before.superseded_by]
        else:
            assert before.valid_to is None and before.superseded_by is None, before
    assert sum(row.namespace == "others" and row.source is None for row in rows.values()) == 50
    counts = _check_writes(child.events, rows)
    assert counts["acknowledged_batches"] > 0
    assert not _problems(url, rows)
    _report(scenario="import", seed=seed, mode=mode, moment=moment, visible=len(imported), **counts)
    _drop(postgres_server, url)


# --------------------------------------------------------------------------- purges


@dataclass(frozen=True)
class PurgeTemplate:
    database: str
    versions: dict[str, set[int]]  # doomed subject -> the ids of all its versions
    bystander: dict[str, int]  # doomed subject -> the fact of another subject that one of its facts ended
    ceo: dict[str, int]  # doomed subject -> its fact that ended the bystander's


def _subject(k: int) -> str:
    return f"Doomed {k}"


@pytest.fixture(scope="module")
def purge_template(postgres_server):
    facts = []
    for k in range(DOOMED):
        facts.append((f"Bystander {k}", "CEO of", f"Org {k}"))
        for v in range(VERSIONS):
            facts.append((_subject(k), "employed by", f"Firm {k}-{v}"))  # each ends the one before
            if v % 10 == 0:
                facts.append((_subject(k), "manager of", f"Team {k}-{v}"))  # the next employer ends it
        facts += [(_subject(k), "CEO of", f"Org {k}"), (_subject(k), "member of", f"Guild {k}")]
    facts += [(f"Keeper {i}", "member of", f"Guild {i % 9}") for i in range(100)]
    url = _new_database(postgres_server)
    with TripletStore(url) as store:  # one import: a bare list is written in order as writes are
        listed = [dict(zip(("subject", "relation", "object"), fact)) for fact in facts]
        import_file(store, json.dumps(listed), namespace="purge")
    rows = _rows(url)
    versions = {_subject(k): {row.id for row in rows.values() if row.subject == _subject(k)} for k in range(DOOMED)}
    bystander = {_subject(k): next(r.id for r in rows.values() if r.subject == f"Bystander {k}") for k in range(DOOMED)}
    ceo = {subject: rows[fact].superseded_by for subject, fact in bystander.items()}
    assert all(len(ids) == VERSIONS + VERSIONS // 10 + 2 for ids in versions.values())
    assert all(rows[fact].subject == subject for subject, fact in ceo.items())
    yield PurgeTemplate(_database_name(url), versions, bystander, ceo)
    _drop(postgres_server, url)


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_during_purges_leaves_each_subject_whole_or_gone(postgres_server, purge_template, tmp_path, seed):
    rng = random.Random(f"purge {seed}")
    mode = ("locked-version", "locked-link", "delayed")[seed % 3]
    subjects = [_subject(k) for k in range(DOOMED)]
    target = rng.choice(subjects)
    url = _new_database(postgres_server, purge_template.database)
    lock = None
    if mode == "locked-version":  # the purge waits to delete one of the target's versions
        locked = rng.choice(sorted(purge_template.versions[target] - {purge_template.ceo[target]}))  # writers update it
        moment = f"purge of {target} waiting to delete a version"
    elif mode == "locked-link":  # its versions deleted, the purge waits to unlink the fact it ended
        locked = purge_template.bystander[target]
        moment = f"purge of {target} waiting to unlink the bystander's fact"
    else:
        delay = rng.uniform(0, 0.06)  # a purge of 662 versions takes ~30-100 ms here
        moment = f"{delay * 1000:.0f} ms into the purge of {target}"
    config = {
        "scenario": "purge",
        "url": url,
        "seed": seed,
        "writers": 2,
        "namespaces": ["purge", "elsewhere"],
        "pause": 0.01,
        "subjects": subjects,
    }
    child = _Child(tmp_path, config)
    try:
        child.ready()
        if mode.startswith("locked"):
            lock = _RowLock(url, locked, "FOR KEY SHARE" if mode == "locked-version" else "FOR SHARE")
        child.go()
        child.wait_for(lambda event: event["event"] == "purge-begin" and event["subject"] == target)
        if lock is not None:
            lock.wait_until_it_blocks("crash-purge")
        else:
            time.sleep(delay)
    finally:
        child.kill()
        if lock is not None:
            lock.release()
    _sessions_ended(url)
    rows = _rows(url)
    begun = [event["subject"] for event in child.events if event["event"] == "purge-begin"]
    acknowledged = [event["subject"] for event in child.events if event["event"] == "purge-ack"]
    gone: set[int] = set()
    outcome = {}
    for subject in subjects:
        ids = purge_template.versions[subject]
        there = {row.id for row in rows.values() if row.namespace == "purge" and row.subject == subject}
        assert there in (set(), ids), f"{len(there)} of the {len(ids)} versions of {subject} are there"
        if subject in acknowledged:
            assert not there, f"the purge of {subject} was acknowledged, yet it is there"
        if subject not in begun or (lock is not None and subject == target):
            assert there == ids, f"{subject} is gone, yet its purge never began or never committed"
        bystander = rows[purge_template.bystander[subject]]
        assert bystander.ended_by == "superseded" and bystander.valid_to is not None, bystander
        assert bystander.superseded_by == (purge_template.ceo[subject] if there else None), bystander
        if not there:
            gone |= ids
        outcome[subject] = "there" if there else "gone"
    if lock is not None:
        assert begun[-1] == target and target not in acknowledged
    counts = _check_writes(child.events, rows, erased=gone)
    assert not _problems(url, rows, unlinked=set(purge_template.bystander.values()))
    _report(scenario="purge", seed=seed, mode=mode, moment=moment, subjects=outcome, **counts)
    _drop(postgres_server, url)
