import json
from collections import Counter
from pathlib import Path

import pytest

from data_gen.real import (
    REAL_SPLIT,
    corpus_stats,
    default_real_dir,
    is_mentioned,
    load_corpus,
    load_knowledgenet,
    load_real,
    load_real_file,
    load_redocred,
    write_real_jsonl,
)
from data_gen.real_corpora import RealDataMissing, detect_format, detokenize
from data_gen.real_mapping import (
    DOCRED_ANNOTATED,
    DOCRED_IGNORED,
    DOCRED_RELATION_IDS,
    PEOPLE_PLACES,
    PEOPLE_PLACES_RELATIONS,
    REDOCRED_RELATIONS,
    redocred_schema,
)
from data_gen.schema import Schema
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.protocol import parse_calls
from memory_runtime.records import Record
from memory_runtime.shipped import shipped

REAL = default_real_dir()
CORPORA = Path(__file__).parent / "corpora"  # hand-made: invented people and organisations
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real-text data not at {REAL}")


@pytest.fixture(scope="module")
def real():
    return load_real(REAL)


@needs_real
def test_every_passage_becomes_an_eval_only_record(real):
    assert Counter(r.source for r in real) == {"redocred": 183, "knowledgenet": 228}
    assert all(r.split == REAL_SPLIT for r in real)
    assert len({r.id for r in real}) == len(real)
    assert sum(len(r.gold_triplets) for r in real if r.source == "knowledgenet") == 242
    assert sum(len(r.gold_triplets) for r in real if r.source == "redocred") == 106  # 107, one P102/P463 duplicate


@needs_real
def test_relations_are_mapped_onto_canonical_ones(real):
    canonical = {spec.name for spec in MemoryConfig.load().relations}
    relations = Counter(t[1] for r in real for t in r.gold_triplets)
    assert set(relations) == {"employed by", "founder of", "CEO of", "member of", "chairperson of"}
    assert set(relations) <= canonical
    founded = next(r for r in real if r.source == "redocred" and any(t[1] == "founder of" for t in r.gold_triplets))
    assert founded.gold_triplets[0][:2] == ("Jesus", "founder of")  # the person is the subject (ORG -> PER flipped)


@needs_real
def test_records_follow_the_write_conventions(real):
    for r in real:
        trained = "".join(s.text for s in r.segments if s.train)
        calls = parse_calls(trained)
        assert [c.fields for c in calls] == [tuple(t) for t in r.gold_triplets], r.id
        assert [s.train for s in r.segments] == [s.role == "assistant" for s in r.segments]
        if r.gold_triplets:
            assert r.type == "write" and r.segments[-1].text == " Noted."
        else:
            assert r.type == "negative" and r.segments[-1].text == "Nothing to store."


@needs_real
def test_no_fact_passages_are_kept(real):
    empty = [r for r in real if not r.gold_triplets]
    assert Counter(r.source for r in empty) == {"knowledgenet": 79, "redocred": 103}
    assert all(r.annotated_relations for r in empty)


@needs_real
def test_redocred_is_detokenised_and_names_are_mentioned(real):
    first = real[0].segments[0].text
    assert first == "Later, Finnegan served as the Assistant Corporation Counsel for Chicago."
    redocred = [(r, t) for r in real if r.source == "redocred" for t in r.gold_triplets]
    assert all(is_mentioned(r, t) for r, t in redocred)


@needs_real
def test_jsonl_export(real, tmp_path):
    path = tmp_path / "real.jsonl"
    write_real_jsonl(real, path)
    assert [Record.model_validate_json(line) for line in path.read_text().splitlines()] == real


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(RealDataMissing, match="not found at .*nowhere"):
        load_real(tmp_path / "nowhere")
    (tmp_path / "half").mkdir()
    with pytest.raises(RealDataMissing, match="redocred_dev_person_org.jsonl"):
        load_real(tmp_path / "half")


def test_unmapped_relation_is_an_error(tmp_path):
    path = tmp_path / "kn.jsonl"
    row = {
        "text": "Ada runs Babbage Ltd.",
        "annotated": ["CEO"],
        "triples": [{"person": "Ada", "relation": "spouse of", "organization": "Babbage Ltd"}],
    }
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="kn.jsonl:1: unmapped relation 'spouse of'"):
        load_knowledgenet(path)


def test_detokenize():
    assert detokenize("Party ( Labour ) , in 1939 .") == "Party (Labour), in 1939."
    assert detokenize("a wake - up song , Jesus ' words") == "a wake-up song, Jesus ' words"
    assert detokenize('it \'s " quoted " here') == 'it\'s "quoted" here'


# --------------------------------------------------------------------------- annotated corpora (training readers)


def texts_and_facts(records):
    return [(r.segments[0].text, [tuple(t) for t in r.gold_triplets]) for r in records]


def write_json(path, value):
    path.write_text(json.dumps(value))
    return path


def test_docred_windows_are_writes_negatives_or_skipped():
    records = load_corpus(CORPORA / "docred.json", split="train")
    assert texts_and_facts(records) == [
        ("Quell joined Vantor Systems in 1990.", [("Quell", "employed by", "Vantor Systems")]),  # PER -> ORG
        (
            "Orrin Blake, who founded Lumen Freight, spoke at the opening.",  # founded by (ORG -> PER), flipped
            [("Orrin Blake", "founder of", "Lumen Freight")],
        ),
        # "Quell met Dana Frey of Harlow Bank ..." is skipped: its employer fact's evidence goes on in the next sentence
        ("Quell gave a lecture to the Corran Foundation in 2004.", []),  # a PER and an ORG, no label: a hard negative
        (
            "Ines Varga chaired the Selbury Rowing Club from 1990 to 2004.",
            [("Ines Varga", "chairperson of", "Selbury Rowing Club")],
        ),
        # "Varga had studied at Corlan College." is skipped: educated at is an ignored relation
        ("The rower Tomas Lind later played for Harbor City FC.", [("Tomas Lind", "member of", "Harbor City FC")]),
    ]
    assert [r.type for r in records] == ["write", "write", "negative", "write", "write"]
    assert {r.source for r in records} == {"docred"} and {r.split for r in records} == {"train"}
    assert [r.id for r in records] == [f"train-docred-docred-{i:05d}" for i in range(5)]
    assert all(r.annotated_relations == sorted(DOCRED_ANNOTATED) for r in records)
    assert records[2].segments[-1].text == "Nothing to store."
    assert records[0].segments[1].text == "[MEM_WRITE{Quell>>employed by>>Vantor Systems}]"
    assert records[0].segments[-1].text == " Noted." and records[0].gold_names == ["Quell", "Vantor Systems"]


def test_docred_window_of_two_sentences():
    records = load_corpus(CORPORA / "docred.json", window=2)
    assert texts_and_facts(records) == [
        (
            "Marta Quell (born 1961) is a Danish engineer. Quell joined Vantor Systems in 1990.",
            [("Marta Quell", "employed by", "Vantor Systems")],  # the entity's first mention in the window
        ),
        (
            "Quell joined Vantor Systems in 1990. Orrin Blake, who founded Lumen Freight, spoke at the opening.",
            [("Quell", "employed by", "Vantor Systems"), ("Orrin Blake", "founder of", "Lumen Freight")],
        ),
        (
            "Quell met Dana Frey of Harlow Bank at a conference in Oslo. Frey later became the chief economist there.",
            [("Dana Frey", "employed by", "Harlow Bank")],  # its evidence is whole in this window
        ),
        (
            "The Selbury Rowing Club was formed in 1884. Ines Varga chaired the Selbury Rowing Club from 1990 to 2004.",
            [("Ines Varga", "chairperson of", "Selbury Rowing Club")],
        ),
    ]


def test_docred_reads_jsonl_and_refuses_unlabelled_documents(tmp_path):
    docs = json.loads((CORPORA / "docred.json").read_text())
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert texts_and_facts(load_corpus(path)) == texts_and_facts(load_corpus(CORPORA / "docred.json"))
    del docs[1]["labels"]
    with pytest.raises(ValueError, match=r"unlabelled.json\[1\] \(document 'Selbury Rowing Club'\): no labels"):
        load_corpus(write_json(tmp_path / "unlabelled.json", docs), "docred")


def test_docred_unmapped_relation_is_an_error_naming_it(tmp_path):
    docs = json.loads((CORPORA / "docred.json").read_text())
    docs[1]["labels"].append({"h": 3, "t": 4, "r": "P1037", "evidence": [3]})  # director/manager: not a DocRED relation
    path = write_json(tmp_path / "new.json", docs)
    with pytest.raises(ValueError, match=r"new.json\[1\] \(document 'Selbury Rowing Club'\): .*relation P1037"):
        load_corpus(path)
    records = load_corpus(path, relations={"P1037": "manager of"})  # a caller can map it
    assert ("Tomas Lind", "manager of", "Harbor City FC") in records[-1].gold_triplets
    assert "manager of" in records[-1].annotated_relations


def test_docred_tables():
    assert not set(DOCRED_IGNORED) & set(REDOCRED_RELATIONS)
    assert len(DOCRED_IGNORED) + len(set(REDOCRED_RELATIONS) - {"P169"}) == 96  # every DocRED relation is decided
    canonical = {spec.name for spec in MemoryConfig.load().relations}
    assert set(REDOCRED_RELATIONS.values()) <= canonical and set(DOCRED_ANNOTATED) <= canonical


def test_raw_knowledgenet_documents():
    records = load_corpus(CORPORA / "knowledgenet.jsonl")
    assert texts_and_facts(records) == [
        ("Jonas Ekberg founded Pella Roaster in 2009.", [("Jonas Ekberg", "founder of", "Pella Roaster")]),
        # "He has been chief executive of ..." is skipped: its only fact names a pronoun
        (
            "Mara Liss, who is married to Jonas Ekberg, works at Pella Roaster as head roaster.",
            [("Mara Liss", "employed by", "Pella Roaster")],  # the spouse fact is not a memory fact
        ),
        # "Pella Roaster is based in Malmo." is skipped: annotated for HEADQUARTERS only
        ("The roastery sponsors a choir in Lund.", []),  # checked for CEO and founder facts, states none
        (
            "Ravi Mendez has taught at Kellner University since 2001, and he joined its senate in 2012.",
            [("Ravi Mendez", "employed by", "Kellner University")],  # the "he" fact is left out
        ),
    ]
    assert [r.annotated_relations for r in records] == [
        ["founder of"],
        ["employed by", "member of"],
        ["CEO of", "founder of"],
        ["CEO of", "employed by", "member of"],
    ]
    assert {r.source for r in records} == {"knowledgenet"}
    with pytest.raises(ValueError, match="relations= does not apply to knowledgenet"):
        load_corpus(CORPORA / "knowledgenet.jsonl", relations={"SPOUSE": "member of"})


def test_derived_rows_read_as_corpora(tmp_path):
    redocred = tmp_path / "sentences.jsonl"
    triple = {"head": "Ada Voss", "head_type": "PER", "relation": "P108", "relation_name": "employer"}
    row = {"title": "Ada Voss", "sent_id": 0, "sentence": "Ada Voss worked for Brill ( Leiden ) .", "triples": []}
    row["triples"] = [{**triple, "tail": "Brill ( Leiden )", "tail_type": "ORG"}]
    redocred.write_text(json.dumps(row) + "\n")
    kn = tmp_path / "kn.jsonl"
    kn.write_text(json.dumps({"text": "Cy Park is the CEO of Initech.", "annotated": ["CEO"], "triples": []}) + "\n")
    assert detect_format(redocred) == "redocred_sentences" and detect_format(kn) == "knowledgenet"
    [sentence] = load_corpus(redocred)
    assert sentence.source == "redocred_sentences" and sentence.id == "real_eval-redocred_sentences-sentences-00000"
    assert texts_and_facts([sentence]) == [
        ("Ada Voss worked for Brill (Leiden).", [("Ada Voss", "employed by", "Brill (Leiden)")])
    ]
    [passage] = load_corpus(kn)
    assert passage.type == "negative" and passage.annotated_relations == ["CEO of"]


def test_conll04_sentences():
    records = load_corpus(CORPORA / "conll04.json")
    assert texts_and_facts(records) == [
        (
            "Lena Okafor, a spokeswoman for Dunmore Chemicals, declined to comment.",
            [("Lena Okafor", "employed by", "Dunmore Chemicals")],
        ),
        ("Police said Arno Veit was questioned near the Kessler Bank office in Tarrow.", []),  # a hard negative
        # "Heavy rain fell on Tarrow on Sunday." is skipped: no person and organisation
        (
            "Pia Norberg, president of the Harwell Teachers Union, said the strike would go on.",
            [("Pia Norberg", "employed by", "Harwell Teachers Union")],
        ),
    ]
    assert {r.source for r in records} == {"conll04"} and records[1].type == "negative"


def test_conll04_other_person_organisation_relation_is_an_error(tmp_path):
    rows = json.loads((CORPORA / "conll04.json").read_text())
    rows[1]["relations"].append({"type": "Kill", "head": 0, "tail": 1})
    with pytest.raises(ValueError, match=r"bad.json\[1\]: unmapped relation Kill between a Peop and an Org"):
        load_corpus(write_json(tmp_path / "bad.json", rows))


def test_user_jsonl():
    with pytest.raises(ValueError, match=r"user.jsonl:3: relation 'coach of' is neither"):
        load_corpus(CORPORA / "user.jsonl")
    records = load_corpus(CORPORA / "user.jsonl", relations={"coach of": "employed by"})
    assert texts_and_facts(records) == [
        ("Nadia Brook has worked for Tessel Mills since May.", [("Nadia Brook", "employed by", "Tessel Mills")]),
        ("Omar Hale sits on the board of Quarry Trust.", [("Omar Hale", "board member of", "Quarry Trust")]),
        ("Lisa Chen coaches the Ridgeway Rovers.", [("Lisa Chen", "employed by", "Ridgeway Rovers")]),
        ("The weather in Brockton was mild all week.", []),
    ]
    assert [r.annotated_relations for r in records] == [None, ["board member of"], None, None]  # None: all
    assert [r.type for r in records] == ["write", "write", "write", "negative"]
    assert records[0].id == "real_eval-jsonl-user-00000" and records[0].source == "jsonl"


def test_user_jsonl_errors(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"text": "Zoe Ames joined Plover.", "triples": [["Zed Ames", "works for", "Plover"]]}))
    with pytest.raises(ValueError, match=r"mine.jsonl:1: 'Zed Ames' does not occur in the text"):
        load_corpus(path)
    path.write_text(json.dumps({"text": "Zoe Ames joined Plover.", "triples": [["Zoe Ames", "Plover"]]}))
    with pytest.raises(ValueError, match=r"mine.jsonl:1: a triple is"):
        load_corpus(path)
    with pytest.raises(ValueError, match="'coach of' -> 'trainer of', which is not a relation"):
        load_corpus(CORPORA / "user.jsonl", relations={"coach of": "trainer of"})


def test_format_auto_detection(tmp_path):
    formats = {"docred.json": "docred", "knowledgenet.jsonl": "knowledgenet", "conll04.json": "conll04"}
    formats["user.jsonl"] = "jsonl"
    assert {name: detect_format(CORPORA / name) for name in formats} == formats
    unknown = tmp_path / "what.jsonl"
    unknown.write_text(json.dumps({"title": "x", "body": "y"}) + "\n")
    with pytest.raises(ValueError, match=r"what.jsonl:1: cannot tell the corpus format .*'body', 'title'"):
        load_corpus(unknown)
    with pytest.raises(ValueError, match="unknown corpus format 'brat'"):
        load_corpus(CORPORA / "docred.json", "brat")
    with pytest.raises(RealDataMissing, match="nowhere.json"):
        load_corpus(tmp_path / "nowhere.json")
    with pytest.raises(ValueError, match=r"docred.json\[0\]: not a conll04 row \(KeyError"):
        load_corpus(CORPORA / "docred.json", "conll04")


def test_corpus_stats():
    records = load_corpus(CORPORA / "docred.json") + load_corpus(CORPORA / "conll04.json")
    assert corpus_stats(records) == {
        "passages": 8,
        "with_facts": 6,
        "negatives": 2,
        "facts": 6,
        "facts_by_relation": {"chairperson of": 1, "employed by": 3, "founder of": 1, "member of": 1},
        "by_source": {"conll04": 3, "docred": 5},
    }


# --------------------------------------------------------------------------- the second schema: people-places-things

PPT_RELATIONS = {r.name for r in Schema.load(shipped("configs", "schema", "people-places-things.yaml")).relations}


def family_document() -> dict:
    """A hand-made (Re-)DocRED document of people, places and family (invented people): each sentence
    a case of the second schema's mapping."""
    sents = [
        s.split()
        for s in (
            "Ada Lind ( born 1950 ) is a Norwegian painter born in Bergen .",  # citizen of, born in
            "Lind married Ole Berg in 1975 .",  # spouse, labelled both ways
            "Their son Per Berg was born in Oslo .",  # born in
            "Per Berg is the son of Ada Lind .",  # P40 child: the head is the parent
            "Lind died in Paris in 2010 .",  # P20 place of death: ignored
            "Ole Berg taught with Kari Dahl in Trondheim .",  # people and a place, no label
            "Ada Lind exhibited in Vienna .",  # residence with no evidence given
            "Lind called herself a daughter of Beauvoir .",  # P22 father of a LOC: typing noise
            "The museum opened in 1990 .",  # no person
        )
    ]
    entities = {  # name -> (type, mentions as (sentence, words))
        "Ada Lind": ("PER", [(0, "Ada Lind"), (1, "Lind"), (3, "Ada Lind"), (4, "Lind"), (6, "Ada Lind"), (7, "Lind")]),
        "Norwegian": ("LOC", [(0, "Norwegian")]),
        "Bergen": ("LOC", [(0, "Bergen")]),
        "Ole Berg": ("PER", [(1, "Ole Berg"), (5, "Ole Berg")]),
        "Per Berg": ("PER", [(2, "Per Berg"), (3, "Per Berg")]),
        "Oslo": ("LOC", [(2, "Oslo")]),
        "Paris": ("LOC", [(4, "Paris")]),
        "Kari Dahl": ("PER", [(5, "Kari Dahl")]),
        "Trondheim": ("LOC", [(5, "Trondheim")]),
        "Vienna": ("LOC", [(6, "Vienna")]),
        "Beauvoir": ("LOC", [(7, "Beauvoir")]),
    }

    def mention(kind: str, s: int, words: str) -> dict:
        w = words.split()
        i = next(i for i in range(len(sents[s])) if sents[s][i : i + len(w)] == w)
        return {"name": words, "sent_id": s, "pos": [i, i + len(w)], "type": kind}

    names = list(entities)
    labels = [
        ("Ada Lind", "P27", "Norwegian", [0]),
        ("Ada Lind", "P19", "Bergen", [0]),
        ("Ada Lind", "P26", "Ole Berg", [1]),
        ("Ole Berg", "P26", "Ada Lind", [1]),
        ("Per Berg", "P19", "Oslo", [2]),
        ("Ada Lind", "P40", "Per Berg", [3]),
        ("Ada Lind", "P20", "Paris", [4]),
        ("Ada Lind", "P551", "Vienna", []),
        ("Ada Lind", "P22", "Beauvoir", [7]),
    ]
    return {
        "title": "Ada Lind",
        "sents": sents,
        "vertexSet": [[mention(kind, s, w) for s, w in ms] for kind, ms in entities.values()],
        "labels": [{"h": names.index(h), "t": names.index(t), "r": r, "evidence": ev} for h, r, t, ev in labels],
    }


def people_row(*triples, sentence="Ada Lind married Ole Berg in Bergen .") -> dict:
    """A derived Re-DocRED row of the second schema: triples as (head, head type, relation, tail, tail type)."""
    keys = ("head", "head_type", "relation", "tail", "tail_type")
    return {"title": "Ada Lind", "sent_id": 0, "sentence": sentence, "triples": [dict(zip(keys, t)) for t in triples]}


def write_rows(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_second_schema_mapping_is_decided_for_every_relation():
    assert set(PEOPLE_PLACES_RELATIONS) <= DOCRED_RELATION_IDS and len(DOCRED_RELATION_IDS) == 96
    assert set(PEOPLE_PLACES_RELATIONS.values()) <= PPT_RELATIONS and set(PEOPLE_PLACES.annotated) <= PPT_RELATIONS
    assert set(PEOPLE_PLACES.annotated) == set(PEOPLE_PLACES_RELATIONS.values())  # what Re-DocRED was checked for
    assert PEOPLE_PLACES.object_types == {
        "lives in": "LOC",
        "born in": "LOC",
        "citizen of": "LOC",
        "spouse of": "PER",
        "sibling of": "PER",
        "child of": "PER",
        "colleague of": "PER",  # no Re-DocRED relation: never gold, never a false write
    }  # allergic to: a food, no DocRED type
    assert "P20" not in PEOPLE_PLACES_RELATIONS and "P1038" not in DOCRED_RELATION_IDS  # death place; relative


def test_a_file_of_the_second_schema_is_read_with_its_relations(tmp_path):
    assert redocred_schema(tmp_path / "redocred_dev_people_places_things.jsonl") is PEOPLE_PLACES
    assert redocred_schema(tmp_path / "mine.jsonl", "people-places-things") is PEOPLE_PLACES
    path = write_rows(
        tmp_path / "sample_people_places_things.jsonl",
        people_row(
            ("Ada Lind", "PER", "P26", "Ole Berg", "PER"),
            ("Ole Berg", "PER", "P26", "Ada Lind", "PER"),  # the same fact the other way: once
            ("Ada Lind", "PER", "P19", "Bergen", "LOC"),
        ),
        people_row(
            ("Ole Berg", "PER", "P40", "Per Berg", "PER"),  # child: the head is the parent
            ("Per Berg", "PER", "P25", "Ada Lind", "PER"),  # mother: the head is the child
            sentence="Per Berg , son of Ole Berg and Ada Lind .",
        ),
        people_row(sentence="Ole Berg met Ada Lind in Oslo ."),
    )
    records = load_real_file(path)
    assert texts_and_facts(records) == [
        (
            "Ada Lind married Ole Berg in Bergen.",
            [("Ada Lind", "spouse of", "Ole Berg"), ("Ada Lind", "born in", "Bergen")],
        ),
        (
            "Per Berg, son of Ole Berg and Ada Lind.",
            [("Per Berg", "child of", "Ole Berg"), ("Per Berg", "child of", "Ada Lind")],
        ),
        ("Ole Berg met Ada Lind in Oslo.", []),
    ]
    assert all(r.annotated_relations == sorted(PEOPLE_PLACES.annotated) for r in records)
    assert texts_and_facts(load_redocred(path)) == texts_and_facts(records) == texts_and_facts(load_corpus(path))


def test_an_unmapped_relation_of_the_second_schema_is_an_error_naming_it(tmp_path):
    path = write_rows(
        tmp_path / "x_people_places_things.jsonl", people_row(("Ada Lind", "PER", "P108", "Bergen", "LOC"))
    )
    with pytest.raises(
        ValueError,
        match=r"x_people_places_things.jsonl:1: unmapped relation P108 .* people-places-things; add it to "
        r"the docred ids of one of its relations",
    ):
        load_real_file(path)
    row = people_row(("Ada Lind", "PER", "P19", "Nordic Bank", "ORG"))
    with pytest.raises(ValueError, match=r"P19 \(born in\) joins a PER and a\(n\) LOC, got PER/ORG"):
        load_real_file(write_rows(path, row))
    with pytest.raises(ValueError, match=r"unmapped relation P19 .* person-organisation"):  # the first schema's file
        load_real_file(write_rows(tmp_path / "x_person_org.jsonl", row))


def test_relations_are_checked_against_the_schema_in_question(tmp_path):
    path = write_rows(
        tmp_path / "mine.jsonl",
        {"text": "Ada Lind resides in Bergen.", "triples": [["Ada Lind", "resides in", "Bergen"]]},
    )
    with pytest.raises(
        ValueError, match="relation 'resides in' is neither a relation of the person-organisation relation table"
    ):
        load_corpus(path)  # person-organisation: no such relation
    [record] = load_corpus(path, schema="people-places-things")
    assert record.gold_triplets == [("Ada Lind", "lives in", "Bergen")]  # an alias, written as its relation
    with pytest.raises(ValueError, match="'P937' -> 'lives in', which is not a relation of the person-organisation"):
        load_corpus(CORPORA / "docred.json", relations={"P937": "lives in"})
    with pytest.raises(ValueError, match="knowledgenet is a person–organisation corpus"):
        load_corpus(CORPORA / "knowledgenet.jsonl", schema="people-places-things")
    with pytest.raises(ValueError, match="no Re-DocRED mapping for schema 'pets'"):
        load_corpus(path, schema="pets")


def test_docred_documents_read_for_the_second_schema(tmp_path):
    path = write_json(tmp_path / "family.json", [family_document()])
    records = load_corpus(path, schema="people-places-things")
    assert texts_and_facts(records) == [
        (
            "Ada Lind (born 1950) is a Norwegian painter born in Bergen.",
            [("Ada Lind", "citizen of", "Norwegian"), ("Ada Lind", "born in", "Bergen")],
        ),
        ("Lind married Ole Berg in 1975.", [("Lind", "spouse of", "Ole Berg")]),  # labelled both ways: one fact
        ("Their son Per Berg was born in Oslo.", [("Per Berg", "born in", "Oslo")]),
        ("Per Berg is the son of Ada Lind.", [("Per Berg", "child of", "Ada Lind")]),  # P40 turned round
        # "Lind died in Paris in 2010." is skipped: place of death is ignored
        ("Ole Berg taught with Kari Dahl in Trondheim.", []),  # people and a place, no label: a negative
        ("Ada Lind exhibited in Vienna.", [("Ada Lind", "lives in", "Vienna")]),  # this reader takes unevidenced labels
        # "Lind called herself a daughter of Beauvoir." is skipped: a father typed LOC is typing noise
    ]
    assert load_corpus(path) == []  # no person and organisation in it
    doc = family_document()
    doc["labels"].append({"h": 0, "t": 3, "r": "P1038", "evidence": [1]})  # relative: not a DocRED relation
    with pytest.raises(
        ValueError,
        match=r"relation P1038 between a PER and a\(n\) PER .*docred ids of a relation of schema people-places-things",
    ):
        load_corpus(write_json(path, [doc]), schema="people-places-things")
