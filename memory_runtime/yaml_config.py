"""Configs: one base class, one way to load a YAML file with ``key=value`` overrides, one error.

Every config of memlm (memory, data, training, eval, serve, chat, self-instruct, the generation
section they share) is a :class:`Strict` model and loads with ``Cls.load(path, overrides)``, so a
user sees the same kind of message whichever file is bad: a :class:`ConfigError` naming the file,
then one line per bad field by dotted path; and every command that takes ``--config FILE`` takes
``a.b=value`` overrides too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import Self

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config (a file, an override, a value) that cannot be used; the message names the field."""


class Strict(BaseModel):
    """The base of every config: unknown keys are errors (a typo names its field), assignments are
    validated, and :meth:`load` reads a file the one way every command does."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    what: ClassVar[str] = "config"  # how messages name it: "invalid serve config FILE: ..."

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = ()) -> Self:
        """Read a YAML file (None: the defaults), apply dotted ``key=value`` overrides to its mapping,
        validate (overrides go through the same checks as the file); relative paths in it are then
        made relative to the file (:meth:`relative_to`). Raises ConfigError."""
        path = None if path is None else Path(path)
        raw = apply_overrides(cls.read_yaml(path), overrides)
        with blamed_on(overrides):
            return cls.from_dict(raw, base_dir=None if path is None else path.parent, source=str(path or "defaults"))

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict[str, Any]:
        """The raw mapping of a config file (None: no file, an empty mapping)."""
        return {} if path is None else read_mapping(path, cls.what)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, base_dir: str | Path | None = None, source: str = "<dict>") -> Self:
        """Validate a mapping; `base_dir`: the folder its relative paths are relative to."""
        config = validate(cls, data, cls.what, source)
        return config if base_dir is None else config.relative_to(Path(base_dir))

    def relative_to(self, folder: Path) -> Self:
        """This config with the relative paths a file gave made relative to the file's `folder`
        (a config without paths: itself)."""
        return self

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=110)

    def save(self, path: str | Path, notes: Sequence[str] = ()) -> Path:
        """Write the config as YAML (what ``--config`` reads back), `notes` as comments on top."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = "".join(f"# {line}\n" for note in notes for line in note.splitlines())
        path.write_text(header + self.to_yaml(), encoding="utf-8")
        return path


def read_mapping(path: str | Path, what: str) -> dict:
    """The mapping a YAML file holds (an empty file is an empty mapping)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"invalid {what} {path}: not valid YAML ({err})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {what} {path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], YAML-parsed value)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r}: expected key=value (dotted key, e.g. optim.learning_rate=1e-4)")
    key, _, raw = item.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"override {item!r}: bad key {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"override {item!r}: cannot parse value: {err}") from None
    return parts, value


def apply_overrides(raw: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides (dotted paths) to a raw config mapping, in place, before it is
    validated: an override goes through the same checks as the file."""
    for item in overrides:
        parts, value = parse_override(item)
        node = raw
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                where = ".".join(parts[: i + 1])
                raise ConfigError(f"override {item!r}: {where} is a value ({child!r}), not a group")
            node = child
        node[parts[-1]] = value
    return raw


@contextlib.contextmanager
def blamed_on(overrides: Sequence[str]) -> Iterator[None]:
    """A ConfigError's lines about a field an override set say so ("(set by override mix.read=-1)"): the error
    names the file, and a user who gave the value on the command line should not look for it there."""
    try:
        yield
    except ConfigError as err:
        keys = [(item.partition("=")[0].strip(), item) for item in overrides if "=" in item]
        lines = []
        for line in str(err).splitlines():
            field = line.strip().split(":", 1)[0]
            given = next((item for key, item in keys if field == key or field.startswith(key + ".")), None)
            lines.append(f"{line} (set by override {given})" if given and line.startswith("  ") else line)
        raise ConfigError("\n".join(lines)) from None


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


def validate(model: type[M], data: dict, what: str, source: str) -> M:
    """`model.model_validate(data)`, with a failure reported as a ConfigError naming every bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"invalid {what} {source}:\n{describe(err)}") from None
