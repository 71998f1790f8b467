"""The turn engine: the one interface that every engine decoding turns with the memory implements, and the
turn's request and result beside it.

A turn is a :class:`TurnRequest` (the chat messages, the memory it runs against, its limits and sampling);
it ends as a :class:`TurnResult` (the reply, the full text, a :class:`CallRecord` per call, counters). An
engine takes requests (:meth:`TurnEngine.submit`), advances every turn it holds by one step of its own
(:meth:`TurnEngine.step`: a token of every row, a vLLM step, or a whole turn) and hands back the turns that
finished. Inside every engine the memory controller (memory_runtime.generation.controller) executes a
turn's calls and says what the decoding does next; the engines only decode:

    BatchDecoder    (batching.py)      turns of a model in this process, many at once through one KV cache
    OneAtATime      (batching.py)      one turn at a time over any streaming backend (backend.py)
    VLLMDecoder     (vllm_backend.py)  turns through vLLM's engine

The server's scheduler, chat, corrections, eval, sampling and self-instruct use only this interface, so
each runs on whichever engine `generation.engine` opened (memory_runtime.generation.runtime).
:func:`check_engine` refuses anything else where an engine is accepted, naming what it lacks.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
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


Outcome = TurnResult | Exception
"""What an engine's step hands back for a finished turn: its result, or the error that failed that turn
alone (the engine dropped it and went on with the others)."""


def drop(waiting: deque[TurnRequest], request: TurnRequest) -> bool:
    """Take `request` out of an engine's queue (by identity: two turns may ask the same); whether it was there."""
    for i, queued in enumerate(waiting):
        if queued is request:
            del waiting[i]
            return True
    return False


Session = Generator[TurnRequest, TurnResult, Any]
"""A caller's turns that depend on each other: yields one request at a time, receives its result, returns
what it made of them (an episode's next statement waits for the previous one's writes)."""


class TurnEngine(ABC):
    """Decodes turns with their memory calls executed (see the module docstring). Not thread-safe: one
    thread submits and steps (the server's scheduler, or the drivers below)."""

    max_batch_size: int = 1  # turns decoded at once
    context: int | None = None  # the model's context in tokens, where known

    @abstractmethod
    def submit(self, request: TurnRequest) -> None:
        """Queue a turn; it joins the decoding when a place is free. ValueError: limits or sampling
        this engine cannot run (:meth:`TurnRequest.check`)."""

    @abstractmethod
    def step(self) -> list[tuple[TurnRequest, Outcome]]:
        """Admit waiting turns and advance every turn by one step of this engine; the turns that
        finished, with their results. A turn that fails on its own (its seed, its text, its memory)
        finishes with its exception as the outcome and the others go on; an exception raised by
        step itself is the engine's (a forward pass of the whole batch): every turn in it is lost."""

    @abstractmethod
    def abort(self, request: TurnRequest) -> bool:
        """Drop a submitted turn, waiting or being decoded, without a result (what it stored stays
        stored); False when it is not in this engine."""

    @abstractmethod
    def abort_all(self) -> None:
        """Drop every turn in this engine (a step failed: the batch is lost, the engine goes on)."""

    @property
    @abstractmethod
    def in_flight(self) -> int:
        """Turns submitted and not finished: waiting or being decoded."""

    @abstractmethod
    def prompt_tokens(self, request: TurnRequest) -> int | None:
        """How many tokens `request`'s prompt is as the turn is submitted, where this engine can tell
        (None: it cannot)."""

    @abstractmethod
    def close(self) -> None:
        """Release what the engine holds outside this process (vLLM's engine processes)."""

    # ------------------------------------------------------------------ drivers every engine shares

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    @property
    def room(self) -> int:
        """How many more turns can be submitted without waiting for a place."""
        return max(0, self.max_batch_size - self.in_flight)

    def run_turn(self, request: TurnRequest) -> TurnResult:
        """One turn, alone (on an engine that nothing else steps)."""
        return self.run([request])[0]

    def run(self, requests: Iterable[TurnRequest]) -> list[TurnResult]:
        """Decode independent turns; results in the order of `requests`."""

        def one(request: TurnRequest) -> Session:
            return (yield request)

        return self.run_sessions(one(r) for r in requests)

    def run_sessions(self, sessions: Iterable[Session], on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Drive sessions (generators that yield a TurnRequest and receive its TurnResult, one at a
        time) until each returns; their return values, in order. `on_done(index, value)` is called
        as each session ends."""
        pending = iter(enumerate(sessions))
        values: dict[int, Any] = {}
        owner: dict[int, tuple[int, Session]] = {}  # id(request) -> its session
        exhausted = False

        def advance(index: int, session: Session, result: TurnResult | None) -> None:
            try:
                request = next(session) if result is None else session.send(result)
            except StopIteration as stop:
                values[index] = stop.value
                if on_done:
                    on_done(index, stop.value)
                return
            owner[id(request)] = (index, session)
            self.submit(request)

        while True:
            while not exhausted and self.room:
                try:
                    index, session = next(pending)
                except StopIteration:
                    exhausted = True
                    break
                advance(index, session, None)
            if not self.busy:
                if exhausted:
                    break
                continue
            for request, result in self.step():
                index, session = owner.pop(id(request))
                if isinstance(result, Exception):  # a caller's own turns: its failure is the caller's
                    self.abort_all()
                    raise result
                advance(index, session, result)
        return [values[i] for i in sorted(values)]


INTERFACE = tuple(name for name in vars(TurnEngine) if not name.startswith("_"))
"""Every member of the interface (attributes, properties, methods), as :func:`check_engine` names them."""


def check_engine(engine: Any, what: str = "engine") -> TurnEngine:
    """`engine` when it is a :class:`TurnEngine`; else ValueError naming it and what it lacks (`what`:
    where it was given, e.g. "create_app(decoder=...)"), before anything is decoded."""
    if isinstance(engine, TurnEngine):
        return engine
    name = f"{type(engine).__module__}.{type(engine).__qualname__}"
    missing = [member for member in INTERFACE if not hasattr(engine, member)]
    lacks = f"it lacks {', '.join(missing)}" if missing else "it has the members but does not derive from TurnEngine"
    raise ValueError(f"{what}: {name} is not a turn engine (memory_runtime.generation.engine.TurnEngine): {lacks}")
