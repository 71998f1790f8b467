"""Each shipped default config lists every field of its config class at the class's default, so
`--config configs/X/default.yaml` runs what no --config runs (and a reader sees every setting)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from eval.eval_config import EvalConfig
from learning_loop.self_instruct import SelfInstructConfig
from memory_runtime.serving.chat import ChatConfig
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.yaml_config import apply_overrides

REPO = Path(__file__).resolve().parents[1]

SHIPPED = [
    ("configs/eval/default.yaml", EvalConfig, ["generation.model=RUN"]),  # the model has no default
    ("configs/serve/default.yaml", ServeConfig, ["api_keys={}"]),  # the demo key is no default
    ("configs/chat/default.yaml", ChatConfig, []),
    ("configs/self_instruct/default.yaml", SelfInstructConfig, []),
]


def fields(cls: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field of a config, a section's by its dotted name."""
    out: set[str] = set()
    for name, field in cls.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out |= fields(kind, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def listed(raw: dict, cls: type[BaseModel], prefix: str = "") -> set[str]:
    """The fields a config file sets, by the same names."""
    out: set[str] = set()
    for name, value in raw.items():
        kind = cls.model_fields[name].annotation if name in cls.model_fields else None
        if isinstance(kind, type) and issubclass(kind, BaseModel) and isinstance(value, dict):
            out |= listed(value, kind, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


@pytest.mark.parametrize("path, cls, overrides", SHIPPED, ids=[p for p, _, _ in SHIPPED])
def test_a_shipped_default_config_lists_every_field_at_the_class_default(path, cls, overrides):
    file = REPO / path
    assert listed(yaml.safe_load(file.read_text()), cls) == fields(cls)
    defaults = cls.from_dict(apply_overrides({}, overrides), base_dir=file.parent)
    assert cls.load(file, overrides) == defaults
