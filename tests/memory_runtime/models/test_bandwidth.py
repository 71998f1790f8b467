"""The decoding bound memlm reports (`memlm env`, `memlm bench decode`): read bandwidth, model bytes."""

import torch

from memory_runtime.models.hardware import Bandwidth, memory_bandwidth, model_bytes


def test_model_bytes_counts_tied_weights_once():
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    assert model_bytes(model) == 2 * 10 * 4 * 4
    model[1].weight = model[0].weight  # tied, as SmolLM2's embedding and head are
    assert model_bytes(model) == 10 * 4 * 4


def test_the_ceiling_is_bandwidth_over_bytes_per_token():
    measured = memory_bandwidth(gib=0.05, repeats=3)
    assert measured.gb_per_s > 0 and measured.dtype == "bfloat16" and measured.threads == torch.get_num_threads()
    assert Bandwidth(16.2, "bfloat16", 1.0, 2).ceiling_tokens_per_s(270_000_000) == 60.0
