"""The memory-call text format: the one definition every part of memlm imports.

Models talk to the triplet memory with inline calls:

    write:  [MEM_WRITE{subject>>relation>>object}]
    read:   [MEM_READ{q1>>q2>>q3}:  ...results appended by the controller...
    result:  {s>>r>>o}; {s>>r>>o}]      or, when nothing matched,   NONE]

A full read transcript therefore looks like
    [MEM_READ{>>employed by>>Pfizer}: {Dorothea Altemus>>employed by>>Pfizer}; {Tia Batres>>employed by>>Pfizer}]

Inside braces a backslash escapes the next character, fields are split on unescaped
'>>' and unescaped whitespace around each field is stripped. The parser is a single
character-level state machine (StreamParser) so that the runtime controller can pause
generation exactly when a read query closes, and so that results never depend on how
the text was chunked; parse_calls and strip_calls are thin wrappers around it.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

WRITE_VERB = "MEM_WRITE"
READ_VERB = "MEM_READ"
SEPARATOR = ">>"
EMPTY_RESULT = "NONE"
WRITE_OPEN = "[" + WRITE_VERB + "{"
READ_OPEN = "[" + READ_VERB + "{"
WRITE_CLOSE = "}]"
READ_QUERY_CLOSE = "}:"

# The system message a memory-using model is trained and served with (a run records it in its
# train_config.yaml; memory_runtime.models.trained_run.trained_system_prompt gives it back). Short on
# purpose: a trained model learns the format from its data, and every token here is paid in
# every training record and every turn (a one-sentence description of the calls was a third of
# the CPU recipe's tokens).
SYSTEM_PROMPT = "You have a memory."

# What the model says after the write calls of a statement (data_gen's default replies.ack; feedback
# trajectories end their writes with it).
ACK = "Noted."

NOT_STORED = "I could not store that."
"""The reply of a turn whose only answer was the acknowledgement while a write failed (refused,
held back, malformed, cut by the token limit): the user must not be told it was stored."""

_CALL_PREFIX = "[MEM_"  # '[' + this prefix + verb chars + '{' starts a call
_VERB_CHARS = frozenset(string.ascii_letters + "_")
_MAX_HEAD = 48  # longer "[MEM_XXXX..." runs are treated as text (keeps the head buffer bounded)
_SPECIAL = frozenset("\\{}[]>;")  # always escaped by escape_term
_FIELD_NAMES = ("subject", "relation", "object")
_NONE_TAIL = EMPTY_RESULT + "]"


class Triplet(NamedTuple):
    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class Call:
    """A well-formed memory call found in the text.

    `fields` holds the unescaped, stripped fields; for reads empty fields are None.
    `start`/`end` span the call itself ("[" up to just past "}]" or "}:"); for a read,
    `results`/`results_end` describe the results that followed it in the transcript
    (() for NONE, None when there were none).
    """

    kind: Literal["write", "read"]
    fields: tuple[str | None, str | None, str | None]
    start: int
    end: int
    results: tuple[Triplet, ...] | None = None
    results_end: int | None = None


@dataclass(frozen=True)
class ReadResults:
    """Streaming event: the results after a read query, spanning from just past "}:" to past "]"."""

    triplets: tuple[Triplet, ...]
    start: int
    end: int


@dataclass(frozen=True)
class ParseError:
    """A malformed call (or malformed results); `text` is the offending snippet text[start:end]."""

    message: str
    start: int
    end: int
    text: str


# ----------------------------------------------------------------------------- rendering


def escape_term(term: str) -> str:
    """Escape a term so that parsing the rendered call gives back exactly `term`.

    Structural characters are always escaped; leading/trailing whitespace is escaped
    too, because the parser strips unescaped whitespace around fields.
    """
    out = ["\\" + c if c in _SPECIAL else c for c in term]
    lo, hi = 0, len(term) - 1
    while lo <= hi and term[lo].isspace():
        out[lo] = "\\" + term[lo]
        lo += 1
    while hi >= lo and term[hi].isspace():
        out[hi] = "\\" + term[hi]
        hi -= 1
    return "".join(out)


def _checked(term: object, what: str) -> str:
    if not isinstance(term, str):
        raise ValueError(f"{what} must be a str, got {type(term).__name__}")
    if not term:
        raise ValueError(f"{what} must be non-empty")
    return escape_term(term)


def render_write(subject: str, relation: str, object: str) -> str:
    """Render a write call. Raises ValueError for empty or non-str terms."""
    body = SEPARATOR.join(_checked(t, n) for t, n in zip((subject, relation, object), _FIELD_NAMES))
    return WRITE_OPEN + body + WRITE_CLOSE


def render_read(q1: str | None = None, q2: str | None = None, q3: str | None = None) -> str:
    """Render a read query up to and including "}:" (None = wildcard field).

    Raises ValueError if every field is None, or a field is "" or not a str.
    """
    qs = (q1, q2, q3)
    if all(q is None for q in qs):
        raise ValueError("read query needs at least one filled field")
    body = SEPARATOR.join("" if q is None else _checked(q, f"q{i + 1}") for i, q in enumerate(qs))
    return READ_OPEN + body + READ_QUERY_CLOSE


def _as_terms(item: object) -> tuple[object, object, object]:
    if all(hasattr(item, name) for name in _FIELD_NAMES):
        return (item.subject, item.relation, item.object)  # type: ignore[attr-defined]
    if isinstance(item, (str, bytes)):
        raise ValueError(f"result must be a triplet, got {item!r}")
    try:
        parts = tuple(item)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"result must be a triplet, got {item!r}") from None
    if len(parts) != 3:
        raise ValueError(f"result triplet has {len(parts)} items, expected 3")
    return parts  # type: ignore[return-value]


def render_results(triplets: Iterable) -> str:
    """Render the text a controller appends after "}:": " {s>>r>>o}; {s>>r>>o}]" or " NONE]".

    Items may be Triplets, 3-tuples, or any object with .subject/.relation/.object.
    """
    rendered = []
    for item in triplets:
        terms = _as_terms(item)
        rendered.append("{" + SEPARATOR.join(_checked(t, n) for t, n in zip(terms, _FIELD_NAMES)) + "}")
    if not rendered:
        return " " + _NONE_TAIL
    return " " + "; ".join(rendered) + "]"


# ----------------------------------------------------------------------------- parsing


class _Fields:
    """Accumulates the body of a call or result triplet one char at a time.

    Handles backslash escapes, splits on unescaped '>>' (a lone '>' is literal,
    '>>>' is a separator then '>'), and strips unescaped whitespace around fields.
    """

    __slots__ = ("done", "buf", "keep", "escaped", "gt")

    def __init__(self) -> None:
        self.done: list[str] = []
        self.buf: list[str] = []
        self.keep = 0  # len(buf) up to the last char that survives right-stripping
        self.escaped = False
        self.gt = False  # an unescaped '>' waiting to learn whether it starts '>>'

    def _put(self, ch: str, literal: bool) -> None:
        if not literal and ch.isspace():
            if self.buf:  # leading unescaped whitespace is dropped, inner kept for now
                self.buf.append(ch)
            return
        self.buf.append(ch)
        self.keep = len(self.buf)

    def _flush_gt(self) -> None:
        if self.gt:
            self.gt = False
            self._put(">", True)

    def _split(self) -> None:
        self.done.append("".join(self.buf[: self.keep]))
        self.buf, self.keep = [], 0

    def take(self, ch: str) -> str | None:
        """Consume one char; return it if it is an unescaped brace or bracket (caller decides)."""
        if self.escaped:
            self.escaped = False
            self._put(ch, True)
            return None
        if ch == ">":
            if self.gt:
                self.gt = False
                self._split()
            else:
                self.gt = True
            return None
        self._flush_gt()
        if ch == "\\":
            self.escaped = True
        elif ch in "{}[]":
            return ch
        else:
            self._put(ch, False)
        return None

    def finish(self) -> list[str]:
        self._flush_gt()
        self._split()
        return self.done


# Parser states.
_TEXT = 0  # ordinary text: scan for '['
_HEAD = 1  # matching "[MEM_<verb>{"
_BODY = 2  # inside a call's fields
_CLOSING = 3  # saw an unescaped '}' in a call; next must be ']' or ':'
_AFTER_QUERY = 4  # after a read query's "}:": do results follow?
_RES_BODY = 5  # inside a result triplet "{...}"
_RES_NEXT = 6  # after a result triplet: expect ';' or ']'
_RES_OPEN = 7  # after ';': expect '{'


class StreamParser:
    """Incremental, chunking-independent parser for memory calls.

    feed() returns events as soon as they are decided: a write Call when its "}]" is
    fed, a read Call (results=None) when its "}:" is fed, a ReadResults when the
    results' closing "]" is fed, and ParseErrors. Offsets are absolute in the stream.
    It never raises; malformed input becomes ParseError events.
    """

    def __init__(self) -> None:
        self._pos = 0
        self._state = _TEXT
        self._start = 0  # start of the call (or of the results) being parsed
        self._head = ""  # "[MEM_..." matched so far
        self._verb = ""
        self._raw: list[str] = []  # raw text since self._start, for error snippets
        self._fields = _Fields()
        self._none = 0  # chars of "NONE]" matched after a read query
        self._triplets: list[Triplet] = []
        self._res_error: str | None = None  # first bad result triplet, reported at "]"

    @property
    def position(self) -> int:
        """Number of chars fed so far."""
        return self._pos

    @property
    def pending(self) -> int | None:
        """Where the text not decided yet starts (a call head, a call, or read results that may still
        be open); None when everything fed is plain text or finished calls."""
        if self._state == _TEXT:
            return None
        if self._state == _HEAD:
            return self._pos - len(self._head)
        return self._start

    def feed(self, chunk: str) -> list[Call | ReadResults | ParseError]:
        events: list[Call | ReadResults | ParseError] = []
        base, i, n = self._pos, 0, len(chunk)
        while i < n:
            if self._state == _TEXT:  # fast path: plain text costs one str.find
                i = chunk.find("[", i)
                if i < 0:
                    break
                self._state, self._head = _HEAD, "["
            else:
                self._step(chunk[i], base + i, events)
            i += 1
        self._pos = base + n
        return events

    def close(self) -> list[ParseError]:
        """End of stream: report a call or results left open, then reset to text."""
        errors = []
        if self._state in (_BODY, _CLOSING):
            errors.append(self._error("unterminated call", self._pos))
        elif self._state in (_RES_BODY, _RES_NEXT, _RES_OPEN):
            errors.append(self._error("unterminated read results", self._pos))
        self._state = _TEXT
        return errors

    # -- helpers

    def _error(self, message: str, end: int) -> ParseError:
        self._state = _TEXT
        return ParseError(message, self._start, end, "".join(self._raw))

    def _text(self, ch: str, pos: int) -> None:
        """Go back to text mode with `ch` (at `pos`) as the first text char."""
        if ch == "[":
            self._state, self._head = _HEAD, "["
        else:
            self._state = _TEXT

    def _restart_at_bracket(self, message: str, pos: int, events: list) -> None:
        """An unescaped '[' cuts the current call short; a new call may start there."""
        events.append(self._error(message, pos))
        self._text("[", pos)

    # -- the state machine, one char at a time

    def _step(self, ch: str, pos: int, events: list) -> None:
        state = self._state
        if state == _HEAD:
            head = self._head + ch
            if len(head) <= len(_CALL_PREFIX):
                if _CALL_PREFIX.startswith(head):
                    self._head = head
                else:
                    self._text(ch, pos)
            elif ch == "{":
                self._state, self._start, self._verb = _BODY, pos + 1 - len(head), head[1:-1]
                self._raw, self._fields = [head], _Fields()
            elif ch in _VERB_CHARS and len(head) < _MAX_HEAD:
                self._head = head
            else:
                self._text(ch, pos)

        elif state == _BODY:
            special = self._fields.take(ch)
            if special is None:
                self._raw.append(ch)
            elif special == "}":
                self._raw.append(ch)
                self._state = _CLOSING
            elif special == "[":
                self._restart_at_bracket("unterminated call", pos, events)
            else:
                self._raw.append(ch)
                what = "unbalanced '{' inside call" if ch == "{" else "unexpected ']' inside call (missing '}')"
                events.append(self._error(what, pos + 1))

        elif state == _CLOSING:
            if ch == "[":
                self._restart_at_bracket("unbalanced '}' inside call", pos, events)
                return
            self._raw.append(ch)
            if ch in "]:":
                self._close_call(ch, pos + 1, events)
            else:
                events.append(self._error("unbalanced '}' inside call", pos + 1))

        elif state == _AFTER_QUERY:
            if self._none == 0 and ch.isspace():
                self._raw.append(ch)
            elif self._none == 0 and ch == "{":
                self._raw.append(ch)
                self._state, self._fields = _RES_BODY, _Fields()
                self._triplets, self._res_error = [], None
            elif ch == _NONE_TAIL[self._none]:
                self._raw.append(ch)
                self._none += 1
                if self._none == len(_NONE_TAIL):
                    events.append(ReadResults((), self._start, pos + 1))
                    self._state = _TEXT
            else:  # not results after all: the read simply has none
                self._text(ch, pos)

        elif state == _RES_BODY:
            special = self._fields.take(ch)
            if special == "[":
                self._restart_at_bracket("unterminated read results", pos, events)
                return
            self._raw.append(ch)
            if special == "}":
                self._finish_triplet()
            elif special is not None:
                what = "unbalanced '{' inside read results" if ch == "{" else "unexpected ']' inside result triplet"
                events.append(self._error(what, pos + 1))

        else:  # _RES_NEXT or _RES_OPEN: between result triplets
            if ch == "[":
                self._restart_at_bracket("unterminated read results", pos, events)
                return
            self._raw.append(ch)
            if ch.isspace():
                return
            if state == _RES_OPEN and ch == "{":
                self._state, self._fields = _RES_BODY, _Fields()
            elif state == _RES_NEXT and ch == ";":
                self._state = _RES_OPEN
            elif state == _RES_NEXT and ch == "]":
                if self._res_error is not None:
                    events.append(self._error(self._res_error, pos + 1))
                else:
                    events.append(ReadResults(tuple(self._triplets), self._start, pos + 1))
                    self._state = _TEXT
            else:
                expected = "'{' after ';'" if state == _RES_OPEN else "';' or ']' after result triplet"
                events.append(self._error(f"malformed read results: expected {expected}", pos + 1))

    def _close_call(self, closer: str, end: int, events: list) -> None:
        fields = self._fields.finish()
        problem = _call_problem(self._verb, closer, fields)
        if problem is not None:
            events.append(self._error(problem, end))
        elif self._verb == WRITE_VERB:
            events.append(Call("write", (fields[0], fields[1], fields[2]), self._start, end))
            self._state = _TEXT
        else:
            q1, q2, q3 = (f or None for f in fields)
            events.append(Call("read", (q1, q2, q3), self._start, end))
            # Results (if any) span from just past "}:" so that text[start:end] == render_results(...).
            self._state, self._start, self._raw, self._none = _AFTER_QUERY, end, [], 0

    def _finish_triplet(self) -> None:
        fields = self._fields.finish()
        self._state = _RES_NEXT
        if self._res_error is not None:
            return
        if len(fields) != 3:
            self._res_error = f"result triplet has {len(fields)} fields, expected 3"
        elif not all(fields):
            self._res_error = f"empty {_FIELD_NAMES[fields.index('')]} in result triplet"
        else:
            self._triplets.append(Triplet(*fields))


def _call_problem(verb: str, closer: str, fields: list[str]) -> str | None:
    """Why a closed call is invalid, or None if it is fine."""
    if verb == WRITE_VERB:
        if closer != "]":
            return "write call must end with '}]'"
        if len(fields) != 3:
            return f"write call has {len(fields)} fields, expected 3"
        for name, field in zip(_FIELD_NAMES, fields):
            if not field:
                return f"empty {name} in write call"
        return None
    if verb == READ_VERB:
        if closer != ":":
            return "read query must end with '}:'"
        if len(fields) != 3:
            return f"read query has {len(fields)} fields, expected 3"
        if not any(fields):
            return "read query has no filled field"
        return None
    return f"unknown verb {verb!r}"


def parse_calls(text: str) -> list[Call | ParseError]:
    """All calls and errors in `text`, in order; each read carries the results that follow it."""
    parser = StreamParser()
    out: list[Call | ParseError] = []
    for event in parser.feed(text) + parser.close():
        if isinstance(event, ReadResults):
            # A ReadResults event always comes right after its read Call.
            out[-1] = replace(out[-1], results=event.triplets, results_end=event.end)  # type: ignore[type-var]
        else:
            out.append(event)
    return out


def strip_calls(text: str) -> str:
    """The user-visible text: every call, its results and malformed call spans removed.

    Whitespace doubled up where a call was cut out is tidied, and the ends are stripped.
    """
    pieces, cursor = [], 0
    for event in parse_calls(text):
        end = event.end
        if isinstance(event, Call) and event.results_end is not None:
            end = event.results_end
        pieces.append(text[cursor : max(cursor, event.start)])
        cursor = max(cursor, end)
    pieces.append(text[cursor:])

    out = pieces[0]
    for piece in pieces[1:]:  # every seam is a place where something was removed
        if out[-1:].isspace():
            piece = piece.lstrip(" \t")
        if piece[:1] in ("\n", "\r", ".", ",", ";", ":", "!", "?", ")"):
            out = out.rstrip(" \t")
        out += piece
    return out.strip()


def visible_reply(text: str) -> str:
    """The part of a reply still being generated that the user will see whatever comes next: the
    text before any call that may still be open, calls and results removed, trailing whitespace held
    back (a call cut out after it may remove it). Each value is a prefix of the next and of
    strip_calls(final text), so a server can stream the differences."""
    parser = StreamParser()
    parser.feed(text)
    cut = parser.pending
    return strip_calls(text if cut is None else text[:cut]).rstrip()


def streamed_reply(text: str) -> str:
    """What a stream may send of a reply still being generated: :func:`visible_reply`, except an
    acknowledgement alone (or its beginning), which is held until the turn ends: whether it stays
    depends on the outcome of the turn's writes (a turn with a write not stored answers
    NOT_STORED instead), so a stream never claims a write that did not happen. Each value is a
    prefix of the next and of the turn's final reply."""
    reply = visible_reply(text)
    return "" if ACK.startswith(reply.strip()) else reply
