import json
import os
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from data_gen.data_config import DataConfig
from data_gen.episodes import load_episodes
from memlm.cli import app
from memory_runtime.records import Record

from .conftest import REPO, TINY

runner = CliRunner()


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_cli_writes_dataset_jsonl_and_card(tiny_out, tiny_config):
    from datasets import load_from_disk

    ds = load_from_disk(str(tiny_out))
    assert set(ds) == {"train", "validation", "test", "episodes"}
    assert ds["train"].num_rows == 120 and ds["episodes"].num_rows == tiny_config.episodes.count
    row = ds["train"][0]
    assert set(row) >= {"id", "type", "shape", "segments", "gold_triplets", "gold_names", "memory"}
    assert set(row["segments"][0]) == {"role", "text", "train"}
    jsonl_first = (tiny_out / "jsonl" / "train.jsonl").read_text().splitlines()[0]
    assert Record.model_validate(row) == Record.model_validate_json(jsonl_first)  # the rows are Records

    for split in ("train", "validation", "test"):
        lines = (tiny_out / "jsonl" / f"{split}.jsonl").read_text().splitlines()
        records = [Record.model_validate_json(line) for line in lines]
        assert len(records) == getattr(tiny_config.splits, split)
        assert [r.id for r in records] == ds[split]["id"]
    assert len(load_episodes(tiny_out / "jsonl" / "episodes.jsonl")) == tiny_config.episodes.count

    card = (tiny_out / "README.md").read_text()
    assert "seed: **0**" in card
    assert "| train | 120 | 29 | 42 | 8 | 8 | 9 | 11 | 11 | 2 |" in card  # counts per type and split
    assert "| split | type | per | per_org | per_rel | org | rel | rel_org | per_rel_org |" in card
    assert "```yaml\nseed: 0\n" in card  # the config used
    assert DataConfig.from_dict(yaml.safe_load((tiny_out / "config.yaml").read_text())) == tiny_config
    world = json.loads((tiny_out / "world.json").read_text())
    assert not set(world["people"]["train"]) & set(world["people"]["test"])


def test_same_config_and_seed_give_identical_bytes(tiny_out, tmp_path):
    """A second run in another process (another hash seed) writes the very same bytes."""
    again = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "memlm", "generate", "--config", str(TINY), "--out", str(again)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "examples/s" in result.stderr
    first, second = files(tiny_out), files(again)
    assert list(first) == list(second)
    for name in first:
        assert first[name] == second[name], name


def test_seed_option_changes_the_data(tiny_out, tmp_path):
    out = tmp_path / "seed5"
    result = runner.invoke(app, ["generate", "--config", str(TINY), "--out", str(out), "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert (out / "jsonl" / "train.jsonl").read_bytes() != (tiny_out / "jsonl" / "train.jsonl").read_bytes()
    assert "seed: **5**" in (out / "README.md").read_text()


def test_bad_config_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"base: {TINY}\nmemory: {{max_fact: 4}}\n")
    result = runner.invoke(app, ["generate", "--config", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "memory.max_fact" in result.output and "unknown field" in result.output
    assert not (tmp_path / "out").exists()


def test_existing_output_is_not_overwritten_silently(tiny_out, tmp_path):
    result = runner.invoke(app, ["generate", "--config", str(TINY), "--out", str(tiny_out)])
    assert result.exit_code == 2 and "--overwrite" in result.output
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    result = runner.invoke(app, ["generate", "--config", str(TINY), "--out", str(other), "--overwrite"])
    assert result.exit_code == 2 and (other / "notes.txt").exists()


def test_every_trained_call_passes_the_runtime_copy_constraint(tiny_records):
    """The runtime keeps call subjects and objects copied from what the model saw and relations
    to the relation table or copies (memory_runtime.generation.field_copy); a record that names something
    else could never be generated."""
    from memory_runtime.generation.field_copy import allowed
    from memory_runtime.memory.memory_config import MemoryConfig
    from memory_runtime.records import messages

    relations = MemoryConfig.load().relation_names

    for record in tiny_records:
        turns = messages(record)
        for k, turn in enumerate(turns):
            if turn["role"] != "assistant":
                continue
            context = "\n".join(m["content"] for m in turns[:k])
            text = ""
            for ch in turn["content"]:  # one character at a time: the finest a token can be
                assert allowed(context, text, ch, relations), (record.id, text + ch)
                text += ch


def test_key_value_overrides_reach_the_config_and_its_record(tmp_path):
    out = tmp_path / "small"
    result = runner.invoke(
        app, ["generate", "--config", str(TINY), "--out", str(out), "splits.train=10", "episodes.count=2"]
    )
    assert result.exit_code == 0, result.output
    assert len((out / "jsonl" / "train.jsonl").read_text().splitlines()) == 10
    saved = DataConfig.load(out / "config.yaml")
    assert saved.splits.train == 10 and saved.episodes.count == 2
    bad = runner.invoke(app, ["generate", "--config", str(TINY), "--out", str(tmp_path / "bad"), "splits.trian=10"])
    assert bad.exit_code == 2 and "splits.trian" in bad.output and "unknown field" in bad.output
    assert not (tmp_path / "bad").exists()


def test_an_interrupted_run_leaves_the_earlier_output_whole(tiny_out, tmp_path, monkeypatch):
    import shutil

    from data_gen import generate as gen

    out = tmp_path / "data"
    shutil.copytree(tiny_out, out)
    before = (out / "jsonl" / "train.jsonl").read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while writing

    monkeypatch.setattr(gen, "dataset_card", crash)
    with pytest.raises(KeyboardInterrupt):
        gen.generate(DataConfig.load(TINY, ["seed=5"]), out, overwrite=True, show_progress=False)
    assert (out / "jsonl" / "train.jsonl").read_bytes() == before and (out / "README.md").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temporary folder left behind


def test_every_split_at_zero_is_a_clear_error_and_an_empty_split_is_left_out(tmp_path):
    bad = runner.invoke(
        app,
        [
            "generate",
            "--config",
            str(TINY),
            "--out",
            str(tmp_path / "none"),
            "splits.train=0",
            "splits.validation=0",
            "splits.test=0",
        ],
    )
    assert bad.exit_code == 2 and "every split is 0" in bad.output and not (tmp_path / "none").exists()
    ok = runner.invoke(
        app,
        ["generate", "--config", str(TINY), "--out", str(tmp_path / "some"), "splits.validation=0", "episodes.count=0"],
    )
    assert ok.exit_code == 0, ok.output
    import datasets

    assert set(datasets.load_from_disk(str(tmp_path / "some"))) == {"train", "test"}
