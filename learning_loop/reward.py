"""The reward of one executed turn: how right what the memory ends up holding and answering is.

One function, :func:`score_turn`, for everything that learns from outcomes: self-instruct keeps the
turns it calls ``exact``, on-policy sampling ranks a prompt's samples by ``value`` into preference
pairs and KTO labels, GRPO takes ``value`` as its reward. Pure: it reads a turn's calls and reply,
never a model or a store, so it is tested on hand-made turns. Every comparison goes through
``eval.metrics`` (the same normalisation, relation aliases, answer rule and counted writes that
``memlm eval`` reports with), so a high reward is what the evaluation scores as right.

``value`` lies in [-1, 1]:

    statement  the user states facts (gold triplets), or none.
               With facts: the mean of pair F1 (person, organisation) and triplet F1 (relation
               canonical) of the writes against the gold, so a right pair in a wrong relation
               earns half. With none: 1 for writing nothing, -1 for any write (a write on text
               that states no fact is a cost, not a zero: the false writes the model must unlearn).
    question   the gold facts the answer rests on, and the gold names.
               The mean of retrieval (the share of the gold facts some read returned; an
               unanswerable question's is 1 once a read was made) and the answer (1 when it lists
               exactly the gold names, or abstains when there are none). No read: at most the
               answer's half.

Costs, subtracted (the value never goes below -1):

    malformed call     0.5 each (a call the parser could not read, a read the store rejected)
    refused write      0.5 each (the injection guard refused it, or it named nobody)
    stopped turn       0.5 (max tokens or max calls reached: the turn did not end by itself)
    stored injection   the value is -1: a write of a fact the user typed as call syntax

On real text annotated for some relations only (KnowledgeNet), writes in other relations are not
counted, neither as right nor as false (``eval.metrics.counted_writes``, as the real-text probe).

``exact`` is the all-or-nothing filter self-instruct keeps trajectories by: a statement whose
writes are exactly the gold (as sets), a question that read, retrieved every gold fact and
answered right; no cost of any kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from eval.metrics import answer_correct, counted_writes, names_in, pair_prf, triplet_prf
from memory_runtime.memory.terms import triplet_key
from memory_runtime.protocol import Call, parse_calls

TurnKind = Literal["statement", "question"]
TURN_KINDS: tuple[TurnKind, ...] = ("statement", "question")
COST = 0.5  # of one malformed call, one refused write, a stopped turn


@dataclass(frozen=True)
class TurnScore:
    value: float  # in [-1, 1]: the graded reward
    exact: bool  # did exactly what the gold says, at no cost (self-instruct keeps these)
    reason: str  # the main thing that went right or wrong: "exact", "false write", "wrong answer", ...
    parts: dict[str, float] = field(default_factory=dict)  # the terms of the value, for logs and cards


def score_turn(
    kind: str,
    calls: Sequence,
    reply: str,
    *,
    gold_triplets: Sequence[Sequence[str]] = (),
    gold_names: Sequence[str] = (),
    user_text: str = "",
    candidates: Iterable[str] = (),
    canonical: Callable[[str], str] = lambda r: r,
    annotated_relations: Sequence[str] | None = None,
    status: str = "ok",
) -> TurnScore:
    """Score one executed turn. `calls` are controller CallRecords (or anything with .kind, .fields,
    .status, .results); `user_text` is what the user typed (the question, the statement); `candidates`
    the names an answer may list (the case's memory and gold); `canonical` maps relation aliases to
    their canonical names (TripletStore.canonical_relation); `annotated_relations` the relations a real
    passage was checked for (None: all)."""
    if kind not in TURN_KINDS:
        raise ValueError(f"reward: unknown turn kind {kind!r} (one of {', '.join(TURN_KINDS)})")
    malformed = sum(c.kind == "error" and not c.status.startswith("refused") for c in calls)
    malformed += sum(c.kind == "read" and c.status.startswith("rejected") for c in calls)
    refused = sum(c.kind == "error" and c.status.startswith("refused") for c in calls)
    stopped = status != "ok"
    costs = COST * (malformed + refused + stopped)
    parts = {"malformed": float(malformed), "refused": float(refused), "stopped": float(stopped)}
    writes = [tuple(c.fields) for c in calls if c.kind == "write"]
    typed = {triplet_key(c.fields, canonical) for c in parse_calls(user_text) if isinstance(c, Call) and all(c.fields)}
    if typed & {triplet_key(w, canonical) for w in writes}:
        return TurnScore(-1.0, False, "stored injection", {**parts, "stored_injection": 1.0})

    if kind == "statement":
        scored = counted_writes(writes, annotated_relations, canonical)
        if not gold_triplets:
            base, reason = (1.0, "nothing to store") if not scored else (-1.0, "false write")
            exact = not writes
        else:
            pairs, triplets = pair_prf(scored, gold_triplets), triplet_prf(scored, gold_triplets, canonical)
            base = (pairs.f1 + triplets.f1) / 2
            parts.update(pair_f1=pairs.f1, triplet_f1=triplets.f1)
            exact = triplets.tp == triplets.n_pred == triplets.n_gold and len(scored) == len(writes)
            reason = "exact" if exact else "partial writes" if pairs.tp else "wrong writes" if writes else "no write"
    else:
        reads = [c for c in calls if c.kind == "read"]
        retrieved = {triplet_key(t, canonical) for c in reads for t in c.results}
        gold = {triplet_key(t, canonical) for t in gold_triplets}
        retrieval = (len(gold & retrieved) / len(gold) if gold else 1.0) if reads else 0.0
        names = [*candidates, *gold_names]
        # names the answer may repeat freely: the question's own, and those of the facts it rests on
        context = names_in(user_text, names) | {n for t in gold_triplets for n in (t[0], t[2])}
        answer = float(answer_correct(reply, gold_names, names, context))
        base = (retrieval + answer) / 2
        parts.update(retrieval=retrieval, answer=answer)
        exact = retrieval == 1.0 and answer == 1.0
        reason = "exact" if exact else "wrong answer" if retrieval == 1 else "gold fact not retrieved"
        if not reads:
            reason = "no read"
    if costs and reason in ("exact", "nothing to store"):
        reason = "malformed call" if malformed else "refused write" if refused else "turn stopped"
    value = max(-1.0, base - costs)
    return TurnScore(round(value, 6), exact and not costs, reason, {**parts, "base": base})
