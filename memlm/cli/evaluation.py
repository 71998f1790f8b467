"""`memlm eval` (every measurement of a model against its baselines) and `memlm bench decode` (eval)."""

from __future__ import annotations

from pathlib import Path

import typer

from eval import DEFAULT_PARTS, FULL_PARTS, SYSTEMS
from eval import NAMES as EVAL_PARTS
from memlm.cli.common import (
    MODEL,
    LineProgress,
    app,
    bar_tasks,
    bench_app,
    console,
    counts,
    csv,
    engine_names,
    fail,
    load,
    load_generation,
    log,
    overrides_argument,
    print_json,
)


@app.command("eval")
def eval_command(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Report directory: metrics.json, report.md, PNG plots, cases.jsonl, "
        "eval_config.yaml (the resolved config).",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="Eval config YAML (configs/eval/default.yaml lists every field at its default); "
        "key=value overrides and flags win over it.",
    ),
    overrides: list[str] | None = overrides_argument("generation.max_batch_size=8", "locomo.reader=model"),
    model: str | None = MODEL,
    data: str | None = typer.Option(
        None,
        "--data",
        help="Sets data: a `memlm generate` directory, whose test records and episodes are evaluated "
        "(default for a training run: the directory it was trained on).",
    ),
    systems: str | None = typer.Option(
        None, "--systems", help="Sets systems, comma-separated of memlm,few_shot,zero_shot (default: memlm)."
    ),
    parts: str | None = typer.Option(
        None,
        "--parts",
        help=f"Sets parts, comma-separated subset of {','.join(EVAL_PARTS)} (default: {','.join(DEFAULT_PARTS)}).",
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help=f"Every system and part but locomo ({','.join(SYSTEMS)}; {','.join(FULL_PARTS)}) where --systems "
        "and --parts do not say: tens of minutes on 2 cores, where the default answers in minutes.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Finish an eval that was stopped: keep the parts --out already holds (the same config), run the rest.",
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Sets limit: at most N cases per category, episodes, passages per source."
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Sets workers: processes evaluating in parallel, each with its own model."
    ),
) -> None:
    """Measure a model: by default the model alone on its data's records and episodes (minutes on 2 cores);
    --full adds the baselines (few_shot, zero_shot on the base), typo robustness, real-text writes and
    injection. The report is written as each part ends: a stopped eval keeps what it finished, and the same
    command with --resume runs the rest. Parts that do not apply to the model's schema are skipped, saying why.

    Example: memlm eval --model runs/cpu-smollm2 --data runs/data --out runs/eval --limit 2"""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from eval.eval_config import EvalConfig
    from eval.run import run_eval

    flags = {
        "generation.model": model,
        "data": data,
        "systems": csv(systems) or (list(SYSTEMS) if full else None),
        "parts": csv(parts) or (list(FULL_PARTS) if full else None),
        "limit": limit,
        "workers": workers,
    }
    cfg = load(EvalConfig, config, overrides, flags)
    if not console.is_terminal:  # a log file: a line a part, and a few as it goes, instead of bars
        try:
            summary = run_eval(cfg, out, progress=LineProgress(log), log=log, resume=resume)
        except (FileNotFoundError, ValueError) as err:
            fail(err)
        print_summary(summary, cfg, out)
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        try:
            summary = run_eval(
                cfg, out, progress=bar_tasks(bar), log=lambda line: bar.console.print(line, markup=False), resume=resume
            )
        except (FileNotFoundError, ValueError) as err:
            fail(err)
    print_summary(summary, cfg, out)


def print_summary(summary: dict, cfg, out: Path) -> None:
    """The headline table, the verdict and where the report is."""
    from eval.report import coverage_lines, headline, markdown_table, verdict_lines

    print(markdown_table(headline(summary)))
    print("\n".join(verdict_lines(summary, cfg.model_dump())))
    for line in coverage_lines({**cfg.model_dump(), "unfinished": []}):
        print(line)
    console.print(f"report: {out / 'report.md'}  metrics: {out / 'metrics.json'}")


@bench_app.command("decode")
def bench_decode_command(
    data: Path = typer.Option(..., "--data", help="A `memlm generate` output directory: its test records are decoded."),
    overrides: list[str] | None = overrides_argument("generation.max_new_tokens=64"),
    model: str | None = MODEL,
    turns: int = typer.Option(64, "--turns", min=13, help="About this many teacher-forced turns, every category."),
    batch_sizes: str = typer.Option("1,8", "--batch-sizes", help="Comma-separated; the first is the baseline."),
    engines: str | None = typer.Option(
        None,
        "--engines",
        help="Comma-separated engines, each at every batch size (hf, vllm: vLLM's engine; run from the "
        "environment that has it, e.g. .venv-vllm/bin/python -m memlm on a CPU; onnx: ONNX Runtime GenAI, one "
        "turn at a time; default: generation.engine, auto: vllm where installed).",
    ),
    weights: str = typer.Option(
        "auto",
        "--weights",
        help="Comma-separated generation.weights, each on every engine and batch size: auto (int8 on onnx, full "
        "elsewhere), full, int8 (hf: on the CPU in bfloat16; onnx), int4 (onnx only). Cells are named "
        "ENGINE-WEIGHTS:N where the weights are not full (hf-int8:1, onnx-int8:1); a pair an engine cannot run "
        "is left out.",
    ),
    rounds: int = typer.Option(1, "--rounds", min=1, help="Cells take turns this many times."),
) -> None:
    """Decoding throughput: turns/s at each batch size on each engine, the same cases, side by side, and
    the share of turns each decoded as the first did. Overrides: generation.KEY=VALUE (as eval decodes)."""
    from eval.bench_decode import bench_decode
    from eval.eval_config import EVAL_GENERATION

    generation = load_generation(overrides, {"generation.model": model}, EVAL_GENERATION)
    sizes = counts(batch_sizes, "--batch-sizes", 4096)
    try:
        result = bench_decode(
            generation,
            str(data),
            turns=turns,
            batch_sizes=sizes,
            engines=engine_names(engines, generation),
            weights=[w.strip() for w in weights.split(",") if w.strip()],
            rounds=rounds,
            log=log,
        )
    except (ValueError, FileNotFoundError) as err:
        fail(err)
    print_json(result)
