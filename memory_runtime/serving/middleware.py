"""The outermost ASGI layer: request bodies are bounded before any route reads them, and every
request is counted and timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.schemas import APIError


class Instrumented:
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
                await send_error(
                    send_recording,
                    APIError(413, f"request body is larger than {self.max_bytes} bytes", code="request_too_large"),
                )
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


async def send_error(send: Callable, error: APIError) -> None:
    response = error.response()
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
