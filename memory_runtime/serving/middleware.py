"""The ASGI layers round the routes: request bodies are bounded before any route reads them, every
request is counted and timed (Instrumented, outermost), and a request must name this server
(HostCheck: its Host, and the Origin of a request that changes something)."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memory_runtime.serving.metrics import Metrics
from memory_runtime.serving.schemas import APIError
from memory_runtime.serving.serve_config import host_name

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(address: str) -> bool:
    """Whether listening on `address` keeps the server to this machine (localhost, 127.0.0.0/8, ::1)."""
    try:
        name = host_name(address)
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:  # not an address, or a name other than localhost
        return False


@dataclass(frozen=True)
class AllowedHosts:
    """The names a request's Host may give, which is what stops DNS rebinding: a page of another
    site whose name an attacker points at this machine sends its own name as Host, never ours.

    A server on loopback answers to localhost, 127.0.0.1 and ::1; on one address, to that address;
    on every interface (0.0.0.0, ::), to loopback's names, the machine's host name and any IP address
    (rebinding needs a name: a Host that is an IP address is one the browser really connected to).
    `extra` adds names (serve config `allowed_hosts`, --allow-host); "*" answers to any Host, which
    turns the check off (only behind a proxy that checks Host itself). Ports are not compared."""

    names: frozenset[str]
    any_ip: bool = False
    any_name: bool = False

    @classmethod
    def listening_on(cls, address: str, extra: Iterable[str] = ()) -> AllowedHosts:
        names = {host_name(n) for n in extra}
        if address.strip() in WILDCARD_ADDRESSES:
            names |= LOOPBACK_NAMES | _machine_names()
        elif is_loopback(address):
            names |= LOOPBACK_NAMES | {host_name(address)}
        else:
            names.add(host_name(address))
        return cls(frozenset(names - {"*"}), address.strip() in WILDCARD_ADDRESSES, "*" in names)

    def allows(self, name: str) -> bool:
        if self.any_name or name in self.names:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return self.any_ip


def _machine_names() -> set[str]:
    names = set()
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            names.add(host_name(name))
        except ValueError:  # a name no browser would send as Host
            pass
    return names


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's (name, port), the name as AllowedHosts compares it; None if it is no host."""
    if not value or any(c in value for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit("//" + value)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    try:
        return host_name(parts.hostname), port
    except ValueError:
        return None


class HostCheck:
    """Refuses a request whose Host is not a name of this server (400 invalid_host), and one that
    changes something (POST, PUT, PATCH, DELETE) sent by a page of another origin (403
    invalid_origin): its Origin header, when there is one, must be this server as the request
    reached it (scheme, Host name and port). Clients that are no browser send no Origin and pass.

    Starlette's TrustedHostMiddleware does the Host half, but answers in plain text; this answers
    in the server's JSON error shape."""

    def __init__(self, app: Any, *, allowed: AllowedHosts) -> None:
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":
            error = self.refusal(scope)
            if error is not None:
                await send_error(send, error)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: dict) -> APIError | None:
        hosts = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"]
        origins = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"origin"]
        raw = hosts[0] if len(hosts) == 1 else ""  # none, or two that might disagree
        host = split_host(raw)
        if host is None or not self.allowed.allows(host[0]):
            shown = repr(raw[:100]) if raw else "(none)"
            return APIError(
                400,
                f"Host {shown} is not a name of this server; to serve under it, start the server with "
                "--allow-host NAME (allowed_hosts in the serve config)",
                code="invalid_host",
            )
        if not origins or scope["method"] not in STATE_CHANGING:
            return None
        origin = origins[0] if len(origins) == 1 else ""
        scheme = scope.get("scheme", "http")
        server = (scheme, host[0], host[1] or DEFAULT_PORTS.get(scheme))
        try:
            parts = urlsplit(origin)
            sent = (parts.scheme, host_name(parts.hostname or ""), parts.port or DEFAULT_PORTS.get(parts.scheme))
        except ValueError:
            sent = None
        if sent != server:
            return APIError(
                403,
                f"Origin {origin[:100]!r} is not this server ({scheme}://{raw}): a page of another site may not "
                "change anything here",
                code="invalid_origin",
            )
        return None


class Instrumented:
    """Outermost middleware: refuses bodies over the limit (413) and records every request.

    The body is read here, up to the limit, before any route sees it: a client that lies in
    (or omits) Content-Length cannot make the server buffer more. The routes of `own_body` read
    their body themselves, with a limit of their own, once the caller's key is checked (an
    import's file: routes/memory.read_import_body).
    """

    def __init__(
        self, app: Any, *, max_bytes: int, metrics: Metrics, routes: set[str], own_body: frozenset[str] = frozenset()
    ) -> None:
        self.app, self.max_bytes, self.metrics, self.routes = app, max_bytes, metrics, routes
        self.own_body = own_body

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
            if scope["path"] in self.own_body:
                await self.app(scope, receive, send_recording)
                return
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
