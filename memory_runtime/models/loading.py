"""Loading base models, tokenizers and PEFT adapters for the memory runtime: a model name (an
``embedded:`` base, a hub id, a model directory, a .gguf file, a `memlm train` run) resolved to what
``from_pretrained`` reads, the tokenizer with a pad token and a chat template, an adapter applied or
merged once into a model directory in the cache. The embedded bases and GGUF conversion are in
embedded.py, what a run recorded about its training in trained_run.py."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from memory_runtime.models.cache import CONVERTED_GGUF_DIR, MERGED_DIR, MODELS_DIR, cache_root
from memory_runtime.models.embedded import EMBEDDED_MODEL, converted_embedded, ensure_converted, is_embedded
from memory_runtime.models.hardware import resolve_dtype

logger = logging.getLogger(__name__)

_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "tokenizer.model", "vocab.json")
_MODEL_WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")

# ChatML without a default system prompt; only used for tokenizers that have no template.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def is_adapter_dir(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a PEFT adapter directory (has ``adapter_config.json``)."""
    p = Path(path).expanduser()
    return p.is_dir() and (p / "adapter_config.json").is_file()


def _has_tokenizer_files(path: Path) -> bool:
    return any((path / f).is_file() for f in _TOKENIZER_FILES)


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file()


def adapter_base(adapter_dir: str | os.PathLike[str]) -> str:
    """The base model recorded in an adapter's ``adapter_config.json``."""
    cfg_path = Path(adapter_dir) / "adapter_config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read PEFT adapter config {cfg_path}: {exc}") from exc
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise ValueError(
            f"PEFT adapter {str(adapter_dir)!r} does not record its base model "
            "(base_model_name_or_path in adapter_config.json); pass the base explicitly: "
            "load_model(base, adapter=adapter_dir)"
        )
    return str(base)


# --------------------------------------------------------------------------- resolving names


_MERGED_FROM = "memlm_merged_from.json"


def merged_model_dir(adapter_dir: str | os.PathLike[str]) -> Path:
    """A `memlm train` adapter folded into its base and saved once, float32, as a plain model directory
    under the cache (``$MEMLM_CACHE/models/merged/``): what an engine serves at full speed where its
    per-request LoRA kernels are slow (vLLM on a CPU). One directory per adapter directory (~0.5 GB for
    the embedded base): a retrained adapter replaces its merge, and making a merge removes those whose
    adapter is gone, so the cache does not grow with every run."""
    path = Path(adapter_dir).expanduser().resolve()
    weights = _adapter_weights(path)
    if weights is None:
        raise ValueError(f"{path} has no adapter weights (adapter_model.safetensors or .bin)")
    merged_root = cache_root() / MODELS_DIR / MERGED_DIR
    cache_dir = merged_root / f"{path.name}-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    version = f"{path} {weights.stat().st_mtime_ns} {weights.stat().st_size}"

    def merge(_weights: Path, out: Path) -> None:
        _remove_orphan_merges(merged_root)
        model, tokenizer = load_model(path, dtype="float32", merge=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / _MERGED_FROM).write_text(json.dumps({"adapter": str(path)}) + "\n")

    return ensure_converted(weights, cache_dir, convert=merge, recipe=version)


def damaged(where: Path, what: str, exc: Exception) -> str:
    """One line for a model, adapter or tokenizer whose files cannot be read: which, why, what to do."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return (
        f"cannot read the {what} in {where} ({type(exc).__name__}: {reason}): a file there is damaged or "
        "incomplete (an interrupted copy or save); copy it again, or train the run again"
    )


def _adapter_weights(path: Path) -> Path | None:
    return next((path / f for f in ("adapter_model.safetensors", "adapter_model.bin") if (path / f).is_file()), None)


def _remove_orphan_merges(merged_root: Path) -> None:
    """Delete merged models whose adapter directory no longer holds an adapter (a deleted run)."""
    for merged in merged_root.glob("*/" + _MERGED_FROM):
        try:
            adapter = Path(json.loads(merged.read_text())["adapter"])
        except (OSError, ValueError, KeyError):
            continue
        if _adapter_weights(adapter) is None:
            logger.warning("removing %s: its adapter %s is gone", merged.parent, adapter)
            shutil.rmtree(merged.parent, ignore_errors=True)
            (merged_root / f".{merged.parent.name}.lock").unlink(missing_ok=True)


def resolve_base(name_or_path: str | os.PathLike[str]) -> str:
    """Turn a base-model name into something ``from_pretrained`` can load.

    - ``embedded:...`` -> the converted cache directory (assembling and converting on first use);
    - a PEFT adapter directory -> its recorded base model, resolved the same way;
    - a ``.gguf`` file -> a converted copy under the memlm cache;
    - an existing local model directory -> its path;
    - anything else that looks like a hub id (``org/name``) -> returned unchanged.
    """
    name = str(name_or_path)
    if is_embedded(name):
        return str(converted_embedded(name))
    path = Path(name).expanduser()
    if path.exists():
        if path.is_file() and path.suffix == ".gguf":
            key = f"{path.resolve()}:{path.stat().st_size}".encode()
            tag = f"{path.stem}-{hashlib.sha256(key).hexdigest()[:12]}"
            return str(ensure_converted(path, cache_root() / MODELS_DIR / CONVERTED_GGUF_DIR / tag))
        if path.is_dir() and is_adapter_dir(path):
            base = adapter_base(path)
            if is_adapter_dir(base):
                raise ValueError(f"PEFT adapter {name!r} has another adapter as its base ({base!r}); not supported")
            return resolve_base(base)
        if path.is_dir() and _is_model_dir(path):
            return str(path)
        raise ValueError(
            f"{name!r} is not a model: expected a Hugging Face model directory (config.json), "
            "a PEFT adapter directory (adapter_config.json) or a .gguf file"
        )
    looks_local = name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1
    if looks_local or not _HUB_ID_RE.match(name):
        raise FileNotFoundError(f"model path {name!r} does not exist")
    return name


# --------------------------------------------------------------------------- loading


def _require_local(source: str, name: str) -> None:
    """A hub id read with local_files_only must be in the Hugging Face cache: say so plainly
    (transformers would blame the network, and `runs/typo` looks like a hub id)."""
    if Path(source).expanduser().exists():
        return
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(source, "config.json"), str):
        raise FileNotFoundError(
            f"model {name!r} not found: it is no local directory or file, and no model of that id is in the "
            "Hugging Face cache (memlm reads local files only; give a run directory, a model directory, a .gguf "
            "file, or an embedded: name)"
        )


def _finish_tokenizer(tokenizer: Any, source: str) -> Any:
    """Make sure the tokenizer can pad and render chats."""
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        for candidate in (tokenizer.eos_token, "<|im_end|>", tokenizer.unk_token):
            if candidate is not None and candidate in vocab:
                tokenizer.pad_token = candidate
                break
    if not getattr(tokenizer, "chat_template", None):
        logger.warning("tokenizer of %s has no chat template; using plain ChatML", source)
        tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _tokenizer_source(name: str) -> str:
    """Directory / id to load a tokenizer from for a model or adapter name."""
    path = Path(name).expanduser()
    if not is_embedded(name) and is_adapter_dir(path) and _has_tokenizer_files(path):
        return str(path)
    return resolve_base(name)


def load_tokenizer(name_or_path: str = EMBEDDED_MODEL, *, local_files_only: bool = True) -> Any:
    """Load the tokenizer of a base model or adapter, with a pad token and a chat template.

    An adapter directory that carries tokenizer files (e.g. saved with added tokens)
    provides its own tokenizer; otherwise its base model's is used.  The pad token
    defaults to the EOS token (``<|im_end|>`` for ChatML models) when missing.
    """
    from transformers import AutoTokenizer

    source = _tokenizer_source(str(name_or_path))
    if local_files_only:
        _require_local(source, str(name_or_path))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
    except Exception as exc:  # a damaged tokenizer.json or tokenizer_config.json: the tokenizers library's own error
        if Path(source).is_dir():
            raise ValueError(damaged(Path(source), "tokenizer", exc)) from exc
        if isinstance(exc, OSError):
            raise FileNotFoundError(
                f"cannot load a tokenizer for {str(name_or_path)!r} (from {source!r}): {exc}"
            ) from exc
        raise
    return _finish_tokenizer(tokenizer, str(name_or_path))


def load_model(
    name_or_path: str = EMBEDDED_MODEL,
    *,
    adapter: str | os.PathLike[str] | None = None,
    dtype: str | torch.dtype = "auto",
    device: str = "cpu",
    local_files_only: bool = True,
    merge: bool = False,
    weights: str = "full",
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for generation, in eval mode on ``device``.

    ``dtype`` is a name, a torch dtype, or ``auto``: the one this machine computes fastest
    (memory_runtime.models.hardware.choose_dtype: bfloat16 on GPUs and on CPUs with native bfloat16,
    float32 on the rest); the choice is logged with its reason.

    ``name_or_path`` is an ``embedded:`` name (:data:`EMBEDDED_MODELS`), a hub id, a local model directory, a
    ``.gguf`` file, or a PEFT adapter directory (its recorded base is loaded and the
    adapter applied).  ``adapter`` optionally applies a PEFT adapter directory on top of
    the base.  ``merge=True`` folds the adapter into the base weights (inference only; several
    times faster decoding on a CPU).  ``weights="int8"`` then rounds every linear layer's weights to int8
    (memory_runtime.models.quantize: CPU and bfloat16 only, refused before loading elsewhere).  Extra
    ``kwargs`` go to ``AutoModelForCausalLM.from_pretrained``.
    """
    from transformers import AutoModelForCausalLM

    name = str(name_or_path)
    adapter_dir: Path | None = None
    if not is_embedded(name) and is_adapter_dir(name):
        if adapter is not None:
            raise ValueError(f"{name!r} is itself a PEFT adapter; do not pass adapter={str(adapter)!r} as well")
        adapter_dir = Path(name).expanduser()
    elif adapter is not None:
        adapter_dir = Path(adapter).expanduser()
        if not adapter_dir.exists():
            raise FileNotFoundError(f"adapter path {str(adapter)!r} does not exist")
        if not is_adapter_dir(adapter_dir):
            raise ValueError(f"{str(adapter)!r} is not a PEFT adapter directory (no adapter_config.json)")

    base = resolve_base(name)
    if local_files_only:
        _require_local(base, name)
    choice = resolve_dtype(dtype, device)
    if weights not in ("full", "int8"):
        raise ValueError(f"unknown weights {weights!r}: expected full or int8")
    if weights == "int8":
        from memory_runtime.models.quantize import check_int8

        check_int8(device, choice.dtype)
    logger.info("loading %s in %s on %s (%s)", name, choice.dtype, device, choice.reason)
    if local_files_only:
        # transformers 5.x's AutoModel probes the hub for adapter_config.json without passing
        # local_files_only on (minutes of retries offline) unless told through adapter_kwargs
        adapter_kwargs = dict(kwargs.pop("adapter_kwargs", None) or {})
        adapter_kwargs.setdefault("local_files_only", True)
        kwargs["adapter_kwargs"] = adapter_kwargs
    try:
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype=choice.torch_dtype, local_files_only=local_files_only, **kwargs
        )
    except (OSError, ValueError) as exc:  # missing, or a damaged config.json or weights file in a local folder
        if Path(base).is_dir():
            raise ValueError(damaged(Path(base), "model", exc)) from exc
        if isinstance(exc, OSError):
            raise FileNotFoundError(f"cannot load model {name!r} (from {base!r}): {exc}") from exc
        raise
    base_name = adapter_base(adapter_dir) if adapter_dir is not None and adapter is None else name
    if is_embedded(base_name):
        # Adapters trained on this model then record the portable name, not this machine's cache path.
        # (PEFT reads model.name_or_path, transformers' config keeps its own copy.)
        model.name_or_path = base_name
        model.config.name_or_path = base_name

    tok_source = str(adapter_dir) if adapter_dir is not None and _has_tokenizer_files(adapter_dir) else name
    tokenizer = load_tokenizer(tok_source, local_files_only=local_files_only)

    if adapter_dir is not None:
        from peft import PeftModel

        embeddings = model.get_input_embeddings()
        if embeddings is not None and len(tokenizer) > embeddings.num_embeddings:
            # the adapter was trained with added tokens: its saved embeddings need the room
            model.resize_token_embeddings(len(tokenizer))
        try:
            model = PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=False)
        except Exception as exc:  # a damaged file: safetensors, json, torch and PEFT each raise their own
            raise ValueError(damaged(adapter_dir, "adapter", exc)) from exc
        if merge:
            # Inference only: the adapter folded into the base weights. Decoding one token through
            # unmerged LoRA layers runs ~4 small matmuls per linear layer, mostly Python overhead.
            model = model.merge_and_unload()

    model.to(device)
    model.eval()
    if weights == "int8":
        from memory_runtime.models.quantize import quantize_int8

        logger.info("int8 weights: %d linear layers rounded per output channel", quantize_int8(model))
    return model, tokenizer
