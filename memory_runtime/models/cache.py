"""What memlm keeps in its cache (``$MEMLM_CACHE`` or ``~/.cache/memlm``, cache_root), entry by
entry with its kind and size, and removing entries (`memlm cache list | clean`).

The layout is the owners': ``models/<name>`` the embedded bases converted from their GGUF, ``models/gguf/``
a .gguf file given as a model, converted (embedded.py), ``models/merged/`` adapters merged into their bases
(loading.py); ``gguf/`` a GGUF shipped in chunks, assembled (embedded.py); ``onnx/`` the ONNX Runtime
GenAI exports and the record of a failed one (generation/onnx_backend.py); ``serve_engine.json`` the
engine `memlm serve` measured (generation/engine_choice.py); ``chat_history`` `memlm chat`'s line
history (serving/chat.py). Everything but the history is rebuilt by the run that needs it.

Nothing here follows a symbolic link: a link is an entry of its own (its size is the link's), and one
that points out of the cache is never removed, so removing stays inside the cache root.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The folders of the cache, named once here for their owners and for `memlm cache`.
# The models' (embedded.py, loading.py):
MODELS_DIR = "models"  # $MEMLM_CACHE/models/<cache_name>: the embedded bases, converted
MERGED_DIR = "merged"  # $MEMLM_CACHE/models/merged/<run>-<hash>: adapters merged into their bases
CONVERTED_GGUF_DIR = "gguf"  # $MEMLM_CACHE/models/gguf/<stem>-<hash>: a .gguf file given as a model, converted
ASSEMBLED_GGUF_DIR = "gguf"  # $MEMLM_CACHE/gguf/<file>.gguf: a GGUF shipped in chunks, assembled
# written by the layers above:
ONNX_DIR = "onnx"  # $MEMLM_CACHE/onnx/<name>-<hash>-<weights>: generation/onnx_backend.py's exports
ONNX_FAILED_SUFFIX = ".failed"  # $MEMLM_CACHE/onnx/<export>.failed: an export that failed, with its recipe
ENGINE_CHOICE_FILE = "serve_engine.json"  # generation/engine_choice.py's measurements
CHAT_HISTORY_FILE = "chat_history"  # `memlm chat`'s line history (serving/chat.py)


def cache_root() -> Path:
    """Root of memlm's cache: ``$MEMLM_CACHE`` or ``~/.cache/memlm``."""
    env = os.environ.get("MEMLM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "memlm"


LOCK_SUFFIX = ".lock"  # ".<entry>.lock" beside an entry (embedded._file_lock): not listed, removed with it

KINDS = {  # kind (what `memlm cache clean --kind` takes) -> what it is
    "base": "base model",  # a GGUF converted to a model directory: an embedded base, a .gguf file's
    "gguf": "assembled GGUF",
    "merged": "merged model",
    "onnx": "ONNX export",  # and the record of an export that failed
    "engine": "engine choice",
    "history": "chat history",
    "unfinished": "unfinished",  # a conversion's temporary or replaced copy (".<entry>.tmp-*", ".<entry>.old-*")
    "other": "other",  # anything else under the root
}
REBUILT = ("base", "gguf", "merged", "onnx", "engine", "unfinished")
"""The kinds a run makes again when it needs them: what `clean` removes when no kind or name is given."""


@dataclass(frozen=True)
class CacheEntry:
    kind: str  # a key of KINDS
    name: str  # the path relative to the cache root, with "/"
    path: Path
    size: int  # bytes: the files' sizes, a link's own
    modified: float  # the newest modification time in it (seconds since the epoch)
    link: str | None = None  # a symbolic link: where it points (never followed)
    outside: bool = False  # a link out of the cache root: never removed

    @property
    def what(self) -> str:
        return KINDS[self.kind]


def cache_entries(root: Path | None = None) -> list[CacheEntry]:
    """Every entry of the cache (`root`, default cache_root()), by kind (in KINDS' order), then
    name; none when the root is missing."""
    root = Path(root) if root is not None else cache_root()
    if not root.is_dir():
        return []
    real_root = root.resolve()
    entries = [_entry(kind, path, root, real_root) for kind, path in _walk(root)]
    order = list(KINDS)
    return sorted(entries, key=lambda entry: (order.index(entry.kind), entry.name))


def select_entries(entries: list[CacheEntry], kinds: Iterable[str] = (), names: Iterable[str] = ()) -> list[CacheEntry]:
    """The entries of `kinds` and those called one of `names` (the path in the cache, or its last part);
    without either, those of the REBUILT kinds. ValueError for an unknown kind, or a name no entry has."""
    kinds, names = list(kinds), list(names)
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}: expected one of {', '.join(KINDS)}")
    for name in names:
        if not any(_called(entry, name) for entry in entries):
            raise ValueError(f"no cache entry is called {name!r} (memlm cache list names them)")
    if not kinds and not names:
        kinds = list(REBUILT)
    return [entry for entry in entries if entry.kind in kinds or any(_called(entry, n) for n in names)]


def remove_entry(entry: CacheEntry, root: Path | None = None) -> None:
    """Delete `entry` (a link: the link itself, never its target), and its lock file. ValueError, and
    nothing deleted, when it is not inside the cache root or is a link out of it."""
    root = Path(root) if root is not None else cache_root()
    real_root = root.resolve()
    path = entry.path
    # the folder it lies in, resolved, must be that folder inside the root: no link on the way out
    if path.parent.resolve() != real_root.joinpath(*Path(entry.name).parts[:-1]) or path.name in ("", ".", ".."):
        raise ValueError(f"{path} is not inside the cache {real_root}: not removed")
    if path.is_symlink():
        if not _inside(path.resolve(), real_root):
            raise ValueError(f"{entry.name} links out of the cache (to {os.readlink(path)}): not removed")
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    lock = path.parent / f".{path.name}{LOCK_SUFFIX}"
    if lock.is_file() and not lock.is_symlink():
        lock.unlink(missing_ok=True)


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """(kind, path) of every entry under `root`: the files and folders the owners write, by location."""
    for path in _children(root):
        if path.name == MODELS_DIR and _real_dir(path):
            for model in _children(path):
                if model.name == MERGED_DIR and _real_dir(model):
                    yield from _each(model, "merged")
                elif model.name == CONVERTED_GGUF_DIR and _real_dir(model):
                    yield from _each(model, "base")
                else:
                    yield from _each_one(model, "base")
        elif path.name == ASSEMBLED_GGUF_DIR and _real_dir(path):
            yield from _each(path, "gguf")
        elif path.name == ONNX_DIR and _real_dir(path):
            yield from _each(path, "onnx")
        elif path.name == ENGINE_CHOICE_FILE:
            yield "engine", path
        elif path.name == CHAT_HISTORY_FILE:
            yield "history", path
        else:
            yield from _each_one(path, "other")


def _each(folder: Path, kind: str) -> Iterator[tuple[str, Path]]:
    for path in _children(folder):
        yield from _each_one(path, kind)


def _each_one(path: Path, kind: str) -> Iterator[tuple[str, Path]]:
    if path.name.startswith("."):
        if path.name.endswith(LOCK_SUFFIX):
            return  # a lock: empty, removed with its entry
        kind = "unfinished"
    yield kind, path


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _inside(path: Path, real_root: Path) -> bool:
    return path == real_root or real_root in path.parents


def _entry(kind: str, path: Path, root: Path, real_root: Path) -> CacheEntry:
    name = path.relative_to(root).as_posix()
    if path.is_symlink():
        target = os.readlink(path)
        stat = path.lstat()
        return CacheEntry(kind, name, path, stat.st_size, stat.st_mtime, target, not _inside(path.resolve(), real_root))
    size, modified = _measure(path)
    return CacheEntry(kind, name, path, size, modified)


def _measure(path: Path) -> tuple[int, float]:
    """Total bytes and newest modification time of a file, or of a folder's files (links not followed)."""
    try:
        stat = path.lstat()
    except OSError:
        return 0, 0.0
    size, modified = (stat.st_size if not path.is_dir() else 0), stat.st_mtime
    if path.is_dir():
        for folder, dirs, files in os.walk(path, followlinks=False):
            for name in files + dirs:
                try:
                    item = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                modified = max(modified, item.st_mtime)
                if name in files:
                    size += item.st_size
    return size, modified


def _called(entry: CacheEntry, name: str) -> bool:
    name = name.strip("/")
    return name in (entry.name, entry.path.name)
