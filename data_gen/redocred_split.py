"""Re-DocRED's dev documents as sentences stating a shipped schema's facts, split by document into
the dev set (data/real/, measured, never trained on) and training sentences (data/real_train/).

    python3 -m data_gen.redocred_split [PATH/TO/dev_revised.json]   # default: ../shared/data/real/
    python3 -m data_gen.redocred_split --schema people-places-things   # the second schema's files

The schema's mapping (its relations' `docred` ids, read by data_gen.real_mapping.RedocredSchema.of: the shipped
person-organisation and people-places-things, or a schema file of your own) says which labels count:
those between a PER and an entity of an object type of the schema (an ORG; a LOC or another PER), the
person first. Every sentence that mentions such a pair (an entity's type
is its first mention's) is one of three things:

    positive   gold = the document's labels in a mapped relation (data_gen.real_mapping.REDOCRED_RELATIONS,
               PEOPLE_PLACES_RELATIONS) whose evidence includes the sentence and both of whose
               entities the sentence mentions, named by their first mention in it (as data/real/
               always had them);
    negative   no label of the schema's pairs touches it (neither both of its entities mentioned, nor
               the sentence among its evidence), whatever the relation: a model should write nothing;
    left out   no gold fact, but touched by a label: a mapped fact whose evidence lies elsewhere or is
               not given (the sentence may well state it), or one of whose entities it names only as
               "he" or "it"; or an ignored relation (a band "has part" its members: membership in
               other words; a place of death). Like data_gen.real_corpora's `docred` reader, which never makes
               such a window a "Nothing to store.".

Rows have the format of data/real/redocred_dev_person_org.jsonl: {title, sent_id, sentence (Re-DocRED's
tokens joined by spaces), triples: [{head, head_type, relation, relation_name, tail, tail_type}]}, the
labels' own direction (P40 child: head the parent); a negative has "triples": [].
`data_gen.real.load_redocred` reads both halves, mapped by the file's name.

The split: a document is dev when `int(sha1(normalised title).hexdigest(), 16) % 100 < 50`, or when
the current dev file holds one of its sentences: what was measured stays dev (the 66 sentences the
probe measured before this split came from 46 documents), so a rerun changes nothing. Another schema
also keeps every document of the person–organisation dev file dev: no document is dev for one schema
and training for another.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Collection, Iterable
from pathlib import Path

from data_gen.real import REDOCRED_FILE, default_real_dir, names_occur
from data_gen.real_corpora import detokenize, docred_entity_types, docred_labels, read_jsonl_rows, read_rows
from data_gen.real_mapping import DOCRED_IGNORED, PERSON_ORG, REDOCRED_SCHEMAS, RedocredSchema, redocred_schema
from data_gen.real_records import normalise_text
from memory_runtime.jsonl import write_jsonl
from memory_runtime.shipped import shipped

REPO = Path(__file__).resolve().parents[1]  # a checkout: this script rewrites the shipped files from its source
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "real" / "redocred_dev_revised.json"
TRAIN_FILE = shipped("data", "real_train", PERSON_ORG.train_file)
DEV_PERCENT = 50
# Wikidata's names of the shipped schemas' relation ids, for the rows' relation_name (the mapping onto
# the memory's relations is each schema's `docred`, and nothing else; another id is named by
# DOCRED_IGNORED's label, else by itself).
RELATION_NAMES = {
    "P108": "employer",
    "P112": "founded by",
    "P463": "member of",
    "P102": "member of political party",
    "P54": "member of sports team",
    "P488": "chairperson",
    "P169": "chief executive officer",
    "P19": "place of birth",
    "P551": "residence",
    "P27": "country of citizenship",
    "P26": "spouse",
    "P3373": "sibling",
    "P22": "father",
    "P25": "mother",
    "P40": "child",
}


def person_org_sentences(doc: dict, where: str) -> list[dict]:
    """The document's person–organisation positives and negatives (`schema_sentences` of PERSON_ORG)."""
    return schema_sentences(doc, where, PERSON_ORG)


def schema_sentences(doc: dict, where: str, mapping: RedocredSchema) -> list[dict]:
    """The document's positive and negative sentences for a schema as rows, in sentence order (see the module)."""
    types = docred_entity_types(doc)
    labels = docred_labels(doc, where, mapping)
    rows = []
    for s, tokens in enumerate(doc["sents"]):
        first = {}  # entity -> its first mention in the sentence
        for e, mentions in enumerate(doc["vertexSet"]):
            here = sorted((m for m in mentions if m["sent_id"] == s), key=lambda m: m["pos"][0])
            if here:
                first[e] = here[0]
        if not mapping.names_a_pair([types[e] for e in first]):
            continue
        sentence = " ".join(tokens)
        triples, touched = [], False
        for label, subject, obj, relation in labels:
            both = subject in first and obj in first
            in_evidence = s in (label.get("evidence") or ())
            names = [first[e]["name"] for e in (subject, obj)] if both else []
            if relation and both and in_evidence and names_occur(detokenize(sentence), map(detokenize, names)):
                h, t = label["h"], label["t"]
                triples.append(
                    {
                        "head": first[h]["name"],
                        "head_type": types[h],
                        "relation": label["r"],
                        "relation_name": RELATION_NAMES.get(label["r"]) or DOCRED_IGNORED.get(label["r"], label["r"]),
                        "tail": first[t]["name"],
                        "tail_type": types[t],
                    }
                )
            elif both or in_evidence:
                touched = True
        if triples or not touched:
            rows.append({"title": doc["title"], "sent_id": s, "sentence": sentence, "triples": triples})
    return rows


def is_dev_document(title: str, measured: Collection[str] = frozenset()) -> bool:
    """Dev by the hash of the normalised title, or because one of its sentences was measured."""
    return title in measured or int(hashlib.sha1(normalise_text(title).encode()).hexdigest(), 16) % 100 < DEV_PERCENT


def measured_titles(dev_file: str | Path | None = None) -> set[str]:
    """The documents of the sentences in the dev file (default: data/real/'s): these stay dev."""
    path = Path(dev_file) if dev_file else default_real_dir() / REDOCRED_FILE
    return {row["title"] for _, row in read_jsonl_rows(path)}


def stays_dev(mapping: RedocredSchema, dev_file: str | Path) -> set[str]:
    """The documents dev whatever their hash: those of the schema's dev file (when there is one yet)
    and, for another schema, those of the person–organisation dev file (data/real/'s)."""
    titles = measured_titles(dev_file) if mapping is PERSON_ORG or Path(dev_file).is_file() else set()
    return titles if mapping is PERSON_ORG else titles | measured_titles()


def split_documents(
    source: str | Path, measured: Iterable[str], mapping: RedocredSchema = PERSON_ORG
) -> tuple[list[dict], list[dict]]:
    """(dev rows, training rows) of every document of `source` (Re-DocRED's JSON array, or JSONL)."""
    measured = set(measured)
    dev, train = [], []
    for where, doc in read_rows(Path(source)):
        rows = schema_sentences(doc, f"{where} (document {doc['title']!r})", mapping)
        (dev if is_dev_document(doc["title"], measured) else train).extend(rows)
    return dev, train


def stats(rows: list[dict]) -> dict[str, int]:
    """Counts for a README: documents, sentences, positives, negatives, triplets (rows' triples)."""
    return {
        "documents": len({r["title"] for r in rows}),
        "sentences": len(rows),
        "positives": sum(1 for r in rows if r["triples"]),
        "negatives": sum(1 for r in rows if not r["triples"]),
        "triplets": sum(len(r["triples"]) for r in rows),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default=str(DEFAULT_SOURCE), help="Re-DocRED's dev_revised.json")
    parser.add_argument(
        "--schema",
        default=PERSON_ORG.name,
        help=f"whose facts: {', '.join(REDOCRED_SCHEMAS)}, or a schema file whose relations have docred ids",
    )
    parser.add_argument("--dev", help="the dev file (read, then written; default: the schema's in data/real/)")
    parser.add_argument("--train", help="the training file (written; default: the schema's in data/real_train/)")
    args = parser.parse_args(argv)
    try:
        mapping = redocred_schema(schema=args.schema)
    except ValueError as err:
        parser.error(str(err))
    dev_file = Path(args.dev) if args.dev else default_real_dir() / mapping.dev_file
    train_file = Path(args.train) if args.train else shipped("data", "real_train", mapping.train_file)
    dev, train = split_documents(args.source, stays_dev(mapping, dev_file), mapping)
    write_jsonl(dev_file, dev)
    write_jsonl(train_file, train)
    print(json.dumps({"dev": stats(dev), "train": stats(train)}))


if __name__ == "__main__":
    main()
