"""`memlm bench decode`: turns per second at several batch sizes, the same cases in each, in one run.

The cases are teacher-forced test records (every call shape: writes, reads that pause for the
memory, answers), decoded greedily through the eval's sessions; batch size 1 is one turn at a time
(Controller over HFBackend), larger ones go through memory_runtime.batching. Each batch size must
give the same cases turn for turn (`same_results`), so the speedup is not bought with other
answers. Sizes take turns over `rounds`, so a machine that speeds up or slows down shifts all alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from eval.records import evaluate_records
from eval.report import summarise_records
from eval.run import EvalConfig, load_records
from eval.systems import System


def bench_decode(
    model: str,
    data: str,
    *,
    turns: int = 64,
    batch_sizes: Sequence[int] = (1, 8),
    rounds: int = 1,
    device: str = "auto",
    dtype: str = "auto",
    max_new_tokens: int = 128,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Decode `turns` test turns at each batch size; turns/s, tokens/s and whether results agree."""
    import torch

    from memory_runtime.hardware import resolve_device
    from memory_runtime.models import load_model, trained_system_prompt

    if not batch_sizes or min(batch_sizes) < 1 or rounds < 1:
        raise ValueError("batch sizes and rounds must be at least 1")
    records = load_records(EvalConfig(model=model, data=data, limit=max(1, turns // 13)))
    device = resolve_device(device)
    loaded, tokenizer = load_model(model, dtype=dtype, device=device, merge=True)
    system = System("memlm", loaded, tokenizer, max_new_tokens, system_prompt=trained_system_prompt(model))
    log(
        f"bench decode: {len(records)} records on {device} ({str(loaded.dtype).removeprefix('torch.')}), "
        f"batch sizes {list(batch_sizes)}, {rounds} round(s)"
    )
    evaluate_records(system, records[:4], batch_size=max(batch_sizes))  # warm-up: first forwards are slow
    totals = {size: {"seconds": 0.0, "turns": 0, "tokens": 0} for size in batch_sizes}
    rows_by_size: dict[int, list[dict]] = {}
    for r in range(rounds):
        for size in batch_sizes:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            rows = evaluate_records(system, records, batch_size=size)
            seconds = time.perf_counter() - start
            totals[size]["seconds"] += seconds
            totals[size]["turns"] += len(rows)
            totals[size]["tokens"] += sum(row["tokens"] for row in rows)
            rows_by_size.setdefault(size, rows)
            log(f"bench decode: batch {size}: {len(rows) / seconds:.2f} turns/s ({seconds:.1f} s, round {r + 1})")
    first = batch_sizes[0]
    same = all(_decoded(rows_by_size[size]) == _decoded(rows_by_size[first]) for size in batch_sizes)
    out: dict[str, Any] = {
        "model": model,
        "device": device,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "turns": len(rows_by_size[first]),
        "rounds": rounds,
        "same_results": same,
        "exact_calls": {
            str(size): summarise_records(rows_by_size[size], True)["calls"]["exact"] for size in batch_sizes
        },
        "batch_sizes": {
            str(size): {
                "seconds": round(t["seconds"], 2),
                "turns_per_s": round(t["turns"] / t["seconds"], 3),
                "tokens_per_s": round(t["tokens"] / t["seconds"], 1),
            }
            for size, t in totals.items()
        },
    }
    base = totals[first]["turns"] / totals[first]["seconds"]
    for size in batch_sizes[1:]:
        out[f"speedup_{size}_vs_{first}"] = round(totals[size]["turns"] / totals[size]["seconds"] / base, 3)
    return out


def _decoded(rows: list[dict]) -> list[tuple]:
    """What a turn decoded (timings aside)."""
    return [(r["id"], r["turn"], tuple(r["calls"]), r["reply"], r["status"], r["tokens"]) for r in rows]
