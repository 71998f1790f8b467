"""The self-instruct reward on hand-made trajectories: exact, partial, wrong."""

from __future__ import annotations

from learning_loop.reward import reward
from memory_runtime.generation.controller import CallRecord
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import Triplet

W = [("Ada Lin", "employed by", "Pfizer"), ("Bo Ek", "employed by", "Pfizer")]
canonical = TripletStore(":memory:").canonical_relation


def write(s, r, o):
    return CallRecord("write", "", (s, r, o), status="stored")


def read(fields, results):
    return CallRecord(
        "read", "", fields, status="found" if results else "empty", results=[Triplet(*t) for t in results]
    )


def test_statement_exact_partial_wrong():
    exact = reward(
        "statement",
        [write(*W[1]), write("ada lin", "works for", "Pfizer")],
        "Noted.",
        gold_triplets=W,
        canonical=canonical,
    )
    assert exact.value == 1  # order, case and relation aliases do not count
    partial = reward("statement", [write(*W[0])], "Noted.", gold_triplets=W, canonical=canonical)
    assert (partial.value, partial.reason) == (0, "partial writes")
    extra = reward(
        "statement",
        [write(*W[0]), write(*W[1]), write("Ada Lin", "manager of", "Pfizer")],
        "Noted.",
        gold_triplets=W,
        canonical=canonical,
    )
    assert extra.value == 0
    wrong = reward("statement", [write("Ada Lin", "investor in", "Pfizer")], "Noted.", gold_triplets=W[:1])
    assert (wrong.value, wrong.reason) == (0, "wrong writes")
    assert reward("statement", [], "Noted.", gold_triplets=W).reason == "no write"


def test_malformed_call_or_stopped_turn_scores_zero():
    bad = CallRecord("error", "[MEM_WRITE{x}]", status="write call has 1 fields")
    assert reward("statement", [write(*W[0]), bad], "Noted.", gold_triplets=W[:1]).value == 0
    assert reward("statement", [write(*W[0])], "", gold_triplets=W[:1], status="max_tokens").value == 0


def test_question_exact_partial_wrong():
    q = "Who works for Pfizer?"
    found = read((None, "employed by", "Pfizer"), W)
    names = ["Ada Lin", "Bo Ek"]
    ok = reward(
        "question",
        [found],
        "Ada Lin and Bo Ek are employed by Pfizer.",
        gold_triplets=W,
        gold_names=names,
        question=q,
        candidates=names + ["Pfizer", "Cy Do"],
    )
    assert ok.value == 1
    partial = reward(
        "question",
        [found],
        "Ada Lin is employed by Pfizer.",
        gold_triplets=W,
        gold_names=names,
        question=q,
        candidates=names,
    )
    assert (partial.value, partial.reason) == (0, "wrong answer")
    extra = reward(
        "question",
        [found],
        "Ada Lin, Bo Ek and Cy Do.",
        gold_triplets=W,
        gold_names=names,
        question=q,
        candidates=names + ["Cy Do"],
    )
    assert extra.value == 0
    # the right names without reading the memory (a guess) or without the gold facts retrieved
    assert reward("question", [], "Ada Lin and Bo Ek.", gold_triplets=W, gold_names=names).reason == "no read"
    half = read((None, "employed by", "Pfizer"), W[:1])
    assert (
        reward("question", [half], "Ada Lin and Bo Ek.", gold_triplets=W, gold_names=names, candidates=names).reason
        == "gold fact not retrieved"
    )


def test_unanswerable_question_needs_a_read_and_an_abstention():
    empty = read(("Cy Do", "founder of", None), [])
    assert reward("question", [empty], "I don't know.", question="What did Cy Do found?").value == 1
    assert (
        reward(
            "question",
            [empty],
            "Cy Do founded Pfizer.",
            candidates=["Cy Do", "Pfizer"],
            question="What did Cy Do found?",
        ).value
        == 0
    )
