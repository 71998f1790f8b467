"""What this machine can do: the compute dtype and device memlm chooses, and why.

CPUs differ more than their names suggest. One with AVX512-BF16 or AMX multiplies bfloat16
natively (about 2x float32); one with AVX2 only (many AMD EPYC, older Xeons) emulates it, and a
bfloat16 matmul there runs ~45x slower than float32. So ``auto`` asks the CPU: bfloat16 where its
flags say the instructions are there *and* a short matmul probe agrees, float32 everywhere else.
A CUDA GPU gets bfloat16 when it supports it. The choice is made once per process and carries
its reason, which training logs and saves beside its config and ``memlm env`` prints.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = ("float32", "bfloat16", "float16")
"""Dtypes a user may ask for by name; ``auto`` picks one of the first two for the machine."""

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (Linux /proc/cpuinfo names) of instructions that multiply bfloat16 natively."""

SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "sve")
"""The flags `memlm env` reports: the ones that decide how fast matmuls run."""


@dataclass(frozen=True)
class DtypeChoice:
    """A dtype picked for a device, with the sentence that says why."""

    dtype: str
    reason: str

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


@dataclass(frozen=True)
class CpuInfo:
    model: str
    flags: frozenset[str]
    cores: int


@functools.cache
def cpu_info() -> CpuInfo:
    """The CPU's model name and flags (from /proc/cpuinfo on Linux; the platform's name elsewhere)."""
    model, flags = platform.processor() or platform.machine(), frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and value.strip():
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return CpuInfo(model=model, flags=flags, cores=os.cpu_count() or 1)


def bf16_matmul_speedup(repeats: int = 5) -> float:
    """How many times faster a bfloat16 matmul runs than a float32 one here (best of `repeats`), at
    the shape of a small model's MLP projection (256 tokens x 576 -> 1536).

    Takes ~0.1 s where bfloat16 is native and ~4 s where it is emulated; only run when the flags
    claim native support, to confirm it."""

    def best(dtype: torch.dtype) -> float:
        a, b = torch.randn(256, 576, dtype=dtype), torch.randn(576, 1536, dtype=dtype)
        a @ b  # warm-up: kernel selection
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        return min(times)

    return best(torch.float32) / best(torch.bfloat16)


def choose_cpu_dtype(cpu: CpuInfo, probe=bf16_matmul_speedup) -> DtypeChoice:
    """bfloat16 if the CPU has native bfloat16 instructions and the probe finds it faster, else float32."""
    native = [f for f in NATIVE_BF16_FLAGS if f in cpu.flags]
    if not native:
        return DtypeChoice(
            "float32",
            f"CPU {cpu.model} has no native bfloat16 ({' / '.join(NATIVE_BF16_FLAGS)} "
            "absent): bfloat16 would be emulated, many times slower than float32",
        )
    speedup = probe()
    if speedup < 1.0:
        return DtypeChoice(
            "float32",
            f"CPU {cpu.model} lists {', '.join(native)} but a bfloat16 matmul ran "
            f"{1 / speedup:.1f}x slower than float32 here",
        )
    return DtypeChoice(
        "bfloat16", f"CPU {cpu.model} has {', '.join(native)}: bfloat16 matmuls ran {speedup:.1f}x float32's speed"
    )


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; anything else is checked and returned."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: no CUDA GPU is visible (use cpu or auto)")
    if device != "cpu" and not device.startswith(("cuda", "mps", "xpu")):
        raise ValueError(f"device {device!r}: expected auto, cpu or cuda[:N]")
    return device


@functools.cache
def choose_dtype(device: str = "cpu") -> DtypeChoice:
    """The dtype ``auto`` means on `device` (cached: the CPU probe runs once per process)."""
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        if torch.cuda.is_bf16_supported():
            return DtypeChoice("bfloat16", f"GPU {name} supports bfloat16")
        return DtypeChoice("float32", f"GPU {name} has no bfloat16 support")
    if device != "cpu":
        return DtypeChoice("float32", f"device {device}: float32 (no bfloat16 check for this kind of device)")
    return choose_cpu_dtype(cpu_info())


def resolve_dtype(dtype: str | torch.dtype, device: str = "cpu") -> DtypeChoice:
    """A dtype name (or ``auto``) -> the concrete choice for `device`, with its reason."""
    if isinstance(dtype, torch.dtype):
        return DtypeChoice(str(dtype).removeprefix("torch."), "given")
    if dtype == "auto":
        return choose_dtype(device)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: expected auto, {', '.join(DTYPES)}")
    return DtypeChoice(dtype, "set in the config or on the command line")


@dataclass(frozen=True)
class Bandwidth:
    """How fast this process reads memory: what bounds decoding one token at a time, which must read
    every weight once per token."""

    gb_per_s: float  # 10^9 bytes a second: the median of `repeats` reads
    dtype: str
    gib: float
    threads: int

    def ceiling_tokens_per_s(self, model_bytes: int) -> float:
        """Tokens a second that one stream of tokens cannot beat: every weight read once per token."""
        return self.gb_per_s * 1e9 / model_bytes


def memory_bandwidth(gib: float = 1.0, repeats: int = 5, dtype: torch.dtype = torch.bfloat16) -> Bandwidth:
    """The read bandwidth of the CPU as torch sees it: the sum of a `gib` GiB tensor on torch's threads
    (what issue 46 measured: 16.2 GB/s on a 2-core Xeon), the median of `repeats` after one warm-up."""
    x = torch.ones(int(gib * 2**30) // (torch.finfo(dtype).bits // 8), dtype=dtype)
    x.sum()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        x.sum()
        seconds.append(time.perf_counter() - start)
    seconds.sort()
    return Bandwidth(
        round(x.numel() * x.element_size() / seconds[len(seconds) // 2] / 1e9, 1),
        str(dtype)[6:],
        gib,
        torch.get_num_threads(),
    )


def model_bytes(model: torch.nn.Module) -> int:
    """Bytes a token reads: every weight and buffer as loaded (int8 ones included), shared ones once,
    but of input embeddings that the output head does not share, only the one row a token looks up."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    looked_up = getattr(embeddings, "weight", None)
    if looked_up is not None and getattr(head, "weight", None) is not None:
        looked_up = None if head.weight.data_ptr() == looked_up.data_ptr() else looked_up
    seen, total = set(), 0
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        rows = tensor[:1] if looked_up is not None and tensor.data_ptr() == looked_up.data_ptr() else tensor
        total += rows.numel() * rows.element_size()
    return total
