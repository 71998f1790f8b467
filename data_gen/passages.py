"""Realistic statements: person–organisation facts the way news, biographies and profiles state
them, and sentences that state none (hard negatives).

Templated statements ("X works for Y.") teach the call format; real text buries a fact in an
apposition ("Jane Roe, CEO of Acme, said ..."), a possessive ("Acme's founder, Jane Roe"), a
passive or relative clause, next to dates, titles, places and other organisations the person has
no stated relation to. A model trained on templates alone writes something for almost every real
sentence. The phrase bank (data_gen/passages.yaml, or `passages.bank`) lists the pieces; the frames
below put them together:

    simple       "{per} <vp>."                            two_facts   "{per}, <app>, <vp>."
    sentence     "<s>"  (organisation first, passive)     two_people  "{per} <vp>, while {per2} <vp>."
    apposition   "{per}, <app>, <distractor>."            surname     "{per} <distractor>. {Surname} <vp>."
    prefix       "<pre> {per} <distractor>."              dated       "In {year}, {per} <vp>."
    relative     "{per}, who <vp>, <distractor>."         pronoun     "{per} <distractor>. {Pron} <vp>."
    reported     "<intro> {per}, <app>, <reported>."  "<intro> {per} <vp>."  "{per} <vp>, <source>."
    org_relative "{org}, <org_rel>, <org_vp>."  "<org_lead> {org}, <org_rel>."
    coordinated  "{per} <list_vp>."  "{per}, <list_app>, <distractor>."   (one write per organisation)
    co_subjects  "{per} and {per2} <plural_vp>."  "<plural_s>"            (one write per person)
    roles        "{per}, <title>, <distractor>."  "<title pre> {per} <distractor>."  "{per} <title vp>."
                 one title, two relations to one organisation ("founder and chief executive of {org}"):
                 one write per relation, in the title's order
    biography    "{per} ({born}) is {a nationality} {profession}, <app>, <app>, and <app>."  (a Wikipedia
                 first sentence: one write per role that names an organisation, none for "a philanthropist")
    + an opener sentence or a trailer clause at times, a birth year after a name ("Jane Roe (born 1961)")

Past positions are facts, as annotated real text counts them: "former CEO of Acme", "chaired Acme
from 1990 to 2004", "left Acme in 2012" write the same relation as "CEO of Acme". The negatives keep
only people who never held the relation (turned down an offer, were not hired, sued, visited).

An organisation is at times named with what it is, before the name ("the Dutch bank ING", 'the
investment company "Acme"') or in an apposition after it ("ING, a bank based in Utrecht, ..."): the
write stores the name alone (words.descriptors, distractors.org_apposition).

News text reports facts through an organisation that speaks: "In a statement on Tuesday, Acme said
that Jane Roe, an engineer who has worked for the company since 2011, ...". The speaker is the
fact's own organisation half of the time (the write is still Jane Roe>>employed by>>Acme, never
Acme>>...>>Acme) and another organisation otherwise, with no fact about it.

`max_facts` counts statements, a statement being one person's relation to what the text names:
1 gives one write per passage; 2 allows two statements ("X, CEO of A, founded B"; "X and Y
co-founded A") and coordinated lists ("X has invested in both A and B", "A, B, and C"): one
statement written once per organisation, in text order, up to MAX_LIST_ORGS writes. A combined
title ("founder and CEO of A") is one statement written once per relation, and a biography's role
list ("is a Dutch economist, CEO of A, and a former director of B") one statement written once per
role that names an organisation, up to MAX_ROLE_WRITES writes. With max_facts 1 a title states one
relation ("president and chief executive of A": CEO of A) and a biography names one organisation.

A fact about someone the text names only by a pronoun ("He joined Acme in 1990.") is a hard
negative: nothing names the person, so nothing can be stored (`unnamed_facts` of the negatives).

The write is the full name as the text gives it without a title ("Dr. Jane K. Roe" -> "Jane K.
Roe"; a later "Roe" is still "Jane K. Roe") and the organisation as named ("Acme's" -> "Acme").
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from data_gen.text import check_templates, placeholders
from memory_runtime.protocol import Triplet
from memory_runtime.yaml_config import ConfigError, Strict, read_mapping

ORG_KINDS = ("company", "university", "party", "club", "agency", "ngo", "media", "band", "team")
NAME_FORMS = ("plain", "middle_initial", "middle_name", "title", "suffix")
_FACT_SLOTS = {"per", "org", "job", "job_a", "role", "year", "year2", "city", "weekday"}
_DISTRACTOR_SLOTS = {"city", "year", "org2", "weekday"}
_NEGATIVE_SLOTS = {"per", "per2", "org", "org2", "city", "year", "pron", "product", "weekday"}
_ORG_NAME_SLOTS = {"city", "country", "field", "surname", "adjective"}
_APPOSITION_SLOTS = {"descriptor", "descriptor_a", "city", "country"}
_INITIALS = "ABCDEFGHJKLMNPRSTW"
_MONTHS = "January February March April May June July August September October November December".split()
MAX_LIST_ORGS = 3  # a coordinated list names 2 or 3 organisations: that many writes for one statement
MAX_ROLE_WRITES = 3  # a biography's roles: up to that many writes for one statement
DESCRIBED = 0.18  # chance an organisation with descriptors is named with one ("the Dutch bank ING")
# The memory replaces a person's employer and ends their chief-executive and manager roles elsewhere
# when a new employer is written (memory_runtime/memory/relations.yaml, `ends`): a passage that states one
# person's employment beside other roles states it first, so that its writes store all its facts.
_EMPLOYMENT = "employed by"
# frame -> relative weight; reported to co_subjects are the news and list shapes, roles ~6% and
# biography ~10% of passages. _MULTI_FRAMES need max_facts >= 2: more than one write, or two sentences.
FRAME_WEIGHTS = {
    "simple": 1,
    "sentence": 1,
    "apposition": 1.5,
    "prefix": 1,
    "relative": 1,
    "dated": 0.7,
    "two_facts": 0.8,
    "two_people": 0.8,
    "surname": 0.7,
    "pronoun": 0.7,
    "reported": 1.5,
    "org_relative": 1,
    "coordinated": 1.4,
    "co_subjects": 0.7,
    "roles": 1.0,
    "biography": 1.7,
}
_MULTI_FRAMES = ("two_facts", "two_people", "surname", "pronoun", "coordinated", "co_subjects")
_SPEAKER_KINDS = ("company", "media", "agency", "university", "ngo")  # who issues statements about people
_TEMPLATE_SLOTS = ("vp", "s", "app", "pre", "list_vp", "list_app", "plural_vp", "plural_s", "org_rel")


def _check(templates: list[str], allowed: set[str], required: set[str] = frozenset()) -> list[str]:
    return check_templates(templates, allowed, set(required))


class NameBank(Strict):
    forms: dict[str, float]
    titles: list[str] = Field(min_length=1)
    suffixes: list[str] = Field(min_length=1)

    @field_validator("forms")
    @classmethod
    def _forms(cls, value: dict[str, float]) -> dict[str, float]:
        for form, weight in value.items():
            if form not in NAME_FORMS:
                raise ValueError(f"unknown name form {form!r}; known: {', '.join(NAME_FORMS)}")
            if weight < 0:
                raise ValueError(f"{form}: weight must be >= 0")
        if not any(value.values()):
            raise ValueError("every weight is 0")
        return value


class OrgKind(Strict):
    weight: float = Field(ge=0)
    names: list[str] = []
    noun: str | None = None  # how news refers back to it after naming it ("the company"); null: by name

    _names = field_validator("names")(lambda cls, v: _check(v, _ORG_NAME_SLOTS))


class Words(Strict):
    cities: list[str] = Field(min_length=1)
    countries: list[str] = Field(min_length=1)
    fields: list[str] = Field(min_length=1)
    adjectives: list[str] = Field(min_length=1)
    jobs: list[str] = Field(min_length=1)
    products: list[str] = Field(min_length=1)
    pronouns: list[str] = Field(min_length=1)
    roles: list[str] = Field(min_length=1)
    weekdays: list[str] = Field(min_length=1)
    # organisation kind -> what the text may call one ("bank", "carmaker"); kinds not listed: none
    descriptors: dict[str, list[str]] = {}

    @field_validator("descriptors")
    @classmethod
    def _descriptors(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for kind in value:
            if kind not in ORG_KINDS:
                raise ValueError(f"unknown organisation kind {kind!r}; known: {', '.join(ORG_KINDS)}")
        return value


class TemplateGroup(Strict):
    kinds: list[str] = Field(min_length=1)
    vp: list[str] = Field(min_length=1)
    s: list[str] = []
    app: list[str] = []
    pre: list[str] = []
    list_vp: list[str] = []  # {orgs}: two or three organisations, "both A and B" / "A, B and C"
    list_app: list[str] = []
    plural_vp: list[str] = []  # after "{per} and {per2}": agrees with a plural subject
    plural_s: list[str] = []  # {per} is "Jane Roe and Karl Berg"
    org_rel: list[str] = []  # after "{org}, ": "which {per} founded in {year}", "where {per} works"

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: list[str]) -> list[str]:
        for kind in value:
            if kind not in ORG_KINDS:
                raise ValueError(f"unknown organisation kind {kind!r}; known: {', '.join(ORG_KINDS)}")
        return value

    _vp = field_validator("vp", "app", "pre", "plural_vp")(lambda cls, v: _check(v, _FACT_SLOTS - {"per"}, {"org"}))
    _s = field_validator("s", "plural_s")(lambda cls, v: _check(v, _FACT_SLOTS, {"per", "org"}))
    _list = field_validator("list_vp", "list_app")(
        lambda cls, v: _check(v, _FACT_SLOTS - {"per", "org"} | {"orgs"}, {"orgs"})
    )
    _org_rel = field_validator("org_rel")(lambda cls, v: _check(v, _FACT_SLOTS - {"org"}, {"per"}))


class RelationBank(Strict):
    weight: float = Field(1.0, ge=0)
    groups: list[TemplateGroup] = Field(min_length=1)


class Distractors(Strict):
    vp: list[str] = Field(min_length=1)
    plural_vp: list[str] = Field(min_length=1)
    openers: list[str] = []
    trailers: list[str] = []
    reported: list[str] = []  # what an organisation says a person did or will do: "would lead the team in {city}"
    org_vp: list[str] = []  # what an organisation did: "{org}, which ..., <org_vp>."
    org_lead: list[str] = []  # words before an organisation, someone with no relation to it: "{per2} visited"
    org_apposition: list[str] = []  # after an organisation's name: "{descriptor_a} based in {city}"

    _check = field_validator("vp", "plural_vp", "openers", "trailers", "reported", "org_vp")(
        lambda cls, v: _check(v, _DISTRACTOR_SLOTS)
    )
    _lead = field_validator("org_lead")(lambda cls, v: _check(v, _DISTRACTOR_SLOTS | {"per2"}))
    _apposition = field_validator("org_apposition")(lambda cls, v: _check(v, _APPOSITION_SLOTS))


class CombinedRole(Strict):
    """One title that states several relations of one person to one organisation ("founder and
    chief executive of {org}"): one write per relation, in the order of `relations`, which is the
    order the title names them. A title may state one relation only ("president and CEO of {org}":
    the bank has no president relation)."""

    relations: list[str] = Field(min_length=1, max_length=2)
    kinds: list[str] = Field(min_length=1)
    vp: list[str] = []
    app: list[str] = []
    pre: list[str] = []

    _vp = field_validator("vp", "app", "pre")(lambda cls, v: _check(v, _FACT_SLOTS - {"per"}, {"org"}))


class Biography(Strict):
    """A Wikipedia first sentence: "{per} ({born}) is {a nationality} {profession}, <roles>."."""

    professions: list[str] = Field(min_length=1)
    roles: list[str] = []  # roles that name no organisation ("a philanthropist"): no write

    _check = field_validator("professions", "roles")(lambda cls, v: _check(v, set()))


class News(Strict):
    """How news reports a fact through an organisation that speaks ({speaker})."""

    intros: list[str] = []  # before the person: "In a statement on {weekday}, {speaker} said that"
    sources: list[str] = []  # after the fact: "{speaker} said in a statement"

    _check = field_validator("intros", "sources")(lambda cls, v: _check(v, {"speaker", "weekday"}, {"speaker"}))


class PassageBank(Strict):
    """data_gen/passages.yaml, validated: a typo is an error naming the field."""

    what = "passage bank"

    names: NameBank
    organisations: dict[str, OrgKind]
    words: Words
    relations: dict[str, RelationBank] = Field(min_length=1)
    distractors: Distractors
    news: News = News()
    combined_roles: list[CombinedRole] = []
    biography: Biography | None = None
    negatives: list[str] = Field(min_length=1)

    _negatives = field_validator("negatives")(lambda cls, v: _check(v, _NEGATIVE_SLOTS))

    @model_validator(mode="after")
    def _consistent(self) -> PassageBank:
        for kind, spec in self.organisations.items():
            if kind not in ORG_KINDS:
                raise ValueError(f"organisations.{kind}: unknown kind; known: {', '.join(ORG_KINDS)}")
            if kind != "company" and spec.weight and not spec.names:
                raise ValueError(f"organisations.{kind}.names: needed (only companies come from the pool)")
        stated: dict[tuple[str, str], str] = {}  # (template, kind) -> the relation it states, in any slot
        for name, rel in self.relations.items():
            for i, group in enumerate(rel.groups):
                for kind in group.kinds:
                    if kind not in self.organisations:
                        raise ValueError(f"relations.{name}.groups[{i}].kinds: {kind!r} is not under organisations")
                    for slot in _TEMPLATE_SLOTS:
                        for template in getattr(group, slot):
                            other = stated.setdefault((template, kind), name)
                            if other != name:  # the same text would be trained as two different facts
                                raise ValueError(
                                    f"relations.{name}.groups[{i}].{slot}: {template!r} also states "
                                    f"{other!r} for kind {kind!r}"
                                )
        for i, role in enumerate(self.combined_roles):
            name = " and ".join(role.relations)
            for relation in role.relations:
                if relation not in self.relations:
                    raise ValueError(f"combined_roles[{i}].relations: {relation!r} is not under relations")
                kinds = {k for g in self.relations[relation].groups for k in g.kinds}
                if missing := [k for k in role.kinds if k not in kinds]:
                    raise ValueError(f"combined_roles[{i}].kinds: {relation!r} has no templates for {missing[0]!r}")
            for slot in ("vp", "app", "pre"):
                for template in getattr(role, slot):
                    for kind in role.kinds:
                        other = stated.setdefault((template, kind), name)
                        if other != name:
                            raise ValueError(
                                f"combined_roles[{i}].{slot}: {template!r} also states {other!r} for kind {kind!r}"
                            )
        return self

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = ()) -> PassageBank:
        """The bank at `path` (None: the one shipped with data_gen, validated once per process)."""
        if path is None and not overrides:
            return _shipped_bank()
        return super().load(path, overrides)

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict:
        if path is None:
            import yaml

            return yaml.safe_load(resources.files("data_gen").joinpath("passages.yaml").read_text(encoding="utf-8"))
        if not path.is_file():
            raise ConfigError(f"passage bank {path} does not exist")
        return read_mapping(path, cls.what)


@lru_cache(maxsize=1)
def _shipped_bank() -> PassageBank:
    return PassageBank.from_dict(PassageBank.read_yaml(None), source="data_gen/passages.yaml")


@dataclass(frozen=True)
class Person:
    mention: str  # as the text first names them
    full: str  # what the write stores
    surname: str


@dataclass(frozen=True)
class Fact:
    person: Person
    relation: str
    org: str  # the name the write stores
    kind: str
    org_mention: str  # how the text refers to it ("the University of Oslo")


def _article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _possessive(org: str) -> str:
    return org + ("'" if org.endswith("s") else "'s")


def _coordinate(mentions: list[str], rng: random.Random) -> str:
    """'both A and B' or 'A and B'; 'A, B and C' or, with the Oxford comma, 'A, B, and C'."""
    if len(mentions) == 2:
        return ("both " if rng.random() < 0.5 else "") + f"{mentions[0]} and {mentions[1]}"
    return ", ".join(mentions[:-1]) + ("," if rng.random() < 0.5 else "") + f" and {mentions[-1]}"


def _refer_back(template: str, noun: str) -> str:
    """The organisation as news refers back to it once named: 'an engineer who has worked for {org}
    since {year}' -> '... for the company since ...'. 'a {org} politician' keeps the name."""
    return re.sub(r"(?<!\ba )(?<!\ban )\{org\}", noun, template)


def _tidy(text: str) -> str:
    """Capitalise the first letter, collapse a name's period with the sentence's ('Inc..' -> 'Inc.').
    A first word with a capital inside ('eBay') is a name written so, and stays as it is."""
    text = " ".join(text.split())
    text = re.sub(r"\.\.(?!\.)", ".", text)
    first = text.split(" ", 1)[0]
    if any(c.isupper() for c in first[1:]):
        return text
    return text[:1].upper() + text[1:]


class PassageMaker:
    """Makes realistic passages and hard negatives from one split's people and companies."""

    def __init__(
        self,
        bank: PassageBank,
        people: tuple[str, ...],
        companies: tuple[str, ...],
        relations: list[str],
        rng: random.Random,
        max_facts: int = 2,
        unnamed_facts: float = 0.0,
    ) -> None:
        self.bank = bank
        self.people = people
        self.companies = companies
        self.rng = rng
        self.max_facts = max_facts
        self.unnamed_facts = unnamed_facts
        self.relations = [r for r in relations if bank.relations[r].weight > 0]
        if not self.relations:
            raise ConfigError("passages: no relation with a weight > 0")
        self.kinds = [k for k, spec in bank.organisations.items() if spec.weight > 0]
        self.last_orgs: tuple[str, ...] = ()  # the organisations named by the last passage()

    # ------------------------------------------------------------------ names

    def _words(self, slot: str) -> list[str]:
        w = self.bank.words
        return {"city": w.cities, "country": w.countries, "field": w.fields, "adjective": w.adjectives}[slot]

    def person(self, taken: set[str]) -> Person:
        while True:
            base = self.rng.choice(self.people)
            if base not in taken:
                break
        taken.add(base)
        first, _, surname = base.partition(" ")
        names = self.bank.names
        form = self.rng.choices(list(names.forms), weights=list(names.forms.values()))[0]
        if form == "middle_initial":
            full = f"{first} {self.rng.choice(_INITIALS)}. {surname}"
            return Person(full, full, surname)
        if form == "middle_name":
            middle = self.rng.choice(self.people).partition(" ")[0]
            full = f"{first} {middle} {surname}" if middle != first else base
            return Person(full, full, surname)
        if form == "title":
            return Person(f"{self.rng.choice(names.titles)} {base}", base, surname)
        if form == "suffix":
            full = f"{base} {self.rng.choice(names.suffixes)}"
            return Person(full, full, surname)
        return Person(base, base, surname)

    def org(self, kinds: list[str], taken: set[str]) -> tuple[str, str, str]:
        """(mention, name, kind): a leading lowercase 'the ' is the text's, not the name's."""
        kinds = [k for k in kinds if k in self.kinds]
        for _ in range(100):
            kind = self.rng.choices(kinds, weights=[self.bank.organisations[k].weight for k in kinds])[0]
            if kind == "company":
                name = self.rng.choice(self.companies)
            else:
                template = self.rng.choice(self.bank.organisations[kind].names)
                slots = {s: self.rng.choice(self._words(s)) for s in sorted(placeholders(template)) if s != "surname"}
                if "surname" in placeholders(template):  # "van der Berg" names "Van der Berg College"
                    surname = self.rng.choice(self.people).partition(" ")[2]
                    slots["surname"] = surname[:1].upper() + surname[1:]
                name = template.format(**slots)
            if name not in taken:
                taken.add(name)
                return name, name.removeprefix("the "), kind
        raise RuntimeError("could not draw a new organisation")

    def described(
        self,
        mention: str,
        kind: str,
        template: str = "{org}",
        slot: str = "org",
        *,
        title: bool = False,
        apposition: bool = True,
    ) -> str:
        """The organisation's mention, at times with what it is (words.descriptors of its kind):
        before a name that has no "the" ("the Dutch bank ING", 'the investment company "Acme"') or
        in an apposition after it ("ING, a bank based in Utrecht"), where `template` (around
        `{slot}`) leaves room for one: none in a title ("{org} CEO": `title`) or "a {org} politician",
        no apposition before a possessive. The write stores the name alone."""
        key = "{" + slot + "}"
        descriptors = self.bank.words.descriptors.get(kind)
        if not descriptors or template.count(key) != 1 or self.rng.random() >= DESCRIBED:
            return mention
        rng, (before, after) = self.rng, template.split(key)
        possessive = after.startswith("'")
        if re.search(r"\ban? $", before) or (title and not possessive):
            return mention
        descriptor = rng.choice(descriptors)
        appositions = self.bank.distractors.org_apposition if apposition and not possessive else []
        if not mention.startswith("the ") and (not appositions or rng.random() < 0.6):
            country = rng.choice(self.bank.words.countries) + " " if rng.random() < 0.5 else ""
            name = f'"{mention}"' if not possessive and rng.random() < 0.1 else mention
            return f"the {country}{descriptor} {name}"
        if not appositions:
            return mention
        words = {
            "descriptor": descriptor,
            "descriptor_a": _article(descriptor),
            "city": rng.choice(self.bank.words.cities),
            "country": rng.choice(self.bank.words.countries),
        }
        close = "" if after[:1] in ("", ",", ".", ";") else ","  # "works at X, a bank in Y, since 2001"
        return f"{mention}, {rng.choice(appositions).format(**words)}{close}"

    # ------------------------------------------------------------------ pieces

    def _slots(self, fact: Fact | None) -> dict[str, str]:
        """Fresh words for a template: a job, years, a city, and the fact's organisation."""
        job = self.rng.choice(self.bank.words.jobs)
        year = self.rng.randint(1975, 2023)
        slots = {
            "job": job,
            "job_a": _article(job),
            "role": self.rng.choice(self.bank.words.roles),
            "year": str(year),
            "year2": str(self.rng.randint(year + 1, min(year + 20, 2024))),  # "from {year} to {year2}"
            "city": self.rng.choice(self.bank.words.cities),
        }
        if fact is not None:
            slots["org"] = fact.org_mention
        return slots

    def _fill(self, template: str, slots: dict[str, str], orgs: set[str]) -> str:
        used = placeholders(template)
        if "org2" in used and "org2" not in slots:
            mention, _, kind = self.org(["company"], orgs)
            slots["org2"] = self.described(mention, kind, template, "org2")
        if "weekday" in used and "weekday" not in slots:
            slots["weekday"] = self.rng.choice(self.bank.words.weekdays)
        text = template.format(**slots)
        if "org" in slots:  # "Siemens's" -> "Siemens'"
            text = text.replace(slots["org"] + "'s", _possessive(slots["org"]))
        return text

    def _options(self, fact: Fact, part: str) -> list[str]:
        """The `part` templates of the fact's relation for its organisation's kind."""
        groups = [g for g in self.bank.relations[fact.relation].groups if fact.kind in g.kinds]
        return [t for g in groups for t in getattr(g, part)]

    def _piece(
        self,
        fact: Fact,
        part: str,
        orgs: set[str],
        *,
        per: str | None = None,
        listed: str | None = None,
        noun: str | None = None,
        describe: bool = True,
        options: list[str] | None = None,
    ) -> str | None:
        """A `part` template of the fact's relation and kind (or one of `options`), filled; None
        when there is none. `per` and `listed` fill {per} and {orgs}; `noun` refers back to the
        organisation ("the company") where the template names it; `describe`: at times with what
        the organisation is ("the Dutch bank ING")."""
        options = self._options(fact, part) if options is None else options
        if not options:
            return None
        slots = self._slots(fact)
        if per is not None:
            slots["per"] = per
        if listed is not None:
            slots["orgs"] = listed
        template = self.rng.choice(options)
        return self._render(fact, _refer_back(template, noun) if noun else template, slots, orgs, part, describe)

    def _render(
        self, fact: Fact, template: str, slots: dict[str, str], orgs: set[str], part: str = "", describe: bool = True
    ) -> str:
        """`template` filled with `slots`, the fact's organisation at times with what it is."""
        if describe and "org" in slots:
            slots["org"] = self.described(fact.org_mention, fact.kind, template, title=part == "pre")
        return self._fill(template, slots, orgs)

    def distractor(self, orgs: set[str], plural: bool = False) -> str:
        d = self.bank.distractors
        return self._fill(self.rng.choice(d.plural_vp if plural else d.vp), self._slots(None), orgs)

    def fact(
        self, taken_people: set[str], orgs: set[str], person: Person | None = None, exclude: tuple[str, ...] = ()
    ) -> Fact:
        rels = [r for r in self.relations if r not in exclude]
        relation = self.rng.choices(rels, weights=[self.bank.relations[r].weight for r in rels])[0]
        kinds = sorted({k for g in self.bank.relations[relation].groups for k in g.kinds})
        mention, org, kind = self.org(kinds, orgs)
        return Fact(person or self.person(taken_people), relation, org, kind, mention)

    def part_fact(self, part: str, taken_people: set[str], orgs: set[str], *, even: bool = False) -> Fact | None:
        """A fact whose relation and organisation kind have `part` templates (None: no relation
        has any). `even` draws the relation evenly: a list or plural frame covers a few relations,
        and the bank's weights would leave the rarer ones (investor in) all but unseen."""
        kinds = {}
        for r in self.relations:
            groups = [g for g in self.bank.relations[r].groups if getattr(g, part)]
            if found := sorted({k for g in groups for k in g.kinds if k in self.kinds}):
                kinds[r] = found
        if not kinds:
            return None
        rels = list(kinds)
        weights = None if even else [self.bank.relations[r].weight for r in rels]
        relation = self.rng.choices(rels, weights=weights)[0]
        mention, org, kind = self.org(kinds[relation], orgs)
        return Fact(self.person(taken_people), relation, org, kind, mention)

    # ------------------------------------------------------------------ passages

    def passage(self) -> tuple[str, list[Triplet]]:
        """A passage and the facts it states, in the order they appear."""
        rng, people, orgs = self.rng, set(), set()
        frames = [f for f in FRAME_WEIGHTS if self.max_facts >= 2 or f not in _MULTI_FRAMES]
        for _ in range(20):
            frame = rng.choices(frames, weights=[FRAME_WEIGHTS[f] for f in frames])[0]
            made = getattr(self, "_" + frame)(people, orgs)
            if made is not None:
                break
        else:  # pragma: no cover - every bank has a vp for every relation
            raise RuntimeError("no frame could be filled")
        text, facts = made
        d = self.bank.distractors
        if d.trailers and frame in ("simple", "dated", "two_people") and rng.random() < 0.2:
            text = text[:-1] + self._fill(rng.choice(d.trailers), self._slots(None), orgs) + "."
        if d.openers and frame != "biography" and rng.random() < 0.15:  # a biography opens its article
            text = self._fill(rng.choice(d.openers), self._slots(None), orgs) + " " + _tidy(text)  # ". The X ..."
        first = facts[0].person.mention
        born_after = ("simple", "apposition", "relative", "surname", "pronoun", "coordinated", "roles")
        if frame in born_after and rng.random() < 0.15:
            city = rng.choice(self._words("city"))
            born = f"born {rng.randint(1930, 1995)}" if rng.random() < 0.6 else f"born in {city}"
            text = text.replace(first, f"{first} ({born})", 1)  # "Jane Roe (born 1961), CEO of Acme, ..."
        text = _tidy(text)
        # the organisations the passage names, stated about or not: what a verify record asks about
        self.last_orgs = tuple(sorted(o.removeprefix("the ") for o in orgs if o.removeprefix("the ") in text))
        return text, [(f.person.full, f.relation, f.org) for f in facts]

    def _simple(self, people, orgs):
        f = self.fact(people, orgs)
        return f"{f.person.mention} {self._piece(f, 'vp', orgs)}.", [f]

    def _sentence(self, people, orgs):
        f = self.fact(people, orgs)
        s = self._piece(f, "s", orgs, per=f.person.mention)
        return (s, [f]) if s else None

    def _apposition(self, people, orgs):
        f = self.fact(people, orgs)
        app = self._piece(f, "app", orgs)
        return (f"{f.person.mention}, {app}, {self.distractor(orgs)}.", [f]) if app else None

    def _prefix(self, people, orgs):
        f = self.fact(people, orgs)
        pre = self._piece(f, "pre", orgs)
        return (self._titled(pre, f.person, orgs), [f]) if pre else None

    def _titled(self, pre: str, person: Person, orgs: set[str]) -> str:
        """ "<pre> Jane Roe <distractor>.", or with a title ending in a comma "Acme's chief executive,
        Jane Roe, said ...". The name without its title: "Acme CEO Dr. Jane Roe" reads badly."""
        if pre.endswith(","):
            return f"{pre} {person.full}, {self.distractor(orgs)}."
        return f"{pre} {person.full} {self.distractor(orgs)}."

    def _relative(self, people, orgs):
        f = self.fact(people, orgs)
        vp = self._piece(f, "vp", orgs)
        return f"{f.person.mention}, who {vp}, {self.distractor(orgs)}.", [f]

    def _dated(self, people, orgs):
        """A past-tense "<vp> in {year}" with the date moved to the front: "In 1994, X joined Y."."""
        f = self.fact(people, orgs)
        groups = [g for g in self.bank.relations[f.relation].groups if f.kind in g.kinds]
        options = [t for g in groups for t in g.vp if " in {year}" in t]
        if not options:
            return None
        slots = self._slots(f)
        vp = self._render(f, self.rng.choice(options).replace(" in {year}", ""), slots, orgs)
        return f"In {slots['year']}, {f.person.mention} {vp}.", [f]

    def _two_facts(self, people, orgs):
        f1 = self.fact(people, orgs)
        f2 = self.fact(people, orgs, person=f1.person, exclude=(f1.relation,))
        if f2.relation == _EMPLOYMENT:  # the employment first (see _EMPLOYMENT)
            f1, f2 = f2, f1
        app = self._piece(f1, "app", orgs)
        if app is None:
            return None
        return f"{f1.person.mention}, {app}, {self._piece(f2, 'vp', orgs)}.", [f1, f2]

    def _two_people(self, people, orgs):
        f1, f2 = self.fact(people, orgs), self.fact(people, orgs)
        joiner = self.rng.choice([", while", ", and", "; meanwhile,"])
        return (
            f"{f1.person.mention} {self._piece(f1, 'vp', orgs)}{joiner} {f2.person.mention} "
            f"{self._piece(f2, 'vp', orgs)}."
        ), [f1, f2]

    def _surname(self, people, orgs):
        f = self.fact(people, orgs)
        surname = f.person.surname[:1].upper() + f.person.surname[1:]  # "van der Berg" starts a sentence
        return (f"{f.person.mention} {self.distractor(orgs)}. {surname} {self._piece(f, 'vp', orgs)}."), [f]

    def _pronoun(self, people, orgs):
        """The person named once, the fact stated about a pronoun in the next sentence: the write
        names the person the pronoun stands for."""
        f = self.fact(people, orgs)
        pron = self._pronoun_for_one()
        return (f"{f.person.mention} {self.distractor(orgs)}. {pron} {self._piece(f, 'vp', orgs)}."), [f]

    def _reported(self, people, orgs):
        """News: an organisation says the fact. Half of the time the speaker is the fact's own
        organisation (named once, then at times referred back to: "the company"), otherwise
        another one; either way the write is the person's relation, nothing about the speaker."""
        rng, news, d = self.rng, self.bank.news, self.bank.distractors
        shapes = [
            s for s, ok in (("app", news.intros and d.reported), ("vp", news.intros), ("source", news.sources)) if ok
        ]
        if not shapes:
            return None
        f = self.fact(people, orgs)
        own = rng.random() < 0.5  # then the speaker's first mention is the one that may say what it is
        speakers = [k for k in _SPEAKER_KINDS if k in self.kinds] or self.kinds
        speaker, _, kind = (f.org_mention, f.org, f.kind) if own else self.org(speakers, orgs)
        shape = rng.choice(shapes)
        if shape == "source":
            template = rng.choice(news.sources)
            source = self._fill(template, {"speaker": self.described(speaker, kind, template, "speaker")}, orgs)
            return f"{f.person.mention} {self._piece(f, 'vp', orgs, describe=not own)}, {source}.", [f]
        noun = self.bank.organisations[f.kind].noun if own and rng.random() < 0.6 else None
        template = rng.choice(news.intros)
        intro = self._fill(template, {"speaker": self.described(speaker, kind, template, "speaker")}, orgs)
        app = self._piece(f, "app", orgs, noun=noun, describe=not own) if shape == "app" else None
        if app is None:
            return f"{intro} {f.person.mention} {self._piece(f, 'vp', orgs, noun=noun, describe=not own)}.", [f]
        return f"{intro} {f.person.mention}, {app}, {self._fill(rng.choice(d.reported), self._slots(None), orgs)}.", [f]

    def _org_relative(self, people, orgs):
        """The fact in a relative clause on the organisation: "Acme, which Jane Roe founded in 1999,
        opened ..." or "Karl Berg visited Acme, where Jane Roe works as an analyst." (Karl: nothing)."""
        rng, d = self.rng, self.bank.distractors
        if not (d.org_vp or d.org_lead):
            return None
        f = self.part_fact("org_rel", people, orgs)
        if f is None:
            return None
        clause = self._piece(f, "org_rel", orgs, per=f.person.mention)
        mention = self.described(f.org_mention, f.kind, apposition=False)  # "the Dutch bank ING, which ..."
        if d.org_lead and (not d.org_vp or rng.random() < 0.4):
            template, slots = rng.choice(d.org_lead), self._slots(None)
            if "per2" in placeholders(template):
                slots["per2"] = self.person(people).mention
            return f"{self._fill(template, slots, orgs)} {mention}, {clause}.", [f]
        return f"{mention}, {clause}, {self._fill(rng.choice(d.org_vp), self._slots(None), orgs)}.", [f]

    def _coordinated(self, people, orgs):
        """One person, one relation, two or three organisations of one kind ("has invested in both
        A and B", "A, B, and C"): one write per organisation, in the order the text names them."""
        rng = self.rng
        part = rng.choice(["list_vp", "list_vp", "list_app"])
        f = self.part_fact(part, people, orgs, even=True)
        if f is None:
            return None
        facts = [f]
        try:
            for _ in range(rng.choice([2, 2, MAX_LIST_ORGS]) - 1):
                mention, org, kind = self.org([f.kind], orgs)
                facts.append(Fact(f.person, f.relation, org, kind, mention))
        except RuntimeError:  # a small pool of that kind: another frame
            return None
        listed = _coordinate([x.org_mention for x in facts], rng)
        piece = self._piece(f, part, orgs, listed=listed)
        if part == "list_app":
            return f"{f.person.mention}, {piece}, {self.distractor(orgs)}.", facts
        if rng.random() < 0.3:
            return f"{f.person.mention}, who {piece}, {self.distractor(orgs)}.", facts
        return f"{f.person.mention} {piece}.", facts

    def _co_subjects(self, people, orgs):
        """Two people, one relation, one organisation ("Jane Roe and Karl Berg co-founded Acme"):
        one write per person, in text order."""
        rng = self.rng
        part = "plural_s" if rng.random() < 0.3 else "plural_vp"
        f = self.part_fact(part, people, orgs, even=True)
        if f is None:
            return None
        second = self.person(people)
        facts = [f, Fact(second, f.relation, f.org, f.kind, f.org_mention)]
        both = f"{f.person.mention} and {second.mention}"
        if part == "plural_s":
            return self._piece(f, part, orgs, per=both), facts
        vp = self._piece(f, part, orgs)
        if rng.random() < 0.25:
            return f"{both}, who {vp}, {self.distractor(orgs, plural=True)}.", facts
        return f"{both} {vp}.", facts

    def _title(
        self,
        people: set[str],
        orgs: set[str],
        person: Person | None = None,
        writes: int = 2,
        exclude: tuple[str, ...] = (),
    ):
        """A combined title of at most `writes` relations, none in `exclude`: (the title, its facts
        in the title's order), None when the bank has none."""
        titles = [
            t
            for t in self.bank.combined_roles
            if len(t.relations) <= writes
            and all(r in self.relations and r not in exclude for r in t.relations)
            and any(k in self.kinds for k in t.kinds)
        ]
        if not titles:
            return None
        title = self.rng.choice(titles)
        mention, org, kind = self.org(title.kinds, orgs)
        person = person or self.person(people)
        return title, [Fact(person, r, org, kind, mention) for r in title.relations]

    def _roles(self, people, orgs):
        """One title, two relations of one person to one organisation ("Jane Roe, founder and chief
        executive of Acme, said ..."): one write per relation, in the order the title names them.
        One statement for max_facts; with max_facts 1, titles of one relation ("president and
        chief executive of Acme": CEO of)."""
        rng = self.rng
        drawn = self._title(people, orgs, writes=min(self.max_facts, 2))
        if drawn is None:
            return None
        title, facts = drawn
        f = facts[0]
        part = rng.choice([p for p in ("app", "app", "pre", "vp") if getattr(title, p)])
        piece = self._render(f, rng.choice(getattr(title, part)), self._slots(f), orgs, part)
        if part == "app":
            return f"{f.person.mention}, {piece}, {self.distractor(orgs)}.", facts
        if part == "pre":
            return self._titled(piece, f.person, orgs), facts
        if rng.random() < 0.3:
            return f"{f.person.mention}, who {piece}, {self.distractor(orgs)}.", facts
        return f"{f.person.mention} {piece}.", facts

    def _biography(self, people, orgs):
        """A Wikipedia first sentence: "Jane Roe (born 4 March 1961) is a Dutch economist, CEO of
        Acme, and a former director of Beta." One write per role that names an organisation, in
        text order (a combined title: one per relation), none for a role that names none ("a
        philanthropist"). Each role states another relation ("CEO of A and CEO of B" would be a
        list); the roles are one statement for max_facts, up to MAX_ROLE_WRITES writes; with
        max_facts 1 one role names an organisation. An employment comes first (_EMPLOYMENT)."""
        rng, bio = self.rng, self.bank.biography
        if bio is None:
            return None
        person = self.person(people)
        writes = min(rng.choice((1, 2, 2, 3)), MAX_ROLE_WRITES) if self.max_facts >= 2 else 1
        roles: list[tuple[str, list[Fact]]] = []  # (apposition, its facts)
        for _ in range(3 * writes):
            left = writes - sum(len(facts) for _, facts in roles)
            used = tuple(f.relation for _, facts in roles for f in facts)
            if left <= 0 or len(used) == len(self.relations):
                break
            if left >= 2 and rng.random() < 0.2 and (drawn := self._title(people, orgs, person, left, used)):
                title, facts = drawn
                if title.app:
                    roles.append((self._render(facts[0], rng.choice(title.app), self._slots(facts[0]), orgs), facts))
                continue
            f = self.fact(people, orgs, person=person, exclude=used)
            options = [t for t in self._options(f, "app") if not t.startswith("who ")]  # noun phrases
            if options:
                roles.append((self._piece(f, "app", orgs, options=options), [f]))
        if not roles:
            return None
        roles.sort(key=lambda role: role[1][0].relation != _EMPLOYMENT)  # stable: the rest as drawn
        if bio.roles and rng.random() < 0.35:
            roles.insert(rng.randint(0, len(roles)), (rng.choice(bio.roles), []))
        head = f"{person.mention} ({self._born()})" if rng.random() < 0.75 else person.mention
        intro = f"{head} is {_article(rng.choice(self.bank.words.countries))} {rng.choice(bio.professions)}"
        texts = [text for text, _ in roles]
        if len(texts) == 1:
            text = f"{intro}{rng.choice([' and ', ', '])}{texts[0]}."
        else:
            text = f"{intro}, {', '.join(texts[:-1])}{rng.choice([', and ', ', and ', ' and '])}{texts[-1]}."
        return text, [f for _, facts in roles for f in facts]

    def _born(self) -> str:
        """ "born 1961", "born 4 March 1961", "born on 4 March 1961 in Lyon" ..."""
        rng = self.rng
        year, city = rng.randint(1930, 1995), rng.choice(self.bank.words.cities)
        date = f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {year}"
        return rng.choice([f"born {year}", f"born {date}", f"born on {date} in {city}", f"born {year} in {city}"])

    # ------------------------------------------------------------------ negatives

    def unnamed_fact(self) -> str:
        """A fact about someone the text names only by a pronoun ("She joined Acme in 1990."):
        nothing identifies the person, so nothing is stored."""
        orgs: set[str] = set()
        f = self.fact(set(), orgs)
        pron = self._pronoun_for_one()
        app = self._piece(f, "app", orgs)
        if app is not None and self.rng.random() < 0.3:
            return _tidy(f"{pron} is {app}.")
        return _tidy(f"{pron} {self._piece(f, 'vp', orgs)}.")

    def _pronoun_for_one(self) -> str:
        """A pronoun the bank's singular verb phrases agree with ("She works for", not "They works for")."""
        return self.rng.choice([p for p in self.bank.words.pronouns if p.lower() != "they"] or ["She"])

    def negative(self) -> str:
        """A sentence that states no person–organisation fact."""
        if self.rng.random() < self.unnamed_facts:
            return self.unnamed_fact()
        orgs: set[str] = set()
        template = self.rng.choice(self.bank.negatives)
        used = placeholders(template)
        slots = self._slots(None)
        people: set[str] = set()
        for slot in ("per", "per2"):
            if slot in used:
                slots[slot] = self.person(people).mention
        if "org" in used:  # mostly companies: "I think <a party> makes excellent software" reads badly
            mention, _, kind = self.org(["company"] if self.rng.random() < 0.7 else self.kinds, orgs)
            slots["org"] = self.described(mention, kind, template)
        slots["pron"] = self._pronoun_for_one()  # "They has been the CEO" reads badly
        slots["product"] = self.rng.choice(self.bank.words.products)
        return _tidy(self._fill(template, slots, orgs))
