"""POST /v1/chat/completions, OpenAI's chat API over the controller: a request is checked, made one turn
of the caller's namespace, queued on the model thread (serving/scheduler.py) and answered whole or
streamed as it is generated (serving/sse.py); the memory calls never reach the client."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from memory_runtime.generation.proposals import close_scratch, pooled, sampled_runs
from memory_runtime.generation.turn import TurnRequest, TurnResult
from memory_runtime.protocol import streamed_reply
from memory_runtime.serving.feedback import Exchange
from memory_runtime.serving.keys import Caller
from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.routes.state import ServerState, State, Who
from memory_runtime.serving.scheduler import Overloaded, OwnerBusy
from memory_runtime.serving.schemas import APIError, ChatRequest, ErrorResponse, turn_messages_of
from memory_runtime.serving.sse import chat_chunks

router = APIRouter()

DISCONNECT_POLL_SECONDS = 0.25  # how often a waiting non-streamed request checks that its client is still there

# One server-sent event of a stream (OpenAPI 3.2's itemSchema): its `data` is a chat.completion.chunk as
# JSON, or `[DONE]` last
SSE_EVENT = {
    "type": "object",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}},
    "required": ["data"],
}

Finished = Callable[[TurnResult], tuple[str, dict[str, Any], dict[str, Any] | None]]  # finish reason, usage, trace


@router.post(
    "/v1/chat/completions",
    responses={
        200: {
            "description": "A chat.completion, or with `stream` a stream of chat.completion.chunk events",
            "content": {"text/event-stream": {"itemSchema": SSE_EVENT}},
        },
        501: {"model": ErrorResponse, "description": "This server has no model (memlm ui)"},
        503: {"model": ErrorResponse, "description": "The server's queue of turns is full: retry later"},
    },
)
async def chat_completions(request: ChatRequest, http: Request, server: State, who: Who) -> Any:
    """One user turn: the model answers, its memory calls run against the caller's namespace."""
    namespace = who.namespace
    check_request(server, request)
    messages = turn_messages_of(request.messages, server.system_prompt)
    user_text = messages[-1]["content"]
    visible: asyncio.Queue[str | None] = asyncio.Queue()  # a stream's visible reply as it grows; None: done
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"  # also the source of the facts the turn stores
    on_text = reply_into(visible) if request.stream else None
    turn = turn_of(server, request, messages, namespace, source=completion_id, on_text=on_text)
    try:
        turn.check()  # refused here, before it joins anyone's batch
    except ValueError as err:
        raise APIError(400, str(err)) from None
    fit_context(server, turn)
    future = submit(server, turn, namespace)
    if server.config.generation.propose > 1:
        future = with_proposals(server, turn, future, namespace)
    head = {"id": completion_id, "created": int(time.time()), "model": server.model_name, "system_fingerprint": None}
    finished = functools.partial(finish, server, request, who, user_text)
    if request.stream:
        return streamed_answer(request, turn, future, visible, head, finished, server.metrics)
    return await plain_answer(http, turn, future, head, finished, server.metrics)


def check_request(server: ServerState, request: ChatRequest) -> None:
    """Refuse what this server does not do (501 without a model), before anything else is read."""
    if not server.has_model:
        raise APIError(501, "this server has no model (memlm ui): the memory routes only", code="no_model")
    if request.n != 1:
        raise APIError(400, "only n=1 is supported", param="n")
    if request.tools:
        raise APIError(400, "tools are not supported: memlm's tool is its memory", param="tools")
    if len(request.messages) > server.limits.max_messages:
        raise APIError(400, f"at most {server.limits.max_messages} messages per request", param="messages")


def turn_of(
    server: ServerState,
    request: ChatRequest,
    messages: list[dict[str, str]],
    namespace: str,
    *,
    source: str,
    on_text: Callable[[str], None] | None,
) -> TurnRequest:
    """The request as a turn: its tokens capped to generation.max_new_tokens, sampling defaulting to
    the server's generation settings."""
    generation = server.config.generation
    asked = request.max_completion_tokens or request.max_tokens or generation.max_new_tokens
    sampling = {"temperature": request.temperature, "top_p": request.top_p}  # the client's, where it sent them
    return generation.request(
        messages,
        server.store,
        namespace=namespace,
        max_new_tokens=min(asked, generation.max_new_tokens),
        seed=request.seed,
        on_text=on_text,
        source=source,
        said_at=request.memlm.date or datetime.now(),
        **{name: value for name, value in sampling.items() if value is not None},
    )


def reply_into(visible: asyncio.Queue[str | None]) -> Callable[[str], None]:
    """A turn's on_text, called on the model thread: puts the visible reply on `visible` (on this
    event loop) each time it grows."""
    loop = asyncio.get_running_loop()
    shown = [""]

    def on_text(text: str) -> None:
        reply = streamed_reply(text)
        if len(reply) > len(shown[0]):
            shown[0] = reply
            loop.call_soon_threadsafe(visible.put_nowait, reply)

    return on_text


def fit_context(server: ServerState, turn: TurnRequest) -> None:
    """Refuse a prompt longer than the server takes or the model reads, before any decoding; cap
    the turn's tokens to what is left of the context."""
    n = server.decoder.prompt_tokens(turn)
    if n is None:
        return
    context = server.decoder.context or n + turn.max_new_tokens
    max_prompt_tokens = server.limits.max_prompt_tokens
    if n > max_prompt_tokens or n >= context:
        limit = min(max_prompt_tokens, context - 1)
        raise APIError(
            400,
            f"the prompt is {n} tokens (history included); this server takes at most {limit}",
            param="messages",
            code="context_length_exceeded",
        )
    turn.max_new_tokens = min(turn.max_new_tokens, context - n)


def submit(server: ServerState, turn: TurnRequest, namespace: str) -> asyncio.Future[TurnResult]:
    """Queue the turn on the model thread: 429 when the key has too many turns in flight, 503 when
    the server's queue is full."""
    try:
        return server.scheduler.submit(turn, owner=namespace)
    except OwnerBusy:
        raise APIError(
            429,
            f"this key has {server.limits.max_turns_per_key} turns waiting or running; retry when one is done",
            type="rate_limit_error",
            code="too_many_turns",
        ) from None
    except Overloaded:
        raise APIError(503, "the server is overloaded; retry later", type="server_error", code="overloaded") from None
    except ValueError as err:
        raise APIError(400, str(err)) from None


# the scheduler's owner of a namespace's proposal runs (generation.propose): beside its own turns, not among them
PROPOSALS_OWNER = "\x00proposals:"


def with_proposals(
    server: ServerState, turn: TurnRequest, greedy: asyncio.Future[TurnResult], namespace: str
) -> asyncio.Future[TurnResult]:
    """The turn with its writes pooled over generation.propose runs (memory_runtime.generation.proposals): its
    sampled runs queued beside it under an owner of their own, so that they never take a place the caller's
    own turns are counted for; a run the queue has no room for is left out, and the turn is answered with
    what the others proposed. The pool is stored on the model thread, between two steps."""
    runs = sampled_runs(turn, server.config.generation.propose)
    queued: list[asyncio.Future[TurnResult]] = []
    for run in runs:
        try:
            queued.append(server.scheduler.submit(run, owner=PROPOSALS_OWNER + namespace))
        except (OwnerBusy, Overloaded):
            break

    async def pooled_turn() -> TurnResult:
        try:
            result = await greedy
        except BaseException:  # the turn failed or its client left: its runs stop at their next token
            turn.cancel.set()  # the sampled runs share the turn's cancel event
            for run in queued:
                run.cancel()
            raise
        outcomes = await asyncio.gather(*queued, return_exceptions=True)  # a run that failed alone proposes nothing
        close_scratch(runs)  # every run is done with its memory (one left unqueued never used it)
        done = [r for r in outcomes if isinstance(r, TurnResult)]
        return await server.scheduler.call(lambda: pooled(turn, result, done))

    return asyncio.ensure_future(pooled_turn())


def finish(
    server: ServerState, request: ChatRequest, who: Caller, user_text: str, result: TurnResult
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """What a finished turn leaves: its metrics, the caller's last exchange (what POST /v1/feedback is
    about), and the answer's finish reason, usage and trace (when asked)."""
    namespace = who.namespace
    server.metrics.record_turn(result)
    server.remember_turn(who, Exchange(user_text, result))
    repeated = server.feedback.repeated_wrong(namespace, user_text, result.reply)
    usage = {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.generated_tokens,
        "total_tokens": result.prompt_tokens + result.generated_tokens,
    }
    trace = trace_of(result, namespace) if request.memlm.trace else None
    if trace is not None:
        trace["repeated_wrong"] = repeated  # the same wrong answer again: the model should ask for help
    return ("stop" if result.status == "ok" else "length"), usage, trace


def streamed_answer(
    request: ChatRequest,
    turn: TurnRequest,
    future: asyncio.Future[TurnResult],
    visible: asyncio.Queue[str | None],
    head: dict[str, Any],
    finished: Finished,
    metrics: Metrics,
) -> StreamingResponse:
    """The answer as OpenAI's chunk stream, sent as the turn generates it; a client that leaves
    mid-stream stops the turn."""
    future.add_done_callback(lambda _: visible.put_nowait(None))
    include_usage = bool((request.stream_options or {}).get("include_usage"))

    async def events() -> AsyncIterator[str]:
        chunks = chat_chunks(
            {**head, "object": "chat.completion.chunk"}, visible, future, finished, include_usage=include_usage
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


async def plain_answer(
    http: Request,
    turn: TurnRequest,
    future: asyncio.Future[TurnResult],
    head: dict[str, Any],
    finished: Finished,
    metrics: Metrics,
) -> dict[str, Any]:
    """The answer as one chat.completion, once the turn is done; a client that leaves before stops the
    turn (499)."""
    while not (await asyncio.wait({future}, timeout=DISCONNECT_POLL_SECONDS))[0]:
        if await http.is_disconnected():  # nobody waits for the answer: free the model for others
            cancel(turn, future, metrics)
            raise APIError(499, "the client closed the request", code="client_closed_request")
    result = await future
    finish_reason, usage, trace = finished(result)
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": result.reply, "refusal": None},
        "logprobs": None,
        "finish_reason": finish_reason,
    }
    body = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
    if trace is not None:
        body["memlm"] = trace
    return body


def cancel(turn: TurnRequest, future: asyncio.Future[TurnResult], metrics: Metrics) -> None:
    """End an unfinished turn whose client is gone: it stops at its next token, or never starts."""
    if not future.done():
        turn.cancel.set()
        future.cancel()
        metrics.record_cancelled()


def trace_of(result: TurnResult, namespace: str) -> dict[str, Any]:
    """The turn as `"memlm": {"trace": true}` shows it: its calls, full text, tokens and timings."""
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
