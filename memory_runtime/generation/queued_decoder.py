"""The base of the engines whose turns wait and decode in this process, prompted with a tokenizer's chat
template (BatchDecoder, VLLMDecoder): how many turns one holds and how long a prompt is, counted alike by
both (the scheduler admits turns by them)."""

from __future__ import annotations

from typing import Any

from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.turn import TurnRequest
from memory_runtime.generation.turn_state import prompt_state


class QueuedDecoder(Decoder):
    """An engine of this process whose turns wait in `waiting` and decode in `active`, prompted with
    `tokenizer`'s chat template (BatchDecoder, VLLMDecoder): how many turns it holds and a prompt's
    length, counted alike by both."""

    waiting: Any
    active: dict
    tokenizer: Any
    end_token_ids: frozenset[int]

    @property
    def in_flight(self) -> int:
        return len(self.waiting) + len(self.active)

    def prompt_tokens(self, request: TurnRequest) -> int | None:
        return len(prompt_state(self.tokenizer, self.end_token_ids, request.messages).prompt_ids)
