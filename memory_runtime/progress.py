"""Progress: one shape for every long job, so a CLI's bar or log line plugs into any of them.

A job reports as its items finish: `advance(n)` says that n more are done. A job of several parts (an
eval's systems × parts, a sampling run) takes `Tasks` instead: `tasks(description, total)` opens one
part of `total` items and returns that part's Advance. The CLI turns both into rich bars on a terminal
and plain lines in a log (memlm/cli/common.py); a library caller passes nothing and nothing is reported.
"""

from __future__ import annotations

from collections.abc import Callable

Advance = Callable[[int], None]
"""`advance(n)`: n more items of the job are done."""

Tasks = Callable[[str, int], Advance]
"""`tasks(description, total)`: one part of a job, of `total` items; returns its Advance."""


def quiet(n: int) -> None:
    """An Advance that reports nothing."""


def quiet_tasks(description: str, total: int) -> Advance:
    """Tasks that report nothing."""
    return quiet
