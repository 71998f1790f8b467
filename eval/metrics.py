"""Metric functions: pure, small, and the one definition every eval report uses.

Names are compared through the store's `normalize_term` (case, punctuation and whitespace
do not count), the same key the memory matches on; relations through the canonical name
the store resolves aliases to.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import sqrt

from memory_runtime.memory.terms import normalize_term, triplet_key

_ABSTAIN = re.compile(
    r"\b(i\s+don'?t\s+know|i\s+do\s+not\s+know|no\s+information|not\s+(?:in\s+)?(?:my\s+)?memory)\b", re.I
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@dataclass(frozen=True)
class PRF:
    tp: int
    n_pred: int
    n_gold: int

    @property
    def precision(self) -> float:
        return self.tp / self.n_pred if self.n_pred else (1.0 if not self.n_gold else 0.0)

    @property
    def recall(self) -> float:
        return self.tp / self.n_gold if self.n_gold else (1.0 if not self.n_pred else 0.0)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: PRF) -> PRF:
        return PRF(self.tp + other.tp, self.n_pred + other.n_pred, self.n_gold + other.n_gold)

    def to_dict(self) -> dict:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "predicted": self.n_pred,
            "gold": self.n_gold,
        }


def prf(predicted: Iterable, gold: Iterable) -> PRF:
    """Set precision/recall/F1 counts; sum PRFs to micro-average over examples."""
    p, g = set(predicted), set(gold)
    return PRF(len(p & g), len(p), len(g))


def triplet_prf(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]], canonical=lambda r: r) -> PRF:
    return prf((triplet_key(t, canonical) for t in predicted), (triplet_key(t, canonical) for t in gold))


def counted_writes(
    writes: Iterable[Sequence[str]], annotated_relations: Iterable[str] | None, canonical=lambda r: r
) -> list[tuple]:
    """The writes a real passage's gold can judge: those in a relation it was annotated for (all when
    None). KnowledgeNet passages are checked for a few relations only: a founder write on a passage
    checked for CEO facts may be a true fact nobody annotated, so it counts neither as right nor as false."""
    if annotated_relations is None:
        return [tuple(t) for t in writes]
    annotated = {normalize_term(r) for r in annotated_relations}
    return [tuple(t) for t in writes if normalize_term(canonical(t[1])) in annotated]


def pair_key(triplet: Sequence[str]) -> tuple[str, str]:
    """A triplet's (subject, object) pair, normalised: what pair scores compare."""
    return normalize_term(triplet[0]), normalize_term(triplet[2])


def pair_prf(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> PRF:
    """(subject, object) pairs, relation ignored: did the model link the right person and organisation."""
    return prf({pair_key(t) for t in predicted}, {pair_key(t) for t in gold})


def _answer_tokens(text: str) -> list[str]:
    """SQuAD-style answer normalisation: lower case, no punctuation, no articles."""
    text = text.lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    return _ARTICLES.sub(" ", text).split()


def answer_exact(predicted: str, gold: str) -> bool:
    return _answer_tokens(predicted) == _answer_tokens(gold)


def token_f1(predicted: str, gold: str) -> float:
    """Token-overlap F1 (SQuAD): partial credit for a partly right answer; two empty answers score 1."""
    p, g = _answer_tokens(predicted), _answer_tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if not common:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def abstains(answer: str) -> bool:
    """Does the answer say the memory does not know?"""
    return bool(_ABSTAIN.search(answer))


def names_in(answer: str, candidates: Iterable[str]) -> set[str]:
    """The candidate names the answer mentions (normalised, whole words), longest first so that
    'Ann Lee' inside 'Ann Leeson' is not counted."""
    text = f" {normalize_term(answer)} "
    found: set[str] = set()
    for key in sorted({normalize_term(c) for c in candidates if normalize_term(c)}, key=len, reverse=True):
        token = f" {key} "
        if token in text:
            found.add(key)
            text = text.replace(token, "  ")
    return found


def listed_names(answer: str, candidates: Iterable[str], context: Iterable[str] = ()) -> set[str]:
    """The names an answer lists: the candidates it mentions, except `context` names (those the
    question gave, or of the facts the answer rests on, such as the company in "Ann Lee is
    employed by Pfizer" when the question asked who works there), which it may repeat freely."""
    return names_in(answer, candidates) - {normalize_term(n) for n in context}


def name_prf(answer: str, gold_names: Iterable[str], candidates: Iterable[str], context: Iterable[str] = ()) -> PRF:
    """Set precision/recall of the names an answer lists, among the names the test knows of."""
    gold = {normalize_term(n) for n in gold_names}
    allowed = {normalize_term(n) for n in context} - gold
    return prf(listed_names(answer, [*candidates, *gold_names], allowed), gold)


def answer_correct(
    answer: str, gold_names: Sequence[str], candidates: Iterable[str], context: Iterable[str] = ()
) -> bool:
    """A question is answered correctly when the answer lists exactly the gold names, or, when
    there are none, abstains and lists no name (context names aside)."""
    gold = {normalize_term(n) for n in gold_names}
    listed = listed_names(answer, [*candidates, *gold_names], {normalize_term(n) for n in context} - gold)
    if not gold:
        return abstains(answer) and not listed
    return listed == gold


def frac(values: Iterable) -> float | None:
    """The share of true values (None of none)."""
    values = list(values)
    return sum(map(bool, values)) / len(values) if values else None


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion. Unlike p ± z·se it stays inside [0, 1] and
    is not zero-width at 0/n or n/n, which is where small eval samples land."""
    if n <= 0:
        raise ValueError("a proportion of no cases has no interval")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def interval(fraction: float | None, n: int) -> tuple[float, float] | None:
    """The Wilson interval of a fraction of n cases (the fraction is k/n, so k is recovered exactly)."""
    return None if fraction is None or n <= 0 else wilson_interval(round(fraction * n), n)
