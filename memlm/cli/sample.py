"""`memlm sample`: on-policy runs of a trained model, rewarded, as preference data (learning_loop.sampling)."""

from __future__ import annotations

from pathlib import Path

import typer

from memlm.cli.common import MODEL, app, bar_tasks, fail, load, log, overrides_argument, print_json


@app.command("sample")
def sample_command(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output directory: pairs.jsonl (DPO), turns.jsonl (KTO), samples.jsonl (every run and its reward), "
        "README.md (the card), summary.json, sample_config.yaml (the resolved config).",
    ),
    data: Path | None = typer.Option(
        None, "--data", help="A `memlm generate` directory: statements and questions drawn from its train split."
    ),
    config: Path = typer.Option(
        Path("configs/sample/default.yaml"),
        "--config",
        help="Sampling config YAML: runs per prompt, prompts, margin and KTO thresholds, generation (temperature).",
    ),
    model: str | None = MODEL,
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty --out."),
    overrides: list[str] | None = overrides_argument("samples_per_prompt=8", "prompts.real_limit=100"),
) -> None:
    """Run a trained model several times on each training prompt, sampled, with its memory executing the calls;
    score every run with the reward (learning_loop/reward.py) and write DPO pairs and KTO turns.

    Prompts: generated statements and questions (--data) and the real training passages of data/real_train/;
    dev passages (data/real/) never. Then: memlm train --config configs/train/dpo-smollm2.yaml --data OUT
    reference=RUN."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from learning_loop.sampling import SampleConfig, sample_preferences

    cfg = load(SampleConfig, config, overrides, {"generation.model": model, "prompts.data": data})
    with Progress(
        TextColumn("sampling"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
    ) as bar:
        try:
            summary = sample_preferences(cfg, out, overwrite=overwrite, log=log, progress=bar_tasks(bar))
        except (ValueError, FileNotFoundError, FileExistsError) as err:
            fail(err)
    print_json(summary)
