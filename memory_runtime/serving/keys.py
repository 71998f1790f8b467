"""Authentication: an API key names the caller's namespace, and nothing a request says can, except
for a key given more namespaces (`[ops, "*"]` in the serve config), which a request may ask to act in
with the Memlm-Namespace header. A client address that keeps sending wrong keys is slowed to a few
guesses a minute, while the keys it has already shown to be right go on working (FailedKeys). The
address is the connection's own: X-Forwarded-For is believed only from the proxies the operator names
(serve config `forwarded_allow_ips`)."""

from __future__ import annotations

import hashlib
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

from memory_runtime.memory.terms import checked_namespace
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
    """API key -> access, looked up by the key's SHA-256 digest: a guess's lookup time says nothing
    about the keys (the dict compares digests, which a guesser cannot steer near a stored key's), and
    it is one lookup whatever the number of keys (comparing every key took 2.7 ms at 10,000 keys, on the
    event loop, for every request). A key maps to a namespace, or to a list of them: its own first, then
    the others it may act in ("*": any)."""

    def __init__(self, keys: Mapping[str, str | Sequence[str]]) -> None:
        self._by_digest = {key_digest(k): _access(ns) for k, ns in keys.items()}

    def access(self, key: str | None) -> KeyAccess | None:
        return self._by_digest.get(key_digest(key)) if key else None

    def namespace(self, key: str | None) -> str | None:
        """The key's own namespace, or None for an unknown key."""
        access = self.access(key)
        return None if access is None else access.namespace


def key_digest(key: str) -> bytes:
    """What is kept of a key: its SHA-256 digest (compared, remembered; never the key itself)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _access(namespaces: str | Sequence[str]) -> KeyAccess:
    if isinstance(namespaces, str):
        return KeyAccess(namespaces)
    own, *others = namespaces
    return KeyAccess(own, tuple(others))


class FailedKeys:
    """Wrong API keys per client address in a sliding window. After `limit` of them within `window`
    seconds the address is slowed: a key it has already used with success (its last
    `keys_per_client`) still works at once, so a flood of wrong keys locks out no one who was signed
    in; any other key is checked at most once every `window / limit` seconds (a right one then works
    and is remembered) and otherwise gets 429 with Retry-After, unchecked, so a guesser learns
    nothing from it and gets at most two guesses per `window / limit` seconds.

    In this process only (each server of a shared PostgreSQL memory counts its own). IPv6 clients
    count per /64, the block one host usually gets. Bounded: at most `max_clients` addresses are
    tracked (those idle longest go first), each with at most `limit` + 1 times and `keys_per_client`
    digests of keys."""

    def __init__(
        self,
        limit: int,
        window: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
        keys_per_client: int = 8,
    ) -> None:
        self.limit, self.window, self.clock, self.max_clients = limit, window, clock, max_clients
        self.keys_per_client = keys_per_client
        self._failures: dict[str, deque[float]] = {}
        self._proven: dict[str, deque[bytes]] = {}  # address -> digests of keys it used with success
        self._checked: dict[str, float] = {}  # address over its limit -> when its last key was checked
        self._lock = threading.Lock()

    @property
    def spacing(self) -> float:
        """Seconds between two checks of an unknown key from an address over its limit."""
        return self.window / self.limit

    def retry_after(self, client: str, digest: bytes | None = None) -> float | None:
        """None when a key (of `digest`) from `client` may be checked now; else the seconds until one may.
        A None for an address over its limit takes that address's one check of the moment."""
        key = client_key(client)
        with self._lock:
            times = self._recent(key)
            if times is None or len(times) < self.limit:
                return None
            if digest is not None and digest in self._proven.get(key, ()):
                return None
            now = self.clock()
            last = self._checked.get(key)
            if last is None or now - last >= self.spacing:
                self._checked[key] = now
                return None
            return max(0.0, min(times[0] + self.window, last + self.spacing) - now)

    def record(self, client: str) -> None:
        """One wrong key from `client`."""
        key = client_key(client)
        with self._lock:
            times = self._recent(key) or deque(maxlen=self.limit + 1)
            times.append(self.clock())
            self._failures.pop(key, None)
            self._failures[key] = times  # the most recent last: the first to go when there are too many
            if len(self._failures) > self.max_clients:
                for stale in [k for k in self._failures if not self._recent(k)]:
                    self._forget(stale)
                while len(self._failures) > self.max_clients:
                    self._forget(next(iter(self._failures)))

    def succeeded(self, client: str, digest: bytes) -> None:
        """A right key from `client`: it keeps working there however many wrong keys follow."""
        key = client_key(client)
        with self._lock:
            proven = self._proven.pop(key, None) or deque(maxlen=self.keys_per_client)
            if digest not in proven:
                proven.append(digest)
            self._proven[key] = proven  # the most recent last
            while len(self._proven) > self.max_clients:
                del self._proven[next(iter(self._proven))]

    def _forget(self, key: str) -> None:
        del self._failures[key]
        self._checked.pop(key, None)

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
        if credentials is None:
            raise APIError(401, "missing API key (send Authorization: Bearer KEY)", code="invalid_api_key")
        client = request.client.host if request.client else "unknown"  # the connection's (keys module docstring)
        digest = key_digest(credentials.credentials)
        wait = failed.retry_after(client, digest)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise APIError(
                429,
                f"too many wrong API keys from this address ({failed.limit} in {failed.window:g} s): a key not yet "
                f"used from here is checked once every {failed.spacing:g} s; retry in {seconds} s",
                type="rate_limit_error",
                code="too_many_failed_keys",
                headers={"Retry-After": str(seconds)},
            )
        access = keyring.access(credentials.credentials)
        if access is None:
            failed.record(client)
            raise APIError(401, "invalid API key", code="invalid_api_key")
        failed.succeeded(client, digest)
        asked = request.headers.get(NAMESPACE_HEADER)
        if asked is None:
            return Caller(access, access.namespace)
        if not asked.strip() or asked == "*":
            raise APIError(400, f"{NAMESPACE_HEADER} must name a namespace", param=NAMESPACE_HEADER)
        try:
            checked_namespace(asked)
        except ValueError as err:
            raise APIError(400, f"{NAMESPACE_HEADER}: {err}", param=NAMESPACE_HEADER) from None
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
