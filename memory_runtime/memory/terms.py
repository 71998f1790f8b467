"""Terms as the memory keeps and compares them: a name, relation or object is cleaned before it is
stored (Unicode NFC, invisible characters dropped, whitespace collapsed; control characters, call syntax
and over-long terms refused), and compared by its matching key (normalize_term), so that two names that
look the same are one name: "Dorothea\u200b Altemus" is "Dorothea Altemus"."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from memory_runtime.protocol import Triplet

MAX_TERM_CHARS = 200  # a subject, relation or object (after cleaning); longer ones are refused
MAX_NAMESPACE_CHARS = 200


class _NormalisingTable(dict):
    """str.translate table of normalize_term, filled lazily: punctuation and invisible format characters
    (zero-width spaces and joiners, bidirectional controls, soft hyphens) are dropped, hyphens, slashes,
    underscores and whitespace become spaces, everything else is kept."""

    def __missing__(self, codepoint: int) -> str | None:
        ch = chr(codepoint)
        category = unicodedata.category(ch)
        if ch in "-_/" or ch.isspace():
            value = " "
        elif category.startswith("P") or category == "Cf":
            value = None
        else:
            value = ch
        self[codepoint] = value
        return value


_NORMALISING_TABLE = _NormalisingTable()


def normalize_term(term: str) -> str:
    """The matching key of a term: NFKC, case-folded, punctuation and invisible characters dropped,
    whitespace collapsed.

    Hyphens, slashes and underscores separate words ("Smith-Jones" ~ "Smith Jones"); other
    punctuation is removed ("Pfizer Inc." ~ "pfizer inc", "O'Brien" ~ "OBrien").
    """
    if not term.isascii():
        term = unicodedata.normalize("NFKC", term)
    return " ".join(term.casefold().translate(_NORMALISING_TABLE).split())


def triplet_key(triplet: Sequence[str], canonical: Callable[[str], str] = lambda r: r) -> Triplet:
    """The matching key of a fact: its terms normalised, its relation through `canonical` (a store's
    `canonical_relation`): two writes of one key are one fact, for the store, the scorer and the verifier."""
    s, r, o = triplet
    return Triplet(normalize_term(s), normalize_term(canonical(r)), normalize_term(o))


_RELATION_FILLER = frozenset("a an the is are was were be been being as of at in on for by to with its their".split())


def _stem(word: str) -> str:
    """A crude English stem, enough to meet "coaches", "coach" and "coached" at "coach"."""
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def relation_words(norm: str) -> frozenset[str]:
    """The content words of a normalised relation, stemmed: "is the coach of" and "coaches" both
    give {"coach"}. Reads meet relations the table does not know through these (MinHash, tuned to
    names, does not see that "coach of" is "coaches")."""
    words = [w for w in norm.split() if w not in _RELATION_FILLER] or norm.split()
    return frozenset(_stem(w) for w in words)


# no call can be written without braces and ">>": a term holds neither, nor a call verb
_CALL_SYNTAX = re.compile(r"[{}]|>>|MEM_(?:WRITE|READ)", re.IGNORECASE)


class _InvisibleTable(dict):
    """str.translate table of clean_term, filled lazily: invisible format characters (category Cf) go."""

    def __missing__(self, codepoint: int) -> str | None:
        ch = chr(codepoint)
        value = None if unicodedata.category(ch) == "Cf" else ch
        self[codepoint] = value
        return value


_INVISIBLE = _InvisibleTable()


# control characters (Unicode category Cc) that are not whitespace, and lone surrogates (Cs)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff]")


def control_character(text: str) -> str | None:
    """The first control character of `text` other than whitespace (NUL, escape, ...), as U+XXXX."""
    found = _CONTROL.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def clean_term(value: str) -> str:
    """A term as the memory keeps it: NFC, invisible format characters removed, whitespace collapsed."""
    if value.isascii():  # most names: nothing to compose, nothing invisible
        return " ".join(value.split())
    return " ".join(unicodedata.normalize("NFC", value).translate(_INVISIBLE).split())


def checked_term(value: object, what: str) -> tuple[str, str]:
    """(display, norm) of a term to store or look up; TypeError / ValueError naming what is wrong."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    control = control_character(value)
    if control is not None:
        raise ValueError(f"{what} holds a control character ({control}): a name is text a person can read")
    display = clean_term(value)
    if not display:
        raise ValueError(f"{what} is empty")
    if len(display) > MAX_TERM_CHARS:
        raise ValueError(f"{what} is {len(display):,} characters long: a term has at most {MAX_TERM_CHARS}")
    norm = normalize_term(display)
    if not norm:
        raise ValueError(f"{what} {value!r} has no letters or digits")
    if _CALL_SYNTAX.search(display):
        raise ValueError(
            f"{what} {value!r} holds call syntax ({{ }} >> or a MEM_ verb): a memory keeps none, "
            "so no read result can carry a call for the model to copy"
        )
    return display, norm


def checked_namespace(namespace: object) -> str:
    """A namespace as given, or ValueError: empty, over-long, or holding a control character."""
    if not isinstance(namespace, str) or not namespace.strip():
        raise ValueError(f"namespace must be a non-empty string, got {namespace!r}")
    if len(namespace) > MAX_NAMESPACE_CHARS or control_character(namespace) is not None:
        raise ValueError(
            f"namespace {namespace[:40]!r} is not a namespace name: at most {MAX_NAMESPACE_CHARS} characters, "
            "no control characters"
        )
    return namespace
