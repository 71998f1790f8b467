"""The schema of a dataset: its entity types and relations, as data (configs/schema/*.yaml).

A schema says what the generated worlds are about; the data config (data_gen/data_config.py) says how many
records of which kind to make from it. The shipped one, configs/schema/person-organisation.yaml, is the
person–organisation world memlm generated before schemas existed, and makes the same records for a seed.

    types        entity types, each with where its names come from:
                   faker: "{first_name} {last_name}"   Faker providers, called in order, per locale
                   shipped: companies                  a list shipped with data_gen (data_gen/companies.txt)
                   file: my_names.txt                  a user's file, one name a line (relative to the schema)
                   names: [Paris, Lyon]                the names themselves
                 and how the splits share them: `pool: split` (each split draws its own names, disjoint:
                 a model cannot memorise a fact about a name it never saw) or `pool: shared` (one set for
                 every split, a share held out for the test split). How many: the data config's
                 `world.names.<type>`.
    relations    name, subject and object type; the memory's relation table entry (functional, aliases,
                 ends, symmetric, and common_object where the object type is `common`: data_gen derives the table
                 from here, see `Schema.table`); how statements, answers
                 and questions phrase it; a relation without phrasings is written only by passages and
                 real text.
    questions    the read shapes that name no relation: per (the subject given), per_org (both), org
                 (the object given)
    negatives    statements of no fact (slots: the type names, a fresh name of each)
    implied_together   relations a text stating one may imply another: never the unstated fact of a
                 verify record for the other (what counts as a hard negative there)

Slots: relation phrasings use {subject} and {object} ({old} in updates: the value replaced); a
statement's {subject} may be a list of names ("A, B, and C", `statements.plural`); a question's
{object} may be "the company that {clause}" (two-hop: the object type's `by_clause`).

Every error names its field (`relations.3.subject: unknown type 'persn'`), before anything is generated.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from data_gen.text import check_templates, placeholders
from memory_runtime.memory.terms import normalize_term
from memory_runtime.shipped import shipped
from memory_runtime.yaml_config import ConfigError, Strict, read_mapping, validate

PERSON_ORGANISATION = shipped("configs", "schema", "person-organisation.yaml")  # the default schema
SLOTS = {"subject", "object"}
RESERVED = set('{}[]<>;\\,"()')  # characters of the memory protocol (and list commas): never in a name


def _templates(allowed: set[str], required: set[str] | None = None):
    def check(cls, value: list[str]) -> list[str]:
        return check_templates(value, allowed, required)

    return check


# ----------------------------------------------------------------------------- types


def shipped_lists() -> list[str]:
    """The name lists shipped with data_gen (data_gen/NAME.txt), by the name `shipped:` takes."""
    return sorted(p.name.removesuffix(".txt") for p in resources.files("data_gen").iterdir() if p.name.endswith(".txt"))


def read_names(text: str) -> list[str]:
    """One name a line; blank lines and lines starting with '#' are not names."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


class NameSource(Strict):
    """One place a type's names come from: exactly one of faker, shipped, file, names."""

    faker: str | None = None  # a Faker format: "{first_name} {last_name}", "{company}", "{city}"
    shipped: str | None = None  # a list shipped with data_gen: "companies" (data_gen/companies.txt)
    file: str | None = None  # a user's file, one name a line, relative to the schema file
    names: list[str] | None = None  # the names themselves

    def problems(self) -> list[tuple[str, str]]:
        """(field, what is wrong) for each problem (Schema.check names the source)."""
        kinds = [k for k in ("faker", "shipped", "file", "names") if getattr(self, k) is not None]
        if len(kinds) != 1:
            return [("", f"give exactly one of faker, shipped, file, names (got {', '.join(kinds) or 'none'})")]
        if self.faker is not None:
            try:
                providers = faker_providers(self.faker)
            except ValueError as err:
                return [("faker", str(err))]
            if not providers:
                return [("faker", f"{self.faker!r} names no Faker provider such as {{first_name}}: no names")]
            unknown = [p for p in providers if not _is_faker_provider(p)]
            if unknown:
                return [("faker", f"unknown Faker provider {{{unknown[0]}}}")]
        if self.shipped is not None and self.shipped not in shipped_lists():
            return [("shipped", f"no list {self.shipped!r}; shipped lists: {', '.join(shipped_lists())}")]
        if self.file is not None and not Path(self.file).is_file():
            return [("file", f"{self.file} does not exist")]
        if self.faker is None:
            names = self.listed()
            if not names:
                where = self.file or (f"the shipped list {self.shipped}" if self.shipped else "the list")
                return [("", f"empty: no names in {where}")]
            reserved = next((n for n in names if set(n) & RESERVED), None)
            if reserved is not None:
                return [("", f"{reserved!r} has a character the memory's call syntax reserves")]
        return []

    def listed(self) -> list[str]:
        """The names of a list source (shipped, file, names); [] for a Faker source."""
        if self.shipped is not None:
            return read_names(resources.files("data_gen").joinpath(f"{self.shipped}.txt").read_text(encoding="utf-8"))
        if self.file is not None:
            return read_names(Path(self.file).read_text(encoding="utf-8"))
        return [n.strip() for n in self.names or [] if n.strip()]


def faker_providers(template: str) -> list[str]:
    """The Faker providers a format calls, in the order it calls them ("{first_name} {last_name}")."""
    import string

    placeholders(template)  # no '{}', no format specs: a ValueError
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


@lru_cache(maxsize=1)
def _faker():
    from faker import Faker

    return Faker("en_US")


_NOT_PROVIDERS = ("_", "seed", "add_", "get_", "set_", "format", "parse", "provider")  # Faker's own methods


def _is_faker_provider(name: str) -> bool:
    return not name.startswith(_NOT_PROVIDERS) and callable(getattr(_faker(), name, None))


class EntityType(Strict):
    """An entity type: where its names come from and how the splits share them."""

    plural: str | None = None  # how world.json names its names ("people"); default: the type's name + "s"
    pool: Literal["split", "shared"] = "shared"  # split: disjoint names per split; shared: held-out test share
    names: list[NameSource] = Field(min_length=1)
    min_words: int = Field(1, ge=1)  # a drawn name with fewer words is left out ("first last": 2)
    by_clause: list[str] = []  # how a two-hop question names one by a fact about it: "the company that {clause}"
    # common nouns (foods: peanuts, gluten), written in small letters: the decoding's copy rules take a
    # field in small letters for no one's name ("the association") unless its relation's objects are common
    common: bool = False
    # what its Faker draws are seeded by (default: its plural); the person–organisation schema keeps the
    # key its organisations were drawn under before schemas ("companies"), so a seed draws the same names
    faker_seed: str | None = None
    # the (Re-)DocRED entity type of its names (PER, ORG, LOC, ...): what lets real text labelled with
    # DocRED's relations become this schema's facts (data_gen/real_mapping.py, relations' `docred`)
    docred: str | None = None

    _clause = field_validator("by_clause")(_templates({"clause"}))


# ----------------------------------------------------------------------------- relations


class Phrasings(Strict):
    """User statements of a fact: singular (one subject) and plural (a list of subjects, one object)."""

    singular: list[str] = Field(min_length=1)
    plural: list[str] = []

    _check = field_validator("singular", "plural")(_templates(SLOTS))


class FactPhrasing(Strict):
    """The one sentence answers use for a fact ("{subject} is employed by {object}.")."""

    singular: str
    plural: str | None = None

    @field_validator("singular", "plural")
    @classmethod
    def _check(cls, value: str | None) -> str | None:
        if value is not None:
            check_templates([value], SLOTS)
        return value


class RelationQuestions(Strict):
    """Questions of the read shapes that name the relation: per_rel (the subject given), rel (neither),
    rel_org (the object given), per_rel_org (both: an existence check)."""

    per_rel: list[str] = Field(min_length=1)
    rel: list[str] = Field(min_length=1)
    rel_org: list[str] = Field(min_length=1)
    per_rel_org: list[str] = []

    _per = field_validator("per_rel")(_templates({"subject"}))
    _rel = field_validator("rel")(_templates(set()))
    _org = field_validator("rel_org")(_templates({"object"}))
    _both = field_validator("per_rel_org")(_templates(SLOTS))


class Relation(Strict):
    name: str = Field(min_length=1)
    subject: str
    object: str
    # the memory's relation table (memory_runtime/memory/relations.yaml has the same fields)
    in_table: bool = True  # false: the table leaves it out: stored as written, met by its words, never superseded
    functional: Literal["subject", "object", "both"] | None = None  # which side holds one value at a time
    aliases: list[str] = []  # what a model or a user may write instead (matched after normalisation)
    ends: list[str] = []  # relations of the same subject a new fact of this one ends at every other object
    symmetric: bool = False  # it holds both ways (spouse of): the store finds it with the names either way round
    # real text: the (Re-)DocRED / Wikidata relation ids that state it (P108 employer), and of those the ones
    # whose head entity is this relation's object where both are of one type (P40 child: the head is the parent)
    docred: list[str] = []
    docred_reversed: list[str] = []
    # phrasings: a relation without `statements` is written only by passages and real text
    weight: float = Field(1.0, ge=0)  # share among the templated relations
    fact: FactPhrasing | None = None
    statements: Phrasings | None = None
    questions: RelationQuestions | None = None
    clause: list[str] = []  # "{subject} works for": two-hop questions say "the company that <clause>"
    updates: list[str] = []  # "{subject} has left {old} and now works for {object}."

    _clause = field_validator("clause")(_templates({"subject"}))
    _updates = field_validator("updates")(_templates({"subject", "old", "object"}))

    @property
    def phrased(self) -> bool:
        """Templated records can state and ask it."""
        return self.statements is not None

    def problems(self) -> list[tuple[str, str]]:
        """(field, what is wrong) for each problem of the relation on its own."""
        out = []
        if not self.in_table:
            for name in ("functional", "aliases", "ends"):
                if getattr(self, name):
                    out.append((name, "only a relation of the memory's table has it (in_table is false)"))
        if self.statements is None:
            for name in ("fact", "questions", "clause", "updates"):
                if getattr(self, name):
                    out.append((name, "a relation without statements is never templated; give statements"))
        else:
            out += [(name, "needed beside statements") for name in ("fact", "questions") if getattr(self, name) is None]
        if self.functional in ("object", "both"):  # one subject per object at a time
            for name, several in (("statements.plural", self.statements), ("fact.plural", self.fact)):
                if several is not None and several.plural:
                    out.append(
                        (
                            name,
                            f"{self.name!r} is functional ({self.functional}: one subject per object at a time), "
                            "so one statement cannot give one object several subjects",
                        )
                    )
        if self.symmetric and self.subject != self.object:
            out.append(
                (
                    "symmetric",
                    f"{self.name!r} joins {self.subject} to {self.object}: only a relation "
                    "between two of one type holds both ways",
                )
            )
        if self.symmetric and not self.in_table:
            out.append(("symmetric", "only a relation of the memory's table has it (in_table is false)"))
        bad = [i for i in self.docred if not re.fullmatch(r"P[1-9][0-9]*", i)]
        if bad:
            out.append(("docred", f"{bad[0]!r} is no Wikidata relation id (P followed by digits: P108)"))
        if set(self.docred_reversed) - set(self.docred):
            out.append(("docred_reversed", "an id here must be one of the relation's docred ids too"))
        if self.docred_reversed and self.subject != self.object:
            out.append(
                ("docred_reversed", "the types say which side is which when they differ: only for two of one type")
            )
        if self.updates and self.functional is None:
            out.append(("updates", f"{self.name!r} is not functional, so a newer fact would not supersede the old one"))
        return out


class GeneralQuestions(Strict):
    """Questions of the read shapes that name no relation (a schema that gives none: these, which fit any)."""

    per: list[str] = Field(default_factory=lambda: ["What do you know about {subject}?"], min_length=1)
    per_org: list[str] = Field(default_factory=lambda: ["How is {subject} connected to {object}?"], min_length=1)
    org: list[str] = Field(
        default_factory=lambda: ["What do you know about {object}?", "Who is linked to {object}?"], min_length=1
    )

    _per = field_validator("per")(_templates({"subject"}))
    _per_org = field_validator("per_org")(_templates(SLOTS))
    _org = field_validator("org")(_templates({"object"}))


# ----------------------------------------------------------------------------- the schema


NEUTRAL_NEGATIVES = (
    "The weather has been lovely this week.",
    "I had a long day today.",
    "Let's talk about something else.",
    "It has been a busy week.",
    "I need a cup of coffee.",
    "My train was late this morning.",
    "I will think about it over the weekend.",
    "Thanks, that is all for now.",
)


class Schema(Strict):
    what = "schema"
    folder: ClassVar[str] = "schema"  # a bare name is first looked for in configs/schema/

    name: str = Field(min_length=1)
    description: str = ""
    types: dict[str, EntityType] = Field(min_length=1)
    relations: list[Relation] = Field(min_length=1)
    questions: GeneralQuestions = Field(default_factory=lambda: GeneralQuestions())
    # statements of no fact; slots: type names ("{person} enjoys hiking."); a schema that gives none: small talk
    # that fits any (NEUTRAL_NEGATIVES), so a model trained on it still learns when to write nothing
    negatives: list[str] = Field(default_factory=lambda: list(NEUTRAL_NEGATIVES))
    implied_together: list[list[str]] = []
    # open: the memory is mostly about relations as stated ("went to", "painted"), outside the relations
    # listed here (the memory config's open_relations: kept as written, decoded freely)
    open_relations: bool = False
    # the file stem of its Re-DocRED rows (data/real/redocred_dev_<stem>.jsonl); default: its name, "_" for "-"
    redocred_stem: str | None = None

    def check(self) -> list[str]:
        """Every problem across fields, one line each ("relations.3.subject: unknown type 'persn'; ...")."""
        out: list[str] = []
        types = list(self.types)
        plurals: dict[str, str] = {}
        for name, spec in self.types.items():
            if not name.isidentifier():
                out.append(f"types.{name}: a type's name is a slot of negatives: letters, digits and _ only")
            plural = self.plural(name)
            if plural in plurals.values() or plural.startswith("test_only_"):
                out.append(f"types.{name}.plural: {plural!r} is taken")
            plurals[name] = plural
            for i, source in enumerate(spec.names):
                out += [_line(f"types.{name}.names.{i}", field, msg) for field, msg in source.problems()]
        names = [r.name for r in self.relations]
        owner: dict[str, str] = {}  # normalised name or alias -> relation
        labels: dict[str, str] = {}  # docred id -> relation
        for i, rel in enumerate(self.relations):
            where = f"relations.{i}"
            out += [_line(where, field, msg) for field, msg in rel.problems()]
            if rel.name in names[:i]:
                out.append(f"{where}.name: duplicate relation {rel.name!r}")
            for side in ("subject", "object"):
                if getattr(rel, side) not in self.types:
                    out.append(f"{where}.{side}: unknown type {getattr(rel, side)!r}; types: {', '.join(types)}")
            for field, surfaces in (("name", [rel.name]), ("aliases", rel.aliases)):
                for surface in surfaces:
                    other = owner.setdefault(normalize_term(surface), rel.name)
                    if other != rel.name:
                        out.append(
                            f"{where}.{field}: {surface!r} is also a name or alias of {other!r} "
                            "(the store would read one as the other)"
                        )
            for end in rel.ends:
                if end not in names or not self.relations[names.index(end)].in_table:
                    out.append(f"{where}.ends: {end!r} is not a relation of the table in this schema")
            for side in ("subject", "object"):
                kind = self.types.get(getattr(rel, side))
                if rel.docred and kind is not None and kind.docred is None:
                    out.append(
                        f"{where}.docred: its {side} type {getattr(rel, side)!r} has no docred entity type "
                        "(types.NAME.docred: PER, ORG, LOC, ...)"
                    )
            for rid in rel.docred:
                other = labels.setdefault(rid, rel.name)
                if other != rel.name:
                    out.append(f"{where}.docred: {rid} is also an id of {other!r}: one label, one relation")
        if not any(r.phrased and r.weight for r in self.relations):
            out.append("relations: none has statements and a weight > 0: nothing to template")
        try:
            check_templates(self.negatives, set(types), required=set())
        except ValueError as err:
            out.append(f"negatives: {err}")
        for i, group in enumerate(self.implied_together):
            out += [f"implied_together.{i}: unknown relation {name!r}" for name in group if name not in names]
        return out

    # -- what the generators ask

    def plural(self, type_name: str) -> str:
        return self.types[type_name].plural or f"{type_name}s"

    def relation(self, name: str) -> Relation:
        for r in self.relations:
            if r.name == name:
                return r
        raise KeyError(name)

    def phrased(self) -> list[Relation]:
        """The relations templated records state and ask about, in schema order."""
        return [r for r in self.relations if r.phrased]

    def two_hop_pairs(self) -> list[tuple[Relation, Relation]]:
        """Every ordered pair of templated relations a two-hop question can chain: the first has a clause
        and both end in one object type (what `two_hop.pairs: null` means)."""
        rels = self.phrased()
        return [
            (a, b)
            for a in rels
            for b in rels
            if a.name != b.name and a.clause and a.weight and b.weight and a.object == b.object
        ]

    def functional(self) -> dict[str, str | None]:
        """relation name -> 'subject' / 'object' / 'both' / None, as the store will treat it."""
        return {r.name: r.functional for r in self.relations}

    def table(self) -> list[dict[str, Any]]:
        """The memory's relation table entries of this schema (memory_runtime.memory.memory_config.RelationSpec):
        the relations with in_table, in schema order. memory_runtime/memory/relations.yaml is this for the
        shipped person–organisation schema (tests/data_gen/test_schema.py holds them equal)."""
        out = []
        for r in self.relations:
            if r.in_table:
                entry: dict[str, Any] = {"name": r.name, "aliases": list(r.aliases)}
                if r.functional:
                    entry["functional"] = r.functional
                if r.ends:
                    entry["ends"] = list(r.ends)
                if r.symmetric:
                    entry["symmetric"] = True
                if self.types[r.object].common:
                    entry["common_object"] = True
                out.append(entry)
        return out

    # -- loading: Schema.load(path, overrides) (yaml_config.Strict); file sources relative to the file

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict[str, Any]:
        path = PERSON_ORGANISATION if path is None else path
        if not path.is_file():
            raise ConfigError(f"schema {path} does not exist")
        return read_mapping(path, cls.what)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides=()) -> Schema:
        """The schema at `path` (None: the shipped person–organisation schema)."""
        if path is None and not overrides:
            return _shipped_schema()
        return super().load(PERSON_ORGANISATION if path is None else path, overrides)

    @classmethod
    def from_dict(cls, data: dict, *, base_dir: str | Path | None = None, source: str = "<dict>") -> Schema:
        """Validate a schema mapping; name files (`file:`) are relative to `base_dir` and must hold names."""
        if not isinstance(data, dict):
            raise ConfigError(f"invalid schema {source}: expected a mapping at the top level")
        schema = validate(cls, data, cls.what, source)
        for spec in schema.types.values():
            for src in spec.names:
                if src.file is not None and not Path(src.file).is_absolute() and base_dir is not None:
                    src.file = str((Path(base_dir) / src.file).resolve())
        problems = schema.check()
        if problems:
            raise ConfigError(f"invalid schema {source}:\n" + "\n".join(f"  {line}" for line in problems))
        return schema


def _line(where: str, field: str, message: str) -> str:
    return f"{where}.{field}: {message}" if field else f"{where}: {message}"


@lru_cache(maxsize=1)
def _shipped_schema() -> Schema:
    return Schema.load(PERSON_ORGANISATION, ())
