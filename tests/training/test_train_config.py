"""Training config: overrides with dotted paths, errors that name the field, the shipped configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.train_config import ConfigError, TrainConfig, preflight, resolve_deepspeed

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def test_defaults_are_the_embedded_model_with_lora():
    cfg = TrainConfig.load(None)
    assert cfg.model.name == "embedded:SmolLM2-135M-Instruct" and cfg.method == "lora"
    assert cfg.data.system_prompt.startswith("You have a memory.")


def test_dotted_overrides_are_applied_before_validation():
    cfg = TrainConfig.load(
        CONFIGS / "cpu-smollm2.yaml",
        [
            "optim.learning_rate=5e-5",
            "lora.target_modules=[q_proj, v_proj]",
            "data.synthetic.train=10",
            "output.eval_strategy=no",
            "model.attn_implementation=null",
        ],
    )
    assert cfg.optim.learning_rate == 5e-5
    assert cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.data.synthetic.train == 10 and cfg.data.synthetic.validation == 100
    assert cfg.output.eval_strategy == "no"  # YAML's bare `no` is false; accepted as "no"
    assert cfg.model.attn_implementation is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["lora.r=0"], "lora.r: Input should be greater than or equal to 1"),
        (["optim.lr=1e-4"], "optim.lr: unknown field"),
        (["packing.mode=wrapped"], "packing.mode: Input should be 'none', 'padding_free' or 'bfd'"),
        (["gpu.bf16=true", "gpu.fp16=true"], "gpu: bf16 and fp16 are exclusive"),
        (["lora.target_modules=[lm_head]"], "lora: target_modules: TRL computes the loss"),
        (["lora.r.x=1"], "lora.r is a value"),
        (["optim.max_steps"], "expected key=value"),
        (["packing.mode=bfd", "packing.block_length=64"], "must be >= data.max_length"),
        (["lora.layers_to_transform=[3, 3]"], "lora: layers_to_transform must list distinct layer indices"),
        (["lora.layers_to_transform=[-1]"], "lora: layers_to_transform must list distinct layer indices"),
        (["lora.loraplus_lr_ratio=0.5"], "lora.loraplus_lr_ratio: Input should be greater than or equal to 1"),
        (
            ["method=full", "lora.loraplus_lr_ratio=8"],
            "LoRA+ sets the adapters' B learning rate; method=full has no adapters",
        ),
    ],
)
def test_invalid_configs_name_the_field(overrides, message):
    with pytest.raises(ConfigError) as info:
        TrainConfig.load(CONFIGS / "cpu-smollm2.yaml", overrides)
    assert message in str(info.value)


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        TrainConfig.load(bad)
    with pytest.raises(ConfigError, match="cannot read training config"):
        TrainConfig.load(tmp_path / "missing.yaml")
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        TrainConfig.load(listy)


def test_resolved_config_round_trips_through_yaml(tmp_path):
    cfg = TrainConfig.load(CONFIGS / "gpu-qwen2.5-7b-qlora.yaml", ["optim.seed=3"])
    path = cfg.save(tmp_path / "train_config.yaml")
    assert TrainConfig.load(path) == cfg


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_configs_validate(name):
    cfg = TrainConfig.load(CONFIGS / name)
    assert isinstance(cfg, TrainConfig)


def test_gpu_configs_build_a_trl_config_on_the_cpu(tmp_path):
    """The GPU options map onto TRL's SFTConfig (bf16, checkpointing, liger, padding-free) here too."""
    from training.objectives.sft import build_sft_config
    from training.run import build_peft_config, build_quantization_config

    for name, method in (("gpu-qwen2.5-7b-lora.yaml", "lora"), ("gpu-qwen2.5-7b-qlora.yaml", "qlora")):
        cfg = TrainConfig.load(CONFIGS / name, [f"output.output_dir={tmp_path / name}", "gpu.tf32=null"])
        args = build_sft_config(cfg, has_eval=True)
        assert args.bf16 and args.gradient_checkpointing and args.padding_free and args.max_length is None
        assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
        assert args.eval_strategy == "steps" and args.eval_steps == 200
        assert build_peft_config(cfg).r == 16
        assert cfg.method == method
    q = build_quantization_config(cfg)
    assert q.load_in_4bit and q.bnb_4bit_quant_type == "nf4" and q.bnb_4bit_use_double_quant
    liger = TrainConfig.load(CONFIGS / "gpu-qwen2.5-7b-lora.yaml", ["gpu.use_liger_kernel=true", "gpu.tf32=null"])
    assert build_sft_config(liger, has_eval=False).use_liger_kernel
    compiled = TrainConfig.load(
        CONFIGS / "cpu-smollm2.yaml", ["gpu.torch_compile=true", f"output.output_dir={tmp_path}"]
    )
    assert build_sft_config(compiled, has_eval=False).torch_compile


def test_packing_modes_map_to_trl(tmp_path):
    from training.objectives.sft import build_sft_config

    base = [f"output.output_dir={tmp_path}", "data.max_length=256"]
    padded = build_sft_config(TrainConfig.load(None, base + ["packing.mode=none"]), has_eval=False)
    assert (padded.packing, padded.padding_free, padded.max_length) == (False, False, 256)
    bfd = build_sft_config(
        TrainConfig.load(None, base + ["packing.mode=bfd", "packing.block_length=1024"]), has_eval=False
    )
    assert (bfd.packing, bfd.packing_strategy, bfd.max_length) == (True, "bfd", 1024)
    grouped = build_sft_config(TrainConfig.load(None, base + ["packing.group_by_length=true"]), has_eval=False)
    assert grouped.train_sampling_strategy == "group_by_length" and not grouped.padding_free
    with pytest.raises(ConfigError, match="group_by_length only applies to padded batches"):
        TrainConfig.load(None, ["packing.mode=padding_free", "packing.group_by_length=true"])


def test_sft_config_uses_the_field_names_of_transformers_5_17(tmp_path, monkeypatch):
    """transformers 5.17 (pyproject's floor, and the GPU image's) names checkpointing and length grouping the
    old way; every `memlm train` there failed on 'activation_checkpointing' until the names were looked up."""
    import dataclasses

    import trl

    renamed = {"activation_checkpointing", "activation_checkpointing_kwargs", "train_sampling_strategy"}
    kept = {f.name: f for f in dataclasses.fields(trl.SFTConfig) if f.name not in renamed}
    kept |= dict.fromkeys({"gradient_checkpointing", "gradient_checkpointing_kwargs", "group_by_length"} - set(kept))
    seen = {}
    monkeypatch.setattr(
        trl,
        "SFTConfig",
        type("SFTConfig517", (), {"__dataclass_fields__": kept, "__init__": lambda self, **kw: seen.update(kw)}),
    )
    from training.objectives.sft import build_sft_config

    gpu = TrainConfig.load(CONFIGS / "gpu-qwen2.5-7b-lora.yaml", [f"output.output_dir={tmp_path}", "gpu.tf32=null"])
    build_sft_config(gpu, has_eval=False)
    assert seen["gradient_checkpointing"] is True and seen["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert not renamed & set(seen)
    seen.clear()
    base = [f"output.output_dir={tmp_path}", "packing.mode=none", "packing.group_by_length=true"]
    build_sft_config(TrainConfig.load(None, base), has_eval=False)
    assert seen["group_by_length"] is True and not renamed & set(seen)


def test_preflight_catches_what_this_machine_lacks(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("liger_kernel", "flash_attn") else real(name, *a)
    )
    ok = ["data.synthetic.train=4"]
    with pytest.raises(ConfigError, match="gpu.use_liger_kernel needs the 'liger-kernel' package"):
        preflight(TrainConfig.load(None, ok + ["gpu.use_liger_kernel=true"]))
    with pytest.raises(ConfigError, match="flash_attention_2 needs the 'flash-attn' package"):
        preflight(TrainConfig.load(None, ok + ["model.attn_implementation=flash_attention_2"]))
    with pytest.raises(ConfigError, match="data.path: no training data"):
        preflight(TrainConfig.load(None))
    with pytest.raises(ConfigError, match="does not exist"):
        preflight(TrainConfig.load(None, [f"data.path={tmp_path / 'nope'}"]))
    assert preflight(TrainConfig.load(None, ok + ["model.attn_implementation=sdpa"])) == []


def test_deepspeed_presets_resolve(tmp_path):
    assert resolve_deepspeed("zero2").endswith("configs/deepspeed/zero2.json")
    assert resolve_deepspeed("zero3").endswith("configs/deepspeed/zero3.json")
    with pytest.raises(ConfigError, match="neither a preset"):
        resolve_deepspeed("zero9")


# ----------------------------------------------------------------------------- objective dpo / kto

DPO = ["objective=dpo", "reference=runs/sft"]
KTO = ["objective=kto", "reference=runs/sft"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["reference=runs/sft"], "reference: the SFT run that preference training starts from; objective is sft"),
        (["preference.beta=0.2"], "preference.beta: a setting of objective dpo/kto; objective is sft"),
        (["preference.precompute_ref_log_probs=true"], "preference.precompute_ref_log_probs: a setting of objective"),
        (
            [*DPO, "preference.desirable_weight=2"],
            "preference.desirable_weight: a setting of objective kto; objective is dpo",
        ),
        ([*KTO, "preference.dpo_loss=ipo"], "preference.dpo_loss: a setting of objective dpo; objective is kto"),
        ([*DPO, "method=full"], "method: objective dpo continues the reference's LoRA adapter"),
        ([*DPO, "packing.mode=padding_free"], "packing.mode: not with objective dpo: preference batches are padded"),
        ([*DPO, "lora.init_from=runs/x"], "lora.init_from: not with objective dpo: the policy starts from `reference`"),
        ([*DPO, "data.synthetic.train=8"], "data.synthetic: not with objective dpo"),
        ([*DPO, "optim.max_tokens_per_step=2048"], "optim.max_tokens_per_step: not with objective dpo"),
        ([*KTO, "optim.per_device_train_batch_size=1"], "KTO estimates its KL term from the other turns of a batch"),
        ([*DPO, "preference.eval_share=1"], "preference.eval_share: Input should be less than 1"),
        (["objective=ppo"], "objective: Input should be 'sft', 'dpo'"),
    ],
)
def test_preference_settings_name_the_field(overrides, message):
    with pytest.raises(ConfigError) as info:
        TrainConfig.load(None, ["packing.mode=none", *overrides])
    assert message in str(info.value)


def test_a_kto_batch_of_one_is_fine_without_the_kl_term():
    TrainConfig.load(None, [*KTO, "preference.kto_loss=apo_zero_unpaired", "optim.per_device_train_batch_size=1"])


def _adapter(path, base, system_prompt=None):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 8}))
    if system_prompt is not None:
        (path / "train_config.yaml").write_text(f"data:\n  system_prompt: {system_prompt}\n")
    return path


def test_the_reference_must_be_a_lora_run_of_this_base(tmp_path):
    """Checked by preflight, before anything loads or is written."""
    data = tmp_path / "pairs.jsonl"
    data.write_text("")

    def check(*overrides):
        preflight(TrainConfig.load(None, ["objective=dpo", f"data.path={data}", *overrides]))

    with pytest.raises(
        ConfigError, match="reference: objective dpo needs the SFT run to start from: reference=RUN_DIR"
    ):
        check()
    with pytest.raises(ConfigError, match="reference: .*missing is not a directory"):
        check(f"reference={tmp_path / 'missing'}")
    full = tmp_path / "full"
    full.mkdir()
    (full / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"reference: .*full is a full model \(method=full\), not a LoRA adapter"):
        check(f"reference={full}")
    other = _adapter(tmp_path / "other", "Qwen/Qwen2.5-7B-Instruct")
    with pytest.raises(ConfigError, match="reference: the adapter was trained on 'Qwen/Qwen2.5-7B-Instruct', but"):
        check(f"reference={other}")
    prompt = _adapter(tmp_path / "prompt", "embedded:SmolLM2-135M-Instruct", system_prompt="Another prompt.")
    with pytest.raises(ConfigError, match="data.system_prompt: the reference learned 'Another prompt.'"):
        check(f"reference={prompt}")
    good = _adapter(tmp_path / "good", "embedded:SmolLM2-135M-Instruct")
    assert check(f"reference={good}") is None
    with pytest.raises(ConfigError, match=r"data.path: no training data: .*pairs.jsonl: PreferencePair lines"):
        preflight(TrainConfig.load(None, ["objective=dpo", f"reference={good}"]))


def test_preference_settings_map_onto_trls_configs(tmp_path):
    from training.objectives.dpo import build_dpo_config
    from training.objectives.kto import build_kto_config

    base = [f"output.output_dir={tmp_path}", "reference=runs/sft"]
    dpo = TrainConfig.load(CONFIGS / "dpo-smollm2.yaml", [*base, "preference.dpo_loss=ipo", "preference.beta=0.3"])
    args = build_dpo_config(dpo, has_eval=True)
    assert args.loss_type == ["ipo"] and args.beta == 0.3 and args.learning_rate == dpo.optim.learning_rate
    assert not args.remove_unused_columns and args.max_length is None and not args.precompute_ref_log_probs
    assert not args.bf16 and not args.gradient_checkpointing  # TRL's defaults are true; the config's are not
    assert args.eval_strategy == "epoch" and args.per_device_train_batch_size == 4
    kto = TrainConfig.load(
        CONFIGS / "kto-smollm2.yaml",
        [*base, "preference.desirable_weight=1.5", "preference.precompute_ref_log_probs=1"],
    )
    args = build_kto_config(kto, has_eval=False)
    assert args.loss_type == "kto" and args.desirable_weight == 1.5 and args.undesirable_weight == 1.0
    assert args.precompute_ref_log_probs and args.train_sampling_strategy == "sequential"  # KTO's KL pairs need it


@pytest.mark.parametrize("allowed", [False, True])
def test_cudnn_attention_is_chosen_on_cuda_only(monkeypatch, allowed):
    """gpu.cudnn_attention sets PyTorch's cuDNN sdpa flag on a CUDA machine; on the CPU nothing is touched."""
    import torch

    from training.run import choose_attention_kernels

    before = torch.backends.cuda.cudnn_sdp_enabled()
    config = TrainConfig.model_validate({"gpu": {"cudnn_attention": allowed}})
    try:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        torch.backends.cuda.enable_cudnn_sdp(not allowed)
        choose_attention_kernels(config)
        assert torch.backends.cuda.cudnn_sdp_enabled() is (not allowed)  # no CUDA: untouched
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        choose_attention_kernels(config)
        assert torch.backends.cuda.cudnn_sdp_enabled() is allowed
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
