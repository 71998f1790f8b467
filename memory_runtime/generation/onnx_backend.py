"""engine onnx: the model exported once to ONNX Runtime GenAI and decoded on the CPU, one turn at a time.

A 135M model's decoding step on a CPU is mostly framework time around small matrix products: in
transformers the bare step took 21 ms a token in bfloat16 and 12.5 ms with int8 weights, of which
the products are ~4 ms (docs/decoding.md). ONNX Runtime runs the same step as one graph of fused C++
kernels (grouped-query attention with its KV cache in place, int8 MatMulNBits), ~6 ms a token here.
Everything above the forward pass is the hf engine's: :class:`OnnxBackend` is an
:class:`~memory_runtime.generation.hf_backend.HFBackend` whose forward and KV cache are ONNX
Runtime's, so the name-copy and relation rules, backtracking, resume after a read and sampling are
the same code. Turns run one at a time (``OneAtATime``): batching many turns belongs to the hf
and vllm engines.

``weights`` picks the export: ``int8`` (every linear layer, the head included, int8 per block of 32
input channels, float32 activations; ~2x fewer bytes a token than bfloat16), ``int4`` (the same in 4
bits, activations rounded to int8 inside the products: accuracy level 4) or ``full`` (float32).
The export (``python -m onnxruntime_genai.models.builder``) runs once per model and is cached
under ``$MEMLM_CACHE/onnx/``; an adapter is merged into its base first (models.merged_model_dir).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from memory_runtime.generation.hf_backend import HFBackend

PRECISION = {"int8": "int8", "int4": "int4", "full": "fp32"}  # generation.weights -> the builder's precision
INSTALL_HINT = "pip install 'memlm[onnx]' (onnxruntime-genai)"
SOURCE_FILE = "memlm_source.json"  # in an export: the model directory it was made from


class ExportError(RuntimeError):
    """ONNX Runtime GenAI's builder cannot export this model (an architecture or a config it does not read)."""


def onnx_installed() -> bool:
    """Whether ONNX Runtime GenAI imports here."""
    if importlib.util.find_spec("onnxruntime_genai") is None:
        return False
    try:
        import onnxruntime_genai  # noqa: F401
    except Exception:  # a broken install is no engine
        return False
    return True


def _source_dir(model: str) -> Path:
    """The plain Hugging Face directory the export reads: an adapter merged into its base, an embedded
    model's converted copy, or the model directory itself."""
    from memory_runtime.models.loading import is_adapter_dir, merged_model_dir, resolve_base

    if is_adapter_dir(model):
        return merged_model_dir(model)
    source = Path(resolve_base(model)).expanduser()
    if not source.exists():  # a hub id: its copy in the local Hugging Face cache, if there is one
        from huggingface_hub import snapshot_download

        try:
            source = Path(snapshot_download(str(source), local_files_only=True))
        except Exception:
            pass
    if not (source / "config.json").is_file():
        raise FileNotFoundError(
            f"model {model!r} not found: the onnx engine exports a model from its files, and this is no local "
            "model directory (a `memlm train` run, a Hugging Face model directory or one in the local hub "
            "cache, an embedded: model)"
        )
    return source.resolve()


def onnx_model_dir(model: str, weights: str = "int8") -> Path:
    """`model` exported for ONNX Runtime GenAI with `weights` (int8, int4 or full), once: the cached export's
    directory (``$MEMLM_CACHE/onnx/<name>-<hash>-<weights>``), rebuilt when the source's weights change."""
    return _exported(_source_dir(model), weights)


def _exported(source: Path, weights: str) -> Path:
    """The export of the model directory `source` (:func:`_source_dir`), made if missing or stale."""
    from memory_runtime.models.cache import ONNX_DIR, ONNX_FAILED_SUFFIX, cache_root
    from memory_runtime.models.embedded import ensure_converted

    if weights not in PRECISION:
        raise ValueError(f"unknown weights {weights!r}: expected one of {sorted(PRECISION)}")
    if not onnx_installed():
        raise ValueError(f"engine onnx needs ONNX Runtime GenAI, which is not installed: {INSTALL_HINT}")
    stamp_file = next(iter(sorted(source.glob("*.safetensors"))), None) or source / "config.json"
    key = hashlib.sha256(str(source).encode()).hexdigest()[:12]
    cache = cache_root() / ONNX_DIR / f"{source.name}-{key}-{weights}"
    version = importlib.metadata.version("onnxruntime-genai")
    # the builder, the weights and the source's weights file as written (a retrained model's merge is rewritten
    # at the same size): the cache's stamp, so a changed source is exported again
    recipe = f"onnxruntime-genai {version} {weights} {stamp_file.stat().st_mtime_ns} {stamp_file.stat().st_size}"
    # a model this builder cannot export fails in the same way every time: the failure is kept beside the
    # exports (for this recipe), so a command does not spend the export again
    failed = cache.parent / f"{cache.name}{ONNX_FAILED_SUFFIX}"
    if failed.is_file() and failed.read_text().startswith(recipe + "\n"):
        raise ExportError(failed.read_text().split("\n", 1)[1])

    def export(_stamp: Path, out: Path) -> None:
        _remove_orphan_exports(cache.parent)
        with tempfile.TemporaryDirectory(prefix="memlm-onnx-") as scratch:  # the builder's intermediate files
            command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(source), "-o", str(out)]
            command += ["-p", PRECISION[weights], "-e", "cpu", "-c", scratch]
            if weights == "int4":  # int8 activations in the products: the fast CPU kernels
                command += ["--extra_options", "int4_accuracy_level=4"]
            done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            message = f"onnxruntime-genai {version} cannot export {source}: {last}"
            failed.parent.mkdir(parents=True, exist_ok=True)
            failed.write_text(f"{recipe}\n{message}")
            raise ExportError(message)
        (out / SOURCE_FILE).write_text(json.dumps({"source": str(source)}) + "\n")

    return ensure_converted(stamp_file, cache, convert=export, recipe=recipe, what=f"ONNX Runtime GenAI ({weights})")


def _remove_orphan_exports(root: Path) -> None:
    """Delete exports whose source model is gone (a deleted run, a test's temporary model)."""
    import shutil

    for marker in root.glob(f"*/{SOURCE_FILE}"):
        try:
            source = Path(json.loads(marker.read_text())["source"])
        except (OSError, ValueError, KeyError):
            continue
        if not (source / "config.json").is_file():
            shutil.rmtree(marker.parent, ignore_errors=True)


class OnnxModel:
    """An exported model opened once: ONNX Runtime GenAI's model, and what the turn decoder reads of a
    transformers model (its generation config, for the end-of-turn tokens; the context length)."""

    def __init__(self, directory: str | Path, source: str | Path | None = None, threads: int | None = None) -> None:
        import onnxruntime_genai as og
        from transformers import GenerationConfig

        self.directory = Path(directory)
        og_config = og.Config(str(self.directory))
        # generation.threads sizes ONNX Runtime's own pool; unset, it takes torch's count (one per core, or
        # OMP_NUM_THREADS): left to itself ONNX Runtime GenAI ran one thread on the 2-core VM, 9.0 ms a token
        # where two take 6.1
        threads = threads or torch.get_num_threads()
        options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
        og_config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
        self.og_model = og.Model(og_config)
        self.threads = threads
        self._caches = threading.local()
        exported = json.loads((self.directory / "genai_config.json").read_text())["model"]
        self.context = int(exported["context_length"])
        try:
            self.generation_config = GenerationConfig.from_pretrained(source or self.directory)
        except OSError:
            self.generation_config = None

    def cache(self, max_length: int) -> OnnxCache:
        """This thread's KV cache: one per thread, kept from turn to turn, so that a turn's first tokens
        that are the last turn's too (the system prompt, the chat template) are not fed again."""
        cache = getattr(self._caches, "cache", None)
        if cache is None or cache.broken or cache.max_length != max_length:
            cache = self._caches.cache = OnnxCache(self, max_length)
        return cache

    def get_input_embeddings(self) -> Any:
        raise NotImplementedError  # input ids stay on the CPU (hf_backend.input_device)

    def parameters(self) -> Any:
        return iter(())  # the weights are ONNX Runtime's

    def bytes_per_token(self) -> int:
        """Bytes of weights a decoding step reads: every initializer of the graph, but of the input
        embeddings (the largest, not shared with the quantised head) only the looked-up row."""
        import onnx

        graph = onnx.load_model(str(self.directory / "model.onnx"), load_external_data=False).graph
        total = 0
        for tensor in graph.initializer:
            size = next((int(e.value) for e in tensor.external_data if e.key == "length"), len(tensor.raw_data))
            if "embed_tokens" in tensor.name and len(tensor.dims) == 2:
                size //= int(tensor.dims[0])  # one row a token
            total += size
        return total


class OnnxCache:
    """A KV cache in ONNX Runtime GenAI (a Generator) and the token ids it holds: it feeds tokens and gives
    the last one's logits, crops like a transformers cache (``crop(-n)`` drops the last n positions), and
    serves one backend at a time (`owner`); the next takes over what it can reuse (:meth:`take`)."""

    def __init__(self, model: OnnxModel, max_length: int) -> None:
        self.model = model
        self.max_length = max_length  # what it may grow to
        self.ids: list[int] = []
        self.owner: Any = None
        self.broken = False  # a failed feed leaves the generator's state unknown: the model makes a new one
        self._open(min(self.START, max_length))

    # the KV buffer's positions at first: a step attends over the whole buffer's bookkeeping, so 4,096
    # positions cost ~6% a token against 512 here; a turn that needs more gets a buffer twice as long
    START = 1024

    def _open(self, length: int) -> None:
        import onnxruntime_genai as og

        params = og.GeneratorParams(self.model.og_model)
        params.set_search_options(max_length=length)
        self.generator = og.Generator(self.model.og_model, params)
        self.length = length

    def take(self, owner: Any, ids: list[int]) -> int:
        """Serve `owner`, whose sequence is `ids`: keep the longest prefix held already (all but the last
        token at most, whose logits are wanted) and return its length."""
        keep, most = 0, min(len(self.ids), len(ids) - 1)
        while keep < most and self.ids[keep] == ids[keep]:
            keep += 1
        self.crop(keep)
        self.owner = owner
        return keep

    def feed(self, ids: list[int]) -> torch.Tensor:
        needed = len(self.ids) + len(ids)
        if needed > self.max_length:
            raise ValueError(
                f"the turn outgrew the onnx engine's context of {self.max_length} tokens "
                "(generation.max_new_tokens or the conversation is too long)"
            )
        try:
            if needed > self.length:  # a longer buffer, holding what this one held
                held = self.ids
                self._open(min(self.max_length, max(2 * self.length, needed)))
                ids, self.ids = [*held, *ids], []
            self.generator.append_tokens(ids)
            logits = torch.from_numpy(self.generator.get_logits()[0, -1].copy())
        except BaseException:
            self.broken = True
            raise
        self.ids.extend(ids)
        return logits

    def crop(self, max_length: int) -> None:
        keep = len(self.ids) + max_length if max_length < 0 else max_length
        if keep < len(self.ids):
            self.generator.rewind_to(keep)
            del self.ids[keep:]


class _Logits:
    def __init__(self, last: torch.Tensor) -> None:
        self.logits = last[None, None, :]


class OnnxBackend(HFBackend):
    """HFBackend (the turn decoder, its rules and its cache bookkeeping) over an :class:`OnnxModel`. Its
    KV cache is the model's cache of this thread: a turn starts from the tokens the last turn left that
    it shares (the prompt's start), and a backend whose cache another took over since takes it back."""

    max_length = 4096  # KV positions a turn may fill (prompt, generated and inserted tokens)

    def _mine(self) -> None:
        if self._cache is not None and self._cache.owner is not self:
            self._cache = None  # another backend decoded on this thread since: take the cache back

    def _crop(self, keep: int) -> None:
        self._mine()
        super()._crop(keep)

    def _next_logits(self) -> torch.Tensor:
        self._mine()
        if self._cache is None:
            self._cache = self.model.cache(min(self.max_length, self.model.context))
            self._cached = self._cache.take(self, self.turn.all_ids)
        return super()._next_logits()

    def _forward(self, input_ids: torch.Tensor) -> Any:
        return _Logits(self._cache.feed(input_ids[0].tolist()))


def load_onnx_model(model: str, weights: str = "int8", threads: int | None = None) -> tuple[OnnxModel, Any]:
    """`model` exported (once) and opened on `threads` CPU threads (None: one per core): the engine's model,
    and the tokenizer of the model it was exported from (the turns are rendered and decoded with it, as on
    the hf engine)."""
    from memory_runtime.models.loading import load_tokenizer

    source = _source_dir(model)
    return OnnxModel(_exported(source, weights), source, threads), load_tokenizer(str(source), local_files_only=True)
