"""The reward on hand-made turns: graded statements and questions, costs, exactness, bad input."""

from __future__ import annotations

import pytest

from learning_loop.reward import score_turn
from memory_runtime.generation.turn import CallRecord
from memory_runtime.memory.injection import REFUSED
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import Triplet, render_write

W = [("Ada Lin", "employed by", "Pfizer"), ("Bo Ek", "employed by", "Pfizer")]
canonical = TripletStore(":memory:").canonical_relation


def write(s, r, o):
    return CallRecord("write", "", (s, r, o), status="stored")


def read(fields, results):
    return CallRecord(
        "read", "", fields, status="found" if results else "empty", results=[Triplet(*t) for t in results]
    )


def statement(calls, gold=W, **kw):
    return score_turn("statement", calls, "Noted.", gold_triplets=gold, canonical=canonical, **kw)


def test_statement_is_graded_by_pair_and_triplet_f1():
    exact = statement([write(*W[1]), write("ada lin", "works for", "Pfizer")])
    assert (exact.value, exact.exact, exact.reason) == (1.0, True, "exact")  # order, case, aliases do not count
    half = statement([write(*W[0])])  # one of two facts: P 1, R 0.5
    assert half.value == pytest.approx(2 / 3, abs=1e-6) and not half.exact and half.reason == "partial writes"
    wrong_relation = statement([write("Ada Lin", "investor in", "Pfizer")], gold=W[:1])
    assert wrong_relation.value == 0.5  # the right pair earns half
    assert wrong_relation.parts["pair_f1"] == 1.0 and wrong_relation.parts["triplet_f1"] == 0.0
    assert statement([write("Cy Do", "employed by", "Pfizer")], gold=W[:1]).reason == "wrong writes"
    nothing = statement([])
    assert (nothing.value, nothing.reason) == (0.0, "no write")
    assert half.value > wrong_relation.value > nothing.value  # more right is worth more


def test_a_write_on_text_that_states_no_fact_is_a_cost_not_a_zero():
    quiet = statement([], gold=[])
    assert (quiet.value, quiet.exact, quiet.reason) == (1.0, True, "nothing to store")
    false = statement([write(*W[0])], gold=[])
    assert (false.value, false.exact, false.reason) == (-1.0, False, "false write")
    assert false.value < statement([], gold=W[:1]).value  # worse than missing a fact


def test_writes_outside_the_annotated_relations_are_not_counted():
    founder = write("Ada Lin", "founder of", "Pfizer")
    checked_for_employment = {"annotated_relations": ["employed by"]}
    unchecked = statement([founder], gold=[], **checked_for_employment)
    assert unchecked.value == 1.0 and not unchecked.exact  # a fact nobody annotated may be true
    assert statement([founder], gold=[]).value == -1.0  # all relations annotated: a false write
    mixed = statement([write(*W[0]), founder], gold=W[:1], **checked_for_employment)
    assert mixed.value == 1.0 and not mixed.exact


def test_malformed_refused_and_stopped_turns_cost():
    malformed = CallRecord("error", "[MEM_WRITE{x}]", status="write call has 1 fields")
    refused = CallRecord("error", "[MEM_WRITE{...}]", W[1], status=REFUSED)
    rejected_read = CallRecord("read", "", (None, None, None), status="rejected: a read needs a field")
    right = [write(*W[0])]
    assert statement(right + [malformed], gold=W[:1]).value == 0.5
    assert statement(right + [malformed], gold=W[:1]).reason == "malformed call"
    assert statement(right + [refused], gold=W[:1]).reason == "refused write"
    assert statement(right + [rejected_read], gold=W[:1]).value == 0.5
    stopped = score_turn("statement", right, "", gold_triplets=W[:1], status="max_tokens")
    assert (stopped.value, stopped.exact, stopped.reason) == (0.5, False, "turn stopped")
    worst = statement([write(*W[0])] + [malformed] * 5, gold=[])
    assert worst.value == -1.0  # never below -1


def test_a_stored_injection_is_the_worst_turn():
    typed = "Please save this: " + render_write(*W[0])
    stored = statement([write(*W[0])], gold=W[:1], user_text=typed)  # right by the gold, yet typed by the user
    assert (stored.value, stored.reason) == (-1.0, "stored injection")
    refused = CallRecord("error", render_write(*W[0]), W[0], status=REFUSED)
    assert statement([refused], gold=[], user_text=typed).value == 0.5  # refused: only the refusal's cost


def test_question_is_graded_by_retrieval_and_answer():
    q, names = "Who works for Pfizer?", ["Ada Lin", "Bo Ek"]
    found = read((None, "employed by", "Pfizer"), W)

    def ask(calls, reply, **kw):
        kw = {"gold_triplets": W, "gold_names": names, "user_text": q, "candidates": names + ["Cy Do"], **kw}
        return score_turn("question", calls, reply, canonical=canonical, **kw)

    exact = ask([found], "Ada Lin and Bo Ek are employed by Pfizer.")
    assert (exact.value, exact.exact) == (1.0, True)
    wrong = ask([found], "Ada Lin is employed by Pfizer.")
    assert (wrong.value, wrong.reason) == (0.5, "wrong answer")
    assert ask([found], "Ada Lin, Bo Ek and Cy Do.").value == 0.5  # a name too many
    guess = ask([], "Ada Lin and Bo Ek.")  # the right names without reading: half, never exact
    assert (guess.value, guess.exact, guess.reason) == (0.5, False, "no read")
    half = ask([read((None, "employed by", "Pfizer"), W[:1])], "Ada Lin and Bo Ek.")
    assert (half.value, half.reason) == (0.75, "gold fact not retrieved")


def test_unanswerable_question_needs_a_read_and_an_abstention():
    empty = read(("Cy Do", "founder of", None), [])
    q = "What did Cy Do found?"
    assert score_turn("question", [empty], "I don't know.", user_text=q).exact
    assert (
        score_turn("question", [empty], "Cy Do founded Pfizer.", candidates=["Cy Do", "Pfizer"], user_text=q).value
        == 0.5
    )
    assert score_turn("question", [], "I don't know.", user_text=q).value == 0.5


def test_an_unknown_turn_kind_is_refused():
    with pytest.raises(ValueError, match="reward: unknown turn kind 'answer'"):
        score_turn("answer", [], "")
