"""Copy-constrained decoding of call fields: names are copied from the conversation, not respelled.

The call format puts a name right after "{" or ">>", with no space, so the model must spell
" Brett" (one token in the user's text) as "Bre"+"tt": a small model drifts to a commoner
spelling ("Bret", "Michele"). While the model writes a subject or object field, the backend
keeps, among its top candidates, only tokens that leave the field a word-aligned substring of
what the model has seen (messages, the assistant text before the call, inserted results);
when none qualifies the model's own choice stands. Relations, when the caller gives the memory's
relation names, are held to those names or to words copied from the conversation: a relation the
table does not know ("X coaches Y") is stored as stated rather than forced into one it does, and
a relation is never spelled in words nobody wrote.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from memory_runtime.protocol import READ_OPEN, SEPARATOR, WRITE_OPEN

_CHECKED = (0, 2)  # subject and object; the relation (1) is checked against `relations` when given
PRONOUNS = frozenset(
    "i me my you your he him his she her hers it its we us our they them their this that these "
    "those who whom which someone somebody".split()
)
"""Words a subject or object never starts with: a pronoun names nobody the memory could find again
("She>>manager of>>"), and a field that goes on past it ("He is>>CEO of>>") is the same pronoun."""


def _names_nobody(field: str, *, closed: bool) -> bool:
    """`field` starts with a pronoun as a whole word ("He", "He is", "his wife"). A pronoun in capitals
    ("US Internet", but not "I") or before a capitalised word ("We Are IT", "He Jiankui") is part of a
    name. An open field is judged once its second word has begun (or the field is closed)."""
    first = re.match(r"(\w+)\W*(\w?)", field)
    if first is None:
        return False
    word, after = first.groups()
    if not closed and not after:
        return False  # the first word, or the gap after it, is still being written
    return word.casefold() in PRONOUNS and (word == "I" or not word.isupper()) and not after.isupper()


def open_call(text: str) -> int | None:
    """Index where the body of the call still open at the end of `text` starts (None: not in a call)."""
    start = max(text.rfind(WRITE_OPEN), text.rfind(READ_OPEN))
    if start < 0:
        return None
    body = start + (len(WRITE_OPEN) if text.startswith(WRITE_OPEN, start) else len(READ_OPEN))
    return None if "}" in text[body:] else body


def _word_char(c: str) -> bool:
    return c.isalnum()


def _sentence_start(context: str, i: int) -> bool:
    before = context[:i].rstrip(" \t\"'(")
    return not before or before[-1] in ".!?:\n"


def _occurs(field: str, context: str, *, closed: bool) -> bool:
    """`field` starts a word in `context` (and, when `closed`, ends one there too). A name that
    starts with a small letter ("van 't Wel Groep") may be found capitalised at a sentence start."""
    swapped = field[0].swapcase() + field[1:]
    for variant in (field, swapped) if swapped != field else (field,):
        i = context.find(variant)
        while i >= 0:
            end = i + len(variant)
            if (
                (i == 0 or not _word_char(context[i - 1]))
                and (not closed or end == len(context) or not _word_char(context[end]))
                and (variant is field or (field[0].islower() and _sentence_start(context, i)))
            ):
                return True
            i = context.find(variant, i + 1)
    return False


def _names_relation(field: str, relations: Collection[str], context: str, *, closed: bool) -> bool:
    """`field` is (on the way to) one of the table's `relations`, or words copied from `context`."""
    named = field in relations if closed else any(r.startswith(field) for r in relations)
    return named or (
        not field[0].isspace() and not (closed and field[-1].isspace()) and _occurs(field, context, closed=closed)
    )


def fields_copied(body: str, context: str, relations: Collection[str] | None = None) -> bool:
    """Whether a (possibly unfinished) call body keeps its subject and object copied from `context`
    (and its relation, when `relations` is given, one of those names or a copy from `context`), in
    the protocol's three fields: no fourth separator, no call closed with fewer.

    `body` runs from just after "[MEM_WRITE{" / "[MEM_READ{" to, and including, the closing "}"
    if the call is closed. Bodies with escapes are not judged (True).
    """
    closed = "}" in body
    if closed:
        body = body[: body.index("}")]
    if "\\" in body:
        return True
    fields = body.split(SEPARATOR)
    if len(fields) > 3 or (closed and len(fields) < 3):
        return False
    for k, field in enumerate(fields):
        is_open = k == len(fields) - 1 and not closed
        if is_open and field.endswith(">"):
            field = field[:-1]  # the first half of a separator
        if k == 1 and relations is not None and field:
            if not _names_relation(field, relations, context, closed=not is_open):
                return False
            continue
        if k not in _CHECKED or not field:
            continue
        if field[0].isspace() or (not is_open and field[-1].isspace()):
            return False
        if not _occurs(field, context, closed=not is_open) or _names_nobody(field, closed=not is_open):
            return False
    return True


def allowed(context: str, text: str, piece: str, relations: Collection[str] | None = None) -> bool:
    """Whether appending `piece` to the assistant `text` keeps the subject and object of the call
    it touches copied from `context` (the messages) or the assistant text before that call, and
    its relation one of `relations` or a copy (when `relations` is given)."""
    new = text + piece
    body = open_call(new)
    if body is None:
        body = open_call(text)  # the piece may close the call that was open
        if body is None:
            return True
    start = new.rfind("[", 0, body)
    return fields_copied(new[body:], context + "\n" + new[:start], relations)


_RESULTS = re.compile(r"\}:(.*?)\]", re.DOTALL)  # what a read returned, as the controller inserts it


def returned_names(text: str) -> set[str]:
    """The capitalised words of the read results in an assistant `text`: the names an answer copies."""
    return {w for results in _RESULTS.findall(text) for w in re.findall(r"\w+", results) if w[0].isupper()}


def answer_word_in_progress(text: str) -> str:
    """The capitalised word `text` ends in, when an answer name could be respelled from here (three
    letters or more, outside calls, after a read returned something); else ""."""
    i = len(text)
    while i > 0 and text[i - 1].isalnum():
        i -= 1
    word = text[i:]
    if len(word) < 3 or not word[0].isupper() or open_call(text) is not None or "}:" not in text:
        return ""
    return word


def answer_names_copied(text: str, piece: str) -> bool:
    """Whether `piece` keeps the name the answer is writing a copy of a name the reads returned:
    "Gustav" once "Gust" was written, not "Gustavo". A word that copies no returned name is free."""
    word = answer_word_in_progress(text)
    if not word:
        return True
    names = [n for n in returned_names(text) if n.startswith(word)]
    if not names:
        return True
    match = re.match(r"\w*", piece)
    extended = word + match.group()
    if match.end() < len(piece):  # the piece ends the word
        return extended in names
    return any(n.startswith(extended) for n in names)


def _spans(context: str, max_words: int) -> set[str]:
    """Every run of up to `max_words` consecutive words of `context` (the word-aligned copies a
    call field may hold), with their inner punctuation and spacing as written."""
    words = list(re.finditer(r"\w[\w.'&-]*", context))
    spans = set()
    for i, first in enumerate(words):
        for last in words[i : i + max_words]:
            span = context[first.start() : last.end()].rstrip(".")
            if span and not any(c in span for c in ("\n", "}", ">>")) and not _names_nobody(span, closed=True):
                spans.add(span)
    return spans


def calls_regex(context: str, relations: Collection[str], *, max_words: int = 8) -> str:
    """The copy rule as one regular expression over a model's output, for engines that constrain
    decoding with a regex (vLLM's structured outputs): free text without "[", write calls whose
    subject and object are word-aligned copies of `context` and whose relation is one of
    `relations` or a copy of up to four words, and at most one read call at the end (generation
    stops at its "}:")."""

    def alternatives(terms: Collection[str]) -> str:
        return "(?:" + "|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t))) + ")"

    spans = _spans(context, max_words)
    name = alternatives(spans)
    relation = alternatives(set(relations) | {s for s in spans if len(s.split()) <= 4})
    write = re.escape(WRITE_OPEN) + f"{name}{re.escape(SEPARATOR)}{relation}{re.escape(SEPARATOR)}{name}" + r"\}\]"
    read = re.escape(READ_OPEN) + f"{name}?{re.escape(SEPARATOR)}{relation}?{re.escape(SEPARATOR)}{name}?" + r"\}:"
    return rf"(?:[^\[]|{write})*(?:{read})?"
