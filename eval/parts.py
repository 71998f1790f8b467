"""The parts of `memlm eval`: what a part is (`Part`), and each one found by its name.

A part is one measurement. Its module gives everything about it, as a `Part` named PART at its end:
where its cases come from, how a system is run on them (a session per case, each from a fresh
memory), its summary for one system, and what the report shows of it. eval/run.py runs the
parts and eval/report.py writes them up without knowing any by name. Adding a part: a module
ending in `PART = Part(...)`, and a line in MODULES (eval/__init__.py, the one list of the parts).

The report's headline table, the cases line under it and the TARGETS of the verdict pick their
figures from the parts by hand (eval/report.py): a new part enters them by choice, not by default.

This module imports no part until one is asked for (they load torch).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval import MODULES

if TYPE_CHECKING:
    from eval.eval_config import EvalConfig
    from eval.systems import System
    from memory_runtime.memory.memory_config import MemoryConfig
    from memory_runtime.progress import Advance


@dataclass(frozen=True)
class Part:
    """One part of an eval run. The functions a part leaves out (None) it has nothing for."""

    name: str
    systems: tuple[str, ...]
    """The systems it runs for (typos: the model under test only; real text: the systems with a memory)."""
    evaluate: Callable[[System, list, EvalConfig, MemoryConfig | None, Advance | None, int], list[dict]]
    """(system, cases, config, memory config, progress: advance(n) as n more cases are done, batch size) -> its
    rows (cases.jsonl)."""
    summarise: Callable[[list[dict], bool], dict]
    """(one system's rows, whether the system uses a memory) -> its figures (metrics.json)."""
    sample_groups: Callable[[dict], list[tuple[str, int]]]
    """(its summary) -> every group a reported figure rests on, with its number of cases."""
    load: Callable[[EvalConfig], list] | None = None
    """Its cases, seeded, at most config.limit of each kind; None: it runs on those of `cases_from`."""
    cases_from: str | None = None
    """The part whose cases it runs on (loaded once for both)."""
    cases_file: Callable[[EvalConfig], Path] | None = None
    """The file its cases come from, named when it holds none."""
    sources: Callable[[EvalConfig, list], dict] | None = None
    """(config, its cases) -> the paths it read and what it used of them (metrics.json meta.sources)."""
    source_line: Callable[[dict], str] | None = None
    """(its sources) -> its bullet under the report's Sources."""
    sections: Callable[[dict, dict], list[str]] | None = None
    """(the summary of every system, the run's meta) -> its sections of report.md (Markdown lines)."""
    figures: Callable[[dict, dict], dict[str, Any]] | None = None
    """(the summary, the raw rows) -> its plots by file name (a matplotlib figure, or None for none)."""
    applies: Callable[[list, EvalConfig, MemoryConfig | None], str | None] | None = None
    """(its cases, the config, the model's memory config) -> why it does not apply to the model (text of
    another schema: it is skipped, never scored), or None; None here: it always applies."""
    units: Callable[[list, EvalConfig, bool], int] | None = None
    """(its cases, the config, whether the system uses a memory) -> the progress items of one system's run,
    where a case is long work (a conversation's turns and questions); None: one item a case."""

    @property
    def cases_key(self) -> str:
        """The name its cases go by (in the run's cases and metrics.json meta.cases)."""
        return self.cases_from or self.name


@functools.cache
def get(name: str) -> Part:
    """The part called `name` (importing its module)."""
    part = importlib.import_module(MODULES[name]).PART
    if part.name != name:
        raise ValueError(f"{MODULES[name]}.PART is called {part.name!r}, not {name!r}")
    return part


def registered() -> list[Part]:
    """Every part, in the order of MODULES."""
    return [get(name) for name in MODULES]
