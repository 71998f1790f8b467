"""Token-budget batches (``optim.max_tokens_per_step``): as many records per micro-batch as fit in N tokens.

Most records are under 100 tokens, so a fixed number of records per batch leaves a GPU mostly
idle (16 records x ~90 tokens is ~1,400 tokens a step). With a budget, each micro-batch takes
records in a seeded random order until the next one would pass N tokens: short records come many
at a time, long ones few, and every step computes about N tokens. The cost of a batch is what the
model computes: the sum of its records' lengths when padding-free, the count times the longest
when padded. A record longer than the budget gets a batch of its own.

The order is reshuffled every epoch (``set_epoch``), the same on every process; with several
processes accelerate hands each one its share of the batches.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from torch.utils.data import Sampler


class TokenBudgetSampler(Sampler[list[int]]):
    """Yields lists of dataset indices whose cost stays within `max_tokens` (a batch sampler)."""

    def __init__(self, lengths: Sequence[int], max_tokens: int, *, padded: bool = False, seed: int = 0) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self.lengths = list(lengths)
        self.max_tokens = max_tokens
        self.padded = padded
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def cost(self, lengths: Sequence[int]) -> int:
        return len(lengths) * max(lengths) if self.padded else sum(lengths)

    def batches(self) -> list[list[int]]:
        order = list(range(len(self.lengths)))
        random.Random(self.seed + self.epoch).shuffle(order)
        out: list[list[int]] = []
        batch: list[int] = []
        lengths: list[int] = []
        for index in order:
            length = self.lengths[index]
            if batch and self.cost(lengths + [length]) > self.max_tokens:
                out.append(batch)
                batch, lengths = [], []
            batch.append(index)
            lengths.append(length)
        if batch:
            out.append(batch)
        return out

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())
