"""What DPO and KTO share (objectives dpo.py and kto.py): TRL's DPOTrainer and KTOTrainer from a supervised
run, on memlm's pre-tokenised preference data, the loss on exactly the tokens the model generated.

``objective: dpo`` reads PreferencePair JSONL and ``objective: kto`` LabelledTurn JSONL (training/data.py
tokenises each run with ``tokenize_record``, as SFT does, and cuts it at its first trained token). The
policy is the ``reference`` run's LoRA adapter, trainable; TRL keeps a frozen copy of it as the reference
("ref" adapter, ``training.run.load_policy``), so both share one base in memory.

What TRL (1.16) does, read from its source, and what changes here:

- Its collators mark every completion token as trained (``completion_mask`` all ones after the prompt).
  A memlm turn holds tokens the model did not generate: the results the controller inserts after a
  read's ``}:`` and the template text after the end of turn. dpo.py's ``PairCollator`` and
  kto.py's ``LabelledTurnCollator`` build ``completion_mask`` from the per-token masks of the data instead.
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

from collections.abc import Callable, Sequence
from typing import Any

import torch
from trl.trainer.utils import pad

from training.run import LogFn, TrainResult, load_policy, plan_resume, start_run, training_arguments
from training.train_config import TrainConfig

# --------------------------------------------------------------------------- collators


def _padded(rows: list[list[int]], value: int, multiple: int | None) -> torch.Tensor:
    return pad(
        [torch.tensor(row, dtype=torch.long) for row in rows],
        padding_value=value,
        padding_side="right",
        pad_to_multiple_of=multiple,
    )


def padded_sequences(
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


# --------------------------------------------------------------------------- configs


def preference_arguments(
    config: TrainConfig, fields: dict[str, Any], has_eval: bool, output_dir: str | None
) -> dict[str, Any]:
    """The arguments DPOConfig and KTOConfig take alike: TrainingArguments' and the `preference` section's."""
    p = config.preference
    return dict(
        training_arguments(config, fields, has_eval=has_eval, output_dir=output_dir),
        beta=p.beta,
        precompute_ref_log_probs=p.precompute_ref_log_probs,
        max_length=None,  # runs are within data.max_length already (training/data.py drops or truncates)
        remove_unused_columns=False,  # the collators read the mask columns, which TRL's column list lacks
    )


# --------------------------------------------------------------------------- training


def train_preference(
    config: TrainConfig,
    trainer_class: type,
    collator_class: type,
    build_args: Callable[..., Any],
    *,
    describe: Callable[[Any, TrainConfig], str] | None = None,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any],
    log: LogFn,
) -> TrainResult:
    """A dpo or kto run with its trainer, collator and TRL config builder: the same outputs as an SFT run
    (adapter, tokenizer, train_config.yaml, metrics.json with the method's rewards, train_log.jsonl,
    checkpoints), the same time budget, progress lines and resume. Nothing is written before the data and
    the reference are checked. `describe` gives a line about the train split, logged before the model loads.

    ``datasets`` ({"train": ..., "validation": ...} with the columns of training/data.py) skips loading (tests)."""
    run = start_run(config, check_all=datasets is None, log=log)
    config, log = run.config, run.log

    from training.data import build_preference_datasets, preference_token_stats

    tokenizer = run.load_tokenizer()
    if datasets is None:
        datasets = build_preference_datasets(config, tokenizer)
    run.resume = plan_resume(config, log)  # may remove checkpoints (--fresh): only once the input is known good
    run.save_config()
    train_ds, eval_ds = datasets["train"], datasets.get("validation")
    stats = run.data_stats(train_ds, eval_ds, preference_token_stats)

    args = build_args(config, has_eval=eval_ds is not None)  # before the model: ZeRO-3 init
    if describe is not None:
        log(describe(train_ds, config))
    model = load_policy(config)
    log(f"policy: a trainable copy of {config.reference}'s adapter; reference: a frozen copy ('ref' adapter)")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    trainer = trainer_class(
        model=model,
        args=args,
        data_collator=collator_class(pad_token_id=pad_id),
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        callbacks=run.callbacks(callbacks),
    )
    return run.finish(trainer, run.train(trainer), has_eval=eval_ds is not None, stats=stats)
