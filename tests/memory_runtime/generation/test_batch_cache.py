"""A stacked cache gives every row the logits it would get alone: across joins of different
lengths, blocks of different widths, tokens taken back, rows leaving and compaction."""

from __future__ import annotations

import pytest
import torch

from memory_runtime.generation.batch_cache import BatchCache, new_cache, supports


def alone(model, ids: list[int]) -> torch.Tensor:
    """Logits after `ids`, computed from scratch without any cache."""
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def prefill(model, ids: list[int]):
    cache = new_cache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache


def test_rows_of_a_stacked_cache_compute_what_they_would_alone(tiny_model):
    torch.manual_seed(0)
    seqs = {
        "a": torch.randint(10, 2000, (7,)).tolist(),
        "b": torch.randint(10, 2000, (3,)).tolist(),
        "c": torch.randint(10, 2000, (12,)).tolist(),
    }
    batch = BatchCache()
    for key in ("a", "b"):  # the prompt minus its last token is prefilled; the last is fed by the step
        batch.join(key, prefill(tiny_model, seqs[key][:-1]), len(seqs[key]) - 1)
    logits = batch.forward(tiny_model, [seqs["a"][-1:], seqs["b"][-1:]], torch.device("cpu"))
    for b, key in enumerate(("a", "b")):
        torch.testing.assert_close(logits[b], alone(tiny_model, seqs[key]), atol=1e-4, rtol=1e-4)

    # a longer sequence joins (the others get masked columns); feeds of different widths in one block
    batch.join("c", prefill(tiny_model, seqs["c"]), len(seqs["c"]))
    seqs["a"] += [11, 12, 13]
    seqs["b"] += [14]
    seqs["c"] += [15, 16]
    logits = batch.forward(tiny_model, [[11, 12, 13], [14], [15, 16]], torch.device("cpu"))
    for b, key in enumerate(("a", "b", "c")):
        torch.testing.assert_close(logits[b], alone(tiny_model, seqs[key]), atol=1e-4, rtol=1e-4)

    # one row takes several tokens alone (read results); a row that feeds nothing waits a step
    seqs["b"] += [22, 23, 24, 25]
    torch.testing.assert_close(
        batch.extend(tiny_model, "b", [22, 23, 24, 25], torch.device("cpu")),
        alone(tiny_model, seqs["b"]),
        atol=1e-4,
        rtol=1e-4,
    )
    seqs["a"] += [26]
    logits = batch.forward(tiny_model, [[26], [], [27]], torch.device("cpu"))
    seqs["c"] += [27]
    torch.testing.assert_close(logits[0], alone(tiny_model, seqs["a"]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[2], alone(tiny_model, seqs["c"]), atol=1e-4, rtol=1e-4)

    # a row takes two tokens back and feeds others; another leaves; then the holes are squeezed out
    batch.crop("a", len(seqs["a"]) - 2)
    seqs["a"] = seqs["a"][:-2] + [17]
    seqs["b"] += [18]
    seqs["c"] += [19]
    logits = batch.forward(tiny_model, [[17], [18], [19]], torch.device("cpu"))
    torch.testing.assert_close(logits[0], alone(tiny_model, seqs["a"]), atol=1e-4, rtol=1e-4)
    batch.leave({"b"})
    width = batch.width
    batch.compact()
    assert batch.width < width and batch.cached("a") == len(seqs["a"]) and batch.ids == ["a", "c"]
    seqs["a"] += [20]
    seqs["c"] += [21]
    logits = batch.forward(tiny_model, [[20], [21]], torch.device("cpu"))
    torch.testing.assert_close(logits[0], alone(tiny_model, seqs["a"]), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[1], alone(tiny_model, seqs["c"]), atol=1e-4, rtol=1e-4)


def test_full_attention_models_are_supported_and_sliding_windows_are_not(tiny_model):
    assert supports(tiny_model)

    class Config:
        sliding_window = 512
        layer_types = ["sliding_attention", "full_attention"]

    class Windowed:
        config = Config()

    assert not supports(Windowed())


def test_a_sequence_joins_empty_only_a_batch_that_holds_one():
    """join_empty adds a row with nothing cached (its prompt is fed with the next step); the first row of
    a batch must bring its own cache, since an empty batch has no layers to give the row."""
    with pytest.raises(ValueError, match="needs a batch to join"):
        BatchCache().join_empty("a")
