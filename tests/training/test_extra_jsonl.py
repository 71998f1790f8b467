"""data.extra_jsonl: Record JSONL files (self-instruct and feedback trajectories) join the train split."""

from __future__ import annotations

import pytest

from memory_runtime.records import Record, Segment
from training.data import load_record_splits
from training.train_config import ConfigError, TrainConfig, preflight

RECORD = Record(
    id="feedback-1",
    type="feedback",
    source="feedback",
    split="train",
    segments=[
        Segment(role="user", text="No, Ada Lin works for BMW now.", train=False),
        Segment(role="assistant", text="[MEM_WRITE{Ada Lin>>employed by>>BMW}] Noted.", train=True),
    ],
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from data_gen.data_config import DataConfig
    from data_gen.generate import generate
    from tests.data_gen.conftest import TINY

    out = tmp_path_factory.mktemp("tiny-data")
    generate(DataConfig.load(TINY), out, overwrite=True, show_progress=False)
    return out


def test_extra_records_are_appended_to_the_train_split(tmp_path, data_dir):
    extra = tmp_path / "kept.jsonl"
    extra.write_text(RECORD.model_dump_json() + "\n")
    base = load_record_splits(TrainConfig.load(None, [f"data.path={data_dir}"]))["train"]
    config = TrainConfig.load(
        None, [f"data.path={data_dir}", f"data.extra_jsonl=[{extra}]", "data.max_train_records=10"]
    )
    splits = load_record_splits(config)
    assert len(splits["train"]) == 11 and len(base) == 120
    assert splits["train"][-1]["id"] == "feedback-1" and splits["train"][-1]["segments"][1]["train"] is True


def test_extra_records_alone_are_training_data(tmp_path):
    extra = tmp_path / "kept.jsonl"
    extra.write_text(RECORD.model_dump_json() + "\n\n")
    config = TrainConfig.load(None, [f"data.extra_jsonl=[{extra}]", "output.eval_strategy=no"])
    splits = load_record_splits(config)
    assert len(splits["train"]) == 1 and splits["validation"] is None


def test_bad_extra_files_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"data.extra_jsonl.0: .* is not a file"):
        preflight(
            TrainConfig.load(None, [f"data.extra_jsonl=[{tmp_path / 'missing.jsonl'}]", "output.eval_strategy=no"])
        )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a data_gen Record"):
        load_record_splits(TrainConfig.load(None, [f"data.extra_jsonl=[{bad}]", "output.eval_strategy=no"]))


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path, caplog):
    from memory_runtime.records import Record, turn_segments

    record = Record(id="f1", type="feedback", segments=turn_segments("Hi", "Hello."))
    path = tmp_path / "accepted.jsonl"
    path.write_text(record.model_dump_json() + "\n" + record.model_dump_json()[:30])  # a crash mid-append
    rows = load_record_splits(TrainConfig.load(None, [f"data.extra_jsonl=[{path}]", "output.eval_strategy=no"]))
    assert len(rows["train"]) == 1 and "torn last line" in caplog.text
