"""Self-instructed trajectories (after RAR-Agent's cold start): the model writes new phrasings
of tasks whose gold is known, runs them with its memory, and the right runs become training data.

One round:

    draft     facts drawn from a synthetic world (data_gen's record builders, so the store
              computes every gold value); a draft is a task without its text, given by a `spec`
              ("state: Ada Lin >> employed by >> Pfizer", "ask: ? >> employed by >> Pfizer").
    augment   the model sees seed tasks (human-written, configs/self_instruct/seed_tasks.jsonl)
              as spec -> sentence examples and writes the draft's sentence; a generation that
              leaves out a name the spec gives, gives away an answer, or copies a seed is dropped.
    execute   each task runs through the model's turn engine (the one `generation.engine` opens,
              batched as eval's turns are) with a fresh store holding the task's memory.
    reward    learning_loop.reward: exact only for exactly the gold writes / gold reads and names.
    keep      exact trajectories become data_gen Records (user untrained, the model's calls
              and answer trained, inserted results untrained), written as JSONL that
              `memlm train` includes through data.extra_jsonl.

`run_rounds` saves the resolved config (`self_instruct_config.yaml`) and repeats this, training on
templates + every trajectory kept so far after each round, continuing the current adapter
(`--model` when it is a trained run, then each round's; `continue_adapter: false` trains a fresh
one each round); the next round generates and executes with the new adapter.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eval.metrics import names_in
from learning_loop.reward import score_turn
from memory_runtime.generation.backend import Backend
from memory_runtime.generation.engine import Session, TurnEngine, TurnRequest, TurnResult, turn_messages
from memory_runtime.generation.runtime import Generation, Runtime, with_defaults
from memory_runtime.jsonl import read_models
from memory_runtime.memory.config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.protocol import SYSTEM_PROMPT, Call, Triplet, parse_calls
from memory_runtime.records import Record, turn_segments
from memory_runtime.shipped import resolve_path
from memory_runtime.yaml_config import Strict

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


def write_jsonl(path: Path, items: Iterable[BaseModel]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(item.model_dump_json() + "\n")
            n += 1
    return n


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
    from data_gen.config import DataConfig, MixConfig, functional_of, memory_table
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


# ----------------------------------------------------------------------------- execute, reward, keep


def task_session(
    task: Task,
    memory_config: MemoryConfig | None = None,
    *,
    max_new_tokens: int = 128,
    max_calls: int = 8,
    system_prompt: str | None = SYSTEM_PROMPT,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> Session:
    """The task as a session of a turn engine: its turn against a fresh store holding its memory; returns
    (the turn, its score)."""
    with TripletStore(":memory:", memory_config) as store:
        if task.memory:
            store.write_many(task.memory, at=1.0)
        result = yield TurnRequest(
            turn_messages(task.text, system_prompt=system_prompt),
            store,
            max_new_tokens=max_new_tokens,
            max_calls=max_calls,
            temperature=temperature,
            top_p=top_p,
        )
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
    engine: TurnEngine,
    memory_config: MemoryConfig | None = None,
    *,
    max_new_tokens: int = 128,
    max_calls: int = 8,
    system_prompt: str | None = SYSTEM_PROMPT,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> tuple[list[Record], list[dict]]:
    """(records of the exact trajectories, a log row per task): every task through `engine` (:func:`task_session`)."""
    run = dict(
        max_new_tokens=max_new_tokens,
        max_calls=max_calls,
        system_prompt=system_prompt,
        temperature=temperature,
        top_p=top_p,
    )
    kept, log = [], []
    outcomes = engine.run_sessions(task_session(task, memory_config, **run) for task in tasks)
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


# ----------------------------------------------------------------------------- config and rounds


class TrainStep(Strict):
    """How each round trains: a `memlm train` config plus overrides (dotted key=value)."""

    config: str = "../train/cpu-smollm2.yaml"
    overrides: list[str] = [
        "optim.max_steps=60",
        "output.eval_strategy=no",
        "output.final_eval=false",
        "output.save_strategy=no",
        "output.logging_steps=4",
    ]
    templates: str = "../data/tiny.yaml"  # data config of the template records trained alongside


# execution: the short turns of one statement or question, as eval decodes them
SELF_INSTRUCT_GENERATION: dict = {"max_new_tokens": 96, "max_calls": 8, "engine": "hf"}
IN_PROCESS = "self-instruct writes its sentences with the model in this process (hf)"


class SelfInstructConfig(Strict):
    """configs/self_instruct/default.yaml (these defaults). Relative paths are relative to the config
    file and resolved: the saved config holds absolute paths."""

    what = "self-instruct config"

    seed: int = 0
    rounds: int = Field(1, ge=1)
    tasks_per_round: int = Field(16, ge=1)  # drafts per round (some are dropped by augmentation)
    world: str = "../data/tiny.yaml"  # data config whose world the drafts' facts come from
    seed_tasks: str = "seed_tasks.jsonl"
    test_tasks: str | None = "paraphrase_test.jsonl"  # held-out, hand-written: measured before and after
    test_limit: int | None = Field(12, ge=1)  # an even spread of N test tasks (every kind), for quick runs
    real_limit: int | None = Field(20, ge=1)  # real-text probe before/after: N passages per source (null: off)
    real: str | None = None  # real passages (file or dir); null = data/real/ in the repository
    demos: int = Field(3, ge=1, le=10)
    augment_model: str | None = "embedded:SmolLM2-135M-Instruct"  # writes the sentences (None: the model trained)
    augment_max_new_tokens: int = Field(40, ge=8)
    continue_adapter: bool = True  # a round trains on from the current adapter (generation.model or the last round's)
    train: TrainStep = TrainStep()
    generation: Generation = Field(
        default_factory=lambda: Generation(**SELF_INSTRUCT_GENERATION),
        description="the model trained (model: a base model or a run to continue; null: the embedded base) and how "
        "it executes and writes (engine hf: the sentences stream from the model in this process, the tasks run "
        "through its turn engine, batched; no write gate: the reward checks every write)",
    )

    @model_validator(mode="before")
    @classmethod
    def _execute_generation(cls, data: Any) -> Any:
        return with_defaults(data, **SELF_INSTRUCT_GENERATION)

    @model_validator(mode="after")
    def _one_turn_at_a_time(self) -> SelfInstructConfig:
        if self.generation.engine == "vllm":
            raise ValueError(f"generation.engine: {IN_PROCESS}")
        if self.generation.write_gate.active:
            raise ValueError("generation.write_gate: self-instruct stores every write (the reward checks them)")
        if self.generation.max_new_tokens < 8:
            raise ValueError("generation.max_new_tokens: at least 8")
        return self

    def relative_to(self, folder: Path) -> SelfInstructConfig:
        self.world, self.seed_tasks = resolve_path(self.world, folder), resolve_path(self.seed_tasks, folder)
        self.test_tasks, self.real = resolve_path(self.test_tasks, folder), resolve_path(self.real, folder)
        self.train.config = resolve_path(self.train.config, folder)
        self.train.templates = resolve_path(self.train.templates, folder)
        self.generation.relative_to(folder)
        return self


def score_tasks(
    tasks: Sequence[Task],
    engine: TurnEngine,
    memory_config: MemoryConfig | None = None,
    *,
    max_new_tokens: int = 128,
    max_calls: int = 8,
    system_prompt: str | None = SYSTEM_PROMPT,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> dict:
    """The exact rate on tasks (the held-out paraphrase test): overall and per kind."""
    _, log = run_tasks(
        tasks,
        engine,
        memory_config,
        max_new_tokens=max_new_tokens,
        max_calls=max_calls,
        system_prompt=system_prompt,
        temperature=temperature,
        top_p=top_p,
    )
    out: dict = {"tasks": len(log), "correct": sum(r["exact"] for r in log)}
    for kind in ("write", "read", "unanswerable", "two_hop"):
        rows = [r for r in log if r["type"] == kind]
        if rows:
            out[kind] = sum(r["exact"] for r in rows) / len(rows)
    out["accuracy"] = out["correct"] / len(log) if log else None
    return out


def run_rounds(
    config: SelfInstructConfig,
    out: Path,
    *,
    log: Callable[[str], None] = print,
    train_fn: Callable | None = None,
    backend_for: Callable[[str], Backend] | None = None,
    engine_for: Callable[[str], TurnEngine] | None = None,
) -> list[dict]:
    """Run the configured rounds of `config.generation.model` into `out`: per round `round-N/` (drafts,
    generations, executions, kept.jsonl, adapter/) and one line per round in `rounds.jsonl`. Returns the
    round rows. Every task runs against a fresh memory of `config.generation.memory_config`.

    `backend_for(model)` streams the sentences (augment), `engine_for(model)` runs the tasks; with
    `train_fn(train_config)` they default to the real model (opened once with `config.generation`,
    memory_runtime.generation.runtime: its backend and its turn engine) and trainer."""
    from memory_runtime.models.loading import EMBEDDED_MODEL, trained_system_prompt

    model = config.generation.model or EMBEDDED_MODEL
    memory = config.generation.memory()
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / "self_instruct_config.yaml")
    seeds = load_tasks(config.seed_tasks)
    tests = spread(load_tasks(config.test_tasks), config.test_limit) if config.test_tasks else []
    real = _real_passages(config)
    opened = _Opened(config.generation)
    backend_for = backend_for or opened.backend
    engine_for = engine_for or opened.engine
    writer = backend_for(config.augment_model) if config.augment_model else None
    train_fn = train_fn or _train
    kept_files: list[str] = []
    rows = []
    for r in range(1, config.rounds + 1):
        t0 = time.perf_counter()
        rdir = out / f"round-{r}"
        engine = engine_for(model)
        run = {
            "max_new_tokens": config.generation.max_new_tokens,
            "max_calls": config.generation.max_calls,
            "system_prompt": trained_system_prompt(model),
            "temperature": config.generation.temperature,
            "top_p": config.generation.top_p,
        }
        row: dict = {"round": r, "model": model}
        if tests and r == 1:
            row["test_before"] = score_tasks(tests, engine, memory, **run)
            log(f"round {r}: held-out test before: {row['test_before']}")
        if real and r == 1:
            row["real_before"] = score_real(real, engine, memory, **run)
            log(f"round {r}: real-text probe before: {row['real_before']}")
        drafts = draft_tasks(config.world, config.tasks_per_round, seed=config.seed + r)
        tasks, aug_log = augment(
            drafts,
            seeds,
            writer or backend_for(model),
            demos=config.demos,
            max_new_tokens=config.augment_max_new_tokens,
            rng=random.Random(config.seed * 1000 + r),
        )
        write_jsonl(rdir / "tasks.jsonl", tasks)
        _dump(rdir / "augment.jsonl", aug_log)
        kept, run_log = run_tasks(tasks, engine, memory, **run)
        _dump(rdir / "executions.jsonl", run_log)
        write_jsonl(rdir / "kept.jsonl", kept)
        if kept:
            kept_files.append(str(rdir / "kept.jsonl"))
        row.update(
            {
                "drafts": len(drafts),
                "generated": len(tasks),
                "kept": len(kept),
                "kept_ratio": len(kept) / len(tasks) if tasks else 0.0,
            }
        )
        log(f"round {r}: {len(drafts)} drafts, {len(tasks)} generated, {len(kept)} kept ({row['kept_ratio']:.0%})")
        del engine
        opened.release(model)  # the model trained is not held while it trains
        adapter = rdir / "adapter"
        init = model if config.continue_adapter and (Path(model) / "adapter_config.json").is_file() else None
        train_fn(_train_config(config, out, kept_files, adapter, init_from=init))
        model = str(adapter)
        if tests or real:
            engine = engine_for(model)
            run["system_prompt"] = trained_system_prompt(model)
        if tests:
            row["test_after"] = score_tasks(tests, engine, memory, **run)
            log(f"round {r}: held-out test after: {row['test_after']}")
        if real:
            row["real_after"] = score_real(real, engine, memory, **run)
            log(f"round {r}: real-text probe after: {row['real_after']}")
        row["adapter"], row["seconds"] = model, round(time.perf_counter() - t0, 1)
        rows.append(row)
        with open(out / "rounds.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
    return rows


def _real_passages(config: SelfInstructConfig) -> list[Record]:
    if config.real_limit is None:
        return []
    from eval.real_probe import real_sample

    return real_sample(config.real, config.real_limit, config.seed)


def score_real(
    records: Sequence[Record],
    engine: TurnEngine,
    memory_config: MemoryConfig | None = None,
    *,
    max_new_tokens: int = 128,
    max_calls: int = 8,
    system_prompt: str | None = SYSTEM_PROMPT,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> dict:
    """The real-text probe (eval/real_probe.py) over all sources, every passage through `engine`: pair
    P/R/F1 and false writes."""
    from eval.real_probe import evaluate_real, summarise_real
    from eval.systems import System

    system = System(
        "memlm",
        None,
        None,
        max_new_tokens,
        max_calls,
        system_prompt=system_prompt,
        decoder=engine,
        temperature=temperature,
        top_p=top_p,
    )
    overall = summarise_real(evaluate_real(system, records, memory_config))["all"]
    return {
        "passages": overall["passages"],
        "pair_f1": round(overall["pair"]["f1"], 3),
        "pair_precision": round(overall["pair"]["precision"], 3),
        "pair_recall": round(overall["pair"]["recall"], 3),
        "false_write_rate": overall["false_write_rate"],
        "any_write_rate": overall["any_write_rate"],
    }


def spread(items: list, limit: int | None) -> list:
    """`limit` items evenly spread over the list (test files are grouped by kind), or all of them."""
    if limit is None or limit >= len(items):
        return list(items)
    return [items[(2 * i + 1) * len(items) // (2 * limit)] for i in range(limit)]


def _dump(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


class _Opened:
    """The models of the rounds, each opened once with the config's generation section (engine hf: the
    sentences stream from the model in this process): a model's backend and its engine share it."""

    def __init__(self, generation: Generation) -> None:
        self.generation = generation
        self.runtimes: dict[str, Runtime] = {}

    def runtime(self, model: str) -> Runtime:
        if model not in self.runtimes:
            from memory_runtime.generation.runtime import open_runtime

            self.runtimes[model] = open_runtime(self.generation.model_copy(update={"model": model}), IN_PROCESS)
        return self.runtimes[model]

    def backend(self, model: str) -> Backend:
        return self.runtime(model).backend()

    def engine(self, model: str) -> TurnEngine:
        return self.runtime(model).decoder

    def release(self, model: str) -> None:
        """Forget `model` (what was handed out of it stays alive while it is held)."""
        self.runtimes.pop(model, None)


def _train_config(
    config: SelfInstructConfig, out: Path, kept_files: list[str], adapter: Path, init_from: str | None = None
):
    """The round's training config: templates (generated once into out/templates) + kept trajectories;
    with `init_from` (an adapter dir) it continues that adapter on its own base."""
    from data_gen.config import DataConfig
    from training.config import TrainConfig

    templates = out / "templates"
    if not (templates / "dataset_dict.json").exists():
        from data_gen.generate import generate

        generate(DataConfig.load(config.train.templates), templates, overwrite=True, show_progress=False)
    overrides = [
        *config.train.overrides,
        f"data.path={json.dumps(str(templates))}",
        "data.synthetic=null",
        f"data.extra_jsonl={json.dumps(kept_files)}",
        f"output.output_dir={json.dumps(str(adapter))}",
    ]
    if init_from is not None:
        from memory_runtime.models.loading import adapter_base

        overrides += [
            f"lora.init_from={json.dumps(str(Path(init_from).resolve()))}",
            f"model.name={json.dumps(adapter_base(init_from))}",
        ]
    return TrainConfig.load(config.train.config, overrides)


def _train(train_config) -> None:
    from training.trainer import train

    train(train_config)
