"""Reading YAML configs: one way to load a mapping, to apply ``key=value`` overrides, and to name
the fields that are wrong.

The memory, data, training, eval, serve and self-instruct configs all go through here, so a user
sees the same kind of message whichever file is bad: the file, then one line per bad field by
dotted path; and every command that takes ``--config FILE`` takes ``a.b=value`` overrides too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_mapping(path: str | Path, what: str, error: type[Exception] = ValueError) -> dict:
    """The mapping a YAML file holds (an empty file is an empty mapping)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err}") from None
    except yaml.YAMLError as err:
        raise error(f"invalid {what} {path}: not valid YAML ({err})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"invalid {what} {path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def parse_override(item: str, error: type[Exception] = ValueError) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], YAML-parsed value)."""
    if "=" not in item:
        raise error(f"override {item!r}: expected key=value (dotted key, e.g. optim.learning_rate=1e-4)")
    key, _, raw = item.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise error(f"override {item!r}: bad key {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise error(f"override {item!r}: cannot parse value: {err}") from None
    return parts, value


def apply_overrides(
    raw: dict[str, Any], overrides: Sequence[str], error: type[Exception] = ValueError
) -> dict[str, Any]:
    """Apply ``key=value`` overrides (dotted paths) to a raw config mapping, in place, before it is
    validated: an override goes through the same checks as the file."""
    for item in overrides:
        parts, value = parse_override(item, error)
        node = raw
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                where = ".".join(parts[: i + 1])
                raise error(f"override {item!r}: {where} is a value ({child!r}), not a group")
            node = child
        node[parts[-1]] = value
    return raw


def describe(err: ValidationError) -> str:
    """One line per bad field, named by its dotted path, with the value given when it is a scalar."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown field (not allowed here; check the spelling)")
            continue
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if e["type"] == "missing" or "input" not in e or isinstance(got, (dict, list)) else f" (got {got!r})"
        lines.append(f"  {loc}: {msg}{shown}")
    return "\n".join(lines)


def validate(model: type[M], data: dict, what: str, source: str, error: type[Exception] = ValueError) -> M:
    """`model.model_validate(data)`, with a failure reported as `error` naming every bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise error(f"invalid {what} {source}:\n{describe(err)}") from None
