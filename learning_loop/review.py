"""Reviewing feedback before it trains anything: `memlm feedback list | accept | reject | export`.

Chat and serve keep each user's rated trajectories in `DIR/pending/<namespace>.jsonl`
(memory_runtime.serving.feedback.FeedbackLog: good, bad, or a correction with the model's own
turn on it). Nothing there is training data: an operator reads them (`list`), then moves them, by
id or all of a namespace, out of pending:

    accept   good ones and corrections -> DIR/accepted.jsonl, Records that `memlm train ...
             'data.extra_jsonl=[DIR/accepted.jsonl]'` takes (SFT); every one, bad ones included, as
             its pending line -> DIR/accepted_labelled.jsonl. A bad trajectory is the wrong answer:
             it never reaches accepted.jsonl, where SFT would learn it.
    reject   -> DIR/rejected.jsonl, kept for the record.
    export   DIR/accepted_labelled.jsonl -> the preference data of memory_runtime.records, for the
             KTO and DPO trainers: LabelledTurn lines (kto) or PreferencePair lines (dpo).

A decision rewrites the pending file through a temporary file renamed into place, under the
directory's lock, so a server appending meanwhile loses nothing.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from memory_runtime.jsonl import read_dicts
from memory_runtime.records import LabelledTurn, PreferencePair
from memory_runtime.serving.feedback import (
    ACCEPTED,
    ACCEPTED_LABELLED,
    PENDING,
    REJECTED,
    PendingTrajectory,
    correction_alone,
    directory_lock,
    pending_path,
    read_pending,
)


def decide(
    directory: str | Path, ids: Sequence[str] | None, *, accept: bool, namespace: str | None = None
) -> list[PendingTrajectory]:
    """Accept (or reject) the pending trajectories with these ids (None: every pending one, of
    `namespace` if given); returns the ones moved. An id that is not pending is an error, and then
    nothing moves."""
    directory = Path(directory)
    if not (directory / PENDING).is_dir():
        raise FileNotFoundError(f"{directory} holds no pending feedback (no {PENDING}/ folder)")
    with directory_lock(directory / PENDING):
        pending = read_pending(directory, namespace)
        chosen_ids = {t.record.id for t in pending} if ids is None else set(ids)
        unknown = sorted(chosen_ids - {t.record.id for t in pending})
        if unknown:
            raise ValueError(f"not pending{f' in namespace {namespace!r}' if namespace else ''}: {', '.join(unknown)}")
        chosen = [t for t in pending if t.record.id in chosen_ids]
        if accept:
            _append(directory / ACCEPTED, [t.record.model_dump_json() for t in chosen if t.desirable])
            _append(directory / ACCEPTED_LABELLED, [t.model_dump_json() for t in chosen])
        else:
            _append(directory / REJECTED, [t.model_dump_json() for t in chosen])
        for name in {t.namespace for t in chosen}:
            keep = [t for t in read_pending(directory, name) if t.record.id not in chosen_ids]
            _rewrite(pending_path(directory, name), [t.model_dump_json() for t in keep])
    return chosen


def summary(directory: str | Path, namespace: str | None = None) -> list[dict]:
    """One row per pending trajectory: id, namespace, rating, the user's text, the model's trained
    text, and a correction's rejected run (the model's own turn on it; None when there is none)."""
    rows = []
    for t in read_pending(directory, namespace):
        segments = t.record.segments
        rows.append(
            {
                "id": t.record.id,
                "namespace": t.namespace,
                "rating": t.rating,
                "user": " ".join(s.text for s in segments if s.role == "user"),
                "trained": "".join(s.text for s in segments if s.train),
                "rejected": "".join(s.text for s in t.rejected.segments if s.train) if t.rejected else None,
            }
        )
    return rows


def export(directory: str | Path, out: str | Path, fmt: str, *, overwrite: bool = False) -> Counter[str]:
    """Write the accepted feedback (DIR/accepted_labelled.jsonl; nothing pending or rejected) to
    `out` as JSONL of memory_runtime.records' preference data, and return how many of each rating
    were written:

        kto   a LabelledTurn per accepted trajectory: good and correction desirable, bad not. A
              correction's turn is the writes as stored on the correction alone (the prompt the
              model runs corrections on), the chosen run of its pair.
        dpo   a PreferencePair per accepted correction that kept a rejected run: the stored writes
              chosen, the model's own turn rejected, the same prompt (the correction's text).

    source is "feedback" and scores are None (a person's verdict, not a reward). Errors, each one
    line: an unknown format, `out` existing without `overwrite`, a malformed accepted line (named by
    file, line and id), nothing to export (with how many wait in pending/). Nothing is written then."""
    directory, out = Path(directory), Path(out)
    if fmt not in ("kto", "dpo"):
        raise ValueError(f"unknown export format {fmt!r}: kto (labelled turns) or dpo (preference pairs)")
    path = directory / ACCEPTED_LABELLED
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists: pass --overwrite to replace it")
    if out.resolve() == path.resolve():
        raise ValueError(f"{out} is the accepted feedback itself: export to another file")
    accepted: list[PendingTrajectory] = []
    if path.is_file():
        with directory_lock(directory):  # an `accept` appending meanwhile is read whole or not at all
            lines = read_dicts(path, "an accepted feedback line")
        for n, line in lines:
            try:
                accepted.append(PendingTrajectory.model_validate(line))
            except ValidationError as err:
                raise ValueError(
                    f"{path}:{n}: accepted trajectory {_record_id(line)} is malformed: {_problems(err)}"
                ) from None
    rows: list[LabelledTurn | PreferencePair] = []
    written: Counter[str] = Counter()
    for t in accepted:
        try:
            row = _labelled_turn(t) if fmt == "kto" else _preference_pair(t)
        except ValidationError as err:
            raise ValueError(f"{path}: accepted trajectory {t.record.id} is no {fmt} item: {_problems(err)}") from None
        if row is not None:
            rows.append(row)
            written[t.rating] += 1
    if not rows:
        waiting = len(read_pending(directory))
        nothing = (
            "nothing accepted to export"
            if not accepted
            else f"no DPO pair to export: none of the {len(accepted)} accepted trajectories is a correction "
            "that kept the model's own turn"
        )
        raise ValueError(
            f"{nothing} ({path}); {waiting} pending in {directory / PENDING}: "
            f"`memlm feedback accept --dir {directory}` reviews them"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    _rewrite(out, [row.model_dump_json() for row in rows])
    return written


def _labelled_turn(t: PendingTrajectory) -> LabelledTurn:
    record = correction_alone(t.record) if t.rating == "correction" else t.record
    return LabelledTurn(id=t.record.id, record=record, desirable=t.desirable, source="feedback")


def _preference_pair(t: PendingTrajectory) -> PreferencePair | None:
    if t.rejected is None:
        return None
    return PreferencePair(id=t.record.id, chosen=correction_alone(t.record), rejected=t.rejected, source="feedback")


def _problems(err: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
        for e in err.errors(include_url=False)
    )


def _record_id(line: dict) -> str:
    record = line.get("record")
    return str(record.get("id")) if isinstance(record, dict) and record.get("id") else "(no record id)"


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)


def _rewrite(path: Path, lines: list[str]) -> None:
    if not lines:
        path.unlink(missing_ok=True)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)
