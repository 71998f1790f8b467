"""`memlm config list` and `memlm config copy` (memory_runtime.shipped): the shipped configs by name, and
one written out to edit, as torchtune's `tune ls` and `tune cp` do."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from memlm.cli.common import config_app, fail, log
from memory_runtime.shipped import config_names, shipped, shipped_name
from memory_runtime.shipped import find_config as shipped_config


@config_app.command("list")
def config_list() -> None:
    """Every shipped config by its name (stdout, one a line): `--config NAME` and `memlm config copy NAME`
    take it, as does its bare name where only one config has it (`--config cpu-smollm2`)."""
    log(f"shipped configs ({shipped('configs')}):")
    for name in config_names():
        print(name)


@config_app.command("copy")
def config_copy(
    name: str = typer.Argument(..., help="A shipped config: train/cpu-smollm2, data/tiny, ... (memlm config list)."),
    dest: Path | None = typer.Argument(
        None, help="The file to write, or a directory to write it into (default: the working directory)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace DEST if it exists."),
) -> None:
    """Write a shipped config out to edit, then run it with --config DEST. The files it names relative to
    itself (base:, real passages, seed tasks, ...) are written by their shipped names
    (`shipped:configs/data/default.yaml`), never as paths into this install: the copy runs from wherever
    it is, with whichever install of memlm runs it."""
    try:
        source = shipped_config(name)
    except ValueError as err:
        fail(err)
    if source is None:
        fail(ValueError(f"{name}: no shipped config has that name (memlm config list names them)"))
    target = dest or Path(source.name)
    if target.is_dir():
        target = target / source.name
    if target.exists() and not overwrite:
        fail(FileExistsError(f"{target} exists: --overwrite replaces it"))
    text, renamed = shipped_names(source.read_text(encoding="utf-8"), source.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    log(f"wrote {target} (from {source})")
    for value, name in renamed:
        log(f"  {value} -> {name}")


def shipped_names(text: str, folder: Path) -> tuple[str, list[tuple[str, str]]]:
    """`text`, a shipped YAML config in `folder`, with each value that names a file relative to `folder`
    written as that file's shipped name (line by line, so comments and layout stay), and those values
    with their new names. A JSON config names no files; it is returned as it is."""
    import yaml

    files = {
        value: shipped_name(folder / value) or str((folder / value).resolve())
        for value in _strings(yaml.safe_load(text))
        if value.strip() and not Path(value).is_absolute() and (folder / value).is_file()
    }
    # a plain or quoted scalar after "key: " or "- " (a list item), and a comment after it
    scalar = re.compile(r"""^(\s*(?:- +)?(?:[^\s:#'"][^:#]*: +)?)(['"]?)(.+?)\2(\s*(?:#.*)?)$""")
    lines, renamed = [], []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        match = scalar.match(body)
        if match and match.group(3) in files:
            value = match.group(3)
            renamed.append((value, files[value]))
            quote = match.group(2)
            line = f"{match.group(1)}{quote}{files[value]}{quote}{match.group(4)}{line[len(body) :]}"
        lines.append(line)
    return "".join(lines), renamed


def _strings(value: Any) -> list[str]:
    """Every string value of a parsed YAML document (not its keys)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
