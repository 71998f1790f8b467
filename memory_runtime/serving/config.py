"""The serve config (configs/serve/*.yaml): who may call the server, the limits, how the model runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memory_runtime.runtime import Engine, check_engine
from memory_runtime.write_gate import WriteGateConfig
from memory_runtime.yaml_config import apply_overrides, read_mapping, validate


class ServeConfigError(ValueError):
    """A serve config (or an API key source) is invalid; the message names the field."""


class Limits(BaseModel):
    """What one request may ask for: bounds that keep one client from starving the others."""

    model_config = ConfigDict(extra="forbid")

    max_request_bytes: int = Field(65_536, ge=1024)  # request bodies, larger ones get 413
    max_messages: int = Field(64, ge=1)  # messages in one chat request (history included)
    max_tokens: int = Field(256, ge=1)  # generated tokens per turn; a request's max_tokens is capped to it
    max_calls: int = Field(16, ge=1)  # memory calls per turn (ends runaway call loops)
    max_queue: int = Field(32, ge=1)  # turns waiting for the model; more get 503 "overloaded"
    max_turns_per_key: int = Field(8, ge=1)  # turns one API key may have waiting or running; more get 429
    max_prompt_tokens: int = Field(4096, ge=16)  # a longer prompt (history included) gets 400 before any decoding


class Generation(BaseModel):
    """How the model runs: sampling used when a request does not set it (greedy, as the model was
    trained to call), where it runs, and how many turns share a batch."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    copy_fields: bool = True  # call names copied from the conversation, relations from the table (field_copy)
    device: str = "auto"  # auto (a CUDA GPU when one is visible), cpu, cuda, cuda:N
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: bfloat16 where it is native
    max_batch_size: int = Field(8, ge=1)  # turns of concurrent users decoded together
    engine: Engine = "hf"  # hf or vllm (memory_runtime.runtime); vllm: no corrections, no write gate
    write_gate: WriteGateConfig = WriteGateConfig()  # which unsure writes are held back (memory_runtime.write_gate)

    @model_validator(mode="after")
    def _engine_can(self) -> Generation:
        check_engine(self.engine, self.write_gate)
        return self


class ServeConfig(BaseModel):
    """configs/serve/default.yaml: who may call the server (API key -> namespace) and the limits."""

    model_config = ConfigDict(extra="forbid")

    api_keys: dict[str, Any] = {}  # values validated by resolve_api_keys, so no error message echoes a key
    api_keys_env: str | None = "MEMLM_API_KEYS"  # env var of "KEY=NAMESPACE" pairs, comma-separated
    api_keys_file: Path | None = None  # YAML/JSON mapping KEY: NAMESPACE (relative to the config file)
    model_name: str | None = None  # the `model` reported to clients (default: the --model value)
    memory_config: Path | None = None  # relation table / fuzzy settings (relative to the config file)
    torch_threads: int | None = Field(None, ge=1)  # CPU threads of the model (None: torch's default)
    feedback_dir: Path | None = None  # POST /v1/feedback: pending/ per user, reviewed with `memlm feedback`
    limits: Limits = Limits()
    generation: Generation = Generation()

    @classmethod
    def load(cls, path: str | Path, overrides: Sequence[str] = ()) -> ServeConfig:
        """Read a YAML config, apply dotted ``key=value`` overrides, validate; relative paths in it
        are relative to the file."""
        path = Path(path)
        data = apply_overrides(read_mapping(path, "serve config", ServeConfigError), overrides, ServeConfigError)
        config = validate(cls, data, "serve config", str(path), ServeConfigError)
        for name in ("api_keys_file", "memory_config", "feedback_dir"):
            value = getattr(config, name)
            if value is not None and not value.is_absolute():
                setattr(config, name, path.parent / value)
        return config

    def resolve_api_keys(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """All API keys -> namespaces, from `api_keys`, the `api_keys_env` variable and `api_keys_file`.

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
            sources.append((what, read_mapping(self.api_keys_file, "api_keys_file (KEY: NAMESPACE)", ServeConfigError)))
        keys: dict[str, str] = {}
        for what, mapping in sources:
            for i, (key, namespace) in enumerate(mapping.items(), 1):
                if not isinstance(key, str) or len(key) < 8 or key != key.strip():
                    raise ServeConfigError(f"{what}: key #{i} must be a string of 8 or more characters, no edge spaces")
                if not isinstance(namespace, str) or not namespace.strip():
                    raise ServeConfigError(f"{what}: key #{i} must map to a non-empty namespace string")
                if keys.get(key, namespace) != namespace:
                    raise ServeConfigError(f"{what}: key #{i} is already mapped to namespace {keys[key]!r}")
                keys[key] = namespace
        if not keys:
            raise ServeConfigError("no API keys: set api_keys, the api_keys_env variable or api_keys_file")
        return keys


def _parse_key_pairs(text: str, variable: str) -> dict[str, str]:
    pairs = {}
    for i, item in enumerate(filter(None, (p.strip() for p in text.split(","))), 1):
        key, sep, namespace = item.partition("=")
        if not sep:
            raise ServeConfigError(f"api_keys_env ({variable}): item #{i} is not KEY=NAMESPACE")
        pairs[key.strip()] = namespace.strip()
    return pairs
