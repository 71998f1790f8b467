"""Proposed turns (generation.propose): a turn's writes pooled over its greedy run and k - 1 sampled runs,
each sampled run against its own empty memory, what its gate held back never a candidate, a candidate
that would end the turn's own write not stored."""

from datetime import datetime

import pytest

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.proposals import SAMPLED_RUN, pooled, proposed_turn, with_proposals
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.turn import TurnRequest, TurnResult, turn_messages
from memory_runtime.generation.write_gate import WriteGate, WriteGateConfig
from memory_runtime.memory.store import TripletStore

# what each run of the turn writes, by its seed: None is the greedy run
RUNS = {
    None: "[MEM_WRITE{Cy Park>>employed by>>Initech}] Noted.",
    1: "[MEM_WRITE{cy park>>employed by>>Initech}] [MEM_WRITE{Cy Park>>founder of>>Hooli}] Noted.",
    2: "[MEM_WRITE{Cy Park>>employed by>>Acme}] [MEM_WRITE{Bo Chan>>CEO of>>Acme}] Noted.",  # another employer
    3: "[MEM_WRITE{Ann Lee>>employed by>>Initrode}] Noted.",  # held back by the gate
    4: "[MEM_WRITE{Cy Park>>employed by>>Acme}] [MEM_WRITE{bo chan>>CEO of>>Acme}] Noted.",  # as run 2: once each
}


class _TrustAllButInitrode:
    """A write scorer that doubts writes about Initrode."""

    def call(self, messages, prefix, call_text):
        return (0.2, 0.1) if "Initrode" in call_text else (0.9, 0.8)

    def verify(self, text, triplet):
        return 0.1 if triplet[2] == "Initrode" else 0.9


def decoder(requests: list) -> OneAtATime:
    def factory(request: TurnRequest):
        requests.append(request)
        return ScriptedBackend([[RUNS[request.seed]]])

    gate = WriteGate(WriteGateConfig(signal="call", threshold=0.5), _TrustAllButInitrode())
    return OneAtATime(factory, gate)


def test_a_proposed_turn_stores_what_the_sampled_runs_add_and_marks_the_run_that_proposed_it():
    requests: list = []
    said = datetime(2023, 5, 8, 13, 56)
    with TripletStore() as store:
        request = TurnRequest(
            turn_messages("Cy Park runs Initech."), store, namespace="alice", source="t1", said_at=said
        )
        (result,) = decoder(requests).run_sessions([proposed_turn(request, 5)])
        assert [(r.seed, r.temperature, r.top_p) for r in requests] == [
            (None, 0.0, 1.0),
            *((seed, SAMPLED_RUN["temperature"], SAMPLED_RUN["top_p"]) for seed in (1, 2, 3, 4)),
        ]
        assert all(r.store is not store for r in requests[1:])  # each sampled run on its own empty memory
        assert {f.triplet for f in store.facts("alice")} == {
            ("Cy Park", "employed by", "Initech"),
            ("Cy Park", "founder of", "Hooli"),
            ("Bo Chan", "CEO of", "Acme"),
        }
        assert {f.source for f in store.facts("alice")} == {"t1"} and {f.valid_from for f in store.facts("alice")} == {
            said.timestamp()
        }
    assert result.reply == "Noted." and result.text == RUNS[None]  # the greedy run's reply and text
    assert len(result.calls) == 4  # the greedy run's write, and runs 2 and 4's candidates once each
    by_fields = {c.fields: c for c in result.calls}
    assert [(c.run, c.status) for c in result.calls if c.kind == "write"] == [
        (0, "stored"),
        (1, "stored"),
        (2, "stored"),
    ]
    conflict = by_fields[("Cy Park", "employed by", "Acme")]
    assert conflict.kind == "error" and conflict.run == 2 and "Cy Park>>employed by>>Initech" in conflict.status
    assert ("Ann Lee", "employed by", "Initrode") not in by_fields  # held back in its run: no candidate
    assert by_fields[("Cy Park", "founder of", "Hooli")].scores  # the gate's scores in the trace


def test_one_run_or_a_correction_is_the_turn_alone():
    for k, gate_writes in ((1, True), (3, False)):
        requests: list = []
        with TripletStore() as store:
            request = TurnRequest(turn_messages("Cy Park runs Initech."), store, gate_writes=gate_writes)
            decoder(requests).run_sessions([proposed_turn(request, k)])
            assert len(requests) == 1 and [f.triplet for f in store.facts()] == [("Cy Park", "employed by", "Initech")]


def test_a_cancelled_turn_stores_no_proposal():
    with TripletStore() as store:
        request = TurnRequest(turn_messages("Cy Park runs Initech."), store)
        greedy = TurnResult("", "", [], "cancelled", 0, 0.0, 0.0, 0.0)
        requests: list = []
        sampled = decoder(requests).run([TurnRequest(turn_messages("x"), TripletStore(), seed=1)])
        assert pooled(request, greedy, sampled) is greedy and store.facts() == []


def test_with_proposals_pools_every_turn_of_a_session():
    requests: list = []

    def session(store):
        first = yield TurnRequest(turn_messages("Cy Park runs Initech."), store)
        second = yield TurnRequest(turn_messages("And?"), store)
        return [first.reply, second.reply]

    with TripletStore() as store:
        (replies,) = decoder(requests).run_sessions([with_proposals(session(store), 2)])
        assert replies == ["Noted.", "Noted."] and len(requests) == 4
        assert ("Cy Park", "founder of", "Hooli") in {f.triplet for f in store.facts()}


def test_propose_needs_a_gate():
    with pytest.raises(ValueError, match="propose: 3 pools the writes of sampled runs, which a write gate must judge"):
        Generation(propose=3)
    assert Generation(propose=3, write_gate={"score": True}).propose == 3
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Generation(propose=0)
