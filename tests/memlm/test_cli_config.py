"""`memlm config list | copy` and `--config NAME`: a shipped config is named without a path from any
directory, and one copied out runs where it lands; each refusal is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from data_gen.data_config import DataConfig
from eval.eval_config import EvalConfig
from learning_loop.sampling import SampleConfig
from learning_loop.self_instruct import SelfInstructConfig
from memlm.cli import app
from memlm.cli.common import find_config
from memory_runtime.serving.chat import ChatConfig
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.shipped import config_names, shipped
from training.train_config import TrainConfig

runner = CliRunner()
CONFIG_CLASSES = {
    "data": DataConfig,
    "sample": SampleConfig,
    "train": TrainConfig,
    "eval": EvalConfig,
    "serve": ServeConfig,
    "chat": ChatConfig,
    "self_instruct": SelfInstructConfig,
}


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
    assert "- path: shipped:data/real_train/knowledgenet_person_org_train.jsonl\n" in text
    assert "data_config: shipped:configs/data/default.yaml   # the replies" in text  # comments kept
    assert str(shipped()) not in text  # no path into this install
    shipped_text = shipped("configs", "sample", "default.yaml").read_text()
    assert len(text.splitlines()) == len(shipped_text.splitlines())
    assert SampleConfig.load(target) == SampleConfig.load(shipped("configs", "sample", "default.yaml"))
    assert "../../data/real_train/knowledgenet_person_org_train.jsonl -> shipped:data/real_train/" in copied.output


def test_a_copied_data_config_keeps_its_base(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["config", "copy", "tiny"]).exit_code == 0
    assert yaml.safe_load((tmp_path / "tiny.yaml").read_text())["base"] == "shipped:configs/data/default.yaml"
    assert DataConfig.load(tmp_path / "tiny.yaml") == DataConfig.load(shipped("configs", "data", "tiny.yaml"))


@pytest.mark.parametrize("name", config_names())
def test_every_shipped_config_copied_out_loads_as_the_shipped_one(name, tmp_path):
    """A copy names no path into the install, and reads back as the config it was copied from."""
    from memlm.cli.config import shipped_names
    from memory_runtime.shipped import find_config as shipped_config

    source = shipped_config(name)
    text, _ = shipped_names(source.read_text(encoding="utf-8"), source.parent)
    assert str(shipped()) not in text and str(shipped("configs")) not in text and str(shipped("data")) not in text
    cls = CONFIG_CLASSES.get(name.split("/")[0])
    if cls is None or source.suffix != ".yaml":  # deepspeed presets (JSON), schemas (not a config class)
        return
    (tmp_path / source.name).write_text(text, encoding="utf-8")
    given = ["generation.model=run1"] if name.startswith(("eval/", "serve/", "chat/")) else []  # required there
    assert cls.load(tmp_path / source.name, given) == cls.load(source, given)


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
