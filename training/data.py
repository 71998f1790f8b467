"""Records -> tokenised datasets for the trainer.

SFT: the source is a ``datasets.DatasetDict`` saved by data_gen (``save_to_disk``; splits train /
validation / test and "episodes"), whose rows carry the fields of
:class:`memory_runtime.records.Record`, or a small set from data_gen's tiny config (``data.synthetic``).  Each row
is validated as a Record and tokenised with :func:`training.tokenize.tokenize_record`; the
result has the two columns the TRL trainer uses as is: ``input_ids`` and ``labels``.

DPO and KTO (objective dpo | kto): the source is JSONL of :class:`memory_runtime.records.PreferencePair`
(DPO) or :class:`memory_runtime.records.LabelledTurn` (KTO): a ``memlm sample`` directory's
``pairs.jsonl`` / ``turns.jsonl`` or a file (``data.path``), plus ``data.extra_jsonl``. Each run is a
Record tokenised by :func:`tokenize_record` like an SFT record, then cut at its first trained token: the
tokens before it are the prompt (the same for a pair's two runs), the rest the completion, with a
per-token mask from the labels, so the read results the controller inserted stay in the completion and
out of the loss (:func:`split_completion`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from memory_runtime.records import LabelledTurn, PreferencePair, Record, prompt_segments
from training.tokenize import IGNORE_INDEX, RecordError, RecordTooLong, tokenize_record
from training.train_config import TrainConfig

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


def refuse_pending(path: str | Path, field: str = "data.extra_jsonl") -> None:
    """Feedback trains only once a person has accepted it (memlm feedback accept)."""
    from memory_runtime.serving.feedback import PENDING

    if Path(path).expanduser().parent.name == PENDING:
        raise ValueError(
            f"{field}: {path} is feedback waiting for review: accept it first "
            "(memlm feedback list / accept --dir DIR), then train on DIR/accepted.jsonl"
        )


def load_extra_records(paths: list[str]) -> list[dict[str, Any]]:
    """Rows of data.extra_jsonl files (one Record per line), validated; errors name file and line, a
    torn last line (an interrupted append) is skipped with a warning."""
    from memory_runtime.jsonl import read_models

    rows = []
    for path in paths:
        refuse_pending(path)
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


# --------------------------------------------------------------------------- preference data (dpo, kto)

PAIRS_FILENAME = "pairs.jsonl"  # what `memlm sample` writes for DPO
TURNS_FILENAME = "turns.jsonl"  # ... and for KTO
_FORMATS = {"dpo": (PreferencePair, PAIRS_FILENAME), "kto": (LabelledTurn, TURNS_FILENAME)}


def preference_files(config: TrainConfig) -> list[Path]:
    """The JSONL files objective dpo/kto reads: data.path (a `memlm sample` directory, whose pairs.jsonl
    DPO reads and turns.jsonl KTO; or a JSONL file), then data.extra_jsonl."""
    data, objective = config.data, config.objective
    _, filename = _FORMATS[objective]
    files: list[Path] = []
    if data.path is not None:
        path = Path(data.path).expanduser()
        if path.is_dir():
            if not (path / filename).is_file():
                other = "kto" if objective == "dpo" else "dpo"
                held = _FORMATS[other][1]
                hint = f" (it holds {held}: objective={other} reads that)" if (path / held).is_file() else ""
                raise ValueError(f"data.path: {path} has no {filename}, which objective {objective} reads{hint}")
            path = path / filename
        elif not path.is_file():
            raise ValueError(f"data.path: {path} does not exist")
        refuse_pending(path, "data.path")
        files.append(path)
    for extra in data.extra_jsonl:
        refuse_pending(extra)
        files.append(Path(extra).expanduser())
    return files


def _format_of(line: str) -> str | None:
    """The objective whose format a JSON line has (None: neither)."""
    import json

    try:
        keys = set(json.loads(line))
    except (ValueError, TypeError):
        return None
    if {"chosen", "rejected"} <= keys:
        return "dpo"
    if {"record", "desirable"} <= keys:
        return "kto"
    return None


def read_preference_items(config: TrainConfig) -> list[PreferencePair] | list[LabelledTurn]:
    """Every PreferencePair (objective dpo) or LabelledTurn (kto) of the configured files, validated; a
    line that does not parse, an empty model turn, chosen equal to rejected, or the other objective's
    format is a ValueError naming the file and line."""
    from memory_runtime.jsonl import read_jsonl, read_models

    objective = config.objective
    model = _FORMATS[objective][0]
    name = model.__name__
    items: list[Any] = []
    files = preference_files(config)
    for path in files:
        try:
            first = next(read_jsonl(path), None)  # the first line tells a file of the other objective
            found = _format_of(first[1]) if first is not None else None
            if found not in (None, objective):
                raise ValueError(
                    f"{path}:{first[0]}: a {_FORMATS[found][0].__name__} ({found.upper()}'s format), but objective "
                    f"{objective} reads {name} lines: set objective={found} for this file"
                )
            items += read_models(path, model, f"a {name} ({objective.upper()}'s format)")
        except OSError as err:
            raise ValueError(f"data: cannot read {path}: {err}") from None
    if not items:
        raise ValueError(f"data: no {name} in {', '.join(map(str, files))}")
    return items


def split_completion(encoded: dict[str, Any]) -> tuple[list[int], list[int], list[int]]:
    """A tokenised run (tokenize_record) cut where the model starts: (prompt ids: every token before the
    first trained one; completion ids: the rest; completion mask: 1 on trained tokens, 0 on what the model
    did not generate: the read results the controller inserted, the template after the end of turn)."""
    labels = encoded["labels"]
    first = next(i for i, label in enumerate(labels) if label != IGNORE_INDEX)  # tokenize_record saw one
    return (
        encoded["input_ids"][:first],
        encoded["input_ids"][first:],
        [int(label != IGNORE_INDEX) for label in labels[first:]],
    )


def tokenize_pair(
    pair: PreferencePair,
    tokenizer: Any,
    *,
    system_prompt: str | None,
    max_length: int | None = None,
    truncate: bool = False,
) -> dict[str, list[int]]:
    """A PreferencePair as DPO's columns: ``prompt_ids`` (shared), ``chosen_ids``/``chosen_mask``,
    ``rejected_ids``/``rejected_mask`` (masks per completion token, 1 = trained). Each run is tokenised by
    tokenize_record exactly as an SFT record; RecordError (RecordTooLong) as it raises them."""
    sides = {}
    for side in ("chosen", "rejected"):
        encoded = tokenize_record(
            getattr(pair, side), tokenizer, system_prompt=system_prompt, max_length=max_length, truncate=truncate
        )
        sides[side] = split_completion(encoded)
    if sides["chosen"][0] != sides["rejected"][0]:
        raise RecordError(f"pair {pair.id}: chosen and rejected tokenise to different prompts")
    prompt = sides["chosen"][0]
    return {
        "prompt_ids": prompt,
        "chosen_ids": sides["chosen"][1],
        "chosen_mask": sides["chosen"][2],
        "rejected_ids": sides["rejected"][1],
        "rejected_mask": sides["rejected"][2],
    }


def tokenize_labelled_turn(
    turn: LabelledTurn,
    tokenizer: Any,
    *,
    system_prompt: str | None,
    max_length: int | None = None,
    truncate: bool = False,
) -> dict[str, Any]:
    """A LabelledTurn as KTO's columns: ``prompt_ids``, ``completion_ids``, ``completion_mask`` (per
    completion token, 1 = trained) and ``label`` (desirable)."""
    encoded = tokenize_record(
        turn.record, tokenizer, system_prompt=system_prompt, max_length=max_length, truncate=truncate
    )
    prompt, completion, mask = split_completion(encoded)
    return {"prompt_ids": prompt, "completion_ids": completion, "completion_mask": mask, "label": turn.desirable}


def tokenize_preference_item(item: PreferencePair | LabelledTurn, tokenizer: Any, config: TrainConfig, **kw: Any):
    """tokenize_pair or tokenize_labelled_turn, with the config's system prompt."""
    tokenize = tokenize_pair if isinstance(item, PreferencePair) else tokenize_labelled_turn
    return tokenize(item, tokenizer, system_prompt=config.data.system_prompt, **kw)


def _prompt_key(item: PreferencePair | LabelledTurn) -> str:
    record = item.chosen if isinstance(item, PreferencePair) else item.record
    return "\x00".join(f"{s.role}:{s.text}" for s in prompt_segments(record))


def split_preference_items(items: list[Any], config: TrainConfig) -> tuple[list[Any], list[Any]]:
    """(train, held out): preference.eval_share of the prompts, drawn with optim.seed, held out with all
    their pairs/turns (a prompt's runs never sit on both sides); each side in a seeded random order (KTO
    reads its turns in order, so desirable and undesirable ones mix in a batch)."""
    import random

    rng = random.Random(config.optim.seed)
    prompts = sorted({_prompt_key(item) for item in items})
    rng.shuffle(prompts)
    held = set(prompts[: int(len(prompts) * config.preference.eval_share)])
    train = [item for item in items if _prompt_key(item) not in held]
    evaluation = [item for item in items if _prompt_key(item) in held]
    rng.shuffle(train)
    rng.shuffle(evaluation)
    data = config.data
    if data.max_train_records is not None:
        train = train[: data.max_train_records]
    if data.max_eval_records is not None:
        evaluation = evaluation[: data.max_eval_records]
    return train, evaluation


def tokenize_preference_items(items: list[Any], tokenizer: Any, config: TrainConfig, *, name: str) -> Any:
    """A Dataset of DPO's or KTO's columns; runs longer than data.max_length dropped (a pair with either),
    truncated or refused (data.overlong), any other RecordError raised with the split's name."""
    from datasets import Dataset

    data = config.data
    rows, dropped = [], 0
    for item in items:
        try:
            rows.append(
                tokenize_preference_item(
                    item, tokenizer, config, max_length=data.max_length, truncate=data.overlong == "truncate"
                )
            )
        except RecordTooLong as err:
            if data.overlong != "drop":
                raise RecordError(f"{name} split: {err}") from None
            dropped += 1
        except RecordError as err:
            raise RecordError(f"{name} split: {err}") from None
    what = "pairs" if config.objective == "dpo" else "turns"
    if dropped:
        limit = data.max_length
        logger.warning(
            "%s split: dropped %d of %d %s longer than data.max_length=%d", name, dropped, len(items), what, limit
        )
    if not rows:
        raise ValueError(
            f"{name} split: no {what} left to train on (all longer than data.max_length={data.max_length})"
        )
    return Dataset.from_list(rows)


def build_preference_datasets(config: TrainConfig, tokenizer: Any) -> dict[str, Any]:
    """Read, split and tokenise the configured preference data: {"train": Dataset, "validation": Dataset | None}."""
    train, evaluation = split_preference_items(read_preference_items(config), config)
    if not train:
        raise ValueError("preference.eval_share: every prompt was held out; lower it")
    return {
        "train": tokenize_preference_items(train, tokenizer, config, name="train"),
        "validation": tokenize_preference_items(evaluation, tokenizer, config, name="validation")
        if evaluation
        else None,
    }


def preference_token_stats(dataset: Any) -> dict[str, int]:
    """Totals of a tokenised preference split: pairs (or turns, desirable ones), tokens of every sequence
    the model reads (prompt + completion, each side of a pair), trained tokens, the longest sequence."""
    columns = dataset.column_names
    sides = ["chosen", "rejected"] if "chosen_ids" in columns else ["completion"]
    total = trained = longest = 0
    for row in dataset:
        for side in sides:
            length = len(row["prompt_ids"]) + len(row[f"{side}_ids"])
            total += length
            trained += sum(row[f"{side}_mask"])
            longest = max(longest, length)
    stats = {"pairs" if len(sides) == 2 else "turns": len(dataset)}
    if "label" in columns:
        stats["desirable"] = sum(bool(x) for x in dataset["label"])
    return {**stats, "tokens": total, "trained_tokens": trained, "max_length": longest}


def inspect_preference_items(config: TrainConfig, n: int) -> tuple[Any, list[tuple[Any, dict | RecordError]]]:
    """`memlm inspect` for objective dpo/kto: the tokenizer and the first `n` pairs or turns of the data (in
    file order), each with its columns as training sees them or the RecordError that would drop it."""
    from memory_runtime.models.loading import load_tokenizer

    items = read_preference_items(config)[:n]
    tokenizer = load_tokenizer(config.model.name, local_files_only=config.model.local_files_only)
    out: list[tuple[Any, dict | RecordError]] = []
    for item in items:
        try:
            out.append((item, tokenize_preference_item(item, tokenizer, config)))
        except RecordError as err:
            out.append((item, err))
    return tokenizer, out
