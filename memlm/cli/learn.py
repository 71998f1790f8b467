"""`memlm self-instruct` and `memlm feedback ...`: the learning loop (learning_loop)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from memlm.cli.common import MODEL, app, console, fail, feedback_app, load, log, overrides_argument, print_json


@app.command("self-instruct")
def self_instruct_command(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output directory: round-N/ (tasks, augment and execution logs, kept.jsonl, adapter/), "
        "templates/, rounds.jsonl, self_instruct_config.yaml (the resolved config).",
    ),
    config: Path = typer.Option(
        Path("configs/self_instruct/default.yaml"),
        "--config",
        help="Self-instruct config YAML: rounds, tasks per round, seed and test tasks, "
        "the training config of each round, generation (see its comments).",
    ),
    model: str | None = MODEL,
    overrides: list[str] | None = overrides_argument("rounds=2", "tasks_per_round=50"),
) -> None:
    """Self-instructed trajectories: the model phrases tasks with known gold, runs them with its memory,
    keeps the exactly right runs (the reward's `exact`) and trains on templates + kept runs; repeat with the
    new adapter.

    Logs per round how many tasks were drafted, generated and kept, and the held-out paraphrase test
    (configs/self_instruct/paraphrase_test.jsonl) before and after."""
    from learning_loop.self_instruct import SelfInstructConfig, run_rounds

    cfg = load(SelfInstructConfig, config, overrides, {"generation.model": model})
    try:
        rows = run_rounds(cfg, out, log=log)
    except (ValueError, FileNotFoundError) as err:
        fail(err)
    for row in rows:
        print_json(row)


FEEDBACK_DIR = typer.Option(..., "--dir", help="A feedback directory (chat's --feedback-dir, serve's feedback_dir).")
FEEDBACK_NAMESPACE = typer.Option(None, "--namespace", "-n", help="Only this user's (namespace's) trajectories.")


@feedback_app.command("list")
def feedback_list(
    directory: Path = FEEDBACK_DIR,
    namespace: str | None = FEEDBACK_NAMESPACE,
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """The trajectories waiting for review: id, namespace, rating (good, bad, correction), what the user said,
    what would be trained (bad: the turn as the model ran it, labelled undesirable), a correction's rejected run."""
    from learning_loop.review import summary

    try:
        rows = summary(directory, namespace)
    except (OSError, ValueError) as err:
        fail(err)
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return
    table = Table(title=f"{len(rows)} pending in {directory}")
    columns = ("id", "namespace", "rating", "user", "trained", "rejected")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if row[k] is None else str(row[k]) for k in columns))
    Console().print(table)


def _decide(directory: Path, ids: list[str] | None, every: bool, namespace: str | None, accept: bool) -> None:
    from learning_loop.review import decide

    if bool(ids) == every:
        fail(ValueError("name the trajectories to decide on (IDS) or pass --all, not both"))
    try:
        moved = decide(directory, None if every else ids, accept=accept, namespace=namespace)
    except (OSError, ValueError) as err:
        fail(err)
    if not accept:
        console.print(
            f"rejected {len(moved)} trajectories: {directory / 'rejected.jsonl'}", markup=False, soft_wrap=True
        )
        return
    bad = sum(t.rating == "bad" for t in moved)
    console.print(
        f"accepted {len(moved)} trajectories: {len(moved) - bad} good or corrections to {directory / 'accepted.jsonl'} "
        f"(SFT), all {len(moved)} with their ratings to {directory / 'accepted_labelled.jsonl'} "
        "(`memlm feedback export`; bad ones only there)",
        markup=False,
        soft_wrap=True,
    )


@feedback_app.command("accept")
def feedback_accept(
    ids: list[str] | None = typer.Argument(None, help="Trajectory ids (from `memlm feedback list`)."),
    directory: Path = FEEDBACK_DIR,
    every: bool = typer.Option(False, "--all", help="Every pending trajectory (of --namespace, if given)."),
    namespace: str | None = FEEDBACK_NAMESPACE,
) -> None:
    """Accept trajectories: good ones and corrections to DIR/accepted.jsonl (`memlm train ...
    'data.extra_jsonl=[DIR/accepted.jsonl]'`), every one with its rating, bad ones too, to
    DIR/accepted_labelled.jsonl (`memlm feedback export`)."""
    _decide(directory, ids, every, namespace, accept=True)


@feedback_app.command("reject")
def feedback_reject(
    ids: list[str] | None = typer.Argument(None, help="Trajectory ids (from `memlm feedback list`)."),
    directory: Path = FEEDBACK_DIR,
    every: bool = typer.Option(False, "--all", help="Every pending trajectory (of --namespace, if given)."),
    namespace: str | None = FEEDBACK_NAMESPACE,
) -> None:
    """Move trajectories to DIR/rejected.jsonl: kept for the record, never trained on."""
    _decide(directory, ids, every, namespace, accept=False)


@feedback_app.command("export")
def feedback_export(
    directory: Path = FEEDBACK_DIR,
    out: Path = typer.Option(..., "--out", help="The JSONL file to write."),
    fmt: str = typer.Option(
        ...,
        "--format",
        help="kto: a LabelledTurn per accepted trajectory (good, correction: desirable; bad: not); "
        "dpo: a PreferencePair per accepted correction that kept the model's own turn (rejected).",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out when it exists."),
) -> None:
    """Accepted feedback (DIR/accepted_labelled.jsonl, never pending) as the DPO / KTO trainers' data:
    JSONL of memory_runtime.records.LabelledTurn (kto) or PreferencePair (dpo)."""
    from learning_loop.review import export

    try:
        written = export(directory, out, fmt, overwrite=overwrite)
    except (OSError, ValueError) as err:
        fail(err)
    kind = "LabelledTurn" if fmt == "kto" else "PreferencePair"
    counts = ", ".join(f"{n} {rating}" for rating, n in sorted(written.items()))
    lines = "line" if written.total() == 1 else "lines"
    console.print(f"wrote {written.total()} {kind} {lines} to {out}: {counts}", markup=False, soft_wrap=True)
