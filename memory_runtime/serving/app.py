"""The server: create_app builds one ServerState (app.state.server), includes the routes of
serving/routes/, mounts the memory page and wraps it all in the middleware."""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.decoder import Decoder
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.serving.feedback import Feedback, FeedbackLog
from memory_runtime.serving.keys import FailedKeys, KeyRing, caller_dependency
from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.middleware import AllowedHosts, HostCheck, Instrumented
from memory_runtime.serving.routes import completions, feedback, memory, service
from memory_runtime.serving.routes.state import ServerState
from memory_runtime.serving.scheduler import TurnScheduler
from memory_runtime.serving.schemas import APIError, ErrorResponse
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.serving.ui import mount_memory_page

ROUTERS = (service.router, completions.router, memory.router, feedback.router)  # in the order of the docs


def _no_model(request: Any) -> Any:
    raise RuntimeError("this server has no model (memlm ui): only the memory routes answer")


def create_app(
    config: ServeConfig,
    store: TripletStore,
    decoder: Decoder | None,
    *,
    model_name: str,
    api_keys: dict[str, str | Sequence[str]] | None = None,
    host: str = "127.0.0.1",
    system_prompt: str | None = SYSTEM_PROMPT,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The server over a store and a decoder of turns (the runtime's, or `OneAtATime.over` a scripted model in
    the tests and the soak), prompting the model with the system message it was trained with. Corrections
    (POST /v1/feedback) run through the same decoder, queued with the caller's other turns.

    `api_keys` defaults to config.resolve_api_keys() (config, environment variable, file). `host` is
    the address the server listens on: a request's Host must be one of its names or of
    config.allowed_hosts (middleware.AllowedHosts), and a wrong key counts against the client's
    address (keys.FailedKeys, app.state.server.failed_keys): the connection's, or the one a proxy of
    config.forwarded_allow_ips reports. Run it under uvicorn with proxy_headers=False (launch.py
    does), else uvicorn believes X-Forwarded-For from 127.0.0.1 itself. With no decoder
    the server has no model (`memlm ui`): the memory routes and the memory page work, chat answers
    501. `on_shutdown` runs when the server stops.
    """
    has_model = decoder is not None
    keyring = KeyRing(config.resolve_key_access() if api_keys is None else api_keys)
    feedback_ = Feedback(store, FeedbackLog(config.feedback_dir))
    limits, metrics = config.limits, Metrics()
    if decoder is None:  # the routes that decode answer 501 before they reach it
        decoder = OneAtATime(_no_model)
    scheduler = TurnScheduler(decoder, limits.max_queue, limits.max_turns_per_key)
    failed_keys = FailedKeys(limits.max_failed_keys, limits.failed_keys_window_s)
    server = ServerState(
        config=config,
        store=store,
        model_name=model_name,
        system_prompt=system_prompt,
        has_model=has_model,
        decoder=decoder,
        scheduler=scheduler,
        metrics=metrics,
        feedback=feedback_,
        failed_keys=failed_keys,
        caller=caller_dependency(keyring, failed_keys),
        on_shutdown=on_shutdown,
    )
    app = FastAPI(
        title="memlm",
        summary="A language model with a read-write triplet memory.",
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.server = server
    for router in ROUTERS:
        app.include_router(router)
    app.openapi = functools.partial(documented_openapi, app)
    mount_memory_page(app, chat=has_model, model_name=model_name, max_import_bytes=limits.max_import_bytes)
    if config.forwarded_allow_ips:  # the client's address as these proxies report it (launch runs uvicorn without)
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=config.forwarded_allow_ips)
    app.add_middleware(HostCheck, allowed=AllowedHosts.listening_on(host, config.allowed_hosts))
    app.add_middleware(  # outermost: refusals of HostCheck are counted too
        Instrumented,
        max_bytes=limits.max_request_bytes,
        metrics=metrics,
        routes=route_paths(app),  # what /metrics names; any other path counts as "other"
        own_body=frozenset({memory.IMPORT_PATH}),  # read by the route, once the key is checked
    )
    return app


ERRORS_OF_EVERY_ROUTE = {
    400: "A request the server does not take, in a sentence: a Host that is not one of its names, a body that "
    "is no JSON, a field out of range",
    413: "A body over the server's limit (limits.max_request_bytes; an import's: limits.max_import_bytes)",
}
ERRORS_OF_A_KEY = {
    401: "No API key, or one the server does not know",
    403: "A namespace (Memlm-Namespace) the key may not act in, or a change sent by another site's page",
    429: "Too many wrong keys from this address (Retry-After), or too many turns of this key at once",
}


def documented_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document, saying what the server really answers: every operation's errors in
    the ErrorResponse shape (every one may get 400 and 413; one that takes a key 401, 403 and 429), and
    no 422, which the server never sends (a request it refuses is a 400 with a sentence)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    components.update(ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")["$defs"])
    components["ErrorResponse"] = ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
    components["ErrorResponse"].pop("$defs", None)
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for item in schema["paths"].values():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            errors = {**ERRORS_OF_EVERY_ROUTE, **(ERRORS_OF_A_KEY if operation.get("security") else {})}
            for status, why in errors.items():
                responses.setdefault(str(status), {"description": why, "content": body})
    app.openapi_schema = schema
    return schema


def route_paths(app: FastAPI) -> set[str]:
    """Every path `app` answers: its own routes' and those of ROUTERS (a recent FastAPI keeps an
    included router as one entry of app.routes, without a path)."""
    own = {path for route in app.routes if (path := getattr(route, "path", None))}
    return own | {route.path for router in ROUTERS for route in router.routes}


@asynccontextmanager
async def lifespan(app: FastAPI):
    """Before serving, move what is loaded (torch, the model, the app: ~240,000 objects) out of the garbage
    collector's view: each full collection walked them all, 200-280 ms during which no request moved (the
    p99 of every route in a soak). Stop the model thread when the server stops, then run on_shutdown."""
    gc.collect()
    gc.freeze()
    yield
    server: ServerState = app.state.server
    server.scheduler.close()
    if server.on_shutdown is not None:  # before uvicorn re-raises a SIGTERM, which no exit handler outlives
        server.on_shutdown()


# ---------------------------------------------------------------------- errors: OpenAI's shape, always


async def api_error(_: Request, err: APIError) -> JSONResponse:
    return err.response()


async def invalid_request(_: Request, err: RequestValidationError) -> JSONResponse:
    """A body or query FastAPI refused: 400 naming the first field at fault, in a sentence."""
    first = err.errors()[0]
    if first["type"] == "json_invalid":  # loc: ("body", the character where reading stopped)
        return APIError(400, _json_problem(err.body, first["loc"][-1], first["ctx"]["error"])).response()
    if first["type"] == "missing" and tuple(first["loc"]) == ("body",):
        return APIError(400, "the request has no body: send a JSON object", param="body").response()
    loc = [str(p) for p in first["loc"] if p != "body"]
    param = ".".join(loc) or None
    said = first["msg"].removeprefix("Value error, ")  # a validator's own sentence, without pydantic's label
    if first["type"] == "extra_forbidden":  # the field is the client's own word (may be "4"): quoted, named
        message = f"the field {param!r} is not one this endpoint takes"
    else:
        message = f"{param}: {said}" if param else said
    return APIError(400, message, param=param).response()


def _json_problem(doc: Any, position: int, reason: str) -> str:
    """Where and why a body is not JSON: line, column and character (FastAPI gives the character)."""
    where = f"character {position}"
    if isinstance(doc, str):
        line, column = doc.count("\n", 0, position) + 1, position - doc.rfind("\n", 0, position)
        where = f"line {line}, column {column} ({where})"
    return f"the body is not valid JSON: {reason[:1].lower() + reason[1:]} at {where}"


def _body_problem(cause: BaseException | None) -> str | None:
    """Why a body could not be read, as a sentence (FastAPI says only "There was an error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        byte = cause.object[cause.start]
        return f"the body is not UTF-8 text: byte 0x{byte:02x} at position {cause.start} starts no character"
    if isinstance(cause, RecursionError):
        return "the body is nested too deeply to read"
    if isinstance(cause, ValueError) and "digits" in str(cause):  # Python's limit on integer digits
        return (
            f"the body holds an integer of more than {sys.get_int_max_str_digits()} digits, more than any field takes"
        )
    return None


async def http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code)
    message = (_body_problem(err.__cause__) if err.status_code == 400 else None) or str(err.detail)
    return APIError(err.status_code, message, code=code).response()


async def crash(_: Request, err: Exception) -> JSONResponse:
    return APIError(500, f"internal error: {type(err).__name__}", type="server_error").response()


EXCEPTION_HANDLERS: dict[Any, Callable[..., Any]] = {
    APIError: api_error,
    RequestValidationError: invalid_request,
    StarletteHTTPException: http_error,
    Exception: crash,
}
