"""A wall-clock budget for training (``optim.max_minutes``): the run fits the time, whatever the machine.

A fixed step count that takes 13 minutes on one 2-core CPU takes hours on another (bfloat16
emulated, a slower core, a busy neighbour). With a budget, the trainer times the first steps,
works out how many of the configured ``optim.max_steps`` fit, and shortens the learning-rate
schedule to that many, so the run still warms up and anneals to the end of its (shorter)
schedule instead of being cut off at a high learning rate. The estimate is checked again at a
quarter, half and three quarters of the budget; if time still runs out, training stops there and
saves. The budget never adds steps beyond ``optim.max_steps``.

The budget covers the training loop (steps, periodic evaluations and checkpoints); loading the
model, tokenising and the final evaluation and save come on top. Each checkpoint records the
planned steps and the time spent (``budget.json``), so a resumed run keeps its schedule.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

BUDGET_FILENAME = "budget.json"
CALIBRATION_STEPS = 8  # timed steps (after the first, which pays for warm-up) before the first plan
REPLAN_AT = (0.25, 0.5, 0.75)  # fractions of the budget at which the plan is checked again


def now() -> float:
    """The budget's clock (a function of its own, so tests can replace it)."""
    return time.monotonic()


def reschedule(scheduler: Any, optimizer: Any, args: Any, total_steps: int) -> None:
    """Make a running LambdaLR schedule (every schedule transformers builds) one of `total_steps`
    steps: its lambdas are replaced by those of a fresh schedule of that length, the step count
    and base learning rates are kept, and the optimizer's learning rates follow at once."""
    import torch
    from transformers import get_scheduler

    inner = getattr(scheduler, "scheduler", scheduler)  # accelerate's AcceleratedScheduler wraps it
    if not hasattr(inner, "lr_lambdas"):
        raise ValueError(f"optim.max_minutes cannot shorten a {type(inner).__name__} schedule")
    dummy = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)]} for _ in inner.lr_lambdas], lr=1.0)
    fresh = get_scheduler(
        args.lr_scheduler_type,
        dummy,
        num_warmup_steps=args.get_warmup_steps(total_steps),
        num_training_steps=total_steps,
        scheduler_specific_kwargs=args.lr_scheduler_kwargs,
    )
    inner.lr_lambdas = fresh.lr_lambdas
    step = inner.last_epoch
    lrs = [base * fn(step) for base, fn in zip(inner.base_lrs, inner.lr_lambdas)]
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    inner._last_lr = lrs


class TimeBudget(TrainerCallback):
    """Fits training into `minutes` (see the module docstring); `outcome()` says what was reached."""

    def __init__(
        self,
        minutes: float,
        log: Callable[[str], None],
        *,
        requested_steps: int | None = None,
        spent_s: float = 0.0,
        planned_steps: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.budget_s = minutes * 60
        self.requested_steps = requested_steps
        self.log = log
        self.clock = clock or now
        self.spent_before = spent_s  # training time of earlier processes (resumed runs)
        self.planned_steps = planned_steps
        self.stopped_early = False
        self.step_s: float | None = None
        self._start = self._calib_time = 0.0
        self._calib_step = 0
        self._checks_done = 0

    def spent_s(self) -> float:
        return self.spent_before + self.clock() - self._start

    def on_train_begin(self, args, state, control, lr_scheduler=None, optimizer=None, **kwargs):
        self._start = self.clock()
        self._calib_step = state.global_step + 1
        self.requested_steps = self.requested_steps or state.max_steps  # optim.max_steps, or what the epochs make
        self.planned_steps = self.planned_steps or self.requested_steps
        if self.planned_steps < state.max_steps:  # resumed: the checkpoint's schedule, not the config's
            reschedule(lr_scheduler, optimizer, args, self.planned_steps)
            state.max_steps = self.planned_steps
            self.log(f"time budget: keeping the checkpoint's schedule of {self.planned_steps} steps")
        self.log(
            f"time budget: {self.budget_s / 60:g} min of training ({self.spent_before / 60:.1f} spent before); "
            f"up to {self.requested_steps} steps, the schedule shortened to what fits after "
            f"{CALIBRATION_STEPS} timed steps"
        )

    def on_step_end(self, args, state, control, lr_scheduler=None, optimizer=None, **kwargs):
        now, spent = self.clock(), self.spent_s()
        if state.global_step == self._calib_step:  # the first step paid for warm-up: time from here
            self._calib_time = now
            return control
        measured = state.global_step - self._calib_step
        if measured > 0:
            self.step_s = (now - self._calib_time) / measured
        if spent >= self.budget_s and state.global_step < state.max_steps:
            self.stopped_early = True
            self.planned_steps = state.global_step
            control.should_training_stop = True
            control.should_save = args.save_strategy != "no"
            self.log(
                f"time budget spent ({spent / 60:.1f} min) at step {state.global_step} of {state.max_steps}: "
                "stopping and saving (the schedule had not finished)"
            )
            return control
        due = measured >= CALIBRATION_STEPS and (
            self._checks_done == 0
            or (self._checks_done <= len(REPLAN_AT) and spent >= REPLAN_AT[self._checks_done - 1] * self.budget_s)
        )
        if due and lr_scheduler is not None and optimizer is not None:
            self._checks_done += 1
            self._plan(args, state, lr_scheduler, optimizer, spent)
        return control

    def _plan(self, args, state, lr_scheduler, optimizer, spent: float) -> None:
        fit = state.global_step + int((self.budget_s - spent) / self.step_s)
        planned = max(state.global_step + 1, min(self.requested_steps, fit))
        if planned == state.max_steps:
            return
        reschedule(lr_scheduler, optimizer, args, planned)
        self.log(
            f"time budget: {self.step_s:.2f} s/step here, {planned} of {self.requested_steps} steps fit in "
            f"{self.budget_s / 60:g} min; learning-rate schedule set to {planned} steps (was {state.max_steps})"
        )
        state.max_steps = self.planned_steps = planned

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir() and state.is_world_process_zero:
            (checkpoint / BUDGET_FILENAME).write_text(
                json.dumps(
                    {"planned_steps": self.planned_steps, "spent_s": self.spent_s(), "max_minutes": self.budget_s / 60}
                )
            )
        return control

    def outcome(self, global_step: int) -> dict[str, Any]:
        """What the budget bought: recorded in metrics.json and said in the log."""
        return {
            "max_minutes": self.budget_s / 60,
            "requested_steps": self.requested_steps,
            "planned_steps": self.planned_steps,
            "reached_steps": global_step,
            "spent_minutes": round(self.spent_s() / 60, 2),
            "step_s": self.step_s,
            "stopped_early": self.stopped_early,
        }


def read_checkpoint_budget(checkpoint: str | Path) -> dict[str, Any] | None:
    """The budget state a checkpoint recorded (None: the run had no budget)."""
    path = Path(checkpoint) / BUDGET_FILENAME
    if not path.is_file():
        return None
    return json.loads(path.read_text())
