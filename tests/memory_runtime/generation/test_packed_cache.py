"""A packed cache gives every sequence the logits it would get alone: whole prompts joining beside
one-token steps, several tokens fed at once, a sequence that feeds nothing, tokens taken back,
sequences leaving, compaction, and an emptied cache filled again."""

from __future__ import annotations

import pytest
import torch

from memory_runtime.generation.packed_cache import PackedCache
from tests.memory_runtime.generation.test_batch_cache import alone, prefill

CPU = torch.device("cpu")


def check(model, packed: PackedCache, seqs: dict, feeds: dict) -> None:
    """Feed `feeds` (key -> tokens) in one step and compare every feeding sequence with itself alone."""
    for key, tokens in feeds.items():
        seqs[key] += tokens
    logits = packed.forward(model, [feeds.get(key, []) for key in packed.ids], CPU)
    assert logits.shape[0] == len(packed.ids)
    for b, key in enumerate(packed.ids):
        if feeds.get(key):
            torch.testing.assert_close(logits[b], alone(model, seqs[key]), atol=1e-4, rtol=1e-4)


def test_sequences_of_a_packed_cache_compute_what_they_would_alone(tiny_model):
    torch.manual_seed(0)
    prompts = {key: torch.randint(10, 2000, (n,)).tolist() for key, n in (("a", 7), ("b", 3), ("c", 12))}
    seqs: dict[str, list[int]] = {key: [] for key in prompts}
    packed = PackedCache()
    for key in ("a", "b"):
        packed.join_empty(key)
    check(tiny_model, packed, seqs, {"a": prompts["a"], "b": prompts["b"]})  # two whole prompts, one pass
    assert packed.width == 10 and packed.cached("a") == 7

    packed.join_empty("c")  # a long prompt beside one-token steps
    check(tiny_model, packed, seqs, {"a": [11], "b": [12], "c": prompts["c"]})
    check(tiny_model, packed, seqs, {"a": [13], "b": [22, 23, 24, 25], "c": [14]})  # a read's results
    check(tiny_model, packed, seqs, {"a": [26], "c": [27]})  # b feeds nothing this step

    packed.crop("a", len(seqs["a"]) - 2)  # two tokens taken back
    seqs["a"] = seqs["a"][:-2]
    check(tiny_model, packed, seqs, {"a": [17], "b": [18], "c": [19]})
    packed.leave({"b"})
    assert packed.wasteful() is False  # a few dead columns: not worth a compaction yet
    width = packed.width
    packed.compact()
    assert packed.width == width - len(seqs["b"]) - 2 == len(seqs["a"]) + len(seqs["c"])
    assert packed.ids == ["a", "c"] and packed.cached("a") == len(seqs["a"])
    check(tiny_model, packed, seqs, {"a": [20], "c": [21]})

    packed.leave({"a", "c"})  # empty: the next sequence starts a new row
    assert packed.width == 0 and packed.cache is None
    packed.join_empty("d")
    seqs["d"] = []
    check(tiny_model, packed, seqs, {"d": prompts["b"]})


def test_long_feeds_run_alone_and_join_the_row_as_columns_of_their_own(tiny_model):
    """A long prompt prefilled alone joins an empty cache and a busy one; a long read result runs alone."""
    torch.manual_seed(1)
    prompts = {key: torch.randint(10, 2000, (n,)).tolist() for key, n in (("a", 30), ("b", 4), ("c", 25))}
    seqs = {key: list(prompts[key][:-1]) for key in prompts}
    seqs["b"] = []  # b joins empty: its whole prompt rides
    packed = PackedCache()
    packed.join("a", prefill(tiny_model, seqs["a"]), len(seqs["a"]))  # the first: the row is its cache
    packed.join_empty("b")
    check(tiny_model, packed, seqs, {"a": prompts["a"][-1:], "b": prompts["b"]})
    packed.join("c", prefill(tiny_model, seqs["c"]), len(seqs["c"]))  # beside others
    assert packed.cached("c") == 24 and packed.width == 29 + 1 + 4 + 24
    check(tiny_model, packed, seqs, {"a": [11], "b": [12], "c": prompts["c"][-1:]})
    results = torch.randint(10, 2000, (20,)).tolist()
    seqs["b"] += results
    torch.testing.assert_close(
        packed.extend(tiny_model, "b", results, CPU), alone(tiny_model, seqs["b"]), atol=1e-4, rtol=1e-4
    )
    check(tiny_model, packed, seqs, {"a": [13], "b": [14], "c": [15]})


def test_dead_columns_are_compacted_once_they_are_most_of_the_row(tiny_model):
    packed = PackedCache()
    packed.join_empty("a")
    packed.join_empty("b")
    packed.forward(tiny_model, [list(range(10, 110)), [5, 6]], CPU)
    packed.leave({"a"})
    assert packed.wasteful()  # 100 dead columns against 2 live


def test_a_step_needs_one_feed_per_sequence_and_some_token(tiny_model):
    packed = PackedCache()
    packed.join_empty("a")
    with pytest.raises(ValueError, match="one feed per sequence"):
        packed.forward(tiny_model, [[]], CPU)
    with pytest.raises(ValueError, match="one feed per sequence"):
        packed.forward(tiny_model, [[1], [2]], CPU)
