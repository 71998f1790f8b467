"""`memlm config list | copy` and `--config NAME`: a shipped config is named without a path from any
directory, and one copied out runs where it lands; each refusal is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from data_gen.config import DataConfig
from learning_loop.sampling import SampleConfig
from memlm.cli import app
from memlm.cli.common import find_config
from memory_runtime.shipped import config_names, shipped

runner = CliRunner()


def test_list_prints_every_shipped_config_by_name():
    listed = runner.invoke(app, ["config", "list"])
    assert listed.exit_code == 0
    assert listed.stdout.splitlines() == config_names()


@pytest.mark.parametrize("given", ["configs/train/cpu-smollm2.yaml", "train/cpu-smollm2", "cpu-smollm2"])
def test_a_config_is_named_from_any_directory(given, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config(Path(given)) == shipped("configs", "train", "cpu-smollm2.yaml")
    (tmp_path / "configs" / "train").mkdir(parents=True)
    (tmp_path / "configs" / "train" / "cpu-smollm2.yaml").write_text("optim: {}\n")
    assert find_config(Path("configs/train/cpu-smollm2.yaml")) == Path("configs/train/cpu-smollm2.yaml")  # yours first


def test_copy_writes_a_config_that_runs_where_it_lands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    copied = runner.invoke(app, ["config", "copy", "sample/default", "mine/sampling.yaml"])
    assert copied.exit_code == 0, copied.output
    target = tmp_path / "mine" / "sampling.yaml"
    text = target.read_text()
    assert f"- path: {shipped('data', 'real_train', 'knowledgenet_person_org_train.jsonl')}\n" in text
    assert f"data_config: {shipped('configs', 'data', 'default.yaml')}   # the replies" in text  # comments kept
    shipped_text = shipped("configs", "sample", "default.yaml").read_text()
    assert len(text.splitlines()) == len(shipped_text.splitlines())
    assert SampleConfig.load(target) == SampleConfig.load(shipped("configs", "sample", "default.yaml"))
    assert "../../data/real_train/knowledgenet_person_org_train.jsonl ->" in copied.output


def test_a_copied_data_config_keeps_its_base(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["config", "copy", "tiny"]).exit_code == 0
    assert yaml.safe_load((tmp_path / "tiny.yaml").read_text())["base"] == str(
        shipped("configs", "data", "default.yaml")
    )
    assert DataConfig.load(tmp_path / "tiny.yaml") == DataConfig.load(shipped("configs", "data", "tiny.yaml"))


def test_copy_into_a_directory_keeps_the_file_name(tmp_path):
    assert runner.invoke(app, ["config", "copy", "train/cpu-smollm2", str(tmp_path)]).exit_code == 0
    assert (tmp_path / "cpu-smollm2.yaml").read_text() == shipped("configs", "train", "cpu-smollm2.yaml").read_text()


def test_copy_refusals_are_one_line_each(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def refused(*args):
        result = runner.invoke(app, ["config", "copy", *args])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        return result.output

    assert "no shipped config has that name" in refused("nope")
    assert "several shipped configs are called that" in refused("default")
    (tmp_path / "tiny.yaml").write_text("")
    assert "tiny.yaml exists: --overwrite replaces it" in refused("data/tiny")
    assert runner.invoke(app, ["config", "copy", "data/tiny", "--overwrite"]).exit_code == 0


def test_a_bare_name_several_configs_have_is_the_one_of_the_commands_kind(tmp_path, monkeypatch):
    """`generate --config people-places-things` reads configs/data/, `schema check people-places-things`
    configs/schema/; where no kind decides (`config copy default`), the name is refused with the choices."""
    from memory_runtime.shipped import find_config

    monkeypatch.chdir(tmp_path)
    assert find_config("default", "data") == shipped("configs", "data", "default.yaml")
    assert find_config("people-places-things", "schema") == shipped("configs", "schema", "people-places-things.yaml")
    with pytest.raises(ValueError, match="name one of them"):
        find_config("people-places-things")
    result = runner.invoke(app, ["schema", "check", "people-places-things", "--records", "3"])
    assert result.exit_code == 0 and "schema people-places-things" in result.output, result.output


def test_version_and_short_help():
    from importlib.metadata import version

    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"memlm {version('memlm')}"
    for args in (["-h"], ["generate", "-h"], ["memory", "query", "-h"]):
        helped = runner.invoke(app, args)
        assert helped.exit_code == 0 and "Usage:" in helped.output and "[OPTIONS]" in helped.output, args
