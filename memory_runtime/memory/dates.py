"""Relative times ("yesterday", "last week") resolved against the date they were said, in LoCoMo's words.

A memory keeps a fact long after the turn that stated it: "I went to a support group yesterday", stored
as said, is wrong the next day. LoCoMo (snap-research/LoCoMo) dates every session and answers temporal
questions with the relative time resolved against that date, in a few fixed forms: "7 May 2023",
"May 2023", "2022", "the week before 9 June 2023", "the Friday before 15 July 2023", "a few years before
2023". Stamping facts in the same forms lets a recalled fact be scored against those answers word for
word. Month and weekday names are English whatever the locale (no strftime %B).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

MONTHS = tuple("January February March April May June July August September October November December".split())
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def format_day(d: date | datetime) -> str:
    """A day as LoCoMo writes it: "7 May 2023", no leading zero."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def format_month(d: date | datetime) -> str:
    """A month as LoCoMo writes it: "May 2023"."""
    return f"{MONTHS[d.month - 1]} {d.year}"


@dataclass(frozen=True)
class RelativeTime:
    """A relative time expression in a sentence: `text` as written, at `sentence[start:end]`, and what it
    means said at that time, `resolved` in LoCoMo's words. `day` is the calendar day meant where the
    expression names one ("yesterday", "last Friday", "three days ago"), else None; it is left out of
    equality so that two finds compare by what they say."""

    text: str
    start: int
    end: int
    resolved: str
    day: date | None = field(default=None, compare=False)


Resolution = tuple[str, "date | None"]
"""What a rule makes of a match: the resolved phrase and the day meant, if one."""


def _on_day(offset_days: int) -> Callable[[re.Match, date], Resolution]:
    def resolve(match: re.Match, today: date) -> Resolution:
        day = today + timedelta(days=offset_days)
        return format_day(day), day

    return resolve


def _around_day(template: str) -> Callable[[re.Match, date], Resolution]:
    """A span LoCoMo names around the day it was said: "the week before {day}"."""
    return lambda match, today: (template.format(day=format_day(today)), None)


def _months_later(today: date, months: int) -> date:
    """The first day of the month `months` after today's (negative: before)."""
    index = today.year * 12 + today.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _in_month(months: int) -> Callable[[re.Match, date], Resolution]:
    return lambda match, today: (format_month(_months_later(today, months)), None)


def _in_year(years: int) -> Callable[[re.Match, date], Resolution]:
    return lambda match, today: (str(today.year + years), None)


def _count(word: str) -> int:
    """ "3" -> 3, "three" -> 3, "a" -> 1."""
    word = word.lower()
    if word.isdigit():
        return int(word)
    return 1 if word in ("a", "an") else _NUMBERS.index(word) + 1


def _ago(match: re.Match, today: date) -> Resolution:
    """ "N units ago": days and months and years to the calendar, weeks and weekends as LoCoMo says them
    ("two weekends before 17 July 2023"), the number as said."""
    said, unit = match["n"].lower(), match["unit"].lower()
    n = _count(said)
    if unit.startswith("day"):
        day = today - timedelta(days=n)
        return format_day(day), day
    if unit.startswith("month"):
        return format_month(_months_later(today, -n)), None
    if unit.startswith("year"):
        return str(today.year - n), None
    return f"{said} {unit} before {format_day(today)}", None


def _vaguely_ago(match: re.Match, today: date) -> Resolution:
    """ "a few units ago" stays vague, anchored at the day, month or year it was said in."""
    unit = match["unit"].lower()
    anchors = {"months": format_month(today), "years": str(today.year)}
    vague = " ".join(match["vague"].lower().split())
    return f"{vague} {unit} before {anchors.get(unit, format_day(today))}", None


def _weekday_before(match: re.Match, today: date) -> Resolution:
    """The weekday strictly before today: "last Sunday" said on a Sunday is the Sunday a week before."""
    weekday = WEEKDAYS.index(match["weekday"].capitalize())
    day = today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return f"the {WEEKDAYS[weekday]} before {format_day(today)}", day


def _weekday_after(match: re.Match, today: date) -> Resolution:
    """The weekday strictly after today: "next Friday" said on a Wednesday is two days later."""
    weekday = WEEKDAYS.index(match["weekday"].capitalize())
    day = today + timedelta(days=(weekday - today.weekday()) % 7 or 7)
    return f"the {WEEKDAYS[weekday]} after {format_day(today)}", day


def _month_named(match: re.Match) -> int:
    return MONTHS.index(match["month"].capitalize()) + 1


def _named_month_before(this_month_counts: bool) -> Callable[[re.Match, date], Resolution]:
    """The latest month of that name before this one ("last May"), or up to this one ("in May")."""

    def resolve(match: re.Match, today: date) -> Resolution:
        month = _month_named(match)
        past = month < today.month or (this_month_counts and month == today.month)
        return format_month(date(today.year if past else today.year - 1, month, 1)), None

    return resolve


def _named_month_after(match: re.Match, today: date) -> Resolution:
    """The first month of that name after this one ("next May" said in May: next year's)."""
    month = _month_named(match)
    return format_month(date(today.year if month > today.month else today.year + 1, month, 1)), None


_NUMBER = r"\d{1,3}|an?|" + "|".join(_NUMBERS)
_VAGUE = r"a few|a couple of|a couple|several"
_PART_OF_DAY = r"(?: (?:morning|afternoon|evening|night))?"
_WEEKDAY = "(?P<weekday>" + "|".join(WEEKDAYS) + ")"
_MONTH = "(?P<month>" + "|".join(MONTHS) + ")"
_NOT_A_DATE = r"(?!,?\s*(?:\d|(?:" + "|".join(MONTHS) + r")\s*\d))"  # "in May 2022", "on Friday, 5 May"
_NOT_AFTER_THE = r"(?<!\bthe\s)"  # "the last week of May", "the next week": spans, not a week's name

_RULES: tuple[tuple[str, Callable[[re.Match, date], Resolution]], ...] = (
    ("the day before yesterday", _on_day(-2)),
    ("the day after tomorrow", _on_day(2)),
    ("yesterday" + _PART_OF_DAY, _on_day(-1)),
    ("last night", _on_day(-1)),
    ("today|tonight|this (?:morning|afternoon|evening)", _on_day(0)),
    ("tomorrow" + _PART_OF_DAY, _on_day(1)),
    ("the other day", _around_day("a few days before {day}")),
    ("recently", _around_day("shortly before {day}")),
    (_NOT_AFTER_THE + "(?:last|this past) week", _around_day("the week before {day}")),
    ("this week", _around_day("the week of {day}")),
    (_NOT_AFTER_THE + "next week", _around_day("the week after {day}")),
    (_NOT_AFTER_THE + "(?:last|this past) weekend", _around_day("the weekend before {day}")),
    ("this weekend", _around_day("the weekend of {day}")),
    (_NOT_AFTER_THE + "next weekend", _around_day("the weekend after {day}")),
    (_NOT_AFTER_THE + "last month", _in_month(-1)),
    ("this month", _in_month(0)),
    (_NOT_AFTER_THE + "next month", _in_month(1)),
    (_NOT_AFTER_THE + "last year", _in_year(-1)),
    ("this year", _in_year(0)),
    (_NOT_AFTER_THE + "next year", _in_year(1)),
    (f"(?P<n>{_NUMBER}) (?P<unit>days?|weeks?|weekends?|months?|years?) ago", _ago),
    (f"(?P<vague>{_VAGUE}) (?P<unit>days|weeks|weekends|months|years) ago", _vaguely_ago),
    (f"(?:last|on) {_WEEKDAY}{_NOT_A_DATE}", _weekday_before),
    (f"next {_WEEKDAY}{_NOT_A_DATE}", _weekday_after),
    (f"last {_MONTH}{_NOT_A_DATE}", _named_month_before(this_month_counts=False)),
    (f"in {_MONTH}{_NOT_A_DATE}", _named_month_before(this_month_counts=True)),
    (f"next {_MONTH}{_NOT_A_DATE}", _named_month_after),
)
_PATTERNS = tuple(
    (re.compile(r"\b(?:" + pattern.replace(" ", r"\s+") + r")\b", re.IGNORECASE), resolve)
    for pattern, resolve in _RULES
)


def find_relative_times(sentence: str, said_at: datetime | date) -> list[RelativeTime]:
    """Every relative time in `sentence`, in order, resolved against the day it was said.

    Matching is case-insensitive on whole words; where expressions overlap the longest wins ("the day
    before yesterday" is one expression). Choices where speech is ambiguous: "on Friday" and "last
    Friday" are the Friday strictly before (a memory hears mostly of what happened), "next Friday" the
    one strictly after; "last May" is the latest May before this month (said in May: last year's),
    "in May" the latest May up to this month, "next May" the first after this month; "the other day" is
    "a few days before"; "a couple of days ago" stays vague like "a few days ago"; "the last week" and
    "the next month" (after "the") are spans, not resolved; "in May 2022" is already a date.
    """
    today = said_at.date() if isinstance(said_at, datetime) else said_at
    matches = [(match, resolve) for pattern, resolve in _PATTERNS for match in pattern.finditer(sentence)]
    found = []
    for match, resolve in _longest_without_overlaps(matches):
        resolved, day = resolve(match, today)
        found.append(RelativeTime(match.group(), match.start(), match.end(), resolved, day))
    return found


def _longest_without_overlaps(matches: list[tuple[re.Match, Callable]]) -> list[tuple[re.Match, Callable]]:
    """Longest first, each kept unless it overlaps one already kept; returned in sentence order."""
    kept: list[tuple[re.Match, Callable]] = []
    for match, resolve in sorted(matches, key=lambda item: (item[0].start() - item[0].end(), item[0].start())):
        if all(match.end() <= other.start() or match.start() >= other.end() for other, _ in kept):
            kept.append((match, resolve))
    return sorted(kept, key=lambda item: item[0].start())


_PREPOSITIONS = frozenset("since until till by from before after on in of during through to at for as than".split())
_VERBS_OF_A_SUBJECT = frozenset("is was were will would has had felt feels seemed seems could might".split())


def resolve_relative_times(sentence: str, said_at: datetime | date) -> str:
    """`sentence` with each relative time replaced by its resolution, worded to read on where it stood.

    A day takes "on" ("yesterday" -> "on 7 May 2023"), a month or a year "in" ("last year" -> "in 2022");
    a phrase ("the week before 8 May 2023", "a few years before 2023") is put as it is. No preposition is
    added after one ("since last year" -> "since 2022"), before a possessive ("yesterday's game") or
    where the expression is the subject ("Yesterday was fun" -> "7 May 2023 was fun"); one said with the
    expression is kept ("on Friday" -> "on the Friday before 8 May 2023", "in May" -> "in May 2023").
    A replacement that opens a sentence is capitalised.
    """
    pieces, cursor = [], 0
    for found in find_relative_times(sentence, said_at):
        pieces += [sentence[cursor : found.start], _worded_in_place(sentence, found)]
        cursor = found.end
    return "".join(pieces) + sentence[cursor:]


def _worded_in_place(sentence: str, found: RelativeTime) -> str:
    said_preposition = found.text.split()[0]
    if said_preposition.lower() in ("on", "in"):
        return f"{said_preposition} {found.resolved}"
    preposition = _preposition_for(found.resolved)
    phrase = found.resolved
    if preposition and not _reads_bare(sentence, found):
        phrase = f"{preposition} {phrase}"
    before = sentence[: found.start].rstrip()
    if found.text[0].isupper() and (not before or before[-1] in ".!?"):
        phrase = phrase[0].upper() + phrase[1:]
    return phrase


def _preposition_for(resolved: str) -> str | None:
    """ "on" for a day ("7 May 2023"), "in" for a month ("May 2023") or a year ("2022"), None for a phrase."""
    if re.fullmatch(r"\d{1,2} [A-Z][a-z]+ \d{4}", resolved):
        return "on"
    if re.fullmatch(r"(?:[A-Z][a-z]+ )?\d{4}", resolved):
        return "in"
    return None


def _reads_bare(sentence: str, found: RelativeTime) -> bool:
    """True where a preposition would not read: after one, before a possessive, as the subject of a verb."""
    word_before = re.search(r"(\w+)\s+$", sentence[: found.start])
    after = sentence[found.end :]
    word_after = re.match(r"\s+(\w+)", after)
    return (
        (word_before is not None and word_before[1].lower() in _PREPOSITIONS)
        or after.startswith(("'s", "\u2019s"))
        or (word_after is not None and word_after[1].lower() in _VERBS_OF_A_SUBJECT)
    )
