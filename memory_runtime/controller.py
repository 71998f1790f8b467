"""The controller: runs one user turn, executing the memory calls the model generates.

Generated text is fed to the protocol's StreamParser as it arrives. A complete MEM_WRITE is
stored at once; when a MEM_READ query closes ("}:") generation pauses, the store is queried,
the rendered results are appended to the assistant text and generation resumes from there.
Only generated text is ever parsed: calls typed by the user (or present in earlier turns)
are never executed.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal, Sequence

from memory_runtime.backend import Backend
from memory_runtime.protocol import (
    SYSTEM_PROMPT,
    Call,
    ParseError,
    StreamParser,
    Triplet,
    render_results,
    strip_calls,
)
from memory_runtime.store import FieldMatch, TripletStore

Status = Literal["ok", "max_calls", "max_tokens"]


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

    @property
    def overhead_seconds(self) -> float:
        """Time of the turn spent outside the model's forward passes."""
        return self.wall_seconds - self.model_seconds

    def to_dict(self) -> dict:
        return {**asdict(self), "overhead_seconds": self.overhead_seconds}


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
    ) -> None:
        if max_calls < 1 or max_new_tokens < 1:
            raise ValueError("max_calls and max_new_tokens must be at least 1")
        self.backend = backend
        self.store = store
        self.namespace = namespace
        self.system_prompt = system_prompt
        self.max_calls = max_calls
        self.max_new_tokens = max_new_tokens

    def run_turn(self, user_text: str, history: Sequence[dict[str, str]] = ()) -> TurnResult:
        """Generate the assistant's reply to `user_text`, running its memory calls."""
        start = time.perf_counter()
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages += [*history, {"role": "user", "content": user_text}]
        self.backend.start(messages)
        parser, text, calls, store_seconds = StreamParser(), "", [], 0.0
        status: Status = "ok"
        generated = 0
        while status == "ok":
            paused = False
            stream = self.backend.stream(self.max_new_tokens - generated)
            for piece in stream:
                events = parser.feed(piece)
                text += piece
                for event in events:
                    if isinstance(event, ParseError):
                        calls.append(CallRecord("error", event.text, status=event.message))
                        continue
                    if not isinstance(event, Call):
                        continue  # results we inserted ourselves
                    if sum(c.kind != "error" for c in calls) >= self.max_calls:
                        status = "max_calls"
                        text = text[: event.start]
                        break
                    t0 = time.perf_counter()
                    if event.kind == "write":
                        calls.append(self._write(event, text))
                    else:
                        record = self._read(event, text)
                        calls.append(record)
                        text = text[: event.end] + render_results(record.results)
                        paused = True
                    store_seconds += time.perf_counter() - t0
                    if paused:
                        break
                if paused or status != "ok":
                    break
            stream.close()
            generated = self.backend.stats.get("generated_tokens", generated)
            if status != "ok":
                break
            if paused:
                parser = StreamParser()
                parser.feed(text)  # the parser restarts from the text as it now is
                self.backend.resume(text)
                if generated >= self.max_new_tokens:
                    status = "max_tokens"
                continue
            for error in parser.close():
                calls.append(CallRecord("error", error.text, status=error.message))
            if generated >= self.max_new_tokens:
                status = "max_tokens"
            break
        return TurnResult(
            reply=strip_calls(text),
            text=text,
            calls=calls,
            status=status,
            generated_tokens=generated,
            wall_seconds=time.perf_counter() - start,
            model_seconds=self.backend.stats.get("forward_seconds", 0.0),
            store_seconds=store_seconds,
        )

    def _write(self, call: Call, text: str) -> CallRecord:
        try:
            result = self.store.write(*call.fields, namespace=self.namespace)  # type: ignore[arg-type]
        except (TypeError, ValueError) as err:
            return CallRecord("error", text[call.start : call.end], call.fields, status=str(err))
        return CallRecord(
            "write",
            text[call.start : call.end],
            call.fields,
            status=result.status,
            superseded=[f.triplet for f in result.superseded],
        )

    def _read(self, call: Call, text: str) -> CallRecord:
        subject, relation, object_ = call.fields
        try:
            result = self.store.query(subject, relation, object_, namespace=self.namespace)
        except (TypeError, ValueError) as err:
            return CallRecord("read", text[call.start : call.end], call.fields, status=f"rejected: {err}")
        return CallRecord(
            "read",
            text[call.start : call.end],
            call.fields,
            status="found" if result.facts else "empty",
            results=result.triplets,
            fuzzy=list(result.fuzzy.values()),
        )
