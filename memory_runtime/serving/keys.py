"""Authentication: an API key names the caller's namespace, and nothing a request says can, except
for a key given more namespaces (`[ops, "*"]` in the serve config), which a request may ask to act in
with the Memlm-Namespace header. A client address that keeps sending wrong keys is slowed to a few
guesses a minute."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_runtime.serving.schemas import APIError
from memory_runtime.shipped import shipped

SHIPPED_CONFIGS = shipped("configs")
NAMESPACE_HEADER = "Memlm-Namespace"  # a request of a key with more namespaces: the one to act in


@dataclass(frozen=True)
class KeyAccess:
    """Where one API key acts: its own namespace, unless a request names one of `others` ("*": any)."""

    namespace: str
    others: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return "*" in self.others

    def may_act_in(self, namespace: str) -> bool:
        return namespace == self.namespace or self.any or namespace in self.others


@dataclass(frozen=True)
class Caller:
    """An authenticated request: its key's access and the namespace it acts in."""

    key: KeyAccess
    namespace: str


class KeyRing:
    """API key -> access lookup whose timing does not depend on the key asked or matched: every
    stored key is compared (hmac.compare_digest of SHA-256 digests), no early exit. A key maps to a
    namespace, or to a list of them: its own first, then the others it may act in ("*": any)."""

    def __init__(self, keys: Mapping[str, str | Sequence[str]]) -> None:
        self._entries = [(hashlib.sha256(k.encode()).digest(), _access(ns)) for k, ns in keys.items()]

    def access(self, key: str | None) -> KeyAccess | None:
        digest = hashlib.sha256((key or "").encode()).digest()
        found = None
        for stored, access in self._entries:
            if hmac.compare_digest(stored, digest) and key:
                found = access
        return found

    def namespace(self, key: str | None) -> str | None:
        """The key's own namespace, or None for an unknown key."""
        access = self.access(key)
        return None if access is None else access.namespace


def _access(namespaces: str | Sequence[str]) -> KeyAccess:
    if isinstance(namespaces, str):
        return KeyAccess(namespaces)
    own, *others = namespaces
    return KeyAccess(own, tuple(others))


class FailedKeys:
    """Wrong API keys per client address in a sliding window: after `limit` of them within `window`
    seconds, the address gets 429 on every route that takes a key, whatever key it sends (a right
    one too: else a 200 would tell which guess was right), until the oldest wrong key leaves the
    window (`retry_after`). A right key does not clear the count: a client holding one key (the
    public demo key, say) could otherwise guess at the others between its own requests.

    In this process only (each server of a shared PostgreSQL memory counts its own). IPv6 clients
    count per /64, the block one host usually gets. Addresses whose wrong keys have all left the
    window are forgotten once more than `max_clients` are tracked."""

    def __init__(
        self, limit: int, window: float, *, clock: Callable[[], float] = time.monotonic, max_clients: int = 10_000
    ) -> None:
        self.limit, self.window, self.clock, self.max_clients = limit, window, clock, max_clients
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> float | None:
        """Seconds until `client` may send a key again, or None if it may now."""
        with self._lock:
            times = self._recent(client_key(client))
            if times is None or len(times) < self.limit:
                return None
            return times[0] + self.window - self.clock()

    def record(self, client: str) -> None:
        """One wrong key from `client`."""
        key = client_key(client)
        with self._lock:
            times = self._recent(key) or deque()
            times.append(self.clock())
            self._failures.pop(key, None)
            self._failures[key] = times  # the most recent last: the first to go when there are too many
            if len(self._failures) > self.max_clients:
                for stale in [k for k in self._failures if not self._recent(k)]:
                    del self._failures[stale]
                while len(self._failures) > self.max_clients:
                    del self._failures[next(iter(self._failures))]

    def _recent(self, key: str) -> deque[float] | None:
        times = self._failures.get(key)
        while times and times[0] <= self.clock() - self.window:
            times.popleft()
        return times


def client_key(address: str) -> str:
    """What FailedKeys counts by: the address, an IPv6 address's /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    return str(ipaddress.ip_network(f"{ip}/64", strict=False)) if ip.version == 6 else str(ip)


def namespace_dependency(keyring: KeyRing, failed: FailedKeys) -> Callable[..., Awaitable[str]]:
    """The FastAPI dependency of every authenticated route: the namespace the caller acts in (see
    caller_dependency)."""
    caller = caller_dependency(keyring, failed)

    async def user_namespace(who: Caller = Depends(caller)) -> str:
        return who.namespace

    return user_namespace


def caller_dependency(keyring: KeyRing, failed: FailedKeys) -> Callable[..., Awaitable[Caller]]:
    """The caller: 401 for a missing or wrong key, 429 (Retry-After) for an address that sent too
    many wrong keys. A request acts in its key's namespace, or in the one its Memlm-Namespace
    header names where the key may act there; any other gets 403 `namespace_not_allowed`, the same
    whether that namespace holds facts or not."""
    bearer = HTTPBearer(auto_error=False)

    async def caller(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> Caller:
        client = request.client.host if request.client else "unknown"
        wait = failed.retry_after(client)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise APIError(
                429,
                f"too many wrong API keys from this address ({failed.limit} in {failed.window:g} s): "
                f"retry in {seconds} s",
                type="rate_limit_error",
                code="too_many_failed_keys",
                headers={"Retry-After": str(seconds)},
            )
        access = keyring.access(credentials.credentials if credentials else None)
        if access is None:
            if credentials is None:
                raise APIError(401, "missing API key (send Authorization: Bearer KEY)", code="invalid_api_key")
            failed.record(client)
            raise APIError(401, "invalid API key", code="invalid_api_key")
        asked = request.headers.get(NAMESPACE_HEADER)
        if asked is None:
            return Caller(access, access.namespace)
        if not asked.strip() or asked == "*":
            raise APIError(400, f"{NAMESPACE_HEADER} must name a namespace", param=NAMESPACE_HEADER)
        if not access.may_act_in(asked):
            raise APIError(
                403,
                f"this API key may not act in namespace {asked!r}",
                type="permission_error",
                param=NAMESPACE_HEADER,
                code="namespace_not_allowed",
            )
        return Caller(access, asked)

    return caller


def shipped_demo_keys(folder: Path = SHIPPED_CONFIGS) -> dict[str, Path]:
    """The API keys in memlm's shipped configs (`api_keys` of configs/**/*.yaml) -> the file: public,
    since anyone can read them, so fine on loopback and nowhere else."""
    keys: dict[str, Path] = {}
    for path in sorted(folder.glob("**/*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "api_keys" not in text:
            continue
        config = yaml.safe_load(text)
        mapping = config.get("api_keys") if isinstance(config, dict) else None
        keys.update({str(key): path for key in mapping or {}})
    return keys
