"""DPO and KTO from a supervised run: TRL's DPOTrainer and KTOTrainer on memlm's pre-tokenised preference
data, the loss on exactly the tokens the model generated.

``objective: dpo`` reads PreferencePair JSONL and ``objective: kto`` LabelledTurn JSONL (training/data.py
tokenises each run with ``tokenize_record``, as SFT does, and cuts it at its first trained token). The
policy is the ``reference`` run's LoRA adapter, trainable; TRL keeps a frozen copy of it as the reference
("ref" adapter, ``training.run.load_policy``), so both share one base in memory.

What TRL (1.16) does, read from its source, and what changes here:

- Its collators mark every completion token as trained (``completion_mask`` all ones after the prompt).
  A memlm turn holds tokens the model did not generate: the results the controller inserts after a
  read's ``}:`` and the template text after the end of turn. :class:`PairCollator` and
  :class:`LabelledTurnCollator` build ``completion_mask`` from the per-token masks of the data instead.
  TRL turns that mask into labels (-100 where it is 0), its fused LM head scores the rest, and a
  sequence's log-probability is the sum over them: those masked tokens add nothing to the loss, the
  rewards, the KL estimate or the logged token counts.
- Its ``_prepare_dataset`` always tokenises text again (extracting a prompt, applying the chat
  template); no public hook takes pre-tokenised preference data, so the trainers here override that
  private method to keep ours (KTO: adding the mismatched completions of its KL estimate, rotated within
  each batch as TRL does). tests/training/test_preference.py fails if TRL renames it, changes its
  arguments or stops calling it; every other override is a public hook.
- Given a PeftModel, it adds a frozen copy of the adapter named "ref" and scores the reference with it
  active; PEFT saves that copy beside the trained adapter (``DIR/ref/``). ``save_model`` removes it:
  a run holds one adapter, which eval, serve, merge and chat load as they load an SFT run's.
- ``precompute_ref_log_probs`` (preference.precompute_ref_log_probs) scores every sequence under the
  reference once, before training, instead of once per step.
- KTO reads its turns in order (``train_sampling_strategy="sequential"``: the KL pairs are fixed per
  batch); training/data.py shuffles them once, seeded.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers.data.data_collator import DataCollatorMixin
from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer
from trl.trainer.utils import pad

from training.config import CONFIG_FILENAME, TrainConfig
from training.run import (
    LOG_FILENAME,
    LogFn,
    ProgressLogger,
    TrainResult,
    _stderr,
    drop_reference_copy,
    finish_run,
    is_main_process,
    keep_relation_table,
    load_policy,
    log_trainable,
    plan_resume,
    start_run,
    time_budget,
    training_arguments,
)

# --------------------------------------------------------------------------- collators


def _padded(rows: list[list[int]], value: int, multiple: int | None) -> torch.Tensor:
    return pad(
        [torch.tensor(row, dtype=torch.long) for row in rows],
        padding_value=value,
        padding_side="right",
        pad_to_multiple_of=multiple,
    )


def _sequences(
    runs: list[tuple[list[int], list[int], list[int]]], pad_token_id: int, multiple: int | None
) -> dict[str, torch.Tensor]:
    """(prompt ids, completion ids, completion mask) per run -> prompt + completion right-padded:
    input_ids, attention_mask, and completion_mask from the data's masks (0 on the prompt, on masked
    completion tokens and on padding)."""
    ids = [prompt + completion for prompt, completion, _ in runs]
    masks = [[0] * len(prompt) + list(mask) for prompt, _, mask in runs]
    return {
        "input_ids": _padded(ids, pad_token_id, multiple),
        "attention_mask": _padded([[1] * len(row) for row in ids], 0, multiple),
        "completion_mask": _padded(masks, 0, multiple),
    }


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
        output = _sequences(runs, self.pad_token_id, self.pad_to_multiple_of)
        for key in ("ref_chosen_logps", "ref_rejected_logps"):
            if key in examples[0]:
                output[key] = torch.tensor([ex[key] for ex in examples])
        return output


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
            tensors = _sequences(runs, self.pad_token_id, self.pad_to_multiple_of)
            output.update({f"{prefix}{key}": value for key, value in tensors.items()})
        for key in ("ref_logps", "ref_KL_logps"):
            if key in examples[0]:
                output[key] = torch.tensor([ex[key] for ex in examples])
        output["label"] = torch.tensor([bool(ex["label"]) for ex in examples])
        return output


# --------------------------------------------------------------------------- trainers


class MaskedDPOTrainer(DPOTrainer):
    """DPOTrainer on pre-tokenised pairs with per-token masks (:class:`PairCollator`), saving one adapter."""

    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        return dataset  # tokenised by training/data.py; TRL would tokenise text again

    def save_model(self, output_dir: str | None = None, **kwargs: Any) -> None:
        super().save_model(output_dir, **kwargs)
        if self.args.should_save:
            drop_reference_copy(output_dir or self.args.output_dir)


class MaskedKTOTrainer(KTOTrainer):
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

    def save_model(self, output_dir: str | None = None, **kwargs: Any) -> None:
        super().save_model(output_dir, **kwargs)
        if self.args.should_save:
            drop_reference_copy(output_dir or self.args.output_dir)


# --------------------------------------------------------------------------- configs


def _preference_arguments(config: TrainConfig, fields: dict[str, Any], has_eval: bool, output_dir: str | None):
    p = config.preference
    return dict(
        training_arguments(config, fields, has_eval=has_eval, output_dir=output_dir),
        beta=p.beta,
        precompute_ref_log_probs=p.precompute_ref_log_probs,
        max_length=None,  # runs are within data.max_length already (training/data.py drops or truncates)
        remove_unused_columns=False,  # the collators read the mask columns, which TRL's column list lacks
    )


def build_dpo_config(config: TrainConfig, *, has_eval: bool, output_dir: str | None = None) -> DPOConfig:
    kwargs = _preference_arguments(config, DPOConfig.__dataclass_fields__, has_eval, output_dir)
    return DPOConfig(**kwargs, loss_type=[config.preference.dpo_loss])


def build_kto_config(config: TrainConfig, *, has_eval: bool, output_dir: str | None = None) -> KTOConfig:
    p = config.preference
    kwargs = _preference_arguments(config, KTOConfig.__dataclass_fields__, has_eval, output_dir)
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


# --------------------------------------------------------------------------- training


def train_preference(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Any = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """train() for objective dpo and kto: the same outputs as an SFT run (adapter, tokenizer,
    train_config.yaml, metrics.json with the method's rewards, train_log.jsonl, checkpoints), the same time
    budget, progress lines and resume. Nothing is written before the data and the reference are checked.

    ``datasets`` ({"train": ..., "validation": ...} with the columns of training/data.py) skips loading (tests)."""
    config, choice, notes, log = start_run(config, check_all=datasets is None, log=log)

    from transformers import PrinterCallback

    from memory_runtime.models.loading import load_tokenizer
    from training.data import build_preference_datasets, preference_token_stats

    t0 = time.perf_counter()
    tokenizer = load_tokenizer(config.model.name, local_files_only=config.model.local_files_only)
    if datasets is None:
        datasets = build_preference_datasets(config, tokenizer)
    resume = plan_resume(config, log)  # may remove checkpoints (--fresh): only once the input is known good
    out = Path(config.output.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        config.save(out / CONFIG_FILENAME, notes)
        keep_relation_table(config, out)
    train_ds, eval_ds = datasets["train"], datasets.get("validation")
    stats = {"train": preference_token_stats(train_ds)}
    if eval_ds is not None:
        stats["validation"] = preference_token_stats(eval_ds)
    log(f"data: {json.dumps(stats)}")

    dpo = config.objective == "dpo"
    build_args = build_dpo_config if dpo else build_kto_config
    args = build_args(config, has_eval=eval_ds is not None)  # before the model: ZeRO-3 init
    if not dpo:
        log(kto_balance(train_ds, config))
    model = load_policy(config)
    log(f"policy: a trainable copy of {config.reference}'s adapter; reference: a frozen copy ('ref' adapter)")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    collator = (PairCollator if dpo else LabelledTurnCollator)(pad_token_id=pad_id)
    budget = time_budget(config, resume, log)
    trainer = (MaskedDPOTrainer if dpo else MaskedKTOTrainer)(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        callbacks=[ProgressLogger(log, out / LOG_FILENAME), *([budget] if budget else []), *callbacks],
    )
    trainer.remove_callback(PrinterCallback)
    log_trainable(trainer, config, log)
    result = trainer.train(resume_from_checkpoint=resume)
    return finish_run(
        trainer,
        result,
        config=config,
        out=out,
        has_eval=eval_ds is not None,
        stats=stats,
        started=t0,
        choice=choice,
        budget=budget,
        notes=notes,
        tokenizer=tokenizer,
        log=log,
    )
