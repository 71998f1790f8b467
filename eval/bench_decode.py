"""`memlm bench decode`: turns per second at several batch sizes, on one or more engines, the same
cases in each, in one run.

The cases are teacher-forced test records (every call shape: writes, reads that pause for the
memory, answers), decoded greedily through the eval's sessions. On the hf engine batch size 1 is
one turn at a time (OneAtATime over HFBackend) and larger ones go through memory_runtime.generation.batching;
on vllm the size caps the turns in the engine at once. Every cell (engine, batch size) is compared
turn for turn with the first (`agreement`, `same_results`), so a speedup is not bought with other
answers. Engines run one after the other; an engine's sizes take turns over `rounds`, so a machine
that speeds up or slows down shifts them alike. On a CPU it also prints the bound on one stream of
tokens: the measured read bandwidth over the model's bytes (every weight is read once per token),
and each cell's tokens/s as a share of it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from eval.eval_config import EvalConfig
from eval.records import evaluate_records, load_records, summarise_records
from eval.systems import System
from memory_runtime.generation.runtime import Engine, Generation, open_runtime, resolved_weights
from memory_runtime.models.hardware import memory_bandwidth, model_bytes
from memory_runtime.yaml_config import describe


def bench_decode(
    generation: Generation,
    data: str,
    *,
    turns: int = 64,
    batch_sizes: Sequence[int] = (1, 8),
    engines: Sequence[Engine] = ("hf",),
    weights: Sequence[str] = ("full",),
    rounds: int = 1,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Decode `turns` test turns of `generation`'s model at each batch size on each engine and weights
    (`generation.weights`: auto, full, int8, int4), the first given being the baseline; turns/s, tokens/s and whether
    results agree."""
    import torch

    from memory_runtime.models.embedded import EMBEDDED_MODEL

    if not batch_sizes or min(batch_sizes) < 1 or rounds < 1 or not engines or not weights:
        raise ValueError("batch sizes and rounds must be at least 1, and one engine and one weights given")
    generation = generation.model_copy(update={"model": generation.model or EMBEDDED_MODEL})
    records = load_records(EvalConfig(data=data, limit=max(1, turns // 13), generation=generation))
    fields = {**generation.model_dump(), "max_batch_size": max(batch_sizes)}
    # each engine's section validated before anything loads (vllm refuses a write gate and int8); a pair of
    # engine and weights that cannot run is left out, and an error only when no pair can
    on: dict[str, Generation] = {}
    refused: list[str] = []
    for engine in engines:
        for weight in weights:
            weight = resolved_weights(weight, engine)  # as Generation.on_engine resolves it
            try:
                on[_label(engine, weight)] = Generation.model_validate({**fields, "engine": engine, "weights": weight})
            except ValidationError as err:
                refused.append(f"{_label(engine, weight)}: {describe(err).strip()}")
    if not on:
        raise ValueError("no engine can run these weights: " + "; ".join(refused))
    for line in refused:
        log(f"bench decode: left out {line}")
    # an engine that decodes one turn at a time (onnx) has one cell, batch 1, whatever sizes are asked
    sizes = {label: list(batch_sizes) if on[label].engine != "onnx" else [1] for label in on}
    for label in on:
        if sizes[label] != list(batch_sizes):
            log(f"bench decode: {label} decodes one turn at a time: batch 1 only")
    cells = [(label, size) for label in on for size in sizes[label]]
    log(f"bench decode: {len(records)} records, cells {[f'{e}:{b}' for e, b in cells]}, {rounds} round(s)")
    totals = {cell: {"seconds": 0.0, "turns": 0, "tokens": 0} for cell in cells}
    rows_by_cell: dict[tuple[str, int], list[dict]] = {}
    dtypes: dict[str, str] = {}
    read: dict[str, int] = {}  # bytes a token reads, as the hf engine holds the model (vllm loads the same)
    for engine in on:  # one engine at a time: an idle one would take cores from the other
        runtime = open_runtime(on[engine])
        system = System.under_test(runtime)
        dtypes[engine], device = runtime.dtype, runtime.device
        if runtime.engine == "onnx":
            read[engine] = runtime.model.bytes_per_token()
        elif runtime.model is not None:
            read[engine] = model_bytes(runtime.model)
        log(f"bench decode: {engine} engine on {device} ({runtime.dtype})")
        evaluate_records(system, records[:4], batch_size=max(batch_sizes))  # warm-up: first steps are slow
        for r in range(rounds):
            for size in sizes[engine]:
                if system.decoder is not None:
                    system.decoder.max_batch_size = size
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                start = time.perf_counter()
                rows = evaluate_records(system, records, batch_size=size)
                seconds = time.perf_counter() - start
                cell = totals[engine, size]
                cell["seconds"] += seconds
                cell["turns"] += len(rows)
                cell["tokens"] += sum(row["tokens"] for row in rows)
                rows_by_cell.setdefault((engine, size), rows)
                log(
                    f"bench decode: {engine}:{size}: {len(rows) / seconds:.2f} turns/s ({seconds:.1f} s, round {r + 1})"
                )
        runtime.close()
        del runtime, system
        gc.collect()
    first = cells[0]
    reference = _decoded(rows_by_cell[first])

    def agreement(cell: tuple[str, int]) -> float:
        return round(sum(a == b for a, b in zip(_decoded(rows_by_cell[cell]), reference)) / len(reference), 4)

    name = {cell: f"{cell[0]}:{cell[1]}" for cell in cells}
    out: dict[str, Any] = {
        "model": generation.model,
        "device": device,
        "dtype": dtypes,
        "threads": torch.get_num_threads(),
        "turns": len(rows_by_cell[first]),
        "rounds": rounds,
        "same_results": all(agreement(cell) == 1.0 for cell in cells),
        "agreement": {name[cell]: agreement(cell) for cell in cells},  # share of turns identical to the first cell
        "exact_calls": {name[cell]: summarise_records(rows_by_cell[cell], True)["calls"]["exact"] for cell in cells},
        "cells": {
            name[cell]: {
                "seconds": round(t["seconds"], 2),
                "turns_per_s": round(t["turns"] / t["seconds"], 3),
                "tokens_per_s": round(t["tokens"] / t["seconds"], 1),
            }
            for cell, t in totals.items()
        },
    }
    if not device.startswith("cuda"):  # one token of one stream reads every weight: the CPU's bound
        bandwidth = memory_bandwidth()
        out["bandwidth_gb_per_s"] = bandwidth.gb_per_s
        if read:  # the ceiling of the full weights (int8's own bound is twice as high: its share says so)
            full = next((n for label, n in read.items() if not label.endswith("-int8")), max(read.values()))
            ceiling = bandwidth.ceiling_tokens_per_s(full)
            out["model_bytes"] = read if len(read) > 1 else full
            out["ceiling_tokens_per_s"] = round(ceiling, 1)
            out["share_of_ceiling"] = {  # above 1 where several streams share each read (batch > 1) or int8
                name[cell]: round(t["tokens"] / t["seconds"] / ceiling, 3) for cell, t in totals.items()
            }
    base = totals[first]["turns"] / totals[first]["seconds"]
    for cell in cells[1:]:
        out[f"speedup_{name[cell]}_vs_{name[first]}"] = round(totals[cell]["turns"] / totals[cell]["seconds"] / base, 3)
    return out


def _label(engine: str, weights: str) -> str:
    """A cell's engine as the output names it: hf, vllm, hf-int8."""
    return engine if weights == "full" else f"{engine}-{weights}"


def _decoded(rows: list[dict]) -> list[tuple]:
    """What a turn decoded (timings aside)."""
    return [(r["id"], r["turn"], tuple(r["calls"]), r["reply"], r["status"], r["tokens"]) for r in rows]
