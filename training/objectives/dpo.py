"""Objective dpo: TRL's DPOTrainer on PreferencePair runs of one prompt, the loss on the tokens the model
generated (the shared run and why it differs from TRL's: preference.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers.data.data_collator import DataCollatorMixin
from trl import DPOConfig, DPOTrainer

from training.objectives.preference import padded_sequences, preference_arguments, train_preference
from training.run import LogFn, SavesPolicyOnly, TrainResult, _stderr
from training.train_config import TrainConfig


@dataclass
class PairCollator(DataCollatorMixin):
    """TRL's DataCollatorForPreference with the data's per-token completion masks: rows ``prompt_ids``,
    ``chosen_ids``/``chosen_mask``, ``rejected_ids``/``rejected_mask`` (and ``ref_chosen_logps``/
    ``ref_rejected_logps`` once precomputed) -> the chosen sequences, then the rejected ones."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        runs = [
            (ex["prompt_ids"], ex[f"{side}_ids"], ex[f"{side}_mask"])
            for side in ("chosen", "rejected")
            for ex in examples
        ]
        output = padded_sequences(runs, self.pad_token_id, self.pad_to_multiple_of)
        for key in ("ref_chosen_logps", "ref_rejected_logps"):
            if key in examples[0]:
                output[key] = torch.tensor([ex[key] for ex in examples])
        return output


class MaskedDPOTrainer(SavesPolicyOnly, DPOTrainer):
    """DPOTrainer on pre-tokenised pairs with per-token masks (:class:`PairCollator`), saving one adapter."""

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        return dataset  # tokenised by training/data.py; TRL would tokenise text again


def build_dpo_config(config: TrainConfig, *, has_eval: bool, output_dir: str | None = None) -> DPOConfig:
    kwargs = preference_arguments(config, DPOConfig.__dataclass_fields__, has_eval, output_dir)
    return DPOConfig(**kwargs, loss_type=[config.preference.dpo_loss])


def train_dpo(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """Train objective dpo from `reference` (preference.train_preference)."""
    return train_preference(
        config, MaskedDPOTrainer, PairCollator, build_dpo_config, datasets=datasets, callbacks=callbacks, log=log
    )
