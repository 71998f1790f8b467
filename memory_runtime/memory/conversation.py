"""A conversation's turns as a memory-using model reads them, and its facts as a reader sees them, dated.

One definition for everyone who feeds a turn of a dated conversation to the model (data_gen's
conversations, `memlm eval` part locomo, chat and serve): the speaker's name before what they said, so
that "I" can be written as the speaker. The turn's date does not go into the text: the controller dates
the facts the turn writes (TurnRequest.said_at) and resolves "yesterday" in an object against it.
"""

from __future__ import annotations

from datetime import datetime

from memory_runtime.memory.dates import format_day
from memory_runtime.memory.store import Fact


def turn_message(speaker: str, text: str, photo: str | None = None) -> str:
    """One turn: "Caroline: I went to a support group yesterday." (and the photo shared, as LoCoMo captions it)."""
    shared = f" [shares a photo: {photo}]" if photo else ""
    return f"{speaker}: {text}{shared}"


def dated_fact(fact: Fact) -> str:
    """A stored fact as a reader sees it: "(8 May 2023) Caroline went to LGBTQ support group on 7 May 2023"."""
    said = format_day(datetime.fromtimestamp(fact.valid_from))
    return f"({said}) {fact.subject} {fact.relation} {fact.object}"
