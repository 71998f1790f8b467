"""The README.md of a finished `memlm train` run: what the run is, in memlm's words (the run card).

TRL and PEFT write a hub model card as they save (a hub link to the base, ``model="None"``, a pipeline
snippet that cannot load an adapter of an embedded base). ``Run.finish`` (training/run.py), the ending every
objective shares, replaces it after the last save with this card: :func:`run_card` renders it from the config
and the facts of the run (a pure function: the tests give it fake ones), :func:`write_run_card` gathers those
from the trainer and the run directory and writes the file whole. train_config.yaml stays the full record."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memory_runtime.memory.memory_config import RELATION_TABLE_FILE
from memory_runtime.shipped import memlm_version
from training.train_config import CONFIG_FILENAME, TrainConfig

README_FILENAME = "README.md"
OBJECTIVES = {"sft": "SFT", "dpo": "DPO", "kto": "KTO", "grpo": "GRPO", "verifier": "write verifier"}
METHODS = {"lora": "LoRA", "qlora": "QLoRA", "full": "full fine-tuning"}


@dataclass(frozen=True)
class RunFacts:
    """What the card says beyond the config: the run as it ended (:func:`gather_facts` reads them)."""

    directory: str  # the run's directory as the user gave it (output.output_dir)
    metrics: dict[str, Any]  # what metrics.json holds
    global_step: int
    max_steps: int
    epoch: float | None = None
    log_history: list[dict[str, Any]] = field(default_factory=list)
    resolved_base: str | None = None  # what model.name resolved to (loading.resolve_base)
    adapter: dict[str, Any] | None = None  # the run's adapter_config.json (None: full fine-tuning)
    relations: dict[str, Any] | None = None  # the run's relations.yaml (None: it keeps none)
    data_schema: str | None = None  # the name in the data directory's schema.yaml
    machine: str = "unknown"
    version: str = "unknown"


# ----------------------------------------------------------------------------- rendering


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _number(value: Any, fmt: str = "{:.4f}") -> str:
    return fmt.format(value) if isinstance(value, (int, float)) else "n/a"


def _last(history: list[dict[str, Any]], key: str) -> tuple[Any, Any]:
    """The last logged value of `key` and its step ((None, None) if never logged)."""
    for entry in reversed(history):
        if isinstance(entry.get(key), (int, float)):
            return entry[key], entry.get("step")
    return None, None


def _model_lines(config: TrainConfig, facts: RunFacts) -> list[str]:
    base = f"- base: `{config.model.name}`"
    if facts.resolved_base and facts.resolved_base != config.model.name:
        base += f" (loaded from `{facts.resolved_base}`)"
    lines = [base]
    if config.reference is not None:
        lines.append(
            f"- starts from: `{config.reference}` (a `memlm train` run): the policy is a trainable copy of its "
            "adapter, the reference a frozen one"
        )
    if config.lora.init_from is not None:
        lines.append(f"- continues: the adapter `{config.lora.init_from}` (lora.init_from; its r and targets kept)")
    adapter = facts.adapter
    if config.method == "full" or adapter is None:
        lines.append("- weights: every weight trained and saved (model.safetensors); no adapter")
    else:
        targets = adapter.get("target_modules")
        if isinstance(targets, (list, tuple, set)):
            targets = ", ".join(sorted(targets))
        lines.append(
            f"- adapter: {METHODS[config.method]} r {adapter.get('r')}, alpha {adapter.get('lora_alpha')}"
            f" on {targets or 'n/a'} (adapter_config.json, PEFT's)"
        )
    if config.method == "qlora":
        q = config.qlora
        lines.append(f"- 4-bit base: {q.quant_type}, double quant {q.double_quant}, compute in {q.compute_dtype}")
    return lines


def _schema_lines(config: TrainConfig, facts: RunFacts) -> list[str]:
    table = facts.relations
    if table is None:
        lines = [
            f"- relation table: none kept in the run (no {RELATION_TABLE_FILE}): eval, chat and serve open its "
            "memory with memlm's shipped table, or the one a memory config gives"
        ]
    else:
        names = [str(r.get("name")) for r in table.get("relations") or [] if isinstance(r, dict)]
        shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
        lines = [
            f"- relation table: `{RELATION_TABLE_FILE}` in this run, {len(names)} relation(s)"
            + (f": {shown}" if names else "")
            + "; eval, chat and serve open the memory with it"
        ]
        if table.get("open_relations"):
            lines.append("- open relations: yes — relations outside the table are kept as written")
        else:
            lines.append("- open relations: no — the model writes the table's relations")
    if facts.data_schema is not None:
        lines.append(f"- schema: `{facts.data_schema}` (schema.yaml of the data directory)")
    return lines


def _records(stats: Any) -> str:
    if not isinstance(stats, dict):
        return "n/a"
    for what in ("records", "pairs", "turns"):
        if what in stats:
            tokens = stats.get("tokens")
            trained = stats.get("trained_tokens")
            extra = (
                f" ({tokens:,} tokens, {trained:,} trained)"
                if isinstance(tokens, int) and isinstance(trained, int)
                else ""
            )
            return f"{stats[what]:,} {what}{extra}"
    return ", ".join(f"{k} {v}" for k, v in stats.items())


def _data_lines(config: TrainConfig, facts: RunFacts) -> list[str]:
    data = config.data
    lines = []
    if data.path is not None:
        source = {"sft": "`memlm generate`", "grpo": "`memlm generate`"}.get(config.objective, "`memlm sample`")
        folder = Path(data.path)
        if folder.suffix == ".jsonl":
            lines.append(f"- file: `{data.path}`")
        else:
            lines.append(f"- directory: `{data.path}` (a {source} directory; its config: `{folder / 'config.yaml'}`)")
    elif data.synthetic is not None:
        s = data.synthetic
        lines.append(
            f"- synthetic: data.synthetic ({s.train} train, {s.validation} validation records of data_gen's tiny "
            f"config, seed {s.seed}, made in memory)"
        )
    for extra in data.extra_jsonl:
        lines.append(f"- added to train: `{extra}`")
    stats = facts.metrics.get("data") or {}
    if config.objective == "grpo":
        lines.append(
            f"- prompts: {stats.get('prompts', 'n/a')} ({stats.get('statement', 'n/a')} statements, "
            f"{stats.get('question', 'n/a')} questions), {stats.get('rollouts', 'n/a')} rollout rounds"
        )
    else:
        lines.append(f"- train: {_records(stats.get('train'))}")
        lines.append(f"- eval: {_records(stats['validation']) if 'validation' in stats else 'none'}")
    return lines


def _training_rows(config: TrainConfig, facts: RunFacts) -> list[tuple[str, str]]:
    opt, metrics = config.optim, facts.metrics
    steps = f"{facts.global_step} of {facts.max_steps}"
    budget = metrics.get("budget")
    if isinstance(budget, dict) and budget.get("reached_steps", 0) < budget.get("requested_steps", 0):
        steps += f" (optim.max_minutes {budget.get('max_minutes')}: {budget.get('requested_steps')} requested)"
    epochs = _number(facts.epoch, "{:.3g}")
    epochs += f" (of {opt.num_train_epochs:g})" if opt.max_steps < 0 else f" (optim.max_steps {opt.max_steps})"
    processes = (metrics.get("distributed") or {}).get("processes", 1)
    if opt.max_tokens_per_step is not None:
        batch = f"up to {opt.max_tokens_per_step:,} tokens per device and micro-batch"
    else:
        batch = f"{opt.per_device_train_batch_size} per device"
    batch += f" x {opt.gradient_accumulation_steps} accumulated x {processes} process(es)"
    dtype = metrics.get("dtype") or {}
    rows = [
        ("objective", f"{OBJECTIVES[config.objective]} ({config.objective})"),
        ("steps", steps),
        ("epochs", epochs),
        ("batch", batch),
        ("learning rate", f"{opt.learning_rate:g}, {opt.lr_scheduler_type}, warmup {opt.warmup:g}"),
    ]
    if config.method != "full" and facts.adapter is not None:
        rows.append(("LoRA", f"r {facts.adapter.get('r')}, alpha {facts.adapter.get('lora_alpha')}"))
    rows += [
        (
            "dtype",
            str(dtype.get("dtype", config.model.dtype)) + (f" ({dtype['reason']})" if dtype.get("reason") else ""),
        ),
        ("time", _duration(metrics.get("wall_seconds"))),
        ("machine", facts.machine),
        ("memlm", facts.version),
    ]
    return rows


def _figure_lines(config: TrainConfig, facts: RunFacts) -> list[str]:
    metrics, history = facts.metrics, facts.log_history
    loss, step = _last(history, "loss")
    lines = []
    if loss is not None:
        lines.append(f"- train loss: {_number(loss)} (last logged, step {step})")
    if isinstance(metrics.get("train_loss"), (int, float)):
        lines.append(f"- train loss over the run: {_number(metrics['train_loss'])} (mean)")
    eval_loss = metrics.get("eval_loss")
    eval_step = facts.global_step
    if not isinstance(eval_loss, (int, float)):
        eval_loss, eval_step = _last(history, "eval_loss")
    if eval_loss is not None:
        lines.append(f"- eval loss: {_number(eval_loss)} (step {eval_step})")
    elif config.objective != "grpo":
        lines.append("- eval loss: none (no eval split)")
    for key in ("rewards/margins", "rewards/accuracies", "kl"):
        if isinstance(metrics.get(key), (int, float)):
            lines.append(f"- {key}: {_number(metrics[key], '{:.3f}')} (last logged)")
    verifier = metrics.get("verifier")
    if isinstance(verifier, dict):
        lines.append(
            f"- held-out AUC: {verifier.get('auc_all')} over {verifier.get('held_out_all')} candidates "
            f"(the writer's own proposals: {verifier.get('auc_writer')} over {verifier.get('held_out_writer')})"
        )
        lines.append(
            f"- threshold: {verifier.get('threshold')} (F1 {verifier.get('threshold_f1')} on the held-out "
            f"{verifier.get('threshold_chosen_on')} candidates; verifier.json)"
        )
    rewards = metrics.get("rewards")
    if isinstance(rewards, dict):
        lines.append(
            f"- reward: {_number(rewards.get('first'), '{:.3f}')} first logged, "
            f"{_number(rewards.get('last'), '{:.3f}')} last ({rewards.get('logged')} logged)"
        )
    return lines or ["- none logged"]


def run_card(config: TrainConfig, facts: RunFacts) -> str:
    """The run's README.md: title, base, memory schema, data, training, figures, how to use it."""
    directory = facts.directory
    name = Path(directory).name or directory
    dir_arg = shlex.quote(directory)
    report, memory = shlex.quote(f"{directory.rstrip('/')}-eval"), shlex.quote(f"{directory.rstrip('/')}.sqlite")
    rows = _training_rows(config, facts)
    width = max(len(k) for k, _ in rows)
    table = "\n".join(f"| {k.ljust(width)} | {v} |" for k, v in rows)
    sections = [
        f"# {name}: memlm {OBJECTIVES[config.objective]} run, {METHODS[config.method]}",
        (
            "A classifier that scores whether a passage states a candidate fact: the write gate's verifier"
            if config.objective == "verifier"
            else "A model taught to use memlm's triplet memory (it reads and writes facts with calls)"
        )
        + f", trained by `memlm train`. The full record of the run is `{CONFIG_FILENAME}` (the config as it ran, "
        "with notes on why); this card says it in short.",
        "## Model\n\n" + "\n".join(_model_lines(config, facts)),
        "## Memory schema\n\n" + "\n".join(_schema_lines(config, facts)),
        "## Data\n\n" + "\n".join(_data_lines(config, facts)),
        f"## Training\n\n| {'what'.ljust(width)} | |\n|{'-' * (width + 2)}|---|\n{table}",
        "## Figures\n\n" + "\n".join(_figure_lines(config, facts)),
        _use_lines(config, dir_arg, report, memory),
        "## Files\n\n"
        f"- `{CONFIG_FILENAME}`: the full record of the run: every setting as it ran\n"
        "- `metrics.json`: the final figures; `train_log.jsonl`: every logged step\n"
        + (f"- `{RELATION_TABLE_FILE}`: the memory's relation table the model learned\n" if facts.relations else "")
        + (
            "- `model.safetensors`, `config.json`: the trained model"
            if config.method == "full"
            else "- `adapter_model.safetensors`, `adapter_config.json`: the adapter (PEFT) on the base"
        ),
    ]
    return "\n\n".join(sections) + "\n"


def _use_lines(config: TrainConfig, dir_arg: str, report: str, memory: str) -> str:
    if config.objective == "verifier":
        gate = f"generation.write_gate.signal=verifier generation.write_gate.verifier={dir_arg}"
        return (
            "## Use it\n\nGate a writer of the same base and relation table with it:\n\n```\n"
            f"memlm eval --model WRITER --out {report} --parts real {gate}\n"
            f"memlm chat --model WRITER --db {memory} {gate}\n```"
        )
    return (
        "## Use it\n\n```\n"
        f"memlm eval --model {dir_arg} --out {report}      # on the test split of its data\n"
        f"memlm chat --model {dir_arg} --db {memory}\n"
        f"memlm serve --model {dir_arg} --db {memory}\n```"
    )


# ----------------------------------------------------------------------------- gathering and writing


def _mapping(path: Path) -> dict[str, Any] | None:
    try:
        data = (
            yaml.safe_load(path.read_text(encoding="utf-8")) if path.suffix != ".json" else json.loads(path.read_text())
        )
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def machine_name(device: Any) -> str:
    """The GPU the run trained on (torch.cuda), else the CPU's model name (/proc/cpuinfo)."""
    import torch

    if getattr(device, "type", device) == "cuda" and torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(device)}"
    from memory_runtime.models.hardware import cpu_info

    cpu = cpu_info()
    return f"CPU {cpu.model} ({cpu.cores} cores)"


def resolved_base(name: str) -> str | None:
    """What model.name loaded from (an embedded model's converted copy, an adapter's base); None if unknown."""
    from memory_runtime.models.loading import resolve_base

    try:
        return resolve_base(name)
    except (OSError, ValueError):
        return None


def gather_facts(config: TrainConfig, trainer: Any, metrics: dict[str, Any], out: Path) -> RunFacts:
    """The facts of a run that has just been saved in `out` by `trainer` (read only: nothing is changed)."""
    state = trainer.state
    data_path = Path(config.data.path).expanduser() if config.data.path else None
    schema = _mapping(data_path / "schema.yaml") if data_path is not None and data_path.is_dir() else None
    return RunFacts(
        directory=config.output.output_dir,
        metrics=metrics,
        global_step=state.global_step,
        max_steps=state.max_steps,
        epoch=state.epoch,
        log_history=list(state.log_history),
        resolved_base=resolved_base(config.model.name),
        adapter=_mapping(out / "adapter_config.json"),
        relations=_mapping(out / RELATION_TABLE_FILE),
        data_schema=str(schema["name"]) if schema and schema.get("name") else None,
        machine=machine_name(trainer.args.device),
        version=memlm_version() or "a checkout (not installed)",
    )


def write_run_card(config: TrainConfig, trainer: Any, metrics: dict[str, Any], out: Path) -> Path:
    """Replace the README.md TRL and PEFT left in `out` with the run card, whole or not at all. Called after
    the last save_model of the run: their card writing (each checkpoint, each save) comes before."""
    path = out / README_FILENAME
    partial = path.with_name(f".{README_FILENAME}.{os.getpid()}.partial")
    partial.write_text(run_card(config, gather_facts(config, trainer, metrics, out)), encoding="utf-8")
    os.replace(partial, path)
    return path
