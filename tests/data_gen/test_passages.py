import random
import re
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
import yaml

from data_gen.data_config import ConfigError, DataConfig
from data_gen.passage_bank import _TEMPLATE_SLOTS, PassageBank
from data_gen.passages import MAX_LIST_ORGS, MAX_ROLE_WRITES, PassageMaker
from data_gen.world import real_companies
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import parse_calls

REPO = Path(__file__).resolve().parents[2]
PEOPLE = ("Jane Roe", "Karl van der Berg", "Élise Bouvet", "Pancho Gabaldón", "Amy Byrd", "Wiktor Patyna")


def maker(seed: int = 0, **kw) -> PassageMaker:
    bank = PassageBank.load()
    return PassageMaker(bank, PEOPLE, tuple(real_companies()), list(bank.relations), random.Random(seed), **kw)


def statements_ok(facts: list[tuple[str, str, str]], max_facts: int = 2) -> bool:
    """At most `max_facts` statements: a list of organisations is one (person, relation), and a
    biography's roles (one person, up to MAX_ROLE_WRITES writes) are one."""
    if max_facts == 1:
        return len(facts) == 1
    one_person = len({p for p, _, _ in facts}) == 1
    return len({(p, r) for p, r, _ in facts}) <= 2 or (one_person and len(facts) <= MAX_ROLE_WRITES)


def test_every_fact_is_copied_from_the_text_as_stated():
    m = maker()
    relations, forms = Counter(), Counter()
    for _ in range(400):
        text, facts = m.passage()
        first_word = text.split()[0]
        starts_capital = not text[0].islower() or any(c.isupper() for c in first_word[1:])  # "eBay" stays so
        assert 1 <= len(facts) <= max(MAX_LIST_ORGS, MAX_ROLE_WRITES) and statements_ok(facts), text
        assert starts_capital and text.endswith("."), text
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
    with pytest.raises(ConfigError, match="organisation"):
        PassageBank.load(path)
    bank["relations"]["employed by"]["groups"][0]["vp"].pop()
    bank["relations"]["member of"]["groups"][0]["vp"].append("works for {org}")  # also employed by, for ngos
    path.write_text(yaml.safe_dump(bank))
    with pytest.raises(ConfigError, match="'works for \\{org\\}' also states 'employed by' for kind 'ngo'"):
        PassageBank.load(path)
    bank["relations"]["member of"]["groups"][0]["vp"].pop()
    bank["relations"]["works for"] = bank["relations"].pop("employed by")  # an alias, not a canonical name
    path.write_text(yaml.safe_dump(bank))
    PassageBank.load(path)  # a valid bank on its own ...
    data = yaml.safe_load((REPO / "configs" / "data" / "default.yaml").read_text())
    data["passages"]["bank"] = str(path)
    with pytest.raises(ConfigError, match="works for"):  # ... but not against the memory's relation table
        DataConfig.from_dict(data, source="test")


# ---------------------------------------------------------------- news, lists, clauses on the organisation

SPEECH_WORDS = ("said", "announced", "confirmed", "According to", "press release")


def passages(seed: int, n: int, **kw) -> list[tuple[str, list[tuple[str, str, str]]]]:
    m = maker(seed, **kw)
    return [m.passage() for _ in range(n)]


def news_speaker(text: str) -> str | None:
    """The organisation that speaks in a reported-speech passage, None when the text is not one."""
    for template in PassageBank.load().news.intros + PassageBank.load().news.sources:
        speaker = "(?P<speaker>(?:the )?[A-ZÀ-Ý0-9][^,]*?)"  # a name, not "a statement"
        pattern = re.escape(template).replace(r"\{speaker\}", speaker).replace(r"\{weekday\}", r"\w+day")
        if found := re.search(f"(?:^|\\. |, ){pattern}(?: |\\.|,)", text):
            return found["speaker"].removeprefix("the ").removeprefix("The ")
    return None


def fact_patterns() -> list[re.Pattern]:
    """Every piece of the bank that states a fact, as a regex: a negative holding one states a fact."""
    bank = PassageBank.load()
    words = bank.words
    capital = r"(?:[A-ZÀ-Ý0-9&(]|[a-z](?=[A-Z]))"  # "Élise", "3M", "eBay"
    name = rf"(?:the |The )?{capital}[^\s,]*(?: (?:of|van|der|and|{capital}[^\s,]*))*?"  # "Dr. Karl van der Berg"
    nouns = "|".join(k.noun for k in bank.organisations.values() if k.noun)  # "the company"
    descriptors = "|".join(d for kind in words.descriptors.values() for d in kind)
    described = rf"the (?:(?:{'|'.join(words.countries)}) )?(?:{descriptors}) \"?{name}\"?"  # 'the Dutch bank "ING"'
    fill = {
        "per": name,
        "org": rf"(?:{described}|{name})(?:, [^,.]*,?)?|{nouns}",  # "ING, a bank based in Utrecht,"
        "orgs": f"(?:both )?{name}",
        "year": r"\d{4}",
        "year2": r"\d{4}",
        "job": "|".join(map(re.escape, words.jobs)),
        "job_a": "|".join(f"an? {re.escape(j)}" for j in words.jobs),
        "role": "|".join(map(re.escape, words.roles)),
        "city": "|".join(words.cities),
        "weekday": "|".join(words.weekdays),
    }
    templates = [
        t for rel in bank.relations.values() for g in rel.groups for s in _TEMPLATE_SLOTS for t in getattr(g, s)
    ]
    templates += [t for role in bank.combined_roles for s in ("vp", "app", "pre") for t in getattr(role, s)]
    found = []
    for template in templates:
        for text in {template, template.replace(" in {year}", "")}:  # "In 1994, X joined Y."
            pattern = re.escape(text).replace("'s", "(?:'s|')")  # "Texas Instruments' CEO"
            if text[:1].isalpha():  # "Former Acme analyst Jane Roe"
                pattern = f"[{text[0].lower()}{text[0].upper()}]{pattern[1:]}"
            for placeholder, regex in fill.items():
                pattern = pattern.replace(re.escape("{" + placeholder + "}"), f"(?:{regex})")
            found.append(re.compile(rf"\b{pattern}"))
    return found


def states_a_fact(text: str, patterns: list[re.Pattern]) -> bool:
    return any(p.search(text) for p in patterns)


def test_max_facts_counts_statements_and_a_list_is_one_statement():
    # max_facts 1: one write a passage; 2: up to two statements (person, relation), where a list
    # of organisations is one statement written once per organisation, up to MAX_LIST_ORGS writes
    assert all(len(facts) == 1 for _, facts in passages(8, 300, max_facts=1))
    made = passages(8, 600)
    assert all(statements_ok(facts) and len(facts) <= MAX_LIST_ORGS for _, facts in made)
    assert any(len(facts) == MAX_LIST_ORGS and len({(p, r) for p, r, _ in facts}) == 1 for _, facts in made)


def test_no_fact_is_about_an_organisation_or_itself():
    orgs_seen = set()
    for text, facts in passages(9, 1500):
        for person, relation, org in facts:
            orgs_seen.add(org)
            assert person != org and relation in PassageBank.load().relations, (text, facts)
            assert any(p.split()[0] in person and p.split()[-1] in person for p in PEOPLE), (text, person)
    assert not any(p.split()[0] in org.split() for org in orgs_seen for p in PEOPLE)  # no person as an object


def test_news_speaker_is_the_facts_organisation_or_a_distractor():
    own = other = referred_back = 0
    for text, facts in passages(10, 1500):
        speaker = news_speaker(text)
        if speaker is None or len(facts) != 1 or any(part in speaker for p in PEOPLE for part in p.split()):
            continue  # not news, or a person who speaks ("Jane Roe said on Monday that ...")
        person, relation, org = facts[0]
        assert speaker not in person, text  # never <Org>>>CEO of>><Org>: the speaker is no subject
        if speaker == org:
            own += 1
            nouns = ("the company", "the university", "the party", "the club", "the organisation", "the band")
            referred_back += any(noun in text for noun in nouns) and text.count(org) == 1
        else:
            other += 1  # a distractor: the text states nothing about the speaking organisation
            assert all(speaker != o for _, _, o in facts), text
    assert own > 20 and other > 20 and referred_back > 5, (own, other, referred_back)


def test_coordinated_organisations_give_one_write_each_in_text_order():
    shapes = Counter()
    for text, facts in passages(11, 1500):
        if len({(p, r) for p, r, _ in facts}) != 1 or len(facts) < 2:
            continue
        (_, relation), orgs = {(p, r) for p, r, _ in facts}.pop(), [o for _, _, o in facts]
        assert relation != "CEO of" and len(set(orgs)) == len(orgs), text
        assert [text.index(o) for o in orgs] == sorted(text.index(o) for o in orgs), (text, orgs)
        shapes["both"] += f"both {orgs[0]}" in text or f"both the {orgs[0]}" in text
        shapes["three"] += len(orgs) == 3
        shapes["oxford"] += len(orgs) == 3 and f", and {orgs[-1]}" in text.replace("and the ", "and ")
        shapes[relation] += 1
    assert all(shapes[s] for s in ("both", "three", "oxford", "investor in", "board member of", "founder of")), shapes
    assert shapes["member of"] and shapes["employed by"], shapes


def test_coordinated_subjects_give_one_write_per_person():
    seen = 0
    for text, facts in passages(12, 800):
        people = [p for p, _, _ in facts]
        if len(facts) == 2 and len({(r, o) for _, r, o in facts}) == 1 and len(set(people)) == 2:
            first, second = people
            if f" and {second}" in text.replace("Dr. ", "").replace("Prof. ", ""):
                seen += 1
                assert text.replace("Dr. ", "").replace("Prof. ", "").index(first) < text.index(second.split()[-1])
    assert seen > 15


def test_a_fact_in_a_clause_on_the_organisation():
    seen = Counter()
    for text, facts in passages(13, 1500):
        if len(facts) != 1:
            continue
        person, relation, org = facts[0]
        clause = re.search(re.escape(org) + r", (which|where|whose|on whose|in which|of which|the company) ", text)
        if clause and text.index(org) < text.index(person.split()[-1]):
            seen[clause[1]] += 1
    assert seen["which"] > 10 and seen["where"] > 5 and seen["the company"], seen


def test_chairing_a_board_is_chairperson_not_board_member():
    bank = PassageBank.load()
    for name, rel in bank.relations.items():
        for group in rel.groups:
            for slot in _TEMPLATE_SLOTS:
                for template in getattr(group, slot):
                    if re.search(r"\bchair", template, re.IGNORECASE):
                        assert name == "chairperson of", (name, template)
    seen = 0
    for text, facts in passages(14, 1500):
        for _, relation, org in facts:
            if re.search(r"chairs the board of (the )?" + re.escape(org), text):
                seen += 1
                assert relation == "chairperson of", (text, facts)
    assert seen > 3


def test_the_fact_patterns_find_the_facts_of_passages():
    # the check the negatives below pass through: it finds a fact in nearly every passage
    patterns = fact_patterns()
    made = passages(15, 300)
    assert sum(states_a_fact(t, patterns) for t, _ in made) >= 0.99 * len(made)


def test_news_and_refusal_negatives_state_no_fact():
    patterns = fact_patterns()  # past positions included: "X left Acme in 2001" would state a fact
    m = maker(16)
    texts = {m.negative() for _ in range(600)}
    # a fact about a pronoun, a question, a thought: the older negatives that hold a fact's words
    hypothetical = ("whether", "wonder", "Imagine", "Nobody", "She ", "He ", "They ", "During ")
    checked = [t for t in texts if not t.startswith(hypothetical) and not any(h in t for h in hypothetical)]
    assert not [t for t in checked if states_a_fact(t, patterns)]
    news = [t for t in checked if any(w in t for w in SPEECH_WORDS) or "turned down" in t or "never hired" in t]
    assert len(news) > 20, news
    # a university a person studied at is no employer: "a graduate of X" stores nothing
    assert [t for t in checked if "graduate" in t or "studied" in t or "degree from" in t]


def test_a_departure_is_no_negative():
    # "X left Acme in 2001" states a past employment, which annotated text counts as a fact:
    # the negatives keep only people who never held the relation (turned down, rejected, not hired)
    departures = re.compile(r"\b(left|resigned|stepped down|retired|quit|sold|former|formerly|until)\b")
    assert not [t for t in PassageBank.load().negatives if departures.search(t) and not t.startswith("{pron}")]


def test_list_and_news_pieces_are_validated(tmp_path):
    bank = yaml.safe_load((resources.files("data_gen") / "passages.yaml").read_text())
    bank["relations"]["investor in"]["groups"][0]["list_vp"].append("has invested in {org}")  # one, not a list
    bank["news"]["intros"].append("On {weekday}, a spokesperson said that")  # nobody speaks
    path = tmp_path / "bank.yaml"
    path.write_text(yaml.safe_dump(bank))
    with pytest.raises(
        ConfigError, match=r"(?s)list_vp.*unknown placeholder \{org\}.*news.intros.*missing placeholder"
    ):
        PassageBank.load(path)
    bank = yaml.safe_load((resources.files("data_gen") / "passages.yaml").read_text())
    bank["relations"]["board member of"]["groups"][0]["app"].append("chair of the board of {org}")
    path.write_text(yaml.safe_dump(bank))
    with pytest.raises(ConfigError, match="'chair of the board of {org}' also states '(board member|chairperson) of'"):
        PassageBank.load(path)


# ---------------------------------------------------------------- descriptors, past positions, titles, biographies


def described_pattern(bank: PassageBank) -> tuple[re.Pattern, re.Pattern]:
    """What the text may say an organisation is, before its name ('the Dutch bank "' + name) and
    in an apposition after it (name + ', a bank based in Utrecht')."""
    descriptors = "|".join(sorted({d for kind in bank.words.descriptors.values() for d in kind}, key=len)[::-1])
    countries = "|".join(bank.words.countries)
    before = re.compile(rf'\bthe (?:(?:{countries}) )?(?:{descriptors}) "?$')
    after = re.compile(rf"^\"?, (?:an? |the )[^,.]*\b(?:{descriptors})\b")
    return before, after


def test_an_organisation_named_with_what_it_is_is_written_by_its_name():
    bank = PassageBank.load()
    assert len(bank.words.descriptors["company"]) >= 25
    before, after = described_pattern(bank)
    countries = "|".join(bank.words.countries)
    descriptors = "|".join(d for kind in bank.words.descriptors.values() for d in kind)
    in_name = re.compile(rf"^(?:the |(?:{countries}) )*(?:{descriptors}) |,| based in ")
    companies, shapes = set(real_companies()), Counter()
    for text, facts in passages(17, 1500):
        for _, _, org in facts:
            assert not in_name.search(org), (text, org)  # "the Dutch bank ING" writes ING
        named = [o for _, _, o in facts if o in companies]
        shapes["company"] += bool(named)
        for org in named:
            at = text.index(org)
            shapes["before"] += bool(before.search(text[:at]))
            shapes["after"] += bool(after.search(text[at + len(org) :]))
            shapes["quoted"] += f'"{org}"' in text
        shapes["described"] += any(
            before.search(text[: text.index(o)]) or after.search(text[text.index(o) + len(o) :]) for o in named
        )
    assert shapes["before"] > 50 and shapes["after"] > 20 and shapes["quoted"], shapes
    assert 0.09 < shapes["described"] / shapes["company"] < 0.22, shapes  # about 15% of passages with a company


def test_a_description_leaves_titles_and_possessives_readable():
    bank = PassageBank.load()
    before, after = described_pattern(bank)
    m = maker(18)
    for _ in range(1500):
        text = m.passage()[0]
        assert not re.search(r"'s?, (?:an? |the )", text), text  # no "ING's, a bank based in ..."
        assert not re.search(r'"\'', text), text  # no quoted name with a possessive
    for _ in range(300):
        made = m._prefix(set(), set())  # None: the relation has no title for that kind
        if made is None:
            continue
        text, (fact,) = made
        if not text.split(fact.org, 1)[1].startswith("'"):  # "Acme CEO Jane Roe", not
            assert not before.search(text[: text.index(fact.org)]), text  # "the Dutch bank Acme CEO"


PAST = {  # what a past position says -> the relations it may write (the organisation follows)
    r"\bformer (?:CEO|chief executive) of|(?:stepped down|retired) as (?:CEO|chief executive) of": ("CEO of",),
    r"served as chief executive of|chief executive of \S+ until": ("CEO of",),
    r"(?:retired|stepped down) as (?:chairman|chair) of|\bformer (?:chairman|chairwoman|chair) of|\bchaired": (
        "chairperson of",
    ),
    r"previously worked at|former employee of|worked for|spent two decades at": ("employed by",),
    r"former (?:board member|director) of|sat on the board of|resigned from the board of": ("board member of",),
    r"former member of|was a member of|represented": ("member of",),
    r"one of the founders of|co-founded": ("founder of",),
    r"\bleft": ("employed by", "member of"),  # "left Acme in 2012": a past job or membership
}


def test_a_past_position_writes_the_relation():
    seen = Counter()
    for text, facts in passages(19, 2000):
        for said, relations in PAST.items():
            for found in re.finditer(rf"(?:{said}) (?P<span>(?:(?! and )[^,.;])*)", text):  # up to "and" ","
                # a fact's organisation right after the words ("the Dutch bank Acme"): that relation
                for org in {o for _, _, o in facts if re.search(rf"(?<!\w){re.escape(o)}(?!\w)", found["span"])}:
                    assert any(r in relations and o == org for _, r, o in facts), (text, facts)
                    seen[relations] += 1
    assert all(seen[r] > 5 for r in PAST.values()), seen


def test_a_combined_title_writes_each_relation_in_the_titles_order():
    bank = PassageBank.load()
    words = {  # where a title names each relation
        "founder of": r"found",
        "CEO of": r"CEO|[Cc]hief [Ee]xecutive",
        "chairperson of": r"chair",
        "member of": r"singer|guitarist|drummer|bassist|frontman|sang",
    }
    m, titles, shapes = maker(21), [t.relations for t in bank.combined_roles], Counter()
    for _ in range(300):
        text, facts = m._roles(set(), set())
        assert [f.relation for f in facts] in titles, text
        assert len({(f.person, f.org) for f in facts}) == 1 and facts[0].org in text, text
        at = [re.search(words[f.relation], text).start() for f in facts]
        assert at == sorted(at) and len(set(at)) == len(at), (text, [f.relation for f in facts])
        shapes[len(facts)] += 1
        shapes["president"] += "resident" in text
    assert shapes[2] > 200 and shapes[1] and shapes["president"] == shapes[1], shapes
    one = maker(21, max_facts=1)  # one write: titles of one relation ("president and CEO of Acme")
    assert all(len(one._roles(set(), set())[1]) == 1 for _ in range(50))
    made = [f for _, f in passages(22, 600)]  # in passages: two writes, one person and organisation
    assert any(len(f) == 2 and len({(p, o) for p, _, o in f}) == 1 and f[0][1] != f[1][1] for f in made)


def test_a_biography_writes_one_fact_per_role_that_names_an_organisation():
    bank = PassageBank.load()
    bio = bank.biography
    countries, professions = "|".join(bank.words.countries), "|".join(bio.professions)
    m, shapes = maker(23), Counter()
    for _ in range(300):
        text, facts = m._biography(set(), set())
        person = facts[0].person
        intro = rf"{re.escape(person.mention)}(?: \(born [^)]*\))? is an? (?:{countries}) (?:{professions})(?:,| and) "
        assert re.match(intro, text) and text.endswith("."), text
        assert all(f.person == person for f in facts) and 1 <= len(facts) <= MAX_ROLE_WRITES, text
        assert len({f.relation for f in facts}) == len(facts), text  # each role another relation
        at = [text.index(f.org) for f in facts]
        assert at == sorted(at), (text, [f.org for f in facts])  # text order
        bare = [r for r in bio.roles if r in text]  # "a philanthropist": no write
        assert not any(f.org in r for r in bare for f in facts), text
        shapes[len(facts)] += 1
        shapes["bare"] += bool(bare)
        shapes["title"] += len({f.org for f in facts}) < len(facts)  # "founder and CEO of A": two writes
        shapes["born"] += "(born " in text
    assert all(shapes[k] > 10 for k in (1, 2, 3, "bare", "title", "born")), shapes
    one = maker(23, max_facts=1)  # one write: one role names an organisation
    assert all(len(one._biography(set(), set())[1]) == 1 for _ in range(100))


def test_biographies_and_titles_have_their_share():
    for max_facts in (2, 1):
        m, made = maker(24, max_facts=max_facts), Counter()
        for frame in ("biography", "roles"):

            def counted(*args, _frame=frame, _make=getattr(m, "_" + frame)):
                result = _make(*args)
                made[_frame] += result is not None
                return result

            setattr(m, "_" + frame, counted)
        for _ in range(1500):
            assert statements_ok(m.passage()[1], max_facts)
        assert 0.07 < made["biography"] / 1500 < 0.17 and 0.035 < made["roles"] / 1500 < 0.11, (max_facts, made)


def test_combined_titles_are_validated(tmp_path):
    shipped = yaml.safe_load((resources.files("data_gen") / "passages.yaml").read_text())
    path = tmp_path / "bank.yaml"
    for change, error in [
        (lambda b: b["combined_roles"][0].update(relations=["president of"]), "'president of' is not under relations"),
        (
            lambda b: b["combined_roles"][0]["kinds"].append("party"),
            r"combined_roles\[0\]\.kinds: 'founder of' has no templates for 'party'",
        ),
        (lambda b: b["combined_roles"][0]["app"].append("founder and CEO of {organisation}"), "organisation"),
        (lambda b: b["combined_roles"][0]["app"].append("CEO of {org}"), "'CEO of {org}' also states"),
        (lambda b: b["words"]["descriptors"].update(firm=["bank"]), "unknown organisation kind 'firm'"),
        (lambda b: b["distractors"]["org_apposition"].append("a {kind} in {city}"), r"unknown placeholder \{kind\}"),
    ]:
        bank = yaml.safe_load(yaml.safe_dump(shipped))
        change(bank)
        path.write_text(yaml.safe_dump(bank))
        with pytest.raises(ConfigError, match=error):
            PassageBank.load(path)
