"""`memlm memory migrate SRC DST`: a memory copied between SQLite and PostgreSQL, then verified.

Every row is copied, history included, with its id (so `superseded_by` still points at the right
fact), in one transaction on DST: a failed copy leaves DST as it was. DST's id counter starts where
SRC's stands, so an id SRC gave to a fact since purged is not given out again. DST must be empty, so
nothing already stored there is overwritten or mixed in. The copy is then verified: the row count
of every namespace, and every row compared field by field, in id order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from memory_runtime.memory.database import Database, redacted
from memory_runtime.memory.location import open_database
from memory_runtime.progress import Advance

_ROW = (
    "id, namespace, subject, relation, object, subject_norm, relation_norm, object_norm,"
    " valid_from, valid_to, ended_by, superseded_by, source"
)
PAGE = 10_000


@dataclass(frozen=True)
class Migration:
    rows: int
    namespaces: int
    seconds: float


def _pages(db: Database) -> Iterator[list[tuple]]:
    last = 0
    while True:
        rows = db.rows(f"SELECT {_ROW} FROM triplets WHERE id > ? ORDER BY id LIMIT ?", (last, PAGE))
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _counts(db: Database) -> dict[str, int]:
    return dict(db.rows("SELECT namespace, COUNT(*) FROM triplets GROUP BY namespace ORDER BY namespace"))


def migrate(src: str, dst: str, progress: Advance | None = None) -> Migration:
    """Copy the memory at `src` into the empty memory at `dst` (either an SQLite file or a
    postgresql:// URL), then verify it; ValueError when DST is not empty or the copy differs."""
    import time

    if src == dst:
        raise ValueError("SRC and DST are the same memory")
    start = time.perf_counter()
    source, target = open_database(src), open_database(dst)
    try:
        if target.row("SELECT COUNT(*) FROM triplets")[0]:
            raise ValueError(f"{redacted(dst)} already holds facts: migrate into an empty memory (nothing is mixed in)")
        placeholders = ", ".join("?" * len(_ROW.split(", ")))
        with target.transaction("memlm migrate") as cur:
            for rows in _pages(source):
                cur.many(f"INSERT INTO triplets ({_ROW}) VALUES ({placeholders})", rows)
                if progress is not None:
                    progress(len(rows))
            target.reserve_ids(cur, source.last_id())  # the next fact's id follows every id SRC gave out
        counts = _counts(source)
        if _counts(target) != counts:
            raise ValueError("verification failed: the row counts per namespace differ")
        for a, b in zip(_pages(source), _pages(target), strict=True):
            if a != b:
                raise ValueError(f"verification failed: rows {a[0][0]}..{a[-1][0]} differ")
        return Migration(rows=sum(counts.values()), namespaces=len(counts), seconds=time.perf_counter() - start)
    finally:
        source.close()
        target.close()
