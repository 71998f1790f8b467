"""WebNLG's sentences as facts a writer copies (data_gen/webnlg.py): relations in words, spans as written, the
shipped file's rows and its splits by entry."""

from __future__ import annotations

import json

import pytest

from data_gen.webnlg import FACTS_FILE, MAX_TRIPLES, entity_text, load_facts, relation_words, split_of, text_facts


@pytest.mark.parametrize(
    ("prop", "words"),
    [
        ("birthPlace", "birth place"),
        ("associatedBand/associatedMusicalArtist", "associated band"),
        ("elevationAboveTheSeaLevel_(in_metres)", "elevation above the sea level"),
        ("ICAO_Location_Identifier", "icao location identifier"),
        ("was a crew member of", "was a crew member of"),
    ],
)
def test_a_property_is_written_in_words(prop, words):
    assert relation_words(prop) == words


def test_a_fact_is_copied_as_the_text_writes_it_or_the_text_is_not_kept():
    assert entity_text('"Aarhus, Denmark"') == "Aarhus, Denmark"
    assert entity_text("Ann_Arbor,_Michigan") == "Ann Arbor, Michigan"
    text = "Al Anderson plays with the band NRBQ and was once a member of The Wildweeds."
    triples = [["Al_Anderson", "associatedBand/associatedMusicalArtist", "The_Wildweeds"]]
    triples.append(["Al_Anderson", "associatedBand/associatedMusicalArtist", "NRBQ"])
    assert text_facts(text, triples) == [  # in the order said
        ["Al Anderson", "associated band", "NRBQ"],
        ["Al Anderson", "associated band", "The Wildweeds"],
    ]
    assert text_facts("The Gruppo Bertone was founded in TURIN.", [["Gruppo_Bertone", "foundationPlace", "Turin"]]) == [
        ["Gruppo Bertone", "foundation place", "TURIN"]  # the text's case
    ]
    # a fact whose object the text words otherwise, or names inside another word: the text is not kept
    assert text_facts("Aarhus airport serves the city.", [["Aarhus_Airport", "cityServed", "Aarhus"]]) is None
    assert text_facts("It is in Turingia.", [["It", "location", "Turin"]]) is None


def test_the_shipped_rows_state_every_fact_as_written_and_the_splits_share_no_entry():
    rows = [json.loads(line) for line in FACTS_FILE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 10000
    for row in rows:
        assert 1 <= len(row["triples"]) <= MAX_TRIPLES
        assert all(s in row["text"] and o in row["text"] and r for s, r, o in row["triples"]), row
    eids = {split: {r["eid"] for r in rows if split_of(r["eid"]) == split} for split in ("train", "validation", "test")}
    assert all(len(e) > 200 for e in eids.values())
    assert not eids["train"] & eids["validation"] and not eids["train"] & eids["test"]
    texts = {s: {t for t, _ in load_facts(str(FACTS_FILE), s)} for s in ("train", "validation")}
    assert len(texts["train"]) > 5 * len(texts["validation"]) > 5000


def test_a_file_of_another_shape_is_refused_naming_the_line(tmp_path):
    bad = tmp_path / "facts.jsonl"
    bad.write_text('{"eid": "A/1", "text": "x", "triples": [["a", "b", "c"]]}\n{"text": "y"}\n')
    with pytest.raises(ValueError, match=r"facts\.jsonl: line 2 is not a WebNLG fact row"):
        load_facts(str(bad), "train")
