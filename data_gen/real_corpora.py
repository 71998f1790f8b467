"""Readers of annotated corpora: each format's rows or documents as passages (text, gold triplets,
the relations checked for), mapped by data_gen/real_mapping.py. Turning passages into records is
data_gen/real.py's job; `load_corpus` there documents the formats and what each reader skips.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import partial
from pathlib import Path

from data_gen.real_mapping import (
    CONLL04_RELATIONS,
    DOCRED_RELATION_IDS,
    KNOWLEDGENET_ANNOTATED,
    KNOWLEDGENET_PROPERTIES,
    KNOWLEDGENET_RELATIONS,
    PERSON_ORG,
    RedocredSchema,
    redocred_schema,
)
from memory_runtime.jsonl import read_dicts
from memory_runtime.protocol import Triplet

CORPUS_FORMATS = ("redocred_sentences", "knowledgenet", "docred", "conll04", "jsonl")

# A fact whose person or organisation is only a pronoun names no one a memory could store.
PRONOUNS = frozenset(
    "i me my mine we us our ours you your yours he him his she her hers they them their theirs "
    "it its who whom whose this that".split()
)

Passage = tuple[str, list[Triplet], list[str] | None]  # text, gold triplets, annotated relations (None = all)


class RealDataMissing(FileNotFoundError):
    """The real-text directory (or one of its files) is not there."""


def detokenize(text: str) -> str:
    """Undo PTB-style tokenisation: 'Party ( Labour ) , 1939 .' -> 'Party (Labour), 1939.'"""
    text = re.sub(r" ([.,;:!?%)\]])", r"\1", text)
    text = re.sub(r"([(\[$]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'m|'ll|'d)\b", r"\1", text)
    text = re.sub(r'" (.*?) "', r'"\1"', text)
    text = re.sub(r"(\w) - (\w)", r"\1-\2", text)
    return text.strip()


def read_jsonl_rows(path: Path) -> list[tuple[int, dict]]:
    """(line, row) of a real-text JSONL file; RealDataMissing when it is not there."""
    if not path.is_file():
        raise RealDataMissing(f"real-text file {path} is missing (see {path.parent / 'README.md'})")
    return read_dicts(path, "a real-text passage")


def read_corpus(
    path: Path,
    format: str = "auto",
    *,
    relations: dict[str, str] | None = None,
    window: int = 1,
    schema: str | None = None,
) -> tuple[str, list[Passage], Counter[str]]:
    """The format (told apart when "auto"), the passages of an annotated corpus file in file order, and
    what was skipped, counted by why (data_gen.real.load_corpus says what each format holds)."""
    if format != "auto" and format not in CORPUS_FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; one of auto, {', '.join(CORPUS_FORMATS)}")
    if window < 1:
        raise ValueError(f"window must be at least 1 sentence, got {window}")
    rows = read_rows(path)
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
    return format, passages, skipped


def detect_format(path: str | Path) -> str:
    """The corpus format of a file, as load_corpus(format="auto") tells it."""
    return _detect_format(read_rows(Path(path)))


def read_rows(path: Path) -> list[tuple[str, dict]]:
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


def redocred_row(row: dict, where: str, mapping: RedocredSchema = PERSON_ORG, clean=detokenize) -> Passage:
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
    return [redocred_row(row, where, mapping)]


def knowledgenet_row(row: dict, where: str) -> Passage:
    """A derived KnowledgeNet row {text, annotated, triples: [{person, relation, organization}]}."""
    triplets = []
    for t in row["triples"]:
        relation = KNOWLEDGENET_RELATIONS.get(t["relation"])
        if relation is None:
            raise ValueError(
                f"{where}: unmapped relation {t['relation']!r}; add it to data_gen.real_mapping.KNOWLEDGENET_RELATIONS"
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
        return [knowledgenet_row(row, where)]
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
                f"(data_gen.real_mapping.CONLL04_RELATIONS maps {', '.join(CONLL04_RELATIONS)}; or pass relations=)"
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
