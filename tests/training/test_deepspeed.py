"""The DeepSpeed ZeRO presets parse with DeepSpeed's own config class (after HF fills the "auto"s)."""

from __future__ import annotations

import pytest

from training.train_config import TrainConfig, resolve_deepspeed

deepspeed = pytest.importorskip("deepspeed")


@pytest.mark.parametrize("preset, stage", [("zero2", 2), ("zero3", 3)])
def test_presets_parse_with_deepspeed_config(preset, stage, tiny_model, tmp_path):
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    from training.objectives.sft import build_sft_config

    cfg = TrainConfig.load(
        None,
        [
            f"output.output_dir={tmp_path}",
            "gpu.bf16=true",
            "optim.per_device_train_batch_size=4",
            "optim.gradient_accumulation_steps=2",
            "gpu.use_cpu=true",
        ],
    )
    args = build_sft_config(cfg, has_eval=False)  # the SFTConfig the trainer would use (no deepspeed here)
    hf = HfTrainerDeepSpeedConfig(resolve_deepspeed(preset))
    hf.trainer_config_process(args)
    hf.trainer_config_finalize(args, tiny_model, num_training_steps=100)
    ds = DeepSpeedConfig(hf.config)
    assert ds.zero_config.stage == stage
    assert (ds.train_micro_batch_size_per_gpu, ds.gradient_accumulation_steps, ds.train_batch_size) == (4, 2, 8)
    assert ds.bfloat16_config.enabled and not ds.float16_config.enabled
    assert ds.gradient_clipping == 1.0
