"""Authentication: an API key names the caller's namespace, and nothing a request says can. A
client address that keeps sending wrong keys is slowed to a few guesses a minute."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_runtime.serving.schemas import APIError

SHIPPED_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


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
    """The FastAPI dependency of every authenticated route: the caller's namespace, 401 for a
    missing or wrong key, 429 (Retry-After) for an address that sent too many wrong keys."""
    bearer = HTTPBearer(auto_error=False)

    async def user_namespace(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> str:
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
        namespace = keyring.namespace(credentials.credentials if credentials else None)
        if namespace is None:
            if credentials is None:
                raise APIError(401, "missing API key (send Authorization: Bearer KEY)", code="invalid_api_key")
            failed.record(client)
            raise APIError(401, "invalid API key", code="invalid_api_key")
        return namespace

    return user_namespace


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
