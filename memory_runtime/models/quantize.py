"""Weight-only int8 for decoding on a CPU (`generation.weights: int8`).

A token at batch 1 reads every weight once, so its time is bound by bytes read: int8 weights are half
of bfloat16's. Each linear layer's weight is rounded per output channel (a scale per row, the largest
magnitude of the row mapped to 127) and multiplied with torch's int8-weight kernel
(`torch._weight_int8pack_mm`, the one gpt-fast and torchao use on CPUs), which is ~3x faster than the
bfloat16 product for one row on an AVX512-BF16 CPU. For many rows (a prompt's prefill) that kernel is
slower than the dense product, so there the weight is dequantized once per call: both paths multiply
by the same rounded weights. Activations stay bfloat16; embeddings and norms are not touched. The
output head gets its own int8 copy where it is tied to the input embeddings.

Refused (:func:`check_int8`), with what to set instead: a GPU, vLLM, and any dtype but bfloat16
(float32 activations make the kernel ~6x slower than the dense product, not faster).
"""

from __future__ import annotations

import torch
from torch import nn

PREFILL_ROWS = 16  # more rows than this: the dense product over the dequantized weight is faster


class Int8Linear(nn.Module):
    """A linear layer whose weight is int8 with a bfloat16 scale per output channel."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scales = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight_int8", torch.round(weight / scales[:, None]).clamp(-128, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(linear.weight.dtype))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.shape[0] <= PREFILL_ROWS:
            out = torch._weight_int8pack_mm(rows.contiguous(), self.weight_int8, self.scales)
        else:
            out = rows @ (self.weight_int8.to(rows.dtype) * self.scales[:, None]).T
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-channel"


def check_int8(device: str, dtype: str) -> None:
    """Refuse int8 weights where they would not be the fast path, saying what to set instead."""
    if not device.startswith("cpu"):
        raise ValueError(
            f"generation.weights=int8 is a CPU path (torch's int8-weight kernel); on {device} set "
            "generation.weights=full (on a GPU, generation.engine=vllm serves quantized checkpoints)"
        )
    if dtype != "bfloat16":
        raise ValueError(
            f"generation.weights=int8 multiplies bfloat16 activations, and this run computes in {dtype} "
            "(where int8 weights are slower, not faster); set generation.weights=full, or "
            "generation.dtype=bfloat16 on a CPU that multiplies it natively (memlm env says whether this one does)"
        )


def quantize_int8(model: nn.Module) -> int:
    """Replace every nn.Linear of `model` with an :class:`Int8Linear`, in place; how many were replaced.
    A head tied to the input embeddings gets its own int8 weight (the embeddings keep theirs)."""
    names = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Int8Linear(getattr(parent, child)))
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "tie_word_embeddings", False):
        # transformers would re-tie the head to the embeddings (tie_weights) on a later resize or save
        config.tie_word_embeddings = False
    return len(names)
