"""What a training run's directory says about the model it holds, read from the train_config.yaml saved
beside its adapter: the data it was trained on and the system prompt it learned. Eval, serving and the
learning loop ask it of any model name; for anything that is no run they get None, or the default prompt."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memory_runtime.models.embedded import is_embedded
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.yaml_config import read_mapping

TRAIN_CONFIG_FILENAME = "train_config.yaml"  # a training run's resolved config, saved beside its adapter


def _trained_data(name_or_path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``data`` section of a training run's train_config.yaml; None for any other model."""
    config = Path(name_or_path).expanduser() / TRAIN_CONFIG_FILENAME
    if is_embedded(name_or_path) or not config.is_file():
        return None
    data = read_mapping(config, "training config").get("data") or {}
    if not isinstance(data, dict):
        raise ValueError(f"invalid training config {config}: data must be a mapping, got {type(data).__name__}")
    return data


def trained_on(name_or_path: str | os.PathLike[str]) -> str | None:
    """The `memlm generate` directory a training run was trained on (``data.path`` of its train_config.yaml),
    where it is still there; None for any other model. Eval's records and episodes default to its test
    split, which training never reads."""
    path = (_trained_data(name_or_path) or {}).get("path")
    return str(path) if isinstance(path, str) and (Path(path) / "jsonl").is_dir() else None


def trained_system_prompt(name_or_path: str | os.PathLike[str]) -> str | None:
    """The system message a training run taught its model (``data.system_prompt`` in the run's
    train_config.yaml; None = the chat template's default); the protocol's SYSTEM_PROMPT for any
    other model. A model served with another prompt than it learned calls less reliably."""
    data = _trained_data(name_or_path)
    return SYSTEM_PROMPT if data is None else data.get("system_prompt", SYSTEM_PROMPT)
