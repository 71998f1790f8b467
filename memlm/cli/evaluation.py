"""`memlm eval` (every measurement of a model against its baselines) and `memlm bench decode` (eval)."""

from __future__ import annotations

from pathlib import Path

import typer

from eval import DEFAULT_PARTS
from eval import NAMES as EVAL_PARTS
from memlm.cli.common import (
    MODEL,
    OVERRIDES,
    app,
    bench_app,
    console,
    counts,
    csv,
    engine_names,
    fail,
    load,
    load_generation,
    log,
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
    overrides: list[str] | None = OVERRIDES,
    model: str | None = MODEL,
    data: str | None = typer.Option(
        None, "--data", help="Sets data: a `memlm generate` directory, whose test records and episodes are evaluated."
    ),
    systems: str | None = typer.Option(
        None, "--systems", help="Sets systems, comma-separated (default: memlm,few_shot,zero_shot)."
    ),
    parts: str | None = typer.Option(
        None,
        "--parts",
        help=f"Sets parts, comma-separated subset of {','.join(EVAL_PARTS)} (default: {','.join(DEFAULT_PARTS)}).",
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Sets limit: at most N cases per category, episodes, passages per source."
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Sets workers: processes evaluating in parallel, each with its own model."
    ),
) -> None:
    """Measure calls, answers, episodes, typo robustness, real-text writes and injection, against baselines."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from eval.config import EvalConfig
    from eval.report import headline, markdown_table, verdict_lines
    from eval.run import run_eval

    flags = {
        "generation.model": model,
        "data": data,
        "systems": csv(systems),
        "parts": csv(parts),
        "limit": limit,
        "workers": workers,
    }
    cfg = load(EvalConfig, config, overrides, flags)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
    ) as bar:

        def progress(description: str, total: int):
            task = bar.add_task(description, total=total)
            return lambda: bar.advance(task)

        try:
            summary = run_eval(cfg, out, progress=progress)
        except (FileNotFoundError, ValueError) as err:
            fail(err)
    print(markdown_table(headline(summary)))
    print("\n".join(verdict_lines(summary, cfg.model_dump())))
    console.print(f"report: {out / 'report.md'}  metrics: {out / 'metrics.json'}")


@bench_app.command("decode")
def bench_decode_command(
    data: Path = typer.Option(..., "--data", help="A `memlm generate` output directory: its test records are decoded."),
    overrides: list[str] | None = OVERRIDES,
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
    from eval.config import EVAL_GENERATION

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
