"""The decoder interface: every engine implements it, anything else is refused where an engine is
accepted (naming what it lacks), and the drivers every engine shares."""

from __future__ import annotations

import pytest

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import BatchDecoder, OneAtATime
from memory_runtime.generation.decoder import INTERFACE, Decoder, check_decoder
from memory_runtime.generation.turn import TurnRequest, turn_messages
from memory_runtime.memory.store import TripletStore


def test_an_engine_that_lacks_the_interface_is_refused_naming_what_it_lacks():
    class Stepper:  # a decoder as the scheduler once used one: a step and a queue
        waiting: list = []

        def step(self):
            return []

        def add(self, request):
            pass

    with pytest.raises(ValueError) as refused:
        check_decoder(Stepper(), "create_app(decoder=...)")
    message = str(refused.value)
    assert message.startswith("create_app(decoder=...): ")
    assert "tests.memory_runtime.generation.test_decoder." in message and "Stepper is not a decoder" in message
    lacks = [name for name in INTERFACE if name != "step"]
    assert message.endswith("it lacks " + ", ".join(lacks))
    assert {"submit", "abort", "abort_all", "prompt_tokens", "close"} <= set(lacks)


def test_an_object_with_every_member_must_still_be_a_turn_engine():
    class LookAlike:
        pass

    for name in INTERFACE:
        setattr(LookAlike, name, None)
    with pytest.raises(ValueError, match="LookAlike is not a decoder.*does not derive from Decoder"):
        check_decoder(LookAlike())


def test_a_turn_engine_that_leaves_a_method_out_cannot_be_made():
    class Half(Decoder):
        def submit(self, request):
            pass

        def step(self):
            return []

    with pytest.raises(TypeError, match="Half.*abort"):
        Half()


def test_every_engine_implements_the_interface(tiny_model, smollm2_tokenizer):
    from memory_runtime.generation.vllm_decoder import VLLMDecoder
    from tests.memory_runtime.generation.test_vllm_decoder import FakeEngine, script

    engines = [
        OneAtATime(lambda request: ScriptedBackend(["ok"])),
        BatchDecoder(tiny_model, smollm2_tokenizer),
        VLLMDecoder(FakeEngine(smollm2_tokenizer, script), smollm2_tokenizer),
    ]
    assert all(check_decoder(engine) is engine for engine in engines)


def test_one_at_a_time_drops_a_waiting_turn_and_runs_the_others():
    store = TripletStore()
    engine = OneAtATime(lambda request: ScriptedBackend([request.messages[-1]["content"].upper()]))
    first, second, third = (TurnRequest(turn_messages(t), store) for t in ("one", "two", "three"))
    for request in (first, second, third):
        engine.submit(request)
    assert engine.in_flight == 3 and engine.room == 0 and engine.busy
    assert engine.abort(second) and not engine.abort(second)
    assert [(r.messages[-1]["content"], t.reply) for r, t in engine.step() + engine.step()] == [
        ("one", "ONE"),
        ("three", "THREE"),
    ]
    engine.submit(first)
    engine.abort_all()
    assert not engine.busy and engine.step() == []
    assert engine.prompt_tokens(first) is None  # a streaming backend does not say


def test_one_at_a_time_fails_a_turn_alone_and_goes_on():
    """The onnx engine's way (one turn after another over a streaming backend): a turn whose backend
    breaks ends with its own error, the next turn runs; run() raises a caller's own failure."""

    def backend(request):
        if "poison" in request.messages[-1]["content"]:
            raise RuntimeError("the backend broke on this turn")
        return ScriptedBackend([request.messages[-1]["content"].upper()])

    engine = OneAtATime(backend)
    store = TripletStore()
    requests = [TurnRequest(turn_messages(t), store) for t in ("one", "poison", "three")]
    for request in requests:
        engine.submit(request)
    outcomes = [outcome for _ in requests for _, outcome in engine.step()]
    assert outcomes[0].reply == "ONE" and outcomes[2].reply == "THREE"
    assert isinstance(outcomes[1], RuntimeError) and not engine.busy
    with pytest.raises(RuntimeError, match="broke"):
        engine.run([TurnRequest(turn_messages("poison"), store)])


def test_a_request_no_engine_can_run_is_refused_when_submitted():
    engine = OneAtATime(lambda request: ScriptedBackend(["ok"]))
    for bad, why in (({"top_p": 0}, "top_p"), ({"max_new_tokens": 0}, "max_new_tokens"), ({"temperature": -1}, "temp")):
        with pytest.raises(ValueError, match=why):
            engine.submit(TurnRequest(turn_messages("hi"), TripletStore(), **bad))
    assert not engine.busy
