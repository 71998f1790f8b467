"""The routes: OpenAI's chat completions over the controller, the caller's memory, feedback, health."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal, Protocol

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory_runtime.generation.backend import Backend
from memory_runtime.generation.batching import OneAtATime, TurnRequest
from memory_runtime.generation.controller import Controller, TurnResult
from memory_runtime.memory.store import RestoreRefused, TripletStore
from memory_runtime.memory.transfer import BadImport, export_chunks, import_file
from memory_runtime.protocol import SYSTEM_PROMPT, streamed_reply
from memory_runtime.serving.config import ServeConfig
from memory_runtime.serving.feedback import Exchange, FactGone, Feedback, FeedbackLog
from memory_runtime.serving.keys import Caller, FailedKeys, KeyRing, caller_dependency, namespace_dependency
from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.middleware import AllowedHosts, HostCheck, Instrumented
from memory_runtime.serving.scheduler import Overloaded, OwnerBusy, TurnScheduler
from memory_runtime.serving.schemas import (
    APIError,
    ChatRequest,
    FactQuery,
    FeedbackRequest,
    ForgetQuery,
    RestoreRequest,
    SearchQuery,
    WriteFactRequest,
    turn_messages_of,
)
from memory_runtime.serving.sse import chat_chunks
from memory_runtime.serving.ui import mount_memory_page


class BackendFactory(Protocol):
    def __call__(self, *, temperature: float, top_p: float, seed: int | None) -> Backend:
        """A fresh backend for one turn (the server calls it on the generation thread)."""


def hf_backend_factory(
    model: Any, tokenizer: Any, *, copy_fields: bool = True, relations: Sequence[str] | None = None
) -> BackendFactory:
    """Backends over one loaded model: each turn gets its own HFBackend (its own KV cache)."""
    from memory_runtime.generation.hf_backend import HFBackend

    def make(*, temperature: float, top_p: float, seed: int | None) -> Backend:
        return HFBackend(
            model,
            tokenizer,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            copy_fields=copy_fields,
            relations=relations,
        )

    return make


def create_app(
    config: ServeConfig,
    store: TripletStore,
    backend_factory: BackendFactory | None,
    *,
    model_name: str,
    api_keys: dict[str, str | Sequence[str]] | None = None,
    host: str = "127.0.0.1",
    system_prompt: str | None = SYSTEM_PROMPT,
    decoder: Any = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The server over a store and a decoder of turns (memory_runtime.generation.batching.BatchDecoder; by
    default turns run one at a time over `backend_factory`, which tests give scripted backends),
    prompting the model with the system message it was trained with. Corrections
    (POST /v1/feedback) decode alone over `backend_factory`.

    `api_keys` defaults to config.resolve_api_keys() (config, environment variable, file). `host` is
    the address the server listens on: a request's Host must be one of its names or of
    config.allowed_hosts (middleware.AllowedHosts), and a wrong key counts against the client's
    address (keys.FailedKeys, app.state.failed_keys). With neither a decoder nor `backend_factory`
    the server has no model (`memlm ui`): the memory routes and the memory page work, chat answers
    501. `on_shutdown` runs when the server stops.
    """
    has_model = decoder is not None or backend_factory is not None
    keyring = KeyRing(config.resolve_key_access() if api_keys is None else api_keys)
    feedback, last_turns = Feedback(store, FeedbackLog(config.feedback_dir)), {}  # last_turns: namespace -> Exchange
    limits, generation, metrics = config.limits, config.generation, Metrics()
    if decoder is None:
        decoder = OneAtATime(lambda r: backend_factory(temperature=r.temperature, top_p=r.top_p, seed=r.seed))
    scheduler = TurnScheduler(decoder, limits.max_queue, limits.max_turns_per_key)
    failed_keys = FailedKeys(limits.max_failed_keys, limits.failed_keys_window_s)
    user_namespace = namespace_dependency(keyring, failed_keys)
    key_caller = caller_dependency(keyring, failed_keys)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        scheduler.close()
        if on_shutdown is not None:  # before uvicorn re-raises a SIGTERM, which no exit handler outlives
            on_shutdown()

    app = FastAPI(title="memlm", summary="A language model with a read-write triplet memory.", lifespan=lifespan)
    app.state.failed_keys = failed_keys

    @app.exception_handler(APIError)
    async def _api_error(_: Request, err: APIError) -> JSONResponse:
        return err.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0]
        loc = [str(p) for p in first["loc"] if p != "body"]
        param = ".".join(loc) or None
        message = f"{param}: {first['msg']}" if param else first["msg"]
        return APIError(400, message, param=param).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, err: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code)
        return APIError(err.status_code, str(err.detail), code=code).response()

    @app.exception_handler(Exception)
    async def _crash(_: Request, err: Exception) -> JSONResponse:
        return APIError(500, f"internal error: {type(err).__name__}", type="server_error").response()

    def fit_context(turn: TurnRequest) -> None:
        """Refuse a prompt longer than the server takes or the model reads, before any decoding; cap
        the turn's tokens to what is left of the context."""
        n = decoder.prompt_tokens(turn)
        if n is None:
            return
        context = decoder.context or n + turn.max_new_tokens
        if n > limits.max_prompt_tokens or n >= context:
            limit = min(limits.max_prompt_tokens, context - 1)
            raise APIError(
                400,
                f"the prompt is {n} tokens (history included); this server takes at most {limit}",
                param="messages",
                code="context_length_exceeded",
            )
        turn.max_new_tokens = min(turn.max_new_tokens, context - n)

    # ------------------------------------------------------------------ service

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness, no key needed."""
        return {"status": "ok", "model": model_name}

    @app.get("/metrics")
    async def get_metrics() -> dict[str, Any]:
        """Request counts and latency per route, turn timings (no key needed: nothing per user)."""
        return metrics.snapshot(scheduler.queued)

    @app.get("/v1/models")
    async def models(_: str = Depends(user_namespace)) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": model_name, "object": "model", "created": int(metrics.started), "owned_by": "memlm"}],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest, http: Request, namespace: str = Depends(user_namespace)) -> Any:
        """One user turn: the model answers, its memory calls run against the caller's namespace."""
        if not has_model:
            raise APIError(501, "this server has no model (memlm ui): the memory routes only", code="no_model")
        if request.n != 1:
            raise APIError(400, "only n=1 is supported", param="n")
        if request.tools:
            raise APIError(400, "tools are not supported: memlm's tool is its memory", param="tools")
        if len(request.messages) > limits.max_messages:
            raise APIError(400, f"at most {limits.max_messages} messages per request", param="messages")
        messages = turn_messages_of(request.messages, system_prompt)
        user_text = messages[-1]["content"]
        asked = request.max_completion_tokens or request.max_tokens or generation.max_new_tokens
        temperature = generation.temperature if request.temperature is None else request.temperature
        top_p = generation.top_p if request.top_p is None else request.top_p

        visible: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        shown = [""]

        def on_text(text: str) -> None:  # on the model thread: hand the visible reply to the stream
            reply = streamed_reply(text)
            if len(reply) > len(shown[0]):
                shown[0] = reply
                loop.call_soon_threadsafe(visible.put_nowait, reply)

        completion_id = f"chatcmpl-{uuid.uuid4().hex}"  # also the source of the facts the turn stores
        turn = TurnRequest(
            messages,
            store,
            namespace=namespace,
            max_new_tokens=min(asked, generation.max_new_tokens),
            max_calls=generation.max_calls,
            temperature=temperature,
            top_p=top_p,
            seed=request.seed,
            on_text=on_text if request.stream else None,
            source=completion_id,
        )
        fit_context(turn)
        try:
            future = scheduler.submit(turn, owner=namespace)
        except OwnerBusy:
            raise APIError(
                429,
                f"this key has {limits.max_turns_per_key} turns waiting or running; retry when one is done",
                type="rate_limit_error",
                code="too_many_turns",
            ) from None
        except Overloaded:
            raise APIError(
                503, "the server is overloaded; retry later", type="server_error", code="overloaded"
            ) from None
        except ValueError as err:
            raise APIError(400, str(err)) from None
        completion = {
            "id": completion_id,
            "created": int(time.time()),
            "model": model_name,
            "system_fingerprint": None,
        }

        def finished(result: TurnResult) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
            metrics.record_turn(result)
            last_turns[namespace] = Exchange(user_text, result)  # what POST /v1/feedback is about
            repeated = feedback.repeated_wrong(namespace, user_text, result.reply)
            usage = {
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.generated_tokens,
                "total_tokens": result.prompt_tokens + result.generated_tokens,
            }
            trace = _trace(result, namespace) if request.memlm.trace else None
            if trace is not None:
                trace["repeated_wrong"] = repeated  # the same wrong answer again: the model should ask for help
            return ("stop" if result.status == "ok" else "length"), usage, trace

        if request.stream:
            future.add_done_callback(lambda _: visible.put_nowait(None))
            include_usage = bool((request.stream_options or {}).get("include_usage"))

            async def events() -> AsyncIterator[str]:
                chunks = chat_chunks(
                    {**completion, "object": "chat.completion.chunk"},
                    visible,
                    future,
                    finished,
                    include_usage=include_usage,
                )
                try:
                    async for chunk in chunks:
                        yield chunk
                finally:  # the client went away mid-stream: the turn stops at its next token
                    cancel(turn, future, metrics)

            return StreamingResponse(
                events(),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        while not (await asyncio.wait({future}, timeout=DISCONNECT_POLL_SECONDS))[0]:
            if await http.is_disconnected():  # nobody waits for the answer: free the model for others
                cancel(turn, future, metrics)
                raise APIError(499, "the client closed the request", code="client_closed_request")
        result = await future
        finish, usage, trace = finished(result)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": result.reply, "refusal": None},
            "logprobs": None,
            "finish_reason": finish,
        }
        body = {**completion, "object": "chat.completion", "choices": [choice], "usage": usage}
        if trace is not None:
            body["memlm"] = trace
        return body

    # ------------------------------------------------------------------ the caller's memory

    def _guarded(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except (TypeError, ValueError) as err:
            raise APIError(400, str(err)) from None

    @app.get("/v1/memory/facts")
    def list_facts(
        namespace: str = Depends(user_namespace),
        limit: int = Query(1000, ge=1, le=100_000),
        offset: int = Query(0, ge=0),
        relation: str | None = None,
        as_of: float | None = None,
        order: Literal["oldest", "newest"] = "oldest",
    ) -> dict[str, Any]:
        """The caller's current facts (or those valid at `as_of`, a unix time; of one `relation`),
        oldest or newest first, one page (`limit`, `offset`) read from the store."""

        def page() -> dict[str, Any]:
            facts = store.facts(
                namespace, as_of=as_of, relation=relation, limit=limit, offset=offset, newest_first=order == "newest"
            )
            total = store.count(namespace, as_of=as_of, relation=relation)
            return {"object": "list", "namespace": namespace, "total": total, "data": [asdict(f) for f in facts]}

        return _guarded(page)

    @app.post("/v1/memory/facts")
    def write_fact(request: WriteFactRequest, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Add a fact, or correct one (`replaces`: ended, kept in history) through the same path as
        the model's corrections (Feedback.correct_fact), so the store's checks apply alike."""
        wrong = request.replaces
        try:
            fix = _guarded(
                lambda: feedback.correct_fact(
                    namespace,
                    (request.subject, request.relation, request.object),
                    (wrong.subject, wrong.relation, wrong.object) if wrong else None,
                )
            )
        except FactGone as err:
            raise APIError(409, str(err), param="replaces", code="fact_gone") from None
        return {"written": fix.writes, "status": fix.status, "superseded": fix.superseded, "ended": fix.ended}

    @app.get("/v1/memory/namespaces")
    def list_namespaces(who: Caller = Depends(key_caller)) -> dict[str, Any]:
        """The namespaces the caller's key may act in (Memlm-Namespace), its own first; a key of
        "*" sees every namespace the memory holds. `namespace`: the one this request acts in."""
        named = sorted(ns for ns in who.key.others if ns != "*")
        held = store.namespaces() if who.key.any else []
        data = list(dict.fromkeys([who.key.namespace, *sorted({*named, *held})]))
        return {"object": "list", "namespace": who.namespace, "any": who.key.any, "data": data}

    @app.get("/v1/memory/relations")
    def list_relations(namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """The relations of the caller's current facts, most used first, with their counts."""
        return {"object": "list", "data": [{"relation": r, "facts": n} for r, n in store.relations(namespace)]}

    @app.get("/v1/memory/search")
    def search_facts(
        query: Annotated[SearchQuery, Query()], namespace: str = Depends(user_namespace)
    ) -> dict[str, Any]:
        """Ask the memory as the model's MEM_READ does: exact first, then fuzzy per field (at `as_of`, a unix time)."""
        result = _guarded(
            lambda: store.query(query.subject, query.relation, query.object, namespace=namespace, as_of=query.as_of)
        )
        return {
            "object": "list",
            "data": [asdict(f) for f in result.facts],
            "fuzzy": [asdict(m) for m in result.fuzzy.values()],
        }

    @app.post("/v1/memory/index")
    def warm_index(namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Build the caller's fuzzy indexes now, if they are not resident (the memory page asks when it
        opens): the first search with a typo then takes milliseconds, not a build."""
        return {"namespace": namespace, "seconds": round(store.warm_fuzzy(namespace), 3)}

    @app.get("/v1/memory/history")
    def fact_history(query: Annotated[FactQuery, Query()], namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Every version of the matching facts (exact match), superseded and forgotten ones too."""
        facts = _guarded(lambda: store.history(query.subject, query.relation, query.object, namespace=namespace))
        return {"object": "list", "data": [asdict(f) for f in facts]}

    @app.delete("/v1/memory/facts")
    def forget_facts(
        query: Annotated[ForgetQuery, Query()], namespace: str = Depends(user_namespace)
    ) -> dict[str, Any]:
        """End the facts that match exactly (they stay in history); purge=true erases every version."""
        n = _guarded(
            lambda: store.forget(query.subject, query.relation, query.object, namespace=namespace, purge=query.purge)
        )
        return {"forgotten": n, "purged": query.purge}

    @app.post("/v1/memory/facts/restore")
    def restore_fact(request: RestoreRequest, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Undo a forget: the forgotten fact `id` current again as a new version (source "restore"),
        the forget kept in history; 404 for a fact purged (or not the caller's), 409 with the
        reason where the store refuses (not forgotten, current again, or it would end a newer fact)."""
        try:
            fact = store.restore(request.id, namespace=namespace)
        except RestoreRefused as err:
            status, code = (404, "fact_not_found") if err.missing else (409, "restore_refused")
            raise APIError(status, str(err), param="id", code=code) from None
        return {"restored": asdict(fact), "from": request.id}

    @app.get("/v1/memory/export")
    def export_memory(namespace: str = Depends(user_namespace)) -> StreamingResponse:
        """The caller's whole memory: current facts and every version (memory_runtime.memory.transfer),
        streamed page by page (a memory of any size, never held whole)."""
        return StreamingResponse(export_chunks(store, namespace), media_type="application/json")

    @app.post("/v1/memory/import")
    async def import_memory(http: Request, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """The body is the file as it is (an export, or a list of facts), read in chunks up to
        limits.max_import_bytes (413 beyond): all of it checked, then stored in one transaction,
        history and dates included, or nothing (memory_runtime.memory.transfer). `message` says what
        was stored in a sentence; a 400 names the place in the file of each problem."""
        data = await read_import_body(http, limits.max_import_bytes)
        try:
            done = await run_in_threadpool(import_file, store, data, namespace=namespace)
        except BadImport as err:
            raise APIError(400, str(err), param=err.position, code="invalid_import") from None
        return {**asdict(done), "message": done.message}

    @app.post("/v1/feedback")
    async def post_feedback(request: FeedbackRequest, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Feedback on the caller's last reply: a rating (good / bad) and/or a correction in words,
        which the model turns into memory writes (superseding the wrong fact, kept in history)."""
        last = last_turns.get(namespace)
        # kept: whether trajectories reach feedback_dir/pending/ for review (feedback_dir null: not kept)
        out: dict[str, Any] = {
            "rating": request.rating,
            "repeated_wrong": False,
            "record": None,
            "kept": config.feedback_dir is not None,
        }
        if request.rating is not None:
            if last is None:
                raise APIError(400, "no reply to rate yet: rate after a chat completion", param="rating")
            event = feedback.rate(namespace, last, good=request.rating == "good")
            out.update(repeated_wrong=bool(event.get("repeated_wrong")), record=event.get("record"))
        if request.correction:
            if backend_factory is None:
                raise APIError(
                    501,
                    "corrections decode with the model in the server's process: serve with generation.engine=hf "
                    "(auto takes vllm where vLLM is installed)",
                    param="correction",
                )

            def correct() -> Any:
                backend = backend_factory(temperature=0.0, top_p=1.0, seed=None)
                controller = Controller(
                    backend,
                    store,
                    namespace=namespace,
                    system_prompt=system_prompt,
                    max_calls=generation.max_calls,
                    max_new_tokens=generation.max_new_tokens,
                )
                return feedback.correct(controller, request.correction, last)

            fix = await scheduler.call(correct)
            out.update(
                writes=fix.writes,
                superseded=fix.superseded,
                ended=fix.ended,
                record=fix.record.id if fix.record else out["record"],
            )
        return out

    mount_memory_page(app, chat=has_model, model_name=model_name, max_import_bytes=limits.max_import_bytes)
    app.add_middleware(HostCheck, allowed=AllowedHosts.listening_on(host, config.allowed_hosts))
    app.add_middleware(  # outermost: refusals of HostCheck are counted too
        Instrumented,
        max_bytes=limits.max_request_bytes,
        metrics=metrics,
        routes={route.path for route in app.routes},
        own_body=frozenset({"/v1/memory/import"}),  # read by the route, once the key is checked
    )
    return app


async def read_import_body(http: Request, limit: int) -> bytes:
    """An import's file, read in the chunks it arrives in, after the caller's key was checked (the
    middleware leaves this body alone): 413 with what to do instead beyond `limit` bytes, declared
    or sent, before more is buffered."""
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
    chunks, size = [], 0
    async for chunk in http.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


DISCONNECT_POLL_SECONDS = 0.25  # how often a waiting non-streamed request checks that its client is still there


def cancel(turn: TurnRequest, future: Any, metrics: Metrics) -> None:
    """End an unfinished turn whose client is gone: it stops at its next token, or never starts."""
    if not future.done():
        turn.cancel.set()
        future.cancel()
        metrics.record_cancelled()


def _trace(result: TurnResult, namespace: str) -> dict[str, Any]:
    data = result.to_dict()
    return {
        "namespace": namespace,
        "status": result.status,
        "reply": result.reply,  # a stream sent the reply as generated: "Noted." before a write was refused
        "calls": data["calls"],
        "text": result.text,
        "generated_tokens": result.generated_tokens,
        "timings": {k: data[k] for k in ("wall_seconds", "model_seconds", "store_seconds", "overhead_seconds")},
    }
