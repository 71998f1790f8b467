"""The pieces a passage is made of: people's names as text writes them, organisations (named, at
times described), and the bank's templates filled with fresh words. data_gen/passages.py's frames
put the pieces together; all randomness comes from the maker's rng, in the order the frames ask.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from data_gen.passage_bank import PassageBank
from data_gen.text import placeholders

_INITIALS = "ABCDEFGHJKLMNPRSTW"
DESCRIBED = 0.18  # chance an organisation with descriptors is named with one ("the Dutch bank ING")


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


def article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def possessive(org: str) -> str:
    return org + ("'" if org.endswith("s") else "'s")


def coordinate(mentions: list[str], rng: random.Random) -> str:
    """'both A and B' or 'A and B'; 'A, B and C' or, with the Oxford comma, 'A, B, and C'."""
    if len(mentions) == 2:
        return ("both " if rng.random() < 0.5 else "") + f"{mentions[0]} and {mentions[1]}"
    return ", ".join(mentions[:-1]) + ("," if rng.random() < 0.5 else "") + f" and {mentions[-1]}"


def refer_back(template: str, noun: str) -> str:
    """The organisation as news refers back to it once named: 'an engineer who has worked for {org}
    since {year}' -> '... for the company since ...'. 'a {org} politician' keeps the name."""
    return re.sub(r"(?<!\ba )(?<!\ban )\{org\}", noun, template)


def tidy(text: str) -> str:
    """Capitalise the first letter, collapse a name's period with the sentence's ('Inc..' -> 'Inc.').
    A first word with a capital inside ('eBay') is a name written so, and stays as it is."""
    text = " ".join(text.split())
    text = re.sub(r"\.\.(?!\.)", ".", text)
    first = text.split(" ", 1)[0]
    if any(c.isupper() for c in first[1:]):
        return text
    return text[:1].upper() + text[1:]


class PassagePieces:
    """Names, organisations and filled templates for one split's people and companies."""

    def __init__(
        self,
        bank: PassageBank,
        people: tuple[str, ...],
        companies: tuple[str, ...],
        relations: list[str],
        kinds: list[str],
        rng: random.Random,
    ) -> None:
        self.bank = bank
        self.people = people
        self.companies = companies
        self.relations = relations  # those of weight > 0
        self.kinds = kinds  # the organisation kinds of weight > 0
        self.rng = rng

    def words(self, slot: str) -> list[str]:
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
                slots = {s: self.rng.choice(self.words(s)) for s in sorted(placeholders(template)) if s != "surname"}
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
            "descriptor_a": article(descriptor),
            "city": rng.choice(self.bank.words.cities),
            "country": rng.choice(self.bank.words.countries),
        }
        close = "" if after[:1] in ("", ",", ".", ";") else ","  # "works at X, a bank in Y, since 2001"
        return f"{mention}, {rng.choice(appositions).format(**words)}{close}"

    # ------------------------------------------------------------------ pieces

    def slots(self, fact: Fact | None) -> dict[str, str]:
        """Fresh words for a template: a job, years, a city, and the fact's organisation."""
        job = self.rng.choice(self.bank.words.jobs)
        year = self.rng.randint(1975, 2023)
        slots = {
            "job": job,
            "job_a": article(job),
            "role": self.rng.choice(self.bank.words.roles),
            "year": str(year),
            "year2": str(self.rng.randint(year + 1, min(year + 20, 2024))),  # "from {year} to {year2}"
            "city": self.rng.choice(self.bank.words.cities),
        }
        if fact is not None:
            slots["org"] = fact.org_mention
        return slots

    def fill(self, template: str, slots: dict[str, str], orgs: set[str]) -> str:
        used = placeholders(template)
        if "org2" in used and "org2" not in slots:
            mention, _, kind = self.org(["company"], orgs)
            slots["org2"] = self.described(mention, kind, template, "org2")
        if "weekday" in used and "weekday" not in slots:
            slots["weekday"] = self.rng.choice(self.bank.words.weekdays)
        text = template.format(**slots)
        if "org" in slots:  # "Siemens's" -> "Siemens'"
            text = text.replace(slots["org"] + "'s", possessive(slots["org"]))
        return text

    def options(self, fact: Fact, part: str) -> list[str]:
        """The `part` templates of the fact's relation for its organisation's kind."""
        groups = [g for g in self.bank.relations[fact.relation].groups if fact.kind in g.kinds]
        return [t for g in groups for t in getattr(g, part)]

    def piece(
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
        options = self.options(fact, part) if options is None else options
        if not options:
            return None
        slots = self.slots(fact)
        if per is not None:
            slots["per"] = per
        if listed is not None:
            slots["orgs"] = listed
        template = self.rng.choice(options)
        return self.render(fact, refer_back(template, noun) if noun else template, slots, orgs, part, describe)

    def render(
        self, fact: Fact, template: str, slots: dict[str, str], orgs: set[str], part: str = "", describe: bool = True
    ) -> str:
        """`template` filled with `slots`, the fact's organisation at times with what it is."""
        if describe and "org" in slots:
            slots["org"] = self.described(fact.org_mention, fact.kind, template, title=part == "pre")
        return self.fill(template, slots, orgs)

    def distractor(self, orgs: set[str], plural: bool = False) -> str:
        d = self.bank.distractors
        return self.fill(self.rng.choice(d.plural_vp if plural else d.vp), self.slots(None), orgs)

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

    def pronoun_for_one(self) -> str:
        """A pronoun the bank's singular verb phrases agree with ("She works for", not "They works for")."""
        return self.rng.choice([p for p in self.bank.words.pronouns if p.lower() != "they"] or ["She"])
