import random
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
import yaml

from data_gen.config import ConfigError, DataConfig
from data_gen.passages import BankError, PassageBank, PassageMaker
from data_gen.world import real_companies
from memory_runtime.protocol import parse_calls
from memory_runtime.store import MemoryConfig, TripletStore

REPO = Path(__file__).resolve().parents[2]
PEOPLE = ("Jane Roe", "Karl van der Berg", "Élise Bouvet", "Pancho Gabaldón", "Amy Byrd", "Wiktor Patyna")


def maker(seed: int = 0, **kw) -> PassageMaker:
    bank = PassageBank.load()
    return PassageMaker(bank, PEOPLE, tuple(real_companies()), list(bank.relations), random.Random(seed), **kw)


def test_every_fact_is_copied_from_the_text_as_stated():
    m = maker()
    relations, forms = Counter(), Counter()
    for _ in range(400):
        text, facts = m.passage()
        first_word = text.split()[0]
        starts_capital = not text[0].islower() or any(c.isupper() for c in first_word[1:])  # "eBay" stays so
        assert 1 <= len(facts) <= 2 and starts_capital and text.endswith("."), text
        assert ".." not in text, text
        for person, relation, org in facts:
            relations[relation] += 1
            # the full name as written (no title), the organisation as named ("the X" -> X)
            assert person in text and org in text, (text, person, org)
            assert not person.startswith(("Dr. ", "Prof. ")), person
            assert not org.startswith("the "), org
            base = next(p for p in PEOPLE if p.split()[0] == person.split()[0] and p.split()[-1] in person)
            forms[len(person.split()) - len(base.split())] += 1
    assert set(relations) == set(PassageBank.load().relations)  # every relation of the bank appears
    assert forms[0] and forms[1]  # plain names and names with a middle initial, middle name or suffix


def test_passages_show_the_realistic_shapes():
    texts = [maker(seed).passage()[0] for seed in range(300)]
    assert any("'s " in t for t in texts)  # possessives
    assert any(", who " in t for t in texts)  # relative clauses
    assert any(t.startswith("In ") and t[3:7].isdigit() for t in texts)  # dates first
    assert any(t.count(". ") >= 1 for t in texts)  # two sentences (a surname alone, an opener)
    assert any(t.startswith(("Dr. ", "Prof. ")) or " Dr. " in t or " Prof. " in t for t in texts)  # titles


def test_surname_alone_still_writes_the_full_name():
    m = maker(3)
    for _ in range(50):
        text, (fact,) = m._surname(set(), set())
        person = fact.person
        surname = person.surname[:1].upper() + person.surname[1:]
        later = text[len(person.mention) :]
        assert text.startswith(person.mention) and f". {surname} " in later and person.full not in later, text
        assert fact.org_mention in later


def test_a_pronoun_stands_for_the_person_named_before_it():
    m = maker(4)
    for _ in range(50):
        text, (fact,) = m._pronoun(set(), set())
        cut = max(text.rfind(". She "), text.rfind(". He "))
        first, second = text[:cut], text[cut + 2 :]
        assert cut > 0 and first.startswith(fact.person.mention), text
        assert fact.org_mention in second and fact.person.full not in second


def test_a_fact_about_a_pronoun_alone_stores_nothing():
    m = maker(5, unnamed_facts=1.0)
    texts = [m.negative() for _ in range(300)]
    assert all(t.split()[0] in ("She", "He") for t in texts), texts[:5]
    assert not any(
        p.split()[0] in t for t in texts for p in PEOPLE
    )  # nobody is named (organisations may hold a surname)
    # every relation of the bank is stated this way, not only the few hand-written pronoun negatives
    assert any(" board " in t for t in texts) and any("CEO" in t or "chief executive" in t for t in texts)


def test_roles_below_the_chief_executive_are_employment():
    roles = PassageBank.load().words.roles
    m = maker(6)
    seen = 0
    for _ in range(3000):
        text, facts = m.passage()
        if any(f" {role} " in f" {text} " for role in roles if role not in ("treasurer",)):
            seen += 1
            assert any(r == "employed by" for _, r, _ in facts), (text, facts)
    assert seen > 30


def test_bands_teams_and_academies_have_members():
    m = maker(7)
    kinds = Counter()
    for _ in range(3000):
        text, facts = m.passage()
        for _person, relation, org in facts:
            if org.endswith(("United", "FC", "Wolves", "Giants", "Quartet", "Philharmonic", "Academy of Sciences")):
                kinds[relation] += 1
    assert kinds["member of"] > 10


def test_a_birth_year_after_a_name_is_not_part_of_it():
    texts = [(t, f) for seed in range(400) for t, f in [maker(seed).passage()] if "(born " in t]
    assert len(texts) > 10
    for text, facts in texts:
        assert all("(" not in person and person in text for person, _, _ in facts), text


def test_negatives_state_no_fact():
    m = maker()
    texts = {m.negative() for _ in range(200)}
    assert len(texts) > 100
    assert any(t.startswith(("She ", "He ", "They ")) for t in texts)  # a fact without a name


def test_passage_records_store_exactly_their_gold(tiny_records):
    store = TripletStore(":memory:", MemoryConfig.load())
    passages = [r for r in tiny_records if r.type == "passage"]
    negatives = [r for r in tiny_records if r.type == "negative"]
    assert passages and negatives
    for i, r in enumerate(passages):
        calls = parse_calls("".join(s.text for s in r.segments if s.train))
        for c in calls:
            store.write(*c.fields, namespace=f"r{i}")
        stored = {(t.subject, t.relation, t.object) for t in store.facts(namespace=f"r{i}")}
        assert stored == set(r.gold_triplets), r.id  # relation names are canonical: nothing rewritten
    assert all(r.segments[-1].text == "Nothing to store." and not r.gold_triplets for r in negatives)


def test_a_bad_bank_is_a_clear_error(tmp_path):
    bank = yaml.safe_load((resources.files("data_gen") / "passages.yaml").read_text())
    bank["relations"]["employed by"]["groups"][0]["vp"].append("works for {organisation}")
    path = tmp_path / "bank.yaml"
    path.write_text(yaml.safe_dump(bank))
    with pytest.raises(BankError, match="organisation"):
        PassageBank.load(path)
    bank["relations"]["employed by"]["groups"][0]["vp"].pop()
    bank["relations"]["member of"]["groups"][0]["vp"].append("works for {org}")  # also employed by, for ngos
    path.write_text(yaml.safe_dump(bank))
    with pytest.raises(BankError, match="'works for \\{org\\}' also states 'employed by' for kind 'ngo'"):
        PassageBank.load(path)
    bank["relations"]["member of"]["groups"][0]["vp"].pop()
    bank["relations"]["works for"] = bank["relations"].pop("employed by")  # an alias, not a canonical name
    path.write_text(yaml.safe_dump(bank))
    PassageBank.load(path)  # a valid bank on its own ...
    data = yaml.safe_load((REPO / "configs" / "data" / "default.yaml").read_text())
    data["passages"]["bank"] = str(path)
    with pytest.raises(ConfigError, match="works for"):  # ... but not against the memory's relation table
        DataConfig.from_dict(data, source="test")
