"""Training memlm models to emit memory calls: tokenisation with the loss masked to the model's
own text, a TRL/PEFT trainer (LoRA, QLoRA, full), merging and a throughput bench.

Public API:

    tokenize_record(record, tokenizer, ...)  -> {"input_ids", "labels", "attention_mask"}
    TrainConfig.load(path, overrides) -> TrainConfig      (training.train_config)
    train_sft(config) -> TrainResult                      (training.objectives.sft; a run's lifecycle: training.run)
    merge_adapter(adapter_dir, output_dir)                (training.merge)
    bench_train(config) -> dict                           (training.bench)

Every objective by name (sft, dpo, kto, grpo): learning_loop.train.train, above training because
GRPO's rollouts are rewarded with eval's metrics.

Heavy modules (torch, transformers, trl, peft) are imported on first use.
"""

from __future__ import annotations

from typing import Any

from training.tokenize import IGNORE_INDEX, RecordError, RecordTooLong, tokenize_record

__all__ = [
    "IGNORE_INDEX",
    "ConfigError",
    "RecordError",
    "RecordTooLong",
    "TrainConfig",
    "TrainResult",
    "bench_train",
    "merge_adapter",
    "tokenize_record",
    "train_sft",
]

_LAZY = {
    "ConfigError": "training.train_config",
    "TrainConfig": "training.train_config",
    "train_sft": "training.objectives.sft",
    "TrainResult": "training.run",
    "merge_adapter": "training.merge",
    "bench_train": "training.bench",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'training' has no attribute {name!r}")
