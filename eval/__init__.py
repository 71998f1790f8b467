"""eval: every measurement of one model, and its baselines, in one run (`memlm eval`).

    eval_config.py EvalConfig: what one run measures (configs/eval/default.yaml)
    parts.py      Part: one measurement, and how run and report find each by its name (MODULES below)
    records.py, typos.py, episodes.py, real_probe.py, injection.py, locomo_qa.py: the parts, one module each
    locomo.py     LoCoMo's conversations read, and answers scored as LoCoMo scores them
    systems.py    the model under test and its baselines, run on cases a batch at a time
    report.py     metrics.json, report.md and the plots; the targets of the verdict
    run.py        run_eval: every part for every system, then the report
    bench_decode.py, bench_memory.py: `memlm bench decode` and `memlm bench memory`

The list of parts is here, at the top of the package: the config names them (what `parts` accepts)
and a part takes the config, so neither module can hold the list without importing the other; the
CLI reads it for its help without loading a part (they load torch).
"""

from __future__ import annotations

MODULES: dict[str, str] = {
    "records": "eval.records",
    "typos": "eval.typos",
    "episodes": "eval.episodes",
    "real": "eval.real_probe",
    "injection": "eval.injection",
    "locomo": "eval.locomo_qa",
}
"""Every part, by name, in the order they run and are reported; the module that gives its PART."""

SYSTEMS: tuple[str, ...] = ("memlm", "few_shot", "zero_shot")
"""The model under test and its baselines on the base model (eval/systems.py)."""

NAMES: tuple[str, ...] = tuple(MODULES)
DEFAULT_PARTS: tuple[str, ...] = ("records", "episodes")
"""What an eval runs unless `parts` says: "is my model any good?" in minutes on 2 cores."""
FULL_PARTS: tuple[str, ...] = tuple(name for name in NAMES if name != "locomo")
"""What `memlm eval --full` runs: every part but LoCoMo, whose long conversations cost tens of minutes on a CPU."""
