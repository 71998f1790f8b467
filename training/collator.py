"""Batching: TRL's language-modeling collator, which is what the trainer uses.

``padded``: rows right-padded to the longest record of the batch (pad = the tokenizer's pad
token, labels -100, attention mask 0).  ``padding_free``: the batch's records concatenated
into one row with ``position_ids`` restarting at 0 at each record and the label of each
record's first token set to -100, so no token is ever predicted from another record.
The trainer lets TRL build the same collator (TRL refuses a custom one with padding-free);
this module exists for the bench and the tests.
"""

from __future__ import annotations

from typing import Any


def make_collator(tokenizer: Any, *, padding_free: bool = False, pad_to_multiple_of: int | None = None) -> Any:
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token")
    return DataCollatorForLanguageModeling(
        pad_token_id=pad, padding_free=padding_free, pad_to_multiple_of=pad_to_multiple_of
    )
