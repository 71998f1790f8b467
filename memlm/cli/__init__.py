"""The `memlm` command line: a module per command group, each command parsing its config (a file,
``key=value`` overrides, the few flags typed every day) and calling one function of a package.

    data.py        generate                        (data_gen)
    schema.py      schema check, schema table      (data_gen.schema)
    train.py       train, inspect, merge, bench train (training)
    evaluation.py  eval, bench decode              (eval)
    serve.py       serve, ui, bench serve          (memory_runtime.serving)
    chat.py        chat                            (memory_runtime.serving.chat)
    memory.py      memory ..., bench memory        (memory_runtime.memory.store)
    learn.py       self-instruct, feedback ...     (learning_loop)
    sample.py      sample                          (learning_loop.sampling)
    env.py         env                             (memlm.env)
    config.py      config list, config copy        (memory_runtime.shipped)
    cache.py       cache list, cache clean         (memory_runtime.models.cache)
"""

from __future__ import annotations

import typer

from memlm.cli.common import app

# The modules register their commands; `memlm --help` lists them in this order.
# isort: off
from memlm.cli import data, schema, train, evaluation, serve, chat, learn, sample, memory, env, config, cache  # noqa: F401, E402
# isort: on

# Warnings every run would print and no user can act on (library internals); also set in the
# environment so that eval's worker processes inherit them.
QUIET_WARNINGS = (
    ("`is_gradient_checkpointing` is deprecated", FutureWarning),
    ("'pin_memory' argument is set as true but no accelerator", UserWarning),
    # transformers 5.24 renamed the forward's `past_key_values` to `cache` (the old name goes in 5.40),
    # but the pin (transformers>=5.17,<5.40) still allows versions without `cache`, so memory_runtime
    # passes the old name. Remove this line when the pin's floor is 5.24 or later and the forward calls
    # of memory_runtime (hf_backend, batching, batch_cache, packed_cache) pass `cache=`.
    ("`past_key_values` is deprecated", FutureWarning),
)


def _end_on_sigterm() -> None:
    """A SIGTERM (kill, systemd, docker stop) ends a command as Ctrl-C does: `finally` blocks and exit
    handlers run. By default it ends the process at once, and vLLM's engine processes, whose shutdown
    is such a handler, were left running (uvicorn, on its way out, raises the SIGTERM it caught again)."""
    import signal
    import threading

    def end(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():  # signals are set from the main thread only
        signal.signal(signal.SIGTERM, end)


def _print_version(given: bool) -> None:
    if given:
        from memory_runtime.shipped import memlm_version

        installed = memlm_version()
        print(f"memlm {installed}" if installed else "memlm (not installed: a checkout)")
        raise typer.Exit()


@app.callback()
def _before_every_command(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print memlm's version and exit."
    ),
) -> None:
    """Known warnings quieted (QUIET_WARNINGS), a SIGTERM turned into an orderly exit, vLLM's log on
    stderr (its default is stdout, where a command prints its results: a benchmark's JSON line)."""
    import os
    import re
    import warnings

    _end_on_sigterm()
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # read when vllm is first imported
    specs = [f"ignore:{message}:{category.__name__}" for message, category in QUIET_WARNINGS]
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), *specs]))
    for message, category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)


__all__ = ["app"]
