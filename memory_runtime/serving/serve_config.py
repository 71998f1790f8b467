"""The serve config (configs/serve/*.yaml): who may call the server, the limits, how the model runs."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from memory_runtime.generation.runtime import Generation
from memory_runtime.shipped import resolve_path
from memory_runtime.yaml_config import ConfigError, Strict, read_mapping


class Limits(Strict):
    """What one request may ask for: bounds that keep one client from starving the others (a turn's
    tokens and calls: `generation.max_new_tokens`, `generation.max_calls`)."""

    max_request_bytes: int = Field(65_536, ge=1024)  # request bodies, larger ones get 413
    # a file sent to POST /v1/memory/import (the page's Import), streamed to a temporary file and read fact by fact;
    # larger ones get 413 (memlm memory import takes a file of any size): 64 MB holds an export of ~140,000 facts
    max_import_bytes: int = Field(67_108_864, ge=1024)
    max_messages: int = Field(64, ge=1)  # messages in one chat request (history included)
    max_queue: int = Field(32, ge=1)  # turns waiting for the model; more get 503 "overloaded"
    max_turns_per_key: int = Field(8, ge=1)  # turns one API key may have waiting or running; more get 429
    max_prompt_tokens: int = Field(4096, ge=16)  # a longer prompt (history included) gets 400 before any decoding
    max_failed_keys: int = Field(10, ge=1)  # wrong API keys one client address may send per window; then 429
    failed_keys_window_s: float = Field(60.0, gt=0)  # the window of max_failed_keys, in seconds


class ServeConfig(Strict):
    """configs/serve/default.yaml: who may call the server (API key -> namespace), the limits, and
    how the model runs (`generation`: a request's max_tokens is capped to generation.max_new_tokens,
    its temperature and top_p default to generation's)."""

    what = "serve config"

    api_keys: dict[str, Any] = {}  # values validated by resolve_key_access, so no error message echoes a key
    api_keys_env: str | None = "MEMLM_API_KEYS"  # env var of "KEY=NAMESPACE" pairs, comma-separated
    api_keys_file: Path | None = None  # YAML/JSON mapping KEY: NAMESPACE or a list (relative to the config file)
    model_name: str | None = None  # the `model` reported to clients (default: generation.model)
    feedback_dir: Path | None = None  # POST /v1/feedback: pending/ per user, reviewed with `memlm feedback`
    allowed_hosts: list[str] = []  # Host names answered beyond the listening address's own (--allow-host); "*": any
    allow_demo_key: bool = False  # with --allow-demo-key: listen beyond loopback although a shipped demo key is in use
    # proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (IP addresses or networks; "*": any):
    # a client's address is otherwise its connection's, which is what the wrong-key limit counts by
    forwarded_allow_ips: list[str] = []
    limits: Limits = Limits()
    generation: Generation = Generation()

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        return [host_name(name) for name in names]

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxy_addresses(cls, addresses: list[str]) -> list[str]:
        for address in addresses:
            if address != "*":
                try:
                    ipaddress.ip_network(address, strict=False)
                except ValueError:
                    raise ValueError(
                        f"{address!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8; '*': any)"
                    ) from None
        return addresses

    def relative_to(self, folder: Path) -> ServeConfig:
        """Relative paths in the file are relative to the file."""
        for name in ("api_keys_file", "feedback_dir"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, Path(resolve_path(value, folder)))
        self.generation.relative_to(folder)
        return self

    def resolve_api_keys(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """All API keys -> their own namespaces, from `api_keys`, the `api_keys_env` variable and
        `api_keys_file`."""
        return {key: namespaces[0] for key, namespaces in self.resolve_key_access(environ).items()}

    def resolve_key_access(self, environ: dict[str, str] | None = None) -> dict[str, tuple[str, ...]]:
        """All API keys -> the namespaces each may act in: its own first (where it acts unless a
        request names another, keys.NAMESPACE_HEADER), then the others; "*" after the first: any.
        In `api_keys` and `api_keys_file` a key maps to a namespace or to a list of them
        (`ops-key-0001: [ops, "*"]`); in the environment variable, to one namespace.

        Keys never appear in error messages: a config error may well end up in a log.
        """
        environ = os.environ if environ is None else environ
        sources: list[tuple[str, dict]] = [("api_keys", self.api_keys)]
        if self.api_keys_env and environ.get(self.api_keys_env, "").strip():
            sources.append(
                (f"api_keys_env ({self.api_keys_env})", _parse_key_pairs(environ[self.api_keys_env], self.api_keys_env))
            )
        if self.api_keys_file is not None:
            what = f"api_keys_file ({self.api_keys_file})"
            sources.append((what, read_mapping(self.api_keys_file, "api_keys_file (KEY: NAMESPACE)")))
        keys: dict[str, tuple[str, ...]] = {}
        for what, mapping in sources:
            for i, (key, value) in enumerate(mapping.items(), 1):
                if not isinstance(key, str) or len(key) < 8 or key != key.strip():
                    raise ConfigError(f"{what}: key #{i} must be a string of 8 or more characters, no edge spaces")
                namespaces = tuple(value) if isinstance(value, list) else (value,)
                if not namespaces or not all(isinstance(ns, str) and ns.strip() for ns in namespaces):
                    raise ConfigError(f"{what}: key #{i} must map to a non-empty namespace string, or a list of them")
                if namespaces[0] == "*":
                    raise ConfigError(f"{what}: key #{i}: the first namespace is the key's own, not '*'")
                if keys.get(key, namespaces) != namespaces:
                    raise ConfigError(f"{what}: key #{i} is already mapped to namespace {keys[key][0]!r}")
                keys[key] = namespaces
        if not keys:
            raise ConfigError("no API keys: set api_keys, the api_keys_env variable or api_keys_file")
        return keys


def host_name(text: str) -> str:
    """A name of `allowed_hosts` as the Host check compares it: lower case, no brackets round an IPv6
    address, no final dot; "*" stays. Raises ValueError for anything else (a scheme, a port, a path)."""
    name = text.strip().lower().removesuffix(".")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if name != "*" and (not name or not re.fullmatch(r"[a-z0-9_.-]+", name) or ".." in name or name[0] == "."):
        raise ValueError(f"{text!r} is not a host name (a name or an IP address, no scheme, port or path; '*': any)")
    return name


def _parse_key_pairs(text: str, variable: str) -> dict[str, str]:
    pairs = {}
    for i, item in enumerate(filter(None, (p.strip() for p in text.split(","))), 1):
        key, sep, namespace = item.partition("=")
        if not sep:
            raise ConfigError(f"api_keys_env ({variable}): item #{i} is not KEY=NAMESPACE")
        pairs[key.strip()] = namespace.strip()
    return pairs
