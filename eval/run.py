"""`memlm eval`: every measurement of one model, and its baselines, in one run.

    records   call- and answer-level metrics on the test split, teacher-forced (eval/records.py)
    typos     the same answerable questions with a one-character typo in a name (eval/typos.py)
    episodes  end to end: a fresh memory, statements, then questions (eval/episodes.py)
    real      write precision/recall on real sentences (eval/real_probe.py)
    injection call syntax typed into the message, history, a passage, a correction or an import
              (eval/injection.py): how often the model copies it, and that nothing is stored

Each part is one module, listed in eval/__init__.py; this module runs them without knowing any by name.

Cases are sampled with the seed and decoding is greedy: the same run twice gives the same
numbers. `limit` caps the cases per record category, the episodes, the passages per
real-text source and the injection attempts per place (default 12).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval import parts
from eval.eval_config import EVAL_CONFIG_FILENAME, EvalConfig
from eval.locomo_qa import named_reader
from eval.report import summarise, write_report
from eval.systems import System, greedy
from memory_runtime.generation.runtime import open_runtime
from memory_runtime.generation.write_gate import WriteGateConfig
from memory_runtime.jsonl import read_dicts
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.models.trained_run import trained_on
from memory_runtime.progress import Advance, Tasks, quiet_tasks


def own_base(model: str) -> str:
    """The base model of `model`: an adapter's recorded base, else the model itself (what the baselines
    run on unless the config's `base` says otherwise)."""
    from memory_runtime.models.loading import adapter_base, is_adapter_dir

    return adapter_base(model) if is_adapter_dir(model) else model


def on_engine(config: EvalConfig) -> tuple[EvalConfig, str]:
    """`config` on the engine it runs on (generation.engine auto resolved), and why. On vllm the model
    and its baselines share one engine in one process, so several workers, or baselines on another
    base than the model's, keep auto on hf."""
    hf_because = None
    if config.workers > 1:
        hf_because = "each of several workers opens its own model (workers > 1)"
    elif config.base not in (None, own_base(config.generation.model)) and set(config.systems) - {"memlm"}:
        hf_because = f"the baselines run on {config.base}, not the model's own base"
    generation, why = config.generation.on_engine(hf_because)
    return config.model_copy(update={"generation": generation}), why


def load_systems(config: EvalConfig) -> dict[str, System]:
    """The model under test (an adapter merged into its base, or applied per request on vllm) and its
    baselines on the base model (the adapter's recorded base unless `base` says otherwise), each
    opened from `config.generation`."""
    from memory_runtime.models.loading import resolve_base

    generation = config.generation
    model = generation.model
    base_name = config.base or own_base(model)
    runtime = None
    if "memlm" in config.systems or generation.engine == "vllm":
        runtime = open_runtime(generation)
    systems: dict[str, System] = {}
    if runtime is not None and "memlm" in config.systems:
        systems["memlm"] = System.under_test(runtime)
        if "locomo" in config.parts and named_reader(config.locomo.reader):  # memlm's memory read by another model
            try:
                opened = open_runtime(
                    generation.model_copy(
                        update={"model": config.locomo.reader, "write_gate": WriteGateConfig(), "engine": "hf"}
                    )
                )
            except (OSError, ValueError) as err:  # before any memory is written: nothing to lose
                raise ValueError(f"locomo.reader: {config.locomo.reader} cannot be opened ({err})") from None
            systems["memlm"].reader = (opened.model, opened.tokenizer)
    baselines = [name for name in config.systems if name != "memlm"]
    # part locomo answers every structure with one reader, the base (locomo.reader: base): the model under test
    # only writes
    reads_with_base = "memlm" in systems and "locomo" in config.parts and config.locomo.reader == "base"
    if baselines or reads_with_base:
        base, base_tok, base_decoder = None, None, None
        if runtime is not None and runtime.engine == "vllm":  # the same engine without the adapter
            if resolve_base(base_name) != resolve_base(model):
                raise ValueError(f"base: on the vllm engine the baselines run on the model's own base, not {base_name}")
            base_tok, base_decoder = runtime.tokenizer, runtime.decoder.with_adapter(None)
        elif runtime is not None and base_name == model and runtime.engine == "hf":
            base, base_tok = runtime.model, runtime.tokenizer
        else:  # the base model as configured (on hf), without the model's write gate
            opened = open_runtime(
                generation.model_copy(update={"model": base_name, "write_gate": WriteGateConfig(), "engine": "hf"})
            )
            base, base_tok = opened.model, opened.tokenizer
        for name in baselines:
            # the run's section, greedy, with the baselines' shorter turns (calls and decoding as memlm's)
            limits = greedy(generation).model_copy(update={"max_new_tokens": config.baseline_max_new_tokens})
            systems[name] = System(name, base, base_tok, limits, decoder=base_decoder)
        if reads_with_base and base is not None:
            systems["memlm"].reader = (base, base_tok)
    return systems


def load_cases(config: EvalConfig) -> dict[str, list]:
    """The cases of every part the config names, by the name they go by (typos run on records')."""
    named = [parts.get(name) for name in config.parts]
    cases: dict[str, list] = {}
    for part in parts.registered():  # in the registry's order, whatever the config's
        if part.name in config.parts and part.cases_key not in cases:
            cases[part.cases_key] = parts.get(part.cases_key).load(config)
    empty = [part for part in named if not cases[part.cases_key]]
    if empty:  # a table of dashes and exit 0 would look like a run
        where = "; ".join(
            f"{part.name}: {file(config)}" if (file := parts.get(part.cases_key).cases_file) else part.name
            for part in empty
        )
        raise ValueError(f"nothing to evaluate for {', '.join(part.name for part in empty)} ({where} holds no cases)")
    return cases


def describe_sources(config: EvalConfig, cases: dict[str, list]) -> dict:
    """The resolved paths a run read, and how many cases it used from each (recorded in metrics.json
    and the report's header, so a reader knows where its text came from)."""
    return {
        part.name: part.sources(config, cases[part.name])
        for part in parts.registered()
        if part.sources and part.name in cases
    }


def batch_size(config: EvalConfig) -> int:
    """Turns decoded at once: the configured number, else what suits the device."""
    return config.generation.batch_size()


def _evaluate(
    system: System,
    part: str,
    cases: list,
    config: EvalConfig,
    memory_config: MemoryConfig | None,
    progress: Advance | None = None,
) -> list[dict]:
    return parts.get(part).evaluate(system, cases, config, memory_config, progress, batch_size(config))


def _jobs(config: EvalConfig, systems: list[str]) -> list[tuple[str, str]]:
    """(system, part) pairs to run: each part for the systems it runs for (eval/parts.py)."""
    return [(name, part) for name in systems for part in config.parts if name in parts.get(part).systems]


# Worker processes (config.workers > 1) each load the systems and cases once, then evaluate one
# batch of cases per task; every case starts from a fresh memory, so results do not depend on the split.
_WORKER: dict[str, Any] = {}


def end_with_parent(parent: int, poll_seconds: float = 0.5) -> None:
    """Make this (worker) process end when `parent` does, however it ends (Ctrl-C, SIGTERM, kill -9):
    a worker left behind would hold a core and a copy of the model until killed by hand. Linux
    signals the death at once (prctl PR_SET_PDEATHSIG); a watcher thread covers every platform."""
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def _init_worker(config_json: str, memory_json: str | None, parent: int) -> None:
    end_with_parent(parent)
    config = EvalConfig.model_validate_json(config_json)
    _WORKER.update(
        config=config,
        cases=load_cases(config),
        systems=load_systems(config),
        memory=MemoryConfig.model_validate_json(memory_json) if memory_json else None,
    )


def _worker_task(task: tuple[str, str, list[int]]) -> tuple[int, list[dict]]:
    name, part, indices = task
    cases = [_WORKER["cases"][parts.get(part).cases_key][i] for i in indices]
    return len(indices), _evaluate(_WORKER["systems"][name], part, cases, _WORKER["config"], _WORKER["memory"])


def run_eval(
    config: EvalConfig,
    out_dir: str | Path,
    *,
    systems: dict[str, System] | None = None,
    memory_config: MemoryConfig | None = None,
    progress: Tasks | None = None,
    log: Callable[[str], None] | None = None,
    resume: bool = False,
) -> dict:
    """Run every part for every system, writing the report to `out_dir` as each part ends (a killed run keeps
    what it finished; `resume` runs only what an earlier run of the same config in `out_dir` left); returns
    the summary. Parts that do not apply to the model (`Part.applies`) are skipped with a line to `log`."""
    start = time.perf_counter()
    say = log or (lambda line: None)
    if systems is not None:  # systems given by the caller (tests): what the report names
        config = config.model_copy(update={"systems": list(systems)})
    config, engine_reason = on_engine(config)
    reads_data = any(parts.get(name).cases_key in ("records", "episodes") for name in config.parts)
    if reads_data and config.data is None and (trained := trained_on(config.generation.model or "")) is not None:
        config = config.model_copy(update={"data": trained})
        say(f"data: {trained} (what the model was trained on: its {config.split} split, which training never read)")
    out = Path(out_dir)
    if memory_config is None:
        memory_config = config.generation.memory()
    done = finished_rows(config, out) if resume else {}
    cases = load_cases(config)
    tasks = progress or quiet_tasks
    skipped = {}
    for name in config.parts:
        part = parts.get(name)
        if part.applies and (why := part.applies(cases[part.cases_key], config, memory_config)):
            skipped[name] = why
            say(f"{name}: skipped, {why}")
    for line in schema_mismatch(config, memory_config):
        say(line)
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / EVAL_CONFIG_FILENAME)
    meta = {
        **config.model_dump(),
        # what the report names, from the generation section: the model, its write gate, the batch size used
        "model": config.generation.model,
        "write_gate": config.generation.write_gate.model_dump(),
        "batch_size": batch_size(config),
        "engine_reason": engine_reason,
        "cases": {k: len(v) for k, v in cases.items()},
        "sources": describe_sources(config, cases),
        "skipped": skipped,
    }
    jobs = [(name, part) for name, part in _jobs(config, config.systems) if part not in skipped]
    raw: dict[str, dict[str, Any]] = {name: {"uses_memory": name != "zero_shot"} for name in config.systems}
    for (name, part), rows in done.items():
        if (name, part) in jobs:
            raw[name][part] = rows
            say(f"{name}: {part} kept from the earlier run ({len(rows)} rows)")
    todo = [job for job in jobs if job not in done]

    def finished(name: str, part: str, rows: list[dict]) -> None:
        raw[name][part] = rows
        left = [f"{n}: {p}" for n, p in todo if p not in raw[n]]
        partial = {**meta, "wall_s": time.perf_counter() - start, "unfinished": left}
        write_report(summarise(raw), raw, partial, out)

    if config.workers > 1 and systems is None and todo:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if config.generation.threads is None:  # the workers share the cores
            config = config.model_copy(update={"generation": config.generation.model_copy(update={"threads": 1})})
        memory_json = memory_config.model_dump_json() if memory_config else None
        with ProcessPoolExecutor(
            config.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(config.model_dump_json(), memory_json, os.getpid()),
        ) as pool:
            for name, part in todo:
                n, size = len(cases[parts.get(part).cases_key]), batch_size(config)
                advance = tasks(f"{name}: {part}", n)
                rows: list[dict] = []
                chunks = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
                for count, result in pool.map(_worker_task, [(name, part, chunk) for chunk in chunks]):
                    rows += result
                    advance(count)
                finished(name, part, rows)
    elif todo:
        systems = systems if systems is not None else load_systems(config)
        for name, system in systems.items():
            raw.setdefault(name, {})["uses_memory"] = system.uses_memory
        for name, part in todo:
            part_cases = cases[parts.get(part).cases_key]
            units = parts.get(part).units
            total = units(part_cases, config, systems[name].uses_memory) if units else len(part_cases)
            rows = _evaluate(systems[name], part, part_cases, config, memory_config, tasks(f"{name}: {part}", total))
            finished(name, part, rows)
    summary = summarise(raw)
    write_report(summary, raw, {**meta, "wall_s": time.perf_counter() - start}, out)
    return summary


def finished_rows(config: EvalConfig, out: Path) -> dict[tuple[str, str], list[dict]]:
    """The rows an earlier run of the same config left in `out` (its cases.jsonl), by (system, part); {} when
    there is none. An earlier run of another config is refused: its rows would be mixed with these."""
    saved, rows_file = out / EVAL_CONFIG_FILENAME, out / "cases.jsonl"
    if not saved.is_file() or not rows_file.is_file():
        return {}
    # what a row does not depend on: which other parts and systems run, and how many processes run them
    free = {"workers": True, "parts": True, "systems": True, "generation": {"threads": True}}
    mine, theirs = config.model_dump(exclude=free), EvalConfig.load(saved).model_dump(exclude=free)
    if theirs != mine:
        changed = sorted(k for k, v in mine.items() if theirs.get(k) != v)
        raise ValueError(
            f"--resume: {out} holds an eval of another config (differs in {', '.join(changed)}); "
            "give the same command, or another --out"
        )
    rows: dict[tuple[str, str], list[dict]] = {}
    for n, row in read_dicts(rows_file, "an eval case"):
        if not {"system", "part"} <= set(row):
            raise ValueError(f"{rows_file}:{n}: a case without its system and part: not an eval's cases.jsonl")
        rows.setdefault((row.pop("system"), row.pop("part")), []).append(row)
    return rows


def schema_mismatch(config: EvalConfig, memory_config: MemoryConfig | None) -> list[str]:
    """A warning when the data was generated from another schema than the model's memory table: its figures
    would say only that the model does not know that schema."""
    table = Path(config.data or "") / "relations.yaml"
    if not config.data or not table.is_file() or memory_config is None:
        return []
    data_relations = {spec.name for spec in MemoryConfig.load(table).relations}
    model_relations = {spec.name for spec in memory_config.relations}
    if not data_relations or data_relations == model_relations or not model_relations:
        return []
    return [
        f"warning: the data {config.data} is of another schema than the model's memory table (data: "
        f"{', '.join(sorted(data_relations))}; model: {', '.join(sorted(model_relations))})"
    ]
