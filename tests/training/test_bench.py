"""bench train's MFU: model FLOPs per token count LoRA's frozen base at 4 per weight, trained
weights at 6, plus attention; GPU peaks by name."""

from __future__ import annotations

import copy

import pytest

from training.bench import gpu_peak_tflops, model_flops_per_token


def test_frozen_weights_cost_four_flops_and_trained_ones_six(tiny_model):
    import torch

    model = copy.deepcopy(tiny_model)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    config = model.config
    attention = 12 * config.num_hidden_layers * config.hidden_size * 10.0  # 4 heads x 16 = hidden 64
    assert model_flops_per_token(model, 10.0) == pytest.approx(6 * linear + attention)  # full fine-tuning
    for p in model.parameters():
        p.requires_grad_(False)
    assert model_flops_per_token(model, 10.0) == pytest.approx(4 * linear + attention)  # LoRA's frozen base


@pytest.mark.parametrize(
    "name, peak",
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L4", 121.0),
        ("Some Future GPU", None),
    ],
)
def test_gpu_peaks_by_name(name, peak):
    assert gpu_peak_tflops(name) == peak


def test_the_shipped_7b_architecture_is_qwen2_5_7b_sized():
    """configs/models/qwen2.5-7b-instruct.json (for --random-init) builds a 7.6B-parameter model."""
    from pathlib import Path

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(Path(__file__).parents[2] / "configs/models/qwen2.5-7b-instruct.json"))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) / 1e9 == pytest.approx(7.62, abs=0.02)


def test_batches_parse_into_record_counts_and_token_budgets():
    from training.bench import parse_batches

    assert parse_batches(["4", "records=16", "tokens=2048"]) == [
        ("4rec", 4, None),
        ("16rec", 16, None),
        ("2048tok", None, 2048),
    ]
    for bad in ("0", "tokens=", "words=5", "many"):
        with pytest.raises(ValueError, match="neither a record count"):
            parse_batches([bad])
