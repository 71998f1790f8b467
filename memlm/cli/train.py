"""`memlm train`, `memlm inspect`, `memlm merge` and `memlm bench train` (training)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from memlm.cli.common import app, bench_app, console, fail, find_config, load, log, overrides_argument, print_json

TRAIN_CONFIG = typer.Option(
    Path("configs/train/cpu-smollm2.yaml"),
    "--config",
    help="Training config: a YAML file or a shipped name (memlm config list; the default is the quickstart's).",
)


def _quiet_training_logs() -> None:
    """DeepSpeed guesses the accelerator at import and warns on every CPU run; tell it instead."""
    import os

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def _train_config(
    config: Path,
    overrides: list[str] | None,
    data: str | None = None,
    output_dir: str | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
    fresh: bool = False,
):
    """The training config (flags win over key=value overrides); exit 2 on errors."""
    from training.train_config import TrainConfig

    items = [*(overrides or []), *(["data.synthetic=null"] if data is not None else [])]
    flags = {
        "optim.max_minutes": max_minutes,
        "output.resume_from_checkpoint": False if fresh else None,
        "data.path": data,
        "output.output_dir": output_dir,
        "optim.max_steps": max_steps,
    }
    return load(TrainConfig, config, items, flags)


@app.command("train")
def train_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = overrides_argument("optim.max_steps=50", "lora.r=16"),
    data: str | None = typer.Option(
        None,
        "--data",
        help="Sets data.path: the DatasetDict saved by data_gen; objective dpo/kto: a `memlm sample` "
        "directory (pairs.jsonl / turns.jsonl) or a JSONL file; objective grpo: a `memlm generate` directory "
        "whose train split gives prompts.",
    ),
    output_dir: str | None = typer.Option(
        None, "--out", "--output-dir", help="Sets output.output_dir: the run directory (--output-dir: the old name)."
    ),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Sets optim.max_steps."),
    max_minutes: float | None = typer.Option(
        None,
        "--max-minutes",
        min=0.01,
        help="Sets optim.max_minutes: a wall-clock budget; the schedule is shortened to the steps that fit.",
    ),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="Start over, deleting the output dir's checkpoints (by default "
        "a run resumes from a checkpoint of the same config there).",
    ),
) -> None:
    """Fine-tune a model to emit memory calls (LoRA / QLoRA / full, as configured), or, with objective
    dpo / kto and reference=RUN_DIR, train that run further on preference pairs / labelled turns, or with
    objective grpo on its own runs, executed with the memory and rewarded.

    Resumes by default when --out holds a checkpoint of the same config; model.dtype auto
    picks bfloat16 only where this machine multiplies it natively (the log says which and why)."""
    import logging

    from learning_loop.train import train
    from training.run import PREFERENCE_METRICS, is_main_process

    cfg = _train_config(config, overrides, data, output_dir, max_steps, max_minutes, fresh)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _quiet_training_logs()
    try:
        result = train(cfg, log=log)
    except (ValueError, FileNotFoundError) as err:  # a bad config, data or model: one line, no traceback
        fail(err)
    keep = (
        "train_loss",
        "eval_loss",
        "eval_mean_token_accuracy",
        "train_runtime",
        "global_step",
        "dtype",
        "budget",
        "distributed",
    )
    if cfg.objective in ("dpo", "kto"):
        keep += (*PREFERENCE_METRICS, *(f"eval_{key}" for key in PREFERENCE_METRICS))
    if cfg.objective == "grpo":
        keep += ("rewards",)
    if is_main_process():
        print_json({"output_dir": str(result.output_dir), **{k: result.metrics.get(k) for k in keep}})


@app.command("inspect")
def inspect_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = overrides_argument("data.max_length=512"),
    data: str | None = typer.Option(
        None,
        "--data",
        help="Sets data.path: the DatasetDict saved by data_gen; objective dpo/kto: a `memlm sample` "
        "directory or a JSONL file.",
    ),
    n: int = typer.Option(3, "--n", min=1, help="How many records (pairs, turns) to show."),
    split: str | None = typer.Option(None, "--split", help="Sets data.train_split: the split to read."),
) -> None:
    """Show how records are tokenised: every token with its label (-100 = not trained); for objective
    dpo a pair's shared prompt, chosen and rejected turn, for kto a turn and its label."""
    from rich.text import Text

    from training.data import inspect_preference_items, inspect_records
    from training.tokenize import RecordError

    cfg = _train_config(config, [*(overrides or []), *([f"data.train_split={split}"] if split else [])], data)
    try:
        if cfg.objective == "sft":
            tokenizer, records = inspect_records(cfg, n)
        else:
            tokenizer, records = inspect_preference_items(cfg, n)
    except (ValueError, OSError) as err:
        fail(err)
    out = Console()
    for item, enc in records:
        if isinstance(enc, RecordError):
            what = {"sft": "record", "dpo": "pair", "kto": "turn"}[cfg.objective]
            out.print(Text(f"{what} {item.id}: {enc}", style="red"))
        elif cfg.objective == "sft":
            trained = sum(1 for x in enc["labels"] if x != -100)
            out.rule(f"record {item.id} ({item.type}): {len(enc['input_ids'])} tokens, {trained} trained")
            _print_tokens(out, enc["input_ids"], enc["labels"], tokenizer)
        else:
            _print_preference_item(out, item, enc, tokenizer)


def _print_tokens(out: Console, ids: list[int], labels: list[int], tokenizer, title: str = "") -> None:
    """Every token as text(label, id), trained ones in green, then the decoded trained text."""
    from rich.text import Text

    from training.tokenize import format_token_table

    line = Text(f"{title}: ", style="bold") if title else Text()
    for tid, text, label, is_trained in format_token_table({"input_ids": ids, "labels": labels}, tokenizer):
        line.append(repr(text)[1:-1], style="bold green" if is_trained else "dim")
        line.append(f"({label}, {tid}) ", style="green" if is_trained else "dim")
    out.print(line, soft_wrap=True)
    labelled = [t for t, lab in zip(ids, labels) if lab != -100]
    if labelled:
        trained_text = tokenizer.decode(labelled, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        out.print(Text("trained text: ", style="bold") + Text(repr(trained_text)), soft_wrap=True)


def _print_preference_item(out: Console, item, enc: dict, tokenizer) -> None:
    """A pair: its shared prompt, then chosen and rejected with their masks; a KTO turn: prompt and turn."""
    prompt = enc["prompt_ids"]
    sides = ("chosen", "rejected") if "chosen_ids" in enc else ("completion",)

    def counts(side: str) -> str:
        return f"{len(enc[f'{side}_ids'])} tokens, {sum(enc[f'{side}_mask'])} trained"

    if len(sides) == 2:
        score = "" if item.margin is None else f", scores {item.chosen_score:g} > {item.rejected_score:g}"
        out.rule(f"pair {item.id}")
        summary = f"prompt {len(prompt)} tokens; chosen {counts('chosen')}; rejected {counts('rejected')}"
        out.print(f"{summary}; source {item.source or '-'}{score}", markup=False, highlight=False)
    else:
        label = "desirable" if item.desirable else "undesirable"
        score = "" if item.score is None else f", score {item.score:g}"
        out.rule(f"turn {item.id} ({label})")
        summary = f"prompt {len(prompt)} tokens; turn {counts('completion')}; source {item.source or '-'}{score}"
        out.print(summary, markup=False, highlight=False)
    _print_tokens(out, prompt, [-100] * len(prompt), tokenizer, "prompt")
    for side in sides:
        ids, mask = enc[f"{side}_ids"], enc[f"{side}_mask"]
        labels = [tid if m else -100 for tid, m in zip(ids, mask)]
        _print_tokens(out, ids, labels, tokenizer, "turn" if side == "completion" else side)


@bench_app.command("train")
def bench_train_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = overrides_argument("optim.per_device_train_batch_size=4"),
    data: str | None = typer.Option(None, "--data", help="DatasetDict saved by data_gen (default: templated records)."),
    steps: int = typer.Option(6, "--steps", min=1, help="Timed optimizer steps per mode."),
    warmup: int = typer.Option(1, "--warmup", min=0, help="Untimed warm-up steps per mode (and round)."),
    rounds: int = typer.Option(
        1,
        "--rounds",
        min=1,
        help="Modes take turns this many times (A B A B ...); each "
        "mode's figures sum its rounds, so drift in the machine's speed cancels out.",
    ),
    modes: str = typer.Option(
        "none,padding_free",
        "--modes",
        help="Comma-separated: none (padded), grouped (padded, similar lengths), padding_free, bfd.",
    ),
    dtypes: str = typer.Option(
        "",
        "--dtypes",
        help="Comma-separated base-weight dtypes to time side by side, e.g. "
        "auto,float32,bfloat16 (default: model.dtype of the config).",
    ),
    batches: str = typer.Option(
        "",
        "--batches",
        help="Comma-separated batchings to time side by side: a record "
        "count per step (16) or a token budget per step (tokens=2048), e.g. 4,16,tokens=2048 "
        "(default: the config's).",
    ),
    random_init: str | None = typer.Option(
        None,
        "--random-init",
        help="A model config.json (or its directory): "
        "time that architecture with random weights and the embedded model's "
        "tokenizer (e.g. configs/models/qwen2.5-7b-instruct.json).",
    ),
    profile: Path | None = typer.Option(
        None,
        "--profile",
        help="Run each variant's timed steps (first round) under torch.profiler and write DIR/VARIANT.ops.txt "
        "(operators by device and CPU time, CPU time by Python caller) and DIR/VARIANT.trace.json.gz "
        "(open in Perfetto): where a step's time goes. Profiling slows the steps it times.",
    ),
) -> None:
    """Training throughput (trained and total tokens/s) and peak memory, padded vs padding-free."""
    from training.bench import bench_train

    cfg = _train_config(config, overrides, data)
    _quiet_training_logs()
    try:
        result = bench_train(
            cfg,
            steps=steps,
            warmup_steps=warmup,
            modes=[m.strip() for m in modes.split(",") if m.strip()],
            rounds=rounds,
            dtypes=[d.strip() for d in dtypes.split(",") if d.strip()],
            batches=[b.strip() for b in batches.split(",") if b.strip()],
            random_init=str(find_config(Path(random_init))) if random_init else None,
            profile_dir=str(profile) if profile else None,
            log=log,
        )
    except ValueError as err:
        fail(err)
    rounds_note = f", {rounds} rounds" if rounds > 1 else ""
    table = Table(title=f"training throughput ({result['device']}{rounds_note})")
    for column in (
        "mode",
        "records/step",
        "trained tok/s",
        "tokens/s",
        "positions/s",
        "s/step",
        "peak MB",
        "MFU",
        "GPU %",
    ):
        table.add_column(column)
    for mode, r in result["modes"].items():
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "–"
        util = f"{r['gpu_utilisation_pct']:.0f}" if r.get("gpu_utilisation_pct") is not None else "–"
        table.add_row(
            mode,
            f"{r['records_per_step']:.1f}",
            f"{r['trained_tokens_per_s']:.0f}",
            f"{r['tokens_per_s']:.0f}",
            f"{r['padded_positions_per_s']:.0f}",
            f"{r['step_s']:.2f}",
            f"{r['peak_mem_mb']:.0f}",
            mfu,
            util,
        )
    console.print(table)
    print_json(result)


@app.command("merge")
def merge_command(
    adapter: Path = typer.Argument(..., help="A PEFT adapter directory (e.g. a memlm train output dir)."),
    output: Path = typer.Option(
        ..., "--out", "--output", "-o", help="Where to write the merged model (--output, -o: the old names)."
    ),
    base: str | None = typer.Option(None, "--base", help="Base model (default: the one the adapter records)."),
    dtype: str = typer.Option("float32", "--dtype", help="float32 | bfloat16 | float16"),
) -> None:
    """Merge a LoRA/QLoRA adapter into its base model and save a plain HF model."""
    from training.merge import merge_adapter

    try:
        out = merge_adapter(adapter, output, base=base, dtype=dtype)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        fail(err)
    console.print(f"merged {adapter} into {out}")
