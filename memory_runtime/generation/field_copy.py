"""Copy-constrained decoding of call fields: names are copied from the conversation, not respelled.

The call format puts a name right after "{" or ">>", with no space, so the model must spell
" Brett" (one token in the user's text) as "Bre"+"tt": a small model drifts to a commoner
spelling ("Bret", "Michele"). While the model writes a subject or object field, the backend
keeps, among its top candidates, only tokens that leave the field a word-aligned substring of
what the model has seen (messages, the assistant text before the call, inserted results);
when none qualifies the model's own choice stands. Relations, when the caller gives the memory's
relation names, are held to those names or to words copied from the conversation: a relation the
table does not know ("X coaches Y") is stored as stated rather than forced into one it does, and
a relation is never spelled in words nobody wrote. A subject or object must also be a name
(`names_nobody`: not "She", "the association" or "Reporting to"); the controller refuses a
generated write that is not, whatever the decoder could do.
"""

from __future__ import annotations

import bisect
import functools
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
FUNCTION_WORDS = frozenset(
    "a an the to at in on of for from by with as and or into onto about after before between through "
    "during since until than via among".split()
)
"""Words a name ends with only in text around it ("Reporting to", "Director at"), and starts with only
before a capitalised word ("The Royal British Bank", not "The show" or "A new constitution")."""
_VERBS_AFTER_A_NAME = frozenset("is was are were be been has had have also then".split())
"""Words that end a clause's start, not a name ("Nassar was", "Steve has served as")."""


def _small(word: str) -> bool:
    """`word` is written in small letters in a script that has capitals ("bank", "ip.access"; not
    "eBay", "3M" or a word of a script without case)."""
    return word[0].islower() and not any(c.isupper() for c in word)


def names_nobody(field: str, *, closed: bool, common: bool = False) -> bool:
    """`field` cannot be (or become) a name of a person or organisation: it starts with a pronoun
    ("He", "He is", "his wife") or with a function word before a small-letter word ("The show", "A new
    constitution"), or, once closed, it is in small letters throughout ("the association", "bank") or
    ends with a function word or a verb ("Reporting to", "Nassar was"). A pronoun or function word in capitals ("US
    Internet", "AT&T"; not "I") or before a capitalised word ("We Are IT", "The Alans") is part of a
    name, and so is a small-letter particle or legal form beside capitalised words ("van Ginneke BV",
    "Parri e figli"). An open field is judged once its second word has begun (or the field is closed).
    `common`: the field may be a common noun (an object of a relation with `common_object`: "peanuts"),
    so small letters throughout do not make it no one's."""
    first = re.match(r"(\w+)\W*(\w?)", field)
    if first is None:
        return False
    word, after = first.groups()
    if closed or after:
        starter = word.casefold() in PRONOUNS or (word.casefold() in FUNCTION_WORDS and after)
        if starter and (len(word) == 1 or not word.isupper()) and not after.isupper():
            return True
    if not closed:
        return False
    words = re.findall(r"\w[\w.'&-]*", field)
    last = re.findall(r"\w+", field)[-1]
    return (not common and all(_small(w) for w in words)) or last in FUNCTION_WORDS or last in _VERBS_AFTER_A_NAME


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


def common_object(relation: str | None, relations: Collection[str] | None, common_objects: Collection[str]) -> bool:
    """Whether a call's object may be a common noun: its relation has common objects, or it names none
    (or one not in the table) while some relation of the table has them."""
    if not common_objects:
        return False
    return not relation or relation in common_objects or relations is None or relation not in relations


def fields_copied(
    body: str,
    context: str,
    relations: Collection[str] | None = None,
    *,
    write: bool = False,
    common_objects: Collection[str] = frozenset(),
) -> bool:
    """Whether a (possibly unfinished) call body keeps its subject and object copied from `context`
    (and its relation, when `relations` is given, one of those names or a copy from `context`), in
    the protocol's three fields: no fourth separator, no call closed with fewer, and a `write` closed
    with all three filled (only a read leaves a field empty). An object of a relation in
    `common_objects` may be in small letters (names_nobody's `common`).

    `body` runs from just after "[MEM_WRITE{" / "[MEM_READ{" to, and including, the closing "}"
    if the call is closed. Bodies with escapes are not judged (True).
    """
    closed = "}" in body
    if closed:
        body = body[: body.index("}")]
    if "\\" in body:
        return True
    fields = body.split(SEPARATOR)
    if len(fields) > 3 or (closed and len(fields) < 3) or (closed and write and not all(fields)):
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
        common = k == 2 and common_object(fields[1], relations, common_objects)
        if not _occurs(field, context, closed=not is_open) or names_nobody(field, closed=not is_open, common=common):
            return False
    return True


def allowed(
    context: str,
    text: str,
    piece: str,
    relations: Collection[str] | None = None,
    common_objects: Collection[str] = frozenset(),
) -> bool:
    """Whether appending `piece` to the assistant `text` keeps the subject and object of the call
    it touches copied from `context` (the messages) or the assistant text before that call, and
    its relation one of `relations` or a copy (when `relations` is given)."""
    new = text + piece
    write = new.rfind(WRITE_OPEN)
    if write > new.rfind(READ_OPEN):  # a write ends "}]" (only a read ends "}:")
        close = new.find("}", write)
        if 0 <= close and len(text) - 1 <= close < len(new) - 1 and new[close + 1] != "]":
            return False
    body = open_call(new)
    if body is None:
        body = open_call(text)  # the piece may close the call that was open
        if body is None:
            return True
    start = new.rfind("[", 0, body)
    write = new.startswith(WRITE_OPEN, start)
    return fields_copied(
        new[body:], context + "\n" + new[:start], relations, write=write, common_objects=common_objects
    )


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


_TRIPLET = re.compile(r"\{([^{}]*?)>>[^{}]*?>>([^{}]*?)\}")  # a returned fact: its subject and object


@functools.lru_cache(maxsize=8)  # asked for each top candidate of a step, of the same text
def returned_common_terms(text: str) -> frozenset[str]:
    """The subjects and objects in small letters the reads in an assistant `text` returned ("peanuts")."""
    terms = (t.strip() for results in _RESULTS.findall(text) for pair in _TRIPLET.findall(results) for t in pair)
    return frozenset(t for t in terms if t and " " not in t and _small(t))


def name_head_dropped(text: str, piece: str) -> str | None:
    """The head of a returned name that `piece` leaves out, when it glues the name's rest to the punctuation
    `text` ends in: "Yes," + "ector" where a read returned "Hector" gives "H"; or the head of a returned term
    in small letters that `piece`, a word after a space, is inside of: " nuts" for "peanuts" gives " pea".
    Else None.

    Why: the results spell a name after "{" ("{H" + "ector") and the answer after a space (" H" + "ector");
    a small model copying from the results can skip the head token and write "Yes,ector" (issue 46), or
    " nuts" for the "peanuts" a read returned (issue 47's chat). Only a word of three letters or more,
    outside calls, after a read returned something, counts: right after punctuation, inside a returned name
    (not at its start); after a space, inside a returned one-word term in small letters, not at its start (a
    name in capitals holds words of their own: "son" in "Johnson")."""
    if not text or text[-1].isspace() or "}:" not in text or open_call(text) is not None:
        return None
    if text[-1].isalnum():
        spaced = re.fullmatch(r" ([^\W\d_]{3,})\b.*", piece, re.DOTALL)
        if spaced is None:
            return None
        word = spaced.group(1)
        inside = ((t, t.find(word, 1)) for t in sorted(returned_common_terms(text)) if not t.startswith(word))
        return next((" " + t[:k] for t, k in inside if k > 0), None)
    match = re.match(r"[^\W\d_]\w*", piece)
    if match is None or len(match.group()) < 3:
        return None
    word = match.group()
    for name in sorted(returned_names(text)):
        k = name.find(word, 1)
        if k > 0 and not name.startswith(word):
            return name[:k]
    return None


def _spans(context: str, max_words: int) -> set[str]:
    """Every run of up to `max_words` words of `context` that starts at a letter or digit with none
    before it and ends where `_occurs` lets a closed field end (no space, no letter or digit after):
    the copies a call field may hold under the token-by-token rule ("Thierry" and "Thierry's" of
    "Thierry's", "e.V" and "e.V." of "e.V."), with their inner punctuation and spacing as written."""
    n = len(context)
    word = [c.isalnum() for c in context]
    starts = [i for i in range(n) if word[i] and (i == 0 or not word[i - 1])]
    ends = [j for j in range(1, n + 1) if not context[j - 1].isspace() and (j == n or not word[j])]
    spans = set()
    for i in starts:
        for j in ends[bisect.bisect_right(ends, i) :]:
            span = context[i:j]
            if len(span.split()) > max_words or any(c in span for c in ("\n", "}", ">>")):
                break
            spans.add(span)
    return spans


_REGEX_META = re.compile(r"([\\.^$*+?{}\[\]|()])")


def _regex_literal(text: str) -> str:
    """`text` matched literally, escaping only what is special in every regex dialect: re.escape also
    escapes spaces, '#', '&', '~' and '-', which vLLM's grammar engine warns about at every escape."""
    return _REGEX_META.sub(r"\\\1", text)


def calls_regex(
    context: str,
    relations: Collection[str] | None,
    *,
    max_words: int = 8,
    common_objects: Collection[str] = frozenset(),
) -> str:
    """The copy rule as one regular expression over a model's output, for engines that constrain
    decoding with a regex (vLLM's structured outputs): free text without "[", write calls whose
    subject and object are word-aligned copies of `context` and whose relation is one of
    `relations` or a copy of up to four words (any words when `relations` is None: open relations),
    and at most one read call at the end (generation stops at its "}:"). With `common_objects`, an
    object may be a common noun in small letters (for any relation: one regex does not tie the
    object to the relation before it)."""

    def alternatives(terms: Collection[str]) -> str:
        return "(?:" + "|".join(_regex_literal(t) for t in sorted(terms, key=lambda t: (-len(t), t))) + ")"

    spans = _spans(context, max_words)
    name = alternatives({s for s in spans if not names_nobody(s, closed=True)})
    obj = name
    if common_objects:
        obj = alternatives({s for s in spans if not names_nobody(s, closed=True, common=True)})
    if relations is None:
        relation = r"[^\[\]{}>\\]{1,64}"
    else:
        relation = alternatives(set(relations) | {s for s in spans if len(s.split()) <= 4})
    sep = _regex_literal(SEPARATOR)
    write = _regex_literal(WRITE_OPEN) + f"{name}{sep}{relation}{sep}{obj}" + r"\}\]"
    read = _regex_literal(READ_OPEN) + f"{name}?{sep}{relation}?{sep}{obj}?" + r"\}:"
    return rf"(?:[^\[]|{write})*(?:{read})?"
