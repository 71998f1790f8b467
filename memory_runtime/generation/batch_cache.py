"""One KV cache for a batch of sequences that grow, pause, take tokens back, join and leave.

Every row has the same number of columns; ``mask[b, c]`` says whether column ``c`` of row ``b``
holds one of its tokens, and ``cols[b]`` lists those columns in token order. A step appends a
block of columns to every row: a row feeds its new tokens into the last columns of the block and
leaves the first ones masked. A token taken back (a backtracked call field, a resume that rewrites the
text) is masked out instead of removed, so no row ever moves; ``compact()`` squeezes the holes
out when they make up most of the cache. A sequence joins with a cache of its own (its prompt,
prefilled alone) that is padded and stacked under the others; one that ends is dropped from the
batch dimension.

Positions are the tokens' indices in their own sequence, whatever their column: attention sees
only masked-in columns, so a row computes what it would compute alone. Only caches whose layers
all keep every position (``DynamicLayer``) can be stacked this way; :func:`supports` says whether
a model's can.
"""

from __future__ import annotations

from typing import Any

import torch


def new_cache() -> Any:
    """A DynamicCache whose layers keep every position (no sliding window)."""
    from transformers import DynamicCache

    return DynamicCache()


def supports(model: Any) -> bool:
    """Whether the model's attention can run on a stacked cache: full attention in every layer."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text_config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return False
    return not getattr(text_config, "sliding_window", None) or getattr(text_config, "use_sliding_window", True) is False


def _layers(cache: Any) -> list[Any]:
    return list(cache.layers)


class SequenceColumns:
    """What a batch's cache knows of its sequences, stacked (BatchCache) or packed (packed_cache): ``ids``
    (the caller's names, in order), ``cols[b]`` (the columns of sequence b's tokens, in token order) and
    ``mask[b, c]`` (whether column c holds one of them)."""

    mask_dtype = torch.long

    def __init__(self) -> None:
        self.cache: Any = None
        self.mask = torch.zeros(0, 0, dtype=self.mask_dtype)
        self.cols: list[list[int]] = []
        self.ids: list[Any] = []  # whatever the caller names its sequences by

    @property
    def width(self) -> int:
        return self.mask.shape[1]

    def row(self, key: Any) -> int:
        return self.ids.index(key)

    def cached(self, key: Any) -> int:
        """How many of the sequence's tokens (from its start) the cache holds."""
        return len(self.cols[self.row(key)])

    def crop(self, key: Any, keep: int) -> None:
        """Forget the sequence's tokens from index `keep` on (their columns are masked out)."""
        b = self.row(key)
        self.mask[b, self.cols[b][keep:]] = 0
        del self.cols[b][keep:]

    def leave(self, keys: set[Any]) -> None:
        """Drop these sequences from the batch."""
        keep = [i for i, key in enumerate(self.ids) if key not in keys]
        if len(keep) == len(self.ids):
            return
        if not keep:
            self.__init__()
            return
        self._keep_rows(torch.tensor(keep, dtype=torch.long))
        self.mask = self.mask[keep]
        self.cols = [self.cols[i] for i in keep]
        self.ids = [self.ids[i] for i in keep]

    def _keep_rows(self, index: torch.Tensor) -> None:
        """Keep only these sequences' rows of the cache's tensors (where a sequence has its own)."""

    def _own(self, tensor: torch.Tensor, b: int) -> torch.Tensor:
        """Sequence b's part of a layer's keys or values, as a batch of one (all columns)."""
        return tensor[b : b + 1]

    def _feed_alone(self, model: Any, key: Any, tokens: list[int], device: torch.device) -> tuple[torch.Tensor, Any]:
        """Run `tokens` after the sequence's cached ones, in a cache of its own gathered from its columns
        (the others not in the pass): the float32 logits after the last token, and that cache, whose last
        ``len(tokens)`` positions are the new keys and values."""
        b = self.row(key)
        cols = torch.tensor(self.cols[b], dtype=torch.long)
        solo = new_cache()
        for i, layer in enumerate(_layers(self.cache)):
            index = cols.to(layer.keys.device)
            keys, values = self._own(layer.keys, b), self._own(layer.values, b)
            solo.update(keys.index_select(2, index), values.index_select(2, index), i)
        start = len(self.cols[b])
        with torch.inference_mode():
            out = model(
                input_ids=torch.tensor([tokens], device=device),
                past_key_values=solo,
                use_cache=True,
                position_ids=torch.arange(start, start + len(tokens), device=device)[None],
                logits_to_keep=1,
            )
        return out.logits[0, -1].float(), solo  # the model extended `solo` in place


class BatchCache(SequenceColumns):
    """The stacked cache of the sequences in a batch (rows in the order of ``ids``)."""

    # ------------------------------------------------------------------ joining and leaving

    def join(self, key: Any, cache: Any, length: int) -> None:
        """Add a sequence whose first `length` tokens are in `cache` (a batch-of-one DynamicCache)."""
        layers = _layers(cache)
        if self.cache is None or not self.ids:
            self.cache, self.ids, self.cols = cache, [key], [list(range(length))]
            self.mask = torch.ones(1, length, dtype=torch.long)
            return
        width = self.width
        if length > width:  # the others get masked columns at the end
            self._pad_columns(length - width)
            width = length
        for mine, theirs in zip(_layers(self.cache), layers):
            pad = width - theirs.keys.shape[-2]
            keys, values = theirs.keys, theirs.values
            if pad:
                keys = torch.nn.functional.pad(keys, (0, 0, 0, pad))
                values = torch.nn.functional.pad(values, (0, 0, 0, pad))
            mine.keys = torch.cat([mine.keys, keys], dim=0)
            mine.values = torch.cat([mine.values, values], dim=0)
        row = torch.zeros(1, width, dtype=torch.long)
        row[0, :length] = 1
        self.mask = torch.cat([self.mask, row], dim=0)
        self.cols.append(list(range(length)))
        self.ids.append(key)

    def join_empty(self, key: Any) -> None:
        """Add a sequence that holds nothing yet (a batch must hold one already): its first feed is its
        whole prompt, beside the others' tokens in one forward pass."""
        if self.cache is None or not self.ids:
            raise ValueError("join_empty needs a batch to join: the first sequence brings its own cache")
        for layer in _layers(self.cache):
            layer.keys = torch.cat([layer.keys, layer.keys.new_zeros((1, *layer.keys.shape[1:]))])
            layer.values = torch.cat([layer.values, layer.values.new_zeros((1, *layer.values.shape[1:]))])
        self.mask = torch.cat([self.mask, torch.zeros(1, self.width, dtype=torch.long)])
        self.cols.append([])
        self.ids.append(key)

    def _keep_rows(self, index: torch.Tensor) -> None:
        for layer in _layers(self.cache):
            layer.keys = layer.keys.index_select(0, index.to(layer.keys.device))
            layer.values = layer.values.index_select(0, index.to(layer.values.device))

    # ------------------------------------------------------------------ dead columns

    def wasteful(self) -> bool:
        """Whether masked-out columns make up most of the cache (time to compact)."""
        return self.width > 2 * max((len(c) for c in self.cols), default=0) + 64

    def compact(self) -> None:
        """Squeeze the masked-out columns away (every row's tokens move to the front)."""
        longest = max((len(c) for c in self.cols), default=0)
        if self.cache is None or longest == self.width:
            return
        index = torch.zeros(len(self.ids), longest, dtype=torch.long)
        mask = torch.zeros(len(self.ids), longest, dtype=torch.long)
        for b, cols in enumerate(self.cols):
            index[b, : len(cols)] = torch.tensor(cols, dtype=torch.long)
            mask[b, : len(cols)] = 1
        for layer in _layers(self.cache):
            gather = index.to(layer.keys.device)[:, None, :, None].expand(
                -1, layer.keys.shape[1], -1, layer.keys.shape[-1]
            )
            layer.keys = torch.gather(layer.keys, 2, gather) * mask.to(layer.keys.device)[:, None, :, None]
            layer.values = torch.gather(layer.values, 2, gather) * mask.to(layer.values.device)[:, None, :, None]
        self.mask = mask
        self.cols = [list(range(len(c))) for c in self.cols]

    def _pad_columns(self, n: int) -> None:
        for layer in _layers(self.cache):
            layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, 0, n))
            layer.values = torch.nn.functional.pad(layer.values, (0, 0, 0, n))
        self.mask = torch.nn.functional.pad(self.mask, (0, n))

    # ------------------------------------------------------------------ a step

    def extend(self, model: Any, key: Any, tokens: list[int], device: torch.device) -> torch.Tensor:
        """Feed several tokens to one row alone (read results inserted into its text): its cached
        tokens are gathered into a cache of their own, the tokens run through the model there, and
        their keys and values come back as new columns, masked out for the other rows. Returns the
        float32 logits after the last token. Costs the row's tokens, not the batch times them."""
        b = self.row(key)
        logits, solo = self._feed_alone(model, key, tokens, device)
        width = self.width
        self._pad_columns(len(tokens))
        for mine, theirs in zip(_layers(self.cache), _layers(solo)):
            mine.keys[b, :, width:] = theirs.keys[0, :, -len(tokens) :]
            mine.values[b, :, width:] = theirs.values[0, :, -len(tokens) :]
        self.mask[b, width:] = 1
        self.cols[b].extend(range(width, width + len(tokens)))
        return logits

    def forward(self, model: Any, feeds: list[list[int]], device: torch.device) -> torch.Tensor:
        """Append each row's `feeds[b]` and return, per row, the float32 logits after its last fed
        token: ``[rows, vocab]`` (rows that feed nothing get a masked block and logits to ignore).

        Feeds end at the block's last column (shorter ones start later, after masked columns), so
        the LM head runs on that one column only, however wide the block."""
        if len(feeds) != len(self.ids) or not any(feeds):
            raise ValueError("one feed per row of the batch, and some row feeds a token")
        width, block = self.width, max(len(f) for f in feeds)
        ids = torch.zeros(len(feeds), block, dtype=torch.long)
        positions = torch.zeros(len(feeds), block, dtype=torch.long)
        block_mask = torch.zeros(len(feeds), block, dtype=torch.long)
        for b, feed in enumerate(feeds):
            start, skip = len(self.cols[b]), block - len(feed)
            ids[b, skip:] = torch.tensor(feed, dtype=torch.long)
            positions[b, :skip] = max(start - 1, 0)  # masked columns: any valid position
            positions[b, skip:] = torch.arange(start, start + len(feed))
            block_mask[b, skip:] = 1
        mask = torch.cat([self.mask, block_mask], dim=1)
        with torch.inference_mode():
            out = model(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=positions.to(device),
                past_key_values=self.cache,
                use_cache=True,
                cache_position=torch.arange(width, width + block, device=device),
                logits_to_keep=1,
            )
        self.mask = mask  # the model extended self.cache in place
        for b, feed in enumerate(feeds):
            self.cols[b].extend(range(width + block - len(feed), width + block))
        return out.logits[:, -1].float()
