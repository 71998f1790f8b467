"""The real-text probe: passages written by people, with gold person–organisation facts, turned
into write records so the eval can measure extraction on real text. EVAL ONLY: never train on them
(every record has split="real_eval").

Source files (data/real/ in the repository, with their licences in its README):

    redocred_dev_person_org.jsonl        Re-DocRED dev sentences: {title, sent_id, sentence,
                                         triples: [{head, head_type, relation, relation_name, tail, tail_type}]}
    knowledgenet_person_org_folds12.jsonl KnowledgeNet passages: {text, annotated: [...],
                                         triples: [{person, relation, organization}]} (148 state no fact)

Relation mapping onto the memory's canonical relations (subject = the person, object = the organisation):

    Re-DocRED P108 employer                   -> employed by
    Re-DocRED P112 founded by (ORG -> PER)    -> founder of
    Re-DocRED P463 member of                  -> member of        (added to relations.yaml)
    Re-DocRED P102 member of political party  -> member of
    Re-DocRED P488 chairperson (ORG -> PER)   -> chairperson of   (added to relations.yaml)
    KnowledgeNet "employee or member of"      -> employed by      (the synthetic relation closest to it;
                                                                   a "member of" write is scored there too)
    KnowledgeNet "founder of"                 -> founder of
    KnowledgeNet "CEO of"                     -> CEO of           (added to relations.yaml)

Which side is the person comes from Re-DocRED's head_type/tail_type. An unmapped relation is an
error (a new data file must not lose facts silently). KnowledgeNet passages are annotated for some
relations only; `annotated_relations` lists them (mapped), so a scorer can ignore writes of other
relations there; Re-DocRED gold covers all of its mapped relations.

Records follow the synthetic write conventions: user = the passage; assistant = the write calls of
the gold triplets then " Noted." (type "write"), or "Nothing to store." when the passage states no
fact (type "negative"). Re-DocRED sentences are tokenised ("Party ( Labour ) ."); by default the
passage and its entity strings are detokenised the same way ("Party (Labour).").
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from data_gen.config import RepliesConfig
from memory_runtime.jsonl import read_dicts
from memory_runtime.protocol import Triplet, render_write
from memory_runtime.records import Record, Segment

REAL_SPLIT = "real_eval"
REDOCRED_FILE = "redocred_dev_person_org.jsonl"
KNOWLEDGENET_FILE = "knowledgenet_person_org_folds12.jsonl"
ENV_VAR = "MEMLM_REAL_DIR"

REDOCRED_RELATIONS = {
    "P108": "employed by",  # employer
    "P112": "founder of",  # founded by
    "P463": "member of",  # member of
    "P102": "member of",  # member of political party
    "P488": "chairperson of",  # chairperson
}
KNOWLEDGENET_RELATIONS = {
    "employee or member of": "employed by",
    "founder of": "founder of",
    "CEO of": "CEO of",
}
# What a passage annotated for a KnowledgeNet relation was checked for, in canonical relations: its
# "employee or member of" covers membership too, so a "member of" write there is scored, not ignored.
KNOWLEDGENET_ANNOTATED = {
    "EMPLOYEE_OR_MEMBER_OF": ("employed by", "member of"),
    "FOUNDED_BY": ("founder of",),
    "CEO": ("CEO of",),
}


class RealDataMissing(FileNotFoundError):
    """The real-text directory (or one of its files) is not there."""


def default_real_dir() -> Path:
    """$MEMLM_REAL_DIR, else data/real/ of this repository (shipped with it: dev data, never trained on)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return Path(__file__).resolve().parents[1] / "data" / "real"


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


def _record(rid: str, source: str, passage: str, triplets, annotated: list[str], replies: RepliesConfig) -> Record:
    triplets = _dedupe(triplets)
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
        split=REAL_SPLIT,
        source=source,
        annotated_relations=annotated,
    )


def load_redocred(path: Path, *, detok: bool = True, replies: RepliesConfig | None = None) -> list[Record]:
    replies = replies or RepliesConfig()
    clean = detokenize if detok else (lambda s: s)
    records = []
    for i, (n, row) in enumerate(_read_jsonl(path)):
        triplets = []
        for t in row["triples"]:
            relation = REDOCRED_RELATIONS.get(t["relation"])
            if relation is None:
                raise ValueError(
                    f"{path}:{n}: unmapped relation {t['relation']} ({t['relation_name']}); "
                    f"add it to data_gen.real.REDOCRED_RELATIONS"
                )
            sides = {t["head_type"]: t["head"], t["tail_type"]: t["tail"]}
            if set(sides) != {"PER", "ORG"}:
                raise ValueError(
                    f"{path}:{n}: expected one PER and one ORG side, got {t['head_type']}/{t['tail_type']}"
                )
            triplets.append((clean(sides["PER"]), relation, clean(sides["ORG"])))
        annotated = sorted(set(REDOCRED_RELATIONS.values()))
        records.append(
            _record(f"{REAL_SPLIT}-redocred-{i:04d}", "redocred", clean(row["sentence"]), triplets, annotated, replies)
        )
    return records


def load_knowledgenet(path: Path, *, replies: RepliesConfig | None = None) -> list[Record]:
    replies = replies or RepliesConfig()
    records = []
    for i, (n, row) in enumerate(_read_jsonl(path)):
        triplets = []
        for t in row["triples"]:
            relation = KNOWLEDGENET_RELATIONS.get(t["relation"])
            if relation is None:
                raise ValueError(
                    f"{path}:{n}: unmapped relation {t['relation']!r}; add it to data_gen.real.KNOWLEDGENET_RELATIONS"
                )
            triplets.append((t["person"].strip(), relation, t["organization"].strip()))
        try:
            annotated = sorted({r for a in row["annotated"] for r in KNOWLEDGENET_ANNOTATED[a]})
        except KeyError as err:
            raise ValueError(f"{path}:{n}: unknown annotated relation {err}") from None
        records.append(
            _record(
                f"{REAL_SPLIT}-knowledgenet-{i:04d}", "knowledgenet", row["text"].strip(), triplets, annotated, replies
            )
        )
    return records


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


def load_real_file(path: str | Path, *, detok: bool = True, replies: RepliesConfig | None = None) -> list[Record]:
    """One file in either format (told apart by its first row: Re-DocRED rows have a
    "sentence", KnowledgeNet rows a "text"), or a JSONL of records as data_gen writes them."""
    path = Path(path)
    rows = _read_jsonl(path)
    if not rows:
        raise ValueError(f"{path}: no passages")
    first = rows[0][1]
    if "segments" in first:
        return [Record.model_validate(row) for _, row in rows]
    if "sentence" in first:
        return load_redocred(path, detok=detok, replies=replies)
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
    from memory_runtime.store import normalize_term

    text = normalize_term(record.segments[0].text)  # a possessive "ASEAN's" normalises to "aseans"
    return all(
        re.search(rf"(?<!\w){re.escape(normalize_term(name))}s?(?!\w)", text) for name in (triplet[0], triplet[2])
    )


def write_real_jsonl(records: list[Record], path: str | Path) -> None:
    """One record per line (the same format as the synthetic JSONL exports)."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(r.model_dump_json() + "\n" for r in records)
