"""A model with what runs its turns, opened in one place: serve, eval and the benchmarks call
:func:`open_runtime` and get the same decoder for the same settings.

    engine hf    the model in this process (transformers); turns batched by
                 memory_runtime.batching.BatchDecoder; writes can be gated (memory_runtime.write_gate)
    engine vllm  vLLM's engine (memory_runtime.vllm_backend.VLLMDecoder): continuous batching, prefix
                 caching, the adapter applied per request; on a GPU, or on the CPU with vLLM's CPU build
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memory_runtime.write_gate import WriteGateConfig

Engine = Literal["hf", "vllm"]
ENGINE_HELP = (
    "hf: transformers in this process; vllm: vLLM's engine (pip install 'memlm[vllm]' on a GPU, "
    "bash scripts/vllm_cpu_env.sh on a CPU; no write gate)"
)


def check_engine(engine: str, write_gate: WriteGateConfig) -> None:
    """The settings an engine cannot honour, refused before anything loads."""
    if engine == "vllm" and (write_gate.active or write_gate.score):
        raise ValueError(
            "write_gate: the vllm engine does not score writes (the gate needs the model in this process, "
            "engine: hf); with vllm set write_gate.signal=none and write_gate.score=false"
        )


@dataclass
class Runtime:
    """An opened model: its tokenizer, the decoder its turns go through, and (engine hf) the model."""

    name: str  # what was asked for: a run directory (adapter) or a base model
    engine: Engine
    tokenizer: Any
    decoder: Any  # BatchDecoder (hf) or VLLMDecoder (vllm): add/step/run/run_sessions
    model: Any = None  # the transformers model (engine hf; None on vllm)
    device: str = "cpu"
    dtype: str = "float32"


def open_runtime(
    model: str,
    *,
    engine: Engine = "hf",
    device: str = "auto",
    dtype: str = "auto",
    max_batch_size: int = 8,
    copy_fields: bool = True,
    write_gate: WriteGateConfig | None = None,
) -> Runtime:
    """Load `model` (a `memlm train` run directory or a base model) on `engine`: an adapter is merged into
    its base (hf) or applied per request (vllm); up to `max_batch_size` turns decode at once."""
    gate = write_gate or WriteGateConfig()
    check_engine(engine, gate)
    if engine == "vllm":
        from memory_runtime.hardware import resolve_device, resolve_dtype
        from memory_runtime.vllm_backend import load_vllm_decoder

        decoder = load_vllm_decoder(model, max_batch_size=max_batch_size, copy_fields=copy_fields, dtype=dtype)
        device = resolve_device(device)
        return Runtime(model, engine, decoder.tokenizer, decoder, None, device, resolve_dtype(dtype, device).dtype)
    from memory_runtime.batching import BatchDecoder
    from memory_runtime.hardware import resolve_device
    from memory_runtime.models import load_model
    from memory_runtime.write_gate import write_gate as make_write_gate

    device = resolve_device(device)
    loaded, tokenizer = load_model(model, dtype=dtype, device=device, merge=True)
    decoder = BatchDecoder(
        loaded,
        tokenizer,
        max_batch_size=max_batch_size,
        copy_fields=copy_fields,
        write_gate=make_write_gate(gate, loaded, tokenizer),
    )
    return Runtime(model, engine, tokenizer, decoder, loaded, device, str(loaded.dtype).removeprefix("torch."))
