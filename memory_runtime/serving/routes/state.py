"""What every route shares, held once per app on `app.state.server`, and the FastAPI dependencies that
read it: routes are module-level functions (routes/*.py), so nothing a request needs lives in a closure."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_runtime.generation.decoder import Decoder
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.feedback import Exchange, Feedback
from memory_runtime.serving.keys import Caller, FailedKeys
from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.scheduler import TurnScheduler
from memory_runtime.serving.serve_config import Limits, ServeConfig

MAX_LAST_TURNS = 100_000  # callers whose last exchange is kept for feedback


@dataclass
class ServerState:
    """One server's model, memory and bookkeeping (create_app builds it)."""

    config: ServeConfig
    store: TripletStore  # thread-safe, shared by every request; a request acts in its caller's namespace
    model_name: str  # the `model` reported to clients
    system_prompt: str | None  # the system message the model was trained with
    has_model: bool  # False for `memlm ui`: the memory routes only, chat answers 501
    decoder: Decoder  # what the scheduler steps (BatchDecoder, OneAtATime, the vLLM decoder)
    scheduler: TurnScheduler  # the model thread: turns of every key, fairly
    metrics: Metrics
    feedback: Feedback
    failed_keys: FailedKeys  # wrong keys per client address
    caller: Callable[..., Awaitable[Caller]]  # keys.caller_dependency over the server's KeyRing
    on_shutdown: Callable[[], None] | None = None
    # (who acted, where) -> the exchange POST /v1/feedback is about: an operator acting in alice's namespace
    # has a last turn of its own there, not alice's (who: the key's own namespace); the oldest go past 100,000
    last_turns: OrderedDict[tuple[str, str], Exchange] = field(default_factory=OrderedDict)

    def remember_turn(self, who: Caller, exchange: Exchange) -> None:
        """`exchange` is what `who`'s feedback in its namespace is about from now on."""
        key = (who.key.namespace, who.namespace)
        self.last_turns.pop(key, None)
        self.last_turns[key] = exchange
        while len(self.last_turns) > MAX_LAST_TURNS:
            self.last_turns.popitem(last=False)

    def last_turn(self, who: Caller) -> Exchange | None:
        return self.last_turns.get((who.key.namespace, who.namespace))

    @property
    def limits(self) -> Limits:
        return self.config.limits


async def server_state(request: Request) -> ServerState:
    """The state of the app that serves `request` (async: a sync dependency would take a thread)."""
    return request.app.state.server


_bearer = HTTPBearer(auto_error=False)  # the API key, as OpenAPI documents it (scheme HTTPBearer)


async def key_caller(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Caller:
    """The authenticated caller (401, 403, 429 as keys.caller_dependency says)."""
    return await request.app.state.server.caller(request, credentials)


async def user_namespace(who: Caller = Depends(key_caller)) -> str:
    """The namespace the caller acts in: the dependency of every route that takes a key."""
    return who.namespace


State = Annotated[ServerState, Depends(server_state)]
Namespace = Annotated[str, Depends(user_namespace)]
Who = Annotated[Caller, Depends(key_caller)]  # the caller: its key and the namespace it acts in
