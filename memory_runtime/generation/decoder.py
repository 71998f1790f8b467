"""The decoder: the one interface that every engine's decoding of turns with the memory implements.

A turn is a :class:`~memory_runtime.generation.turn.TurnRequest` and ends as a
:class:`~memory_runtime.generation.turn.TurnResult`. A decoder takes requests (:meth:`Decoder.submit`),
advances every turn it holds by one step of its own (:meth:`Decoder.step`: a token of every row, a vLLM
step, or a whole turn) and hands back the turns that finished. Inside every decoder the memory controller
(memory_runtime.generation.controller) executes a turn's calls and says what the decoding does next; the
decoders only decode. Which decoder runs is the configured engine's (`generation.engine`, opened by
memory_runtime.generation.runtime):

    BatchDecoder    (batching.py)      engine hf: turns of a model in this process, many at once through one KV cache
    OneAtATime      (batching.py)      engine onnx, or hf where the cache cannot be stacked: one turn at a time
                                       over any streaming backend (backend.py)
    VLLMDecoder     (vllm_decoder.py)  engine vllm: turns through vLLM's engine

The server's scheduler, chat, corrections, eval, sampling and self-instruct use only this interface, so
each runs on whichever engine was opened. :func:`check_decoder` refuses anything else where a decoder is
accepted, naming what it lacks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Generator, Iterable
from typing import Any

from memory_runtime.generation.turn import TurnRequest, TurnResult
from memory_runtime.progress import Advance

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


Session = Generator["TurnRequest | list[TurnRequest]", "TurnResult | list[TurnResult]", Any]
"""A caller's turns that depend on each other: yields one request at a time, receives its result, returns
what it made of them (an episode's next statement waits for the previous one's writes). Driven by
:meth:`Decoder.run_sessions`, it may yield a list of independent requests, decoded together, and receives
their results as a list in that order (the runs of a proposed turn: memory_runtime.generation.proposals)."""


class Decoder(ABC):
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

    def run_sessions(self, sessions: Iterable[Session], progress: Advance | None = None) -> list[Any]:
        """Drive sessions (generators that yield a TurnRequest and receive its TurnResult, one at a
        time) until each returns; their return values, in order. `progress(1)` is called as
        each session ends."""
        pending = iter(enumerate(sessions))
        values: dict[int, Any] = {}
        owner: dict[int, tuple[int, Session, list | None]] = {}  # id(request) -> its session (and its list)
        results: dict[int, TurnResult] = {}  # id(request) -> result, of a list not yet finished
        exhausted = False

        def advance(index: int, session: Session, result: TurnResult | list[TurnResult] | None) -> None:
            try:
                yielded = next(session) if result is None else session.send(result)
            except StopIteration as stop:
                values[index] = stop.value
                if progress is not None:
                    progress(1)
                return
            together = yielded if isinstance(yielded, list) else None
            for request in together if together is not None else [yielded]:
                owner[id(request)] = (index, session, together)
                self.submit(request)

        def finished(request: TurnRequest, result: TurnResult) -> None:
            index, session, together = owner.pop(id(request))
            if together is None:
                advance(index, session, result)
                return
            results[id(request)] = result
            if all(id(r) in results for r in together):
                advance(index, session, [results.pop(id(r)) for r in together])

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
                if isinstance(result, Exception):  # a caller's own turns: its failure is the caller's
                    self.abort_all()
                    raise result
                finished(request, result)
        return [values[i] for i in sorted(values)]


INTERFACE = tuple(name for name in vars(Decoder) if not name.startswith("_"))
"""Every member of the interface (attributes, properties, methods), as :func:`check_decoder` names them."""


def check_decoder(engine: Any, what: str = "engine") -> Decoder:
    """`engine` when it is a :class:`Decoder`; else ValueError naming it and what it lacks (`what`:
    where it was given, e.g. "create_app(decoder=...)"), before anything is decoded."""
    if isinstance(engine, Decoder):
        return engine
    name = f"{type(engine).__module__}.{type(engine).__qualname__}"
    missing = [member for member in INTERFACE if not hasattr(engine, member)]
    lacks = f"it lacks {', '.join(missing)}" if missing else "it has the members but does not derive from Decoder"
    raise ValueError(f"{what}: {name} is not a decoder (memory_runtime.generation.decoder.Decoder): {lacks}")
