"""A memory's export and import: one format and one code path for the server (`GET /v1/memory/export`,
`POST /v1/memory/import`, the memory page's Export and Import) and `memlm memory export|import`.

An export is one JSON document, a namespace's memory as the store keeps it:

    {"namespace": "alice", "exported_at": 1767225600.0,
     "facts":   [every current fact],
     "history": [every version, current ones included, in id order]}

each fact a memory_runtime.memory.facts.Fact: id, subject, relation, object, namespace, valid_from,
valid_to (null while current), ended_by ("superseded" or "forgotten"), superseded_by (the id of the
fact that ended it), source; times in unix seconds. It is written a page of facts at a time, never
held whole.

An import reads a whole file and checks all of it before it stores anything, then stores it in one
transaction (TripletStore.import_versions): all of it, or nothing. It takes
- an export: every version of `history` comes back with its dates, how it ended and its source
  (after "import: ": a file cannot say that this server wrote a fact),
  under new ids, its links following (a fact of `facts` not in `history` is one more version);
- `{"facts": [...]}`, or a bare list, of {subject, relation, object}: a fact without `valid_from` is
  new, valid from now, and they are written in order as writes are (a later fact of a functional
  relation supersedes an earlier one).
A version the namespace holds already (the same fact valid from the same time, or a current fact
current there) is a duplicate. Every problem is named by its place in the file (`facts[699]: subject
is empty`), and a history that contradicts itself is refused: an end before a start, a link to no fact
of the file, a superseded version still valid after its successor began, two current versions of a
functional fact.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO, TextIO

from memory_runtime.memory.facts import Fact
from memory_runtime.memory.history import ended_when_succeeded, superseding_cycles
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import control_character, normalize_term

MAX_PROBLEMS = 10  # named in one error; more are counted
FUTURE_SLACK_S = 86_400  # a time later than now by more than a day is no unix time in seconds (milliseconds?)
MAX_SOURCE_CHARS = 200
IMPORT_SOURCE = "import"  # the source of every imported fact (the file's own, if any, follows it: imported_source)
ENDINGS = ("superseded", "forgotten")
FORMAT_HINT = 'a memlm export ({"facts": [...], "history": [...]}) or a list of {"subject", "relation", "object"}'


class BadImport(ValueError):
    """An import refused before anything was stored: every problem found (up to MAX_PROBLEMS), each
    with its place in the file (None: the file as a whole). `position` is the first one's."""

    def __init__(self, problems: list[tuple[str | None, str]], more: int = 0) -> None:
        self.problems = problems
        self.more = more
        self.position = problems[0][0]
        text = "; ".join(f"{where}: {what}" if where else what for where, what in problems)
        if len(problems) + more > 1:
            text = f"{len(problems) + more} problems: {text}" + (f"; and {more} more" if more else "")
        super().__init__(text)


@dataclass(frozen=True)
class Imported:
    """What an import stored: versions (current ones and ones in history), duplicates, and the
    facts its current versions superseded."""

    stored: int
    current: int
    history: int
    duplicate: int
    superseded: int

    @property
    def message(self) -> str:
        split = f" ({self.current:,} current, {self.history:,} in history)" if self.history else ""
        return f"{self.stored:,} stored{split}, {self.duplicate:,} already there, {self.superseded:,} superseded"


# --------------------------------------------------------------------------- export


EXPORT_CHUNK_CHARS = 65_536  # what an export hands its reader at a time (a chunk per fact took 53 s for 60,000)
EXPORT_PAGE = 1000  # facts read per statement of the export's snapshot


def export_chunks(store: TripletStore, namespace: str) -> Iterator[str]:
    """The namespace's export in pieces of about EXPORT_CHUNK_CHARS (a fact a line), read from one
    snapshot of the store a page at a time (TripletStore.snapshot_facts): what is written meanwhile is
    not in it, so the file is one moment's memory, which an import takes back whole."""
    head = json.dumps({"namespace": namespace, "exported_at": time.time()}, ensure_ascii=False)
    pieces, size = [head[:-1] + ', "facts": [\n'], 0
    first = True
    in_facts = True
    for current, fact in store.snapshot_facts(namespace, page=EXPORT_PAGE):
        if in_facts and not current:  # the current facts are done: every version follows
            pieces.append('\n], "history": [\n')
            in_facts, first = False, True
        line = ("" if first else ",\n") + json.dumps(asdict(fact), ensure_ascii=False)
        pieces.append(line)
        first, size = False, size + len(line)
        if size >= EXPORT_CHUNK_CHARS:
            yield "".join(pieces)
            pieces, size = [], 0
    if in_facts:
        pieces.append('\n], "history": [\n')
    pieces.append("\n]}\n")
    yield "".join(pieces)


def write_export(store: TripletStore, namespace: str, out: TextIO) -> None:
    """The namespace's export written to a text stream (`memlm memory export`)."""
    for chunk in export_chunks(store, namespace):
        out.write(chunk)


# --------------------------------------------------------------------------- import


@dataclass(frozen=True)
class _Version:
    position: str  # where it is in the file: "history[3]", "facts[699]", "[5]"
    fact: Fact  # id: the file's (or one given here); valid_from: now when the file gives none
    dated: bool  # the file gave its valid_from
    has_id: bool


def import_file(
    store: TripletStore, data: bytes | str | BinaryIO, *, namespace: str, now: float | None = None
) -> Imported:
    """Read, check and store a whole export (or list of facts) in `namespace`, in one transaction.
    `data`: the file's bytes or text, or a binary file open at its start (read as a stream: a file of
    any size costs its facts in memory, not its text). BadImport, with every problem named by its
    place, when anything is wrong: nothing is stored."""
    now = time.time() if now is None else now
    versions = _checked_versions(store, data, now=now)
    try:
        result = store.import_versions([v.fact for v in versions], namespace=namespace)
    except (TypeError, ValueError) as err:  # _checked_versions checked what the store checks: not expected
        raise BadImport([(None, str(err))]) from None
    current = sum(fact.current for fact in result.stored)
    return Imported(len(result.stored), current, len(result.stored) - current, result.duplicate, len(result.superseded))


def in_a_process_of_its_own(store: TripletStore) -> bool:
    """Whether another process can reach this store's database (a file or a server, not :memory:)."""
    return store.path != ":memory:" and not store.path.startswith("file::memory:")


def import_in_a_process(store: TripletStore, path: str | os.PathLike[str], *, namespace: str) -> Imported:
    """import_file of the file at `path`, run by a Python process of its own over the store's database.

    Reading and checking tens of thousands of facts is seconds of Python: run by a thread of a server,
    it held the GIL, which each of the event loop's steps then waited for (a read beside a 60,000-fact
    import: p99 908 ms on a 2-core VM). Another process holds no GIL of this one. What it writes is one
    transaction, as here; the store's resident fuzzy indexes catch up with its rows by id, as they do
    with another server's. BadImport as import_file's; RuntimeError if the process failed otherwise."""
    spec = {"location": store.path, "config": store.config.model_dump(mode="json"), "path": os.fspath(path)}
    done = subprocess.run(
        [sys.executable, "-c", "from memory_runtime.memory.transfer import _import_main; _import_main()"],
        input=json.dumps({**spec, "namespace": namespace}),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        answer = None
    if not isinstance(answer, dict) or done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:]) or f"exit status {done.returncode}"
        raise RuntimeError(f"the import's process failed: {tail}")
    if "problems" in answer:
        raise BadImport([(where, what) for where, what in answer["problems"]], answer["more"])
    return Imported(**answer)


def _import_main() -> None:
    """import_in_a_process's child: the spec on stdin, one JSON line on stdout (Imported's fields, or a
    BadImport's problems). It ends when its parent does (an import in flight rolls back)."""
    import threading

    parent = os.getppid()

    def orphaned() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()
    spec = json.loads(sys.stdin.read())
    with TripletStore(spec["location"], MemoryConfig.model_validate(spec["config"])) as store:
        try:
            with open(spec["path"], "rb") as stream:
                answer: dict[str, Any] = asdict(import_file(store, stream, namespace=spec["namespace"]))
        except BadImport as err:
            answer = {"problems": err.problems, "more": err.more}
    print(json.dumps(answer))


def _checked_versions(store: TripletStore, data: bytes | str | BinaryIO, *, now: float) -> list[_Version]:
    """The versions a file holds, each checked as the store would check it and the history as a
    whole; BadImport naming every problem (up to MAX_PROBLEMS)."""
    problems = _Problems()
    streamed = _streamed_lists(data) if not isinstance(data, (bytes, str)) else None
    if streamed is None:
        if not isinstance(data, (bytes, str)):
            data.seek(0)
            data = data.read()
        streamed = {key: iter(items) for key, items in _lists(_load(data)).items()}
    parsed = {
        key: [_version(f"{key}[{i}]", item, store, now, problems) for i, item in enumerate(items)]
        for key, items in streamed.items()
    }
    if not any(parsed.values()):
        raise BadImport(
            [
                (
                    None,
                    "the file has no facts: "
                    + ("its list is empty" if "" in parsed else "its lists of facts are empty"),
                )
            ]
        )
    problems.raise_any()
    versions = _merged(parsed, problems)
    problems.raise_any()
    _check_history(versions, store, problems)
    problems.raise_any()
    return versions


def _streamed_lists(stream: BinaryIO) -> dict[str, Iterator[Any]] | None:
    """The file's lists of facts, as _lists names them, each read item by item from the stream
    (ijson), for a UTF-8 export or list whose lists are where they should be; None for anything
    else (another encoding, a list that is not one, JSON that stops): the whole file is then read
    and every problem named by its place."""
    import ijson

    head = stream.read(4096)
    stream.seek(0)
    start = head.lstrip(b" \t\r\n")[:1]
    if json.detect_encoding(head) != "utf-8" or head.startswith(b"\xef\xbb\xbf") or start not in (b"[", b"{"):
        return None
    if start == b"[":
        return {"": _items(stream, "item")}
    kinds = {}  # each top-level key of the object -> the event its value starts with
    try:
        events = ijson.parse(stream, use_float=True)
        for prefix, event, value in events:
            if prefix == "" and event == "map_key":
                kinds[value] = next(events)[1]
    except (ijson.JSONError, ValueError, UnicodeDecodeError):
        return None
    lists = [key for key in ("history", "facts") if kinds.get(key) == "start_array"]
    if not lists or any(kinds.get(key) not in (None, "null", "start_array") for key in ("history", "facts")):
        return None
    return {key: _items(stream, f"{key}.item") for key in lists}


def _items(stream: BinaryIO, prefix: str) -> Iterator[Any]:
    """The items at `prefix` of the stream, read from its start; a stream that turns out not to be
    JSON is read whole instead, to name the problem by its place (_load)."""
    import ijson

    stream.seek(0)
    try:
        yield from ijson.items(stream, prefix, use_float=True)
    except (ijson.JSONError, ValueError, UnicodeDecodeError):
        stream.seek(0)
        _lists(_load(stream.read()))  # raises BadImport with the place; ijson may refuse what json takes
        raise BadImport([(None, "the file could not be read as JSON")]) from None


class _Problems:
    def __init__(self) -> None:
        self.found: list[tuple[str | None, str]] = []
        self.more = 0

    def add(self, position: str | None, message: str) -> None:
        if len(self.found) < MAX_PROBLEMS:
            self.found.append((position, message))
        else:
            self.more += 1

    def raise_any(self) -> None:
        if self.found:
            raise BadImport(self.found, self.more)


def _load(data: bytes | str) -> Any:
    if isinstance(data, bytes):
        data = _text(data)
    if not data.strip():
        raise BadImport([(None, "the file is empty: nothing to import")])
    control = next((i for i, ch in enumerate(data[:65_536]) if ch < " " and ch not in "\t\n\r"), None)
    if control is not None:  # JSON holds no control characters
        raise BadImport(
            [
                (
                    _place(data, control),
                    f"the file is binary, not JSON text (character {ord(data[control]):#04x}): expected {FORMAT_HINT}",
                )
            ]
        )
    try:
        return json.loads(data, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise BadImport([(_place(data, err.pos), f"the file is not JSON: {err.msg}")]) from None
    except ValueError as err:
        too_long = r"\d{" + str(sys.get_int_max_str_digits() + 1) + ",}"
        digits = re.search(too_long, data) if "digits" in str(err) else None
        if digits is not None:
            raise BadImport(
                [
                    (
                        _place(data, digits.start()),
                        f"the file holds a number of {len(digits.group()):,} digits: no field of a fact takes one",
                    )
                ]
            ) from None
        raise BadImport([(None, f"the file is not JSON: {err}")]) from None
    except RecursionError:
        raise BadImport([(None, "the file is not a memlm export: it is nested too deeply")]) from None


def _text(data: bytes) -> str:
    """The file's bytes as text (UTF-8, or the UTF-16/32 that JSON allows); BadImport saying where a
    byte starts no character."""
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        binary = any(byte < 0x20 and byte not in b"\t\n\r" for byte in data[:65_536])
        if encoding != "utf-8" or binary:  # control bytes (NULs where UTF-16 or UTF-32 would have them)
            raise BadImport([(None, f"the file is binary, not JSON text: expected {FORMAT_HINT}")]) from None
        before = data[: err.start].decode(encoding, errors="replace")
        raise BadImport(
            [
                (
                    _place(before, len(before)),
                    f"the file is not {encoding.upper()} text: byte {data[err.start]:#04x} "
                    f"(byte {err.start:,} of the file) starts no character; save it as UTF-8",
                )
            ]
        ) from None


def _place(text: str, position: int) -> str:
    """A place in a file's text as people find it: line and column (both from 1)."""
    line, column = text.count("\n", 0, position) + 1, position - text.rfind("\n", 0, position)
    return f"line {line}, column {column}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number")


def _lists(doc: Any) -> dict[str, list]:
    """The file's lists of facts by the name its places are given: "facts" and "history" of an
    export, "" of a bare list."""
    if isinstance(doc, list):
        if not doc:
            raise BadImport([(None, "the file has no facts: its list is empty")])
        return {"": doc}
    if not isinstance(doc, dict):
        raise BadImport([(None, f"the file holds {_kind(doc)}, not facts: expected {FORMAT_HINT}")])
    lists = {}
    for key in ("history", "facts"):
        if doc.get(key) is not None:
            if not isinstance(doc[key], list):
                raise BadImport([(key, f"{_kind(doc[key])}, not a list of facts")])
            lists[key] = doc[key]
    if not lists:
        raise BadImport([(None, f'the file has no facts: it has no "facts" list; expected {FORMAT_HINT}')])
    if not any(lists.values()):
        raise BadImport([(None, "the file has no facts: its lists of facts are empty")])
    return lists


def _version(position: str, item: Any, store: TripletStore, now: float, problems: _Problems) -> _Version | None:
    if not isinstance(item, dict):
        problems.add(position, f'{_kind(item)}, not a fact {{"subject", "relation", "object"}}')
        return None
    try:
        missing = [name for name in ("subject", "relation", "object") if item.get(name) is None]
        if missing:
            named = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
            raise ValueError(f"{named} {'is' if len(missing) == 1 else 'are'} missing")
        subject, relation, object_ = store.checked_triplet(item["subject"], item["relation"], item["object"])
        id_, successor = _integer(item, "id"), _integer(item, "superseded_by")
        valid_from, valid_to = _time(item, "valid_from", now), _time(item, "valid_to", now)
        ended_by, source = item.get("ended_by"), item.get("source")
        if ended_by is not None and ended_by not in ENDINGS:
            raise ValueError(f"ended_by is {_shown(ended_by)}: it is 'superseded', 'forgotten' or null")
        if source is not None and not isinstance(source, str):
            raise TypeError(f"source must be a string, got {_kind(source)}")
        if source is not None and len(source) > MAX_SOURCE_CHARS:
            raise ValueError(f"source is longer than {MAX_SOURCE_CHARS} characters")
        if source is not None and control_character(source) is not None:
            raise ValueError(f"source holds a control character ({control_character(source)})")
        if valid_to is not None:
            if valid_from is None:
                raise ValueError("valid_to without valid_from: an ended fact has both dates")
            if valid_to < valid_from:
                raise ValueError(f"valid_to ({_date(valid_to)}) is before valid_from ({_date(valid_from)})")
            if ended_by is None:
                raise ValueError("valid_to is set but ended_by is null: an ended fact was 'superseded' or 'forgotten'")
        elif ended_by is not None:
            raise ValueError(f"ended_by is {ended_by!r} but valid_to is null: a current fact has not ended")
        if successor is not None and ended_by != "superseded":
            state = "current" if ended_by is None else ended_by
            raise ValueError(f"superseded_by is set but the fact is {state}: only a superseded fact has a successor")
    except (TypeError, ValueError) as err:
        problems.add(position, str(err))
        return None
    fact = Fact(
        subject,
        relation,
        object_,
        id_ or 0,
        "",
        now if valid_from is None else valid_from,
        valid_to,
        ended_by,
        successor,
        imported_source(source),
    )
    return _Version(position, fact, valid_from is not None, id_ is not None)


def imported_source(source: str | None) -> str:
    """An imported fact's source: "import", or what the file says after "import: ", so that no file can
    make a fact claim that this server wrote it (a chat turn's id, "correction", "page")."""
    if not source or source == IMPORT_SOURCE or source.startswith(f"{IMPORT_SOURCE}: "):
        return source or IMPORT_SOURCE
    return f"{IMPORT_SOURCE}: {source}"


def _merged(parsed: dict[str, list[_Version]], problems: _Problems) -> list[_Version]:
    """One list of versions, each id once: `history`'s, then the facts of `facts` not in it (an
    export lists each current fact in both); versions without an id get one no link can name."""
    history = parsed.get("history", [])
    by_id = {v.fact.id: v for v in history if v.has_id}
    versions = list(history)
    for v in parsed.get("facts", parsed.get("", [])):
        same = by_id.get(v.fact.id) if v.has_id and history else None
        if same is None:
            versions.append(v)
        elif _key(same.fact) != _key(v.fact):
            problems.add(v.position, f"has id {v.fact.id}, as {same.position} has, but is another fact")
    seen: dict[int, str] = {}
    for v in versions:
        if v.has_id and seen.setdefault(v.fact.id, v.position) != v.position:
            problems.add(v.position, f"id {v.fact.id} is {seen[v.fact.id]}'s too")
    next_id = max(seen, default=0) + 1
    for i, v in enumerate(versions):
        if not v.has_id:
            f = v.fact  # built whole: dataclasses.replace took a fifth of a 60,000-fact import
            fact = Fact(
                f.subject,
                f.relation,
                f.object,
                next_id,
                f.namespace,
                f.valid_from,
                f.valid_to,
                f.ended_by,
                f.superseded_by,
                f.source,
            )
            versions[i] = _Version(v.position, fact, v.dated, False)
            next_id += 1
    return versions


def _check_history(versions: list[_Version], store: TripletStore, problems: _Problems) -> None:
    """A history that contradicts itself: a link to no fact of the file, a superseded version still
    valid after its successor began (or ended before it), successors that lead back to where they
    started, two current versions of a functional fact."""
    by_id = {v.fact.id: v for v in versions if v.has_id}
    for v in versions:
        fact = v.fact
        if fact.superseded_by is None:
            continue
        successor = by_id.get(fact.superseded_by)
        if successor is None or successor is v:
            problems.add(v.position, f"superseded_by {fact.superseded_by} points at no other fact of the file")
            continue
        began = successor.fact.valid_from
        if not ended_when_succeeded(fact.valid_from, fact.valid_to, began):
            expected = max(began, fact.valid_from)
            when = "still valid until" if fact.valid_to > expected else "ended at"
            order = "after" if fact.valid_to > expected else "before"
            problems.add(
                v.position,
                f"{when} {_date(fact.valid_to)}, {order} its successor {successor.position} began at {_date(began)}:"
                " a superseded fact ends when its successor begins",
            )
    successors = {v.fact.id: v.fact.superseded_by for v in versions if v.has_id and v.fact.superseded_by is not None}
    for cycle in superseding_cycles(successors):
        chain = " -> ".join(by_id[id_].position for id_ in [*cycle, cycle[0]])
        problems.add(by_id[cycle[0]].position, f"its successors lead back to it ({chain}): no history goes round")
    functional = {spec.name: spec.functional for spec in store.config.relations if spec.functional}
    holders: dict[tuple, _Version] = {}
    for v in versions:
        fact = v.fact
        kind = functional.get(fact.relation)
        if not v.dated or not fact.current or kind is None:
            continue
        sides = [("subject", fact.subject, fact.object)] if kind in ("subject", "both") else []
        sides += [("object", fact.object, fact.subject)] if kind in ("object", "both") else []
        for side, held, other in sides:
            first = holders.setdefault((side, normalize_term(held), fact.relation), v)
            theirs = first.fact.object if side == "subject" else first.fact.subject
            if normalize_term(theirs) != normalize_term(other):
                one = "object per subject" if side == "subject" else "subject per object"
                problems.add(
                    v.position,
                    f"current, as {first.position} is: {_said(first.fact)} and {_said(fact)}, but"
                    f" “{fact.relation}” holds one {one} at a time (the older one has ended)",
                )


def _integer(item: dict, name: str) -> int | None:
    value = item.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise TypeError(f"{name} must be an integer, got {_kind(value)}")
    return value


def _time(item: dict, name: str, now: float) -> float | None:
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise TypeError(f"{name} must be a unix time in seconds, got {_kind(value)}")
    if value < 0:
        raise ValueError(f"{name} {value} is before 1970: times are unix seconds")
    if value > now + FUTURE_SLACK_S:
        raise ValueError(f"{name} {value:g} is after now ({_date(now)}): times are unix seconds, not milliseconds")
    return float(value)


def _key(fact: Fact) -> tuple[str, str, str]:
    return normalize_term(fact.subject), normalize_term(fact.relation), normalize_term(fact.object)


def _said(fact: Fact) -> str:
    return f"“{fact.subject} {fact.relation} {fact.object}”"


def _date(t: float) -> str:
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{t:g}"


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "a number")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
