"""QLoRA: a 4-bit NF4 (double-quantised) base with LoRA adapters runs training steps on the CPU."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("bitsandbytes")


def test_qlora_step_on_cpu(tiny_model_dir, tiny_datasets, tmp_path):
    from tests.training.conftest import tiny_config
    from training.objectives.sft import train_sft
    from training.run import build_model

    cfg = tiny_config(tiny_model_dir, tmp_path, "method=qlora", "optim.max_steps=2", "qlora.compute_dtype=float32")
    model = build_model(cfg)
    import bitsandbytes as bnb

    q_proj = model.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, bnb.nn.Linear4bit) and q_proj.weight.quant_type == "nf4"
    assert q_proj.weight.quant_state.nested  # double quantisation
    del model
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert result.metrics["global_step"] == 2 and result.metrics["train_loss"] > 0
    assert json.loads((tmp_path / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
