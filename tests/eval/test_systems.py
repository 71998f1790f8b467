"""eval/systems.py: a system's turns one at a time decode as a batch's rows do: the request's sampling (a
self-instruct probe samples) and its memory's relations and common objects (a conversational memory)."""

from __future__ import annotations

from eval.systems import System
from memory_runtime.generation.runtime import Generation
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore


def test_a_turn_alone_takes_the_requests_sampling_and_its_memorys_terms(tiny_model, smollm2_tokenizer):
    memory = MemoryConfig.model_validate(
        {"open_relations": True, "relations": [{"name": "works as", "common_object": True}]}
    )
    system = System("memlm", tiny_model, smollm2_tokenizer, Generation(temperature=0.7, top_p=0.9))
    with TripletStore(":memory:", memory) as store:
        request = system.request("Caroline: I work as a nurse.", store)
        request.seed = 3
        turn = system.decoder_for(1).backend_factory(request).turn
        batch_turn = system.decoder_for(2).backend_for(request).turn
    assert (turn.temperature, turn.top_p) == (0.7, 0.9) == (batch_turn.temperature, batch_turn.top_p)
    assert turn.common_objects == batch_turn.common_objects and "works as" in turn.common_objects
    assert turn.relations == batch_turn.relations


def test_eval_decodes_greedily_whatever_the_section_samples():
    """eval measures the model's best turn (its config's seed samples cases, not tokens): the section's limits
    and decoding stay, its sampling does not."""
    from eval.systems import greedy

    sampled = Generation(temperature=0.7, top_p=0.9, max_new_tokens=5, copy_fields=False)
    assert greedy(sampled).model_dump() == {**sampled.model_dump(), "temperature": 0.0, "top_p": 1.0}


def test_eval_pools_each_turns_writes_over_generation_propose_runs_as_chat_and_serve_do():
    """generation.propose=2: an episode's statement runs twice (greedy, then sampled on an empty memory) and the
    sampled run's new write is stored before the question; part real measures its runs itself."""
    from eval.systems import run_sessions
    from memory_runtime.generation.batching import OneAtATime
    from tests.memory_runtime.serving.test_serve import ProposingBackend

    generation = Generation(propose=2, write_gate={"score": True})
    system = System("memlm", None, None, generation, decoder=OneAtATime.over(ProposingBackend))

    def episode(store):
        yield system.request("Cy Park runs Initech and founded Hooli.", store)
        return [f.triplet for f in store.facts()]

    with TripletStore() as store:
        assert run_sessions(system, [episode(store)]) == [
            [("Cy Park", "employed by", "Initech"), ("Cy Park", "founder of", "Hooli")]
        ]
    with TripletStore() as store:
        assert run_sessions(system, [episode(store)], proposed=False) == [[("Cy Park", "employed by", "Initech")]]
