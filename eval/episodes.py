"""End-to-end episodes: a fresh memory, statements one turn at a time, then the questions.

Nothing is teacher-forced here: what the model wrote is what it later reads. Turns carry no
chat history (the memory is the only state, as in RET-LLM), except for the zero-shot baseline,
which gets every statement of the episode so far in its prompt instead of a memory.

A question is correct when the answer lists exactly the expected names (or abstains when there
are none); an episode is correct when all its questions are. Statement turns are scored on
their own writes (exactly the turn's gold triplets), and on whether the memory then holds
exactly the expected facts (which stays false once an earlier turn went wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from data_gen.episodes import Episode
from eval.metrics import answer_correct, names_in, triplet_prf
from eval.systems import Session, System, run_sessions
from memory_runtime.store import MemoryConfig, TripletStore


def episode_session(system: System, episode: Episode, memory_config: MemoryConfig | None = None) -> Session:
    """An episode turn by turn against a fresh memory (a session: each turn waits for the last)."""
    store = TripletStore(":memory:", memory_config)
    candidates = {n for t in episode.turns for f in (t.writes, t.expected_facts) for tr in f for n in (tr[0], tr[2])}
    candidates |= {n for t in episode.turns for n in t.answer_names or []}
    statements: list[str] = []
    turns = []
    for k, turn in enumerate(episode.turns):
        result = yield system.request(turn.user, store, context=" ".join(statements) or None)
        row = {
            "turn": k,
            "kind": turn.kind,
            "user": turn.user,
            "reply": result.reply,
            "calls": [c.text for c in result.calls],
            "status": result.status,
            "tokens": result.generated_tokens,
            "wall_s": result.wall_seconds,
            "model_s": result.model_seconds,
        }
        if turn.kind == "question":
            row["expected_names"] = turn.answer_names
            context = names_in(turn.user, candidates) | {n for t in turn.expected_facts for n in (t[0], t[2])}
            row["correct"] = answer_correct(result.reply, turn.answer_names or [], candidates, context)
            row["unanswerable"] = not turn.answer_names
        else:
            statements.append(turn.user)
            if system.uses_memory:
                written = [c.fields for c in result.calls if c.kind == "write"]
                row["writes_prf"] = triplet_prf(written, turn.writes, store.canonical_relation).to_dict()
                row["correct"] = row["writes_prf"]["f1"] == 1.0  # this turn's writes, exactly
                held = [f.triplet for f in store.facts()]
                row["memory_matches"] = triplet_prf(held, turn.expected_facts, store.canonical_relation).f1 == 1.0
        turns.append(row)
    questions = [t for t in turns if t["kind"] == "question"]
    return {"id": episode.id, "turns": turns, "correct": all(q["correct"] for q in questions) if questions else None}


def evaluate_episode(system: System, episode: Episode, memory_config: MemoryConfig | None = None) -> dict:
    return run_sessions(system, [episode_session(system, episode, memory_config)])[0]


def evaluate_episodes(
    system: System,
    episodes: Iterable[Episode],
    memory_config: MemoryConfig | None = None,
    progress: Callable[[], None] | None = None,
    batch_size: int = 1,
) -> list[dict]:
    return run_sessions(system, (episode_session(system, e, memory_config) for e in episodes), batch_size, progress)
