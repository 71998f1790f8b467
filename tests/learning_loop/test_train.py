"""train() (learning_loop/train.py): one table from the config's objectives to their run functions."""

from __future__ import annotations

from typing import get_args

from learning_loop import train as train_module
from learning_loop.train import OBJECTIVES, train
from training.train_config import TrainConfig


def test_every_objective_a_config_takes_has_its_run_function():
    assert sorted(OBJECTIVES) == sorted(get_args(TrainConfig.model_fields["objective"].annotation))


def test_train_runs_the_configs_objective_with_what_it_was_given(monkeypatch):
    calls = []

    def run(name):
        return lambda config, **kwargs: calls.append((name, config.objective, kwargs)) or name

    monkeypatch.setattr(train_module, "OBJECTIVES", {name: run(name) for name in OBJECTIVES})
    config = TrainConfig.load(None, ["data.synthetic.train=4"])
    log = print
    assert train(config, datasets={"train": []}, log=log) == "sft"
    assert calls == [("sft", "sft", {"datasets": {"train": []}, "callbacks": (), "log": log})]
