"""The self-instruct reward: 1 only for a turn that did exactly what the task's gold says, else 0.

Pure: it reads a turn's calls and reply, never a model or a store, so it can be tested on
hand-made trajectories. Comparison goes through eval.metrics (the same normalisation and the
same answer rule the evaluation uses), so a kept trajectory is one the eval would score right.

    statement  the writes are exactly the gold triplets (as sets, relations canonical), and no
               call is malformed.
    question   at least one read was made, every gold fact is among what the reads returned,
               and the answer lists exactly the gold names (none: it abstains), no call malformed.

A reward is all or nothing on purpose: partially right turns would teach their mistakes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from eval.metrics import answer_correct, names_in, triplet_key, triplet_prf

TaskKind = Literal["statement", "question"]


@dataclass(frozen=True)
class Reward:
    value: int  # 1 = keep the trajectory, 0 = discard it
    reason: str  # why (for the round log): "exact", "missing write", ...


def reward(
    kind: TaskKind,
    calls: Sequence,
    reply: str,
    *,
    gold_triplets: Sequence[Sequence[str]] = (),
    gold_names: Sequence[str] = (),
    question: str = "",
    candidates: Iterable[str] = (),
    canonical: Callable[[str], str] = lambda r: r,
    status: str = "ok",
) -> Reward:
    """Score one executed turn. `calls` are controller CallRecords (or anything with .kind,
    .fields, .results); `candidates` the names the answer may list (the task's memory and gold);
    `canonical` maps relation aliases to their canonical names (TripletStore.canonical_relation)."""
    if status != "ok":
        return Reward(0, f"turn stopped: {status}")
    if any(c.kind == "error" for c in calls):
        return Reward(0, "malformed call")
    if kind == "statement":
        writes = [c.fields for c in calls if c.kind == "write"]
        if not writes and gold_triplets:
            return Reward(0, "no write")
        score = triplet_prf(writes, gold_triplets, canonical)
        if score.tp == score.n_pred == score.n_gold:
            return Reward(1, "exact")
        return Reward(0, "wrong writes" if score.tp == 0 else "partial writes")
    reads = [c for c in calls if c.kind == "read"]
    if not reads:
        return Reward(0, "no read")
    retrieved = {triplet_key(t, canonical) for c in reads for t in c.results}
    if any(triplet_key(t, canonical) not in retrieved for t in gold_triplets):
        return Reward(0, "gold fact not retrieved")
    # names the answer may repeat freely: the question's own, and those of the facts it rests on
    names = [*candidates, *gold_names]
    context = names_in(question, names) | {n for t in gold_triplets for n in (t[0], t[2])}
    if not answer_correct(reply, gold_names, names, context):
        return Reward(0, "wrong answer")
    return Reward(1, "exact")
