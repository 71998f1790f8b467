"""Which engine serves more on this machine: measured once, then kept.

`memlm serve` with `generation.engine: auto`, on a CPU where ONNX Runtime GenAI is installed (no vLLM,
no write gate), may run hf, which decodes the server's turns together in batches of `max_batch_size`,
or onnx, which decodes them one after another with int8 weights. Which serves more depends on the CPU
and its cores: on a 2-core AMD EPYC onnx served 1.83x hf's requests/s at 8 clients, on a 2-core Xeon with
AMX 1.7x at 8 and 1.07x at 32 (docs/results.md), while a CPU of many cores spreads a batch over them where
one ONNX Runtime stream does not. So the server measures both the first time it starts on a machine with a model
(a batch of `max_batch_size` turns on hf against turns one after another on onnx, `TOKENS` tokens
each), takes the one that decoded more tokens a second, and keeps the figures in
``$MEMLM_CACHE/serve_engine.json``: later starts read them. ``memlm env`` shows them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TOKENS = 32  # new tokens of each measured turn
PROMPTS = (
    "Tell me about the city you like most and why.",
    "Describe a good morning routine in a few sentences.",
    "What makes a friend a good friend?",
    "Explain how a bicycle works to a child.",
)


@dataclass(frozen=True)
class Measured:
    """The two engines' tokens a second on this machine, at the server's batch size, and the choice."""

    engine: str  # "hf" or "onnx": the one that decoded more
    hf_tokens_per_s: float  # a batch of `batch` turns
    onnx_tokens_per_s: float  # turns one after another
    batch: int
    measured_at: str

    @property
    def reason(self) -> str:
        ratio = max(self.hf_tokens_per_s, self.onnx_tokens_per_s) / max(
            1e-9, min(self.hf_tokens_per_s, self.onnx_tokens_per_s)
        )
        return (
            f"auto: measured on this machine ({self.measured_at}): hf's batches of {self.batch} decode "
            f"{self.hf_tokens_per_s:.1f} tokens/s, onnx one turn after another {self.onnx_tokens_per_s:.1f}: "
            f"{self.engine}, {ratio:.2f}x ($MEMLM_CACHE/serve_engine.json)"
        )


def cache_file() -> Path:
    from memory_runtime.models.cache import ENGINE_CHOICE_FILE, cache_root

    return cache_root() / ENGINE_CHOICE_FILE


def machine_key(generation: Any) -> str:
    """What the measurement depends on: the CPU (model, flags, cores), the model (its name and, for a
    directory, when its files last changed), dtype, weights on onnx, threads and the batch size."""
    from memory_runtime.models.hardware import cpu_info

    cpu = cpu_info()
    model = str(generation.model or "embedded")
    path = Path(model).expanduser()
    changed = max((p.stat().st_mtime for p in path.iterdir()), default=0.0) if path.is_dir() else 0.0
    parts = [
        cpu.model,
        hashlib.sha256(" ".join(sorted(cpu.flags)).encode()).hexdigest()[:12],
        str(cpu.cores),
        model,
        f"{changed:.0f}",
        generation.dtype,
        generation.weights,
        str(generation.threads),
        str(generation.batch_size()),
    ]
    return "|".join(parts)


def measured_server_engine(generation: Any, onnx_weights: str, log: Any = None) -> Measured:
    """hf or onnx for a server of `generation` (engine auto, on the CPU) on this machine, onnx with
    `onnx_weights`: the figures kept for this machine and model, else measured now (a minute or two,
    once; the onnx export included)."""
    key = machine_key(generation)
    measured = kept()
    if key in measured:
        return Measured(**measured[key])
    if log is not None:
        log("measuring which engine serves more on this machine (once; a minute or two)")
    batch = generation.batch_size()
    hf = _hf_tokens_per_s(generation, batch)
    onnx = _onnx_tokens_per_s(generation, onnx_weights)
    choice = Measured(
        "onnx" if onnx > hf else "hf", round(hf, 2), round(onnx, 2), batch, time.strftime("%Y-%m-%d %H:%M")
    )
    _write(cache_file(), {**measured, key: asdict(choice)})
    return choice


def kept() -> dict[str, dict[str, Any]]:
    """The measurements of this machine's cache (machine_key -> Measured's fields); those of another
    memlm's shape are left out."""
    fields = set(Measured.__dataclass_fields__)
    return {k: v for k, v in _read(cache_file()).items() if isinstance(v, dict) and set(v) == fields}


def _requests(n: int) -> list[Any]:
    from memory_runtime.generation.turn import TurnRequest, turn_messages
    from memory_runtime.memory.store import TripletStore

    store = TripletStore()
    return [TurnRequest(turn_messages(PROMPTS[i % len(PROMPTS)]), store, max_new_tokens=TOKENS) for i in range(n)]


def _tokens_per_s(decoder: Any, requests: list[Any]) -> float:
    decoder.run(_requests(1))  # warm: the first forward pass allocates
    start = time.perf_counter()
    results = decoder.run(requests)
    return sum(r.generated_tokens for r in results) / (time.perf_counter() - start)


def _hf_tokens_per_s(generation: Any, batch: int) -> float:
    from memory_runtime.generation.batching import BatchDecoder
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.hardware import resolve_device
    from memory_runtime.models.loading import load_model

    device = resolve_device(generation.device)
    model, tokenizer = load_model(generation.model or EMBEDDED_MODEL, dtype=generation.dtype, device=device, merge=True)
    decoder = BatchDecoder.of(generation, model, tokenizer, batch_size=batch)
    return _tokens_per_s(decoder, _requests(batch))


def _onnx_tokens_per_s(generation: Any, weights: str) -> float:
    from memory_runtime.generation.batching import OneAtATime
    from memory_runtime.generation.onnx_backend import OnnxBackend, load_onnx_model
    from memory_runtime.models.embedded import EMBEDDED_MODEL

    exported, tokenizer = load_onnx_model(generation.model or EMBEDDED_MODEL, weights, generation.threads)
    decoder = OneAtATime.of(generation, exported, tokenizer, OnnxBackend)
    return _tokens_per_s(decoder, _requests(2))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
