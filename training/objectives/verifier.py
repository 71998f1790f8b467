"""Objective verifier: the write verifier (memory_runtime/generation/verifier.py), a classifier on the base with
a LoRA adapter and a one-logit head, trained with transformers' Trainer on VerifierExample lines (`memlm
sample`'s verifier.jsonl: a passage, a candidate fact, holds or not) with a binary cross-entropy loss.

A share of the passages (``verifier.held_out``, split by passage, never by candidate) is held out: the
validation split, and where the threshold is chosen, as the F1-best threshold over the held-out writes the
writer proposed (the candidates the gate will see). The threshold, the base and the relation table go into
the run's verifier.json; `write_gate.verifier=RUN` then gates writes with it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_runtime.generation.verifier import EXAMPLES_FILE


def example_files(config: Any) -> list[Path]:
    """The VerifierExample JSONL files of a run: data.path (a `memlm sample` directory's verifier.jsonl, or a
    file) and data.extra_jsonl."""
    files = []
    if config.data.path is not None:
        path = Path(config.data.path).expanduser()
        files.append(path / EXAMPLES_FILE if path.is_dir() else path)
    files += [Path(p).expanduser() for p in config.data.extra_jsonl]
    for f in files:
        if not f.is_file():
            raise ValueError(f"data.path: {f} does not exist (a `memlm sample` directory holds {EXAMPLES_FILE})")
    return files


def is_held_out(passage_id: str, share: float, seed: int) -> bool:
    """A passage's split, the same on any machine: by a hash of its id and the seed."""
    digest = int(hashlib.sha1(f"{seed}:{passage_id}".encode()).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF < share


def load_examples(config: Any) -> tuple[list, list]:
    """(train, held-out) VerifierExamples, split by passage."""
    from memory_runtime.jsonl import read_models
    from memory_runtime.records import VerifierExample

    examples = [e for f in example_files(config) for e in read_models(f, VerifierExample, "a verifier example")]
    if not examples:
        raise ValueError("data.path: no verifier examples")
    share, seed = config.verifier.held_out, config.optim.seed
    held = [e for e in examples if is_held_out(e.passage_id, share, seed)]
    train = [e for e in examples if not is_held_out(e.passage_id, share, seed)]
    if not train or not held or len({e.holds for e in train}) < 2:
        raise ValueError(
            f"data.path: {len(train)} training and {len(held)} held-out verifier examples: need both, and both labels"
        )
    return train, held


def tokenised(examples: Sequence, tokenizer: Any, max_length: int) -> Any:
    from datasets import Dataset

    from memory_runtime.generation.verifier import encode

    ids = [encode(tokenizer, e.text, e.triplet, max_length) for e in examples]
    return Dataset.from_dict(
        {
            "input_ids": ids,
            "attention_mask": [[1] * len(i) for i in ids],
            "labels": [[float(e.holds)] for e in examples],
        }
    )


def choose_threshold(examples: Sequence, scores: Sequence[float]) -> dict[str, Any]:
    """The held-out figures: AUC per origin, and the F1-best threshold over the writer's proposals (all
    held-out examples where the writer proposed too few)."""
    from memory_runtime.stats import best_f1_threshold, roc_auc

    pairs = list(zip(scores, (e.holds for e in examples)))
    writer = [(s, e.holds) for s, e in zip(scores, examples) if e.origin == "writer"]
    chosen_on = writer if sum(h for _, h in writer) >= 5 and len(writer) - sum(h for _, h in writer) >= 5 else pairs
    threshold, f1 = best_f1_threshold(chosen_on)
    figures: dict[str, Any] = {
        "threshold": round(threshold, 4),
        "threshold_f1": round(f1, 4),
        "threshold_chosen_on": "writer" if chosen_on is writer else "all",
    }
    for origin in ("all", "gold", "swap", "writer"):
        group = [(s, e.holds) for s, e in zip(scores, examples) if origin in ("all", e.origin)]
        auc = roc_auc([s for s, h in group if h], [s for s, h in group if not h])
        figures[f"auc_{origin}"] = None if auc is None else round(auc, 4)
        figures[f"held_out_{origin}"] = len(group)
    return figures


def build_classifier(config: Any, tokenizer: Any) -> Any:
    """The base as a one-logit sequence classifier (binary cross-entropy on float labels), LoRA on it; the
    head (`score`) trained whole and saved with the adapter (PEFT's SEQ_CLS task)."""
    from peft import get_peft_model
    from transformers import AutoModelForSequenceClassification

    from memory_runtime.generation.verifier import pad_id, quiet_transformers
    from memory_runtime.models.loading import resolve_base
    from training.run import build_peft_config, model_dtype

    with quiet_transformers():  # its load report says the head is new: it is, and trained here
        model = AutoModelForSequenceClassification.from_pretrained(
            resolve_base(config.model.name),
            num_labels=1,
            problem_type="multi_label_classification",
            dtype=model_dtype(config).torch_dtype,
            local_files_only=config.model.local_files_only,
        )
    model.config.pad_token_id = pad_id(tokenizer)
    return get_peft_model(model, build_peft_config(config, task_type="SEQ_CLS"))


def held_out_scores(trainer: Any, dataset: Any) -> list[float]:
    import torch

    logits = trainer.predict(dataset).predictions
    return torch.sigmoid(torch.as_tensor(logits, dtype=torch.float32)[:, 0]).tolist()


def train_verifier(
    config: Any, *, datasets: dict[str, Any] | None = None, callbacks: Sequence[Any] = (), log=None
) -> Any:
    """Train objective verifier: the run's outputs as any objective's (adapter with its head, tokenizer,
    train_config.yaml, metrics.json with the held-out figures, train_log.jsonl, checkpoints), plus
    verifier.json (memory_runtime.generation.verifier.VerifierCard). ``datasets`` is not taken: the threshold
    needs the held-out examples themselves."""
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    from memory_runtime.generation.verifier import VerifierCard
    from memory_runtime.memory.memory_config import MemoryConfig
    from training.run import _stderr, plan_resume, start_run, training_arguments

    if datasets is not None:
        raise ValueError("objective verifier reads its examples from data.path (the threshold needs them)")
    run = start_run(config, check_all=True, log=log or _stderr)
    config, log = run.config, run.log
    tokenizer = run.load_tokenizer()
    train, held = load_examples(config)
    train_ds = tokenised(train, tokenizer, config.data.max_length)
    held_ds = tokenised(held, tokenizer, config.data.max_length)
    run.resume = plan_resume(config, log)
    run.save_config()
    holds = sum(e.holds for e in train)
    log(
        f"verifier: {len(train)} training examples ({holds} hold, {len(train) - holds} do not) from "
        f"{len({e.passage_id for e in train})} passages; {len(held)} held out from {len({e.passage_id for e in held})}"
    )
    stats = run.data_stats(
        train_ds, held_ds, lambda ds: {"examples": len(ds), "holds": int(sum(x[0] for x in ds["labels"]))}
    )
    args = TrainingArguments(
        **training_arguments(config, TrainingArguments.__dataclass_fields__, has_eval=True),
        remove_unused_columns=False,
    )
    model = build_classifier(config, tokenizer)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        eval_dataset=held_ds,
        data_collator=DataCollatorWithPadding(tokenizer, padding=True),
        processing_class=tokenizer,
        callbacks=run.callbacks(callbacks),
    )
    result = run.train(trainer)
    figures = choose_threshold(held, held_out_scores(trainer, held_ds))
    log(
        f"held out: AUC {figures['auc_all']} (writer's proposals {figures['auc_writer']} over "
        f"{figures['held_out_writer']}); "
        f"threshold {figures['threshold']} (F1 {figures['threshold_f1']} on {figures['threshold_chosen_on']})"
    )
    out = run.finish(trainer, result, has_eval=True, stats=stats, extra={"verifier": figures})
    relations = [spec.name for spec in MemoryConfig.of_model(out.output_dir).relations]
    VerifierCard(config.model.name, relations, figures["threshold"], str(config.data.path)).save(out.output_dir)
    return out
