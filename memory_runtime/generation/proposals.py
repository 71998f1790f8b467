"""Propose, then verify: a turn's writes pooled over several runs of the writer (`generation.propose`).

A small writer decides once, token by token, what a text states; sampled runs of the same turn find facts
its greedy run left out. With ``propose: k`` a turn runs k times, all at once where the engine batches (hf,
vLLM): the greedy run against the memory, as every turn runs (its reply is the turn's reply), and k - 1
sampled runs (:data:`SAMPLED_RUN`, seeds 1 … k-1 past the turn's own), each against an empty scratch
memory. Each run's writes pass the write gate in that run (a trained verifier: ``write_gate.signal:
verifier``), so a sampled run's write that the gate kept is a candidate; :func:`pooled` stores the candidates
the greedy run did not write, and the trace shows each with its scores and the run that proposed it
(:attr:`CallRecord.run`). A candidate that would end a fact this turn wrote (another employer of the same
person, in a functional relation) is not stored: where the runs disagree the greedy run's write stands.

Every door pools the same way: chat and eval drive :func:`proposed_turn`, a session
(memory_runtime.generation.decoder.Session), with ``decoder.run_sessions``; the server queues
:func:`sampled_runs` beside the turn under an owner of their own and stores :func:`pooled` on its model
thread (serving/routes/completions.py); eval's part real measures the pool instead of storing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from memory_runtime.generation.controller import store_write
from memory_runtime.generation.decoder import Session
from memory_runtime.generation.turn import CallRecord, TurnRequest, TurnResult
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import triplet_key

# a sampled run, where several are drawn from one prompt: the proposals after the greedy one
# (generation.propose), memlm sample's runs
SAMPLED_RUN: dict[str, float] = {"temperature": 1.0, "top_p": 0.95}


def sampled_runs(request: TurnRequest, k: int) -> list[TurnRequest]:
    """The k - 1 sampled runs of `request` beside its greedy one: the same messages, limits and gate,
    :data:`SAMPLED_RUN`, seeds 1 … k-1 (past the turn's own seed), each against its own empty scratch
    memory (close them with :func:`close_scratch`), nothing streamed, cancelled with the turn."""
    base = request.seed or 0
    return [
        dataclasses.replace(
            request,
            store=TripletStore.scratch(request.store.config),
            seed=base + index,
            on_text=None,
            source=None,
            **SAMPLED_RUN,
        )
        for index in range(1, k)
    ]


def close_scratch(runs: Sequence[TurnRequest]) -> None:
    for run in runs:
        run.store.close()


def proposed_turn(request: TurnRequest, k: int) -> Session:
    """`request` as a turn whose writes are pooled over `k` runs (module docstring): yields the k runs at
    once, returns the greedy run's result with the stored candidates' calls added. k = 1: the turn alone."""
    if k <= 1 or not request.gate_writes:  # a correction's writes are the user's own: stored as they come
        return (yield request)
    runs = sampled_runs(request, k)
    try:
        greedy, *sampled = yield [request, *runs]
    finally:
        close_scratch(runs)
    return pooled(request, greedy, sampled)


def pooled(request: TurnRequest, greedy: TurnResult, sampled: Sequence[TurnResult]) -> TurnResult:
    """`greedy` with the writes of the `sampled` runs that it lacks stored in `request`'s memory (each
    once, by the store's normalisation), as calls marked with the run that proposed them; a candidate that
    would end a fact this turn wrote is recorded, not stored."""
    if greedy.status == "cancelled":
        return greedy  # nobody waits for it: nothing more is stored
    turn = [c.fields for c in greedy.calls if c.kind == "write" and c.fields and all(c.fields)]
    seen: set[tuple[str, str, str]] = set()  # each candidate once, by the store's normalisation
    calls: list[CallRecord] = []
    for run, result in enumerate(sampled, start=1):
        for call in result.calls:
            if call.kind != "write" or not call.fields or not all(call.fields):
                continue  # refused or held back in its run: never a candidate
            key = triplet_key(call.fields, request.store.canonical_relation)
            if key in seen:
                continue
            seen.add(key)
            calls.extend(_stored(request, call, run, turn))
    return dataclasses.replace(greedy, calls=[*greedy.calls, *calls])


def _stored(request: TurnRequest, call: CallRecord, run: int, turn: list) -> list[CallRecord]:
    """A sampled run's write stored in `request`'s memory (and added to `turn`, the turn's writes), or
    recorded as not stored when it would end one of `turn`'s; none when the turn wrote it already."""
    record = dataclasses.replace(call, run=run, superseded=[])
    try:
        with TripletStore.scratch(request.store.config, turn, request.namespace) as mine:  # what it would do
            check = mine.write(*call.fields, namespace=request.namespace)  # type: ignore[arg-type,misc]
        if check.status == "duplicate":
            return []
        if check.superseded:
            ended = "; ".join(">>".join(f.triplet) for f in check.superseded)
            record.kind, record.status = "error", f"not stored: it would end this turn's {ended}"
            return [record]
        written = store_write(
            request.store, call.fields, namespace=request.namespace, source=request.source, said_at=request.said_at
        )  # type: ignore[arg-type]
    except (TypeError, ValueError) as err:
        record.kind, record.status = "error", str(err)
        return [record]
    record.status, record.superseded = written.status, [f.triplet for f in written.superseded]
    turn.append(call.fields)
    return [record]


def with_proposals(session: Session, k: int) -> Session:
    """`session` with each turn it yields proposed `k` times (:func:`proposed_turn`); k = 1: as it is. A
    list it yields (runs it decodes together itself) is decoded as it is."""
    if k <= 1:
        return (yield from session)
    try:
        yielded = next(session)
        while True:
            result = (yield yielded) if isinstance(yielded, list) else (yield from proposed_turn(yielded, k))
            yielded = session.send(result)
    except StopIteration as stop:
        return stop.value
