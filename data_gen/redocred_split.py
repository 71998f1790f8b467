"""Re-DocRED's dev documents as person–organisation sentences, split by document into the dev set
(data/real/, measured, never trained on) and training sentences (data/real_train/).

    python3 -m data_gen.redocred_split [PATH/TO/dev_revised.json]   # default: ../shared/data/real/

Every sentence that mentions a PER and an ORG entity (an entity's type is its first mention's) is
one of three things:

    positive   gold = the document's labels in a mapped relation (data_gen.real.REDOCRED_RELATIONS)
               whose evidence includes the sentence and whose person and organisation the sentence
               mentions, named by their first mention in it (as data/real/ always had them);
    negative   no PER–ORG label touches it (neither both of its entities mentioned, nor the sentence
               among its evidence), whatever the relation: a model should write nothing;
    left out   no gold fact, but touched by a label: a mapped fact whose evidence lies elsewhere or is
               not given (the sentence may well state it), or whose person or organisation it names
               only as "he" or "it"; or a relation of DOCRED_IGNORED (a band "has part" its members:
               membership in other words). Like data_gen.real's `docred` reader, which never makes
               such a window a "Nothing to store.".

Rows have the format of data/real/redocred_dev_person_org.jsonl: {title, sent_id, sentence (Re-DocRED's
tokens joined by spaces), triples: [{head, head_type, relation, relation_name, tail, tail_type}]}, the
labels' own direction; a negative has "triples": []. `data_gen.real.load_redocred` reads both halves.

The split: a document is dev when `int(sha1(normalised title).hexdigest(), 16) % 100 < 50`, or when
the current dev file holds one of its sentences: what was measured stays dev (the 66 sentences the
probe measured before this split came from 46 documents), so a rerun changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Collection, Iterable
from pathlib import Path

from data_gen.real import (
    REDOCRED_FILE,
    _read_jsonl,
    _read_rows,
    default_real_dir,
    detokenize,
    docred_entity_types,
    docred_person_org_labels,
    names_occur,
)
from data_gen.real_records import normalise_text
from memory_runtime.shipped import shipped

REPO = Path(__file__).resolve().parents[1]  # a checkout: this script rewrites the shipped files from its source
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "real" / "redocred_dev_revised.json"
TRAIN_FILE = shipped("data", "real_train", "redocred_train_person_org.jsonl")
DEV_PERCENT = 50
# Wikidata's names of the mapped relations, for the rows' relation_name (the mapping onto the
# memory's relations is data_gen.real.REDOCRED_RELATIONS, and nothing else).
RELATION_NAMES = {
    "P108": "employer",
    "P112": "founded by",
    "P463": "member of",
    "P102": "member of political party",
    "P54": "member of sports team",
    "P488": "chairperson",
    "P169": "chief executive officer",
}


def person_org_sentences(doc: dict, where: str) -> list[dict]:
    """The document's positive and negative sentences as rows, in sentence order (see the module)."""
    types = docred_entity_types(doc)
    labels = docred_person_org_labels(doc, where)
    rows = []
    for s, tokens in enumerate(doc["sents"]):
        first = {}  # entity -> its first mention in the sentence
        for e, mentions in enumerate(doc["vertexSet"]):
            here = sorted((m for m in mentions if m["sent_id"] == s), key=lambda m: m["pos"][0])
            if here:
                first[e] = here[0]
        if not {"PER", "ORG"} <= {types[e] for e in first}:
            continue
        sentence = " ".join(tokens)
        triples, touched = [], False
        for label, person, org, relation in labels:
            both = person in first and org in first
            in_evidence = s in (label.get("evidence") or ())
            names = [first[e]["name"] for e in (person, org)] if both else []
            if relation and both and in_evidence and names_occur(detokenize(sentence), map(detokenize, names)):
                h, t = label["h"], label["t"]
                triples.append(
                    {
                        "head": first[h]["name"],
                        "head_type": types[h],
                        "relation": label["r"],
                        "relation_name": RELATION_NAMES[label["r"]],
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
    return {row["title"] for _, row in _read_jsonl(path)}


def split_documents(source: str | Path, measured: Iterable[str]) -> tuple[list[dict], list[dict]]:
    """(dev rows, training rows) of every document of `source` (Re-DocRED's JSON array, or JSONL)."""
    measured = set(measured)
    dev, train = [], []
    for where, doc in _read_rows(Path(source)):
        rows = person_org_sentences(doc, f"{where} (document {doc['title']!r})")
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


def write_rows(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default=str(DEFAULT_SOURCE), help="Re-DocRED's dev_revised.json")
    parser.add_argument(
        "--dev", default=str(default_real_dir() / REDOCRED_FILE), help="the dev file (read, then written)"
    )
    parser.add_argument("--train", default=str(TRAIN_FILE), help="the training file (written)")
    args = parser.parse_args(argv)
    dev, train = split_documents(args.source, measured_titles(args.dev))
    write_rows(dev, Path(args.dev))
    write_rows(train, Path(args.train))
    print(json.dumps({"dev": stats(dev), "train": stats(train)}))


if __name__ == "__main__":
    main()
