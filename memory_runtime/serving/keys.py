"""Authentication: an API key names the caller's namespace, and nothing a request says can."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memory_runtime.serving.schemas import APIError


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


def namespace_dependency(keyring: KeyRing) -> Callable[..., Awaitable[str]]:
    """The FastAPI dependency of every authenticated route: the caller's namespace, or 401."""
    bearer = HTTPBearer(auto_error=False)

    async def user_namespace(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        namespace = keyring.namespace(credentials.credentials if credentials else None)
        if namespace is None:
            message = "missing API key (send Authorization: Bearer KEY)" if credentials is None else "invalid API key"
            raise APIError(401, message, code="invalid_api_key")
        return namespace

    return user_namespace
