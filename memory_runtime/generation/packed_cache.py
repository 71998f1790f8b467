"""One KV cache for a batch of sequences packed into a single row: every step is one forward pass
of just the tokens the sequences feed, however many each feeds.

batch_cache.BatchCache stacks sequences as rows: a step's block is as wide as the longest feed for
every row, so a joining prompt (~40 tokens) or a read's results (~26) fed beside seven rows of one
token would cost eight times their tokens of padding. On a CPU that padding is arithmetic, and
feeding such a row alone costs a pass over every weight (~40 ms for the 135M model in float32 on 2
cores, whatever the tokens). Here all sequences share one row of columns: a step appends the fed
tokens of every sequence side by side, each at its own position (``position_ids``), and a 4D mask
lets each token see only its own sequence's columns (the causal order within what it feeds
included). The linear layers see exactly the fed tokens; attention scores every column of the
row, which costs little beside the weights while sequences are short, but grows with the batch's
whole context: so a long feed (batching.PACKED_FEED) runs alone (``join`` a prompt prefilled alone,
``extend`` for a read's results), its keys and values appended as columns of its own.

As in BatchCache, ``mask[b, c]`` says whether column ``c`` holds one of sequence ``b``'s tokens and
``cols[b]`` lists them in token order; tokens taken back and sequences that leave are masked out,
and ``compact()`` squeezes the dead columns out. Only caches whose layers keep every position
(batch_cache.supports) can be packed.
"""

from __future__ import annotations

from typing import Any

import torch

from memory_runtime.generation.batch_cache import SequenceColumns, new_cache


class PackedCache(SequenceColumns):
    """The packed cache of the sequences in a batch (sequences in the order of ``ids``)."""

    mask_dtype = torch.bool

    def join(self, key: Any, cache: Any, length: int) -> None:
        """Add a sequence whose `length` tokens are all of `cache` (a batch-of-one DynamicCache, its prompt
        prefilled alone): its keys and values become new columns at the end of the row."""
        self.join_empty(key)
        self._append(cache, length, len(self.ids) - 1)

    def extend(self, model: Any, key: Any, tokens: list[int], device: torch.device) -> torch.Tensor:
        """Feed several tokens to one sequence alone (a long read result): its columns gathered into a
        cache of its own, the tokens run there, their keys and values appended to the row. Returns the
        float32 logits after the last token."""
        logits, solo = self._feed_alone(model, key, tokens, device)
        self._append(solo, len(tokens), self.row(key))
        return logits

    def _append(self, source: Any, n: int, b: int) -> None:
        """The last `n` positions of `source` (a batch-of-one cache) as new columns of sequence b."""
        width = self.width
        if self.cache is None:  # no columns yet: the row is this cache
            self.cache = source
        else:
            for mine, theirs in zip(self.cache.layers, source.layers):
                mine.keys = torch.cat([mine.keys, theirs.keys[:, :, -n:]], dim=2)
                mine.values = torch.cat([mine.values, theirs.values[:, :, -n:]], dim=2)
        self.mask = torch.cat([self.mask, torch.zeros(len(self.ids), n, dtype=torch.bool)], dim=1)
        self.mask[b, width:] = True
        self.cols[b].extend(range(width, width + n))

    def _own(self, tensor: torch.Tensor, b: int) -> torch.Tensor:
        return tensor  # one row holds every sequence

    def join_empty(self, key: Any) -> None:
        """Add a sequence that holds nothing yet: its first feed is its whole prompt."""
        self.mask = torch.cat([self.mask, torch.zeros(1, self.width, dtype=torch.bool)])
        self.cols.append([])
        self.ids.append(key)

    def wasteful(self) -> bool:
        """Whether dead columns make up most of the row (time to compact)."""
        return self.width > 1.25 * sum(len(c) for c in self.cols) + 16

    def compact(self) -> None:
        """Squeeze out the columns no sequence holds (the others keep their order)."""
        if self.cache is None:
            return
        live = self.mask.any(dim=0)
        if bool(live.all()):
            return
        index = torch.nonzero(live).flatten()
        new_index = torch.full((self.width,), -1, dtype=torch.long)
        new_index[index] = torch.arange(len(index))
        for layer in self.cache.layers:
            where = index.to(layer.keys.device)
            layer.keys = layer.keys.index_select(2, where)
            layer.values = layer.values.index_select(2, where)
        self.mask = self.mask[:, index]
        self.cols = [new_index[torch.tensor(c, dtype=torch.long)].tolist() if c else [] for c in self.cols]

    def forward(self, model: Any, feeds: list[list[int]], device: torch.device) -> torch.Tensor:
        """Append each sequence's `feeds[b]` in one forward pass and return, per sequence, the float32
        logits after its last fed token: ``[sequences, vocab]`` (a sequence that feeds nothing gets a row
        to ignore)."""
        if len(feeds) != len(self.ids) or not any(feeds):
            raise ValueError("one feed per sequence of the batch, and some sequence feeds a token")
        if self.cache is None:
            self.cache = new_cache()
        width = self.width
        owner = torch.tensor([b for b, feed in enumerate(feeds) for _ in feed], dtype=torch.long)
        ids = torch.tensor([t for feed in feeds for t in feed], dtype=torch.long)
        positions = torch.tensor(
            [p for b, feed in enumerate(feeds) for p in range(len(self.cols[b]), len(self.cols[b]) + len(feed))],
            dtype=torch.long,
        )
        n = len(ids)
        ends = torch.tensor([len(feed) for feed in feeds], dtype=torch.long).cumsum(0) - 1
        last = ends.clamp(min=0)  # each sequence's last fed token (one that feeds nothing: any row)
        # a token sees its sequence's cached columns, and its sequence's fed tokens up to itself
        fed = (owner[:, None] == owner[None, :]) & torch.ones(n, n, dtype=torch.bool).tril()
        mask = torch.cat([self.mask[owner], fed], dim=1)
        with torch.inference_mode():
            out = model(
                input_ids=ids[None].to(device),
                attention_mask=mask[None, None].to(device),
                position_ids=positions[None].to(device),
                past_key_values=self.cache,
                use_cache=True,
                cache_position=torch.arange(width, width + n, device=device),
                logits_to_keep=last.to(device),
            )
        # the model extended self.cache in place; the new columns belong to their feeders
        block = torch.zeros(len(feeds), n, dtype=torch.bool)
        block[owner, torch.arange(n)] = True
        self.mask = torch.cat([self.mask, block], dim=1)
        start = width
        for b, feed in enumerate(feeds):
            self.cols[b].extend(range(start, start + len(feed)))
            start += len(feed)
        return out.logits[0].float()
