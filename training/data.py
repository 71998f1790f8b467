"""Records -> tokenised datasets for the trainer.

The source is a ``datasets.DatasetDict`` saved by data_gen (``save_to_disk``; splits train /
validation / test and "episodes"), whose rows carry the fields of
:class:`memory_runtime.records.Record`, or a small set from data_gen's tiny config (``data.synthetic``).  Each row
is validated as a Record and tokenised with :func:`training.tokenize.tokenize_record`; the
result has the two columns the TRL trainer uses as is: ``input_ids`` and ``labels``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memory_runtime.records import Record
from training.config import TrainConfig
from training.tokenize import RecordError, RecordTooLong, tokenize_record

logger = logging.getLogger(__name__)

_RECORD_FIELDS = tuple(Record.model_fields)


def load_record_splits(config: TrainConfig) -> dict[str, Any]:
    """``{"train": Dataset, "validation": Dataset | None}`` of raw record rows, as configured."""
    data = config.data
    config.require_data()
    if data.path is None and data.synthetic is None:  # only extra JSONL records: no eval split
        from datasets import Dataset

        return {"train": Dataset.from_list(load_extra_records(data.extra_jsonl)), "validation": None}
    if data.synthetic is not None:
        from data_gen.generate import tiny_dataset_dict

        dd = tiny_dataset_dict(data.synthetic.train, data.synthetic.validation, seed=data.synthetic.seed)
    else:
        from datasets import DatasetDict, load_from_disk

        try:
            dd = load_from_disk(str(data.path))
        except (FileNotFoundError, ValueError) as err:
            raise ValueError(
                f"data.path: cannot load a dataset saved with save_to_disk from {data.path}: {err}"
            ) from None
        if not isinstance(dd, DatasetDict):
            raise ValueError(f"data.path: {data.path} holds one Dataset, expected a DatasetDict with splits")
    splits = list(dd.keys())
    if data.train_split not in dd:
        raise ValueError(
            f"data.train_split: no split {data.train_split!r} in {data.path or 'synthetic data'} (has {splits})"
        )
    train = dd[data.train_split]
    evaluation = None
    if data.eval_split is not None:
        if data.eval_split in dd:
            evaluation = dd[data.eval_split]
        elif config.output.eval_strategy != "no" or config.output.final_eval:
            logger.warning("no %r split in the data (has %s): no eval loss", data.eval_split, splits)
    # limits take a seeded random subset (data_gen's splits are ordered by memory groups)
    seed = config.optim.seed
    if data.max_train_records is not None and data.max_train_records < len(train):
        train = train.shuffle(seed=seed, keep_in_memory=True).select(range(data.max_train_records))
    if evaluation is not None and data.max_eval_records is not None and data.max_eval_records < len(evaluation):
        evaluation = evaluation.shuffle(seed=seed, keep_in_memory=True).select(range(data.max_eval_records))
    missing = [f for f in ("id", "segments") if f not in train.column_names]
    if missing:
        raise ValueError(f"data: the {data.train_split!r} split has no {missing} column(s): not data_gen records")
    if data.extra_jsonl:  # added after the subset: extra records are few and always wanted
        from datasets import Dataset, concatenate_datasets

        rows = [{k: row.get(k) for k in train.column_names} for row in load_extra_records(data.extra_jsonl)]
        if rows:
            train = concatenate_datasets([train, Dataset.from_list(rows, features=train.features)])
    return {"train": train, "validation": evaluation}


def load_extra_records(paths: list[str]) -> list[dict[str, Any]]:
    """Rows of data.extra_jsonl files (one Record per line), validated; errors name file and line, a
    torn last line (an interrupted append) is skipped with a warning."""
    from memory_runtime.jsonl import read_models
    from memory_runtime.serving.feedback import PENDING

    rows = []
    for path in paths:
        if Path(path).expanduser().parent.name == PENDING:
            raise ValueError(
                f"data.extra_jsonl: {path} is feedback waiting for review: accept it first "
                "(memlm feedback list / accept --dir DIR), then train on DIR/accepted.jsonl"
            )
        try:
            rows += [r.model_dump(mode="json") for r in read_models(path, Record, "a data_gen Record")]
        except (OSError, ValueError) as err:
            raise ValueError(f"data.extra_jsonl: {err}") from None
    return rows


def _row_to_record(row: dict[str, Any]) -> Record:
    fields = {k: row[k] for k in _RECORD_FIELDS if k in row}
    if fields.get("shape", "") is None:
        fields.pop("shape")
    for key in ("gold_triplets", "gold_names", "memory"):
        if fields.get(key) is None:
            fields.pop(key, None)
    return Record.model_validate(fields)


def inspect_records(config: TrainConfig, n: int) -> tuple[Any, list[tuple[Record, dict | RecordError]]]:
    """`memlm inspect`: the model's tokenizer and the first `n` records of the training split (as
    configured: data.train_split), each with its encoding as training sees it (input_ids, labels:
    -100 = not trained) or the RecordError that would drop it."""
    from memory_runtime.models.loading import load_tokenizer

    if config.data.synthetic is not None:
        config.data.synthetic.train = min(config.data.synthetic.train, n)
    rows = load_record_splits(config)["train"]
    tokenizer = load_tokenizer(config.model.name, local_files_only=config.model.local_files_only)
    out: list[tuple[Record, dict | RecordError]] = []
    for i in range(min(n, len(rows))):
        record = _row_to_record(rows[i])
        try:
            out.append((record, tokenize_record(record, tokenizer, system_prompt=config.data.system_prompt)))
        except RecordError as err:
            out.append((record, err))
    return tokenizer, out


def tokenize_split(dataset: Any, tokenizer: Any, config: TrainConfig, *, name: str = "train") -> Any:
    """Tokenise a split of record rows into a Dataset with ``input_ids`` and ``labels`` columns.

    Records longer than ``data.max_length`` are dropped, truncated or rejected
    (``data.overlong``); invalid records raise with the record id.
    """
    data = config.data
    extra = [c for c in dataset.column_names if c not in _RECORD_FIELDS]
    if extra:
        logger.info("%s split: ignoring non-Record columns %s", name, extra)

    def encode(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = {"input_ids": [], "labels": [], "keep": []}
        n = len(next(iter(batch.values())))
        for i in range(n):
            row = {k: batch[k][i] for k in batch}
            try:
                record = _row_to_record(row)
            except Exception as err:
                raise RecordError(
                    f"{name} split, record {row.get('id', i)}: not a valid data_gen Record: {err}"
                ) from None
            try:
                enc = tokenize_record(
                    record,
                    tokenizer,
                    system_prompt=data.system_prompt,
                    max_length=data.max_length,
                    truncate=data.overlong == "truncate",
                )
            except RecordError as err:
                if data.overlong == "drop" and isinstance(err, RecordTooLong):
                    out["input_ids"].append([])
                    out["labels"].append([])
                    out["keep"].append(False)
                    continue
                raise RecordError(f"{name} split: {err}") from None
            out["input_ids"].append(enc["input_ids"])
            out["labels"].append(enc["labels"])
            out["keep"].append(True)
        return out

    tokenized = dataset.map(
        encode,
        batched=True,
        batch_size=256,
        remove_columns=dataset.column_names,
        num_proc=data.num_proc,
        keep_in_memory=True,  # never write cache files into data_gen's dataset directory
        desc=f"Tokenising {name} records",
    )
    kept = tokenized.filter(lambda keep: keep, input_columns="keep", keep_in_memory=True)
    dropped = len(tokenized) - len(kept)
    if dropped:
        logger.warning(
            "%s split: dropped %d of %d records longer than data.max_length=%d",
            name,
            dropped,
            len(tokenized),
            data.max_length,
        )
    if len(kept) == 0:
        raise ValueError(
            f"{name} split: no record left to train on (all longer than data.max_length={data.max_length}?)"
        )
    return kept.remove_columns("keep")


def build_datasets(config: TrainConfig, tokenizer: Any) -> dict[str, Any]:
    """Load and tokenise the configured train / validation splits."""
    splits = load_record_splits(config)
    train = tokenize_split(splits["train"], tokenizer, config, name="train")
    validation = None
    if splits["validation"] is not None and len(splits["validation"]):
        validation = tokenize_split(splits["validation"], tokenizer, config, name="validation")
    return {"train": train, "validation": validation}


def token_stats(dataset: Any) -> dict[str, int]:
    """Totals of a tokenised split: records, tokens, trained tokens, longest record."""
    total = trained = longest = 0
    for ids, labels in zip(dataset["input_ids"], dataset["labels"]):
        total += len(ids)
        trained += sum(1 for x in labels if x != -100)
        longest = max(longest, len(ids))
    return {"records": len(dataset), "tokens": total, "trained_tokens": trained, "max_length": longest}
