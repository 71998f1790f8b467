"""The memory server: one model behind the controller, one memory namespace per API key.

`POST /v1/chat/completions` speaks the OpenAI chat API (plain and `stream: true`), so any
OpenAI client works unchanged; the controller runs the memory calls server-side and the
client sees only the answer (and, when it asks with `"memlm": {"trace": true}`, the calls).
`/v1/memory/...` lets a user see and edit what the server remembers about them.

Isolation is by construction: the namespace comes from the API key and from nothing a
request can say, so no route can name another user's memory. Generation runs on one model
thread (memory_runtime.scheduler): the turns of concurrent users share batches
(`generation.max_batch_size`, memory_runtime.batching), admitted fairly across API keys; a
streamed reply is sent as it is generated, calls never reach the client. The store, which is
thread-safe, is shared by every request.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory_runtime.backend import Backend
from memory_runtime.batching import OneAtATime, TurnRequest
from memory_runtime.controller import Controller, TurnResult, turn_messages
from memory_runtime.feedback import Exchange, Feedback, FeedbackLog
from memory_runtime.protocol import SYSTEM_PROMPT, visible_reply
from memory_runtime.scheduler import Overloaded, TurnScheduler
from memory_runtime.store import TripletStore
from memory_runtime.yaml_config import read_mapping, validate

# --------------------------------------------------------------------------- configuration


class ServeConfigError(ValueError):
    """A serve config (or an API key source) is invalid; the message names the field."""


class Limits(BaseModel):
    """What one request may ask for: bounds that keep one client from starving the others."""

    model_config = ConfigDict(extra="forbid")

    max_request_bytes: int = Field(65_536, ge=1024)  # request bodies, larger ones get 413
    max_messages: int = Field(64, ge=1)  # messages in one chat request (history included)
    max_tokens: int = Field(256, ge=1)  # generated tokens per turn; a request's max_tokens is capped to it
    max_calls: int = Field(16, ge=1)  # memory calls per turn (ends runaway call loops)
    max_queue: int = Field(32, ge=1)  # turns waiting for the model; more get 503 "overloaded"


class Generation(BaseModel):
    """How the model runs: sampling used when a request does not set it (greedy, as the model was
    trained to call), where it runs, and how many turns share a batch."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    copy_fields: bool = True  # call names copied from the conversation, relations from the table (field_copy)
    device: str = "auto"  # auto (a CUDA GPU when one is visible), cpu, cuda, cuda:N
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: bfloat16 where it is native
    max_batch_size: int = Field(8, ge=1)  # turns of concurrent users decoded together
    engine: Literal["hf", "vllm"] = "hf"  # vllm: GPU serving at scale (pip install 'memlm[vllm]'; no corrections)


class ServeConfig(BaseModel):
    """configs/serve/default.yaml: who may call the server (API key -> namespace) and the limits."""

    model_config = ConfigDict(extra="forbid")

    api_keys: dict[str, Any] = {}  # values validated by resolve_api_keys, so no error message echoes a key
    api_keys_env: str | None = "MEMLM_API_KEYS"  # env var of "KEY=NAMESPACE" pairs, comma-separated
    api_keys_file: Path | None = None  # YAML/JSON mapping KEY: NAMESPACE (relative to the config file)
    model_name: str | None = None  # the `model` reported to clients (default: the --model value)
    memory_config: Path | None = None  # relation table / fuzzy settings (relative to the config file)
    torch_threads: int | None = Field(None, ge=1)  # CPU threads of the model (None: torch's default)
    feedback_dir: Path | None = None  # POST /v1/feedback log; its trajectories.jsonl is `memlm train` data
    limits: Limits = Limits()
    generation: Generation = Generation()

    @classmethod
    def load(cls, path: str | Path) -> "ServeConfig":
        """Read and validate a YAML config; relative paths in it are relative to the file."""
        path = Path(path)
        data = read_mapping(path, "serve config", ServeConfigError)
        config = validate(cls, data, "serve config", str(path), ServeConfigError)
        for name in ("api_keys_file", "memory_config", "feedback_dir"):
            value = getattr(config, name)
            if value is not None and not value.is_absolute():
                setattr(config, name, path.parent / value)
        return config

    def resolve_api_keys(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """All API keys -> namespaces, from `api_keys`, the `api_keys_env` variable and `api_keys_file`.

        Keys never appear in error messages: a config error may well end up in a log.
        """
        environ = os.environ if environ is None else environ
        sources: list[tuple[str, dict]] = [("api_keys", self.api_keys)]
        if self.api_keys_env and environ.get(self.api_keys_env, "").strip():
            sources.append((f"api_keys_env ({self.api_keys_env})", _parse_key_pairs(environ[self.api_keys_env],
                                                                                   self.api_keys_env)))
        if self.api_keys_file is not None:
            what = f"api_keys_file ({self.api_keys_file})"
            sources.append((what, read_mapping(self.api_keys_file, "api_keys_file (KEY: NAMESPACE)", ServeConfigError)))
        keys: dict[str, str] = {}
        for what, mapping in sources:
            for i, (key, namespace) in enumerate(mapping.items(), 1):
                if not isinstance(key, str) or len(key) < 8 or key != key.strip():
                    raise ServeConfigError(f"{what}: key #{i} must be a string of 8 or more characters, no edge spaces")
                if not isinstance(namespace, str) or not namespace.strip():
                    raise ServeConfigError(f"{what}: key #{i} must map to a non-empty namespace string")
                if keys.get(key, namespace) != namespace:
                    raise ServeConfigError(f"{what}: key #{i} is already mapped to namespace {keys[key]!r}")
                keys[key] = namespace
        if not keys:
            raise ServeConfigError("no API keys: set api_keys, the api_keys_env variable or api_keys_file")
        return keys


def _parse_key_pairs(text: str, variable: str) -> dict[str, str]:
    pairs = {}
    for i, item in enumerate(filter(None, (p.strip() for p in text.split(","))), 1):
        key, sep, namespace = item.partition("=")
        if not sep:
            raise ServeConfigError(f"api_keys_env ({variable}): item #{i} is not KEY=NAMESPACE")
        pairs[key.strip()] = namespace.strip()
    return pairs


# --------------------------------------------------------------------------- requests


class MemlmOptions(BaseModel):
    """The `memlm` field of a chat request (the openai client sends it through extra_body)."""

    model_config = ConfigDict(extra="forbid")

    trace: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """The OpenAI chat request fields memlm uses; other OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None  # any name is accepted; responses report the served model
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    n: int = 1
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: list[Any] | None = None
    memlm: MemlmOptions = MemlmOptions()


class APIError(Exception):
    """An error answered in OpenAI's JSON shape: {"error": {message, type, param, code}}."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        body = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse({"error": body}, status_code=self.status, headers=headers)


def _text_of(message: ChatMessage, index: int) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    parts = []
    for part in message.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise APIError(400, "only text content parts are supported", param=f"messages.{index}.content")
        parts.append(part["text"])
    return "".join(parts)


def split_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """(last user text, earlier user/assistant turns). System messages are dropped: the model
    was trained with memlm's own system prompt, which the controller always sends."""
    roles = [m.role for m in messages]
    for i, role in enumerate(roles):
        if role in ("tool", "function"):
            raise APIError(400, "tool messages are not supported", param=f"messages.{i}.role")
    if roles[-1] != "user":
        raise APIError(400, "the last message must be the user's", param=f"messages.{len(roles) - 1}.role")
    history = [{"role": m.role, "content": _text_of(m, i)} for i, m in enumerate(messages[:-1])
               if m.role in ("user", "assistant")]
    return _text_of(messages[-1], len(messages) - 1), history


# --------------------------------------------------------------------------- metrics


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


class Metrics:
    """Request counts and latencies per route, and turn timings: aggregates only, nothing per user."""

    def __init__(self, window: int = 2048) -> None:
        self._lock = threading.Lock()
        self._window = window
        self.started = time.time()
        self._routes: dict[str, dict[str, Any]] = {}
        self._turns = {"count": 0, "generated_tokens": 0, "calls": 0, "wall_seconds": 0.0, "model_seconds": 0.0,
                       "store_seconds": 0.0}
        self._overhead: deque[float] = deque(maxlen=window)

    def record_request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            stats = self._routes.setdefault(route, {"count": 0, "status": {}, "latency": deque(maxlen=self._window)})
            stats["count"] += 1
            stats["status"][str(status)] = stats["status"].get(str(status), 0) + 1
            stats["latency"].append(seconds)

    def record_turn(self, turn: TurnResult) -> None:
        with self._lock:
            t = self._turns
            t["count"] += 1
            t["generated_tokens"] += turn.generated_tokens
            t["calls"] += len(turn.calls)
            t["wall_seconds"] += turn.wall_seconds
            t["model_seconds"] += turn.model_seconds
            t["store_seconds"] += turn.store_seconds
            if turn.wall_seconds > 0:
                self._overhead.append(turn.overhead_seconds / turn.wall_seconds)

    def snapshot(self, queued: int) -> dict[str, Any]:
        with self._lock:
            routes = {}
            for route, stats in sorted(self._routes.items()):
                latency = list(stats["latency"])
                routes[route] = {
                    "count": stats["count"],
                    "status": dict(stats["status"]),
                    "p50_ms": round(percentile(latency, 50) * 1000, 3),
                    "p99_ms": round(percentile(latency, 99) * 1000, 3),
                    "mean_ms": round(sum(latency) / len(latency) * 1000, 3),
                }
            turns = dict(self._turns)
            overhead = list(self._overhead)
        turns["overhead_fraction"] = round(sum(overhead) / len(overhead), 4) if overhead else None
        return {"uptime_s": round(time.time() - self.started, 3), "queued_turns": queued, "requests": routes,
                "turns": turns}


# --------------------------------------------------------------------------- ASGI middleware


class _Instrumented:
    """Outermost middleware: refuses bodies over the limit (413) and records every request.

    The body is read here, up to the limit, before any route sees it: a client that lies in
    (or omits) Content-Length cannot make the server buffer more.
    """

    def __init__(self, app: Any, *, max_bytes: int, metrics: Metrics, routes: set[str]) -> None:
        self.app, self.max_bytes, self.metrics, self.routes = app, max_bytes, metrics, routes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), 500

        async def send_recording(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            body = await self._read_body(scope, receive)
            if body is None:
                await _send_json(send_recording, APIError(
                    413, f"request body is larger than {self.max_bytes} bytes", code="request_too_large"))
                return
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send_recording)
        finally:
            route = scope["path"] if scope["path"] in self.routes else "other"
            self.metrics.record_request(route, status, time.perf_counter() - start)

    async def _read_body(self, scope: dict, receive: Callable) -> bytes | None:
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return None
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # disconnected: nothing to serve
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return None
            more = message.get("more_body", False)
        return b"".join(chunks)


async def _send_json(send: Callable, error: APIError) -> None:
    response = error.response()
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})


# --------------------------------------------------------------------------- the app


class BackendFactory(Protocol):
    def __call__(self, *, temperature: float, top_p: float, seed: int | None) -> Backend:
        """A fresh backend for one turn (the server calls it on the generation thread)."""


def hf_backend_factory(model: Any, tokenizer: Any, *, copy_fields: bool = True,
                       relations: Sequence[str] | None = None) -> BackendFactory:
    """Backends over one loaded model: each turn gets its own HFBackend (its own KV cache)."""
    from memory_runtime.hf_backend import HFBackend

    def make(*, temperature: float, top_p: float, seed: int | None) -> Backend:
        return HFBackend(model, tokenizer, temperature=temperature, top_p=top_p, seed=seed, copy_fields=copy_fields,
                         relations=relations)

    return make


class KeyRing:
    """API key -> namespace lookup whose timing does not depend on the key asked or matched:
    every stored key is compared (hmac.compare_digest of SHA-256 digests), no early exit."""

    def __init__(self, keys: dict[str, str]) -> None:
        self._entries = [(hashlib.sha256(k.encode()).digest(), ns) for k, ns in keys.items()]

    def namespace(self, key: str | None) -> str | None:
        digest = hashlib.sha256((key or "").encode()).digest()
        found = None
        for stored, namespace in self._entries:
            if hmac.compare_digest(stored, digest) and key:
                found = namespace
        return found


class FactQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str | None = None
    relation: str | None = None
    object: str | None = None


class ForgetQuery(FactQuery):
    purge: bool = False  # erase every version for good instead of ending the current ones


class ImportedFact(BaseModel):
    model_config = ConfigDict(extra="ignore")  # an export's facts carry ids and intervals: ignored

    subject: str
    relation: str
    object: str


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Literal["good", "bad"] | None = None
    correction: str | None = Field(None, min_length=1, max_length=2000)  # "No, Dorothea works for BMW now."

    @model_validator(mode="after")
    def _something(self) -> "FeedbackRequest":
        if self.rating is None and not self.correction:
            raise ValueError("give a rating (good / bad) and/or a correction")
        return self


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[ImportedFact]


def create_app(
    config: ServeConfig,
    store: TripletStore,
    backend_factory: BackendFactory | None,
    *,
    model_name: str,
    api_keys: dict[str, str] | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    decoder: Any = None,
) -> FastAPI:
    """The server over a store and a decoder of turns (memory_runtime.batching.BatchDecoder; by
    default turns run one at a time over `backend_factory`, which tests give scripted backends),
    prompting the model with the system message it was trained with. Corrections
    (POST /v1/feedback) decode alone over `backend_factory`.

    `api_keys` defaults to config.resolve_api_keys() (config, environment variable, file).
    """
    keyring = KeyRing(config.resolve_api_keys() if api_keys is None else api_keys)
    feedback, last_turns = Feedback(store, FeedbackLog(config.feedback_dir)), {}  # last_turns: namespace -> Exchange
    limits, metrics = config.limits, Metrics()
    if decoder is None:
        decoder = OneAtATime(lambda r: backend_factory(temperature=r.temperature, top_p=r.top_p, seed=r.seed))
    scheduler = TurnScheduler(decoder, limits.max_queue)
    bearer = HTTPBearer(auto_error=False)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        scheduler.close()

    app = FastAPI(title="memlm", summary="A language model with a read-write triplet memory.", lifespan=lifespan)

    async def user_namespace(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        namespace = keyring.namespace(credentials.credentials if credentials else None)
        if namespace is None:
            message = "missing API key (send Authorization: Bearer KEY)" if credentials is None else "invalid API key"
            raise APIError(401, message, code="invalid_api_key")
        return namespace

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
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": int(metrics.started),
                                           "owned_by": "memlm"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest, namespace: str = Depends(user_namespace)) -> Any:
        """One user turn: the model answers, its memory calls run against the caller's namespace."""
        if request.n != 1:
            raise APIError(400, "only n=1 is supported", param="n")
        if request.tools:
            raise APIError(400, "tools are not supported: memlm's tool is its memory", param="tools")
        if len(request.messages) > limits.max_messages:
            raise APIError(400, f"at most {limits.max_messages} messages per request", param="messages")
        user_text, history = split_messages(request.messages)
        asked = request.max_completion_tokens or request.max_tokens or limits.max_tokens
        temperature = config.generation.temperature if request.temperature is None else request.temperature
        top_p = config.generation.top_p if request.top_p is None else request.top_p

        visible: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        shown = [""]

        def on_text(text: str) -> None:  # on the model thread: hand the visible reply to the stream
            reply = visible_reply(text)
            if len(reply) > len(shown[0]):
                shown[0] = reply
                loop.call_soon_threadsafe(visible.put_nowait, reply)

        turn = TurnRequest(turn_messages(user_text, history, system_prompt), store, namespace=namespace,
                           max_new_tokens=min(asked, limits.max_tokens), max_calls=limits.max_calls,
                           temperature=temperature, top_p=top_p, seed=request.seed,
                           on_text=on_text if request.stream else None)
        try:
            future = scheduler.submit(turn, owner=namespace)
        except Overloaded:
            raise APIError(503, "the server is overloaded; retry later", type="server_error",
                           code="overloaded") from None
        except ValueError as err:
            raise APIError(400, str(err)) from None
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": model_name,
            "system_fingerprint": None,
        }

        def finished(result: TurnResult) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
            metrics.record_turn(result)
            last_turns[namespace] = Exchange(user_text, result)  # what POST /v1/feedback is about
            repeated = feedback.repeated_wrong(namespace, user_text, result.reply)
            usage = {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.generated_tokens,
                     "total_tokens": result.prompt_tokens + result.generated_tokens}
            trace = _trace(result, namespace) if request.memlm.trace else None
            if trace is not None:
                trace["repeated_wrong"] = repeated  # the same wrong answer again: the model should ask for help
            return ("stop" if result.status == "ok" else "length"), usage, trace

        if request.stream:
            future.add_done_callback(lambda _: visible.put_nowait(None))
            include_usage = bool((request.stream_options or {}).get("include_usage"))

            async def events() -> AsyncIterator[str]:
                base = {**completion, "object": "chat.completion.chunk"}
                yield _chunk(base, {"role": "assistant", "content": ""})
                sent = ""
                while (reply := await visible.get()) is not None:
                    if reply.startswith(sent) and len(reply) > len(sent):
                        yield _chunk(base, {"content": reply[len(sent):]})
                        sent = reply
                try:
                    result = await future
                except Exception as err:  # the stream has started: the error goes in it
                    yield f"data: {json.dumps({'error': {'message': f'internal error: {type(err).__name__}', 'type': 'server_error'}})}\n\n"
                    return
                finish, usage, trace = finished(result)
                if result.reply.startswith(sent) and len(result.reply) > len(sent):
                    yield _chunk(base, {"content": result.reply[len(sent):]})
                yield _chunk(base, {}, finish, **({"memlm": trace} if trace is not None else {}))
                if include_usage:
                    yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        result = await future
        finish, usage, trace = finished(result)
        choice = {"index": 0, "message": {"role": "assistant", "content": result.reply, "refusal": None},
                  "logprobs": None, "finish_reason": finish}
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
    def list_facts(namespace: str = Depends(user_namespace), limit: int = Query(1000, ge=1, le=100_000),
                   offset: int = Query(0, ge=0)) -> dict[str, Any]:
        """The caller's current facts, oldest first."""
        facts = store.facts(namespace)
        return {"object": "list", "total": len(facts), "data": [asdict(f) for f in facts[offset:offset + limit]]}

    @app.get("/v1/memory/search")
    def search_facts(query: Annotated[FactQuery, Query()], namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Ask the memory as the model's MEM_READ does: exact first, then fuzzy per field."""
        result = _guarded(lambda: store.query(query.subject, query.relation, query.object, namespace=namespace))
        return {"object": "list", "data": [asdict(f) for f in result.facts],
                "fuzzy": [asdict(m) for m in result.fuzzy.values()]}

    @app.get("/v1/memory/history")
    def fact_history(query: Annotated[FactQuery, Query()], namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Every version of the matching facts (exact match), superseded and forgotten ones too."""
        facts = _guarded(lambda: store.history(query.subject, query.relation, query.object, namespace=namespace))
        return {"object": "list", "data": [asdict(f) for f in facts]}

    @app.delete("/v1/memory/facts")
    def forget_facts(query: Annotated[ForgetQuery, Query()],
                     namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """End the facts that match exactly (they stay in history); purge=true erases every version."""
        n = _guarded(lambda: store.forget(query.subject, query.relation, query.object, namespace=namespace,
                                          purge=query.purge))
        return {"forgotten": n, "purged": query.purge}

    @app.get("/v1/memory/export")
    def export_memory(namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """The caller's whole memory: current facts (importable as is) and every version."""
        return {"namespace": namespace, "exported_at": time.time(),
                "facts": [asdict(f) for f in store.facts(namespace)],
                "history": [asdict(f) for f in store.history(namespace=namespace)]}

    @app.post("/v1/memory/import")
    def import_memory(request: ImportRequest, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Write facts in one transaction (all or nothing), timestamped now; an export's `facts` fit as is."""
        results = _guarded(lambda: store.write_many([(f.subject, f.relation, f.object) for f in request.facts],
                                                    namespace=namespace))
        return {"stored": sum(r.status == "stored" for r in results),
                "duplicate": sum(r.status == "duplicate" for r in results),
                "superseded": sum(len(r.superseded) for r in results)}

    @app.post("/v1/feedback")
    async def post_feedback(request: FeedbackRequest, namespace: str = Depends(user_namespace)) -> dict[str, Any]:
        """Feedback on the caller's last reply: a rating (good / bad) and/or a correction in words,
        which the model turns into memory writes (superseding the wrong fact, kept in history)."""
        last = last_turns.get(namespace)
        out: dict[str, Any] = {"rating": request.rating, "repeated_wrong": False, "record": None}
        if request.rating is not None:
            if last is None:
                raise APIError(400, "no reply to rate yet: rate after a chat completion", param="rating")
            event = feedback.rate(namespace, last, good=request.rating == "good")
            out.update(repeated_wrong=bool(event.get("repeated_wrong")), record=event.get("record"))
        if request.correction:
            if backend_factory is None:
                raise APIError(501, "corrections need generation.engine=hf", param="correction")

            def correct() -> Any:
                backend = backend_factory(temperature=0.0, top_p=1.0, seed=None)
                controller = Controller(backend, store, namespace=namespace, system_prompt=system_prompt,
                                        max_calls=limits.max_calls, max_new_tokens=limits.max_tokens)
                return feedback.correct(controller, request.correction, last)

            fix = await scheduler.call(correct)
            out.update(writes=fix.writes, superseded=fix.superseded, ended=fix.ended,
                       record=fix.record.id if fix.record else out["record"])
        return out

    app.add_middleware(_Instrumented, max_bytes=limits.max_request_bytes, metrics=metrics,
                       routes={route.path for route in app.routes})
    return app


def _trace(result: TurnResult, namespace: str) -> dict[str, Any]:
    data = result.to_dict()
    return {
        "namespace": namespace,
        "status": result.status,
        "calls": data["calls"],
        "text": result.text,
        "generated_tokens": result.generated_tokens,
        "timings": {k: data[k] for k in ("wall_seconds", "model_seconds", "store_seconds", "overhead_seconds")},
    }


def _chunk(base: dict, delta: dict, finish_reason: str | None = None, **extra: Any) -> str:
    """One server-sent event of OpenAI's chunk stream."""
    choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"


# --------------------------------------------------------------------------- running it


@contextmanager
def background_server(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Run `app` under uvicorn on a thread of this process; yields its base URL (port 0 = a free one)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="memlm-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def serve(model: str, db: str | Path, config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000,
          log_level: str = "info", on_ready: Callable[[str], None] | None = None) -> None:
    """Load the model and serve it until interrupted. Config, keys and DB are checked before
    the model loads, so a mistake fails in a second, not after the load."""
    import torch
    import uvicorn

    from memory_runtime.batching import BatchDecoder
    from memory_runtime.hardware import resolve_device
    from memory_runtime.models import load_model, trained_system_prompt
    from memory_runtime.store import MemoryConfig

    keys = config.resolve_api_keys()
    memory = MemoryConfig.load(config.memory_config)
    with TripletStore(db, memory) as store:
        if config.torch_threads is not None:
            torch.set_num_threads(config.torch_threads)
        generation = config.generation
        if generation.engine == "vllm":
            from memory_runtime.vllm_backend import load_vllm_decoder

            decoder, backend_factory = load_vllm_decoder(model, max_batch_size=generation.max_batch_size,
                                                         copy_fields=generation.copy_fields,
                                                         dtype=generation.dtype), None
        else:
            loaded, tokenizer = load_model(model, merge=True, device=resolve_device(generation.device),
                                           dtype=generation.dtype)
            decoder = BatchDecoder(loaded, tokenizer, max_batch_size=generation.max_batch_size,
                                   copy_fields=generation.copy_fields)
            backend_factory = hf_backend_factory(loaded, tokenizer, copy_fields=generation.copy_fields,
                                                 relations=memory.relation_names)
        app = create_app(config, store, backend_factory, model_name=config.model_name or model, decoder=decoder,
                         api_keys=keys, system_prompt=trained_system_prompt(model))
        if on_ready is not None:
            on_ready(f"serving {model} on http://{host}:{port} ({len(keys)} API keys, memory {db})")
        uvicorn.run(app, host=host, port=port, log_level=log_level)
