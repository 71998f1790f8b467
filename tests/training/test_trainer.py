"""The trainer on a tiny random Llama (SmolLM2 vocabulary): loss goes down, saves reload exactly,
resume, merge, and TRL's handling of our pre-tokenised labels (padded and padding-free)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from tests.training.conftest import tiny_config
from training.collator import make_collator
from training.objectives.sft import train_sft


def _batch(dataset, tokenizer, n=4, padding_free=False):
    return make_collator(tokenizer, padding_free=padding_free)([dataset[i] for i in range(n)])


@torch.no_grad()
def _loss(model, batch):
    model.eval()
    return model(**batch).loss.item()


@pytest.fixture(scope="module")
def lora_run(tiny_model_dir, tiny_datasets, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora-run")
    cfg = tiny_config(
        tiny_model_dir,
        out,
        "optim.max_steps=4",
        "output.eval_strategy=steps",
        "output.eval_steps=2",
        "output.save_strategy=steps",
        "output.save_steps=2",
        "lora.r=8",
    )
    lines = []
    result = train_sft(cfg, datasets=tiny_datasets, log=lines.append)
    return cfg, result, lines


def test_full_finetuning_lowers_the_loss_on_a_fixed_batch(
    tiny_model, tiny_model_dir, tiny_datasets, smollm2_tokenizer, tmp_path
):
    batch = _batch(tiny_datasets["train"], smollm2_tokenizer)
    before = _loss(copy.deepcopy(tiny_model), batch)
    cfg = tiny_config(tiny_model_dir, tmp_path, "method=full", "optim.max_steps=6")
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    after = _loss(result.trainer.model, batch)
    assert after < before - 0.5, (before, after)
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "config.json").exists()


def test_lora_run_saves_adapter_tokenizer_config_and_metrics(lora_run):
    cfg, result, lines = lora_run
    out = result.output_dir
    for name in (
        "adapter_config.json",
        "adapter_model.safetensors",
        "tokenizer.json",
        "train_config.yaml",
        "metrics.json",
        "train_log.jsonl",
    ):
        assert (out / name).exists(), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["global_step"] == 4 and metrics["eval_loss"] > 0 and metrics["train_loss"] > 0
    assert metrics["data"]["train"]["trained_tokens"] > 0
    assert (out / "checkpoint-4").is_dir()
    from training.train_config import TrainConfig

    saved = TrainConfig.load(out / "train_config.yaml")  # the config as given, model.dtype as chosen here
    assert saved.model.dtype in ("float32", "bfloat16") and cfg.model.dtype == "auto"
    assert saved.model_copy(update={"model": saved.model.model_copy(update={"dtype": "auto"})}) == cfg
    assert any(line.startswith("step 4/4 | loss") for line in lines)
    assert any("eval_loss" in line for line in lines)
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 8 and adapter["base_model_name_or_path"] == cfg.model.name


def test_adapter_reloads_with_identical_logits(lora_run, tiny_model, tiny_datasets, smollm2_tokenizer):
    from memory_runtime.models.loading import load_model

    _, result, _ = lora_run
    batch = _batch(tiny_datasets["train"], smollm2_tokenizer)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    trained = result.trainer.model.eval()
    with torch.no_grad():
        expected = trained(**inputs).logits
        base = tiny_model(**inputs).logits
        # in the dtype it was trained in: `auto` is decided by a speed probe each time a model loads,
        # and a busy CPU with native bfloat16 may answer differently at training and at loading
        loaded, _ = load_model(str(result.output_dir), dtype=result.metrics["dtype"]["dtype"])
        got = loaded(**inputs).logits
    assert not torch.allclose(expected.float(), base.float(), atol=1e-4)  # the adapter changed something
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_merge_matches_base_plus_adapter(lora_run, tiny_datasets, smollm2_tokenizer, tmp_path):
    from memory_runtime.models.loading import load_model
    from training.merge import merge_adapter

    _, result, _ = lora_run
    merged_dir = merge_adapter(result.output_dir, tmp_path / "merged")
    batch = _batch(tiny_datasets["train"], smollm2_tokenizer)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        adapter_model, _ = load_model(str(result.output_dir), dtype="float32")  # not `auto`: the probe may differ
        merged, _ = load_model(str(merged_dir), dtype="float32")
        assert not hasattr(merged, "peft_config")
        torch.testing.assert_close(merged(**inputs).logits, adapter_model(**inputs).logits, atol=1e-4, rtol=1e-4)
    with pytest.raises(FileExistsError):
        merge_adapter(result.output_dir, merged_dir)


def test_resume_from_checkpoint(lora_run, tiny_datasets, tmp_path):
    import shutil

    cfg, result, _ = lora_run
    out = tmp_path / "resumed"
    shutil.copytree(result.output_dir / "checkpoint-4", out / "checkpoint-4")
    cfg2 = tiny_config(cfg.model.name, out, "optim.max_steps=6", "lora.r=8", "output.resume_from_checkpoint=true")
    lines = []
    resumed = train_sft(cfg2, datasets={"train": tiny_datasets["train"]}, log=lines.append)
    assert resumed.metrics["global_step"] == 6
    assert "training: 6 steps (from step 4)" in lines


def test_init_from_continues_the_adapter(lora_run, tiny_datasets, tmp_path):
    """Self-instruct rounds continue the previous round's adapter instead of starting from zero."""
    from safetensors.torch import load_file

    cfg, result, _ = lora_run
    cfg2 = tiny_config(
        cfg.model.name,
        tmp_path,
        "optim.max_steps=2",
        "lora.r=4",
        f"lora.init_from={result.output_dir}",
        "output.save_strategy=no",
    )
    train_sft(cfg2, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert json.loads((tmp_path / "adapter_config.json").read_text())["r"] == 8  # the adapter's own shape
    old = load_file(result.output_dir / "adapter_model.safetensors")
    new = load_file(tmp_path / "adapter_model.safetensors")
    assert old.keys() == new.keys()
    b = [k for k in old if "lora_B" in k]
    moved = sum((new[k] - old[k]).norm() for k in b)
    assert 0 < moved < sum(old[k].norm() for k in b)  # trained further, from where it was (a new B starts at 0)


def test_init_from_must_be_an_adapter_of_the_same_base(lora_run, tiny_datasets, tmp_path):
    from training.train_config import ConfigError

    cfg, result, _ = lora_run
    with pytest.raises(ConfigError, match="not a PEFT adapter"):
        train_sft(tiny_config(cfg.model.name, tmp_path, f"lora.init_from={tmp_path}"), datasets=tiny_datasets)
    with pytest.raises(ConfigError, match="trained on"):
        train_sft(
            tiny_config(str(tmp_path), tmp_path / "o", f"lora.init_from={result.output_dir}"), datasets=tiny_datasets
        )


def test_resume_without_checkpoint_is_a_config_error(tiny_model_dir, tiny_datasets, tmp_path):
    from training.train_config import ConfigError

    cfg = tiny_config(tiny_model_dir, tmp_path, "output.resume_from_checkpoint=true")
    with pytest.raises(ConfigError, match="no checkpoint"):
        train_sft(cfg, datasets={"train": tiny_datasets["train"]})


def test_trl_keeps_our_labels_and_padding_free_masks_boundaries(
    tiny_model, tiny_model_dir, tiny_datasets, smollm2_tokenizer, tmp_path
):
    """Read from TRL 1.16: a pre-tokenised `labels` column is used as is; padding-free flattens the
    batch, restarts position ids per record and masks each record's first label."""
    from trl import SFTTrainer

    from training.objectives.sft import build_sft_config

    cfg = tiny_config(tiny_model_dir, tmp_path, "method=full", "packing.mode=padding_free")
    trainer = SFTTrainer(
        model=copy.deepcopy(tiny_model),
        args=build_sft_config(cfg, has_eval=False),
        train_dataset=tiny_datasets["train"],
        processing_class=smollm2_tokenizer,
    )
    assert trainer.train_dataset["labels"] == tiny_datasets["train"]["labels"]
    batch = next(iter(trainer.get_train_dataloader()))
    assert batch["input_ids"].shape[0] == 1 and "attention_mask" not in batch
    starts = (batch["position_ids"][0] == 0).nonzero().flatten().tolist()
    assert len(starts) == 4 and all(batch["labels"][0, s] == -100 for s in starts)
    # TRL's loss (fused LM head) on the flattened batch equals the loss on the same records padded
    ds = tiny_datasets["train"]
    with torch.no_grad():
        packed = trainer.compute_loss(trainer.model, _batch(ds, smollm2_tokenizer, padding_free=True))
        padded = trainer.compute_loss(trainer.model, _batch(ds, smollm2_tokenizer))
    assert packed.item() == pytest.approx(padded.item(), rel=1e-4)


@pytest.mark.parametrize("padding_free", [False, True])
def test_cpu_loss_on_trained_positions_matches_trl_fused_head(
    tiny_model, tiny_model_dir, tiny_datasets, smollm2_tokenizer, tmp_path, padding_free
):
    """The CPU loss projects only trained positions; loss, gradients and logged metrics are TRL's."""
    from trl import SFTTrainer

    from training.objectives.sft import TrainedPositionsSFTTrainer, build_sft_config

    cfg = tiny_config(tiny_model_dir, tmp_path, "method=full")
    args = build_sft_config(cfg, has_eval=False)
    ours = TrainedPositionsSFTTrainer(
        model=copy.deepcopy(tiny_model),
        args=args,
        train_dataset=tiny_datasets["train"],
        processing_class=smollm2_tokenizer,
    )
    trl = SFTTrainer(
        model=copy.deepcopy(tiny_model),
        args=args,
        train_dataset=tiny_datasets["train"],
        processing_class=smollm2_tokenizer,
    )
    assert ours.head_on_trained_positions(ours.model)
    batch = _batch(tiny_datasets["train"], smollm2_tokenizer, padding_free=padding_free)
    results = []
    for trainer in (ours, trl):
        trainer.model.train()
        loss = trainer.compute_loss(trainer.model, dict(batch))
        loss.backward()
        grads = [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]
        trainer.log({})  # what each logs: TRL's metrics of its loss, ours of ours (public hooks only)
        logged = {k: v for k, v in trainer.state.log_history[-1].items() if k != "step"}
        results.append((loss.item(), grads, logged))
    (loss_a, grads_a, metrics_a), (loss_b, grads_b, metrics_b) = results
    assert loss_a == pytest.approx(loss_b, rel=1e-5)
    assert len(grads_a) == len(grads_b) > 0
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)
    assert metrics_a.keys() == metrics_b.keys() >= {"entropy", "mean_token_accuracy", "num_tokens"}
    for key in metrics_a:
        assert metrics_a[key] == pytest.approx(metrics_b[key], rel=1e-4), key


def test_padding_free_gives_the_same_logits_and_loss_as_padding(tiny_model, tiny_datasets, smollm2_tokenizer):
    """Records packed into one row (sdpa, block-diagonal mask from position ids) see only themselves."""
    ds = tiny_datasets["train"]
    padded = _batch(ds, smollm2_tokenizer, n=4)
    packed = _batch(ds, smollm2_tokenizer, n=4, padding_free=True)
    model = copy.deepcopy(tiny_model).eval()
    with torch.no_grad():
        out_padded = model(
            input_ids=padded["input_ids"], attention_mask=padded["attention_mask"], labels=padded["labels"]
        )
        out_packed = model(
            input_ids=packed["input_ids"], position_ids=packed["position_ids"], labels=packed["labels"], use_cache=False
        )  # as in training: with a cache, transformers ignores packing
    lengths = padded["attention_mask"].sum(1).tolist()
    flat = torch.cat([out_padded.logits[i, :n] for i, n in enumerate(lengths)])
    torch.testing.assert_close(out_packed.logits[0], flat, atol=1e-4, rtol=1e-4)
    assert out_packed.loss.item() == pytest.approx(out_padded.loss.item(), rel=1e-5)
    trained = lambda b: int((b["labels"][:, 1:] != -100).sum())  # noqa: E731 - positions that are predicted
    assert trained(packed) == trained(padded)


def test_adapters_only_on_the_chosen_layers(tiny_model_dir, tiny_datasets, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path, "lora.layers_to_transform=[1]", "optim.max_steps=2")
    model = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None).trainer.model
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".layers.1." in n for n in trainable), sorted(trainable)
    assert all(p.abs().sum() > 0 for n, p in trainable.items() if "lora_B" in n)  # B starts at zero: it trained


def test_layers_the_model_lacks_are_a_config_error(tiny_model_dir, tiny_datasets, tmp_path):
    from training.train_config import ConfigError

    cfg = tiny_config(tiny_model_dir, tmp_path, "lora.layers_to_transform=[1, 2]")
    with pytest.raises(ConfigError, match=r"has layers 0\.\.1, got 2"):
        train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)


def test_loraplus_moves_b_matrices_ratio_times_faster(tiny_model_dir, tiny_datasets, tmp_path):
    """Adam's first step moves each weight by ~lr: with LoRA+ the B matrices (zero at init) move
    by lr x ratio, the A matrices by lr."""
    lr, ratio = 1e-3, 8
    cfg = tiny_config(
        tiny_model_dir,
        tmp_path,
        f"optim.learning_rate={lr}",
        f"lora.loraplus_lr_ratio={ratio}",
        "optim.lr_scheduler_type=constant",
        "optim.warmup=0",
        "optim.max_steps=1",
    )
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    b = [p for n, p in result.trainer.model.named_parameters() if "lora_B" in n]
    assert b and max(p.abs().max().item() for p in b) == pytest.approx(lr * ratio, rel=0.05)
    lrs = {g["lr"] for g in result.trainer.optimizer.param_groups if g["params"]}
    assert lrs == {lr, lr * ratio}


@pytest.mark.slow  # compiling on 2 cores takes ~1 min
def test_compiled_training_saves_an_adapter_that_reloads(tiny_model_dir, tiny_datasets, smollm2_tokenizer, tmp_path):
    """gpu.torch_compile: the CPU default's steps are ~1.24x faster compiled; the saved adapter must not
    carry torch.compile's wrapper names."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = tiny_config(
        tiny_model_dir, tmp_path, "gpu.torch_compile=true", "packing.mode=padding_free", "optim.max_steps=2"
    )
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert result.trainer.args.torch_compile and result.metrics["global_step"] == 2
    batch = _batch(tiny_datasets["train"], smollm2_tokenizer)
    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path)
    trained = result.trainer.model
    trained = getattr(trained, "_orig_mod", trained)
    with torch.no_grad():
        torch.testing.assert_close(reloaded.eval()(**batch).logits, trained.eval()(**batch).logits)


def test_padding_free_training_runs(tiny_model_dir, tiny_datasets, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path, "packing.mode=padding_free", "optim.max_steps=2")
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert result.metrics["global_step"] == 2 and result.metrics["train_loss"] > 0


def test_bfd_packing_training_runs(tiny_model_dir, tiny_datasets, tmp_path):
    cfg = tiny_config(
        tiny_model_dir,
        tmp_path,
        "packing.mode=bfd",
        "data.max_length=256",
        "packing.block_length=512",
        "optim.max_steps=2",
        "optim.per_device_train_batch_size=1",
    )
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert result.metrics["global_step"] == 2


@pytest.mark.parametrize("native", [True, False])
def test_training_records_the_choice_and_its_reason(native, tiny_model_dir, tiny_datasets, tmp_path, monkeypatch):
    from memory_runtime.models import hardware
    from memory_runtime.models.hardware import choose_cpu_dtype
    from tests.memory_runtime.models.test_hardware import AVX2_ONLY, BF16_NATIVE
    from training.train_config import TrainConfig

    cpu = BF16_NATIVE if native else AVX2_ONLY
    monkeypatch.setattr(hardware, "choose_dtype", lambda device="cpu": choose_cpu_dtype(cpu, probe=lambda: 2.0))
    lines: list[str] = []
    result = train_sft(
        tiny_config(tiny_model_dir, tmp_path, "optim.max_steps=1"), datasets=tiny_datasets, log=lines.append
    )
    dtype = "bfloat16" if native else "float32"
    assert next(p for p in result.trainer.model.parameters() if not p.requires_grad).dtype == getattr(torch, dtype)
    saved = (tmp_path / "train_config.yaml").read_text()
    assert saved.startswith(f"# model.dtype: auto -> {dtype} on this machine: CPU {cpu.model}")
    assert TrainConfig.load(tmp_path / "train_config.yaml").model.dtype == dtype
    assert result.metrics["dtype"]["dtype"] == dtype
    assert any(line.startswith(f"model.dtype: auto -> {dtype}") for line in lines)


def _interrupted_run(model_dir, datasets, out, *overrides):
    """A run of 4 steps that stops after step 2, as if killed, leaving checkpoint-2 (and its config) behind."""
    from transformers import TrainerCallback

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                control.should_training_stop = True

    cfg = tiny_config(model_dir, out, "output.save_strategy=steps", "output.save_steps=2", *overrides)
    train_sft(cfg, datasets={"train": datasets["train"]}, callbacks=[Kill()], log=lambda s: None)
    assert (out / "checkpoint-2").is_dir()
    return cfg


def test_running_the_same_command_again_resumes(tiny_model_dir, tiny_datasets, tmp_path):
    cfg = _interrupted_run(tiny_model_dir, tiny_datasets, tmp_path)
    lines: list[str] = []
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lines.append)
    assert "training: 4 steps (from step 2)" in lines
    assert any(line.startswith(f"resuming from {tmp_path / 'checkpoint-2'}") and "--fresh" in line for line in lines)
    assert result.metrics["global_step"] == 4


def test_a_checkpoint_of_another_config_is_not_resumed_silently(tiny_model_dir, tiny_datasets, tmp_path):
    from training.train_config import ConfigError

    _interrupted_run(tiny_model_dir, tiny_datasets, tmp_path)
    changed = tiny_config(
        tiny_model_dir, tmp_path, "output.save_strategy=steps", "output.save_steps=2", "optim.learning_rate=5e-4"
    )
    with pytest.raises(ConfigError, match=r"another config \(optim.learning_rate: 0.001 -> 0.0005\).*--fresh"):
        train_sft(changed, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert (tmp_path / "checkpoint-2").is_dir()  # nothing of the earlier run was touched


def test_fresh_starts_over(tiny_model_dir, tiny_datasets, tmp_path):
    _interrupted_run(tiny_model_dir, tiny_datasets, tmp_path)
    cfg = tiny_config(
        tiny_model_dir,
        tmp_path,
        "output.save_strategy=steps",
        "output.save_steps=3",
        "output.resume_from_checkpoint=false",
    )
    lines: list[str] = []
    train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lines.append)
    assert "training: 4 steps (from step 0)" in lines
    assert any(line.startswith("starting over: removed 1 checkpoint(s)") for line in lines)
    assert not (tmp_path / "checkpoint-2").exists() and (tmp_path / "checkpoint-4").is_dir()
