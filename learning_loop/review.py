"""Reviewing feedback before it trains anything: `memlm feedback list | accept | reject`.

Chat and serve keep each user's feedback trajectories in `DIR/pending/<namespace>.jsonl`
(memory_runtime.serving.feedback.FeedbackLog). Nothing there is training data: an operator reads them
(`list`), then moves them, by id or all of a namespace, to `DIR/accepted.jsonl` (Records that
`memlm train ... 'data.extra_jsonl=[DIR/accepted.jsonl]'` takes) or to `DIR/rejected.jsonl`.
A decision rewrites the pending file through a temporary file renamed into place, under the
directory's lock, so a server appending meanwhile loses nothing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memory_runtime.serving.feedback import ACCEPTED, PENDING, REJECTED, directory_lock, pending_path, read_pending


def decide(
    directory: str | Path, ids: Sequence[str] | None, *, accept: bool, namespace: str | None = None
) -> list[str]:
    """Accept (or reject) the pending trajectories with these ids (None: every pending one, of
    `namespace` if given); returns the ids moved. An id that is not pending is an error, and then
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
        with open(directory / (ACCEPTED if accept else REJECTED), "a", encoding="utf-8") as out:
            for t in chosen:
                out.write((t.record.model_dump_json() if accept else t.model_dump_json()) + "\n")
        for name in {t.namespace for t in chosen}:
            keep = [t for t in read_pending(directory, name) if t.record.id not in chosen_ids]
            _rewrite(pending_path(directory, name), [t.model_dump_json() for t in keep])
    return [t.record.id for t in chosen]


def summary(directory: str | Path, namespace: str | None = None) -> list[dict]:
    """One row per pending trajectory: id, namespace, the user's text and the model's trained text."""
    rows = []
    for t in read_pending(directory, namespace):
        segments = t.record.segments
        rows.append(
            {
                "id": t.record.id,
                "namespace": t.namespace,
                "user": " ".join(s.text for s in segments if s.role == "user"),
                "trained": "".join(s.text for s in segments if s.train),
            }
        )
    return rows


def _rewrite(path: Path, lines: list[str]) -> None:
    if not lines:
        path.unlink(missing_ok=True)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)
