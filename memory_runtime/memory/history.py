"""A fact's versions: how a new one ends those it supersedes (functional relations, `ends`), a
forgotten fact restored, the earlier versions a purge erases with a fact, an import of versions with
their histories, and `memlm memory check` (links to no fact or to another namespace's, histories that
cannot have happened) with its repairs. The store calls these with its database and relation table,
once it has checked what it was given (terms, namespaces, times); its reads are its own (store.py)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memory_runtime.memory.database import Cursor, Database
from memory_runtime.memory.facts import COLUMNS, Fact, WriteResult, fact_from_row, id_chunks, local_time
from memory_runtime.memory.memory_config import RelationTable

# --------------------------------------------------------------------------- a new version


def write_version(
    cur: Cursor,
    relations: RelationTable,
    namespace: str,
    terms,
    when: float,
    source: str | None,
    *,
    end_roles: bool = True,
) -> WriteResult:
    """A fact written as its current version, in `cur`'s write transaction, ending the versions it
    supersedes (TripletStore.write_many, restore); `terms`: (display, norm) of each field. One write
    in two statements when nothing is ended (an insert unless the fact is already
    current, then the facts it ends on each functional side, and with `end_roles` those its
    relation's `ends` names): on PostgreSQL every statement is a round trip, and a bulk import
    is made of them."""
    (s, s_norm), (r, r_norm), (o, o_norm) = terms
    current = (
        "FROM triplets WHERE namespace=? AND subject_norm=? AND relation_norm=? AND object_norm=? AND valid_to IS NULL"
    )
    key = (namespace, s_norm, r_norm, o_norm)
    inserted = cur.row(
        "INSERT INTO triplets (namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
        f" valid_from, source) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 {current}) RETURNING id",
        (namespace, s, r, o, s_norm, r_norm, o_norm, when, source, *key),
    )
    if inserted is None:
        return WriteResult(fact_from_row(cur.row(f"SELECT {COLUMNS} {current}", key)), "duplicate")
    (new_id,) = inserted
    # The facts this one ends, one query per side that holds (each answered by that side's index):
    # the subject's other objects in this relation (functional subject) and in the relations a
    # new fact of it ends ("employed by" ends "CEO of"), the object's other subjects (functional object).
    functional = relations.functional.get(r_norm)
    by_side = {
        ("subject", s_norm, "object", o_norm): ([r_norm] if functional in ("subject", "both") else [])
        + (relations.ends.get(r_norm, []) if end_roles else []),
        ("object", o_norm, "subject", s_norm): [r_norm] if functional in ("object", "both") else [],
    }
    superseded = []
    for (held, held_norm, other, other_norm), ended_relations in by_side.items():
        if not ended_relations:
            continue
        marks = ", ".join("?" * len(ended_relations))
        for row in cur.rows(
            f"SELECT {COLUMNS} FROM triplets WHERE namespace = ? AND {held}_norm = ? AND relation_norm IN"
            f" ({marks}) AND valid_to IS NULL AND {other}_norm != ? ORDER BY +id",  # +id: see COLUMNS
            (namespace, held_norm, *ended_relations, other_norm),
        ):
            old = fact_from_row(row)
            ended = replace(old, valid_to=max(when, old.valid_from), ended_by="superseded", superseded_by=new_id)
            cur.execute(
                "UPDATE triplets SET valid_to = ?, ended_by = ?, superseded_by = ? WHERE id = ?",
                (ended.valid_to, ended.ended_by, new_id, old.id),
            )
            superseded.append(ended)
    return WriteResult(Fact(s, r, o, new_id, namespace, when, source=source), "stored", superseded)


class RestoreRefused(ValueError):
    """A restore the store will not make (TripletStore.restore), with the sentence that says why;
    `missing`: the fact is not in the namespace (purged, or never there)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


def restore(db: Database, relations: RelationTable, namespace: str, fact_id: int, when: float) -> Fact:
    """TripletStore.restore's work, in one transaction, once the store has checked what it was given:
    the forgotten fact `fact_id` current again as a new version valid from `when` (or from its end,
    if later), or RestoreRefused saying why not."""
    with db.transaction(namespace) as cur:  # the restored terms are the forgotten fact's: indexed already
        row = cur.row(f"SELECT {COLUMNS} FROM triplets WHERE namespace = ? AND id = ?", (namespace, fact_id))
        if row is None:
            raise RestoreRefused(
                f"fact {fact_id} is not in namespace {namespace!r}: it was purged (erased for good, "
                "which no restore undoes), or never was",
                missing=True,
            )
        old = fact_from_row(row)
        if old.current:
            raise RestoreRefused(f"fact {fact_id} ({_said(old)}) is current: there is nothing to restore")
        if old.ended_by != "forgotten":
            raise RestoreRefused(
                f"fact {fact_id} ({_said(old)}) was {old.ended_by or 'ended'} by a newer fact, not forgotten: "
                "correct the fact to bring this value back"
            )
        terms = relations.fact_terms(old.subject, old.relation, old.object)
        result = write_version(cur, relations, namespace, terms, max(when, old.valid_to), "restore", end_roles=False)
        if result.status == "duplicate":
            raise RestoreRefused(f"{_said(old)} is current again already (fact {result.fact.id})")
        if result.superseded:  # raised in the transaction: nothing is written, nothing ended
            newer = result.superseded[0]
            raise RestoreRefused(
                f"restoring {_said(old)} would end {_said(newer)} (fact {newer.id}), which holds its "
                "place now: correct that fact instead"
            )
        return result.fact


def _said(fact: Fact) -> str:
    """A fact as a sentence of a message: “Dorothea Altemus employed by BMW”."""
    return f"“{fact.subject} {fact.relation} {fact.object}”"


# --------------------------------------------------------------------------- a purge's earlier versions

VERSION = "id, superseded_by, subject_norm, relation_norm, object_norm"  # what a purge reads of a version


def earlier_versions(cur: Cursor, namespace: str, rows: list[tuple]) -> dict[int, tuple]:
    """`rows` (of VERSION) with every earlier version of each, by id: the facts each superseded of the
    same subject and relation, and theirs, back to the first (what a purge erases with a fact)."""
    found = {row[0]: row for row in rows}
    frontier = list(found)
    while frontier:
        later = []
        for ids in id_chunks(frontier):
            for row in cur.rows(
                f"SELECT {VERSION} FROM triplets WHERE namespace = ? AND superseded_by IN"
                f" ({', '.join('?' * len(ids))})",
                (namespace, *ids),
            ):
                newer = found[row[1]]
                if row[0] not in found and row[2:4] == newer[2:4]:  # same subject_norm, relation_norm
                    found[row[0]] = row
                    later.append(row[0])
        frontier = later
    return found


# --------------------------------------------------------------------------- import


@dataclass(frozen=True)
class ImportResult:
    """What TripletStore.import_versions did: the versions it stored (new ids, as they ended up),
    how many were in the namespace already, and the facts that stored current versions ended."""

    stored: list[Fact]
    duplicate: int
    superseded: list[Fact]


def import_versions(
    db: Database, relations: RelationTable, namespace: str, checked: list, versions: Sequence[Fact], source: str
) -> ImportResult:
    """TripletStore.import_versions's storing, in one transaction, of `versions` as the store checked them:
    `checked` pairs each with its (display, norm) terms."""
    # Planned outside the write transaction, against what the namespace holds now, with provisional
    # ids; inside it, the plan stands if the namespace has not changed meanwhile (else it is made again
    # there), takes real ids and is written in two statements: the transaction holds the database for
    # the writes only (60,000 facts: 4.1 s with a statement per fact and the plan made inside; every
    # other user's write waited that long)
    signature = _namespace_signature(db, namespace)
    plan = _import_plan(db, relations, namespace, checked, versions, source)
    with db.transaction(namespace) as cur:
        if _namespace_signature(cur, namespace) != signature:
            plan = _import_plan(cur, relations, namespace, checked, versions, source)
        real = dict(zip(plan.stored, db.new_ids(cur, len(plan.stored))))  # provisional id -> its id
        inserts, updates = plan.rows(real)
        cur.many(
            "INSERT INTO triplets (id, namespace, subject, relation, object, subject_norm, relation_norm,"
            " object_norm, valid_from, valid_to, ended_by, superseded_by, source)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            inserts,
        )
        cur.many("UPDATE triplets SET valid_to = ?, ended_by = ?, superseded_by = ? WHERE id = ?", updates)
    plan.renumber(real)  # the result's facts, once the database holds them
    return ImportResult(list(plan.stored.values()), plan.duplicate, list(plan.superseded.values()))


def _namespace_signature(db: Database | Cursor, namespace: str) -> tuple:
    """What changes whenever a namespace's facts do (ids are never reused: a write or a restore raises
    the largest id or the count, a purge lowers the count, an end raises the ended count)."""
    return db.row("SELECT COUNT(*), MAX(id), COUNT(valid_to) FROM triplets WHERE namespace = ?", (namespace,))


def _import_plan(
    db: Database | Cursor,
    relations: RelationTable,
    namespace: str,
    checked: list,
    versions: Sequence[Fact],
    source: str,
) -> _ImportPlan:
    """What import_versions writes, decided against what `db` shows of the namespace, its new versions
    under provisional (negative) ids."""
    known, current = _met_by(db, relations, namespace, checked)
    plan = _ImportPlan()
    provisional = itertools.count(-1, -1)
    predecessors: dict[int, list[Fact]] = {}  # the file's versions by the id of the one that superseded each
    for fact in versions:
        if fact.superseded_by is not None:
            predecessors.setdefault(fact.superseded_by, []).append(fact)
    for fact, terms in sorted(checked, key=lambda item: item[0].valid_from):  # stable: file order
        (s, s_norm), (r, r_norm), (o, o_norm) = terms
        here = known.setdefault((s_norm, r_norm, o_norm), [])
        there = next((id_ for id_, start in here if start == fact.valid_from), None)
        held = None  # the same fact current here, begun at another time than the file's history allows
        if there is None and fact.valid_to is None:
            there = next((id_ for id_, _ in here if id_ in current.facts), None)
            if there is not None and not _links_fit(predecessors.get(fact.id, ()), current.facts[there][0], plan):
                held, there = current.facts[there][0], None
        if there is not None:
            plan.new_ids[fact.id] = there
            plan.duplicate += 1
            continue
        new_id = next(provisional)
        plan.new_ids[fact.id] = new_id
        dates = (fact.valid_from, fact.valid_to, fact.ended_by)
        plan.stored[new_id] = Fact(s, r, o, new_id, namespace, *dates, None, fact.source or source)
        plan.norms[new_id] = (s_norm, r_norm, o_norm)
        here.append((new_id, fact.valid_from))
        if held is not None:  # into history, superseded by the namespace's version (as the store ends one)
            ended = max(held.valid_from, fact.valid_from)
            plan.stored[new_id] = replace(
                plan.stored[new_id], valid_to=ended, ended_by="superseded", superseded_by=held.id
            )
        elif fact.valid_to is None:
            current.add(plan.stored[new_id], plan.norms[new_id])
            _settle(relations, current, plan.stored, plan.superseded, plan.ended_here, new_id)
    for fact in versions:  # the file's links, now that every version has its id here
        new_id = plan.new_ids[fact.id]
        if fact.superseded_by is not None and new_id in plan.stored:
            plan.stored[new_id] = replace(plan.stored[new_id], superseded_by=plan.new_ids[fact.superseded_by])
    return plan


def _links_fit(predecessors: Sequence[Fact], held: Fact, plan: _ImportPlan) -> bool:
    """Whether the file's versions a current version superseded may name `held`, the same fact current
    in the namespace, as their successor: each the import stores (or has yet to decide on) ended when
    `held` began, as the store ends a fact and transfer's check requires. If not (the file says the
    fact began when its predecessor ended; the namespace, at another time), the file's version is
    kept, in history, superseded by `held` (_import_plan): its predecessors' links hold, the
    namespace's current facts are what a duplicate would leave, and its export imports again."""
    return all(
        plan.new_ids.get(p.id, -1) >= 0 or ended_when_succeeded(p.valid_from, p.valid_to, held.valid_from)
        for p in predecessors
    )


SAME_TIME = 1e-3  # seconds: two times closer than this are one (files carry times to the millisecond)


def ended_when_succeeded(valid_from: float, valid_to: float, successor_began: float) -> bool:
    """Whether a superseded version ended as the store ends one: when its successor began (at once,
    if the successor is the older); transfer's check, imports, `memlm memory check` (_MISTIMED)."""
    return abs(valid_to - max(successor_began, valid_from)) <= SAME_TIME


def _met_by(cur: Database | Cursor, relations: RelationTable, namespace: str, checked: list) -> tuple[dict, _Current]:
    """What an import meets in the namespace, read a few hundred names a statement (a query per
    imported fact would be a round trip each on PostgreSQL): every version of the facts about its
    subjects, (subject, relation, object) norms -> [(id, valid_from)], and the current facts it
    may end or be ended by (of its subjects; of its objects in object-functional relations)."""
    known: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    current = _Current()
    norms = "subject_norm, relation_norm, object_norm"
    subjects = sorted({terms[0][1] for _, terms in checked})
    for chunk in id_chunks(subjects):
        for row in cur.rows(
            f"SELECT {COLUMNS}, {norms} FROM triplets WHERE namespace = ? AND subject_norm IN"
            f" ({', '.join('?' * len(chunk))})",
            (namespace, *chunk),
        ):
            fact, key = fact_from_row(row[:-3]), row[-3:]
            known.setdefault(key, []).append((fact.id, fact.valid_from))
            if fact.current:
                current.add(fact, key)
    object_functional = [terms for _, terms in checked if relations.functional.get(terms[1][1]) in ("object", "both")]
    held = {(terms[2][1], terms[1][1]) for terms in object_functional}
    for chunk in id_chunks(sorted(held)):  # (object, relation) pairs
        pairs = " OR ".join(["(object_norm = ? AND relation_norm = ?)"] * len(chunk))
        for row in cur.rows(
            f"SELECT {COLUMNS}, {norms} FROM triplets WHERE namespace = ? AND valid_to IS NULL AND ({pairs})",
            (namespace, *(norm for pair in chunk for norm in pair)),
        ):
            current.add(fact_from_row(row[:-3]), row[-3:])
    return known, current


def _settle(
    relations: RelationTable, current: _Current, stored: dict, superseded: dict, ended_here: dict, new_id: int
) -> None:
    """An imported current version against the current facts it meets, as writes in time order
    would have left them: of the relations either ends (a functional one, `ends`), the older fact
    is ended, superseded by the newer (a tie: the import is the newer). What changes is recorded:
    a version of the import in `stored`, a fact of the namespace in `ended_here`."""
    new, (s_norm, r_norm, o_norm) = current.facts[new_id]
    functional = relations.functional.get(r_norm)
    own = {r_norm} if functional in ("subject", "both") else set()
    ends = own | set(relations.ends.get(r_norm, []))
    ended_by = own | {name for name, ended in relations.ends.items() if r_norm in ended}
    met = [(i, ends, ended_by) for i in current.by_subject.get(s_norm, ()) if current.facts[i][1][2] != o_norm]
    if functional in ("object", "both"):
        others = current.by_object.get(o_norm, ())
        met += [(i, {r_norm}, {r_norm}) for i in others if current.facts[i][1][0] != s_norm]
    ender = None
    for old_id, ends, ended_by in sorted(met, key=lambda item: item[0]):
        old, (_, old_relation, _) = current.facts[old_id]
        if old_relation in ends and old.valid_from <= new.valid_from:
            ended = replace(old, valid_to=new.valid_from, ended_by="superseded", superseded_by=new_id)
            superseded[old.id] = ended
            current.end(old.id)
            (stored if old.id in stored else ended_here)[old.id] = ended
        elif old_relation in ended_by and old.valid_from > new.valid_from:
            if ender is None or old.valid_from < ender.valid_from:
                ender = old
    if ender is not None:  # a newer fact of the namespace ends it: into history
        stored[new_id] = replace(new, valid_to=ender.valid_from, ended_by="superseded", superseded_by=ender.id)
        current.end(new_id)


class _Current:
    """The current facts an import meets, by id with their (subject, relation, object) norms, and by
    subject and by object; kept as the import adds and ends facts (TripletStore.import_versions)."""

    def __init__(self) -> None:
        self.facts: dict[int, tuple[Fact, tuple[str, str, str]]] = {}
        self.by_subject: dict[str, set[int]] = {}
        self.by_object: dict[str, set[int]] = {}

    def add(self, fact: Fact, norms: tuple[str, str, str]) -> None:
        self.facts[fact.id] = (fact, norms)
        self.by_subject.setdefault(norms[0], set()).add(fact.id)
        self.by_object.setdefault(norms[2], set()).add(fact.id)

    def end(self, fact_id: int) -> None:
        _, (s_norm, _, o_norm) = self.facts.pop(fact_id)
        self.by_subject[s_norm].discard(fact_id)
        self.by_object[o_norm].discard(fact_id)


@dataclass
class _ImportPlan:
    """An import decided before it is written: the versions to store, the namespace's facts they end,
    by ids that are provisional (negative) until renumber gives them the database's."""

    stored: dict[int, Fact] = field(default_factory=dict)  # the versions to store (ended by a later one, maybe)
    norms: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # their (subject, relation, object) norms
    ended_here: dict[int, Fact] = field(default_factory=dict)  # the namespace's own facts the import ends
    superseded: dict[int, Fact] = field(default_factory=dict)  # every fact the import's current versions end
    new_ids: dict[int, int] = field(default_factory=dict)  # the file's id -> its id here (a duplicate's: held)
    duplicate: int = 0

    def rows(self, real: dict[int, int]) -> tuple[list[tuple], list[tuple]]:
        """The rows to insert and the (valid_to, ended_by, superseded_by, id) updates of the namespace's
        facts, `real` giving each provisional id its id (tuples only: this runs in the write transaction)."""
        inserts = [
            (
                real[k],
                f.namespace,
                f.subject,
                f.relation,
                f.object,
                *self.norms[k],
                f.valid_from,
                f.valid_to,
                f.ended_by,
                real.get(f.superseded_by, f.superseded_by),
                f.source,
            )  # fmt: skip
            for k, f in self.stored.items()
        ]
        updates = [
            (f.valid_to, f.ended_by, real.get(f.superseded_by, f.superseded_by), f.id) for f in self.ended_here.values()
        ]
        return inserts, updates

    def renumber(self, real: dict[int, int]) -> None:
        """The provisional ids of what import_versions returns (stored, superseded) replaced by `real`'s,
        links included."""

        def mapped(fact: Fact) -> Fact:
            link = real.get(fact.superseded_by, fact.superseded_by) if fact.superseded_by is not None else None
            return replace(fact, id=real.get(fact.id, fact.id), superseded_by=link)

        self.stored = {real[k]: mapped(f) for k, f in self.stored.items()}
        self.superseded = {real.get(k, k): mapped(f) for k, f in self.superseded.items()}


# --------------------------------------------------------------------------- memlm memory check


@dataclass(frozen=True)
class BrokenLink:
    """A fact whose `superseded_by` points at no fact (`target_namespace` None) or at another namespace's."""

    fact: Fact
    target_namespace: str | None

    def __str__(self) -> str:
        f = self.fact
        where = (
            "which does not exist"
            if self.target_namespace is None
            else f"a fact of namespace {self.target_namespace!r}"
        )
        return (
            f"namespace {f.namespace!r}: fact {f.id} ({f.subject} >> {f.relation} >> {f.object},"
            f" {f.ended_by or 'current'}) says it was superseded by fact {f.superseded_by}, {where}"
        )


@dataclass(frozen=True)
class HistoryProblem:
    """A fact whose history cannot have happened (TripletStore.history_problems), with why."""

    fact: Fact
    reason: str

    def __str__(self) -> str:
        f = self.fact
        return f"namespace {f.namespace!r}: fact {f.id} ({f.subject} >> {f.relation} >> {f.object}): {self.reason}"


def superseding_cycles(successors: dict[int, int]) -> list[list[int]]:
    """The chains of `successors` (a fact's id -> the id of the fact that superseded it) that come back
    to where they started, each once, from its smallest id: no history can have happened so."""
    state: dict[int, int] = {}  # 1: on the path being walked, 2: done
    cycles = []
    for start in successors:
        path = []
        node: int | None = start
        while node is not None and node not in state:
            state[node] = 1
            path.append(node)
            node = successors.get(node)
        if node is not None and state[node] == 1:  # the walk met itself: the path from `node` on is a cycle
            cycle = path[path.index(node) :]
            first = cycle.index(min(cycle))
            cycles.append(cycle[first:] + cycle[:first])
        for seen in path:
            state[seen] = 2
    return cycles


def broken_links(db: Database) -> list[BrokenLink]:
    """Every fact, of any namespace, whose `superseded_by` points at no fact or at a fact of
    another namespace (`memlm memory check`); none in a memory this memlm wrote."""
    columns = ", ".join(f"a.{name}" for name in COLUMNS.split(", "))
    rows = db.rows(
        f"SELECT {columns}, b.namespace FROM triplets a LEFT JOIN triplets b ON b.id = a.superseded_by"
        " WHERE a.superseded_by IS NOT NULL AND (b.id IS NULL OR b.namespace <> a.namespace)"
        " ORDER BY a.namespace, a.id"
    )
    return [BrokenLink(fact_from_row(row[:-1]), row[-1]) for row in rows]


def history_problems(db: Database) -> list[HistoryProblem]:
    """Every fact, of any namespace, whose history cannot have happened (`memlm memory check`): its
    superseded_by links lead back to it, it is current yet names a successor, it ended before it
    began, it has an end without how it ended (or the other way round), or it ended at another time
    than its successor began (imports before 2026-11-30 made some). None in a memory this memlm
    writes; an import refuses such a history (memory_runtime/memory/transfer.py)."""
    problems: list[HistoryProblem] = []
    with db.snapshot() as cur:  # one view across its statements
        for row in cur.rows(
            f"SELECT {COLUMNS} FROM triplets WHERE (valid_to IS NULL AND superseded_by IS NOT NULL)"
            " OR valid_to < valid_from OR (valid_to IS NULL) <> (ended_by IS NULL) ORDER BY namespace, id"
        ):
            fact = fact_from_row(row)
            if fact.current and fact.superseded_by is not None:
                reason = f"it is current, yet says fact {fact.superseded_by} superseded it"
            elif fact.valid_to is not None and fact.valid_to < fact.valid_from:
                reason = f"it ended ({local_time(fact.valid_to)}) before it began ({local_time(fact.valid_from)})"
            else:
                reason = "it has an end without how it ended, or how it ended without an end"
            problems.append(HistoryProblem(fact, reason))
        links = dict(cur.rows("SELECT id, superseded_by FROM triplets WHERE superseded_by IS NOT NULL"))
        in_cycles = set()
        for cycle in superseding_cycles(links):
            marks = ", ".join("?" * len(cycle))
            rows = cur.rows(f"SELECT {COLUMNS} FROM triplets WHERE id IN ({marks}) ORDER BY id", cycle)
            chain = " -> ".join(map(str, [*cycle, cycle[0]]))
            problems += [
                HistoryProblem(fact_from_row(row), f"its successors lead back to it ({chain})") for row in rows
            ]
            in_cycles.update(cycle)
        for row in cur.rows(_MISTIMED):
            fact, began = fact_from_row(row[:-1]), row[-1]
            if fact.id not in in_cycles:  # said once: its cycle
                reason = (
                    f"it ended {local_time(fact.valid_to)}, but fact {fact.superseded_by}, which superseded it,"
                    f" began {local_time(began)}: a superseded fact ends when its successor begins"
                )
                problems.append(HistoryProblem(fact, reason))
    return problems


# The superseded facts that did not end when their successor began (ended_when_succeeded, in SQL)
_MISTIMED = (
    f"SELECT {', '.join(f't.{c}' for c in COLUMNS.split(', '))}, s.valid_from FROM triplets t JOIN triplets s"
    " ON s.id = t.superseded_by AND s.namespace = t.namespace WHERE t.valid_to IS NOT NULL AND"
    f" ABS(t.valid_to - CASE WHEN s.valid_from > t.valid_from THEN s.valid_from ELSE t.valid_from END) > {SAME_TIME}"
    " ORDER BY t.namespace, t.id"
)


def unlink_mistimed(db: Database) -> int:
    """Remove the links of the superseded facts that did not end when their successor began (as
    history_problems() finds them): each keeps its end, without a successor; how many."""
    db.refuse_writes()
    return _unlink(db, [fact_from_row(row[:-1]) for row in db.rows(_MISTIMED)])


def unlink_cycles(db: Database) -> int:
    """Break the cycles history_problems() finds: each fact of one keeps its end, without a successor
    (as when its successor is purged); how many links it removed."""
    db.refuse_writes()
    removed = 0
    links = dict(db.rows("SELECT id, superseded_by FROM triplets WHERE superseded_by IS NOT NULL"))
    for cycle in superseding_cycles(links):
        marks = ", ".join("?" * len(cycle))
        with db.transaction("memlm check") as cur:
            removed += cur.execute(f"UPDATE triplets SET superseded_by = NULL WHERE id IN ({marks})", cycle)
    return removed


def unlink_broken(db: Database) -> int:
    """Remove the broken links broken_links() finds (the facts stay, ended as they were); how many."""
    db.refuse_writes()
    return _unlink(db, [link.fact for link in broken_links(db)])


def _unlink(db: Database, facts: list[Fact]) -> int:
    """Each fact without its successor, if it still names the one it named when found (a transaction of
    its namespace each); how many links were removed."""
    removed = 0
    for fact in facts:
        with db.transaction(fact.namespace) as cur:
            removed += cur.execute(
                "UPDATE triplets SET superseded_by = NULL WHERE id = ? AND superseded_by = ?",
                (fact.id, fact.superseded_by),
            )
    return removed
