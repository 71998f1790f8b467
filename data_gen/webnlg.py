"""WebNLG's crowd-written sentences as turns that state several facts at once, with relations in words.

    python3 -m data_gen.webnlg [PATH/TO/webnlg_v2_train.json]   # default: ../shared/data/real/

A conversation's turn often says several things in one long sentence ("This necklace is a gift from my grandma
in my home country, Sweden"); the conversational data's own turns say one fact a sentence. WebNLG (Gardent et
al., 2017) has 34,352 human-written texts, each stating exactly a set of 1-7 DBpedia triples. This module keeps
the texts a writer can copy every fact of: each triple's subject and object appear in the text as written
(underscores as spaces, case aside), 1-4 triples a text (a turn's most). A fact is written as the text has it:

    subject, object   the text's own span (its case), DBpedia's "_(disambiguation)" and quotes dropped
    order             as the text says them (by where each object is)
    relation          the property in words: "birthPlace" -> "birth place", "associatedBand/associatedMusicalArtist"
                      -> "associated band", "elevationAboveTheSeaLevel_(in_metres)" -> "elevation above the sea level"

Each kept text is a row of data/real_train/webnlg_facts.jsonl: {eid (category/eid), text, triples: [[subject,
relation, object], ...]}. `split_of` gives an entry's split (by its eid, ~80/10/10), so validation and test
turns never share an entry with training ones. WebNLG's licence is CC BY-NC-SA 4.0; the derived file is shared
under it (data/real_train/README.md).
"""

from __future__ import annotations

import argparse
import json
import re
import zlib
from functools import lru_cache
from pathlib import Path

DEFAULT_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "webnlg_v2_train.json"
FACTS_FILE = Path(__file__).resolve().parents[1] / "data" / "real_train" / "webnlg_facts.jsonl"
MAX_TRIPLES = 4  # data_gen.conversations.MAX_FACTS_A_TURN: a turn's most


def relation_words(prop: str) -> str:
    """A DBpedia property as words: its first alternative, without a parenthesised unit, camelCase split."""
    prop = re.sub(r"_?\(.*?\)", "", prop.split("/")[0]).replace("_", " ")
    return " ".join(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", prop).lower().split())


def entity_text(entity: str) -> str:
    """A DBpedia entity or literal as a sentence would say it (quotes, underscores, a disambiguation dropped)."""
    text = entity.strip().strip('"').replace("_", " ")
    return " ".join(re.sub(r"\s*\([^)]*\)$", "", text).split())


def _span(text: str, phrase: str, outside: str | None = None) -> str | None:
    """`phrase` as `text` writes it (its case), when it occurs there as words (outside the span `outside`:
    an object named only within its subject, "Aarhus" in "Aarhus Airport", is not said)."""
    if not phrase:
        return None
    searched = text
    if outside:
        searched = re.sub(re.escape(outside), lambda m: "\0" * len(m.group(0)), text)
    found = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", searched, re.IGNORECASE)
    return text[found.start() : found.end()] if found else None


def text_facts(text: str, triples: list[list[str]]) -> list[list[str]] | None:
    """The triples as `text` states them (its spans, the relations in words), or None when any subject or
    object is not in it as written (a fact the writer could not copy)."""
    out = []
    for subject, prop, obj in triples:
        s = _span(text, entity_text(subject))
        o = _span(text, entity_text(obj), outside=s)
        relation = relation_words(prop)
        if s is None or o is None or not relation or s.lower() == o.lower():
            return None
        out.append([s, relation, o])
    at = text.lower()
    return sorted(out, key=lambda t: (at.find(t[2].lower()), at.find(t[0].lower())))  # in the order said


def build(source: Path) -> list[dict]:
    """The rows of FACTS_FILE from WebNLG's training release (its JSON: category, eid, triples, texts)."""
    rows = []
    for entry in json.loads(source.read_text(encoding="utf-8")):
        if not 1 <= len(entry["triples"]) <= MAX_TRIPLES:
            continue
        eid = f"{entry['category']}/{entry['eid']}"
        for text in dict.fromkeys(" ".join(t.split()) for t in entry["texts"]):
            facts = text_facts(text, entry["triples"])
            if facts is not None:
                rows.append({"eid": eid, "text": text, "triples": facts})
    return rows


def split_of(eid: str) -> str:
    """An entry's split: ~10 % validation, ~10 % test, the rest train (by a hash of its eid)."""
    bucket = zlib.crc32(eid.encode("utf-8")) % 10
    return "validation" if bucket == 0 else "test" if bucket == 1 else "train"


@lru_cache(maxsize=2)
def _rows(path: str) -> tuple[tuple[str, str, tuple[tuple[str, str, str], ...]], ...]:
    """(eid, text, triples) of every row of the file, read once for all splits; ValueError naming a bad line."""
    out = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                eid, text, triples = row["eid"], row["text"], tuple(tuple(t) for t in row["triples"])
                if not isinstance(text, str) or not triples or any(len(t) != 3 for t in triples):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                raise ValueError(
                    f"{path}: line {number} is not a WebNLG fact row ({{eid, text, triples: [[s, r, o], ...]}})"
                ) from None
            out.append((eid, text, triples))
    return tuple(out)


@lru_cache(maxsize=8)
def load_facts(path: str, split: str) -> tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...]:
    """(text, triples) of the file's rows whose entry is in `split` (train / validation / test)."""
    return tuple((text, triples) for eid, text, triples in _rows(path) if split_of(eid) == split)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE, help="webnlg_v2_train.json")
    parser.add_argument("--out", type=Path, default=FACTS_FILE)
    args = parser.parse_args(argv)
    rows = build(args.source)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    by_split = {s: sum(split_of(r["eid"]) == s for r in rows) for s in ("train", "validation", "test")}
    print(f"{args.out}: {len(rows)} texts of {len({r['eid'] for r in rows})} entries; {by_split}")


if __name__ == "__main__":
    main()
