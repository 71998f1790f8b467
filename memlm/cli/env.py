"""`memlm env`: what this machine is and has (memlm.env)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from memlm.cli.common import app


@app.command("env")
def env_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """What this machine is and has (CPU and flags, the dtype auto picks and why, CUDA devices, library
    versions, embedded models and caches): paste it into a bug report."""
    from memlm.env import environment, render

    env = environment()
    if as_json:
        print(json.dumps(env, indent=2))
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in render(env):
        table.add_row(label, value)
    Console().print(table)
