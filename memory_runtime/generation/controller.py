"""The memory controller: executes the memory calls of one turn as the model generates them, and says
what the decoding does next. Every engine (memory_runtime.generation.decoder) runs one per turn.

Generated text is fed to the protocol's StreamParser as it arrives. A complete MEM_WRITE is
stored at once; when a MEM_READ query closes ("}:") generation pauses, the store is queried,
the rendered results are appended to the assistant text and generation resumes from there.
Only generated text is ever parsed: calls typed by the user (or present in earlier turns)
are never executed, and a generated write that copies call syntax from the prompt is refused
(memory_runtime.memory.injection; the refusal is in the trace), as is one whose subject or object names
nobody ("She", "the association": field_copy.names_nobody, which the decoder also follows but
cannot always hold the model to). A write gate (memory_runtime.generation.write_gate) may hold back a write
the model is unsure of; the trace gives its scores and why.

The loop of a turn is written here once, in :meth:`MemoryController.advance`: the engine hands over each
decoded piece; at a read the controller has the engine resume from the text with the results
(:class:`TurnDecoding`), a turn that reached ``max_calls`` or its end stops, and the token budget
(:attr:`MemoryController.tokens_left`) ends the decoding. The engines only decode and resume.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Literal, Protocol

from memory_runtime.generation.field_copy import common_object, names_nobody
from memory_runtime.generation.turn import CallRecord, Status, TurnRequest, TurnResult
from memory_runtime.generation.write_gate import WriteGate
from memory_runtime.memory.dates import resolve_relative_times
from memory_runtime.memory.facts import WriteResult
from memory_runtime.memory.injection import REFUSED, InjectionGuard
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import (
    ACK,
    NOT_STORED,
    WRITE_OPEN,
    Call,
    ParseError,
    StreamParser,
    render_results,
    strip_calls,
)

Action = Literal["continue", "pause", "stop"]


def store_write(
    store: TripletStore,
    fields: tuple[str | None, str | None, str | None],
    *,
    namespace: str,
    source: str | None,
    said_at: datetime | None,
) -> WriteResult:
    """A generated write stored: dated `said_at`, relative time in its object resolved against it ("support
    group yesterday" said on 8 May 2023 -> "on 7 May 2023"), kept with its `source`. TypeError, ValueError:
    a field the store refuses."""
    subject, relation, object_ = fields
    if said_at is not None and object_:
        object_ = resolve_relative_times(object_, said_at)
    return store.write(subject, relation, object_, namespace=namespace, source=source, at=said_at)  # type: ignore[arg-type]


class TurnDecoding(Protocol):
    """What the controller needs of the engine's decoding of a turn."""

    @property
    def generated_tokens(self) -> int:
        """Tokens the model generated in this turn so far (inserted results are not generated)."""

    def resume(self, text: str) -> None:
        """Go on decoding from `text`: the turn's text so far with a read's results appended."""


class MemoryController:
    """The memory calls of one turn (`request`), executed as its text arrives, and the turn's loop.

    The engine calls :meth:`advance` with each decoded piece and stops decoding when it says the turn
    is over; it gives the decoding at most :attr:`tokens_left` more tokens; :meth:`result` closes the
    turn. `write_gate` scores the turn's writes (unless the request says not to) and may hold some back.
    """

    def __init__(self, request: TurnRequest, decoding: TurnDecoding, write_gate: WriteGate | None = None) -> None:
        self.decoding = decoding
        self.max_new_tokens = request.max_new_tokens
        self.cancelled = request.cancel.is_set  # asked before every piece: the client went away, the turn ends
        self.source = request.source  # kept with every fact the turn stores (the served turn's id)
        self.said_at = request.said_at  # the facts' date; relative time in an object is resolved against it
        self.messages = list(request.messages)
        self.write_gate = write_gate if request.gate_writes else None
        self.on_text = request.on_text  # called with the turn's text (calls included) after every piece: streaming
        # the turn's prompt: call syntax in any message but the system prompt came from outside the model
        self.guard = InjectionGuard.of(m["content"] for m in self.messages if m["role"] != "system")
        self.store = request.store
        self.namespace = request.namespace
        self.max_calls = request.max_calls
        self.parser = StreamParser()
        self.text = ""
        self.calls: list[CallRecord] = []
        self.status: Status = "ok"
        self.store_seconds = 0.0
        self.started = time.perf_counter()

    # ------------------------------------------------------------------ the loop of a turn

    @property
    def tokens_left(self) -> int:
        """How many more tokens the decoding may generate: at 0 it ends (the flushed text held back
        until then is its last piece)."""
        return self.max_new_tokens - self.decoding.generated_tokens

    def advance(self, piece: str, *, ended: bool = False) -> bool:
        """Take the next decoded `piece` (`ended`: the decoding stopped after it: the model ended the turn,
        or its tokens ran out); True when the turn is over. A read's results are appended and the
        decoding resumed from them; a read with no tokens left after it ends the turn (max_tokens)."""
        action = self._feed(piece) if piece else "continue"
        if action == "pause":
            self.decoding.resume(self.text)
            if self.tokens_left <= 0:
                self.status = "max_tokens"
                return True
            return False
        return action == "stop" or ended

    def result(self, *, model_seconds: float, prompt_tokens: int = 0) -> TurnResult:
        """The finished turn: unclosed calls reported, the status set when the token budget is spent."""
        generated_tokens = self.decoding.generated_tokens
        if self.status == "ok":
            for error in self.parser.close():
                self.calls.append(CallRecord("error", error.text, status=error.message))
            if generated_tokens >= self.max_new_tokens:
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
            wall_seconds=time.perf_counter() - self.started,
            model_seconds=model_seconds,
            store_seconds=self.store_seconds,
            prompt_tokens=prompt_tokens,
        )

    # ------------------------------------------------------------------ the calls

    def _feed(self, piece: str) -> Action:
        """Execute what `piece` completes: go on ("continue"), resume from :attr:`text` ("pause": a read
        was answered and its results appended), or end the turn ("stop": max_calls, or cancelled)."""
        action = self._execute(piece)
        if self.on_text is not None:
            self.on_text(self.text)
        return action

    def _execute(self, piece: str) -> Action:
        if self.cancelled():
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

    def _write(self, call: Call) -> CallRecord:
        text = self.text[call.start : call.end]
        subject, _, object_ = call.fields
        if self.guard.copied(subject or "", object_ or ""):
            return CallRecord("error", text, call.fields, status=REFUSED)
        try:  # a relation the store refuses (call syntax, a control character) fails this write, not the turn
            relation = self.store.canonical_relation(call.fields[1] or "")
        except (TypeError, ValueError) as err:
            return CallRecord("error", text, call.fields, status=str(err))
        config = self.store.config
        object_common = common_object(relation, config.relation_names, config.common_objects)
        for term, common in ((subject, False), (object_, object_common)):
            if term and names_nobody(term, closed=True, common=common):
                return CallRecord("error", text, call.fields, status=f"refused: {term!r} names nobody, not stored")
        scores: dict[str, float] = {}
        if self.write_gate is not None and all(call.fields):
            decision = self.write_gate.check(self.messages, self.text[: call.start], text, call.fields)  # type: ignore[arg-type]
            scores = decision.scores
            if decision.held:
                return CallRecord("error", text, call.fields, status=decision.reason, scores=scores)
        try:
            result = store_write(
                self.store, call.fields, namespace=self.namespace, source=self.source, said_at=self.said_at
            )
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
