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

from data_gen.passage_bank import PassageBank
from data_gen.passage_pieces import Fact, PassagePieces, Person, article, coordinate, tidy
from data_gen.text import placeholders
from memory_runtime.protocol import Triplet
from memory_runtime.yaml_config import ConfigError

_MONTHS = "January February March April May June July August September October November December".split()
MAX_LIST_ORGS = 3  # a coordinated list names 2 or 3 organisations: that many writes for one statement
MAX_ROLE_WRITES = 3  # a biography's roles: up to that many writes for one statement
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
        self.rng = rng
        self.max_facts = max_facts
        self.unnamed_facts = unnamed_facts
        self.relations = [r for r in relations if bank.relations[r].weight > 0]
        if not self.relations:
            raise ConfigError("passages: no relation with a weight > 0")
        self.kinds = [k for k, spec in bank.organisations.items() if spec.weight > 0]
        self.pieces = PassagePieces(bank, people, companies, self.relations, self.kinds, rng)
        self.last_orgs: tuple[str, ...] = ()  # the organisations named by the last passage()

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
            text = text[:-1] + self.pieces.fill(rng.choice(d.trailers), self.pieces.slots(None), orgs) + "."
        if d.openers and frame != "biography" and rng.random() < 0.15:  # a biography opens its article
            opener = self.pieces.fill(rng.choice(d.openers), self.pieces.slots(None), orgs)
            text = opener + " " + tidy(text)  # ". The X ..."
        first = facts[0].person.mention
        born_after = ("simple", "apposition", "relative", "surname", "pronoun", "coordinated", "roles")
        if frame in born_after and rng.random() < 0.15:
            city = rng.choice(self.pieces.words("city"))
            born = f"born {rng.randint(1930, 1995)}" if rng.random() < 0.6 else f"born in {city}"
            text = text.replace(first, f"{first} ({born})", 1)  # "Jane Roe (born 1961), CEO of Acme, ..."
        text = tidy(text)
        # the organisations the passage names, stated about or not: what a verify record asks about
        self.last_orgs = tuple(sorted(o.removeprefix("the ") for o in orgs if o.removeprefix("the ") in text))
        return text, [(f.person.full, f.relation, f.org) for f in facts]

    def _simple(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        return f"{f.person.mention} {self.pieces.piece(f, 'vp', orgs)}.", [f]

    def _sentence(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        s = self.pieces.piece(f, "s", orgs, per=f.person.mention)
        return (s, [f]) if s else None

    def _apposition(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        app = self.pieces.piece(f, "app", orgs)
        return (f"{f.person.mention}, {app}, {self.pieces.distractor(orgs)}.", [f]) if app else None

    def _prefix(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        pre = self.pieces.piece(f, "pre", orgs)
        return (self._titled(pre, f.person, orgs), [f]) if pre else None

    def _titled(self, pre: str, person: Person, orgs: set[str]) -> str:
        """ "<pre> Jane Roe <distractor>.", or with a title ending in a comma "Acme's chief executive,
        Jane Roe, said ...". The name without its title: "Acme CEO Dr. Jane Roe" reads badly."""
        if pre.endswith(","):
            return f"{pre} {person.full}, {self.pieces.distractor(orgs)}."
        return f"{pre} {person.full} {self.pieces.distractor(orgs)}."

    def _relative(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        vp = self.pieces.piece(f, "vp", orgs)
        return f"{f.person.mention}, who {vp}, {self.pieces.distractor(orgs)}.", [f]

    def _dated(self, people, orgs):
        """A past-tense "<vp> in {year}" with the date moved to the front: "In 1994, X joined Y."."""
        f = self.pieces.fact(people, orgs)
        groups = [g for g in self.bank.relations[f.relation].groups if f.kind in g.kinds]
        options = [t for g in groups for t in g.vp if " in {year}" in t]
        if not options:
            return None
        slots = self.pieces.slots(f)
        vp = self.pieces.render(f, self.rng.choice(options).replace(" in {year}", ""), slots, orgs)
        return f"In {slots['year']}, {f.person.mention} {vp}.", [f]

    def _two_facts(self, people, orgs):
        f1 = self.pieces.fact(people, orgs)
        f2 = self.pieces.fact(people, orgs, person=f1.person, exclude=(f1.relation,))
        if f2.relation == _EMPLOYMENT:  # the employment first (see _EMPLOYMENT)
            f1, f2 = f2, f1
        app = self.pieces.piece(f1, "app", orgs)
        if app is None:
            return None
        return f"{f1.person.mention}, {app}, {self.pieces.piece(f2, 'vp', orgs)}.", [f1, f2]

    def _two_people(self, people, orgs):
        f1, f2 = self.pieces.fact(people, orgs), self.pieces.fact(people, orgs)
        joiner = self.rng.choice([", while", ", and", "; meanwhile,"])
        return (
            f"{f1.person.mention} {self.pieces.piece(f1, 'vp', orgs)}{joiner} {f2.person.mention} "
            f"{self.pieces.piece(f2, 'vp', orgs)}."
        ), [f1, f2]

    def _surname(self, people, orgs):
        f = self.pieces.fact(people, orgs)
        surname = f.person.surname[:1].upper() + f.person.surname[1:]  # "van der Berg" starts a sentence
        distractor = self.pieces.distractor(orgs)
        return f"{f.person.mention} {distractor}. {surname} {self.pieces.piece(f, 'vp', orgs)}.", [f]

    def _pronoun(self, people, orgs):
        """The person named once, the fact stated about a pronoun in the next sentence: the write
        names the person the pronoun stands for."""
        f = self.pieces.fact(people, orgs)
        pron = self.pieces.pronoun_for_one()
        return (f"{f.person.mention} {self.pieces.distractor(orgs)}. {pron} {self.pieces.piece(f, 'vp', orgs)}."), [f]

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
        f = self.pieces.fact(people, orgs)
        own = rng.random() < 0.5  # then the speaker's first mention is the one that may say what it is
        speakers = [k for k in _SPEAKER_KINDS if k in self.kinds] or self.kinds
        speaker, _, kind = (f.org_mention, f.org, f.kind) if own else self.pieces.org(speakers, orgs)
        shape = rng.choice(shapes)
        if shape == "source":
            template = rng.choice(news.sources)
            described = self.pieces.described(speaker, kind, template, "speaker")
            source = self.pieces.fill(template, {"speaker": described}, orgs)
            return f"{f.person.mention} {self.pieces.piece(f, 'vp', orgs, describe=not own)}, {source}.", [f]
        noun = self.bank.organisations[f.kind].noun if own and rng.random() < 0.6 else None
        template = rng.choice(news.intros)
        described = self.pieces.described(speaker, kind, template, "speaker")
        intro = self.pieces.fill(template, {"speaker": described}, orgs)
        app = self.pieces.piece(f, "app", orgs, noun=noun, describe=not own) if shape == "app" else None
        if app is None:
            return f"{intro} {f.person.mention} {self.pieces.piece(f, 'vp', orgs, noun=noun, describe=not own)}.", [f]
        reported = self.pieces.fill(rng.choice(d.reported), self.pieces.slots(None), orgs)
        return f"{intro} {f.person.mention}, {app}, {reported}.", [f]

    def _org_relative(self, people, orgs):
        """The fact in a relative clause on the organisation: "Acme, which Jane Roe founded in 1999,
        opened ..." or "Karl Berg visited Acme, where Jane Roe works as an analyst." (Karl: nothing)."""
        rng, d = self.rng, self.bank.distractors
        if not (d.org_vp or d.org_lead):
            return None
        f = self.pieces.part_fact("org_rel", people, orgs)
        if f is None:
            return None
        clause = self.pieces.piece(f, "org_rel", orgs, per=f.person.mention)
        mention = self.pieces.described(f.org_mention, f.kind, apposition=False)  # "the Dutch bank ING, which ..."
        if d.org_lead and (not d.org_vp or rng.random() < 0.4):
            template, slots = rng.choice(d.org_lead), self.pieces.slots(None)
            if "per2" in placeholders(template):
                slots["per2"] = self.pieces.person(people).mention
            return f"{self.pieces.fill(template, slots, orgs)} {mention}, {clause}.", [f]
        return f"{mention}, {clause}, {self.pieces.fill(rng.choice(d.org_vp), self.pieces.slots(None), orgs)}.", [f]

    def _coordinated(self, people, orgs):
        """One person, one relation, two or three organisations of one kind ("has invested in both
        A and B", "A, B, and C"): one write per organisation, in the order the text names them."""
        rng = self.rng
        part = rng.choice(["list_vp", "list_vp", "list_app"])
        f = self.pieces.part_fact(part, people, orgs, even=True)
        if f is None:
            return None
        facts = [f]
        try:
            for _ in range(rng.choice([2, 2, MAX_LIST_ORGS]) - 1):
                mention, org, kind = self.pieces.org([f.kind], orgs)
                facts.append(Fact(f.person, f.relation, org, kind, mention))
        except RuntimeError:  # a small pool of that kind: another frame
            return None
        listed = coordinate([x.org_mention for x in facts], rng)
        piece = self.pieces.piece(f, part, orgs, listed=listed)
        if part == "list_app":
            return f"{f.person.mention}, {piece}, {self.pieces.distractor(orgs)}.", facts
        if rng.random() < 0.3:
            return f"{f.person.mention}, who {piece}, {self.pieces.distractor(orgs)}.", facts
        return f"{f.person.mention} {piece}.", facts

    def _co_subjects(self, people, orgs):
        """Two people, one relation, one organisation ("Jane Roe and Karl Berg co-founded Acme"):
        one write per person, in text order."""
        rng = self.rng
        part = "plural_s" if rng.random() < 0.3 else "plural_vp"
        f = self.pieces.part_fact(part, people, orgs, even=True)
        if f is None:
            return None
        second = self.pieces.person(people)
        facts = [f, Fact(second, f.relation, f.org, f.kind, f.org_mention)]
        both = f"{f.person.mention} and {second.mention}"
        if part == "plural_s":
            return self.pieces.piece(f, part, orgs, per=both), facts
        vp = self.pieces.piece(f, part, orgs)
        if rng.random() < 0.25:
            return f"{both}, who {vp}, {self.pieces.distractor(orgs, plural=True)}.", facts
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
        mention, org, kind = self.pieces.org(title.kinds, orgs)
        person = person or self.pieces.person(people)
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
        piece = self.pieces.render(f, rng.choice(getattr(title, part)), self.pieces.slots(f), orgs, part)
        if part == "app":
            return f"{f.person.mention}, {piece}, {self.pieces.distractor(orgs)}.", facts
        if part == "pre":
            return self._titled(piece, f.person, orgs), facts
        if rng.random() < 0.3:
            return f"{f.person.mention}, who {piece}, {self.pieces.distractor(orgs)}.", facts
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
        person = self.pieces.person(people)
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
                    app = self.pieces.render(facts[0], rng.choice(title.app), self.pieces.slots(facts[0]), orgs)
                    roles.append((app, facts))
                continue
            f = self.pieces.fact(people, orgs, person=person, exclude=used)
            options = [t for t in self.pieces.options(f, "app") if not t.startswith("who ")]  # noun phrases
            if options:
                roles.append((self.pieces.piece(f, "app", orgs, options=options), [f]))
        if not roles:
            return None
        roles.sort(key=lambda role: role[1][0].relation != _EMPLOYMENT)  # stable: the rest as drawn
        if bio.roles and rng.random() < 0.35:
            roles.insert(rng.randint(0, len(roles)), (rng.choice(bio.roles), []))
        head = f"{person.mention} ({self._born()})" if rng.random() < 0.75 else person.mention
        intro = f"{head} is {article(rng.choice(self.bank.words.countries))} {rng.choice(bio.professions)}"
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
        f = self.pieces.fact(set(), orgs)
        pron = self.pieces.pronoun_for_one()
        app = self.pieces.piece(f, "app", orgs)
        if app is not None and self.rng.random() < 0.3:
            return tidy(f"{pron} is {app}.")
        return tidy(f"{pron} {self.pieces.piece(f, 'vp', orgs)}.")

    def negative(self) -> str:
        """A sentence that states no person–organisation fact."""
        if self.rng.random() < self.unnamed_facts:
            return self.unnamed_fact()
        orgs: set[str] = set()
        template = self.rng.choice(self.bank.negatives)
        used = placeholders(template)
        slots = self.pieces.slots(None)
        people: set[str] = set()
        for slot in ("per", "per2"):
            if slot in used:
                slots[slot] = self.pieces.person(people).mention
        if "org" in used:  # mostly companies: "I think <a party> makes excellent software" reads badly
            mention, _, kind = self.pieces.org(["company"] if self.rng.random() < 0.7 else self.kinds, orgs)
            slots["org"] = self.pieces.described(mention, kind, template)
        slots["pron"] = self.pieces.pronoun_for_one()  # "They has been the CEO" reads badly
        slots["product"] = self.rng.choice(self.bank.words.products)
        return tidy(self.pieces.fill(template, slots, orgs))
