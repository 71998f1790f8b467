"""Multi-process training stays alive: `memlm train` under torchrun with 2 CPU processes (gloo), as
`accelerate launch` runs it on GPUs, for plain data parallel (DDP) and DeepSpeed ZeRO-2 and ZeRO-3.

Each run trains the tiny model 4 steps of token-budget batches; all three must compute the same losses (they are the same
arithmetic spread differently), log each line once, and save a loadable adapter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _launch(model_dir: Path, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "memlm",
        "train",
        "--config",
        str(REPO / "configs/train/cpu-smollm2.yaml"),
        f"model.name={model_dir}",
        f"output.output_dir={out}",
        "optim.max_steps=4",
        "optim.max_minutes=null",
        "optim.per_device_train_batch_size=4",
        "optim.max_tokens_per_step=512",
        "data.synthetic.train=32",
        "data.max_eval_records=8",
        "output.eval_strategy=no",
        "output.save_strategy=no",
        "output.logging_steps=1",
        *overrides,
    ]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _run(model_dir: Path, out: Path, *overrides: str) -> dict:
    done = _launch(model_dir, out, *overrides)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr.count("saved lora model") == 1, "rank 0 alone should log"
    assert done.stdout.count('"output_dir"') == 1, "rank 0 alone should print the summary"
    assert (out / "adapter_model.safetensors").is_file()
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow  # ~75 s of two processes: .ci/run runs it after the default suite
def test_data_parallel_and_zero_on_two_cpu_processes(tiny_model_dir, tmp_path):
    ddp = _run(tiny_model_dir, tmp_path / "ddp")
    assert ddp["distributed"] == {"processes": 2, "type": "MULTI_CPU", "zero_stage": None}
    assert ddp["global_step"] == 4
    pytest.importorskip("deepspeed")
    for stage in (2, 3):
        zero = _run(tiny_model_dir, tmp_path / f"zero{stage}", f"gpu.deepspeed=zero{stage}")
        assert zero["distributed"] == {"processes": 2, "type": "DEEPSPEED", "zero_stage": stage}
        assert zero["train_loss"] == pytest.approx(ddp["train_loss"], rel=1e-4)

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    # ZeRO-3 shards the weights: what it saved must be whole again
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path / "zero3")
    lora_a = [p for n, p in model.named_parameters() if "lora_A" in n]
    assert lora_a and all(p.numel() > 0 for p in lora_a)
