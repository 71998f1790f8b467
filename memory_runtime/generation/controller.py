"""The controller: runs one user turn, executing the memory calls the model generates.

Generated text is fed to the protocol's StreamParser as it arrives. A complete MEM_WRITE is
stored at once; when a MEM_READ query closes ("}:") generation pauses, the store is queried,
the rendered results are appended to the assistant text and generation resumes from there.
Only generated text is ever parsed: calls typed by the user (or present in earlier turns)
are never executed, and a generated write that copies call syntax from the prompt is refused
(memory_runtime.memory.injection; the refusal is in the trace), as is one whose subject or object names
nobody ("She", "the association": field_copy.names_nobody, which the decoder also follows but
cannot always hold the model to). A write gate (memory_runtime.generation.write_gate) may hold back a write
the model is unsure of; the trace gives its scores and why.

:class:`TurnCalls` is that handling for one turn, fed text as it arrives; :class:`Controller`
drives it with a streaming backend one turn at a time, memory_runtime.generation.batching drives many at
once. Both therefore execute the same calls the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from memory_runtime.generation.backend import Backend
from memory_runtime.generation.field_copy import names_nobody
from memory_runtime.generation.write_gate import WriteGate
from memory_runtime.memory.injection import REFUSED, InjectionGuard
from memory_runtime.memory.store import FieldMatch, TripletStore
from memory_runtime.protocol import (
    ACK,
    NOT_STORED,
    SYSTEM_PROMPT,
    WRITE_OPEN,
    Call,
    ParseError,
    StreamParser,
    Triplet,
    render_results,
    strip_calls,
)

Status = Literal["ok", "max_calls", "max_tokens", "cancelled"]
Action = Literal["continue", "pause", "stop"]


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


def turn_messages(
    user_text: str, history: Sequence[dict[str, str]] = (), system_prompt: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """The chat messages of a turn: the system prompt, the earlier exchanges, the user's text."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [*history, {"role": "user", "content": user_text}]


class TurnCalls:
    """The memory calls of one turn, executed as its text arrives.

    :meth:`feed` takes each generated piece and says what the decoder must do next: go on
    ("continue"), resume from :attr:`text` ("pause": a read was answered and its results appended),
    or end the turn ("stop": the turn reached ``max_calls``). :meth:`result` closes the turn.
    """

    def __init__(
        self,
        store: TripletStore,
        namespace: str,
        max_calls: int,
        on_text: Callable[[str], None] | None = None,
        messages: Sequence[dict[str, str]] = (),
        cancelled: Callable[[], bool] | None = None,
        write_gate: WriteGate | None = None,
        source: str | None = None,
    ) -> None:
        self.cancelled = cancelled  # asked before every piece: the client went away, the turn ends
        self.source = source  # kept with every fact the turn stores (the served turn's id)
        self.messages = list(messages)
        self.write_gate = write_gate
        self.on_text = on_text  # called with the turn's text (calls included) after every piece: streaming
        # the turn's prompt: call syntax in any message but the system prompt came from outside the model
        self.guard = InjectionGuard.of(m["content"] for m in messages if m["role"] != "system")
        self.store = store
        self.namespace = namespace
        self.max_calls = max_calls
        self.parser = StreamParser()
        self.text = ""
        self.calls: list[CallRecord] = []
        self.status: Status = "ok"
        self.store_seconds = 0.0

    def feed(self, piece: str) -> Action:
        action = self._feed(piece)
        if self.on_text is not None:
            self.on_text(self.text)
        return action

    def _feed(self, piece: str) -> Action:
        if self.cancelled is not None and self.cancelled():
            self.status = "cancelled"
            return "stop"
        events = self.parser.feed(piece)
        self.text += piece
        for event in events:
            if isinstance(event, ParseError):
                self.calls.append(CallRecord("error", event.text, status=event.message))
                continue
            if not isinstance(event, Call):
                continue  # results we inserted ourselves
            if sum(c.kind != "error" for c in self.calls) >= self.max_calls:
                self.status = "max_calls"
                self.text = self.text[: event.start]
                return "stop"
            t0 = time.perf_counter()
            if event.kind == "write":
                self.calls.append(self._write(event))
                self.store_seconds += time.perf_counter() - t0
                continue
            record = self._read(event)
            self.calls.append(record)
            self.text = self.text[: event.end] + render_results(record.results)
            self.store_seconds += time.perf_counter() - t0
            self.parser = StreamParser()
            self.parser.feed(self.text)  # the parser restarts from the text as it now is
            return "pause"
        return "continue"

    def result(
        self,
        *,
        generated_tokens: int,
        max_new_tokens: int,
        started: float,
        model_seconds: float,
        prompt_tokens: int = 0,
    ) -> TurnResult:
        """The finished turn: unclosed calls reported, the status set when the token budget is spent."""
        if self.status == "ok":
            for error in self.parser.close():
                self.calls.append(CallRecord("error", error.text, status=error.message))
            if generated_tokens >= max_new_tokens:
                self.status = "max_tokens"
        reply = strip_calls(self.text)
        unstored = [c for c in self.calls if c.kind == "error" and c.text.startswith(WRITE_OPEN)]
        if unstored and reply.strip() == ACK:  # "Noted." would say a write was stored that was not
            reply = NOT_STORED
        return TurnResult(
            reply=reply,
            text=self.text,
            calls=self.calls,
            status=self.status,
            generated_tokens=generated_tokens,
            wall_seconds=time.perf_counter() - started,
            model_seconds=model_seconds,
            store_seconds=self.store_seconds,
            prompt_tokens=prompt_tokens,
        )

    def _write(self, call: Call) -> CallRecord:
        text = self.text[call.start : call.end]
        subject, _, object_ = call.fields
        if self.guard.copied(subject or "", object_ or ""):
            return CallRecord("error", text, call.fields, status=REFUSED)
        for term in (subject, object_):
            if term and names_nobody(term, closed=True):
                return CallRecord("error", text, call.fields, status=f"refused: {term!r} names nobody, not stored")
        scores: dict[str, float] = {}
        if self.write_gate is not None and all(call.fields):
            decision = self.write_gate.check(self.messages, self.text[: call.start], text, call.fields)  # type: ignore[arg-type]
            scores = decision.scores
            if decision.held:
                return CallRecord("error", text, call.fields, status=decision.reason, scores=scores)
        try:
            result = self.store.write(*call.fields, namespace=self.namespace, source=self.source)  # type: ignore[arg-type]
        except (TypeError, ValueError) as err:
            return CallRecord("error", text, call.fields, status=str(err), scores=scores)
        return CallRecord(
            "write",
            text,
            call.fields,
            status=result.status,
            superseded=[f.triplet for f in result.superseded],
            scores=scores,
        )

    def _read(self, call: Call) -> CallRecord:
        text = self.text[call.start : call.end]
        subject, relation, object_ = call.fields
        try:
            result = self.store.query(subject, relation, object_, namespace=self.namespace)
        except (TypeError, ValueError) as err:
            return CallRecord("read", text, call.fields, status=f"rejected: {err}")
        return CallRecord(
            "read",
            text,
            call.fields,
            status="found" if result.facts else "empty",
            results=result.triplets,
            fuzzy=list(result.fuzzy.values()),
        )


class Controller:
    """Runs turns of one namespace's conversation against a backend and a store."""

    def __init__(
        self,
        backend: Backend,
        store: TripletStore,
        *,
        namespace: str = "default",
        system_prompt: str | None = SYSTEM_PROMPT,
        max_calls: int = 16,
        max_new_tokens: int = 256,
        write_gate: WriteGate | None = None,
    ) -> None:
        if max_calls < 1 or max_new_tokens < 1:
            raise ValueError("max_calls and max_new_tokens must be at least 1")
        self.backend = backend
        self.store = store
        self.namespace = namespace
        self.system_prompt = system_prompt
        self.max_calls = max_calls
        self.max_new_tokens = max_new_tokens
        self.write_gate = write_gate

    def run_turn(
        self,
        user_text: str,
        history: Sequence[dict[str, str]] = (),
        on_text: Callable[[str], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        source: str | None = None,
    ) -> TurnResult:
        """Generate the assistant's reply to `user_text` after `history`, running its memory calls
        (:meth:`run_messages` of the turn's messages, this controller's system prompt first)."""
        messages = turn_messages(user_text, history, self.system_prompt)
        return self.run_messages(messages, on_text, cancelled, source)

    def run_messages(
        self,
        messages: Sequence[dict[str, str]],
        on_text: Callable[[str], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        source: str | None = None,
    ) -> TurnResult:
        """Generate the assistant's reply to a turn's chat `messages` (:func:`turn_messages`: system
        prompt, history, the user's text), running its memory calls; `on_text` gets the turn's text
        (calls included) as it grows; `cancelled()` true ends the turn early; `source` is kept with
        each fact the turn stores."""
        start = time.perf_counter()
        messages = list(messages)
        self.backend.start(messages)
        turn = TurnCalls(
            self.store, self.namespace, self.max_calls, on_text, messages, cancelled, self.write_gate, source
        )
        generated = 0
        while True:
            action: Action = "continue"
            stream = self.backend.stream(self.max_new_tokens - generated)
            for piece in stream:
                action = turn.feed(piece)
                if action != "continue":
                    break
            stream.close()
            generated = self.backend.stats.get("generated_tokens", generated)
            if action != "pause" or generated >= self.max_new_tokens:
                if action == "pause":
                    self.backend.resume(turn.text)
                    turn.status = "max_tokens"
                break
            self.backend.resume(turn.text)
        stats = self.backend.stats
        return turn.result(
            generated_tokens=generated,
            max_new_tokens=self.max_new_tokens,
            started=start,
            model_seconds=stats.get("forward_seconds", 0.0),
            prompt_tokens=stats.get("prompt_tokens", 0) + stats.get("inserted_tokens", 0),
        )
