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

Which corpus relation becomes which fact of a schema is data_gen/real_mapping.py; reading each
corpus's rows is data_gen/real_corpora.py.

Records follow the synthetic write conventions: user = the passage; assistant = the write calls of
the gold triplets then " Noted." (type "write"), or "Nothing to store." when the passage states no
fact (type "negative"). Re-DocRED sentences are tokenised ("Party ( Labour ) ."); by default the
passage and its entity strings are detokenised the same way ("Party (Labour).").
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from pathlib import Path

from data_gen.data_config import RepliesConfig
from data_gen.real_corpora import (
    RealDataMissing,
    detokenize,
    knowledgenet_row,
    read_corpus,
    read_jsonl_rows,
    redocred_row,
)
from data_gen.real_mapping import redocred_schema
from memory_runtime.protocol import Triplet, render_write
from memory_runtime.records import Record, Segment
from memory_runtime.shipped import shipped

logger = logging.getLogger(__name__)

REAL_SPLIT = "real_eval"
REDOCRED_FILE = "redocred_dev_person_org.jsonl"
KNOWLEDGENET_FILE = "knowledgenet_person_org_dev.jsonl"
ENV_VAR = "MEMLM_REAL_DIR"


def default_real_dir() -> Path:
    """$MEMLM_REAL_DIR, else the data/real/ memlm ships (memory_runtime.shipped: dev data, never trained on)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return shipped("data", "real")


def _dedupe(triplets: list[Triplet]) -> list[Triplet]:
    return list(dict.fromkeys(triplets))


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
            f"{REAL_SPLIT}-redocred-{i:04d}", "redocred", *redocred_row(row, f"{path}:{n}", mapping, clean), replies
        )
        for i, (n, row) in enumerate(read_jsonl_rows(path))
    ]


def load_knowledgenet(path: Path, *, replies: RepliesConfig | None = None) -> list[Record]:
    replies = replies or RepliesConfig()
    return [
        passage_record(
            f"{REAL_SPLIT}-knowledgenet-{i:04d}", "knowledgenet", *knowledgenet_row(row, f"{path}:{n}"), replies
        )
        for i, (n, row) in enumerate(read_jsonl_rows(path))
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
    rows = read_jsonl_rows(path)
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
    format, passages, skipped = read_corpus(path, format, relations=relations, window=window, schema=schema)
    if skipped:
        logger.info("%s: %d passages, skipped %s", path, len(passages), dict(skipped))
    if not passages:
        logger.warning("%s: no passage with a person and an entity of the schema checked for their facts", path)
    replies = replies or RepliesConfig()
    return [
        passage_record(f"{split}-{format}-{path.stem}-{i:05d}", format, text, triplets, annotated, replies, split=split)
        for i, (text, triplets, annotated) in enumerate(passages)
    ]


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
