"""/v1/memory/...: a caller sees and edits the facts of the namespace its key acts in, and never
anyone else's: list, search, history, write or correct, forget, restore, export and import."""

from __future__ import annotations

import gc
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, BinaryIO, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memory_runtime.memory.history import RestoreRefused
from memory_runtime.memory.store import MAX_ROW_NUMBER, TripletStore
from memory_runtime.memory.transfer import (
    BadImport,
    Imported,
    export_chunks,
    import_file,
    import_in_a_process,
    in_a_process_of_its_own,
)
from memory_runtime.serving.feedback import FactGone
from memory_runtime.serving.keys import Caller
from memory_runtime.serving.routes.state import Namespace, State, key_caller
from memory_runtime.serving.schemas import (
    APIError,
    ErrorResponse,
    FactQuery,
    ForgetQuery,
    RestoreRequest,
    SearchQuery,
    WriteFactRequest,
)

router = APIRouter()
DEFAULT_GEN2_THRESHOLD = gc.get_threshold()[2]

IMPORT_PATH = "/v1/memory/import"  # reads its own body (read_import_body), once the key is checked


def _guarded(fn: Callable[[], Any]) -> Any:
    """`fn()`, what the store refuses (TypeError, ValueError) answered 400 with its message."""
    try:
        return fn()
    except (TypeError, ValueError) as err:
        raise APIError(400, str(err)) from None


@router.get("/v1/memory/facts")
def list_facts(
    server: State,
    namespace: Namespace,
    limit: int = Query(1000, ge=1, le=100_000),
    offset: int = Query(0, ge=0, le=MAX_ROW_NUMBER),
    relation: str | None = None,
    as_of: float | None = Query(None, allow_inf_nan=False),
    order: Literal["oldest", "newest"] = "oldest",
) -> dict[str, Any]:
    """The caller's current facts (or those valid at `as_of`, a unix time; of one `relation`),
    oldest or newest first, one page (`limit`, `offset`) read from the store."""
    store = server.store

    def page() -> dict[str, Any]:
        facts = store.facts(
            namespace, as_of=as_of, relation=relation, limit=limit, offset=offset, newest_first=order == "newest"
        )
        total = store.count(namespace, as_of=as_of, relation=relation)
        return {"object": "list", "namespace": namespace, "total": total, "data": [asdict(f) for f in facts]}

    return _guarded(page)


@router.post(
    "/v1/memory/facts",
    responses={409: {"model": ErrorResponse, "description": "The fact `replaces` names is no longer current"}},
)
def write_fact(request: WriteFactRequest, server: State, namespace: Namespace) -> dict[str, Any]:
    """Add a fact, or correct one (`replaces`: ended, kept in history) through the same path as
    the model's corrections (Feedback.correct_fact), so the store's checks apply alike."""
    wrong = request.replaces
    try:
        fix = _guarded(
            lambda: server.feedback.correct_fact(
                namespace,
                (request.subject, request.relation, request.object),
                (wrong.subject, wrong.relation, wrong.object) if wrong else None,
            )
        )
    except FactGone as err:
        raise APIError(409, str(err), param="replaces", code="fact_gone") from None
    return {"written": fix.writes, "status": fix.status, "superseded": fix.superseded, "ended": fix.ended}


@router.get("/v1/memory/namespaces")
def list_namespaces(
    server: State,
    who: Caller = Depends(key_caller),
    limit: int = Query(1000, ge=1, le=10_000),
    after: str | None = Query(None, max_length=200),
) -> dict[str, Any]:
    """The namespaces the caller's key may act in (Memlm-Namespace), its own first; a key of
    "*" sees every namespace the memory holds, a page of `limit` at a time in order (`after`: the
    last of the page before; `next`: what to pass for the next page, null at the end).
    `namespace`: the one this request acts in."""
    named = sorted(ns for ns in who.key.others if ns != "*")
    held = _guarded(lambda: server.store.namespaces(after=after, limit=limit + 1)) if who.key.any else []
    more = len(held) > limit
    held = held[:limit]
    first = [who.key.namespace] if after is None else []
    data = list(dict.fromkeys([*first, *sorted({*(named if after is None else []), *held})]))
    return {
        "object": "list",
        "namespace": who.namespace,
        "any": who.key.any,
        "data": data,
        "next": held[-1] if more else None,
    }


@router.get("/v1/memory/relations")
def list_relations(server: State, namespace: Namespace) -> dict[str, Any]:
    """The relations of the caller's current facts, most used first, with their counts."""
    relations = server.store.relations(namespace)
    return {"object": "list", "data": [{"relation": r, "facts": n} for r, n in relations]}


@router.get("/v1/memory/search")
def search_facts(query: Annotated[SearchQuery, Query()], server: State, namespace: Namespace) -> dict[str, Any]:
    """Ask the memory as the model's MEM_READ does: exact first, then fuzzy per field (at `as_of`, a unix time)."""
    result = _guarded(
        lambda: server.store.query(query.subject, query.relation, query.object, namespace=namespace, as_of=query.as_of)
    )
    return {
        "object": "list",
        "data": [asdict(f) for f in result.facts],
        "fuzzy": [asdict(m) for m in result.fuzzy.values()],
    }


@router.post("/v1/memory/index")
def warm_index(server: State, namespace: Namespace) -> dict[str, Any]:
    """Build the caller's fuzzy indexes now, if they are not resident (the memory page asks when it
    opens): the first search with a typo then takes milliseconds, not a build."""
    return {"namespace": namespace, "seconds": round(server.store.warm_fuzzy(namespace), 3)}


@router.get("/v1/memory/history")
def fact_history(query: Annotated[FactQuery, Query()], server: State, namespace: Namespace) -> dict[str, Any]:
    """Every version of the matching facts (exact match), superseded and forgotten ones too."""
    facts = _guarded(lambda: server.store.history(query.subject, query.relation, query.object, namespace=namespace))
    return {"object": "list", "data": [asdict(f) for f in facts]}


@router.delete("/v1/memory/facts")
def forget_facts(query: Annotated[ForgetQuery, Query()], server: State, namespace: Namespace) -> dict[str, Any]:
    """End the facts that match exactly (they stay in history); purge=true erases every version."""
    n = _guarded(
        lambda: server.store.forget(query.subject, query.relation, query.object, namespace=namespace, purge=query.purge)
    )
    return {"forgotten": n, "purged": query.purge}


@router.post(
    "/v1/memory/facts/restore",
    responses={
        404: {"model": ErrorResponse, "description": "No fact of the caller's has that id (purged, or never there)"},
        409: {"model": ErrorResponse, "description": "The store will not restore it, and says why"},
    },
)
def restore_fact(request: RestoreRequest, server: State, namespace: Namespace) -> dict[str, Any]:
    """Undo a forget: the forgotten fact `id` current again as a new version (source "restore"),
    the forget kept in history; 404 for a fact purged (or not the caller's), 409 with the
    reason where the store refuses (not forgotten, current again, or it would end a newer fact)."""
    try:
        fact = server.store.restore(request.id, namespace=namespace)
    except RestoreRefused as err:
        status, code = (404, "fact_not_found") if err.missing else (409, "restore_refused")
        raise APIError(status, str(err), param="id", code=code) from None
    return {"restored": asdict(fact), "from": request.id}


@router.get("/v1/memory/export")
def export_memory(server: State, namespace: Namespace) -> StreamingResponse:
    """The caller's whole memory: current facts and every version (memory_runtime.memory.transfer),
    streamed page by page (a memory of any size, never held whole)."""
    return StreamingResponse(export_chunks(server.store, namespace), media_type="application/json")


@router.post(IMPORT_PATH)
async def import_memory(http: Request, server: State, namespace: Namespace) -> dict[str, Any]:
    """The body is the file as it is (an export, or a list of facts), streamed to a temporary file up
    to limits.max_import_bytes (413 beyond) and read from it fact by fact: all of it checked, then
    stored in one transaction, history and dates included, or nothing (memory_runtime.memory.transfer).
    `message` says what was stored in a sentence; a 400 names the place in the file of each problem."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:
        size = await read_import_body(http, server.limits.max_import_bytes, body)
        try:
            if size >= PROCESS_IMPORT_BYTES and in_a_process_of_its_own(server.store):
                done = await run_in_threadpool(_import_by_a_process, server.store, body, namespace)
            else:
                done = await run_in_threadpool(_import_without_full_collections, server.store, body, namespace)
        except BadImport as err:
            raise APIError(400, str(err), param=err.position, code="invalid_import") from None
    return {**asdict(done), "message": done.message}


SPOOL_BYTES = 4 * 2**20  # an import's body is kept in memory up to this, on disk beyond
# An import this large (~13,000 facts) is read, checked and stored by a process of its own, whose Python
# work then takes no turn of this process's GIL from the other requests (transfer.import_in_a_process);
# smaller ones run on a thread here, where a process's start (~1 s) would cost more than it saves.
PROCESS_IMPORT_BYTES = 2**20


def _import_by_a_process(store: TripletStore, body: BinaryIO, namespace: str) -> Imported:
    with tempfile.NamedTemporaryFile(prefix="memlm-import-", suffix=".json") as named:
        shutil.copyfileobj(body, named)
        named.flush()
        return import_in_a_process(store, named.name, namespace=namespace)


_collector_held = 0  # imports running that hold the garbage collector's full passes back
_collector_lock = threading.Lock()


def _import_without_full_collections(store: TripletStore, body: BinaryIO, namespace: str) -> Imported:
    """import_file with the collector's oldest generation left alone meanwhile: the hundreds of thousands
    of objects an import makes (all freed by their counts, no cycle among them) set off full passes of up
    to 134 ms each, 0.5 s in all for 60,000 facts, during which no other request of the server moved."""
    global _collector_held
    with _collector_lock:
        _collector_held += 1
        if _collector_held == 1:
            threshold = gc.get_threshold()
            gc.set_threshold(threshold[0], threshold[1], 2**31 - 1)
    try:
        return import_file(store, body, namespace=namespace)
    finally:
        with _collector_lock:
            _collector_held -= 1
            if _collector_held == 0:
                threshold = gc.get_threshold()
                gc.set_threshold(threshold[0], threshold[1], DEFAULT_GEN2_THRESHOLD)


async def read_import_body(http: Request, limit: int, into: BinaryIO) -> int:
    """An import's file, written to `into` in the chunks it arrives in, after the caller's key was
    checked (the middleware leaves this body alone), and its size: 413 with what to do instead beyond
    `limit` bytes, declared or sent, before more is read."""
    too_large = APIError(
        413,
        f"the file is larger than {limit / 2**20:.4g} MB ({limit:,} bytes), this server's limit for an import"
        " (limits.max_import_bytes): import it with `memlm memory import FILE --db ...` where the memory is,"
        " or raise the limit",
        code="request_too_large",
    )
    declared = http.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    size = 0
    async for chunk in http.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        into.write(chunk)
    into.seek(0)
    return size
