"""Batched decoding equals one turn at a time: the same greedy text, calls, statuses and token
counts, with reads pausing one row while the others decode, turns joining and leaving, and
sessions whose turns depend on each other."""

from __future__ import annotations

import copy

import pytest
import torch

from memory_runtime.generation import batching
from memory_runtime.generation.batching import BatchDecoder, OneAtATime
from memory_runtime.generation.hf_backend import HFBackend
from memory_runtime.generation.turn import TurnRequest, TurnResult, turn_messages
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT, render_read, render_results, render_write

PEOPLE = ["Dorothea Altemus", "Tia Batres", "Ansel Quigg", "Maren Oduya", "Lev Petrakis", "Wren Castellanos"]
ORGS = ["Pfizer", "Acme Rockets", "Blue Heron Labs", "Nordwind GmbH", "Okapi Foods", "Tessellate"]


def one_at_a_time(model, tokenizer, requests: list[TurnRequest]) -> list[TurnResult]:
    """The turns one at a time, each streamed by its own HFBackend (the one-at-a-time engine)."""
    return OneAtATime(lambda r: HFBackend(model, tokenizer, relations=r.store.config.relation_names)).run(requests)


def same(a: TurnResult, b: TurnResult) -> tuple:
    return (
        a.text,
        a.reply,
        a.status,
        a.generated_tokens,
        [(c.kind, c.text, c.status, c.results) for c in a.calls],
    ) == (b.text, b.reply, b.status, b.generated_tokens, [(c.kind, c.text, c.status, c.results) for c in b.calls])


def memory() -> TripletStore:
    store = TripletStore(":memory:")
    for person, org in zip(PEOPLE[:3], ORGS[:3]):
        store.write(person, "employed by", org, namespace="default")
    return store


@pytest.fixture(scope="module")
def caller(tiny_model, smollm2_tokenizer):
    """The tiny Llama trained until it writes and reads like memlm's records (a few seconds)."""
    model = copy.deepcopy(tiny_model).train()
    tok = smollm2_tokenizer
    from memory_runtime.records import Record, Segment
    from training.tokenize import tokenize_record

    def record(user, assistant, results=None, answer=""):
        segments = [Segment(role="user", text=user, train=False), Segment(role="assistant", text=assistant, train=True)]
        if results is not None:
            segments += [
                Segment(role="memory", text=results, train=False),
                Segment(role="assistant", text=answer, train=True),
            ]
        return Record(id=user, type="write", segments=segments)

    records = []
    for person, org in zip(PEOPLE, ORGS):
        records.append(record(f"{person} works for {org}.", render_write(person, "employed by", org) + " Noted."))
        facts = [(person, "employed by", org)]
        records.append(
            record(
                f"Who works for {org}?",
                render_read(None, "employed by", org),
                render_results(facts),
                f" {person} works for {org}.",
            )
        )
    rows = [tokenize_record(r, tok) for r in records]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):
        for row in rows:
            out = model(input_ids=torch.tensor([row["input_ids"]]), labels=torch.tensor([row["labels"]]))
            out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


# how a joining prompt and a read's results are fed: alone (one_forward_per_step false), beside the other rows
# in the step's forward padded to the longest (the GPU's way), or packed into one row (the CPU's)
LAYOUTS = {"alone": {"one_forward_per_step": False}, "padded": {"packed": False}, "packed": {}}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_reads_and_writes_in_a_batch_equal_one_at_a_time(caller, smollm2_tokenizer, layout):
    users = [f"Who works for {org}?" for org in ORGS] + [f"{p} works for {o}." for p, o in zip(PEOPLE, ORGS)]
    requests = lambda: [TurnRequest(turn_messages(u), memory(), max_new_tokens=40) for u in users]  # noqa: E731
    alone = one_at_a_time(caller, smollm2_tokenizer, requests())
    # 12 turns: rows join and leave
    decoder = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=4, **LAYOUTS[layout])
    assert decoder.packed is (layout == "packed")
    batched = decoder.run(requests())
    assert all(same(a, b) for a, b in zip(alone, batched)), [(a.text, b.text) for a, b in zip(alone, batched)]
    reads = [r for r in batched if any(c.kind == "read" for c in r.calls)]
    writes = [r for r in batched if any(c.kind == "write" and c.status == "stored" for c in r.calls)]
    assert len(reads) >= 4 and len(writes) >= 4  # the trained caller really pauses and writes
    assert any(c.results for r in reads for c in r.calls)  # results came from each row's own memory
    assert decoder.stats["steps"] < sum(r.generated_tokens for r in batched)  # rows shared forward passes
    # prompts prefilled alone: all of them, only the first (padded: the batch was empty), or none (packed)
    assert decoder.stats["prefills"] == {"alone": len(users), "padded": 1, "packed": 0}[layout]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_limits_end_turns_in_a_batch_as_they_do_alone(caller, smollm2_tokenizer, layout):
    users = [f"Who works for {org}?" for org in ORGS[:3]] + [
        f"{p} works for {o}." for p, o in zip(PEOPLE[3:], ORGS[3:])
    ]
    for limits in ({"max_new_tokens": 6}, {"max_new_tokens": 40, "max_calls": 1}, {"max_new_tokens": 12}):
        requests = lambda: [TurnRequest(turn_messages(u), memory(), **limits) for u in users]  # noqa: E731
        alone = one_at_a_time(caller, smollm2_tokenizer, requests())
        batched = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=3, **LAYOUTS[layout]).run(requests())
        assert all(same(a, b) for a, b in zip(alone, batched)), limits
    assert {r.status for r in alone} >= {"max_tokens"}


def test_a_session_waits_for_its_previous_turn(caller, smollm2_tokenizer):
    """An episode: the question is only asked once the statement's write is stored."""

    def episode(person, org):
        store = TripletStore(":memory:")
        statement = yield TurnRequest(turn_messages(f"{person} works for {org}."), store, max_new_tokens=40)
        question = yield TurnRequest(turn_messages(f"Who works for {org}?"), store, max_new_tokens=40)
        return statement, question, [f.triplet for f in store.facts()]

    done = []
    results = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=4).run_sessions(
        [episode(p, o) for p, o in zip(PEOPLE, ORGS)], progress=done.append
    )
    assert done == [1] * len(PEOPLE)  # progress(1) as each session ends
    for (_statement, question, facts), person, org in zip(results, PEOPLE, ORGS):
        if (person, "employed by", org) in facts:  # what it stored, it finds
            read = next(c for c in question.calls if c.kind == "read")
            assert (person, "employed by", org) in read.results


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_real_model_decodes_a_batch_as_it_decodes_alone(layout):
    """The real embedded model (real tokenizer, real weights): greedy turns, batched and alone, in float32.
    In bfloat16 a padded batch's sums round differently and a near-tie can flip (docs/decoding.md)."""
    from eval.systems import FEW_SHOT_PROMPT
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.loading import load_model

    model, tokenizer = load_model(EMBEDDED_MODEL, dtype="float32")
    users = [
        "Dorothea Altemus works for Pfizer.",
        "Who works for Halvorsen Shipping?",
        "Marcus Feld invested in BMW.",
        "Who founded Brightwater Mills?",
        "Where does Ilse Brandt work?",
        "Lev Petrakis manages Nordwind GmbH.",
    ]
    requests = lambda: [
        TurnRequest(turn_messages(u, system_prompt=FEW_SHOT_PROMPT), memory(), max_new_tokens=24)  # noqa: E731
        for u in users
    ]
    alone = one_at_a_time(model, tokenizer, requests())
    batched = BatchDecoder(model, tokenizer, max_batch_size=4, **LAYOUTS[layout]).run(requests())
    assert all(same(a, b) for a, b in zip(alone, batched)), [(a.text, b.text) for a, b in zip(alone, batched)]
    assert any(r.calls for r in batched)


def test_models_whose_cache_cannot_be_stacked_run_one_turn_at_a_time(caller, smollm2_tokenizer, monkeypatch):
    monkeypatch.setattr(batching, "supports", lambda model: False)
    users = [f"Who works for {org}?" for org in ORGS[:3]]
    requests = lambda: [TurnRequest(turn_messages(u), memory(), max_new_tokens=30) for u in users]  # noqa: E731
    decoder = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=8)
    assert not decoder.stackable
    batched = decoder.run(requests())
    assert all(same(a, b) for a, b in zip(one_at_a_time(caller, smollm2_tokenizer, requests()), batched))
    assert decoder.stats["steps"] == 0


class BrokenStore(TripletStore):
    """A memory whose disk is gone: every write raises what no controller expects."""

    def write_many(self, *args, **kwargs):
        raise RuntimeError("the disk is gone")


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_a_turn_that_fails_in_the_batch_fails_alone(caller, smollm2_tokenizer, layout):
    """One turn poisoned as it joins (a seed torch cannot take), one failing mid-turn (its memory's
    write): each ends with its own error, and every other turn of the batch ends as it does alone."""
    users = [f"Who works for {org}?" for org in ORGS[:3]] + [
        f"{p} works for {o}." for p, o in zip(PEOPLE[3:5], ORGS[3:5])
    ]
    requests = lambda: [TurnRequest(turn_messages(u), memory(), max_new_tokens=40) for u in users]  # noqa: E731
    alone = one_at_a_time(caller, smollm2_tokenizer, requests())
    decoder = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=4, **LAYOUTS[layout])
    good = requests()
    seeded = TurnRequest(turn_messages("Who works for Pfizer?"), memory(), max_new_tokens=40, seed=1)
    broken = TurnRequest(turn_messages(f"{PEOPLE[5]} works for {ORGS[5]}."), BrokenStore(), max_new_tokens=40)
    for request in [good[0], seeded, good[1], broken, *good[2:]]:
        decoder.submit(request)
    seeded.seed = 2**64  # as if a door skipped TurnRequest.check: torch's manual_seed overflows as it joins
    outcomes = {}
    while decoder.busy:
        outcomes.update({id(request): outcome for request, outcome in decoder.step()})
    assert isinstance(outcomes[id(seeded)], ValueError) and "Overflow" in str(outcomes[id(seeded)])
    assert isinstance(outcomes[id(broken)], RuntimeError) and "disk" in str(outcomes[id(broken)])
    assert all(same(a, outcomes[id(b)]) for a, b in zip(alone, good)), [outcomes[id(b)] for b in good]
    assert not decoder.active and decoder.cache.ids == []
    with pytest.raises(RuntimeError, match="disk"):  # a caller's own turns: run raises the failure
        decoder.run([TurnRequest(turn_messages(f"{PEOPLE[5]} works for {ORGS[5]}."), BrokenStore())])
    assert not decoder.busy


def test_bad_requests_are_refused_before_decoding(caller, smollm2_tokenizer):
    decoder = BatchDecoder(caller, smollm2_tokenizer)
    with pytest.raises(ValueError, match="temperature"):
        decoder.submit(TurnRequest(turn_messages("hi", system_prompt=SYSTEM_PROMPT), memory(), temperature=-1))
    for seed in (2**63, -(2**63) - 1, 1.5):
        with pytest.raises(ValueError, match="seed must be an integer"):
            decoder.submit(TurnRequest(turn_messages("hi"), memory(), seed=seed))
    with pytest.raises(ValueError, match="lone surrogate"):
        decoder.submit(TurnRequest(turn_messages("hi \ud800"), memory()))
    with pytest.raises(ValueError, match="max_batch_size"):
        BatchDecoder(caller, smollm2_tokenizer, max_batch_size=0)


def test_an_aborted_turn_leaves_the_batch_and_its_cache(tiny_model, smollm2_tokenizer):
    decoder = BatchDecoder(tiny_model, smollm2_tokenizer, max_batch_size=2)
    requests = [TurnRequest(turn_messages(u), memory(), max_new_tokens=20) for u in ("Hi.", "Who is it?", "Go.")]
    for request in requests:
        decoder.submit(request)
    decoder.step()  # two turns in the batch, one waiting
    assert (decoder.in_flight, len(decoder.active), decoder.room) == (3, 2, 0)
    assert decoder.prompt_tokens(requests[2]) > 2
    assert decoder.abort(requests[0]) and decoder.abort(requests[2]) and not decoder.abort(requests[0])
    assert decoder.in_flight == 1 and len(decoder.cache.ids) == 1
    while decoder.busy:
        finished = decoder.step()
    assert [r for r, _ in finished] == [requests[1]]
    decoder.submit(requests[0])
    decoder.step()
    decoder.abort_all()
    assert not decoder.busy and decoder.cache.ids == []


def test_open_relations_decode_in_a_batch_as_they_do_alone(caller, smollm2_tokenizer):
    """A memory of open relations (no relation names: relations are free) batches like any other."""
    from memory_runtime.memory.memory_config import MemoryConfig

    users = [f"{p} works for {o}." for p, o in zip(PEOPLE[:4], ORGS[:4])]
    config = MemoryConfig(open_relations=True)
    requests = lambda: [  # noqa: E731
        TurnRequest(turn_messages(u), TripletStore(":memory:", config), max_new_tokens=30) for u in users
    ]
    alone = one_at_a_time(caller, smollm2_tokenizer, requests())
    batched = BatchDecoder(caller, smollm2_tokenizer, max_batch_size=4).run(requests())
    assert all(same(a, b) for a, b in zip(alone, batched)), [(a.text, b.text) for a, b in zip(alone, batched)]
    assert any(c.kind == "write" and c.status == "stored" for r in batched for c in r.calls)


def test_a_proposed_turn_decodes_its_runs_together_as_it_decodes_them_alone(caller, smollm2_tokenizer):
    """generation.propose: the greedy run and its sampled runs join one batch (the session yields them as a
    list) and pool the same writes as when each run decodes alone."""
    from memory_runtime.generation.proposals import proposed_turn

    alone = OneAtATime(lambda request: HFBackend.for_request(caller, smollm2_tokenizer, request))  # its sampling
    outcomes = []
    for decoder in (alone, BatchDecoder(caller, smollm2_tokenizer, max_batch_size=4)):
        with TripletStore() as store:
            request = TurnRequest(turn_messages(f"{PEOPLE[4]} works for {ORGS[4]}."), store, max_new_tokens=40, seed=7)
            (result,) = decoder.run_sessions([proposed_turn(request, 4)])
            outcomes.append(
                ([(c.kind, c.fields, c.status, c.run) for c in result.calls], [f.triplet for f in store.facts()])
            )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1]  # it wrote
