"""LoCoMo (Maharana et al., ACL 2024): months of dated sessions between two people, and questions about them.

It measures what a memory is for, recalling what was said long ago, on conversations nobody wrote for memlm.
This module reads LoCoMo's own JSON, refusing bad input with one line naming the item before it returns
anything, and scores answers as LoCoMo's own evaluation does, so that figures compare with published tables.
The data (`benchmarks/locomo/`, CC BY-NC 4.0) is for measurement only: never train on it.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import Stemmer

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERED_CATEGORIES = (1, 2, 3, 4)
"""The categories of the published overall F1; adversarial questions are reported beside it."""

REFUSALS = (
    "not mentioned",
    "no information",
    "not available",
    "not stated",
    "don't know",
    "do not know",
    "unknown",
    "never mentioned",
    "never said",
    "no mention",
)
"""What an answer to an adversarial question says when it rightly finds nothing in the conversation."""

_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_FORMATS = tuple(
    time + date
    for time in ("%I:%M %p on ", "")
    for date in ("%d %B, %Y", "%d %B %Y", "%B %d, %Y", "%B %d %Y", "%d %b, %Y", "%d %b %Y", "%b %d, %Y", "%Y-%m-%d")
)
_DROPPED_WORDS = frozenset({"a", "an", "the", "and"})
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)
_STEMMER = Stemmer.Stemmer("porter")


class LocomoError(ValueError):
    """LoCoMo input memlm cannot use, in one line naming the conversation, session, turn or question."""


@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str
    session: int
    date: datetime
    """The session's date: LoCoMo dates sessions, not turns."""
    caption: str | None
    """LoCoMo's caption of the image the speaker shared (`blip_caption`): the turn's text may only refer to it."""


@dataclass(frozen=True)
class LocomoSession:
    index: int
    date: datetime
    turns: tuple[LocomoTurn, ...]


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    answer: str
    """The gold answer as text (LoCoMo has numbers too). For an adversarial question (category 5), which the
    conversation cannot answer, it is whatever the question carries, usually LoCoMo's trap answer
    (`adversarial_answer`); the scorer does not compare it."""
    category: int
    evidence: tuple[str, ...]
    """The dia_ids of the turns that hold the answer."""


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[LocomoSession, ...]
    questions: tuple[LocomoQuestion, ...]

    def turns(self) -> tuple[LocomoTurn, ...]:
        """Every turn, in the order they were said."""
        return tuple(turn for session in self.sessions for turn in session.turns)


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """The conversations of a file in LoCoMo's format (`locomo10.json`), all checked before any is returned."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LocomoError(f"{path}: not JSON ({error})") from None
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise LocomoError(f"{path}: expected a list of LoCoMo conversations (objects with sample_id, conversation, qa)")
    return [_conversation(item, position) for position, item in enumerate(raw, 1)]


def _conversation(raw: dict, position: int) -> LocomoConversation:
    sample_id = raw.get("sample_id")
    if not _filled(sample_id):
        raise LocomoError(f"conversation {position}: no sample_id")
    conversation, qa = raw.get("conversation"), raw.get("qa")
    if not isinstance(conversation, dict) or not isinstance(qa, list):
        raise LocomoError(f"{sample_id}: expected 'conversation' (an object) and 'qa' (a list of questions)")
    speakers = (conversation.get("speaker_a"), conversation.get("speaker_b"))
    if not all(_filled(speaker) for speaker in speakers):
        raise LocomoError(f"{sample_id}: speaker_a and speaker_b must name the two speakers")
    indices = sorted(int(match[1]) for key in conversation if (match := _SESSION_KEY.fullmatch(key)))
    sessions = tuple(_session(sample_id, conversation, index, speakers) for index in indices)
    if not any(session.turns for session in sessions):
        raise LocomoError(f"{sample_id}: no turns (expected session_1, session_2 ... lists of turns)")
    questions = tuple(_question(sample_id, number, question) for number, question in enumerate(qa, 1))
    return LocomoConversation(sample_id, speakers, sessions, questions)


def _session(sample_id: str, conversation: dict, index: int, speakers: tuple[str, str]) -> LocomoSession:
    """Session `index`, held as session_N with its session_N_date_time. LoCoMo also dates sessions it holds
    no turns for (conv-26 dates 35, holds 19): only held sessions are read, so those dates are ignored."""
    where = f"{sample_id}, session {index}"
    turns = conversation[f"session_{index}"]
    if not isinstance(turns, list):
        raise LocomoError(f"{where}: expected a list of turns")
    date = _parse_date(conversation.get(f"session_{index}_date_time"), where)
    return LocomoSession(
        index, date, tuple(_turn(raw, f"{where}, turn {n}", index, date, speakers) for n, raw in enumerate(turns, 1))
    )


def _parse_date(text: object, where: str) -> datetime:
    """LoCoMo writes "1:56 pm on 8 May, 2023"; a date without the time ("8 May 2023") is read too."""
    if not _filled(text):
        raise LocomoError(f"{where}: no date (session_N_date_time)")
    cleaned = " ".join(text.split())
    for date_format in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, date_format)
        except ValueError:
            continue
    raise LocomoError(f"{where}: unreadable date {text!r} (expected e.g. '1:56 pm on 8 May, 2023')")


def _turn(raw: object, where: str, session: int, date: datetime, speakers: tuple[str, str]) -> LocomoTurn:
    """One turn; errors name it by session and position, and by its dia_id once known."""
    if not isinstance(raw, dict) or not _filled(raw.get("dia_id")):
        raise LocomoError(f"{where}: no dia_id")
    where = f"{where} ({raw['dia_id']})"
    for field in ("speaker", "text"):
        if not _filled(raw.get(field)):
            raise LocomoError(f"{where}: no {field}")
    if raw["speaker"] not in speakers:
        raise LocomoError(f"{where}: speaker {raw['speaker']!r} is neither speaker_a nor speaker_b {speakers}")
    caption = raw.get("blip_caption")
    return LocomoTurn(raw["dia_id"], raw["speaker"], raw["text"], session, date, caption if _filled(caption) else None)


def _question(sample_id: str, number: int, raw: object) -> LocomoQuestion:
    where = f"{sample_id}, question {number}"
    if not isinstance(raw, dict) or not _filled(raw.get("question")):
        raise LocomoError(f"{where}: no question text")
    category = raw.get("category")
    if category is None:
        raise LocomoError(f"{where}: no category")
    if type(category) is not int or category not in CATEGORY_NAMES:
        raise LocomoError(f"{where}: category {category!r} is not one of 1-5")
    answer = raw.get("answer")
    if answer is None and category == 5:
        answer = raw.get("adversarial_answer") or ""
    elif category != 5 and answer in (None, ""):
        raise LocomoError(f"{where}: no answer")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise LocomoError(f"{where}: answer {answer!r} is neither text nor a number")
    evidence = raw.get("evidence") or []
    if not isinstance(evidence, list) or not all(isinstance(item, str) for item in evidence):
        raise LocomoError(f"{where}: evidence must be a list of dia_ids")
    # LoCoMo once joins two ids in one string ("D8:6; D9:17")
    dia_ids = tuple(part.strip() for item in evidence for part in item.split(";") if part.strip())
    return LocomoQuestion(raw["question"], str(answer), category, dia_ids)


def _filled(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def normalize_answer(text: str) -> list[str]:
    """LoCoMo's answer tokens: lower case, punctuation deleted (not spaced: "don't" is "dont"), without
    a, an, the and "and", each Porter-stemmed, so that "painted" and "painting" count as one word."""
    words = str(text).lower().translate(_NO_PUNCTUATION).split()
    return _STEMMER.stemWords([word for word in words if word not in _DROPPED_WORDS])


def token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 (SQuAD's) of the normalised answers; no shared token, an empty one included, is 0."""
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_hop_f1(prediction: str, gold: str) -> float:
    """A multi-hop gold lists several things ("pottery, camping, painting"): each gold part scores its best
    match among the prediction's comma-separated parts, and the parts' mean is the score."""
    predicted = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in gold.split(",")]
    return sum(max(token_f1(part, gold_part) for part in predicted) for gold_part in golds) / len(golds)


def refuses(prediction: str) -> bool:
    """Does the answer say the conversation does not hold it (what an adversarial question wants)?"""
    lowered = prediction.lower()
    return any(phrase in lowered for phrase in REFUSALS)


def score_answer(question: LocomoQuestion, prediction: str) -> float:
    """A prediction's score as LoCoMo's evaluation gives it, by the question's category."""
    return score_gold(question.category, question.answer, prediction)


def score_gold(category: int, gold: str, prediction: str) -> float:
    """score_answer from a category and gold answer (a row of cases.jsonl keeps both). An open-domain gold
    is scored up to its first ';' (what follows is the annotator's reason)."""
    if category == 5:
        return float(refuses(prediction))
    if category == 1:
        return multi_hop_f1(prediction, gold)
    if category == 3:
        return token_f1(prediction, gold.split(";")[0])
    return token_f1(prediction, gold)


def evidence_recall(evidence: Sequence[str], retrieved: Collection[str]) -> float | None:
    """The share of a question's evidence turns (dia_ids) that retrieval found; None when it names none."""
    wanted = set(evidence)
    return len(wanted & set(retrieved)) / len(wanted) if wanted else None


def answer_words(answer: object, texts: Iterable[str]) -> float | None:
    """The share of a gold answer's words (normalised and stemmed as scored) that `texts` hold together:
    whether what a context holds could give the answer; None for an answer without scored words."""
    wanted = set(normalize_answer(str(answer)))
    held = {word for text in texts for word in normalize_answer(text)}
    return len(wanted & held) / len(wanted) if wanted else None


def summarize(scored: Iterable[tuple[int, float]]) -> dict:
    """Per category: its name, question count and mean score (a percentage, one decimal; for adversarial
    questions the share refused). `overall_f1` weighs every question of categories 1-4 alike, as the
    published tables do; `adversarial_refused_pct` stands beside it, not in it."""
    by_category: dict[int, list[float]] = {}
    for category, score in scored:
        if category not in CATEGORY_NAMES:
            raise ValueError(f"LoCoMo has no category {category!r} (1-5)")
        by_category.setdefault(category, []).append(score)
    answered = [score for category in ANSWERED_CATEGORIES for score in by_category.get(category, [])]
    return {
        "categories": {
            category: {"name": CATEGORY_NAMES[category], "questions": len(scores), "f1": mean_percent(scores)}
            for category, scores in sorted(by_category.items())
        },
        "overall_f1": mean_percent(answered),
        "adversarial_refused_pct": mean_percent(by_category.get(5, [])),
    }


def mean_percent(scores: Sequence[float]) -> float | None:
    """The mean of shares as a percentage, one decimal; None for none."""
    return round(100 * sum(scores) / len(scores), 1) if scores else None
