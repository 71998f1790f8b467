"""The real data path: a (tiny) data_gen run saved with save_to_disk, loaded and tokenised
by the training package, every record masked exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.tokenize import IGNORE_INDEX, record_chunks, tokenize_record

TINY = Path(__file__).resolve().parents[2] / "configs" / "data" / "tiny.yaml"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from data_gen.data_config import DataConfig
    from data_gen.generate import generate

    out = tmp_path_factory.mktemp("data") / "tiny"
    generate(DataConfig.load(TINY), out, show_progress=False)
    return out


def test_every_data_gen_record_is_masked_exactly(data_dir, smollm2_tokenizer):
    from training.data import _row_to_record, load_record_splits
    from training.train_config import TrainConfig

    tok = smollm2_tokenizer
    cfg = TrainConfig.load(None, [f"data.path={data_dir}"])
    splits = load_record_splits(cfg)
    types = set()
    for row in list(splits["train"]) + list(splits["validation"]):
        record = _row_to_record(row)
        types.add(record.type)
        enc = tokenize_record(record, tok)
        labelled = [t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab != IGNORE_INDEX]
        expected = "".join(c.text for c in record_chunks(record, tok) if c.train)
        assert tok.decode(labelled, skip_special_tokens=False) == expected, record.id
        trained_segments = "".join(s.text for s in record.segments if s.train)
        assert expected.replace("<|im_end|>", "") == trained_segments
    assert {"write", "read", "update", "two_hop", "negative", "unanswerable"} <= types


def test_build_datasets_from_a_data_gen_dir(data_dir, smollm2_tokenizer):
    from training.data import build_datasets, token_stats
    from training.train_config import TrainConfig

    cfg = TrainConfig.load(None, [f"data.path={data_dir}", "data.max_length=160", "data.max_train_records=50"])
    ds = build_datasets(cfg, smollm2_tokenizer)
    assert ds["train"].column_names == ["input_ids", "labels"]
    stats = token_stats(ds["train"])
    assert stats["max_length"] <= 160 and stats["records"] <= 50 and stats["trained_tokens"] > 0
    assert len(ds["validation"]) > 0
    with pytest.raises(ValueError, match="no split 'nope'"):
        build_datasets(TrainConfig.load(None, [f"data.path={data_dir}", "data.train_split=nope"]), smollm2_tokenizer)
    error = TrainConfig.load(None, [f"data.path={data_dir}", "data.max_length=64", "data.overlong=error"])
    with pytest.raises(ValueError, match="more than max_length=64"):
        build_datasets(error, smollm2_tokenizer)
