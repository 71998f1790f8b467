"""Re-DocRED's dev documents split by document: the dev half in data/real/, the training half in
data/real_train/, and the sentences the probe measured before the split all dev."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_gen.real import is_mentioned, load_corpus, load_real_file, load_redocred
from data_gen.real_mapping import DOCRED_ANNOTATED, PEOPLE_PLACES, PEOPLE_PLACES_RELATIONS, REDOCRED_RELATIONS
from data_gen.redocred_split import (
    DEFAULT_SOURCE,
    RELATION_NAMES,
    TRAIN_FILE,
    is_dev_document,
    main,
    measured_titles,
    person_org_sentences,
    schema_sentences,
    split_documents,
    stats,
    stays_dev,
)

from .conftest import REPO
from .test_real import PPT_RELATIONS, family_document

DEV_FILE = REPO / "data" / "real" / "redocred_dev_person_org.jsonl"
PPT_DEV = REPO / "data" / "real" / "redocred_dev_people_places_things.jsonl"  # the second schema's halves
PPT_TRAIN = REPO / "data" / "real_train" / "redocred_train_people_places_things.jsonl"
CORPORA = Path(__file__).parent / "corpora"
# The 66 sentences of data/real/redocred_dev_person_org.jsonl before the split (commit 86abe8a and
# earlier): title -> sentence ids. The probe measured them; they must never be trained on.
MEASURED = {
    "Edward Rowan Finnegan": [4],
    "Eivind Bolle": [0],
    "Rogaland County Municipality": [4],
    "Björn von der Esch": [2],
    "Christian worship": [12],
    "Johan Gottlieb Gahn": [6],
    "Can't Take My Eyes Off You": [8],
    "Paul Beliën": [7],
    "John R. Thurman": [6],
    "East Asia Economic Caucus": [0, 2],
    "Young Wild Things Tour": [10],
    "Bombtrack": [2, 5],
    "Christine Razanamahasoa": [9],
    "Khooni Khanjar": [5],
    "Rob James (singer)": [1],
    "Joy Division discography": [1, 2],
    "Perpetual virginity of Mary": [2, 9],
    "Mike Padden": [3, 4],
    "Horst Eidenmüller": [0, 3, 5],
    "Gregorio Pacheco": [1],
    "Kokumin Dōmei": [1, 5],
    "William Hepburn Armstrong": [0, 6],
    "Joan Burton": [5],
    "James P. Maher": [6],
    "Achilles Last Stand": [6],
    "Truth in Music Advertising": [3],
    "National Executive Committee of the African National Congress": [2, 3],
    "FLAMA": [7],
    "Guillermo Endara": [1, 13],
    "Tomcats Screaming Outside": [0, 1, 2],
    "Mark Harmsworth": [3],
    "Bernard Cribbins": [2],
    "Load (album)": [3],
    "Ngoako Ramatlhodi": [0],
    "Sappy Records": [0],
    "Aleksandr Alekseevich Borovkov": [1],
    "Edmund Burke": [0, 7],
    "Anthony G. Brown": [2],
    "Charles S. Johnson": [0, 4],
    "Stanisław Tymiński": [1, 2],
    "List of Chief Ministers of Madhya Pradesh": [6, 8, 9],
    "Jonathan Sayeed": [0],
    "Electoral district of Frankston East": [6, 7],
    "Olof Mörck": [0],
    "Rudolf Halin": [2],
    "Frederick Chiluba": [1, 3],
}
OLD_DEV_FILE = DEFAULT_SOURCE.parent / "redocred_dev_person_org.jsonl"  # the 66 rows as they were (../shared)
needs_source = pytest.mark.skipif(not DEFAULT_SOURCE.is_file(), reason=f"Re-DocRED's dev split not at {DEFAULT_SOURCE}")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_sentence_measured_before_the_split_is_still_dev():
    dev = {(r["title"], r["sent_id"]) for r in rows(DEV_FILE)}
    measured = {(title, s) for title, ids in MEASURED.items() for s in ids}
    assert len(measured) == 66 and measured <= dev
    assert not {r["title"] for r in rows(TRAIN_FILE)} & set(MEASURED)  # nor is any of their documents trained on


@pytest.mark.skipif(not OLD_DEV_FILE.is_file(), reason=f"the file before the split is not at {OLD_DEV_FILE}")
def test_the_measured_rows_are_unchanged():
    assert len(rows(OLD_DEV_FILE)) == 66
    assert set(OLD_DEV_FILE.read_text(encoding="utf-8").splitlines()) <= set(DEV_FILE.read_text().splitlines())


@needs_source
def test_the_shipped_halves_are_what_the_builder_makes_from_re_docred():
    dev, train = split_documents(DEFAULT_SOURCE, set(MEASURED))
    assert dev == rows(DEV_FILE) and train == rows(TRAIN_FILE)
    assert measured_titles(DEV_FILE) >= set(MEASURED)  # a rerun pinning today's dev documents changes nothing
    assert split_documents(DEFAULT_SOURCE, measured_titles(DEV_FILE)) == (dev, train)


def test_the_halves_have_the_counts_their_readmes_state():
    assert stats(rows(DEV_FILE)) == {
        "documents": 107,
        "sentences": 183,
        "positives": 80,
        "negatives": 103,
        "triplets": 107,
    }
    assert stats(rows(TRAIN_FILE)) == {
        "documents": 54,
        "sentences": 83,
        "positives": 12,
        "negatives": 71,
        "triplets": 14,
    }


def test_a_document_is_dev_by_the_hash_of_its_title_unless_it_was_measured():
    titles = [f"Document {i}" for i in range(400)]
    dev = [t for t in titles if is_dev_document(t)]
    assert 150 < len(dev) < 250  # about half
    assert is_dev_document("  DOCUMENT 0 ") == is_dev_document("Document 0")  # the normalised title decides
    trained = next(t for t in titles if not is_dev_document(t))
    assert is_dev_document(trained, measured={trained})


def test_both_halves_load_as_passages_and_negatives_state_no_fact():
    for records in (load_redocred(DEV_FILE), load_corpus(TRAIN_FILE, split="train")):
        negatives = [r for r in records if not r.gold_triplets]
        assert negatives and len(negatives) < len(records)
        for r in negatives:
            assert r.type == "negative" and r.gold_names == [] and r.segments[-1].text == "Nothing to store."
            assert r.annotated_relations == sorted(DOCRED_ANNOTATED)  # a write in these relations is a false write
        assert all(is_mentioned(r, t) for r in records for t in r.gold_triplets)  # names as the sentence has them


def test_a_sentence_is_a_positive_a_negative_or_left_out():
    marta, selbury = json.loads((CORPORA / "docred.json").read_text())
    assert [
        (r["sent_id"], [(t["head"], t["relation"], t["tail"]) for t in r["triples"]])
        for r in person_org_sentences(marta, "marta")
    ] == [
        (1, [("Quell", "P108", "Vantor Systems")]),  # gold: evidence [1], both mentioned
        (2, [("Lumen Freight", "P112", "Orrin Blake")]),  # the label's own direction (ORG founded by PER)
        (3, [("Dana Frey", "P108", "Harlow Bank")]),  # evidence [3, 4] includes it
        (5, []),  # a PER and an ORG, no label: a negative
    ]  # sentences 0 and 4 mention no ORG
    assert [r["sent_id"] for r in person_org_sentences(selbury, "selbury")] == [1, 3]  # 2: educated at (ignored)
    # a mapped fact whose evidence lies elsewhere leaves its sentence out: it may well state it
    marta["labels"].append({"h": 0, "t": 7, "r": "P108", "evidence": [0]})  # Quell, Corran Foundation
    assert [r["sent_id"] for r in person_org_sentences(marta, "marta")] == [1, 2, 3]
    # so does one with no evidence given
    marta["labels"][-1]["evidence"] = []
    assert [r["sent_id"] for r in person_org_sentences(marta, "marta")] == [1, 2, 3]


def test_rows_name_each_mapped_relation():
    assert set(RELATION_NAMES) == set(REDOCRED_RELATIONS) | set(PEOPLE_PLACES_RELATIONS)


# --------------------------------------------------------------------------- the second schema: people-places-things


def titles(path: Path) -> set[str]:
    return {r["title"] for r in rows(path)}


def test_no_document_is_dev_for_one_schema_and_training_for_another():
    assert not titles(PPT_DEV) & titles(PPT_TRAIN)
    assert not titles(PPT_DEV) & titles(TRAIN_FILE)  # nor trained on by the first schema
    assert not titles(DEV_FILE) & titles(PPT_TRAIN)  # nor a first-schema dev document by the second
    assert not titles(PPT_TRAIN) & set(MEASURED)


@needs_source
def test_the_second_schema_halves_are_what_the_builder_makes_from_re_docred(tmp_path):
    dev, train = split_documents(DEFAULT_SOURCE, stays_dev(PEOPLE_PLACES, PPT_DEV), PEOPLE_PLACES)
    assert dev == rows(PPT_DEV) and train == rows(PPT_TRAIN)
    # the first build: no dev file of its own yet, the first schema's dev documents stay dev
    assert split_documents(DEFAULT_SOURCE, stays_dev(PEOPLE_PLACES, tmp_path / "none.jsonl"), PEOPLE_PLACES) == (
        dev,
        train,
    )
    main(
        ["--schema", "people-places-things", "--dev", str(tmp_path / "dev.jsonl"), "--train", str(tmp_path / "t.jsonl")]
    )
    assert (tmp_path / "dev.jsonl").read_bytes() == PPT_DEV.read_bytes()
    assert (tmp_path / "t.jsonl").read_bytes() == PPT_TRAIN.read_bytes()


def test_the_second_schema_halves_have_the_counts_their_readmes_state():
    assert stats(rows(PPT_DEV)) == {
        "documents": 157,
        "sentences": 323,
        "positives": 129,
        "negatives": 194,
        "triplets": 193,
    }
    assert stats(rows(PPT_TRAIN)) == {
        "documents": 131,
        "sentences": 308,
        "positives": 129,
        "negatives": 179,
        "triplets": 196,
    }


def test_every_gold_fact_of_the_second_schema_is_one_of_its_relations():
    for path in (PPT_DEV, PPT_TRAIN):
        triples = [t for r in rows(path) for t in r["triples"]]
        assert {t["relation"] for t in triples} <= set(PEOPLE_PLACES_RELATIONS)
        assert {(t["head_type"], t["tail_type"]) for t in triples} <= {("PER", "LOC"), ("PER", "PER")}
        records = load_real_file(path)
        assert {t[1] for r in records for t in r.gold_triplets} <= PPT_RELATIONS
        assert all(r.annotated_relations == sorted(PEOPLE_PLACES.annotated) for r in records)
        assert all(is_mentioned(r, t) for r in records for t in r.gold_triplets)
        negatives = [r for r in records if not r.gold_triplets]
        assert negatives and all(r.segments[-1].text == "Nothing to store." for r in negatives)


def test_a_sentence_of_the_second_schema_is_a_positive_a_negative_or_left_out():
    doc = family_document()
    assert [
        (r["sent_id"], [(t["head"], t["relation"], t["tail"]) for t in r["triples"]])
        for r in schema_sentences(doc, "ada", PEOPLE_PLACES)
    ] == [
        (0, [("Ada Lind", "P27", "Norwegian"), ("Ada Lind", "P19", "Bergen")]),
        (1, [("Lind", "P26", "Ole Berg"), ("Ole Berg", "P26", "Lind")]),  # the labels as they are (loaded: once)
        (2, [("Per Berg", "P19", "Oslo")]),
        (3, [("Ada Lind", "P40", "Per Berg")]),  # the label's own direction: the loader turns P40 round
        (5, []),  # two people and a place, no label: a negative
    ]  # 4: place of death (ignored); 6: residence, no evidence given; 7: a father typed LOC; 8: no person
    assert person_org_sentences(doc, "ada") == []  # no organisation in it
