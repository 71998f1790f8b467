"""End-to-end episodes: a fresh memory, statements one turn at a time, then the questions.

Nothing is teacher-forced here: what the model wrote is what it later reads. Turns carry no
chat history (the memory is the only state, as in RET-LLM), except for the zero-shot baseline,
which gets every statement of the episode so far in its prompt instead of a memory.

A question is correct when the answer lists exactly the expected names (or abstains when there
are none); an episode is correct when all its questions are. Statement turns are scored on
their own writes (exactly the turn's gold triplets), and on whether the memory then holds
exactly the expected facts (which stays false once an earlier turn went wrong).

The episodes are DATA/jsonl/episodes.jsonl of a `memlm generate` directory, or any file in that
format (--episodes), up to `limit` of them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from statistics import mean, median
from typing import TYPE_CHECKING

from data_gen.episodes import Episode, load_episodes
from eval import SYSTEMS
from eval.metrics import answer_correct, frac, names_in, triplet_prf
from eval.parts import Part
from eval.render import pyplot
from eval.systems import Session, System, run_sessions
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.progress import Advance
from memory_runtime.stats import percentile

if TYPE_CHECKING:
    from eval.eval_config import EvalConfig


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
    progress: Advance | None = None,
    batch_size: int = 1,
) -> list[dict]:
    return run_sessions(system, (episode_session(system, e, memory_config) for e in episodes), batch_size, progress)


# ----------------------------------------------------------------------------- cases


def episodes_path(config: EvalConfig) -> Path:
    return Path(config.episodes) if config.episodes else Path(config.data) / "jsonl" / "episodes.jsonl"


def load_eval_episodes(config: EvalConfig) -> list[Episode]:
    if config.data is None and not config.episodes:
        raise ValueError("--data or --episodes is needed for episodes")
    path = episodes_path(config)
    if not path.is_file():
        raise FileNotFoundError(f"episodes file {path} not found (pass --episodes FILE.jsonl)")
    episodes = load_episodes(path)
    limit = config.limit
    return episodes if limit is None or len(episodes) <= limit else random.Random(config.seed).sample(episodes, limit)


# ----------------------------------------------------------------------------- summary


def summarise_episodes(results: list[dict]) -> dict:
    turns = [t for e in results for t in e["turns"]]
    questions = [t for t in turns if t["kind"] == "question"]
    statements = [t for t in turns if t["kind"] != "question" and "correct" in t]
    walls = [t["wall_s"] for t in turns]
    by_kind = {}
    for kind in ("statement", "update", "question"):
        group = [t for t in turns if t["kind"] == kind]
        if group:
            by_kind[kind] = {
                "turns": len(group),
                "correct": frac(t.get("correct") for t in group if "correct" in t),
                "tokens_mean": mean(t["tokens"] for t in group),
                "wall_s_p50": median(t["wall_s"] for t in group),
            }
    return {
        "episodes": len(results),
        "questions": len(questions),
        "episode_accuracy": frac(e["correct"] for e in results if e["correct"] is not None),
        "question_accuracy": frac(q["correct"] for q in questions),
        "unanswerable_accuracy": frac(q["correct"] for q in questions if q["unanswerable"]),
        "statement_accuracy": frac(t["correct"] for t in statements),
        "memory_exact_after_statements": frac(t["memory_matches"] for t in statements),
        "tokens_per_turn": mean(t["tokens"] for t in turns) if turns else None,
        "wall_s_per_turn_p50": percentile(walls, 50) if walls else None,
        "wall_s_per_turn_p90": percentile(walls, 90) if walls else None,
        "by_kind": by_kind,
    }


# ----------------------------------------------------------------------------- report


def latency_figure(raw: dict):
    latencies = {s: [t["wall_s"] for e in raw[s].get("episodes") or [] for t in e["turns"]] for s in raw}
    latencies = {s: v for s, v in latencies.items() if v}
    if not latencies:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    ax.boxplot(list(latencies.values()), showfliers=False)
    ax.set_xticks(range(1, len(latencies) + 1), list(latencies))
    ax.set_ylabel("seconds per turn")
    ax.set_title(f"Latency per turn (episodes, {len(next(iter(latencies.values())))} turns)")
    return fig


PART = Part(
    name="episodes",
    systems=SYSTEMS,
    load=load_eval_episodes,
    cases_file=episodes_path,
    sources=lambda config, episodes: {"file": str(episodes_path(config).resolve()), "used": len(episodes)},
    evaluate=lambda system, episodes, config, *run: evaluate_episodes(system, episodes, *run),
    summarise=lambda rows, uses_memory: summarise_episodes(rows),
    sample_groups=lambda s: [("episodes", s["episodes"]), ("episode questions", s["questions"])],
    source_line=lambda source: f"- episodes: `{source['file']}` ({source['used']} used)",
    figures=lambda summary, raw: {"latency_per_turn": latency_figure(raw)},
)
