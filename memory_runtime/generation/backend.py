"""What the controller needs from a text generator, and a scripted one for tests and demos.

The real backend (hf_backend.HFBackend) wraps a transformers causal LM; anything with these
three methods and a `stats` dict can drive the controller.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol


class Backend(Protocol):
    stats: dict  # counters since start(): generated_tokens, forward_seconds, ...

    def start(self, messages: list[dict[str, str]]) -> None:
        """Begin an assistant turn after these chat messages."""

    def stream(self, max_new_tokens: int) -> Iterator[str]:
        """Yield generated text pieces until end of turn or max_new_tokens; may be closed early."""

    def resume(self, assistant_text: str) -> None:
        """Set the assistant text so far (a prefix of what was generated + inserted results)."""


class BackendFactory(Protocol):
    def __call__(self, *, temperature: float, top_p: float, seed: int | None) -> Backend:
        """A fresh backend for one turn, sampling as the turn asks (OneAtATime.over calls it)."""


class ScriptedBackend:
    """Replays fixed assistant text, `chunk` characters at a time: the controller's mechanics
    can be tested without a model.

    Each turn is a list of segments: the first is streamed after start(), segment k after the
    k-th resume(). A segment may run past a read query's "}:" (as a real token can); the
    controller must cut it there. Every turn's messages are kept in `seen` for assertions.
    """

    def __init__(self, turns: Sequence[Sequence[str] | str], chunk: int = 3) -> None:
        self._turns = [[t] if isinstance(t, str) else list(t) for t in turns]
        self._chunk = chunk
        self._segments: list[str] = []
        self.seen: list[list[dict[str, str]]] = []
        self.assistant_text = ""
        self.stats: dict = {}

    def start(self, messages: list[dict[str, str]]) -> None:
        if not self._turns:
            raise RuntimeError("ScriptedBackend has no scripted turn left")
        self.seen.append(list(messages))
        self._segments = self._turns.pop(0)
        self.assistant_text = ""
        self.stats = {"generated_tokens": 0, "forward_seconds": 0.0, "forwards": 0}

    def stream(self, max_new_tokens: int) -> Iterator[str]:
        segment = self._segments.pop(0) if self._segments else ""
        for i in range(0, len(segment), self._chunk):
            if max_new_tokens <= 0:
                return
            piece = segment[i : i + self._chunk]
            self.assistant_text += piece
            self.stats["generated_tokens"] += 1
            self.stats["forwards"] += 1
            max_new_tokens -= 1
            yield piece

    def resume(self, assistant_text: str) -> None:
        self.assistant_text = assistant_text
