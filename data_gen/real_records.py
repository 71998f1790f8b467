"""Real annotated text as training records: the language people write facts in, not our templates.

The corpora of the data config's `real.sources` (read by data_gen/real.py: KnowledgeNet, DocRED /
Re-DocRED, CoNLL04, a user's own JSONL) give passages with their gold person–organisation facts,
or passages that state none (real hard negatives). Builder.real (data_gen/examples.py) turns one
into a record:

    write      the passage | *its write calls | *" Noted."       (or *"Nothing to store.")
    read       the passage | *writes | *" Noted." | a question about it | *read | results | *answer
               (`real.reads` of the passages with facts; every read shape the synthetic data has,
               on the passage's own names and relations)

Dev text is never trained on: a passage whose normalised text contains a dev passage of
data/real/ (or is contained in one) is left out, and the dataset card says how many were.

Writes copy names from the text (memory_runtime/generation/field_copy.py), so a gold fact about someone the
passage names only as "he" (KnowledgeNet has them) is not trained as a write: as in the generated
data, a fact about a pronoun is a fact nothing can store. A passage left with no named fact is a
negative. Names lose the quotes and the possessive apostrophe an annotation kept ('"Bellevue
Sanatorium' -> 'Bellevue Sanatorium').
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from data_gen.data_config import DataConfig, RealSource
from memory_runtime.records import Record

REAL_TRAIN_SPLIT = "train"


def normalise_text(text: str) -> str:
    """Lower case, words only, single spaces: what dev-overlap checks compare."""
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def dev_texts(path: str | Path | None = None) -> list[str]:
    """The normalised passages of the dev set (data/real/, or `path`): the text never trained on."""
    from data_gen.real import load_real

    return [normalise_text(r.segments[0].text) for r in load_real(path)]


def overlaps(text: str, dev: list[str]) -> bool:
    """Whether a passage contains a dev passage, or is contained in one."""
    t = normalise_text(text)
    return any(d in t or t in d for d in dev)


_EDGE = "\"'“”‘’ "


def named_facts_only(record: Record, config: DataConfig) -> Record:
    """`record` with the facts whose names its passage mentions (names without stray quotes)."""
    from data_gen.real import is_mentioned, passage_record

    facts = [tuple(n.strip(_EDGE) if i != 1 else n for i, n in enumerate(t)) for t in record.gold_triplets]
    named = [t for t in facts if is_mentioned(record, t)]
    if named == [tuple(t) for t in record.gold_triplets]:
        return record
    text = record.segments[0].text
    return passage_record(
        record.id, record.source, text, named, record.annotated_relations, config.replies, record.split
    )


@dataclass
class RealPassages:
    """The passages of every real source, loaded once; drawn by source weight."""

    by_source: list[tuple[RealSource, list[Record]]]
    dropped: dict[str, int] = field(default_factory=dict)  # source path -> passages left out (dev overlap)

    def __post_init__(self) -> None:
        self._stating = [(s, [r for r in rs if r.gold_triplets]) for s, rs in self.by_source]

    @classmethod
    def load(cls, config: DataConfig, dev: list[str] | None = None) -> RealPassages:
        from data_gen.real import load_corpus

        dev = dev_texts() if dev is None else dev
        loaded, dropped = [], {}
        for source in config.real.sources:
            records = load_corpus(
                source.path,
                source.format,
                relations=source.relations or None,
                window=source.window,
                replies=config.replies,
                split=REAL_TRAIN_SPLIT,
            )
            kept = [named_facts_only(r, config) for r in records if not overlaps(r.segments[0].text, dev)]
            dropped[source.path] = len(records) - len(kept)
            if not kept:
                raise ValueError(f"real.sources: {source.path} has no passage to train on (all overlap dev text)")
            loaded.append((source, kept))
        return cls(loaded, dropped)

    def draw(self, rng: random.Random, with_facts: bool = False) -> Record:
        pools = [(s, rs) for s, rs in (self._stating if with_facts else self.by_source) if rs]
        if not pools:
            raise ValueError("real.sources: no passage states a fact")
        _, records = rng.choices(pools, weights=[s.weight for s, _ in pools])[0]
        return rng.choice(records)

    @property
    def counts(self) -> dict[str, int]:
        return {source.path: len(records) for source, records in self.by_source}
