"""Self-instruct's tasks executed and scored: each task runs through the model's decoder against a fresh
store holding its memory, learning_loop.reward scores the turn (exact only for exactly the gold), and the
exact runs become training Records. Also the measures of a round before and after it trains: the exact
rate on held-out tasks and the real-text probe (eval/real_probe.py)."""

from __future__ import annotations

from collections.abc import Sequence

from learning_loop.reward import score_turn
from learning_loop.self_instruct_tasks import Task
from memory_runtime.generation.decoder import Decoder, Session
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.turn import TurnResult, turn_messages
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.records import Record, turn_segments


def task_session(
    task: Task,
    generation: Generation,
    memory_config: MemoryConfig | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
) -> Session:
    """The task as a session of a decoder: its turn (`generation`'s limits and sampling) against a fresh store
    holding its memory; returns (the turn, its score)."""
    with TripletStore.scratch(memory_config, task.memory) as store:
        result = yield generation.request(turn_messages(task.text, system_prompt=system_prompt), store)
        score = score_turn(
            task.kind,
            result.calls,
            result.reply,
            gold_triplets=task.gold_triplets,
            gold_names=task.gold_names,
            user_text=task.text,
            candidates=task.names(),
            canonical=store.canonical_relation,
            status=result.status,
        )
    return result, score


def trajectory_record(task: Task, result: TurnResult, *, source: str = "self_instruct") -> Record:
    """A kept trajectory as a training Record (gold fields from the task)."""
    return Record(
        id=f"{source}-{task.id}",
        type=task.type,
        shape=task.shape,
        segments=turn_segments(task.text, result.text),
        gold_triplets=task.gold_triplets,
        gold_names=task.gold_names,
        memory=task.memory,
        split="train",
        source=source,
    )


def run_tasks(
    tasks: Sequence[Task],
    decoder: Decoder,
    generation: Generation,
    memory_config: MemoryConfig | None = None,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
) -> tuple[list[Record], list[dict]]:
    """(records of the exact trajectories, a log row per task): every task through `decoder` (:func:`task_session`)."""
    kept, log = [], []
    outcomes = decoder.run_sessions(task_session(task, generation, memory_config, system_prompt) for task in tasks)
    for task, (result, score) in zip(tasks, outcomes):
        log.append(
            {
                "id": task.id,
                "type": task.type,
                "text": task.text,
                "assistant": result.text,
                "exact": int(score.exact),
                "reward": score.value,
                "reason": score.reason,
            }
        )
        if score.exact:
            kept.append(trajectory_record(task, result))
    return kept, log


def score_tasks(
    tasks: Sequence[Task],
    decoder: Decoder,
    generation: Generation,
    memory_config: MemoryConfig | None = None,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
) -> dict:
    """The exact rate on tasks (the held-out paraphrase test): overall and per kind."""
    _, log = run_tasks(tasks, decoder, generation, memory_config, system_prompt=system_prompt)
    out: dict = {"tasks": len(log), "correct": sum(r["exact"] for r in log)}
    for kind in ("write", "read", "unanswerable", "two_hop"):
        rows = [r for r in log if r["type"] == kind]
        if rows:
            out[kind] = sum(r["exact"] for r in rows) / len(rows)
    out["accuracy"] = out["correct"] / len(log) if log else None
    return out


def score_real(
    records: Sequence[Record],
    decoder: Decoder,
    generation: Generation,
    memory_config: MemoryConfig | None = None,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
) -> dict:
    """The real-text probe (eval/real_probe.py) over all sources, every passage through `decoder` (sampled as
    `generation` says): pair P/R/F1 and false writes."""
    from eval.real_probe import evaluate_real, summarise_real
    from eval.systems import System

    system = System("memlm", None, None, generation, system_prompt=system_prompt, decoder=decoder)
    overall = summarise_real(evaluate_real(system, records, memory_config))["all"]
    return {
        "passages": overall["passages"],
        "pair_f1": round(overall["pair"]["f1"], 3),
        "pair_precision": round(overall["pair"]["precision"], 3),
        "pair_recall": round(overall["pair"]["recall"], 3),
        "false_write_rate": overall["false_write_rate"],
        "any_write_rate": overall["any_write_rate"],
    }
