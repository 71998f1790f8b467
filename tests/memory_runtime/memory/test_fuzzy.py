import numpy as np
import pytest
from datasketch import MinHash
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_runtime.memory.fuzzy import FuzzyConfig, FuzzyIndex, jaccard, shingle_hash, shingles, signatures


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=8))
def test_bulk_signatures_equal_datasketch_minhash(terms):
    """Our numpy bulk path must give exactly datasketch's affine32 MinHash of the same shingles."""
    bulk = signatures(terms, num_perm=16, seed=3)
    for term, row in zip(terms, bulk):
        m = MinHash(num_perm=16, seed=3, hashfunc=shingle_hash)
        m.update_batch(list(shingles(term)))
        assert np.array_equal(m.hashvalues, row)


def test_shingles_are_padded_character_trigrams():
    assert shingles("abc") == {"  a", " ab", "abc", "bc ", "c  "}
    assert shingles("x") == {"  x", " x ", "x  "}
    assert jaccard(shingles("pfizer"), shingles("pfizer")) == 1.0


@pytest.fixture
def index():
    idx = FuzzyIndex()
    idx.add(["dorothea altemus", "pasquale ballif", "tia batres", "cyrus alfred", "dorothea smith"])
    return idx


def test_one_typo_finds_the_stored_term(index):
    for typo, truth in [
        ("dorothea altemas", "dorothea altemus"),
        ("pasqale ballif", "pasquale ballif"),
        ("tia batress", "tia batres"),
        ("cyrus alfreds", "cyrus alfred"),
    ]:
        match = index.search(typo)
        assert match is not None and match.term == truth, typo
        assert match.score == jaccard(shingles(typo), shingles(truth))


def test_unrelated_terms_are_not_matched(index):
    assert index.search("zebulon quartermaine") is None
    assert index.search("dorothea johnson") is None  # another person sharing a first name


def test_remove_and_readd(index):
    index.remove("tia batres")
    assert "tia batres" not in index and index.search("tia batress") is None
    index.add(["tia batres"])
    assert index.search("tia batress").term == "tia batres"
    assert len(index) == 5


def test_many_terms_recall(index):
    rng = np.random.default_rng(0)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    terms = sorted({"".join(rng.choice(letters, 8)) + " " + "".join(rng.choice(letters, 9)) for _ in range(3000)})
    big = FuzzyIndex()
    big.add(terms)
    hits = 0
    for term in terms[:200]:
        i = len(term) // 2
        typo = term[:i] + ("x" if term[i] != "x" else "y") + term[i + 1 :]
        hits += (m := big.search(typo)) is not None and m.term == term
    assert hits >= 196


def test_config_validation():
    with pytest.raises(ValueError, match="exceeds num_perm"):
        FuzzyConfig(num_perm=16, bands=10, rows=2)
    with pytest.raises(ValueError):
        FuzzyConfig(threshold=1.5)
