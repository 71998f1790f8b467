"""`train(config)`: every objective by name, for `memlm train`, self-instruct's rounds and tests alike.

The table sits here, not in training: GRPO's trainer (learning_loop/grpo.py) scores its rollouts with
eval's metrics, and training may not import eval nor the learning loop (tests/test_layers.py); this is the
lowest layer that sees all four objectives."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from learning_loop.grpo import train_grpo
from training.objectives.dpo import train_dpo
from training.objectives.kto import train_kto
from training.objectives.sft import train_sft
from training.objectives.verifier import train_verifier
from training.run import LogFn, TrainResult, _stderr
from training.train_config import TrainConfig

OBJECTIVES: dict[str, Callable[..., TrainResult]] = {
    "sft": train_sft,
    "dpo": train_dpo,
    "kto": train_kto,
    "grpo": train_grpo,
    "verifier": train_verifier,
}
"""objective -> its run function: (config, *, datasets, callbacks, log) -> TrainResult."""


def train(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """Train as configured (`objective` picks the run function); return the final metrics. Writes into
    ``output.output_dir``: the adapter (or full model) + tokenizer, ``train_config.yaml`` (the resolved
    config), ``metrics.json``, ``train_log.jsonl``, ``README.md`` (the run card) and ``checkpoint-*``
    directories.

    ``datasets`` ({"train": ..., "validation": ...} tokenised, as training/data.py makes them) skips data
    loading (tests; not objective grpo, which makes its own runs)."""
    return OBJECTIVES[config.objective](config, datasets=datasets, callbacks=callbacks, log=log)
