"""`memlm generate`: memory training data from a data config (data_gen)."""

from __future__ import annotations

from pathlib import Path

import typer

from memlm.cli.common import app, console, fail, find_config, flag_overrides, log, overrides_argument


@app.command("generate")
def generate(
    config: Path = typer.Option(Path("configs/data/default.yaml"), "--config", help="Data config YAML."),
    overrides: list[str] | None = overrides_argument("splits.train=2000", "seed=1"),
    out: Path = typer.Option(
        ..., "--out", help="Output directory (DatasetDict, JSONL, README.md card, config.yaml: the resolved config)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Sets seed."),
    schema: Path | None = typer.Option(
        None, "--schema", help="Sets schema_file: a schema YAML (entity types, relations) or a shipped one's name."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier output in --out."),
) -> None:
    """Generate memory training data: train/validation/test records and episodes from synthetic worlds,
    and from real annotated corpora where the config names some (real.sources; the default config
    trains on the KnowledgeNet passages of data/real_train/). What the worlds are about is the config's
    schema (schema_file, or --schema; `memlm schema check FILE` shows what one generates)."""
    from data_gen.fitting import load_fitted
    from data_gen.generate import generate as generate_data

    items = [*(overrides or []), *flag_overrides({"seed": seed, "schema_file": find_config(schema, "schema")})]
    try:  # a shipped recipe on another schema is fitted to it (data_gen/fitting.py)
        cfg = load_fitted(find_config(config, "data"), items)
    except ValueError as err:
        fail(err)
    if cfg.fitted_to_schema:
        log(f"{config} fitted to schema {cfg.data_schema.name}: " + "; ".join(cfg.fitted_to_schema))
    try:
        report = generate_data(cfg, out, overwrite=overwrite)
    except (ValueError, OSError) as err:  # a bad corpus (named in the message), an existing --out
        fail(err)
    console.print(report.summary(), markup=False, highlight=False, soft_wrap=True)
