"""A scripted stand-in for a trained model: it writes and reads the memory as one would, without weights.

`ScriptedMemoryModel` reads the last user message. A statement of one of SENTENCES' forms ("Dorothea
Altemus works for Pfizer.") makes it write the fact and acknowledge it, as a trained model does:

    [MEM_WRITE{Dorothea Altemus>>employed by>>Pfizer}] Noted.

a question of those forms ("Who does Dorothea Altemus work for?", "Who invested in Pfizer?") makes it
read, then answer from what the memory returned (the controller inserts the results):

    [MEM_READ{Dorothea Altemus>>employed by>>}: {Dorothea Altemus>>employed by>>Pfizer}] Dorothea Altemus
    works for Pfizer.

and anything else gets "Hello.". Deterministic (temperature, top_p and seed are ignored), so a turn's
calls are known from its message: `memlm bench soak` drives the server with it, and its turns exercise
the store as a served model's do. Each piece it streams counts as a token, none as forward time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.protocol import ACK, parse_calls


@dataclass(frozen=True)
class Sentence:
    """How a fact of `relation` is said, and asked about: the question names `asks_for`'s other side."""

    relation: str  # its canonical name in the shipped relation table (memory_runtime/memory/relations.yaml)
    statement: str  # "{s} works for {o}."
    question: str  # "Who does {s} work for?" (asks for the object) or "Who invested in {o}?" (the subject)

    @property
    def asks_for(self) -> str:
        return "object" if "{s}" in self.question else "subject"

    def say(self, subject: str, object_: str) -> str:
        return self.statement.format(s=subject, o=object_)

    def ask(self, subject: str, object_: str) -> str:
        return self.question.format(s=subject, o=object_)


SENTENCES = (
    Sentence("employed by", "{s} works for {o}.", "Who does {s} work for?"),
    Sentence("investor in", "{s} invested in {o}.", "Who invested in {o}?"),
    Sentence("customer of", "{s} is a customer of {o}.", "Who is a customer of {o}?"),
    Sentence("member of", "{s} is a member of {o}.", "What is {s} a member of?"),
    Sentence("founder of", "{s} founded {o}.", "Who founded {o}?"),
)
GREETING = "Hello."
UNKNOWN = "I don't know."


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[so]\})", template)
    regex = "".join(f"(?P<{p[1]}>.+?)" if p in ("{s}", "{o}") else re.escape(p) for p in parts)
    return re.compile(regex + r"\s*$")


_STATEMENTS = [(_pattern(s.statement), s) for s in SENTENCES]
_QUESTIONS = [(_pattern(s.question), s) for s in SENTENCES]
_BY_RELATION = {s.relation: s for s in SENTENCES}


def _escaped(term: str) -> str:
    """A term inside a call: the characters the call syntax uses escaped."""
    return re.sub(r"([\\{}\[\]>;])", r"\\\1", term.strip())


def script(text: str) -> list[str | None]:
    """The turn's segments for a user message: a write and its acknowledgement, a read query (None:
    the answer, made from the read's results once the controller has inserted them), or a greeting."""
    text = text.strip()
    for pattern, sentence in _QUESTIONS:  # before statements: "Who founded Pfizer?" is no statement
        if match := pattern.match(text):
            known = match.groupdict()
            s, o = known.get("s", ""), known.get("o", "")
            return [f"[MEM_READ{{{_escaped(s)}>>{sentence.relation}>>{_escaped(o)}}}:", None]
    for pattern, sentence in _STATEMENTS:
        if match := pattern.match(text):
            s, o = match["s"], match["o"]
            return [f"[MEM_WRITE{{{_escaped(s)}>>{sentence.relation}>>{_escaped(o)}}}] {ACK}"]
    return [GREETING]


def answer(results: tuple | None) -> str:
    """What the stand-in says after a read: each fact found in its sentence, or that it does not know."""
    said = [
        (_BY_RELATION[t.relation].say(t.subject, t.object) if t.relation in _BY_RELATION else f"{' '.join(t)}.")
        for t in results or ()
    ]
    return " " + (" ".join(said) if said else UNKNOWN)


class ScriptedMemoryModel(ScriptedBackend):
    """The stand-in model (see the module): a BackendFactory (backend.py) as it stands (keyword arguments ignored)."""

    def __init__(self, chunk: int = 4, **_: object) -> None:
        super().__init__([], chunk=chunk)

    def start(self, messages: list[dict[str, str]]) -> None:
        last = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        self._turns = [script(last if isinstance(last, str) else "")]
        super().start(messages)

    def stream(self, max_new_tokens: int) -> Iterator[str]:
        if self._segments and self._segments[0] is None:  # after the read: answer from its results
            calls = parse_calls(self.assistant_text)
            self._segments[0] = answer(calls[-1].results if calls else None)
        return super().stream(max_new_tokens)
