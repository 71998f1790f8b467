"""Objective verifier's own settings (training/objectives/verifier.py trains it), beside the TrainConfig that holds
them: a module of its own so that the config does not import the trainer."""

from __future__ import annotations

from pydantic import Field

from memory_runtime.yaml_config import Strict


class VerifierSettings(Strict):
    """objective verifier: how its data is split (the rest is the run's model, lora and optim sections)."""

    held_out: float = Field(
        0.2, gt=0, lt=1, description="share of passages held out: the validation split, where the threshold is chosen"
    )
