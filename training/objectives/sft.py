"""Objective sft: TRL's SFTTrainer on pre-tokenised records, with LoRA, QLoRA or full fine-tuning.

What TRL (1.16) does with our dataset, read from its source: a dataset with an ``input_ids``
column is "already processed"; a ``labels`` column is used as is (-100 = no loss), sequences
are truncated to ``max_length`` (we drop/truncate overlong records ourselves first) and
examples with no trained token are dropped.  Its collator pads ``labels`` with -100, or with
``padding_free`` flattens the batch into one row with restarting ``position_ids`` and sets
the label of every sequence's first token to -100 (so no token is predicted across two
records); sdpa/eager then build a block-diagonal causal mask from the position ids,
flash-attention uses the varlen kernel.  ``packing=True`` with ``bfd`` packs whole records
into rows of ``max_length`` tokens and is padding-free too.  The loss is the mean over
trained tokens of the whole (accumulated) batch: TRL's fused LM head on GPUs, the head on the
trained positions only on the CPU (``TrainedPositionsSFTTrainer``).

Order matters for DeepSpeed ZeRO-3: the SFTConfig (which activates the DeepSpeed config
globally) is built *before* the model is loaded, so ``from_pretrained`` partitions weights.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from trl import SFTTrainer

from training.run import (
    LogFn,
    TrainResult,
    _stderr,
    build_model,
    build_peft_config,
    plan_resume,
    start_run,
    training_arguments,
)
from training.train_config import TrainConfig


def sft_max_length(config: TrainConfig) -> int | None:
    """TRL's max_length: the row length when packing, None for padding-free (records are already
    within data.max_length and TRL refuses a max_length it would not enforce), else data.max_length."""
    mode = config.packing.mode
    if mode == "bfd":
        return config.block_length
    if mode == "padding_free":
        return None
    return config.data.max_length


def build_sft_config(config: TrainConfig, *, has_eval: bool, output_dir: str | None = None) -> Any:
    from trl import SFTConfig

    fields = SFTConfig.__dataclass_fields__
    kwargs = training_arguments(config, fields, has_eval=has_eval, output_dir=output_dir)
    kwargs.update(
        max_length=sft_max_length(config),
        packing=config.packing.mode == "bfd",
        packing_strategy="bfd",
        padding_free=config.packing.mode == "padding_free",
        dataset_num_proc=config.data.num_proc,
    )
    # transformers 5.18 renamed group_by_length; 5.17 (pyproject's floor) has the old name
    if config.packing.group_by_length:
        if "train_sampling_strategy" in fields:
            kwargs["train_sampling_strategy"] = "group_by_length"
        else:
            kwargs["group_by_length"] = True
    return SFTConfig(**kwargs)


# --------------------------------------------------------------------------- the trainer


class TrainedPositionsSFTTrainer(SFTTrainer):
    """TRL's SFTTrainer whose CPU loss runs the LM head on the trained positions only.

    TRL's fused LM head (the loss since TRL 1.x) keeps only labelled positions on Triton devices;
    elsewhere it scores every position, then recomputes every tile in the backward: on the CPU
    default that was ~36% of a step, though only ~41% of the positions carry a label.  Here the
    model's own ``logits_to_keep`` projects just the positions whose next token is trained, and
    the loss is cross-entropy on those (same value as TRL's; steps 1.2-1.4x faster, see
    docs/results.md).  GPUs, MoE auxiliary losses and callers that want all logits keep TRL's
    path.  ``loraplus_lr_ratio`` builds LoRA+'s optimizer groups (PEFT) instead of one learning rate;
    ``max_tokens_per_step`` batches by a token budget (training/token_budget.py).

    Only TRL's and transformers' public hooks are overridden (``compute_loss``, ``log``,
    ``create_optimizer``, ``get_train_dataloader``): the metrics TRL logs for its own loss (entropy,
    token accuracy, tokens seen) are kept here for ours and added in ``log``, as TRL adds its."""

    def __init__(
        self,
        *args: Any,
        loraplus_lr_ratio: float | None = None,
        max_tokens_per_step: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.loraplus_lr_ratio = loraplus_lr_ratio
        self.max_tokens_per_step = max_tokens_per_step
        # per mode (train, eval): each metric's values since the last log
        self.position_metrics: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in ("train", "eval")}
        self.tokens_seen = 0  # training tokens, as TRL counts them (num_tokens): real tokens, padding left out
        super().__init__(*args, **kwargs)

    def get_train_dataloader(self):
        """Token-budget micro-batches when optim.max_tokens_per_step is set (training/token_budget.py). The
        dataset goes to the collator as it is: it reads input_ids, labels (and seq_lengths) by name."""
        if self.max_tokens_per_step is None:
            return super().get_train_dataloader()
        from torch.utils.data import DataLoader

        from training.token_budget import TokenBudgetSampler

        dataset = self.train_dataset
        lengths = [len(ids) for ids in dataset["input_ids"]]
        padded = not (self.args.padding_free or self.args.packing)
        sampler = TokenBudgetSampler(lengths, self.max_tokens_per_step, padded=padded, seed=self.args.seed)
        loader = DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=self.data_collator,
            num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory,
        )
        return self.accelerator.prepare(loader)

    def create_optimizer(self, model=None):
        if self.loraplus_lr_ratio is None or self.optimizer is not None:
            return super().create_optimizer(model)
        from peft.optimizers import create_loraplus_optimizer

        opt_model = self.model if model is None else model
        optimizer_cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, opt_model)
        kwargs = dict(kwargs)
        self.optimizer = create_loraplus_optimizer(
            opt_model,
            optimizer_cls,
            lr=kwargs.pop("lr"),
            loraplus_lr_ratio=self.loraplus_lr_ratio,
            loraplus_weight_decay=self.args.weight_decay,
            **kwargs,
        )
        return self.optimizer

    def head_on_trained_positions(self, model: Any) -> bool:
        """Whether this step's loss is ours (the CPU, no MoE auxiliary loss, a model that takes logits_to_keep)."""
        if self.args.device.type != "cpu" or self.aux_loss_enabled:
            return False
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        return "logits_to_keep" in inspect.signature(base.forward).parameters

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if return_outputs or not self.head_on_trained_positions(model):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        mode = "train" if self.model.training else "eval"
        labels = inputs["labels"][:, 1:]  # position t predicts token t + 1
        keep = (labels != -100).any(dim=0).nonzero().squeeze(-1)
        model_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        outputs = model(**model_inputs, use_cache=False, logits_to_keep=keep)
        logits = outputs.logits.float()  # [batch, kept, vocab]
        targets = labels[:, keep]
        valid = targets != -100
        # one log-softmax serves the loss and the logged entropy: over a 262k vocabulary (Gemma 3)
        # a second one was a tenth of a CPU step. Padding-free batches are one row, all kept valid.
        trained = logits.flatten(0, 1) if bool(valid.all()) else logits[valid]  # [trained tokens, vocab]
        log_probs = trained.log_softmax(-1)
        target_ids = targets[valid]
        n_valid = valid.sum()
        denominator = n_valid.clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        loss = F.nll_loss(log_probs, target_ids, reduction="sum") / denominator
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes

        # the metrics TRL logs: entropy and token accuracy over trained tokens, tokens seen
        with torch.no_grad():
            detached = log_probs.detach()
            entropy = -(detached.exp() * detached).sum()
            correct = (detached.argmax(-1) == target_ids).sum()
        gather = self.accelerator.gather_for_metrics
        total = gather(n_valid).sum()
        entropy, correct = gather(entropy).sum(), gather(correct).sum()
        metrics = self.position_metrics[mode]
        metrics["entropy"].append((entropy / total).item() if total > 0 else 0.0)
        metrics["mean_token_accuracy"].append((correct / total).item() if total > 0 else 0.0)
        if mode == "train":
            if "attention_mask" in inputs:
                seen = inputs["attention_mask"].sum()
            else:  # padding-free: one row of real tokens
                seen = torch.tensor(inputs["input_ids"].numel(), device=inputs["input_ids"].device)
            self.tokens_seen += gather(seen).sum().item()
        metrics["num_tokens"] = [self.tokens_seen]
        return loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """The metrics of the steps whose loss ran here, averaged since the last log as TRL averages its
        own (eval ones prefixed eval_); TRL then adds those of its loss, if any ran."""
        mode = "train" if self.model.training else "eval"
        prefix = "eval_" if mode == "eval" else ""
        metrics = self.position_metrics[mode]
        logs.update({f"{prefix}{key}": sum(values) / len(values) for key, values in metrics.items()})
        metrics.clear()
        super().log(logs, start_time)


def train_sft(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """Train objective sft; return the final metrics.  Writes into ``output.output_dir``:
    the adapter (or full model) + tokenizer, ``train_config.yaml`` (the resolved config),
    ``metrics.json``, ``train_log.jsonl`` and ``checkpoint-*`` directories.

    ``datasets`` ({"train": ..., "validation": ...} tokenised) skips data loading (tests)."""
    run = start_run(config, check_all=datasets is None, log=log)
    config, log = run.config, run.log
    run.resume = plan_resume(config, log)

    from training.data import build_datasets, token_stats

    tokenizer = run.load_tokenizer()
    if datasets is None:
        datasets = build_datasets(config, tokenizer)
    run.save_config()  # only once the data is there: bad data leaves nothing
    train_ds, eval_ds = datasets["train"], datasets.get("validation")
    stats = run.data_stats(train_ds, eval_ds, token_stats)

    args = build_sft_config(config, has_eval=eval_ds is not None)  # before the model: ZeRO-3 init
    model = build_model(config)
    peft_config = build_peft_config(config)
    if config.lora.init_from is not None:  # continue an adapter (self-instruct rounds): same weights, trainable
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, config.lora.init_from, is_trainable=True)
    trainer = TrainedPositionsSFTTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=run.callbacks(callbacks),
        loraplus_lr_ratio=config.lora.loraplus_lr_ratio,  # the config refuses it with method=full
        max_tokens_per_step=config.optim.max_tokens_per_step,
    )
    return run.finish(trainer, run.train(trainer), has_eval=eval_ds is not None, stats=stats)
