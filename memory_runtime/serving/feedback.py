"""Learning from feedback (after RAM): 👍/👎 on a reply, corrections in natural language, and the
"ask for help" trigger when a wrong answer comes back.

    good      the exchange is kept as a feedback trajectory labelled desirable (the model's turn as it ran).
    bad       the exchange is kept the same way, labelled undesirable (for KTO, never for SFT), and the
              reply is remembered as wrong for that question.
    correct   "No, Dorothea works for BMW now": the model turns the correction into writes (run on
              a scratch copy of the memory, on the correction alone: memlm's models are trained on
              single turns, and with the wrong question as context the 135M model reads instead
              of writing), partial
              names are completed from the memory ("Dorothea" -> "Dorothea Altemus" when only
              one stored name fits), facts the wrong reply rested on that the correction
              contradicts are ended (they stay in history), then the writes are stored (a
              functional relation supersedes the old fact itself). The exchange becomes a
              trajectory whose trained part is the writes as they were stored; where the model's
              own turn on the correction differs from them (a name it left partial, another
              reply), that turn is kept beside it as the rejected run of a DPO pair.
    flag      a reply to a question equal to one marked wrong (bad or corrected) for that same
              question is flagged `repeated_wrong`: the model should ask for help, not repeat.

Feedback trajectories are Records (type "feedback") kept per namespace in `pending/` with their
rating, waiting for review (:class:`FeedbackLog`); accepted good ones and corrections go to
`accepted.jsonl`, which `memlm train` includes with data.extra_jsonl, and every accepted one, bad
ones included, to `accepted_labelled.jsonl`, which `memlm feedback export` turns into KTO and DPO
data (learning_loop/review.py). Every event also goes to `events.jsonl`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import threading
import time
import urllib.parse
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from memory_runtime.generation.decoder import Session
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.turn import TurnResult, turn_messages
from memory_runtime.jsonl import read_models
from memory_runtime.memory.facts import Fact, WriteResult
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term, triplet_key
from memory_runtime.protocol import ACK, SYSTEM_PROMPT, Triplet, render_write
from memory_runtime.records import Record, Segment, model_turn, prompt_segments, turn_segments


class FactGone(LookupError):
    """A correction of a fact that is no longer current: stored nothing, says why."""


@dataclass
class Exchange:
    """A user turn and the model's answer (what feedback is about)."""

    user: str
    result: TurnResult


@dataclass
class Correction:
    writes: list[Triplet]  # as stored (names completed from memory)
    ended: list[Triplet] = field(default_factory=list)  # contradicted facts ended by the correction
    superseded: list[Triplet] = field(default_factory=list)  # replaced by a functional write
    turn: TurnResult | None = None  # the model's turn on the correction
    status: Literal["stored", "duplicate"] = "stored"  # of the (first) write: duplicate, it was there already
    record: Record | None = None  # the feedback trajectory (None when nothing was written)
    rejected: Record | None = None  # the model's turn on the correction, where it differs from `record`'s


class FeedbackLog:
    """Feedback files in `directory` (None: keep nothing on disk).

        events.jsonl               every event, for the operator
        pending/<namespace>.jsonl  each user's trajectories, waiting for review: PendingTrajectory
                                   lines {"namespace", "rating", "record", "rejected"}
        accepted.jsonl             the accepted good and correction Records: what `memlm train` may take
        accepted_labelled.jsonl    every accepted line as it was pending, bad ones too: what
                                   `memlm feedback export` turns into KTO / DPO data
        rejected.jsonl             reviewed and rejected lines, kept for the record

    A trajectory is never training data until someone accepts it (`memlm feedback accept`,
    learning_loop/review.py): one user's feedback cannot reach everyone's next adapter, and the
    pending lines are not Records, so `data.extra_jsonl` refuses them. Appends and reviews take a
    lock on the directory (other processes included)."""

    def __init__(self, directory: str | Path | None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._lock = threading.Lock()

    def _append(self, path: Path, line: str) -> None:
        with self._lock, directory_lock(path.parent):
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    def event(self, row: dict) -> None:
        if self.directory is not None:
            self._append(self.directory / "events.jsonl", json.dumps({"time": time.time(), **row}))

    def trajectory(self, namespace: str, record: Record, *, rating: Rating, rejected: Record | None = None) -> None:
        if self.directory is not None:
            line = PendingTrajectory(namespace=namespace, rating=rating, record=record, rejected=rejected)
            self._append(pending_path(self.directory, namespace), line.model_dump_json())


ACCEPTED, ACCEPTED_LABELLED, REJECTED, PENDING = (
    "accepted.jsonl",
    "accepted_labelled.jsonl",
    "rejected.jsonl",
    "pending",
)
Rating = Literal["good", "bad", "correction"]


def pending_path(directory: str | Path, namespace: str) -> Path:
    """The file of one namespace's trajectories waiting for review (the name escaped: any namespace)."""
    return Path(directory) / PENDING / f"{urllib.parse.quote(namespace, safe='')}.jsonl"


class PendingTrajectory(BaseModel):
    """A line of pending/<namespace>.jsonl (and, once accepted, of accepted_labelled.jsonl).

    `rating` labels the trajectory: good and correction are desirable, bad is not (its record is
    the wrong turn as the model ran it). `rejected` is a correction's second run: the model's own
    turn on the correction alone, kept where it differs from the writes as stored; with
    :func:`correction_alone` of `record` it is a DPO pair. A line written before ratings were kept
    ({"namespace", "record"}: only good ratings and corrections were) is read with the rating its
    record shows: a correction's record has the stored writes as gold, a good one none."""

    model_config = ConfigDict(extra="forbid")

    namespace: str
    rating: Rating
    record: Record
    rejected: Record | None = None

    @model_validator(mode="before")
    @classmethod
    def _rating_of_a_line_from_before_ratings(cls, data: Any) -> Any:
        if isinstance(data, dict) and "rating" not in data and isinstance(data.get("record"), dict):
            return {**data, "rating": "correction" if data["record"].get("gold_triplets") else "good"}
        return data

    @model_validator(mode="after")
    def _only_a_correction_has_a_rejected_run(self) -> PendingTrajectory:
        if self.rejected is not None and self.rating != "correction":
            raise ValueError(f"trajectory {self.record.id}: a {self.rating} rating has no rejected run")
        return self

    @property
    def desirable(self) -> bool:
        return self.rating != "bad"


def correction_alone(record: Record) -> Record:
    """A correction trajectory cut to its last user text (the correction) and the writes as stored:
    the prompt the model was run on (corrections run without the wrong exchange), which the
    rejected run shares."""
    return Record.model_validate(
        {**record.model_dump(), "segments": [prompt_segments(record)[-1], *model_turn(record)]}
    )


def read_pending(directory: str | Path, namespace: str | None = None) -> list[PendingTrajectory]:
    """The trajectories waiting for review (of one namespace, or all), oldest first per namespace."""
    folder = Path(directory) / PENDING
    paths = [pending_path(directory, namespace)] if namespace is not None else sorted(folder.glob("*.jsonl"))
    return [t for path in paths if path.is_file() for t in read_models(path, PendingTrajectory, "a pending trajectory")]


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on a feedback directory (an flock on its .lock file): the server's appends
    and a review's rewrite never interleave, across processes."""
    root = directory if directory.name != PENDING else directory.parent
    root.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def complete_name(term: str, known: list[str]) -> str:
    """`term`, or the one known name whose words include all of its words ("Dorothea" ->
    "Dorothea Altemus"); unchanged when none or several fit."""
    key = normalize_term(term)
    if any(normalize_term(k) == key for k in known):
        return term
    words = set(key.split())
    fits = {normalize_term(k): k for k in known if words and words <= set(normalize_term(k).split())}
    return next(iter(fits.values())) if len(fits) == 1 else term


class Feedback:
    """Feedback of every namespace on one store; thread-safe for the server."""

    def __init__(
        self, store: TripletStore, log: FeedbackLog | None = None, *, max_questions: int = 10_000, max_replies: int = 16
    ) -> None:
        self.store = store
        self.log = log or FeedbackLog(None)
        # (namespace, question) -> replies marked wrong: bounded, the least recently marked question
        # dropped first, so a long-running server's memory does not grow with every 👎
        self._wrong: OrderedDict[tuple[str, str], OrderedDict[str, None]] = OrderedDict()
        self.max_questions, self.max_replies = max_questions, max_replies
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the ask-for-help trigger

    def repeated_wrong(self, namespace: str, user: str, reply: str) -> bool:
        """Is this reply one already marked wrong for this question? (Logged when it is.)"""
        with self._lock:
            wrong = normalize_term(reply) in self._wrong.get((namespace, normalize_term(user)), {})
        if wrong:
            self.log.event({"namespace": namespace, "event": "repeated_wrong", "user": user, "reply": reply})
        return wrong

    def _mark_wrong(self, namespace: str, exchange: Exchange) -> bool:
        """Remember the reply as wrong; True when it had been marked wrong before (a repeat)."""
        key, reply = (namespace, normalize_term(exchange.user)), normalize_term(exchange.result.reply)
        with self._lock:
            seen = self._wrong.setdefault(key, OrderedDict())
            self._wrong.move_to_end(key)
            repeat = reply in seen
            seen[reply] = None
            seen.move_to_end(reply)
            if len(seen) > self.max_replies:
                seen.popitem(last=False)
            if len(self._wrong) > self.max_questions:
                self._wrong.popitem(last=False)
        return repeat

    # ------------------------------------------------------------------ ratings

    def rate(self, namespace: str, exchange: Exchange, good: bool) -> dict:
        """👍 keeps the exchange as a desirable trajectory; 👎 keeps it as an undesirable one and marks
        the reply wrong. A turn with no text of the model's keeps nothing. Returns the logged event."""
        event = {
            "namespace": namespace,
            "event": "good" if good else "bad",
            "user": exchange.user,
            "reply": exchange.result.reply,
            "assistant": exchange.result.text,
        }
        segments = _turn_segments(exchange.user, exchange.result.text, train=True)
        if "".join(seg.text for seg in segments if seg.train).strip():
            record = Record(
                id=f"feedback-{uuid.uuid4().hex[:12]}",
                type="feedback",
                source="feedback",
                split="train",
                segments=segments,
            )
            self.log.trajectory(namespace, record, rating="good" if good else "bad")
            event["record"] = record.id
        if not good and self._mark_wrong(namespace, exchange):
            event["repeated_wrong"] = True
        self.log.event(event)
        return event

    # ------------------------------------------------------------------ corrections

    def correction(
        self,
        namespace: str,
        text: str,
        exchange: Exchange | None,
        generation: Generation,
        *,
        system_prompt: str | None = SYSTEM_PROMPT,
        **per_turn: Any,
    ) -> Session:
        """Turn a correction of `namespace`'s memory into writes through the model (see the module docstring),
        as a session of the decoder that runs the user's turns (``decoder.run_sessions([...])``, or the server's
        scheduler): it yields the model's turn on `text` alone (`generation`'s limits and sampling, `per_turn`
        overriding them), against a scratch copy of the memory and with no write held back, and returns the
        :class:`Correction` (only the completed writes are stored)."""
        if exchange is not None:
            self._mark_wrong(namespace, exchange)
        current = self.store.facts(namespace)
        with TripletStore.scratch(self.store.config, [f.triplet for f in current], namespace) as scratch:
            messages = turn_messages(text, system_prompt=system_prompt)
            turn = yield generation.request(messages, scratch, namespace=namespace, gate_writes=False, **per_turn)
        return self._corrected(namespace, text, exchange, current, turn)

    def _corrected(
        self, namespace: str, text: str, exchange: Exchange | None, current: list[Fact], turn: TurnResult
    ) -> Correction:
        """The model's turn on a correction made writes: names completed, contradicted facts ended, stored."""
        known = [n for f in current for n in (f.subject, f.object)]
        if exchange is not None:
            known += [n for c in exchange.result.calls for t in c.results for n in (t.subject, t.object)]
        writes = [
            (complete_name(c.fields[0], known), c.fields[1], complete_name(c.fields[2], known))
            for c in turn.calls
            if c.kind == "write"
        ]
        out = Correction(writes=writes, turn=turn)
        if writes:
            rested_on = [t for c in (exchange.result.calls if exchange else []) for t in c.results]
            contradicted = [t for t in rested_on if any(self._contradicts(w, t) for w in writes)]
            _, out.superseded, out.ended = store_correction(
                self.store, namespace, writes, contradicted, source="correction"
            )
            segments = _turn_segments(exchange.user, exchange.result.text, train=False) if exchange else []
            stored = Segment(role="assistant", text=" ".join(render_write(*w) for w in writes) + " " + ACK, train=True)
            segments += [Segment(role="user", text=text, train=False), stored]
            rid, memory = f"feedback-{uuid.uuid4().hex[:12]}", [f.triplet for f in current]
            out.record = Record(
                id=rid,
                type="feedback",
                source="feedback",
                split="train",
                segments=segments,
                gold_triplets=writes,
                memory=memory,
            )
            ran = turn_segments(text, turn.text)  # the model's turn as it ran, on the correction alone
            if _spaced(ran[1:]) != _spaced([stored]):
                out.rejected = Record(
                    id=f"{rid}-rejected", type="feedback", source="feedback", split="train", segments=ran, memory=memory
                )
            self.log.trajectory(namespace, out.record, rating="correction", rejected=out.rejected)
        self.log.event(
            {
                "namespace": namespace,
                "event": "correction",
                "text": text,
                "user": exchange.user if exchange else None,
                "reply": exchange.result.reply if exchange else None,
                "model": turn.text,
                "writes": writes,
                "ended": out.ended,
                "superseded": out.superseded,
                "record": out.record.id if out.record else None,
                "rejected": out.rejected is not None,
            }
        )
        return out

    def _contradicts(self, right: tuple[str, str, str], wrong: tuple[str, str, str]) -> bool:
        """Same subject, same relation (after aliases), another object."""
        (s, r, o), (ws, wr, wo) = right, wrong
        return (
            normalize_term(s) == normalize_term(ws)
            and normalize_term(self.store.canonical_relation(r)) == normalize_term(self.store.canonical_relation(wr))
            and normalize_term(o) != normalize_term(wo)
        )

    def correct_fact(
        self, namespace: str, right: tuple[str, str, str], wrong: tuple[str, str, str] | None = None
    ) -> Correction:
        """A person's correction of one fact (the memory page): `right` is stored (source "page")
        and `wrong`, when given, is ended (kept in history), through the same path as the model's
        corrections, so the store's checks apply alike (no call syntax, no empty name, a functional
        relation supersedes)."""
        wrongs = [wrong] if wrong else []
        if wrong and not any(f.current for f in self.store.history(*wrong, namespace=namespace)):
            raise FactGone(
                f"{' · '.join(wrong)} is no longer in memory (forgotten or replaced since it was shown): "
                "nothing was stored; add the fact instead if it is still wanted"
            )
        results, superseded, ended = store_correction(self.store, namespace, [right], wrongs, source="page")
        out = Correction(writes=[results[0].fact.triplet], ended=ended, superseded=superseded, status=results[0].status)
        self.log.event(
            {
                "namespace": namespace,
                "event": "fact_corrected" if wrong else "fact_written",
                "status": results[0].status,
                "writes": out.writes,
                "ended": ended,
                "superseded": superseded,
            }
        )
        return out


def store_correction(
    store: TripletStore,
    namespace: str,
    writes: list[tuple[str, str, str]],
    wrong: list[tuple[str, str, str]],
    *,
    source: str | None = None,
) -> tuple[list[WriteResult], list[Triplet], list[Triplet]]:
    """Store the right facts of a correction, then end the wrong ones still current (they stay in
    history): (write results, facts the writes superseded, wrong facts ended). A functional
    relation supersedes the wrong fact by itself; a wrong fact that a write restates is kept. Every
    write is checked first (store.write_many), so a bad one stores nothing and ends nothing."""
    for triplet in wrong:  # checked as the writes are, before anything is written
        store.history(*triplet, namespace=namespace)
    results = store.write_many(writes, namespace=namespace, source=source)
    superseded = [f.triplet for res in results for f in res.superseded]
    stored = {triplet_key(res.fact.triplet, store.canonical_relation) for res in results}
    ended = []
    for triplet in wrong:
        if triplet_key(triplet, store.canonical_relation) not in stored and store.forget(*triplet, namespace=namespace):
            ended.append(Triplet(*triplet))
    return results, superseded, ended


def _spaced(segments: list[Segment]) -> list[tuple[str, str]]:
    """Segments compared as turns: role and text, runs of whitespace as one space (a model turn that
    spaces the stored writes differently is the same turn)."""
    return [(s.role, " ".join(s.text.split())) for s in segments]


def _turn_segments(user: str, assistant_text: str, *, train: bool) -> list[Segment]:
    """A turn as segments (inserted read results never trained)."""
    segments = turn_segments(user, assistant_text)
    if not train:
        segments = [s.model_copy(update={"train": False}) for s in segments]
    return segments
