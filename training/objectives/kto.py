"""Objective kto: TRL's KTOTrainer on LabelledTurn runs, desirable or not, the loss on the tokens the model
generated (the shared run and why it differs from TRL's: preference.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers.data.data_collator import DataCollatorMixin
from trl import KTOConfig, KTOTrainer

from training.objectives.preference import padded_sequences, preference_arguments, train_preference
from training.run import LogFn, SavesPolicyOnly, TrainResult, _stderr
from training.train_config import TrainConfig


@dataclass
class LabelledTurnCollator(DataCollatorMixin):
    """TRL's DataCollatorForUnpairedPreference with the data's per-token completion masks: rows
    ``prompt_ids``, ``completion_ids``/``completion_mask``, ``label`` (and ``KL_completion_ids``/
    ``KL_completion_mask``, ``ref_logps``/``ref_KL_logps``) -> the turns, the KL sequences under ``KL_``."""

    pad_token_id: int
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = {}
        for prefix in ("", "KL_"):
            if f"{prefix}completion_ids" not in examples[0]:
                continue
            runs = [
                (ex["prompt_ids"], ex[f"{prefix}completion_ids"], ex[f"{prefix}completion_mask"]) for ex in examples
            ]
            tensors = padded_sequences(runs, self.pad_token_id, self.pad_to_multiple_of)
            output.update({f"{prefix}{key}": value for key, value in tensors.items()})
        for key in ("ref_logps", "ref_KL_logps"):
            if key in examples[0]:
                output[key] = torch.tensor([ex[key] for ex in examples])
        output["label"] = torch.tensor([bool(ex["label"]) for ex in examples])
        return output


class MaskedKTOTrainer(SavesPolicyOnly, KTOTrainer):
    """KTOTrainer on pre-tokenised turns with per-token masks (:class:`LabelledTurnCollator`), saving one
    adapter."""

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        """Tokenised by training/data.py; only the KL pairs are added, as TRL adds them: turn i of a batch
        of per_device_train_batch_size gets the completion (and its mask) of turn i - 1."""
        if not self.calculate_KL:
            return dataset

        def rotate(batch: dict[str, list]) -> dict[str, list]:
            ids, masks = batch["completion_ids"], batch["completion_mask"]
            return {"KL_completion_ids": ids[-1:] + ids[:-1], "KL_completion_mask": masks[-1:] + masks[:-1]}

        return dataset.map(
            rotate, batched=True, batch_size=args.per_device_train_batch_size, keep_in_memory=True, desc=None
        )


def build_kto_config(config: TrainConfig, *, has_eval: bool, output_dir: str | None = None) -> KTOConfig:
    p = config.preference
    kwargs = preference_arguments(config, KTOConfig.__dataclass_fields__, has_eval, output_dir)
    return KTOConfig(
        **kwargs,
        loss_type=p.kto_loss,
        desirable_weight=p.desirable_weight,
        undesirable_weight=p.undesirable_weight,
    )


def kto_balance(dataset: Any, config: TrainConfig) -> str:
    """The desirable/undesirable counts, and the KTO paper's advice (its Eq. 8, as TRL words it) when the
    weights do not offset an imbalance: desirable_weight x desirable within [1, 4/3] x undesirable_weight
    x undesirable."""
    desirable = sum(bool(x) for x in dataset["label"])
    undesirable = len(dataset) - desirable
    p = config.preference
    line = f"kto: {desirable} desirable and {undesirable} undesirable turns"
    if desirable and undesirable:
        ratio = p.desirable_weight * desirable / (p.undesirable_weight * undesirable)
        if not 1 <= ratio <= 4 / 3:
            low = undesirable * p.undesirable_weight / desirable
            line += (
                f"; warning: the weights do not offset them: preference.desirable_weight in "
                f"[{low:.2f}, {low * 4 / 3:.2f}] would (the KTO paper's range)"
            )
    return line


def train_kto(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """Train objective kto from `reference` (preference.train_preference), logging the labels' balance."""
    return train_preference(
        config,
        MaskedKTOTrainer,
        LabelledTurnCollator,
        build_kto_config,
        describe=kto_balance,
        datasets=datasets,
        callbacks=callbacks,
        log=log,
    )
