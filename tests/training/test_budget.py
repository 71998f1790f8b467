"""optim.max_minutes: the schedule is shortened to the steps that fit, a run out of time stops and
saves, and a resumed run keeps the schedule its checkpoint planned (clock faked: 1 s per step)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import TrainerCallback, get_scheduler

from tests.training.conftest import tiny_config
from training import budget as budget_module
from training.budget import BUDGET_FILENAME, reschedule
from training.objectives.sft import train_sft


class FakeClock(TrainerCallback):
    """A clock that a step advances by `seconds` (the step's cost), from its on_step_begin."""

    def __init__(self, seconds: float = 1.0, slow_after: int | None = None, slow_seconds: float = 1.0) -> None:
        self.now, self.seconds, self.slow_after, self.slow_seconds = 0.0, seconds, slow_after, slow_seconds

    def __call__(self) -> float:
        return self.now

    def on_step_begin(self, args, state, control, **kwargs):
        slow = self.slow_after is not None and state.global_step >= self.slow_after
        self.now += self.slow_seconds if slow else self.seconds


def _run(tiny_model_dir, tiny_datasets, out, clock, minutes, *overrides, monkeypatch, extra=()):
    """`memlm train` with optim.max_minutes=minutes on a clock that `clock` advances."""
    monkeypatch.setattr(budget_module, "now", clock)
    lines: list[str] = []
    cfg = tiny_config(
        tiny_model_dir,
        out,
        "optim.max_steps=100",
        "optim.lr_scheduler_type=cosine",
        "optim.warmup=0.1",
        f"optim.max_minutes={minutes}",
        *overrides,
    )
    lrs: list[float] = []

    class LearningRates(TrainerCallback):
        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            lrs.append(optimizer.param_groups[0]["lr"])

    result = train_sft(
        cfg, datasets={"train": tiny_datasets["train"]}, callbacks=[clock, LearningRates(), *extra], log=lines.append
    )
    return result, lines, lrs


def test_reschedule_gives_the_schedule_of_the_shorter_run():
    def schedule(total):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        return opt, get_scheduler("cosine", opt, num_warmup_steps=0, num_training_steps=total)

    class Args:
        lr_scheduler_type, lr_scheduler_kwargs = "cosine", {}

        def get_warmup_steps(self, total):
            return 0

    opt, long = schedule(100)
    for _ in range(10):
        opt.step()
        long.step()
    reschedule(long, opt, Args(), 30)
    ref_opt, short = schedule(30)
    for _ in range(10):
        ref_opt.step()
        short.step()
    for _ in range(20):
        assert opt.param_groups[0]["lr"] == pytest.approx(ref_opt.param_groups[0]["lr"])
        opt.step(), long.step(), ref_opt.step(), short.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-9)  # annealed at the end of the shorter run


def test_the_budget_shortens_the_schedule_to_what_fits(tiny_model_dir, tiny_datasets, tmp_path, monkeypatch):
    result, lines, lrs = _run(tiny_model_dir, tiny_datasets, tmp_path, FakeClock(1.0), 0.5, monkeypatch=monkeypatch)
    # 1 s per step, 30 s: 8 timed steps after the first, then 21 more fit -> 30 steps
    assert result.metrics["global_step"] == 30
    assert result.metrics["budget"] == {
        "max_minutes": 0.5,
        "requested_steps": 100,
        "planned_steps": 30,
        "reached_steps": 30,
        "spent_minutes": 0.5,
        "step_s": 1.0,
        "stopped_early": False,
    }
    assert lrs[-1] == pytest.approx(0.0, abs=1e-6)  # the shortened cosine ran to its end
    assert max(lrs) > 0.8e-3  # after warming up towards the configured rate
    assert any("30 of 100 steps fit" in line for line in lines)
    saved = (tmp_path / "train_config.yaml").read_text()
    assert "trained 30 of 100 steps" in saved and "optim.max_steps=30 optim.max_minutes=null" in saved


def test_a_budget_with_room_to_spare_changes_nothing(tiny_model_dir, tiny_datasets, tmp_path, monkeypatch):
    result, lines, _ = _run(
        tiny_model_dir, tiny_datasets, tmp_path, FakeClock(1.0), 10, "optim.max_steps=12", monkeypatch=monkeypatch
    )
    assert result.metrics["global_step"] == 12 and not result.metrics["budget"]["stopped_early"]
    assert not any("steps fit" in line for line in lines)


def test_a_run_that_slows_down_stops_at_the_budget_and_saves(tiny_model_dir, tiny_datasets, tmp_path, monkeypatch):
    clock = FakeClock(1.0, slow_after=12, slow_seconds=20.0)  # planned at 1 s/step, then 20x slower
    result, lines, _ = _run(
        tiny_model_dir,
        tiny_datasets,
        tmp_path,
        clock,
        0.5,
        "output.save_strategy=steps",
        "output.save_steps=1000",
        monkeypatch=monkeypatch,
    )
    step = result.metrics["global_step"]
    assert result.metrics["budget"]["stopped_early"] and step < 30
    assert any("time budget spent" in line for line in lines)
    checkpoint = tmp_path / f"checkpoint-{step}"
    assert checkpoint.is_dir()
    assert json.loads((checkpoint / BUDGET_FILENAME).read_text())["planned_steps"] == step


def test_a_resumed_run_keeps_its_planned_schedule(tiny_model_dir, tiny_datasets, tmp_path, monkeypatch):
    class Crash(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 14:
                control.should_training_stop = True

    settings = ("output.save_strategy=steps", "output.save_steps=14")
    _run(
        tiny_model_dir,
        tiny_datasets,
        tmp_path,
        FakeClock(1.0),
        0.5,
        *settings,
        monkeypatch=monkeypatch,
        extra=[Crash()],
    )
    state = json.loads((tmp_path / "checkpoint-14" / BUDGET_FILENAME).read_text())
    assert state["planned_steps"] == 30 and state["spent_s"] == 14

    # the same command again: it resumes (same config) and reads the plan back from the checkpoint
    result, lines, lrs = _run(
        tiny_model_dir, tiny_datasets, tmp_path, FakeClock(1.0), 0.5, *settings, monkeypatch=monkeypatch
    )
    assert any("resuming from" in line for line in lines)
    assert "training: 100 steps (from step 14)" in lines
    assert "time budget: keeping the checkpoint's schedule of 30 steps" in lines
    assert result.metrics["global_step"] == 30 and lrs[-1] == pytest.approx(0.0, abs=1e-6)
    assert result.metrics["budget"]["spent_minutes"] == 0.5
