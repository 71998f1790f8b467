"""engine onnx: the model exported to ONNX Runtime GenAI, under the hf engine's turn decoder."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("onnxruntime_genai", reason="engine onnx needs onnxruntime-genai (pip install 'memlm[onnx]')")

from memory_runtime.generation.hf_backend import HFBackend  # noqa: E402
from memory_runtime.generation.onnx_backend import OnnxBackend, load_onnx_model, onnx_model_dir  # noqa: E402
from memory_runtime.generation.runtime import Generation, open_runtime  # noqa: E402
from memory_runtime.memory.store import TripletStore  # noqa: E402

MESSAGES = [{"role": "user", "content": "Dorothea Altemus is employed by Pfizer. Who employs Dorothea Altemus?"}]


@pytest.fixture(scope="module")
def exported(tiny_model_dir, tmp_path_factory):
    """The tiny Llama exported once in float32 (weights full), under a cache of this module's own."""
    cache = tmp_path_factory.mktemp("memlm-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMLM_CACHE", str(cache))
        model, tokenizer = load_onnx_model(str(tiny_model_dir), "full")
        yield model, tokenizer, cache


def test_the_export_computes_what_transformers_computes(exported, tiny_model):
    """Float32 both ways: the same next-token logits after the prompt and after generated tokens."""
    model, tokenizer, _ = exported
    onnx = OnnxBackend(model, tokenizer, copy_fields=False)
    hf = HFBackend(tiny_model, tokenizer, copy_fields=False)
    for backend in (onnx, hf):
        backend.start(MESSAGES)
    assert onnx.prompt_token_ids == hf.prompt_token_ids
    torch.testing.assert_close(onnx.next_token_logits(), hf.next_token_logits(), atol=2e-4, rtol=1e-4)
    pieces = "".join(onnx.stream(6))
    assert pieces == "".join(hf.stream(6))  # greedy, the same tokens
    torch.testing.assert_close(onnx.next_token_logits(), hf.next_token_logits(), atol=2e-4, rtol=1e-4)


def test_a_resume_crops_the_cache_like_a_fresh_turn(exported):
    """resume() rewinds ONNX Runtime's KV cache to the kept tokens; what follows matches a turn fed from
    scratch with the same text."""
    model, tokenizer, _ = exported
    backend = OnnxBackend(model, tokenizer, copy_fields=False)
    backend.start(MESSAGES)
    generated = "".join(backend.stream(8))
    inserted = generated[: len(generated) // 2] + " [MEM_READ{Dorothea Altemus>>employed by>>}: Pfizer]"
    backend.resume(inserted)
    fresh = OnnxBackend(model, tokenizer, copy_fields=False)
    fresh.start(MESSAGES)
    fresh.resume(inserted)
    assert backend.assistant_token_ids == fresh.assistant_token_ids
    torch.testing.assert_close(backend.next_token_logits(), fresh.next_token_logits(), atol=1e-5, rtol=1e-5)
    assert "".join(backend.stream(6)) == "".join(fresh.stream(6))


def test_the_export_is_made_once_and_counts_the_bytes_a_token_reads(exported, tiny_model_dir, tiny_model):
    model, _, cache = exported
    assert onnx_model_dir(str(tiny_model_dir), "full") == model.directory  # cached, not rebuilt
    assert model.threads == torch.get_num_threads()  # threads unset: one per core, not ONNX Runtime's one
    assert model.directory.parent == cache / "onnx"
    weights = sum(p.numel() * 4 for p in tiny_model.parameters())  # float32
    embeddings = tiny_model.get_input_embeddings().weight
    one_row = embeddings.shape[1] * 4
    # every weight once, of the input embeddings one row (the export fuses q, k, v: same bytes)
    assert model.bytes_per_token() == pytest.approx(weights - embeddings.numel() * 4 + one_row, rel=0.02)


def test_a_source_rewritten_at_the_same_size_is_exported_again(exported, tiny_model, tmp_path, monkeypatch):
    """A retrained adapter's merge is rewritten with the same byte count: the export follows the file as
    written, not its size alone, so it does not serve the old weights."""
    import os

    _, tokenizer, cache = exported
    monkeypatch.setenv("MEMLM_CACHE", str(cache))
    source = tmp_path / "retrained"
    tiny_model.save_pretrained(source)
    tokenizer.save_pretrained(source)
    first = onnx_model_dir(str(source), "full")
    made = (first / "model.onnx").stat().st_mtime_ns
    assert onnx_model_dir(str(source), "full") == first and (first / "model.onnx").stat().st_mtime_ns == made
    weights = next(source.glob("*.safetensors"))
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # rewritten: same size, later
    again = onnx_model_dir(str(source), "full")
    assert again == first and (again / "model.onnx").stat().st_mtime_ns != made


def test_a_turn_runs_through_the_runtime_with_its_memory(exported, tiny_model_dir, monkeypatch):
    """generation.engine onnx opens the export under the controller: a turn comes back with its text."""
    _, _, cache = exported
    monkeypatch.setenv("MEMLM_CACHE", str(cache))
    generation = Generation(model=str(tiny_model_dir), engine="onnx", weights="full", max_new_tokens=12, threads=1)
    runtime = open_runtime(generation)  # on one thread of ONNX Runtime (its session option)
    assert runtime.engine == "onnx" and runtime.device == "cpu" and runtime.model.threads == 1
    store = TripletStore(":memory:", runtime.memory)
    result = runtime.decoder.run_turn(runtime.request(MESSAGES[0]["content"], store))
    assert result.generated_tokens > 0 and result.text and result.model_seconds > 0
    assert isinstance(runtime.backend(), OnnxBackend)  # one turn at a time, as chat streams it


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"engine": "onnx", "device": "cuda"}, "runs on the CPU"),
        ({"engine": "onnx", "write_gate": {"score": True}}, "cannot score writes with the writer.s own signals"),
        ({"engine": "hf", "weights": "int4"}, "int4 is the onnx engine's"),
        ({"engine": "vllm", "weights": "int8"}, "vllm loads the checkpoint's own"),
    ],
)
def test_settings_the_onnx_engine_cannot_honour_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Generation.model_validate(fields)


def test_an_export_whose_model_is_gone_is_removed_at_the_next_export(exported, tmp_path, tiny_model, monkeypatch):
    import shutil

    _, tokenizer, cache = exported
    monkeypatch.setenv("MEMLM_CACHE", str(cache))
    gone = tmp_path / "gone-model"
    tiny_model.save_pretrained(gone)
    tokenizer.save_pretrained(gone)
    orphan = onnx_model_dir(str(gone), "full")
    shutil.rmtree(gone)
    assert orphan.is_dir()
    other = tmp_path / "other-model"
    tiny_model.save_pretrained(other)
    tokenizer.save_pretrained(other)
    onnx_model_dir(str(other), "full")
    assert not orphan.exists() and exported[0].directory.is_dir()  # the orphan went, a live export stayed


def test_a_turn_reuses_what_the_last_turn_left_and_interleaved_turns_stay_apart(exported, monkeypatch):
    """The model's cache of a thread is kept across turns: a turn with the last one's prompt feeds only
    its last token. Two backends taking turns on one thread each get what they get alone."""
    from memory_runtime.generation.onnx_backend import OnnxCache

    model, tokenizer, _ = exported
    other = [{"role": "user", "content": "Who founded Siemens? Ask the memory."}]

    def alone(messages):
        backend = OnnxBackend(model, tokenizer, copy_fields=False)
        backend.start(messages)
        first = backend.next_token_logits()
        return first, "".join(backend.stream(8))

    first_a, text_a = alone(MESSAGES)
    first_b, text_b = alone(other)
    fed: list[int] = []
    feed = OnnxCache.feed
    monkeypatch.setattr(OnnxCache, "feed", lambda self, ids: fed.append(len(ids)) or feed(self, ids))
    again = OnnxBackend(model, tokenizer, copy_fields=False)
    again.start(MESSAGES)
    torch.testing.assert_close(again.next_token_logits(), first_a, atol=1e-5, rtol=1e-5)
    assert fed[0] < len(again.prompt_token_ids)  # the shared start was not fed again
    a, b = OnnxBackend(model, tokenizer, copy_fields=False), OnnxBackend(model, tokenizer, copy_fields=False)
    a.start(MESSAGES)
    b.start(other)
    streams = {id(a): a.stream(8), id(b): b.stream(8)}
    texts = {id(a): "", id(b): ""}
    for _ in range(8):  # one piece each, in turn
        for backend in (a, b):
            texts[id(backend)] += next(streams[id(backend)], "")
    for backend in (a, b):
        texts[id(backend)] += "".join(streams[id(backend)])
    assert (texts[id(a)], texts[id(b)]) == (text_a, text_b)


def test_a_turn_longer_than_the_first_buffer_grows_it_and_computes_the_same(exported, monkeypatch):
    """The KV buffer starts short and doubles when a turn needs more: the logits are those of a long one."""
    from memory_runtime.generation.onnx_backend import OnnxCache

    model, tokenizer, _ = exported
    long_messages = [{"role": "user", "content": " ".join(["Dorothea Altemus is employed by Pfizer."] * 12)}]

    def first_logits():
        backend = OnnxBackend(model, tokenizer, copy_fields=False)
        backend.start(long_messages)
        return backend.next_token_logits(), len(backend.prompt_token_ids)

    wide, n = first_logits()
    model._caches.cache = None
    monkeypatch.setattr(OnnxCache, "START", 16)  # shorter than the prompt
    narrow, _ = first_logits()
    assert n > 16 and model.cache(min(OnnxBackend.max_length, model.context)).length >= n
    torch.testing.assert_close(narrow, wide, atol=1e-5, rtol=1e-5)


def test_a_model_the_builder_cannot_export_falls_back_to_hf_under_auto_and_is_refused_when_asked(
    exported, tiny_model_dir, tmp_path, monkeypatch
):
    """Gemma 3's config stops this builder ("KeyError: 'rope_type'"): auto says so and takes hf, once per model
    (the failure is kept); engine onnx asked by name is an error that says what to set."""
    import subprocess
    import types

    import memory_runtime.generation.onnx_backend as onnx_backend

    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "cache"))
    calls = []

    def builder_fails(command, **kwargs):
        calls.append(command)
        return types.SimpleNamespace(returncode=1, stderr="Traceback ...\nKeyError: 'rope_type'\n")

    monkeypatch.setattr(subprocess, "run", builder_fails)
    monkeypatch.setattr(onnx_backend, "onnx_installed", lambda: True)
    chat_like = Generation(model=str(tiny_model_dir), max_batch_size=1, device="cpu", dtype="float32")
    runtime = open_runtime(chat_like)
    assert runtime.engine == "hf" and runtime.generation.weights == "full"
    assert "onnx cannot export this model" in runtime.engine_reason and "rope_type" in runtime.engine_reason
    open_runtime(chat_like)
    assert len(calls) == 1  # the kept failure: not exported again
    with pytest.raises(ValueError, match="generation.engine=onnx: onnxruntime-genai .* cannot export .*set generation"):
        open_runtime(chat_like.model_copy(update={"engine": "onnx"}))


def test_a_server_measures_once_which_engine_serves_more_here_and_keeps_it(exported, tiny_model_dir, monkeypatch):
    """engine auto for a server on the CPU: hf's batches or onnx's turns one after another, whichever decoded
    more tokens a second on this machine, measured the first time (both engines really run) and read from
    $MEMLM_CACHE/serve_engine.json after; chat (one turn at a time) and an explicit engine never measure."""
    from memory_runtime.generation import engine_choice

    _, _, cache = exported
    monkeypatch.setenv("MEMLM_CACHE", str(cache))
    served = Generation(model=str(tiny_model_dir), weights="full", dtype="float32", max_batch_size=4, threads=1)
    runtime = open_runtime(served, serving=True)
    kept = json.loads((cache / "serve_engine.json").read_text())
    (figures,) = kept.values()
    assert figures["hf_tokens_per_s"] > 0 and figures["onnx_tokens_per_s"] > 0 and figures["batch"] == 4
    assert runtime.engine == figures["engine"] and runtime.engine_reason.startswith("auto: measured on this machine")

    def never(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(engine_choice, "_hf_tokens_per_s", never)
    monkeypatch.setattr(engine_choice, "_onnx_tokens_per_s", never)
    assert open_runtime(served, serving=True).engine == figures["engine"]  # kept: not measured again
    assert open_runtime(served.model_copy(update={"engine": "hf"}), serving=True).engine == "hf"
    assert open_runtime(served.model_copy(update={"max_batch_size": 1}), serving=True).engine == "onnx"  # chat's rule
    for hf, onnx, engine, said in ((10.0, 20.0, "onnx", "onnx, 2.00x"), (30.0, 20.0, "hf", "hf, 1.50x")):
        (cache / "serve_engine.json").unlink()
        monkeypatch.setattr(engine_choice, "_hf_tokens_per_s", lambda generation, batch, hf=hf: hf)
        monkeypatch.setattr(engine_choice, "_onnx_tokens_per_s", lambda generation, weights, onnx=onnx: onnx)
        runtime = open_runtime(served, serving=True)
        assert runtime.engine == engine and said in runtime.engine_reason, runtime.engine_reason
        assert runtime.generation.weights == "full"  # as asked (auto: int8 on onnx, full on hf)
