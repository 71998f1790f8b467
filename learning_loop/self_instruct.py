"""Self-instructed trajectories (after RAR-Agent's cold start): the model writes new phrasings
of tasks whose gold is known, runs them with its memory, and the right runs become training data.

One round:

    draft     facts drawn from a synthetic world (data_gen's record builders, so the store
              computes every gold value); a draft is a task without its text, given by a `spec`
              ("state: Ada Lin >> employed by >> Pfizer", "ask: ? >> employed by >> Pfizer").
    augment   the model sees seed tasks (human-written, configs/self_instruct/seed_tasks.jsonl)
              as spec -> sentence examples and writes the draft's sentence; a generation that
              leaves out a name the spec gives, gives away an answer, or copies a seed is dropped.
    execute   each task runs through the model's decoder (the one `generation.engine` opens,
              batched as eval's turns are) with a fresh store holding the task's memory.
    reward    learning_loop.reward: exact only for exactly the gold writes / gold reads and names.
    keep      exact trajectories become data_gen Records (user untrained, the model's calls
              and answer trained, inserted results untrained), written as JSONL that
              `memlm train` includes through data.extra_jsonl.

`run_rounds` saves the resolved config (`self_instruct_config.yaml`) and repeats this, training on
templates + every trajectory kept so far after each round, continuing the current adapter
(`--model` when it is a trained run, then each round's; `continue_adapter: false` trains a fresh
one each round); the next round generates and executes with the new adapter.

The steps are in self_instruct_tasks.py (draft, augment) and self_instruct_execute.py (execute, reward,
keep, and the held-out and real-text measures); here the config and the rounds.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from learning_loop.self_instruct_execute import run_tasks, score_real, score_tasks
from learning_loop.self_instruct_tasks import augment, draft_tasks, load_tasks
from memory_runtime.generation.backend import Backend
from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.runtime import Generation, Runtime, with_defaults
from memory_runtime.jsonl import write_jsonl
from memory_runtime.records import Record
from memory_runtime.shipped import resolve_path
from memory_runtime.yaml_config import Strict


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
        "through its decoder, batched; no write gate: the reward checks every write)",
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


def run_rounds(
    config: SelfInstructConfig,
    out: Path,
    *,
    log: Callable[[str], None] = print,
    train_fn: Callable | None = None,
    backend_for: Callable[[str], Backend] | None = None,
    engine_for: Callable[[str], Decoder] | None = None,
) -> list[dict]:
    """Run the configured rounds of `config.generation.model` into `out`: per round `round-N/` (drafts,
    generations, executions, kept.jsonl, adapter/) and one line per round in `rounds.jsonl`. Returns the
    round rows. Every task runs against a fresh memory of `config.generation.memory_config`.

    `backend_for(model)` streams the sentences (augment), `engine_for(model)` runs the tasks; with
    `train_fn(train_config)` they default to the real model (opened once with `config.generation`,
    memory_runtime.generation.runtime: its backend and its decoder) and trainer."""
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.trained_run import trained_system_prompt

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
        prompt = trained_system_prompt(model)  # the model of this round was trained with it
        row: dict = {"round": r, "model": model}
        if tests and r == 1:
            row["test_before"] = score_tasks(tests, engine, config.generation, memory, system_prompt=prompt)
            log(f"round {r}: held-out test before: {row['test_before']}")
        if real and r == 1:
            row["real_before"] = score_real(real, engine, config.generation, memory, system_prompt=prompt)
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
        write_jsonl(rdir / "augment.jsonl", aug_log)
        kept, run_log = run_tasks(tasks, engine, config.generation, memory, system_prompt=prompt)
        write_jsonl(rdir / "executions.jsonl", run_log)
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
            prompt = trained_system_prompt(model)
        if tests:
            row["test_after"] = score_tasks(tests, engine, config.generation, memory, system_prompt=prompt)
            log(f"round {r}: held-out test after: {row['test_after']}")
        if real:
            row["real_after"] = score_real(real, engine, config.generation, memory, system_prompt=prompt)
            log(f"round {r}: real-text probe after: {row['real_after']}")
        row["adapter"], row["seconds"] = model, round(time.perf_counter() - t0, 1)
        rows.append(row)
        write_jsonl(out / "rounds.jsonl", [row], append=True)
    return rows


def _real_passages(config: SelfInstructConfig) -> list[Record]:
    if config.real_limit is None:
        return []
    from eval.real_probe import real_sample

    return real_sample(config.real, config.real_limit, config.seed)


def spread(items: list, limit: int | None) -> list:
    """`limit` items evenly spread over the list (test files are grouped by kind), or all of them."""
    if limit is None or limit >= len(items):
        return list(items)
    return [items[(2 * i + 1) * len(items) // (2 * limit)] for i in range(limit)]


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

    def engine(self, model: str) -> Decoder:
        return self.runtime(model).decoder

    def release(self, model: str) -> None:
        """Forget `model` (what was handed out of it stays alive while it is held)."""
        self.runtimes.pop(model, None)


def _train_config(
    config: SelfInstructConfig, out: Path, kept_files: list[str], adapter: Path, init_from: str | None = None
):
    """The round's training config: templates (generated once into out/templates) + kept trajectories;
    with `init_from` (an adapter dir) it continues that adapter on its own base."""
    from data_gen.data_config import DataConfig
    from training.train_config import TrainConfig

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
    from learning_loop.train import train

    train(train_config)
