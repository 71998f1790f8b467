"""What every command module shares: the app and its groups, errors as one line, configs loaded the
one way (a file, then ``key=value`` overrides, then the flags that were given)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from memory_runtime.progress import Advance, Tasks
from memory_runtime.shipped import find_config as shipped_config
from memory_runtime.yaml_config import Strict

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # -h as well, on every command
app = typer.Typer(
    help="memlm: teach language models to use an explicit read-write triplet memory.",
    no_args_is_help=True,
    add_completion=False,
    context_settings=HELP_OPTIONS,
)
bench_app = typer.Typer(help="Benchmarks that print their figures as one JSON line.", no_args_is_help=True)
memory_app = typer.Typer(
    help="Inspect, edit and migrate a memory database (an SQLite file or a postgresql:// URL).", no_args_is_help=True
)
feedback_app = typer.Typer(
    help="Review the feedback chat and serve kept (DIR/pending/): nothing trains until it is accepted.",
    no_args_is_help=True,
)
config_app = typer.Typer(
    help="The configs memlm ships: list them, copy one out to edit (--config takes any by name).",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")
app.add_typer(memory_app, name="memory")
app.add_typer(feedback_app, name="feedback")
app.add_typer(config_app, name="config")

console = Console(stderr=True)
C = TypeVar("C", bound=Strict)


def overrides_argument(*examples: str) -> Any:
    """The ``key=value`` arguments of a command, with examples of its own config (tests/memlm/test_cli_help.py
    loads each example with the command's config)."""
    shown = " ".join(escape(example) for example in examples)  # [a,b] is not rich markup
    return typer.Argument(None, help=f"Config overrides as dotted key=value, e.g. {shown}.", show_default=False)


MODEL = typer.Option(
    None,
    "--model",
    "-m",
    help="Sets generation.model: a `memlm train` run directory (PEFT adapter), a Hugging Face model directory "
    "or hub id, or embedded:SmolLM2-135M-Instruct (the default base model, shipped in a package).",
    show_default=False,
)


def find_config(path: Path | None, folder: str | None = None) -> Path | None:
    """A config path as given, or, when it is relative and not found from the working directory, the
    shipped config it names (memory_runtime.shipped): `--config configs/train/cpu-smollm2.yaml`,
    `train/cpu-smollm2` and `cpu-smollm2` work from any directory, in a checkout or a wheel; a bare name
    several shipped configs have is the one in `folder` (configs/FOLDER/) where the command gives one."""
    if path is None or path.exists() or path.is_absolute():
        return path
    try:
        return shipped_config(str(path), folder) or path
    except ValueError as err:  # a bare name several shipped configs have
        fail(err)


def load(cls: type[C], path: Path | None, overrides: list[str] | None, flags: dict[str, Any] | None = None) -> C:
    """`cls.load`: the config file (None: the defaults), its ``key=value`` overrides, then the flags that
    were given (dotted key -> value; None: not given; a Path is relative to the working directory)."""
    items = [*(overrides or []), *flag_overrides(flags or {})]
    try:
        return cls.load(find_config(path, getattr(cls, "folder", None)), items)
    except ValueError as err:
        fail(err)


def flag_overrides(flags: dict[str, Any]) -> list[str]:
    """``key=value`` overrides for the flags that were given, as YAML values."""
    return [
        f"{key}={json.dumps(str(value.resolve()) if isinstance(value, Path) else value)}"
        for key, value in flags.items()
        if value is not None
    ]


def csv(value: str | None) -> list[str] | None:
    return None if value is None else [item.strip() for item in value.split(",") if item.strip()]


def fail(err: Exception) -> NoReturn:
    """Print an error (its text may contain [brackets]: no rich markup) and exit with status 2."""
    console.print(f"[red]error:[/red] {escape(str(err))}", soft_wrap=True)
    raise typer.Exit(2)


def log(line: str) -> None:
    """A progress line on stderr, never wrapped or marked up."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def bar_tasks(bar) -> Tasks:
    """Tasks (memory_runtime/progress.py) shown on a rich Progress: a bar a part."""

    def tasks(description: str, total: int) -> Advance:
        task = bar.add_task(description, total=total)
        return lambda n: bar.advance(task, n)

    return tasks


class LineProgress:
    """Tasks (memory_runtime/progress.py) as plain lines for a log file: a part's start, every tenth of it
    with the time left, its end."""

    def __init__(self, log) -> None:
        self.log = log

    def __call__(self, description: str, total: int):
        import time

        start, done, step = time.perf_counter(), 0, max(1, total // 10)
        self.log(f"{description}: {total} to go")

        def advance(n: int) -> None:
            nonlocal done
            before, done = done, done + n
            if done // step > before // step or done == total:
                spent = time.perf_counter() - start
                left = spent / done * (total - done)
                self.log(f"{description}: {done}/{total}, {spent:.0f} s, ~{left:.0f} s left")

        return advance


def print_json(value: Any) -> None:
    print(json.dumps(value))


def load_generation(overrides: list[str] | None, flags: dict[str, Any], defaults: dict[str, Any] | None = None):
    """The generation section on its own (a benchmark's config): `defaults`, then its
    ``generation.KEY=VALUE`` overrides, then the flags that were given."""
    from memory_runtime.generation.runtime import Generation

    items = [*(overrides or []), *flag_overrides(flags)]
    for item in items:
        if not item.startswith("generation."):
            fail(
                ValueError(
                    f"override {item!r}: a benchmark takes generation.KEY=VALUE (memory_runtime/generation/runtime.py)"
                )
            )
    return load(Generation, None, [*flag_overrides(defaults or {}), *(i.removeprefix("generation.") for i in items)])


def engine_names(text: str | None, generation: Any) -> list[str]:
    """Comma-separated engine names (None: the engine `generation` runs on, auto resolved)."""
    from memory_runtime.generation.runtime import ENGINES, choose_engine

    names = [name.strip() for name in (text or choose_engine(generation)[0]).split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown or not names:
        fail(ValueError(f"unknown engine {(unknown or [text])[0]!r}: expected one of {', '.join(ENGINES)}"))
    return names


def counts(text: str, option: str, most: int) -> list[int]:
    """Comma-separated whole numbers, each 1 to `most` (`option` names the flag in the error)."""
    try:
        numbers = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        fail(ValueError(f"{option}: expected comma-separated whole numbers, got {text!r}"))
    if not numbers or not all(1 <= c <= most for c in numbers):
        fail(ValueError(f"{option}: each number must be 1 to {most}, got {text!r}"))
    return numbers
