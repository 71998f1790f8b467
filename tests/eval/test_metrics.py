import pytest

from eval.metrics import (
    PRF,
    abstains,
    answer_correct,
    answer_exact,
    name_prf,
    names_in,
    pair_prf,
    token_f1,
    triplet_prf,
)

CANDIDATES = ["Ann Lee", "Ann Leeson", "Bob Stone", "Pfizer", "BMW"]


def test_prf_partial_credit_and_micro_average():
    a = triplet_prf(
        [("Ann Lee", "employed by", "Pfizer"), ("Bob Stone", "employed by", "BMW")],
        [("ann lee", "employed by", "Pfizer Inc"), ("Bob Stone", "employed by", "BMW")],
    )
    assert (a.tp, a.n_pred, a.n_gold) == (1, 2, 2)
    assert a.precision == a.recall == a.f1 == 0.5
    total = a + PRF(1, 1, 1)
    assert (total.precision, total.recall) == (2 / 3, 2 / 3)


def test_prf_of_empty_sets():
    assert PRF(0, 0, 0).f1 == 1.0  # nothing to find, nothing claimed: perfect
    assert PRF(0, 2, 0).precision == 0.0 and PRF(0, 0, 2).recall == 0.0


def test_triplets_compare_normalised_terms_and_canonical_relations():
    canonical = {"works for": "employed by"}.get
    got = triplet_prf(
        [("ANN LEE", "works for", "pfizer.")], [("Ann Lee", "employed by", "Pfizer")], lambda r: canonical(r, r)
    )
    assert got.f1 == 1.0
    assert triplet_prf([("Ann Lee", "founder of", "Pfizer")], [("Ann Lee", "employed by", "Pfizer")]).f1 == 0.0
    assert pair_prf([("Ann Lee", "founder of", "Pfizer")], [("Ann Lee", "employed by", "Pfizer")]).f1 == 1.0


def test_answer_exact_and_token_f1():
    assert answer_exact("Ann Lee and Bob Stone.", "ann lee and bob stone")
    assert not answer_exact("Ann Lee.", "Ann Lee and Bob Stone.")
    assert token_f1("Ann Lee.", "Ann Lee and Bob Stone.") == pytest.approx(2 * 1 * 0.4 / 1.4)
    assert token_f1("", "") == 1.0
    assert token_f1("", "Ann Lee") == 0.0
    assert token_f1("The Pfizer", "Pfizer") == 1.0  # articles do not count


def test_names_in_prefers_the_longest_name():
    assert names_in("Ann Leeson works there.", CANDIDATES) == {"ann leeson"}
    assert names_in("Ann Lee, Ann Leeson, and BMW.", CANDIDATES) == {"ann lee", "ann leeson", "bmw"}
    assert names_in("Nobody.", CANDIDATES) == set()


def test_name_prf_and_answer_correct():
    got = name_prf("Ann Lee and Bob Stone.", ["Ann Lee"], CANDIDATES)
    assert (got.precision, got.recall) == (0.5, 1.0)
    assert answer_correct("Ann Lee and Bob Stone.", ["Bob Stone", "Ann Lee"], CANDIDATES)
    assert not answer_correct("Ann Lee.", ["Bob Stone", "Ann Lee"], CANDIDATES)
    assert not answer_correct("Ann Lee and Bob Stone.", ["Ann Lee"], CANDIDATES)


def test_abstention():
    assert abstains("I don't know.") and abstains("Sorry, I do not know that.")
    assert not abstains("Ann Lee.")
    assert answer_correct("I don't know.", [], CANDIDATES)
    assert not answer_correct("I don't know, maybe Ann Lee.", [], CANDIDATES)  # names a person anyway
    assert not answer_correct("", [], CANDIDATES)  # an empty answer is not an abstention


def test_context_names_may_be_repeated_but_not_wrong_ones():
    # "Who works for Pfizer?" -> "Ann Lee is employed by Pfizer.": Pfizer is context, not a listed name
    assert answer_correct("Ann Lee is employed by Pfizer.", ["Ann Lee"], CANDIDATES, context=["Pfizer"])
    assert not answer_correct("Ann Lee is employed by Pfizer.", ["Ann Lee"], CANDIDATES)
    assert not answer_correct("Ann Lee and Bob Stone work for Pfizer.", ["Ann Lee"], CANDIDATES, context=["Pfizer"])
    # a gold name stays required even when the question gave it
    assert not answer_correct("Yes.", ["Ann Lee", "Pfizer"], CANDIDATES, context=["Ann Lee", "Pfizer"])
    assert name_prf("Bob Stone works for BMW.", ["Ann Lee"], CANDIDATES, context=["BMW"]).precision == 0.0
