"""What the two fuzzers of the server share (test_fuzz_api.py: Schemathesis over the OpenAPI document;
test_memory_stateful.py: Hypothesis' state machines over the memory routes): a server over a scripted
model with the four kinds of caller, the checks every response must pass whatever it was asked (no 5xx;
an error is the server's JSON, {"error": {message, type, param, code}}, whose message a person can read),
and a collection of what failed, kept once per kind with its smallest reproduction.

The checks find what they find: a server bug fails them, and the fix belongs in the server, never in
a looser check here.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.runtime import Generation
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.keys import NAMESPACE_HEADER
from memory_runtime.serving.serve_config import Limits, ServeConfig

DEMO_KEY = "memlm-demo-key"  # the shipped demo key (configs/serve/default.yaml): namespace "default"
OPS_KEY = "ops-key-0001"  # an operator's key: its own namespace "ops", any other named by Memlm-Namespace
WRONG_KEY = "wrong-key-0001"  # no key of this server
KEYS: dict[str, str | list[str]] = {DEMO_KEY: "default", OPS_KEY: ["ops", "*"]}


def fuzz_size(variable: str, default: int) -> int:
    """A fuzzer's size from the environment (`MEMLM_FUZZ_...=N`), else `default`."""
    value = os.environ.get(variable, "").strip()
    return int(value) if value else default


# --------------------------------------------------------------------------- the server


class ScriptedWriter(ScriptedBackend):
    """A stand-in model that takes the user's text at its word: it writes the text as a person's
    employer, reads that person back and answers with the text, so whatever a client sends in a chat
    (or a correction) reaches the controller's parser, the store and the reply."""

    def __init__(self, **_: object) -> None:
        super().__init__([], chunk=7)

    def start(self, messages: list[dict[str, str]]) -> None:
        text = messages[-1]["content"]
        name = " ".join(text.split())[:60] or "Ada Lin"
        self._turns = [[f"[MEM_WRITE{{{name}>>employed by>>Pfizer}}] [MEM_READ{{{name}>>>>}}:", f" Noted: {text[:80]}"]]
        super().start(messages)


def serve_config(keys: Mapping[str, str | list[str]] = KEYS, **limits: Any) -> ServeConfig:
    """The serve config of the fuzzed server: its keys, TestClient's and Schemathesis' Host
    ("testserver"), and wrong keys never slowed down (a fuzzer sends thousands; keys.FailedKeys has
    tests of its own in test_shared_machine.py)."""
    return ServeConfig(
        api_keys=dict(keys),
        api_keys_env=None,
        allowed_hosts=["testserver"],
        limits=Limits(**{"max_failed_keys": 10**9, **limits}),
        generation=Generation(max_new_tokens=64, max_calls=4),
    )


def make_app(store: TripletStore, keys: Mapping[str, str | list[str]] = KEYS) -> FastAPI:
    return create_app(serve_config(keys), store, OneAtATime.over(ScriptedWriter), model_name="scripted")


class AsServed:
    """The app as uvicorn serves it: an exception that escapes the app after its response started
    (Starlette's ServerErrorMiddleware sends the 500, then raises again for the server to log) is
    kept in `raised`, not thrown at the client; one before any response gets uvicorn's plain 500."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.raised: list[BaseException] = []

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        started = False

        async def sending(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as err:
            if scope["type"] != "http":
                raise
            self.raised.append(err)
            if not started:
                await send(
                    {"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"Internal Server Error"})

    def take_raised(self) -> list[BaseException]:
        raised, self.raised = self.raised, []
        return raised


@dataclass(frozen=True)
class Caller:
    """One kind of client: the headers it sends."""

    name: str
    headers: dict[str, str]


def callers(namespace: str | None = None) -> list[Caller]:
    """The four kinds of caller: the demo key, an operator's key (acting in `namespace` when given),
    a wrong key, no key."""
    ops = {"Authorization": f"Bearer {OPS_KEY}"}
    if namespace is not None:
        ops[NAMESPACE_HEADER] = namespace
    return [
        Caller("demo key", {"Authorization": f"Bearer {DEMO_KEY}"}),
        Caller("operator key", ops),
        Caller("wrong key", {"Authorization": f"Bearer {WRONG_KEY}"}),
        Caller("no key", {}),
    ]


# --------------------------------------------------------------------------- what every response must be

ERROR_FIELDS = {"message", "type", "param", "code"}

# What a message a person reads never holds: Python's and pydantic's own texts, an exception's name.
NOT_FOR_PEOPLE = [
    (re.compile(r"^\s*\d+\s*:"), "starts with a bare position number, as FastAPI's JSON decode error does"),
    (re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Warning)\b"), "names a Python exception"),
    (re.compile(r"set_int_max_str_digits|sys\.\w+"), "quotes Python's own advice to a programmer"),
    (re.compile(r"Traceback|File \"|line \d+, in "), "holds a traceback"),
    (re.compile(r"NoneType|<class |object has no attribute|unhashable type|not supported between"), "is Python's text"),
    (re.compile(r"codec can't|surrogates not allowed|int too large to convert|Python int"), "is Python's text"),
    (re.compile(r"\b(?:Value error|Assertion failed), "), "is pydantic's wrapper of a validator's text"),
    (
        re.compile(r"\b(?:list|dict|tuple|set|str|int|float|bool|literal|function-(?:after|before|wrap|plain))\["),
        "holds pydantic's type path",
    ),
    (re.compile(r"\[type=|input_value=|errors\.pydantic\.dev"), "holds pydantic's error repr"),
]
WORD = re.compile(r"[^\W\d_]{2,}")
QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")  # a value the message quotes (its repr)


def client_strings(*values: Any) -> list[str]:
    """Every string in what a client sent (JSON bodies, query and header values, nested)."""
    found: list[str] = []
    for value in values:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found += client_strings(*value.keys(), *value.values())
        elif isinstance(value, (list, tuple)):
            found += client_strings(*value)
    return found


def sentence_problem(message: object, said: Sequence[str] = ()) -> str | None:
    """Why `message` is no sentence a person can read, or None: it must be text with words (two at
    least), none of Python's or pydantic's own texts, no bare exception name. What it quotes (the
    client's own input, as repr writes it) is not read, nor what it echoes of `said` (the client's
    own strings: a fact whose object is "ValidationError" is named as the client wrote it)."""
    if not isinstance(message, str) or not message.strip():
        return "is empty or no string"
    own = QUOTED.sub("''", message)
    for pattern, why in NOT_FOR_PEOPLE:
        if any(not any(match.group(0) in text for text in said) for match in pattern.finditer(own)):
            return why
    if len(WORD.findall(own)) < 2:
        return "has fewer than two words"
    return None


def error_problems(status: int, content_type: str | None, body: bytes, said: Sequence[str] = ()) -> list[str]:
    """What is wrong with an error response (status >= 400): it must be JSON, exactly
    {"error": {message, type, param, code}}, message and type text, param and code text or null,
    and the message a sentence (sentence_problem)."""
    if not (content_type or "").startswith("application/json"):
        return [f"is not JSON (content-type {content_type!r})"]
    try:
        data = json.loads(body)
    except ValueError:
        return ["is no valid JSON"]
    if not isinstance(data, dict) or set(data) != {"error"} or not isinstance(data["error"], dict):
        return ["is not {'error': {...}}"]
    error = data["error"]
    problems = []
    if set(error) != ERROR_FIELDS:
        problems.append(f"has the fields {sorted(error)}, not {sorted(ERROR_FIELDS)}")
    if not isinstance(error.get("type"), str) or not error.get("type"):
        problems.append("has no type")
    for name in ("param", "code"):
        if not (error.get(name) is None or isinstance(error.get(name), str)):
            problems.append(f"has a {name} that is neither text nor null")
    why = sentence_problem(error.get("message"), said)
    if why is not None:
        problems.append(f"has a message that {why}")
    return problems


def response_problems(status: int, content_type: str | None, body: bytes, said: Sequence[str] = ()) -> list[str]:
    """Every check a response of the server must pass, whatever was asked: no 5xx, errors as
    error_problems says (`said`: the client's own strings, which a message may echo)."""
    problems = [f"is a server error ({status})"] if status >= 500 else []
    if status >= 400:
        problems += [f"error {status} {p}" for p in error_problems(status, content_type, body, said)]
    return problems


def error_message(body: bytes) -> str | None:
    try:
        return json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- what was found

_VARYING = re.compile(rf"{QUOTED.pattern}|\d+(?:\.\d+)?")


def shape(text: str) -> str:
    """A message with what varies from request to request (quoted values, numbers) masked: one
    kind of failure, whatever the input."""
    return _VARYING.sub("…", text)[:200]


@dataclass
class Finding:
    operation: str
    what: str
    request: str  # how to reproduce it
    response: str  # what came back
    count: int = 1


@dataclass
class Findings:
    """Failures, one per kind (operation and what failed), each with its shortest reproduction."""

    found: dict[tuple[str, str], Finding] = field(default_factory=dict)

    def add(self, operation: str, what: str, request: str, response: str) -> None:
        key = (operation, what)
        seen = self.found.get(key)
        if seen is None:
            self.found[key] = Finding(operation, what, request, response)
            return
        seen.count += 1
        if len(request) < len(seen.request):
            seen.request, seen.response = request, response

    def __bool__(self) -> bool:
        return bool(self.found)

    def __len__(self) -> int:
        return len(self.found)

    def report(self) -> str:
        lines = [f"{len(self.found)} distinct failures:"]
        for f in sorted(self.found.values(), key=lambda f: (f.operation, f.what)):
            lines.append(
                f"- {f.operation}: {f.what} ({f.count}x)\n    request:  {f.request}\n    response: {f.response}"
            )
        return "\n".join(lines)


def shown(status: int, body: bytes, limit: int = 300) -> str:
    text = body.decode("utf-8", "backslashreplace")
    return f"{status} {text[:limit]}{'…' if len(text) > limit else ''}"


def visible(text: str) -> str:
    """`text` with its invisible and unprintable characters spelled out (a report shows "\\u200b")."""
    return "".join(
        ch
        if ch.isprintable() and unicodedata.category(ch) not in ("Cf", "Cs")
        else ch.encode("unicode_escape").decode()
        for ch in text
    )
