"""A turn: its request (the chat messages, the memory it runs against, its limits and sampling) and its
result (the reply, the full text, a :class:`CallRecord` per call, counters), whichever decoder runs it
(memory_runtime.generation.decoder)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from memory_runtime.memory.facts import FieldMatch
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT, Triplet

Status = Literal["ok", "max_calls", "max_tokens", "cancelled"]

SEED_RANGE = (-(2**63), 2**63 - 1)  # what every engine's random generator takes (torch, vLLM): a signed 64-bit integer


def turn_messages(
    user_text: str, history: Sequence[dict[str, str]] = (), system_prompt: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """The chat messages of a turn: the system prompt, the earlier exchanges, the user's text."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [*history, {"role": "user", "content": user_text}]


def check_sampling(temperature: float, top_p: float) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


@dataclass
class TurnRequest:
    """One turn to decode: the chat messages (system prompt included: :func:`turn_messages`), the
    memory it runs against, its limits and sampling, and an optional callback for streaming."""

    messages: list[dict[str, str]]
    store: TripletStore
    namespace: str = "default"
    max_new_tokens: int = 256
    max_calls: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    on_text: Callable[[str], None] | None = None  # called with the turn's full text (calls included) as it grows
    tag: Any = None  # the caller's own handle (not used here)
    source: str | None = None  # kept with each fact the turn stores (the server: the completion's id)
    cancel: threading.Event = field(default_factory=threading.Event)  # set: the turn ends at its next piece
    gate_writes: bool = True  # False: the engine's write gate holds nothing back (a correction: the user said it)
    said_at: datetime | None = None  # when the user said it: its facts are dated so, "yesterday" resolved against it

    def check(self) -> None:
        """Raise ValueError for limits, sampling or text that no engine runs, before the turn joins a
        batch: a turn that fails inside one fails alone, but one refused here costs nobody a step."""
        check_sampling(self.temperature, self.top_p)
        if self.max_calls < 1 or self.max_new_tokens < 1:
            raise ValueError("max_calls and max_new_tokens must be at least 1")
        seed = self.seed
        if seed is not None and (type(seed) is not int or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]):
            raise ValueError(f"seed must be an integer from {SEED_RANGE[0]} to {SEED_RANGE[1]}, got {seed!r}")
        for i, message in enumerate(self.messages):
            content = message.get("content")
            if not isinstance(content, str):
                raise ValueError(f"message {i} has no text content")
            if not content.isascii():
                unreadable = unencodable(content)
                if unreadable is not None:
                    raise ValueError(f"message {i} {unreadable}")


def unencodable(text: str) -> str | None:
    """What keeps `text` from being UTF-8 (a lone surrogate, which no tokenizer reads), as the end of a
    sentence; None when it is fine."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate ({text[err.start]!r} at character {err.start}), which is no Unicode character"
    return None


@dataclass
class CallRecord:
    """One executed (or rejected) call of a turn, for the trace."""

    kind: Literal["write", "read", "error"]
    text: str  # the call as generated
    fields: tuple[str | None, str | None, str | None] | None = None
    status: str = ""  # write: stored/duplicate; read: found/empty; error: why
    results: list[Triplet] = field(default_factory=list)  # read: what the memory returned
    superseded: list[Triplet] = field(default_factory=list)  # write: facts it replaced
    fuzzy: list[FieldMatch] = field(default_factory=list)  # read: fields matched approximately
    store_ms: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)  # write: the write gate's signals, where scored
    run: int = 0  # write: the run of the turn that proposed it (0: its greedy run; generation.propose)


@dataclass
class TurnResult:
    reply: str  # what the user sees: the assistant text with every call and result removed
    text: str  # the full assistant text, calls and inserted results included
    calls: list[CallRecord]
    status: Status
    generated_tokens: int
    wall_seconds: float
    model_seconds: float  # inside the model's forward passes
    store_seconds: float
    prompt_tokens: int = 0  # tokens the model read but did not generate: the prompt and inserted results

    @property
    def overhead_seconds(self) -> float:
        """Time of the turn spent outside the model's forward passes."""
        return self.wall_seconds - self.model_seconds

    def to_dict(self) -> dict:
        return {**asdict(self), "overhead_seconds": self.overhead_seconds}
