"""The files memlm ships beside its code, found with importlib.resources, so that an installed wheel finds
them from any directory:

    configs/   every command's configs: `memlm config list` names them, `--config train/cpu-smollm2`
               takes one by name, `memlm config copy NAME` writes one out to edit
    data/      real annotated text: data/real/ (the dev passages eval measures on), data/real_train/
               (the passages the default data config trains on)

In a checkout they are the top-level configs/ and data/, where a reader looks for them; this package holds
links to both, and a wheel carries the files themselves (pyproject.toml's package-data). They live in the
bottom layer because every layer reads them: data_gen its data configs and passages, training its presets,
serving its demo keys, the CLI every config. A config names the files beside it by relative paths
(``base: default.yaml``, ``../../data/real_train/...``), which hold in a checkout and in a wheel alike; a
config elsewhere names a shipped file as ``shipped:data/real_train/...`` (what `memlm config copy` writes), which
holds wherever memlm is installed (:func:`resolve_path`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

CONFIG_SUFFIXES = (".yaml", ".json")
"""What counts as a config among the shipped files (the .jsonl beside some are their data)."""
SHIPPED_PREFIX = "shipped:"
"""A config's path that starts so names a shipped file: ``shipped:configs/data/default.yaml``."""


def shipped(*parts: str) -> Path:
    """The path of a shipped file or folder, e.g. ``shipped("configs", "data", "tiny.yaml")``, whether or
    not it is there (the caller names it in its error). Resolved: in a checkout, the top-level
    configs/ and data/. A wheel installs unpacked, so a resource is a file on disk: the configs are read
    as files, their relative paths resolved against their folder."""
    return Path(str(resources.files(__name__))).joinpath(*parts).resolve()


def resolve_path(value: str | Path | None, folder: Path) -> str | None:
    """A path a config file gave, as the file meant it: ``shipped:REST`` the shipped file REST (configs/...
    or data/...), a relative path relative to the file's `folder`, an absolute one as it is. None stays
    None. Every config's relative paths go through here, so a copied config naming shipped files runs
    wherever it lands, whichever install it runs with."""
    if value is None:
        return None
    text = str(value)
    if text.startswith(SHIPPED_PREFIX):
        return str(shipped(*Path(text[len(SHIPPED_PREFIX) :]).parts))
    if not text or Path(text).is_absolute():
        return text
    return str((Path(folder) / text).resolve())


def shipped_name(path: Path) -> str | None:
    """``shipped:REST`` for a file inside the shipped folders, else None (what `memlm config copy` writes in
    place of a path relative to the shipped config)."""
    path = Path(path).resolve()
    for top in ("configs", "data"):  # each its own folder: in a checkout, links to the top-level ones
        if path.is_relative_to(shipped(top)):
            return f"{SHIPPED_PREFIX}{top}/{path.relative_to(shipped(top)).as_posix()}"
    return None


def memlm_version() -> str | None:
    """The installed memlm's version; None where memlm runs from a checkout that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memlm")
    except PackageNotFoundError:
        return None


def checkout_script(name: str) -> Path | None:
    """scripts/NAME of the checkout memlm runs from, or None from a wheel (which has no scripts/): a hint names
    a script only to a user who has it."""
    script = shipped("configs").parent / "scripts" / name
    return script if script.is_file() else None


def config_names() -> list[str]:
    """Every shipped config by the name `--config` and `memlm config copy` take: its path under configs/
    without the suffix (``train/cpu-smollm2``, ``data/tiny``, ``deepspeed/zero2``)."""
    root = shipped("configs")
    return sorted(_name(path, root) for path in root.rglob("*") if path.suffix in CONFIG_SUFFIXES and path.is_file())


def find_config(name: str, folder: str | None = None) -> Path | None:
    """The shipped config `name` names, or None if it names none: its path under configs/, with or without
    ``configs/`` before it (as the README writes it) and its suffix (``configs/train/cpu-smollm2.yaml``,
    ``train/cpu-smollm2``), or its bare name where one config has it (``cpu-smollm2``), or, for a command
    that reads configs of one `folder` (``data``), the one of that folder. A bare name that several have
    otherwise (``default``) is a ValueError naming them."""
    path = Path(name)
    if path.is_absolute() or not path.parts:
        return None
    if path.parts[0] == "configs" and len(path.parts) > 1:
        path = Path(*path.parts[1:])
    names = [str(path)] if path.suffix in CONFIG_SUFFIXES else [f"{path}{suffix}" for suffix in CONFIG_SUFFIXES]
    root = shipped("configs")
    if len(path.parts) > 1:
        found = [root / n for n in names if (root / n).is_file()]
    else:
        found = sorted(p for n in names for p in root.glob(f"*/{n}") if p.is_file())
    if len(found) > 1 and folder is not None:
        found = [p for p in found if p.parent.name == folder] or found
    if len(found) > 1:
        several = ", ".join(_name(p, root) for p in found)
        raise ValueError(f"{name}: several shipped configs are called that ({several}): name one of them")
    return found[0] if found else None


def _name(path: Path, root: Path) -> str:
    return str(path.relative_to(root).with_suffix(""))
