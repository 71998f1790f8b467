"""Self-instruct's tasks and how they are written: a Task (a statement or question with known gold), drafts
drawn from a synthetic world (data_gen's record builders, so the store computes every gold value), and
augmentation, where the model writes each draft's sentence from seed examples and a sentence that leaves
out a given name, gives an answer away or copies a seed is dropped. The round (self_instruct.py) then
executes the tasks (self_instruct_execute.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from eval.metrics import names_in
from memory_runtime.generation.backend import Backend
from memory_runtime.jsonl import read_models
from memory_runtime.memory.terms import normalize_term
from memory_runtime.protocol import Call, Triplet, parse_calls
from memory_runtime.records import Record

TaskType = Literal["write", "read", "unanswerable", "two_hop"]
Query = tuple[str | None, str | None, str | None]


class Task(BaseModel):
    """One statement or question with known gold: a seed, a draft (text "") or a generated task.

    `reads` are the gold read queries of a question (two-hop: both hops, the second's organisation
    None); `memory` the facts stored before the task runs."""

    model_config = ConfigDict(extra="forbid")

    id: str
    type: TaskType
    shape: str | None = None
    text: str = ""
    gold_triplets: list[Triplet] = []
    gold_names: list[str] = []
    reads: list[Query] = []
    memory: list[Triplet] = []

    @property
    def kind(self) -> Literal["statement", "question"]:
        return "statement" if self.type == "write" else "question"

    def spec(self) -> str:
        """What the sentence must say, in the memory's terms (the augmentation prompt shows it)."""
        if self.kind == "statement":
            return "state: " + "; ".join(" >> ".join(t) for t in self.gold_triplets)
        if self.type == "two_hop" and len(self.reads) == 2:
            (person, first, _), (_, second, _) = self.reads
            return f"ask: ? >> {second} >> (what {person} is {first})"  # any schema: no type named
        return "ask: " + " >> ".join(f or "?" for f in self.reads[0])

    def required_names(self) -> list[str]:
        """Names the sentence must contain exactly: every name of a statement, the names a question gives."""
        if self.kind == "statement":
            return list(dict.fromkeys(n for t in self.gold_triplets for n in (t[0], t[2])))
        s, _, o = self.reads[0]
        return [n for n in ((s, o) if self.type != "two_hop" else (s,)) if n]

    def names(self) -> list[str]:
        """Every name the task knows of: the candidates an answer is checked against."""
        facts = [*self.memory, *self.gold_triplets]
        return list(dict.fromkeys([*(t[0] for t in facts), *(t[2] for t in facts), *self.gold_names]))


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from JSONL (one Task per line, ``#`` comments); errors name the line."""
    return read_models(path, Task, "a task", comments=True)


# ----------------------------------------------------------------------------- draft


def task_of_record(record: Record) -> Task | None:
    """A draft from a one-turn data_gen record (its gold reads parsed from the gold calls)."""
    if record.type not in ("write", "read", "unanswerable", "two_hop"):
        return None
    gold = "".join(s.text for s in record.segments if s.role != "user")
    reads = [c.fields for c in parse_calls(gold) if isinstance(c, Call) and c.kind == "read"]
    return Task(
        id=record.id,
        type=record.type,
        shape=record.shape,
        gold_triplets=record.gold_triplets,
        gold_names=record.gold_names,
        reads=reads,
        memory=record.memory,
    )


def draft_tasks(data_config: Path | str, n: int, *, seed: int = 0, mix: dict[str, float] | None = None) -> list[Task]:
    """`n` drafts over the train pool of the data config's world (the names of its schema's types)."""
    from data_gen.data_config import DataConfig, MixConfig, functional_of, memory_table
    from data_gen.examples import build_records
    from data_gen.oracle import MemoryOracle
    from data_gen.world import build_world

    config = DataConfig.load(data_config, [f"seed={seed}"])
    config.mix = MixConfig(**(mix or {"write": 0.4, "read": 0.4, "unanswerable": 0.1, "two_hop": 0.1}))
    world = build_world(config)
    oracle = MemoryOracle(memory_table(config))
    records = build_records(config, world.pools["train"], oracle, functional_of(config), n)
    return [t for t in map(task_of_record, records) if t is not None]


# ----------------------------------------------------------------------------- augment

AUGMENT_PROMPT = (
    "Write one new sentence for the spec, in your own words, like the examples. "
    "Use every name exactly as written. Write only the sentence."
)


def augment_messages(draft: Task, demos: Sequence[Task]) -> list[dict[str, str]]:
    """The prompt: instructions, seed examples as spec -> sentence chat turns, then the draft's spec
    (chat turns rather than one text block: a small chat model answers them with one sentence)."""
    messages = [{"role": "system", "content": AUGMENT_PROMPT}]
    for demo in demos:
        messages += [{"role": "user", "content": f"Spec: {demo.spec()}"}, {"role": "assistant", "content": demo.text}]
    return messages + [{"role": "user", "content": f"Spec: {draft.spec()}"}]


def generate_text(backend: Backend, messages: list[dict[str, str]], max_new_tokens: int) -> str:
    """Plain generation through a streaming backend (no memory calls are run)."""
    backend.start(messages)
    stream = backend.stream(max_new_tokens)
    try:
        return "".join(stream)
    finally:
        stream.close()


def clean_generation(text: str) -> str:
    """The sentence of a generation: after its first 'Sentence:' label, else its first line that
    is not a spec (small models often echo the prompt's pattern before answering)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    labelled = [line for line in lines if line.lower().startswith("sentence:")]
    if labelled:
        lines = [labelled[0][len("sentence:") :]]
    for line in lines:
        line = line.strip().strip("\"'` ")
        if line and not line.lower().startswith("spec:"):
            return line
    return ""


def rejection(task: Task, text: str, seen: set[str]) -> str | None:
    """Why a generated sentence cannot be used, or None when it can."""
    if not text:
        return "empty"
    if len(text) > 300 or any(c in text for c in "[]{}") or ">>" in text:
        return "not a plain sentence"
    if normalize_term(text) in seen:
        return "copy of an example"
    required = task.required_names()
    missing = {normalize_term(n) for n in required} - names_in(text, required)
    if missing:
        return "missing name"
    if task.kind == "question":
        if not text.rstrip().endswith("?"):
            return "not a question"
        answers = [n for n in task.gold_names if normalize_term(n) not in {normalize_term(r) for r in required}]
        if names_in(text, answers):
            return "gives the answer away"
    elif text.rstrip().endswith("?"):
        return "not a statement"
    return None


def augment(
    drafts: Sequence[Task],
    seeds: Sequence[Task],
    backend: Backend,
    *,
    demos: int = 3,
    max_new_tokens: int = 48,
    rng: random.Random | None = None,
) -> tuple[list[Task], list[dict]]:
    """(accepted tasks, a log row per draft). Demos are seeds of the draft's type (and shape when
    there are enough), so the model sees the kind of sentence it must write."""
    rng = rng or random.Random(0)
    seen = {normalize_term(s.text) for s in seeds}
    accepted, log = [], []
    for draft in drafts:
        same = [s for s in seeds if s.type == draft.type] or list(seeds)
        shaped = [s for s in same if s.shape == draft.shape]
        shots = rng.sample(shaped, min(demos, len(shaped)))  # the draft's shape first, then its type
        rest = [s for s in same if s not in shots]
        shots += rng.sample(rest, min(demos - len(shots), len(rest)))
        raw = generate_text(backend, augment_messages(draft, shots), max_new_tokens)
        text = clean_generation(raw)
        why = rejection(draft, text, seen)
        log.append({"id": draft.id, "spec": draft.spec(), "generated": raw, "text": text, "rejected": why})
        if why is None:
            seen.add(normalize_term(text))
            accepted.append(draft.model_copy(update={"text": text}))
    return accepted, log
