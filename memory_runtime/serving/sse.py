"""A streamed reply as OpenAI's server-sent chunk stream: the visible reply as it grows, then the
finish reason (and the trace and usage when asked), then [DONE]."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any


def _chunk(base: dict, delta: dict, finish_reason: str | None = None, **extra: Any) -> str:
    """One server-sent event of OpenAI's chunk stream."""
    choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"


Finished = Callable[[Any], tuple[str, dict[str, Any], dict[str, Any] | None]]


async def chat_chunks(
    base: dict, visible: asyncio.Queue, future: Awaitable[Any], finished: Finished, *, include_usage: bool = False
) -> AsyncIterator[str]:
    """The events of one streamed turn. `visible` yields the visible reply as it grows (None when
    the turn is done); `future` is the turn's result; `finished(result)` gives (finish reason,
    usage, trace or None). The reply is sent only as it extends what was sent: text the model
    takes back (a call's prefix) never reaches the client."""
    yield _chunk(base, {"role": "assistant", "content": ""})
    sent = ""
    while (reply := await visible.get()) is not None:
        if reply.startswith(sent) and len(reply) > len(sent):
            yield _chunk(base, {"content": reply[len(sent) :]})
            sent = reply
    try:
        result = await future
    except Exception as err:  # the stream has started: the error goes in it
        error = {"message": f"internal error: {type(err).__name__}", "type": "server_error"}
        yield f"data: {json.dumps({'error': error})}\n\n"
        return
    finish, usage, trace = finished(result)
    if result.reply.startswith(sent) and len(result.reply) > len(sent):
        yield _chunk(base, {"content": result.reply[len(sent) :]})
    yield _chunk(base, {}, finish, **({"memlm": trace} if trace is not None else {}))
    if include_usage:
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"
