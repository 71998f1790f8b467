"""A conversation's turns as a memory-using model reads them, and its facts as a reader sees them, dated.

One definition for everyone who feeds a turn of a dated conversation to the model (data_gen's
conversations, `memlm eval` part locomo, chat and serve): the speaker's name before what they said, so
that "I" can be written as the speaker. The turn's date does not go into the text: the controller dates
the facts the turn writes (TurnRequest.said_at) and resolves "yesterday" in an object against it.

The reader's prompt is defined here too, once for the records that train a reader (data_gen) and the
eval that asks it (eval/locomo_qa.py): a system message of `ANSWER_PROMPT` and the context (dated facts,
or dated turns), the question as the user's message, a short answer or `NOT_MENTIONED`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memory_runtime.memory.dates import format_day
from memory_runtime.memory.facts import Fact

RRF_K = 60
"""Reciprocal rank fusion's constant (Cormack et al. 2009's; not tuned here)."""


class Embedder(Protocol):
    """What a LineIndex fuses with BM25: texts as unit vectors (models/sentence_embedding.py's SentenceEmbedder)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def turn_message(speaker: str, text: str, photo: str | None = None) -> str:
    """One turn: "Caroline: I went to a support group yesterday." (and the photo shared, as LoCoMo captions it,
    in parentheses: a square bracket opens a memory call, and a writer never trained on photos copied the
    bracketed caption instead of writing; docs/results.md)."""
    shared = f" (shares a photo: {photo})" if photo else ""
    return f"{speaker}: {text}{shared}"


def dated_fact(fact: Fact) -> str:
    """A stored fact as a reader sees it: "(8 May 2023) Caroline went to LGBTQ support group on 7 May 2023"."""
    return dated_line(datetime.fromtimestamp(fact.valid_from), fact.subject, fact.relation, fact.object)


def dated_line(said_at: datetime, subject: str, relation: str, obj: str) -> str:
    """A fact said on a day, as a reader sees it (dated_fact of a stored one)."""
    return f"({format_day(said_at)}) {subject} {relation} {obj}"


def said_when(said_at: datetime) -> str:
    """When a turn was said, as a reader sees it: "1:56 PM on 8 May 2023"."""
    return f"{said_at:%-I:%M %p} on {format_day(said_at)}"


def dated_turn(said_at: datetime, speaker: str, text: str, photo: str | None = None) -> str:
    """A turn with its time, as chunks and mixed contexts hold it: "(1:56 PM on 8 May 2023) Caroline: ..."."""
    return f"({said_when(said_at)}) {turn_message(speaker, text, photo)}"


ANSWER_PROMPT = (
    "You remember a conversation between two friends. Answer the question about it in a few words; give dates"
    " as the conversation's dates say them. If the conversation does not say, answer: Not mentioned."
)
NOT_MENTIONED = "Not mentioned."
FACTS_HEADER = "Facts remembered (the date each was said, then the fact):"
TURNS_HEADER = "Parts of the conversation:"


def reader_system(context: str) -> str:
    """The reader's system message: the prompt, then what it is given to answer from."""
    return f"{ANSWER_PROMPT}\n\n{context}"


class LineIndex:
    """Lines of text under BM25 (bm25s, stemmed, English stop words): what `memlm eval` part locomo finds a
    conversation's turns and facts by, and what data_gen's reader questions draw their contexts by, so that a
    reader is trained on what a read returns. `keys` (one a line) are matched instead of the lines themselves.
    With an `embedder`, `order` fuses BM25's ranking with the keys' cosine to the query,
    which finds a line said in other words than the query's."""

    def __init__(self, lines: list[str], keys: list[str] | None = None, embedder: Embedder | None = None) -> None:
        import bm25s
        import Stemmer

        self.lines = lines
        self.stemmer = Stemmer.Stemmer("english")
        self.retriever = bm25s.BM25()
        self.embedder = embedder
        matched = keys if keys is not None else lines
        if lines:
            self.retriever.index(self.tokens(matched), show_progress=False)
        self.vectors = embedder.embed(matched) if embedder is not None and lines else None

    def tokens(self, texts: list[str]) -> Any:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False)

    def retrieve(self, query: Any, k: int) -> tuple[Any, Any]:
        """bm25s's ids and scores of the k best lines for a tokenised `query`."""
        return self.retriever.retrieve(query, k=k, show_progress=False)

    def ranked(self, query: str) -> list[tuple[int, float]]:
        """(position, score) of every line that matches `query`, best first (none for stop words alone)."""
        tokens = self.tokens([query])
        if not self.lines or not tokens.vocab:
            return []
        found, scores = self.retrieve(tokens, len(self.lines))
        return [(int(i), float(s)) for i, s in zip(found[0], scores[0]) if s > 0]

    def order(self, query: str) -> list[int]:
        """The positions of the lines for `query`, best first: those BM25 matches; with an embedder, every line,
        by reciprocal rank fusion of BM25's ranking and the cosine's (Cormack et al. 2009: a line's score is the
        sum over the rankings of 1 / (RRF_K + its rank), which needs no calibration between the two scores)."""
        lexical = [i for i, _ in self.ranked(query)]
        if self.vectors is None:
            return lexical
        cosine = np.argsort(-(self.vectors @ self.embedder.embed([query])[0]), kind="stable")
        fused: dict[int, float] = {}
        for ranking in (lexical, cosine):
            for rank, i in enumerate(ranking):
                fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (RRF_K + rank)
        return sorted(fused, key=lambda i: (-fused[i], i))
