"""Copy-constrained fields: a subject or object must be a word-aligned piece of what the model saw."""

from __future__ import annotations

import re

import pytest

from memory_runtime.generation.field_copy import allowed, calls_regex, fields_copied

CONTEXT = "Who manages the company that Brett Robson is a customer of?"


def grows(text: str, piece: str, context: str = CONTEXT) -> bool:
    return allowed(context, text, piece)


def test_text_outside_calls_is_free():
    assert grows("", "Bret is a nickname.")
    assert grows("[MEM_WRITE{Brett Robson>>customer of>>Suzuki}] ", "Bret")


@pytest.mark.parametrize(
    "text, piece, ok",
    [
        ("[MEM_READ{", "Bre", True),  # a prefix of a word of the text
        ("[MEM_READ{Bre", "tt", True),
        ("[MEM_READ{Bre", "t", True),  # still a prefix of "Brett"...
        ("[MEM_READ{Bret", " Robson", False),  # ...but "Bret Robson" is not in the text
        ("[MEM_READ{Bret", ">>", False),  # nor is the word "Bret"
        ("[MEM_READ{Brett Robson", ">>", True),
        ("[MEM_READ{Brett Robson>", ">", True),  # half a separator
        ("[MEM_READ{", "rett", False),  # not at the start of a word
        ("[MEM_READ{", " Brett", False),  # no leading space in a field
        ("[MEM_READ{Brett Robson>>", "customer of", True),  # relations are free
        ("[MEM_READ{Brett Robson>>buys at>>", "Suz", False),  # an object nobody named
        ("[MEM_READ{>>customer of>>Brett Robson", "}:", True),
        ("[MEM_WRITE{Michele Robson>>customer of>>Suzuki", "}]", False),  # the piece closes a bad call
        ("[MEM_READ{Brett Robson", "}:", False),  # a call has three fields
        ("[MEM_READ{Brett Robson>>customer of", "}:", False),
        ("[MEM_READ{Brett Robson>>>>", "}:", True),
        ("[MEM_WRITE{Brett Robson>>customer of>>Suzuki", ">>", False),  # no fourth
        ("[MEM_WRITE{Brett\\>", "x", True),  # escapes are not judged
    ],
)
def test_fields_must_be_copied(text, piece, ok):
    assert grows(text, piece) is ok


RELATIONS = {"customer of", "manager of", "employed by"}


@pytest.mark.parametrize(
    "text, piece, ok",
    [
        ("[MEM_READ{Brett Robson>>", "customer", True),  # on the way to a relation name
        ("[MEM_READ{Brett Robson>>customer", " of>>", True),
        ("[MEM_READ{Brett Robson>>", "buys at", False),  # neither a relation of the table nor a copy
        ("[MEM_READ{Brett Robson>>customer", ">>", True),  # copied from the question (the store reads it
        # as "customer of": test_store)
        ("[MEM_READ{Brett Robson>>employed at", ">>", False),  # an alias nobody wrote
        ("[MEM_READ{Brett Robson>>", ">>}:", True),  # reads may leave the relation empty
        ("[MEM_WRITE{Brett Robson>>manager of>>Suzuki", "}]", True),
        ("[MEM_WRITE{Brett Robson>>", "manages", True),  # the relation as stated (a copy)
        ("[MEM_WRITE{Brett Robson>>manages", ">>", True),
        ("[MEM_WRITE{Brett Robson>>manag", "ing>>", False),  # a respelling of what was stated
        ("[MEM_WRITE{Brett Robson>>", " manages", False),  # no space after the separator
    ],
)
def test_relations_are_names_of_the_table_or_copies(text, piece, ok):
    assert allowed(CONTEXT + " Suzuki", text, piece, RELATIONS) is ok


def test_a_relation_the_table_does_not_know_is_written_as_stated():
    context = "Gianna Russo coaches Bayern Munich."
    assert allowed(context, "[MEM_WRITE{Gianna Russo>>coaches>>Bayern Munich", "}]", RELATIONS)
    assert not allowed(context, "[MEM_WRITE{Gianna Russo>>trains>>Bayern Munich", "}]", RELATIONS)


def test_results_and_earlier_text_count_as_seen():
    # the second hop names the organisation the first read returned
    text = "[MEM_READ{Brett Robson>>customer of>>}: {Brett Robson>>customer of>>Suzuki}][MEM_READ{>>manager of>>"
    assert grows(text, "Suzuki")
    assert not grows(text, "Suzu ki")


def test_a_sentence_start_capital_does_not_hide_a_lowercase_name():
    context = "Van 't Wel Groep board member Mar L. Porta studied economics in Zurich."
    assert fields_copied("Mar L. Porta>>board member of>>van 't Wel Groep}", context)
    assert not fields_copied("Mar Porta>>board member of>>van 't Wel Groep}", context)


def test_a_lowercase_name_is_not_capitalised_mid_sentence():
    assert not fields_copied(">>employed by>>Den Haag & Vos}", "Who works at den Haag & Vos?")
    assert fields_copied(">>employed by>>den Haag & Vos}", "Who works at den Haag & Vos?")


def test_the_regex_form_of_the_rule_accepts_relations_as_stated():
    import re

    from memory_runtime.generation.field_copy import calls_regex

    pattern = calls_regex("Gianna Russo coaches Bayern Munich.", RELATIONS)
    assert re.fullmatch(pattern, " [MEM_WRITE{Gianna Russo>>coaches>>Bayern Munich}] Noted.")
    assert re.fullmatch(pattern, " [MEM_WRITE{Gianna Russo>>employed by>>Bayern Munich}]")
    assert not re.fullmatch(pattern, " [MEM_WRITE{Gianna Russo>>trains>>Bayern Munich}]")


def test_the_regex_escapes_only_what_every_regex_dialect_treats_as_special():
    """vLLM's grammar engine warns at each escape it does not know ("\\ ", "\\&"...): hundreds a turn."""
    import re

    from memory_runtime.generation.field_copy import calls_regex

    context = "AT&T's Gianna Russo-Lee (#2) works for Bayern Munich e.V."
    pattern = calls_regex(context, RELATIONS)
    assert not re.search(r"\\[ &#~\-']", pattern)
    assert re.fullmatch(pattern, " [MEM_WRITE{Gianna Russo-Lee>>employed by>>Bayern Munich e.V.}] Noted.")
    assert not re.fullmatch(pattern, " [MEM_WRITE{Gianna Russo-Lee>>employed by>>Bayern Munich eXV.}]")


@pytest.mark.parametrize(
    "before, piece, ok",
    [
        ("Gust", "av", True),
        ("Gust", "avo", False),
        ("Gustav", " works", True),
        ("Gustav", "o works", False),
        ("Gustav", "'s", True),
        ("Klei", "n.", True),
        ("Klei", "ne.", False),
        ("Noted", "x", True),  # a word that copies no returned name is free
        ("Gu", "sto", True),  # two letters: too early to tell
    ],
)
def test_answer_names_are_copies_of_returned_names(before, piece, ok):
    from memory_runtime.generation.field_copy import answer_names_copied

    text = "[MEM_READ{>>employed by>>Pfizer}: {Gustav Klein>>employed by>>Pfizer}] " + before
    assert answer_names_copied(text, piece) is ok
    assert answer_names_copied("No read here. " + before, piece)  # nothing returned: free


@pytest.mark.parametrize(
    "before, piece, head",
    [
        ("Yes,", "ector", "H"),  # issue 46: "Yes,ector" for "Hector" (the results spell it "{H" + "ector")
        ("Yes,", "ector Villalobos", "H"),
        ("Yes,", "alobos", "Vill"),
        ("Yes,", " Hector", None),  # the name from its start
        ("Yes,", "is", None),  # too short to tell
        ("Yes", "ector", None),  # inside a word: answer_names_copied's business
        ("Yes, ", "ector", None),  # after a space: a word of its own
    ],
)
def test_a_name_glued_without_its_head_is_found(before, piece, head):
    from memory_runtime.generation.field_copy import name_head_dropped

    text = "[MEM_READ{>>customer of>>Siemens}: {Hector Villalobos>>customer of>>Siemens}] " + before
    assert name_head_dropped(text, piece) == head
    assert name_head_dropped("No read here. " + before, piece) is None  # nothing returned: free
    assert name_head_dropped("[MEM_READ{>>customer of>>Siemens}: " + before, piece) is None  # a call still open


@pytest.mark.parametrize(
    "before, piece, head",
    [
        ("allergic to", " nuts", " pea"),  # issue 47's chat: "nuts" for the returned "peanuts"
        ("allergic to", " nut", " pea"),  # the word's start is enough
        ("allergic to", " nuts.", " pea"),
        ("allergic to", " peanuts", None),  # the term from its start
        ("allergic to", " pea", None),
        ("allergic to", " fish", None),  # not inside anything returned
        ("allergic to", " ut", None),  # too short to tell
        ("allergic to", "nuts", None),  # inside a word: not a word of its own
        ("She knows Jonas", " son", None),  # a name in capitals: its words are words of their own
    ],
)
def test_a_returned_common_term_without_its_head_is_found(before, piece, head):
    from memory_runtime.generation.field_copy import name_head_dropped

    read = "[MEM_READ{Lena Hartmann>>allergic to>>}: {Lena Hartmann>>allergic to>>peanuts}; {Jonas Johnson>>spouse of>>Lena Hartmann}] "
    assert name_head_dropped(read + before, piece) == head
    assert name_head_dropped("No read here, allergic to", piece) is None  # nothing returned: free
    # a relation's words are not returned terms: "married to" holds no "ried"
    assert name_head_dropped("[MEM_READ{>>married to>>}: {A B>>married to>>C D}] was", " ried") is None


@pytest.mark.parametrize(
    "field, ok",
    [
        ("She", False),
        ("they", False),
        ("Shelby", True),
        ("She manages", False),  # a field that goes on past the pronoun is still the pronoun
        ("I am", False),
        ("US Internet", True),  # in capitals, a name
        ("We Are IT", True),  # before a capitalised word, a name
        ("Internet", True),
    ],
)
def test_a_field_never_starts_with_a_pronoun(field, ok):
    context = "Shelby Ortiz joined Acme in 2010. She manages Acme. Shelby they said. I am with US Internet, We Are IT."
    assert allowed(context, f"[MEM_WRITE{{{field}", ">>", RELATIONS) is ok
    assert allowed(context, f"[MEM_WRITE{{Shelby Ortiz>>manager of>>{field}", "}]", RELATIONS) is ok
    pattern = calls_regex(context, RELATIONS)
    assert bool(re.fullmatch(pattern, f"[MEM_WRITE{{{field}>>manager of>>Acme}}]")) is ok


@pytest.mark.parametrize(
    "field, ok",
    [
        ("the association", False),  # small letters throughout: a description, not a name
        ("bank", False),
        ("Reporting to", False),  # ends with a function word
        ("Nassar was", False),  # ends with a verb
        ("The show", False),  # a function word before a small-letter word
        ("A new constitution", False),
        ("The Royal British Bank", True),  # before a capitalised word, part of a name
        ("A Tribe Called Quest", True),
        ("AT&T", True),
        ("van Ginneke BV", True),  # a small-letter particle or legal form beside capitalised words
        ("Parri e figli", True),
        ("Zaguri s.r.l.", True),
        ("eBay", True),
        ("3M", True),
        ("Nassar", True),
    ],
)
def test_a_field_is_a_name(field, ok):
    context = (
        "Nassar was with the association and a bank. Reporting to The show of AT&T, A new constitution, "
        "The Royal British Bank, A Tribe Called Quest, van Ginneke BV, Parri e figli, Zaguri s.r.l., eBay and 3M."
    )
    assert allowed(context, f"[MEM_WRITE{{Nassar>>employed by>>{field}", "}]", RELATIONS) is ok
    assert allowed(context, f"[MEM_WRITE{{{field}", ">>", RELATIONS) is ok
    pattern = calls_regex(context, RELATIONS)
    assert bool(re.fullmatch(pattern, f"[MEM_WRITE{{Nassar>>employed by>>{field}}}]")) is ok


def test_a_field_in_small_letters_may_still_become_a_name():
    context = "Lot works for van Ginneke BV. Lot coaches the team."
    assert allowed(context, "[MEM_WRITE{Lot>>employed by>>", "van", RELATIONS)
    assert allowed(context, "[MEM_WRITE{Lot>>employed by>>van", " Ginneke", RELATIONS)
    assert not allowed(context, "[MEM_WRITE{Lot>>employed by>>the", " team", RELATIONS)  # judged at its second word
    # a relation as stated is in small letters: the regex still allows it
    assert re.fullmatch(calls_regex(context, RELATIONS), "[MEM_WRITE{Lot>>coaches>>van Ginneke BV}]")


def test_an_open_field_is_judged_once_its_first_word_ends():
    context = "Helen Ortiz joined Acme. He manages Acme."
    assert allowed(context, "[MEM_WRITE{", "He", RELATIONS)  # may become "Helen"
    assert allowed(context, "[MEM_WRITE{He", "len", RELATIONS)
    assert allowed(context, "[MEM_WRITE{He", " ", RELATIONS)  # "He " may still become a name
    assert not allowed(context, "[MEM_WRITE{He", " manages", RELATIONS)


@pytest.mark.parametrize(
    "text, piece, ok",
    [
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>", "}", False),  # a write names its object
        ("[MEM_WRITE{>>employed by>>Pfizer", "}]", False),
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>Pfizer", "}:", False),  # a write ends "}]"
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>Pfizer}", ":", False),
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>Pfizer}", "]", True),
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>Pfizer", "}] Noted", True),
        ("[MEM_READ{>>employed by>>", "}:", True),  # a read leaves fields empty and ends "}:"
        ("[MEM_WRITE{Olivier Delaunay>>employed by>>Pfizer}] ", "Noted: yes}", True),
    ],
)
def test_the_hf_rule_closes_calls_as_the_regex_does(text, piece, ok):
    """The token-by-token rule (HF backend) and the regex (vLLM) are one rule: the engines agree."""
    import re

    context = "Olivier Delaunay works for Pfizer."
    assert allowed(context, text, piece, RELATIONS) is ok
    pattern = calls_regex(context, RELATIONS)
    prefix_ok = any(re.fullmatch(pattern, text + piece + end) for end in ("", "]", "}]", " Noted.", ">>Pfizer}]"))
    assert prefix_ok is ok


@pytest.mark.parametrize(
    "field, ok",
    [
        ("Margaud Thierry", True),  # before a possessive: the rule's word ends at the apostrophe
        ("Margaud Thierry's", True),
        ("Salesforce", True),
        ("Zaguri s.r.l.", True),
        ("Zaguri s.r", True),
        ("Margaud Thier", False),  # not at a word's end
        ("argaud Thierry", False),
    ],
)
def test_the_regex_takes_every_copy_the_token_rule_takes(field, ok):
    """Found by the engines' comparison: vLLM wrote "Margaud Thierry's" where the HF rule allowed
    "Margaud Thierry" and the model chose it (the regex's words ran on through the apostrophe)."""
    import re

    context = "What is Margaud Thierry's relation to Salesforce's board and Zaguri s.r.l.?"
    body = f"{field}>>employed by>>Salesforce}}"
    assert fields_copied(body, context, RELATIONS) is ok
    pattern = calls_regex(context, RELATIONS)
    assert (re.fullmatch(pattern, f"[MEM_WRITE{{{body}]") is not None) is ok


def test_an_object_of_a_relation_with_common_objects_may_be_in_small_letters():
    """A food is "peanuts", not a name in capitals: a relation whose objects are common nouns (the
    schema's `common: true` type, the table's common_object) lets the object be in small letters;
    every other field, and every relation of a table without them, keeps the rule."""
    from memory_runtime.generation.field_copy import names_nobody

    context = "Ann Lee is allergic to peanuts and works for the association."
    assert names_nobody("peanuts", closed=True) and not names_nobody("peanuts", closed=True, common=True)
    assert names_nobody("He", closed=True, common=True)  # a pronoun names nobody all the same
    relations = {"allergic to", "employed by"}
    assert not fields_copied("Ann Lee>>allergic to>>peanuts}", context, relations)
    assert fields_copied("Ann Lee>>allergic to>>peanuts}", context, relations, common_objects={"allergic to"})
    assert fields_copied(
        ">>>>peanuts}", context, relations, common_objects={"allergic to"}
    )  # a read naming no relation
    # the object of a relation whose objects are names, and a subject, still are names
    assert not fields_copied(
        "Ann Lee>>employed by>>the association}", context, relations, common_objects={"allergic to"}
    )
    assert not fields_copied("peanuts>>allergic to>>Ann Lee}", context, relations, common_objects={"allergic to"})
    call = "[MEM_WRITE{Ann Lee>>allergic to>>peanuts}]"
    assert not re.fullmatch(calls_regex(context, relations), call)  # vLLM's rule as one regex
    assert re.fullmatch(calls_regex(context, relations, common_objects={"allergic to"}), call)
