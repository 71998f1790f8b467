"""The one runtime: the generation section every command embeds, and the model with its memory it opens."""

from __future__ import annotations

import pytest

from memory_runtime.generation.batching import BatchDecoder
from memory_runtime.generation.runtime import Generation, choose_engine, open_runtime
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.yaml_config import ConfigError


def test_a_command_keeps_its_own_defaults_when_a_section_sets_some_fields():
    from eval.eval_config import EvalConfig
    from memory_runtime.serving.chat import ChatConfig
    from memory_runtime.serving.serve_config import ServeConfig

    def limits(cls, *overrides):
        generation = cls.load(None, [*overrides, "generation.device=cpu"]).generation
        return generation.max_new_tokens, generation.max_calls, generation.max_batch_size

    assert limits(ServeConfig) == (256, 16, 8)
    assert limits(ChatConfig) == (256, 16, 1)  # a chat runs one turn at a time
    assert limits(ChatConfig, "generation.max_new_tokens=64") == (64, 16, 1)
    assert limits(EvalConfig, "generation.model=RUN") == (128, 8, None)  # shorter turns, batched by device
    assert EvalConfig.load(None, ["generation.model=RUN", "generation.device=cpu"]).generation.batch_size() == 8


def test_an_engine_that_cannot_honour_the_section_is_refused_before_anything_loads():
    with pytest.raises(ConfigError, match="engine"):
        Generation.load(None, ["engine=fastest"])  # auto, hf, vllm or onnx
    with pytest.raises(ConfigError, match="vllm engine cannot score writes with the writer.s own signals"):
        Generation.load(None, ["engine=vllm", "write_gate.signal=call"])
    with pytest.raises(ConfigError, match="one_forward_per_step: the hf engine's batches"):
        Generation.load(None, ["engine=onnx", "one_forward_per_step=true"])  # a setting it would ignore
    from eval.eval_config import EvalConfig

    with pytest.raises(ConfigError, match="model: Field required"):
        EvalConfig.load(None, ["limit=3"])


def test_open_runtime_gives_the_model_with_its_memory(tiny_model_dir, tmp_path):
    memory = tmp_path / "memory.yaml"
    memory.write_text("fuzzy: {threshold: 0.9}\n")
    generation = Generation(model=str(tiny_model_dir), dtype="float32", max_new_tokens=4, memory_config=str(memory))
    runtime = open_runtime(generation)
    assert isinstance(runtime.decoder, BatchDecoder) and runtime.decoder.max_batch_size == 8
    assert runtime.memory == MemoryConfig.load(memory) and runtime.dtype == "float32"
    with runtime.open_store() as store:
        assert store.config.fuzzy.threshold == 0.9
        request = runtime.request("Ada Lin works for Pfizer.", store, "alice", source="test")
        assert request.max_new_tokens == 4 and request.messages[0]["content"] == runtime.system_prompt
        turn = runtime.decoder.run_turn(request)
        assert turn.generated_tokens <= 4
    assert runtime.decoder.one_forward_per_step and runtime.decoder.packed  # unset, on the CPU: fed packed


def test_one_forward_per_step_reaches_the_batch_engines_of_a_runtime_and_of_eval(tiny_model_dir):
    from eval.systems import System

    runtime = open_runtime(Generation(model=str(tiny_model_dir), engine="hf", one_forward_per_step=False))
    assert runtime.decoder.one_forward_per_step is False and not runtime.decoder.packed
    assert System.under_test(runtime).decoder_for(batch_size=4).one_forward_per_step is False


def test_a_turn_takes_the_section_limits_and_the_door_overrides_only_what_it_names():
    """Generation.request is the one request builder: the section's four settings, per-turn fields as given."""
    from memory_runtime.generation.turn import turn_messages
    from memory_runtime.memory.store import TripletStore

    generation = Generation(max_new_tokens=32, max_calls=3, temperature=0.5, top_p=0.8)
    with TripletStore() as store:
        plain = generation.request(turn_messages("hi"), store)
        asked = generation.request(turn_messages("hi"), store, namespace="bob", seed=7, source="s1", max_new_tokens=8)
    assert (plain.max_new_tokens, plain.max_calls, plain.temperature, plain.top_p) == (32, 3, 0.5, 0.8)
    assert (plain.namespace, plain.seed, plain.source) == ("default", None, None)
    assert (asked.max_new_tokens, asked.max_calls, asked.temperature) == (8, 3, 0.5)
    assert (asked.namespace, asked.seed, asked.source) == ("bob", 7, "s1")
    with pytest.raises(TypeError):  # a misspelt per-turn field fails where it is written, not silently
        generation.request(turn_messages("hi"), store, sead=7)


def test_every_door_builds_the_hf_decoder_as_the_section_says(tiny_model, smollm2_tokenizer):
    """BatchDecoder.of: the one factory of the hf engine's decoder (runtime, eval, GRPO, the engine measurement)."""
    generation = Generation(max_batch_size=3, copy_fields=False, one_forward_per_step=False)
    decoder = BatchDecoder.of(generation, tiny_model, smollm2_tokenizer)
    assert (decoder.max_batch_size, decoder.copy_fields, decoder.one_forward_per_step) == (3, False, False)
    assert BatchDecoder.of(generation, tiny_model, smollm2_tokenizer, batch_size=5).max_batch_size == 5


def test_eval_opens_its_systems_on_the_vllm_engine(monkeypatch, smollm2_tokenizer, tiny_model_dir):
    from eval.eval_config import EvalConfig
    from eval.run import load_systems
    from memory_runtime.generation import vllm_decoder
    from memory_runtime.memory.store import TripletStore
    from tests.memory_runtime.generation.test_vllm_decoder import decoder

    opened = {}

    def fake_engine(model, **settings):
        opened.update(settings, model=model)
        return decoder(smollm2_tokenizer)[1]

    monkeypatch.setattr(vllm_decoder, "load_vllm_decoder", fake_engine)
    overrides = [f"generation.model={tiny_model_dir}", "generation.engine=vllm", "generation.device=cpu"]
    systems = load_systems(EvalConfig.load(None, [*overrides, "systems=[memlm, few_shot]"]))
    assert opened["model"] == str(tiny_model_dir) and opened["max_batch_size"] == 8  # null: 8 on the CPU
    assert systems["memlm"].decoder is not None and systems["few_shot"].decoder is not None  # one engine
    with TripletStore() as store:
        turn = systems["memlm"].turn("Tia Batres works for Pfizer.", store)
        assert [c.kind for c in turn.calls] == ["write"] and store.facts()[0].subject == "Tia Batres"


def test_auto_takes_vllm_where_it_is_installed_unless_the_model_must_run_here(monkeypatch):
    from memory_runtime.generation import runtime

    monkeypatch.setattr(runtime, "vllm_installed", lambda: False)
    assert choose_engine(Generation()) == (
        "hf",
        "auto: vLLM is not installed here",
    )
    monkeypatch.setattr(runtime, "vllm_installed", lambda: True)
    assert choose_engine(Generation()) == ("vllm", "auto: vLLM is installed here")
    assert choose_engine(Generation(engine="hf")) == ("hf", "generation.engine")
    assert choose_engine(Generation(), hf_because="chat needs it")[0] == "hf"
    gated = Generation.load(None, ["write_gate.signal=call"])
    assert choose_engine(gated) == ("hf", "auto: the write gate scores writes with the model in this process")
    section, why = Generation(max_new_tokens=9).on_engine()
    assert section.engine == "vllm" and section.max_new_tokens == 9 and why == "auto: vLLM is installed here"


def test_commands_that_need_the_model_here_run_on_hf(monkeypatch):
    from eval.eval_config import EvalConfig
    from eval.run import on_engine
    from learning_loop.self_instruct import SelfInstructConfig
    from memory_runtime.generation import runtime
    from memory_runtime.serving.chat import ChatConfig
    from memory_runtime.serving.serve_config import ServeConfig

    monkeypatch.setattr(runtime, "vllm_installed", lambda: True)
    assert SelfInstructConfig().generation.engine == "hf"  # its sentences stream from the model in this process
    with pytest.raises(ConfigError, match="self-instruct writes its sentences with the model in this process"):
        SelfInstructConfig.load(None, ["generation.engine=vllm"])
    # chat runs on the engine serve and eval open: generation.engine means the same everywhere
    assert choose_engine(ChatConfig().generation)[0] == choose_engine(ServeConfig().generation)[0] == "vllm"
    assert ChatConfig.load(None, ["generation.engine=vllm"]).generation.engine == "vllm"
    evaluated = EvalConfig.load(None, ["generation.model=RUN"])
    assert on_engine(evaluated)[0].generation.engine == "vllm"
    several = on_engine(evaluated.model_copy(update={"workers": 2}))
    assert several[0].generation.engine == "hf" and "workers" in several[1]
    other_base = on_engine(evaluated.model_copy(update={"base": "other/base", "systems": ["memlm", "few_shot"]}))
    assert other_base[0].generation.engine == "hf" and "other/base" in other_base[1]


def test_open_runtime_on_auto_opens_vllm_where_installed(monkeypatch, smollm2_tokenizer, tiny_model_dir):
    from memory_runtime.generation import runtime, vllm_decoder
    from tests.memory_runtime.generation.test_vllm_decoder import decoder

    monkeypatch.setattr(runtime, "vllm_installed", lambda: True)
    monkeypatch.setattr(vllm_decoder, "load_vllm_decoder", lambda model, **_: decoder(smollm2_tokenizer)[1])
    opened = open_runtime(Generation(model=str(tiny_model_dir), device="cpu"))
    assert opened.engine == "vllm" and opened.model is None and opened.engine_reason == "auto: vLLM is installed here"
    assert "on vllm (auto: vLLM is installed here)" in opened.describe()
    kept = open_runtime(Generation(model=str(tiny_model_dir), device="cpu", dtype="float32"), hf_because="chat")
    assert kept.engine == "hf" and kept.model is not None and kept.engine_reason == "auto: chat"


def test_a_trained_model_opens_its_memory_with_the_relations_it_learned(tmp_path):
    """A run keeps the relation table of its data's schema (relations.yaml): its memory is opened with it,
    a memory config's other settings still apply, and a memory config's own table wins."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "relations.yaml").write_text(
        "relations:\n- {name: lives in, aliases: [resides in], functional: subject}\n- {name: allergic to}\n"
    )
    learned = Generation(model=str(run)).memory()
    assert learned.relation_names == ["lives in", "allergic to"]
    assert learned.canonical_names["resides in"] == "lives in" and learned.fuzzy == MemoryConfig.load().fuzzy
    fuzzy = tmp_path / "fuzzy.yaml"
    fuzzy.write_text("fuzzy: {threshold: 0.9}\n")
    both = Generation(model=str(run), memory_config=str(fuzzy)).memory()
    assert both.relation_names == ["lives in", "allergic to"] and both.fuzzy.threshold == 0.9
    own = tmp_path / "own.yaml"
    own.write_text("relations:\n- {name: likes}\n")
    assert Generation(model=str(run), memory_config=str(own)).memory().relation_names == ["likes"]
    assert Generation(model=str(tmp_path)).memory() == MemoryConfig.load()  # no table kept: memlm's own
    (run / "relations.yaml").write_text("relations:\n- {name: a, aliases: [b]}\n- {name: b}\n")
    with pytest.raises(ConfigError, match="relation table .*relations.yaml"):
        Generation(model=str(run)).memory()
