"""How the relations of annotated corpora become a schema's facts: one mapping for the loaders
(data_gen/real_corpora.py), the eval probe (data_gen/real.py) and the split builder
(data_gen/redocred_split.py).

Relation mapping onto the memory's canonical relations (subject = the person, object = the organisation):

    Re-DocRED/DocRED P108 employer                      -> employed by
    Re-DocRED/DocRED P112 founded by (ORG -> PER)       -> founder of
    Re-DocRED/DocRED P463 member of                     -> member of
    Re-DocRED/DocRED P102 member of political party     -> member of
    Re-DocRED/DocRED P54 member of sports team          -> member of
    Re-DocRED/DocRED P488 chairperson (ORG -> PER)      -> chairperson of
    Wikidata P169 chief executive officer (ORG -> PER)  -> CEO of   (not one of DocRED's 96 relations)
    KnowledgeNet EMPLOYEE_OR_MEMBER_OF (id 3, <person> -> <organisation>), derived "employee or member of"
                                                        -> employed by (the synthetic relation closest to
                                                           it; a "member of" write is scored there too)
    KnowledgeNet FOUNDED_BY (id 2, <organisation> -> <person>), derived "founder of"  -> founder of
    KnowledgeNet CEO (id 4, <organisation> -> <person>), derived "CEO of"             -> CEO of
    CoNLL04 Work_For (Peop -> Org)                      -> employed by

and onto people-places-things (the subject is the person, of two people the child of a parent): P19
place of birth -> born in, P551 residence -> lives in, P27 country of citizenship -> citizen of, P26
spouse -> spouse of, P3373 sibling -> sibling of, P22 father and P25 mother -> child of, P40 child ->
child of (subject and object swapped). The (Re-)DocRED ids of both are the schemas' own data (a
relation's `docred` and `docred_reversed`, a type's `docred` entity type, in configs/schema/*.yaml):
RedocredSchema.of reads them, so a schema of your own gets Re-DocRED real text with no code.
REDOCRED_SCHEMAS holds the shipped ones; a file of Re-DocRED rows is read with the one its name ends
in (..._<stem>.jsonl: _person_org, _people_places_things), or the one the loaders' `schema=` names.
The KnowledgeNet and CoNLL04 mappings below stay in code: those corpora's readers serve the
person–organisation schema's training only.

Which side is the person comes from the entity types (Re-DocRED's head_type/tail_type, DocRED's
vertexSet types, CoNLL04's Peop/Org) or, for KnowledgeNet, from the property. An unmapped relation
is an error (a new data file must not lose facts silently). DocRED's other 90 relations are listed in
DOCRED_IGNORED: none is a person–organisation memory fact (educated at, owned by, record label,
works and their makers, organisation structure; places, times and family link a PER and an ORG only
through typing noise), so a window that states one is skipped, never taught as "nothing to store".
KnowledgeNet passages are annotated for some relations only; `annotated_relations` lists them
(mapped), so a scorer can ignore writes of other relations there; (Re-)DocRED gold covers all of its
mapped relations (not "CEO of": DocRED has no CEO relation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from memory_runtime.shipped import shipped

# Which (Re-)DocRED / Wikidata relation id states which relation of a schema is the schema's own data:
# `docred` of its relations (configs/schema/*.yaml), read by RedocredSchema.of. The person–organisation
# schema maps P108 employer, P112 founded by, P463/P102/P54 member of (organisation, political party,
# sports team), P488 chairperson and Wikidata's P169 chief executive officer (not one of DocRED's).
# DocRED's other relations: none is a person–organisation memory fact, so a PER–ORG label of one of
# them makes its window neither a write nor a negative (it is skipped).
DOCRED_IGNORED = {
    # person–organisation, but not what the memory stores
    "P69": "educated at",
    "P127": "owned by",
    "P1344": "participant of",
    "P710": "participant",
    "P166": "award received",
    "P264": "record label",
    "P118": "league",
    "P241": "military branch",
    "P140": "religion",
    "P39": "position held",
    "P6": "head of government",
    "P35": "head of state",
    "P737": "influenced by",
    "P937": "work location",
    "P551": "residence",
    # works, their makers and publishers (a band or a studio is an ORG)
    "P50": "author",
    "P57": "director",
    "P58": "screenwriter",
    "P86": "composer",
    "P161": "cast member",
    "P162": "producer",
    "P170": "creator",
    "P175": "performer",
    "P176": "manufacturer",
    "P178": "developer",
    "P123": "publisher",
    "P272": "production company",
    "P449": "original network",
    "P674": "characters",
    "P676": "lyrics by",
    "P800": "notable work",
    "P1441": "present in work",
    "P400": "platform",
    "P1056": "product or material produced",
    "P136": "genre",
    "P179": "series",
    "P364": "original language of work",
    "P495": "country of origin",
    "P577": "publication date",
    "P840": "narrative location",
    # organisation structure and succession (a band "has part" its members)
    "P361": "part of",
    "P527": "has part",
    "P749": "parent organization",
    "P355": "subsidiary",
    "P807": "separated from",
    "P1365": "replaces",
    "P1366": "replaced by",
    "P155": "follows",
    "P156": "followed by",
    "P31": "instance of",
    "P279": "subclass of",
    "P137": "operator",
    "P194": "legislative body",
    "P1001": "applies to jurisdiction",
    "P159": "headquarters location",
    "P740": "location of formation",
    "P571": "inception",
    "P576": "dissolved, abolished or demolished",
    # places, times and family: between a PER and an ORG only through typing noise
    "P17": "country",
    "P19": "place of birth",
    "P20": "place of death",
    "P27": "country of citizenship",
    "P22": "father",
    "P25": "mother",
    "P26": "spouse",
    "P40": "child",
    "P3373": "sibling",
    "P172": "ethnic group",
    "P1412": "languages spoken, written or signed",
    "P30": "continent",
    "P36": "capital",
    "P37": "official language",
    "P131": "located in the administrative territorial entity",
    "P150": "contains administrative territorial entity",
    "P171": "parent taxon",
    "P190": "sister city",
    "P205": "basin country",
    "P206": "located in or next to body of water",
    "P276": "location",
    "P403": "mouth of the watercourse",
    "P706": "located on terrain feature",
    "P1336": "territory claimed by",
    "P1376": "capital of",
    "P1198": "unemployment rate",
    "P569": "date of birth",
    "P570": "date of death",
    "P580": "start time",
    "P582": "end time",
    "P585": "point in time",
    "P607": "conflict",
}
# DocRED's 96 relation ids (its label inventory, a fact about the corpus): the 90 above and the six that
# the person–organisation schema maps (its YAML says onto what)
DOCRED_RELATION_IDS = frozenset(DOCRED_IGNORED) | frozenset({"P108", "P112", "P463", "P102", "P54", "P488"})

# Onto people-places-things (its YAML: P19 born in, P551 lives in, P27 citizen of, P26 spouse of, P3373
# sibling of, P22/P25/P40 child of). Decided for the other DocRED relations of a person and a place or
# another person (they stay ignored: a sentence stating one is left out, never a negative): P20 place of
# death (the dead live nowhere: not "lives in"), P937 work location (a place of work, not a home), P1412
# language, P172 ethnic group, P17 country, P1001 jurisdiction, P6/P35 head of government/state (a mayor
# of Calgary need not live there), works and their characters (P170, P800, P175: a character is often
# typed PER). P1038 relative is not among DocRED's 96 relations (no label has it), and would stay
# unmapped anyway: "a relative" is none of the schema's three family relations. P551 residence may be a
# former home: mapped all the same ("lives in" is functional, so a later home supersedes it).


@dataclass(frozen=True)
class RedocredSchema:
    """How (Re-)DocRED labels become the facts of one schema, read from the schema itself
    (:meth:`of`: its relations' `docred` ids, its types' `docred` entity types): one definition for the
    split builder and every loader.

    The subject is the entity of the schema's subject type (`subject_type`, PER for both shipped
    schemas): of a label between it and another type that side, of two of that type the head, or the
    tail for the ids of `object_first` (a relation's `docred_reversed`: P40 child, whose head is the
    parent). A label between a subject and an object type of the schema is mapped (`relations`, when
    its types are those of the relation: P22 father of a PER and a LOC is typing noise) or ignored
    (every other DocRED relation: a sentence it touches is left out, neither a fact nor a negative).
    """

    name: str  # the schema
    stem: str  # its derived row files: redocred_dev_<stem>.jsonl (data/real/), redocred_train_<stem>.jsonl
    relations: dict[str, str]  # relation id -> canonical relation of the schema
    annotated: tuple[str, ...]  # what the gold was checked for (a write in these on a negative is false)
    object_first: frozenset[str] = field(default=frozenset())
    subject_type: str = "PER"  # the DocRED entity type of the schema's subjects
    schema: Any = field(default=None, compare=False, repr=False)  # data_gen.schema.Schema

    @classmethod
    def of(cls, schema: Any) -> RedocredSchema:
        """The mapping a schema declares; ValueError where it declares none or one it cannot read by."""
        mapped = [r for r in schema.relations if r.docred]
        if not mapped:
            raise ValueError(f"schema {schema.name} maps no (Re-)DocRED relation (a relation's `docred` ids)")
        subjects = {schema.types[r.subject].docred for r in mapped}
        if len(subjects) != 1:
            raise ValueError(
                f"schema {schema.name}: the relations with docred ids have subjects of several DocRED types "
                f"({', '.join(sorted(map(str, subjects)))}); real text is read with one"
            )
        return cls(
            name=schema.name,
            stem=schema.redocred_stem or schema.name.replace("-", "_"),
            relations={rid: r.name for r in mapped for rid in r.docred},
            annotated=tuple(sorted({r.name for r in mapped if set(r.docred) & DOCRED_RELATION_IDS})),
            object_first=frozenset(rid for r in mapped for rid in r.docred_reversed),
            subject_type=subjects.pop(),
            schema=schema,
        )

    @cached_property
    def symmetric(self) -> frozenset[str]:
        """The schema's relations that hold both ways (`symmetric: true`): Re-DocRED labels most spouses
        and siblings both ways (A P3373 B and B P3373 A), one fact, written in either order."""
        return frozenset(r.name for r in self.schema.relations if r.symmetric)

    @property
    def dev_file(self) -> str:
        return f"redocred_dev_{self.stem}.jsonl"

    @property
    def train_file(self) -> str:
        return f"redocred_train_{self.stem}.jsonl"

    @cached_property
    def canonical_names(self) -> dict[str, str]:
        """The schema's relation table: every normalised name and alias -> its canonical relation."""
        from memory_runtime.memory.memory_config import MemoryConfig

        return MemoryConfig.model_validate({"relations": self.schema.table()}).canonical_names

    @cached_property
    def object_types(self) -> dict[str, str]:
        """Canonical relation -> the DocRED type of its object, for the schema's relations of a subject of
        `subject_type` and an object of a DocRED type (those a caller's `relations=` may map too)."""
        types = self.schema.types
        return {
            r.name: types[r.object].docred
            for r in self.schema.relations
            if types[r.subject].docred == self.subject_type and types[r.object].docred
        }

    def names_a_pair(self, types: list[str]) -> bool:
        """Whether entities of these types (one type per entity) include a subject and another entity
        that could be the object of one of the schema's relations (two people for person–person)."""
        others = list(types)
        if self.subject_type not in others:
            return False
        others.remove(self.subject_type)
        return bool(set(self.object_types.values()) & set(others))

    def with_relations(self, extra: dict[str, str]) -> RedocredSchema:
        """This mapping and a caller's (relation id -> canonical relation, already validated)."""
        if not extra:
            return self
        return replace(self, relations={**self.relations, **extra}, annotated=(*self.annotated, *extra.values()))


@cache
def _schema(name: str):
    from data_gen.schema import Schema

    return Schema.load(shipped("configs", "schema", f"{name}.yaml"))


PERSON_ORG = RedocredSchema.of(_schema("person-organisation"))
PEOPLE_PLACES = RedocredSchema.of(_schema("people-places-things"))
REDOCRED_SCHEMAS = {m.name: m for m in (PERSON_ORG, PEOPLE_PLACES)}  # the shipped schemas with real text
REDOCRED_RELATIONS = PERSON_ORG.relations  # relation id -> canonical relation (person–organisation)
DOCRED_ANNOTATED = PERSON_ORG.annotated  # what (Re-)DocRED gold was checked for (it has no CEO relation)
PEOPLE_PLACES_RELATIONS = PEOPLE_PLACES.relations


def redocred_schema(path: str | Path | None = None, schema: str | None = None) -> RedocredSchema:
    """The mapping of `schema` (a shipped schema's name, or a schema file that maps DocRED ids), else the
    one whose stem ends the name of `path` (redocred_dev_people_places_things.jsonl), else
    person–organisation (as before schemas)."""
    if schema is not None:
        if schema in REDOCRED_SCHEMAS:
            return REDOCRED_SCHEMAS[schema]
        if Path(schema).expanduser().is_file():
            from data_gen.schema import Schema

            return RedocredSchema.of(Schema.load(Path(schema).expanduser()))
        raise ValueError(
            f"no Re-DocRED mapping for schema {schema!r}: one of {', '.join(REDOCRED_SCHEMAS)}, or a schema file "
            "whose relations have docred ids"
        )
    name = Path(path).name if path is not None else ""
    return next((m for m in REDOCRED_SCHEMAS.values() if name.endswith(f"_{m.stem}.jsonl")), PERSON_ORG)


KNOWLEDGENET_RELATIONS = {  # the derived rows' relation names
    "employee or member of": "employed by",
    "founder of": "founder of",
    "CEO of": "CEO of",
}
# Raw KnowledgeNet: propertyId -> (propertyName, canonical relation, the person's side of its facts).
KNOWLEDGENET_PROPERTIES = {
    "2": ("FOUNDED_BY", "founder of", "object"),  # <organisation> FOUNDED_BY <person>
    "3": ("EMPLOYEE_OR_MEMBER_OF", "employed by", "subject"),  # <person> EMPLOYEE_OR_MEMBER_OF <organisation>
    "4": ("CEO", "CEO of", "object"),  # <organisation> CEO <person>
}
# What a passage annotated for a KnowledgeNet relation was checked for, in canonical relations: its
# "employee or member of" covers membership too, so a "member of" write there is scored, not ignored.
KNOWLEDGENET_ANNOTATED = {
    "EMPLOYEE_OR_MEMBER_OF": ("employed by", "member of"),
    "FOUNDED_BY": ("founder of",),
    "CEO": ("CEO of",),
}
CONLL04_RELATIONS = {"Work_For": "employed by"}  # Peop -> Org
