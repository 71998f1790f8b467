"""Real text written by people, with gold facts (person–organisation; Re-DocRED's also person–place
and person–person, for the second shipped schema), as write records: the real-text probe of the eval
(data/real/, EVAL ONLY) and readers of annotated corpora for training.

Eval: `load_real` reads the two shipped dev files (data/real/, licences in its README) into records
with split="real_eval" — never train on them:

    redocred_dev_person_org.jsonl        Re-DocRED dev sentences: {title, sent_id, sentence,
                                         triples: [{head, head_type, relation, relation_name, tail, tail_type}]}
                                         (103 state no fact; built by data_gen/redocred_split.py)
    knowledgenet_person_org_dev.jsonl    KnowledgeNet passages: {text, annotated: [...],
                                         triples: [{person, relation, organization}]} (79 state no fact)

    redocred_dev_people_places_things.jsonl   the same for the second shipped schema (people-places-things:
                                         person–place and person–person facts); read only when named
                                         (`memlm eval real=FILE`): the default probe is person–organisation

Training: `load_corpus(path, format)` reads a whole annotated corpus (see its docstring for the
formats and what each skips). Their dev data is the probe: of Re-DocRED's dev_revised.json train
only on the training half of its documents (data/real_train/redocred_train_person_org.jsonl), never
on DocRED's dev.json (Re-DocRED revised its documents), and leave the passages of
knowledgenet_person_org_dev.jsonl out of KnowledgeNet's train.json (they come from it).

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

Records follow the synthetic write conventions: user = the passage; assistant = the write calls of
the gold triplets then " Noted." (type "write"), or "Nothing to store." when the passage states no
fact (type "negative"). Re-DocRED sentences are tokenised ("Party ( Labour ) ."); by default the
passage and its entity strings are detokenised the same way ("Party (Labour).").
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache, cached_property, partial
from pathlib import Path
from typing import Any

from data_gen.config import RepliesConfig
from memory_runtime.jsonl import read_dicts
from memory_runtime.protocol import Triplet, render_write
from memory_runtime.records import Record, Segment
from memory_runtime.shipped import shipped

logger = logging.getLogger(__name__)

REAL_SPLIT = "real_eval"
REDOCRED_FILE = "redocred_dev_person_org.jsonl"
KNOWLEDGENET_FILE = "knowledgenet_person_org_dev.jsonl"
ENV_VAR = "MEMLM_REAL_DIR"
CORPUS_FORMATS = ("redocred_sentences", "knowledgenet", "docred", "conll04", "jsonl")

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
        from memory_runtime.memory.config import MemoryConfig

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
# A fact whose person or organisation is only a pronoun names no one a memory could store.
PRONOUNS = frozenset(
    "i me my mine we us our ours you your yours he him his she her hers they them their theirs "
    "it its who whom whose this that".split()
)

Passage = tuple[str, list[Triplet], list[str] | None]  # text, gold triplets, annotated relations (None = all)


class RealDataMissing(FileNotFoundError):
    """The real-text directory (or one of its files) is not there."""


def default_real_dir() -> Path:
    """$MEMLM_REAL_DIR, else the data/real/ memlm ships (memory_runtime.shipped: dev data, never trained on)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return shipped("data", "real")


def detokenize(text: str) -> str:
    """Undo PTB-style tokenisation: 'Party ( Labour ) , 1939 .' -> 'Party (Labour), 1939.'"""
    text = re.sub(r" ([.,;:!?%)\]])", r"\1", text)
    text = re.sub(r"([(\[$]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'m|'ll|'d)\b", r"\1", text)
    text = re.sub(r'" (.*?) "', r'"\1"', text)
    text = re.sub(r"(\w) - (\w)", r"\1-\2", text)
    return text.strip()


def _dedupe(triplets: list[Triplet]) -> list[Triplet]:
    return list(dict.fromkeys(triplets))


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise RealDataMissing(f"real-text file {path} is missing (see {path.parent / 'README.md'})")
    return read_dicts(path, "a real-text passage")


def passage_record(
    rid: str,
    source: str,
    passage: str,
    triplets,
    annotated: list[str] | None,
    replies: RepliesConfig,
    split: str = REAL_SPLIT,
) -> Record:
    """A passage and its gold facts as a write record (the calls, then the acknowledgement), or a
    negative one ("Nothing to store.") when it states none."""
    triplets = _dedupe([Triplet(*t) for t in triplets])
    segments = [Segment(role="user", text=passage, train=False)]
    if triplets:
        segments.append(Segment(role="assistant", text=" ".join(render_write(*t) for t in triplets), train=True))
        segments.append(Segment(role="assistant", text=" " + replies.ack, train=True))
    else:
        segments.append(Segment(role="assistant", text=replies.nothing, train=True))
    names = list(dict.fromkeys([t[0] for t in triplets] + [t[2] for t in triplets]))
    return Record(
        id=rid,
        type="write" if triplets else "negative",
        segments=segments,
        gold_triplets=triplets,
        gold_names=names,
        split=split,
        source=source,
        annotated_relations=annotated,
    )


# --------------------------------------------------------------------------- the eval probe (data/real/)


def load_redocred(
    path: Path, *, detok: bool = True, replies: RepliesConfig | None = None, schema: str | None = None
) -> list[Record]:
    """Re-DocRED sentence rows as records, mapped onto `schema` (default: by the file's name, redocred_schema)."""
    replies = replies or RepliesConfig()
    clean = detokenize if detok else (lambda s: s)
    mapping = redocred_schema(path, schema)
    return [
        passage_record(
            f"{REAL_SPLIT}-redocred-{i:04d}", "redocred", *_redocred_row(row, f"{path}:{n}", mapping, clean), replies
        )
        for i, (n, row) in enumerate(_read_jsonl(path))
    ]


def load_knowledgenet(path: Path, *, replies: RepliesConfig | None = None) -> list[Record]:
    replies = replies or RepliesConfig()
    return [
        passage_record(
            f"{REAL_SPLIT}-knowledgenet-{i:04d}", "knowledgenet", *_knowledgenet_row(row, f"{path}:{n}"), replies
        )
        for i, (n, row) in enumerate(_read_jsonl(path))
    ]


def load_real(
    path: str | Path | None = None, *, detok: bool = True, replies: RepliesConfig | None = None
) -> list[Record]:
    """Every real passage as a write (or no-fact) record: Re-DocRED first, then KnowledgeNet.

    `path` is the directory holding both files (default: default_real_dir()). Raises RealDataMissing
    with the path it looked at when the directory or a file is not there.
    """
    root = Path(path) if path is not None else default_real_dir()
    if not root.is_dir():
        raise RealDataMissing(
            f"real-text probe data not found at {root}: the repository ships it in data/real/ "
            f"(pass another directory, or set ${ENV_VAR})"
        )
    return load_redocred(root / REDOCRED_FILE, detok=detok, replies=replies) + load_knowledgenet(
        root / KNOWLEDGENET_FILE, replies=replies
    )


def load_real_file(
    path: str | Path, *, detok: bool = True, replies: RepliesConfig | None = None, schema: str | None = None
) -> list[Record]:
    """One file in either format (told apart by its first row: Re-DocRED rows have a
    "sentence", KnowledgeNet rows a "text"), or a JSONL of records as data_gen writes them.
    Re-DocRED rows are mapped onto `schema`, by default the one the file's name says (redocred_schema)."""
    path = Path(path)
    rows = _read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no passages")
    first = rows[0][1]
    if "segments" in first:
        return [Record.model_validate(row) for _, row in rows]
    if "sentence" in first:
        return load_redocred(path, detok=detok, replies=replies, schema=schema)
    if "text" in first:
        return load_knowledgenet(path, replies=replies)
    raise ValueError(
        f"{path}: rows are neither Re-DocRED (sentence, triples), KnowledgeNet (text, annotated, "
        f"triples) nor data_gen records (segments)"
    )


def is_mentioned(record: Record, triplet: Triplet) -> bool:
    """Whether both names of a gold triplet occur in the passage (after the memory's normalisation).

    KnowledgeNet gold often names a person the passage only calls "He"/"She" (76 of its 457
    triplets): no model reading the passage alone can write that name, so scorers may want recall
    over the mentioned triplets as well.
    """
    return names_occur(record.segments[0].text, (triplet[0], triplet[2]))


def names_occur(text: str, names) -> bool:
    """Whether every name occurs in `text` as whole words, after the memory's normalisation."""
    from memory_runtime.memory.terms import normalize_term

    text = normalize_term(text)  # a possessive "ASEAN's" normalises to "aseans"
    return all(re.search(rf"(?<!\w){re.escape(normalize_term(name))}s?(?!\w)", text) for name in names)


def write_real_jsonl(records: list[Record], path: str | Path) -> None:
    """One record per line (the same format as the synthetic JSONL exports)."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(r.model_dump_json() + "\n" for r in records)


# --------------------------------------------------------------------------- annotated corpora (training)


def load_corpus(
    path: str | Path,
    format: str = "auto",
    *,
    relations: dict[str, str] | None = None,
    window: int = 1,
    replies: RepliesConfig | None = None,
    split: str = REAL_SPLIT,
    schema: str | None = None,
) -> list[Record]:
    """Every passage of an annotated corpus file as a write record (its gold facts: person–organisation
    ones unless `schema` says otherwise) or a negative one (a passage checked for them that states
    none), in file order.

    Records: `source` = the format, `split` = `split` (pass "train" for training data), ids
    f"{split}-{format}-{file stem}-{i:05d}" (stable for a file, a format and a window),
    `annotated_relations` = the relations the passage was checked for (KnowledgeNet, a jsonl row's
    "annotated"), else the format's mapped relations (None for jsonl: every relation).

    Formats (`format="auto"` tells them apart by the keys of the first row or document: vertexSet +
    sents -> docred; tokens + entities -> conll04; passages -> knowledgenet (raw); sentence + triples
    -> redocred_sentences; text + triples -> knowledgenet when "annotated" holds KnowledgeNet
    property names (CEO, FOUNDED_BY, EMPLOYEE_OR_MEMBER_OF), else jsonl; anything else is an error):

    redocred_sentences  the derived rows of data/real/ and data/real_train/ (what `load_redocred` reads).
    knowledgenet        the derived rows {text, annotated, triples} (what `load_knowledgenet` reads) or
                        raw documents (diffbot/knowledge-net train.json: {documentId, documentText,
                        passages: [{passageText, exhaustivelyAnnotatedProperties, facts}]}). Raw: only
                        passages annotated for FOUNDED_BY, EMPLOYEE_OR_MEMBER_OF or CEO are used; facts of
                        other properties there are ignored (not person–organisation memory facts); a fact
                        whose person or organisation is a pronoun ("He", "its") or does not occur in the
                        passage is left out, and a passage left with no fact by that is skipped (it does
                        state a fact: it is no negative).
    docred              DocRED / Re-DocRED documents (a JSON array or JSONL of {title, sents, vertexSet,
                        labels}). Every `window` consecutive sentences (sliding by one) that mention a PER
                        and an ORG entity are a passage, detokenised; its facts are the mapped PER–ORG
                        labels whose two entities it mentions and whose evidence (when given) it holds, named
                        by the entity's first mention in the window. A window is skipped when a PER–ORG label
                        touches it (both entities mentioned, or an evidence sentence inside) whose evidence
                        lies partly outside it or whose relation is in DOCRED_IGNORED, or when a fact's name
                        cannot be found in the detokenised text; a window touched by no PER–ORG label is a
                        negative. A PER–ORG relation neither mapped nor ignored is an error; a document
                        without "labels" (DocRED's test.json) too.
    conll04             the JSON of SpERT and most repositories ([{tokens, entities: [{type, start, end}],
                        relations: [{type, head, tail}]}]): a sentence with a Peop and an Org entity is a
                        passage (Work_For facts, or a negative without one); other sentences are skipped; any
                        other relation between a Peop and an Org is an error. CoNLL04 states no licence:
                        memlm ships none of it, only this reader.
    jsonl               a user's own annotations, one per line: {"text", "triples": [{subject, relation,
                        object} | {person, relation, organization} | [s, r, o]], "annotated": [...]?}.
                        Relations: a canonical relation of the memory table, an alias of one (written as
                        the canonical name) or a key of `relations`. Empty triples = a negative. Each name
                        must occur in the text (case-insensitive).

    `relations` maps more corpus relation labels (DocRED ids, CoNLL04 types, jsonl names) to canonical
    relations of the memory table, over the built-in tables (not for knowledgenet, whose properties
    fix the person's side). `schema` (a name of REDOCRED_SCHEMAS; default: the one a redocred_sentences
    file's name says, else person-organisation) is the relation table `relations` and jsonl names are
    checked against, and the mapping of docred and redocred_sentences, whose PER–ORG above then reads
    "a PER and an object of the schema" (people-places-things: a LOC or another PER); knowledgenet and
    conll04 are person–organisation corpora only. `window` is for docred only. Errors: RealDataMissing
    for a missing file, ValueError naming the file and the line (JSONL), element index (JSON array) or
    document otherwise. Skipped windows and passages are counted in an INFO log line.
    """
    path = Path(path)
    if format != "auto" and format not in CORPUS_FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; one of auto, {', '.join(CORPUS_FORMATS)}")
    if window < 1:
        raise ValueError(f"window must be at least 1 sentence, got {window}")
    rows = _read_rows(path)
    if format == "auto":
        format = _detect_format(rows)
    mapping = redocred_schema(path if format == "redocred_sentences" else None, schema)
    canonical, extra = _caller_relations(relations, mapping)
    if extra and format == "knowledgenet":
        raise ValueError(
            "relations= does not apply to knowledgenet: its properties are fixed (KNOWLEDGENET_PROPERTIES)"
        )
    if mapping is not PERSON_ORG and format in ("knowledgenet", "conll04"):
        raise ValueError(f"{format} is a person–organisation corpus: it has no facts of schema {mapping.name!r}")
    skipped: Counter[str] = Counter()
    if format == "redocred_sentences":
        read = partial(_redocred_sentences, mapping=mapping.with_relations(extra))
    elif format == "knowledgenet":
        read = partial(_knowledgenet_passages, skipped=skipped)
    elif format == "docred":
        read = partial(_docred_document, mapping=mapping.with_relations(extra), window=window, skipped=skipped)
    elif format == "conll04":
        read = partial(_conll04_sentence, relations={**CONLL04_RELATIONS, **extra}, skipped=skipped)
    else:
        from memory_runtime.memory.terms import normalize_term

        relations = {**canonical, **{normalize_term(k): v for k, v in extra.items()}}
        read = partial(_jsonl_row, relations=relations, schema=mapping.name)
    passages: list[Passage] = []
    for where, row in rows:
        try:
            passages += read(row, where)
        except (KeyError, IndexError, TypeError, AttributeError) as err:
            raise ValueError(f"{where}: not a {format} row ({type(err).__name__}: {err})") from None
    if skipped:
        logger.info("%s: %d passages, skipped %s", path, len(passages), dict(skipped))
    if not passages:
        logger.warning("%s: no passage with a person and an entity of the schema checked for their facts", path)
    replies = replies or RepliesConfig()
    return [
        passage_record(f"{split}-{format}-{path.stem}-{i:05d}", format, text, triplets, annotated, replies, split=split)
        for i, (text, triplets, annotated) in enumerate(passages)
    ]


def detect_format(path: str | Path) -> str:
    """The corpus format of a file, as load_corpus(format="auto") tells it."""
    return _detect_format(_read_rows(Path(path)))


def corpus_stats(records: list[Record]) -> dict:
    """Counts for a dataset card: passages, with facts, negatives, facts, facts by relation, passages by source."""
    return {
        "passages": len(records),
        "with_facts": sum(1 for r in records if r.gold_triplets),
        "negatives": sum(1 for r in records if not r.gold_triplets),
        "facts": sum(len(r.gold_triplets) for r in records),
        "facts_by_relation": dict(sorted(Counter(t[1] for r in records for t in r.gold_triplets).items())),
        "by_source": dict(sorted(Counter(r.source or "unknown" for r in records).items())),
    }


def _read_rows(path: Path) -> list[tuple[str, dict]]:
    """(where, object) of every element of a JSON array or line of a JSONL file; `where` names the
    file and the element index or the line."""
    if not path.is_file():
        raise RealDataMissing(f"corpus file {path} is missing")
    text = path.read_text(encoding="utf-8-sig")
    if not text.lstrip().startswith("["):
        rows = [(f"{path}:{n}", row) for n, row in read_dicts(path, "a corpus passage or document")]
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        for i, row in enumerate(data):
            if not isinstance(row, dict):
                raise ValueError(f"{path}[{i}]: expected a JSON object, got {type(row).__name__}")
        rows = [(f"{path}[{i}]", row) for i, row in enumerate(data)]
    if not rows:
        raise ValueError(f"{path}: no passages")
    return rows


def _detect_format(rows: list[tuple[str, dict]]) -> str:
    where, first = rows[0]
    keys = set(first)
    if {"vertexSet", "sents"} <= keys:
        return "docred"
    if {"tokens", "entities"} <= keys:
        return "conll04"
    if "passages" in keys:
        return "knowledgenet"
    if {"sentence", "triples"} <= keys:
        return "redocred_sentences"
    if {"text", "triples"} <= keys:
        annotated = first.get("annotated")
        if annotated and isinstance(annotated, list) and all(a in KNOWLEDGENET_ANNOTATED for a in annotated):
            return "knowledgenet"
        return "jsonl"
    hint = " (data_gen records: read them with load_real_file)" if "segments" in keys else ""
    raise ValueError(
        f"{where}: cannot tell the corpus format from the keys {sorted(keys)}{hint}; "
        f"pass format= (one of {', '.join(CORPUS_FORMATS)})"
    )


def _caller_relations(
    relations: dict[str, str] | None, mapping: RedocredSchema = PERSON_ORG
) -> tuple[dict[str, str], dict[str, str]]:
    """The schema's relation table (normalised name or alias -> canonical) and the caller's mapping with
    canonical values (an alias value is written as its canonical name; anything else is an error)."""
    from memory_runtime.memory.terms import normalize_term

    canonical = mapping.canonical_names
    extra = {}
    for key, value in (relations or {}).items():
        if normalize_term(value) not in canonical:
            raise ValueError(
                f"relations: {key!r} -> {value!r}, which is not a relation of the {mapping.name} relation table"
            )
        extra[key] = canonical[normalize_term(value)]
    return canonical, extra


def _redocred_row(row: dict, where: str, mapping: RedocredSchema = PERSON_ORG, clean=detokenize) -> Passage:
    """A derived sentence row (the labels' own direction) as its canonical triplets, the person first."""
    triplets = []
    for t in row["triples"]:
        relation = mapping.relations.get(t["relation"])
        if relation is None:
            raise ValueError(
                f"{where}: unmapped relation {t['relation']} ({t.get('relation_name', 'name unknown')}) "
                f"for schema {mapping.name}; add it to the docred ids of one of its relations (the schema's YAML)"
            )
        ends = [(t["head_type"], t["head"]), (t["tail_type"], t["tail"])]
        if _object_first(ends[0][0], ends[1][0], t["relation"], mapping):
            ends.reverse()
        (subject_type, subject), (object_type, obj) = ends
        if (subject_type, object_type) != (mapping.subject_type, mapping.object_types.get(relation)):
            raise ValueError(
                f"{where}: {t['relation']} ({relation}) joins a {mapping.subject_type} and a(n) "
                f"{mapping.object_types.get(relation)}, got {t['head_type']}/{t['tail_type']}"
            )
        triplets.append(Triplet(clean(subject), relation, clean(obj)))
    return clean(row["sentence"]), _one_way(triplets, mapping.symmetric), sorted(set(mapping.annotated))


def _one_way(triplets: list[Triplet], symmetric: frozenset[str]) -> list[Triplet]:
    """The triplets less the reverse of an earlier one in a symmetric relation: one fact, labelled both ways."""
    out: list[Triplet] = []
    for t in triplets:
        if t[1] not in symmetric or Triplet(t[2], t[1], t[0]) not in out:
            out.append(t)
    return out


def _object_first(head_type: str, tail_type: str, relation_id: str, mapping: RedocredSchema) -> bool:
    """Whether a label's tail is the subject: the subject type's side of two types (the person of a PER
    and an ORG), of two of that type the tail of the ids in `object_first` (the child of P40)."""
    subject = mapping.subject_type
    return head_type != subject or (tail_type == subject and relation_id in mapping.object_first)


def _redocred_sentences(row: dict, where: str, mapping: RedocredSchema) -> list[Passage]:
    return [_redocred_row(row, where, mapping)]


def _knowledgenet_row(row: dict, where: str) -> Passage:
    """A derived KnowledgeNet row {text, annotated, triples: [{person, relation, organization}]}."""
    triplets = []
    for t in row["triples"]:
        relation = KNOWLEDGENET_RELATIONS.get(t["relation"])
        if relation is None:
            raise ValueError(
                f"{where}: unmapped relation {t['relation']!r}; add it to data_gen.real.KNOWLEDGENET_RELATIONS"
            )
        triplets.append(Triplet(t["person"].strip(), relation, t["organization"].strip()))
    try:
        annotated = sorted({r for a in row["annotated"] for r in KNOWLEDGENET_ANNOTATED[a]})
    except KeyError as err:
        raise ValueError(f"{where}: unknown annotated relation {err}") from None
    return row["text"].strip(), triplets, annotated


def _knowledgenet_passages(row: dict, where: str, skipped: Counter[str]) -> list[Passage]:
    """A derived row, or the passages of a raw KnowledgeNet document annotated for a mapped property."""
    if "passages" not in row:
        return [_knowledgenet_row(row, where)]
    out = []
    for passage in row["passages"]:
        checked = [
            KNOWLEDGENET_PROPERTIES[str(p["propertyId"])]
            for p in passage["exhaustivelyAnnotatedProperties"]
            if str(p["propertyId"]) in KNOWLEDGENET_PROPERTIES
        ]
        if not checked:
            skipped["passage not annotated for a mapped property"] += 1
            continue
        text = passage["passageText"].strip()
        triplets, unnamed = [], 0
        for fact in passage["facts"]:
            if str(fact["propertyId"]) not in KNOWLEDGENET_PROPERTIES:
                continue  # not a person–organisation memory fact
            _, relation, person_side = KNOWLEDGENET_PROPERTIES[str(fact["propertyId"])]
            org_side = "object" if person_side == "subject" else "subject"
            person, org = fact[person_side + "Text"].strip(), fact[org_side + "Text"].strip()
            if _unnamed(person, text) or _unnamed(org, text):
                unnamed += 1
            else:
                triplets.append(Triplet(person, relation, org))
        if unnamed and not triplets:
            skipped["passage whose facts name a pronoun (or a name it does not hold) only"] += 1
            continue
        annotated = sorted({r for name, _, _ in checked for r in KNOWLEDGENET_ANNOTATED[name]})
        out.append((text, triplets, annotated))
    return out


def _unnamed(name: str, text: str) -> bool:
    """A pronoun, or a name the passage does not hold: nothing a model could copy from it."""
    return not name or name.casefold() in PRONOUNS or name.casefold() not in text.casefold()


def docred_entity_types(doc: dict) -> list[str]:
    """Each entity's type (PER, ORG, LOC, ...) in a (Re-)DocRED document: its first mention's."""
    return [mentions[0]["type"] for mentions in doc["vertexSet"]]


def docred_labels(
    doc: dict, where: str, mapping: RedocredSchema = PERSON_ORG
) -> list[tuple[dict, int, int, str | None]]:
    """The document's labels between a person and an entity of an object type of the schema (PER–ORG
    for person–organisation), as (label, subject entity, object entity, canonical relation, or None for
    an ignored one: see RedocredSchema). A relation neither mapped nor one of DocRED's is an error
    naming `where`."""
    types = docred_entity_types(doc)
    out = []
    for label in doc["labels"]:
        r, subject, obj = label["r"], label["h"], label["t"]
        if _object_first(types[subject], types[obj], r, mapping):
            subject, obj = obj, subject
        if types[subject] != mapping.subject_type or types[obj] not in mapping.object_types.values():
            continue
        if r not in mapping.relations and r not in DOCRED_RELATION_IDS:
            raise ValueError(
                f"{where}: relation {r} between a {mapping.subject_type} and a(n) {types[obj]} (not one of "
                f"DocRED's relations) is neither mapped nor ignored: add it to the docred ids of a relation of "
                f"schema {mapping.name}, or pass relations="
            )
        relation = mapping.relations.get(r)
        out.append((label, subject, obj, relation if mapping.object_types.get(relation) == types[obj] else None))
    return out


def _docred_document(
    doc: dict, where: str, mapping: RedocredSchema, window: int, skipped: Counter[str]
) -> list[Passage]:
    where = f"{where} (document {doc.get('title', '?')!r})"
    if "labels" not in doc:
        raise ValueError(f"{where}: no labels (an unlabelled file such as DocRED's test.json states no gold facts)")
    sents, entities = doc["sents"], doc["vertexSet"]
    types = docred_entity_types(doc)
    links = [  # (subject entity, object entity, canonical relation or None if ignored, evidence sentences)
        (subject, obj, relation, set(label.get("evidence") or ()))
        for label, subject, obj, relation in docred_labels(doc, where, mapping)
    ]
    annotated = sorted(set(mapping.annotated))
    out = []
    for start in range(max(1, len(sents) - window + 1)):
        inside = set(range(start, min(start + window, len(sents))))
        mentioned = {  # entity -> its mentions in the window, in text order
            e: sorted((m for m in mentions if m["sent_id"] in inside), key=lambda m: (m["sent_id"], m["pos"][0]))
            for e, mentions in enumerate(entities)
        }
        mentioned = {e: ms for e, ms in mentioned.items() if ms}
        if not mapping.names_a_pair([types[e] for e in mentioned]):
            continue
        text = detokenize(" ".join(token for s in sorted(inside) for token in sents[s]))
        facts, skip = _window_facts(links, mentioned, inside, sents, text)
        if skip:
            skipped[skip] += 1
        else:
            out.append((text, _one_way(facts, mapping.symmetric), annotated))
    return out


def _window_facts(
    links: list[tuple[int, int, str | None, set[int]]],
    mentioned: dict[int, list[dict]],
    inside: set[int],
    sents: list[list[str]],
    text: str,
) -> tuple[list[Triplet], str | None]:
    """The window's gold facts, or why the window is skipped."""
    facts = []
    for subject, obj, relation, evidence in links:
        both = subject in mentioned and obj in mentioned
        if not both and not evidence & inside:
            continue  # a fact of other sentences
        if relation is None:
            return [], "window stating an ignored relation"
        if not both or not evidence <= inside:
            return [], "window holding part of a fact's evidence"
        names = [_mention_name(sents, mentioned[e], text) for e in (subject, obj)]
        if None in names:
            return [], "window whose names are not in its detokenised text"
        facts.append(Triplet(names[0], relation, names[1]))
    return facts, None


def _mention_name(sents: list[list[str]], mentions: list[dict], text: str) -> str | None:
    """The entity's first mention in the window as the detokenised text holds it (a later mention when
    detokenising the mention alone gives another string)."""
    for m in mentions:
        name = detokenize(" ".join(sents[m["sent_id"]][m["pos"][0] : m["pos"][1]]))
        if name and name in text:
            return name
    return None


def _conll04_sentence(row: dict, where: str, relations: dict[str, str], skipped: Counter[str]) -> list[Passage]:
    tokens, entities = row["tokens"], row["entities"]
    types = [e["type"] for e in entities]
    if not {"Peop", "Org"} <= set(types):
        return []
    text = detokenize(" ".join(tokens))
    triplets = []
    for rel in row["relations"]:
        ends = {types[rel["head"]]: rel["head"], types[rel["tail"]]: rel["tail"]}
        if set(ends) != {"Peop", "Org"}:
            continue
        relation = relations.get(rel["type"])
        if relation is None:
            raise ValueError(
                f"{where}: unmapped relation {rel['type']} between a Peop and an Org "
                f"(data_gen.real.CONLL04_RELATIONS maps {', '.join(CONLL04_RELATIONS)}; or pass relations=)"
            )
        person, org = (
            detokenize(" ".join(tokens[entities[ends[k]]["start"] : entities[ends[k]]["end"]])) for k in ("Peop", "Org")
        )
        if person not in text or org not in text:
            skipped["sentence whose names are not found in its detokenised text"] += 1
            return []
        triplets.append(Triplet(person, relation, org))
    return [(text, triplets, sorted(set(relations.values())))]


def _jsonl_row(row: dict, where: str, relations: dict[str, str], schema: str) -> list[Passage]:
    """`relations`: normalised relation name -> canonical (the schema's table's names and aliases, and the caller's)."""
    from memory_runtime.memory.terms import normalize_term

    text = row["text"]
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'{where}: "text" must be a non-empty string')

    def canonical(name) -> str:
        if not isinstance(name, str) or normalize_term(name) not in relations:
            raise ValueError(
                f"{where}: relation {name!r} is neither a relation of the {schema} relation table "
                f"(configs/schema/{schema}.yaml), an alias of one, nor a key of relations="
            )
        return relations[normalize_term(name)]

    triplets = []
    for t in row["triples"]:
        if isinstance(t, list) and len(t) == 3:
            fields = t
        elif isinstance(t, dict) and {"subject", "relation", "object"} <= set(t):
            fields = [t["subject"], t["relation"], t["object"]]
        elif isinstance(t, dict) and {"person", "relation", "organization"} <= set(t):
            fields = [t["person"], t["relation"], t["organization"]]
        else:
            raise ValueError(
                f"{where}: a triple is {{subject, relation, object}}, {{person, relation, organization}} "
                f"or [subject, relation, object], got {t!r}"
            )
        subject, obj = (f.strip() if isinstance(f, str) else "" for f in (fields[0], fields[2]))
        for name in (subject, obj):
            if not name or name.casefold() not in text.casefold():
                raise ValueError(
                    f"{where}: {name!r} does not occur in the text "
                    f"(a write the model cannot copy from the text teaches nothing)"
                )
        triplets.append(Triplet(subject, canonical(fields[1]), obj))
    annotated = row.get("annotated")
    if annotated is not None:
        annotated = sorted({canonical(name) for name in annotated})
    return [(text.strip(), triplets, annotated)]
