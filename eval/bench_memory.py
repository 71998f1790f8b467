"""`memlm bench memory`: ingest and lookup speed of the triplet memory, fuzzy vs brute force.

One run builds a synthetic world of N person-relation-organisation triplets (unique person
names from Faker's name pools of five locales), ingests it into a memory (a temporary SQLite
file, or an empty PostgreSQL database given with `--db postgresql://...`), then times exact
lookups and one-typo lookups, and the same typo lookups by two brute-force scans, side by side: a
numpy-vectorised scan of the MinHash signatures of all distinct terms (the strongest brute force)
and exact Jaccard over all terms. On PostgreSQL it also times pg_trgm as the fuzzy candidate
source (a trigram GIN index and `%` / `similarity()`), on the same typo queries, and empties the
database again at the end.
"""

from __future__ import annotations

import random
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_runtime.memory.database import redacted
from memory_runtime.memory.fuzzy import jaccard, shingles, signatures
from memory_runtime.memory.location import is_postgres
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.progress import Advance
from memory_runtime.protocol import Triplet
from memory_runtime.stats import percentile

RELATIONS = ["employed by", "manager of", "investor in", "founder of", "customer of"]
_LOCALES = ["en_US", "de_DE", "fr_FR", "es_ES", "it_IT"]
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _name_pools() -> tuple[list[str], list[str]]:
    import importlib

    first, last = set(), set()
    for locale in _LOCALES:
        provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        for pool, attr in ((first, "first_names"), (last, "last_names")):
            names = getattr(provider, attr)
            pool.update(names.keys() if isinstance(names, dict) else names)
    return sorted(first), sorted(last)


class BenchWorld:
    """`n` unique people, each with one relation to one of 2,000 organisations, spread over
    `namespaces` namespaces (person i lives in namespace i % namespaces).

    Facts are made on demand from three small integer arrays, so the benchmark process holds no
    million Python strings of its own: `peak_rss_mb` measures the store, not this script.
    """

    def __init__(self, n: int, namespaces: int, seed: int) -> None:
        rng = random.Random(seed)
        self.first, self.last = _name_pools()
        grid = len(self.first) * len(self.last)
        if n > grid // 2:
            raise ValueError(f"at most {grid // 2} unique person names are available")
        self.orgs = sorted(
            {
                f"{rng.choice(self.last)} {rng.choice(['Group', 'Holdings', 'Labs', 'Systems', 'AG', 'Inc.'])}"
                for _ in range(2000)
            }
        )
        gen = np.random.default_rng(seed)
        self.codes = gen.choice(grid, size=n, replace=False)  # (first, last) pairs, unique
        self.relation_ids = gen.integers(0, len(RELATIONS), size=n, dtype=np.uint8)
        self.org_ids = gen.integers(0, len(self.orgs), size=n, dtype=np.int32)
        self.n, self.namespaces = n, namespaces

    def person(self, i: int) -> str:
        first, last = divmod(int(self.codes[i]), len(self.last))
        return f"{self.first[first]} {self.last[last]}"

    def fact(self, i: int) -> Triplet:
        return self.person(i), RELATIONS[self.relation_ids[i]], self.orgs[self.org_ids[i]]

    def people_of(self, k: int) -> range:
        """The person ids of namespace `user{k}`."""
        return range(k, self.n, self.namespaces)


def one_typo(term: str, rng: random.Random) -> str:
    i = rng.randrange(len(term))
    op = rng.choice("sid")
    if op == "s":
        return term[:i] + rng.choice(_LETTERS) + term[i + 1 :]
    if op == "i":
        return term[:i] + rng.choice(_LETTERS) + term[i:]
    return term[:i] + term[i + 1 :]


def _ms(samples: list[float], q: float) -> float:
    return round(percentile(samples, q) * 1000, 4)


def run_memory_bench(
    triplets: int = 100_000,
    namespaces: int = 1,
    queries: int = 1000,
    exact_scan_queries: int = 10,
    seed: int = 0,
    batch: int = 10_000,
    db_dir: str | None = None,
    db: str | None = None,
    config: MemoryConfig | None = None,
    progress: Advance | None = None,
) -> dict:
    """Run the benchmark and return its figures (see the module docstring)."""
    rng = random.Random(seed + 1)
    world = BenchWorld(triplets, namespaces, seed)
    with tempfile.TemporaryDirectory(dir=db_dir) as tmp:
        path = db or str(Path(tmp) / "bench.sqlite")
        store = TripletStore(path, config)
        if store.namespaces():
            store.close()
            raise ValueError(f"{redacted(path)} already holds facts: the benchmark needs an empty memory")

        # Ingest, one transaction per batch (a bulk load); no index is resident yet: they are
        # built on a namespace's first fuzzy lookup.
        t0 = time.perf_counter()
        done = 0
        for k in range(namespaces):
            ids = world.people_of(k)
            for lo in range(0, len(ids), batch):
                items = [world.fact(i) for i in ids[lo : lo + batch]]
                store.write_many(items, namespace=f"user{k}", at=1.0)
                done += len(items)
                if progress:
                    progress(len(items))
        ingest_s = time.perf_counter() - t0

        target_ns = "user0"
        ids = world.people_of(0)
        target = [world.fact(i) for i in rng.sample(ids, min(queries, len(ids)))]
        extra = [(f"{s} Junior", r, o) for s, r, o in map(world.fact, ids[:20_000])]

        # Reopen: a server restart costs no index building.
        store.close()
        t0 = time.perf_counter()
        store = TripletStore(path, config)
        open_s = time.perf_counter() - t0

        # First fuzzy query of the namespace builds its subject index from SQLite.
        t0 = time.perf_counter()
        store.query(subject=one_typo(target[0][0], rng), namespace=target_ns)
        first_fuzzy_s = time.perf_counter() - t0
        index = store.fuzzy_index(target_ns, "subject")

        # Writes while the index is resident (kept in sync).
        t0 = time.perf_counter()
        for lo in range(0, len(extra), batch):
            store.write_many(extra[lo : lo + batch], namespace=target_ns, at=2.0)
        ingest_indexed_s = time.perf_counter() - t0

        exact_lat = []
        for i in range(len(target)):
            t0 = time.perf_counter()
            store.query(subject=target[i][0], namespace=target_ns)
            exact_lat.append(time.perf_counter() - t0)

        typos = []
        for subject, _, _ in target:
            q = normalize_term(one_typo(subject, rng))
            if q and q not in index:
                typos.append((q, normalize_term(subject), subject))

        fuzzy_lat, query_lat, in_candidates, top1 = [], [], 0, 0
        c = index.config
        for q, truth, _display in typos:
            t0 = time.perf_counter()
            match = index.search(q)
            fuzzy_lat.append(time.perf_counter() - t0)
            top1 += match is not None and match.term == truth
            t0 = time.perf_counter()
            store.query(subject=q, namespace=target_ns)
            query_lat.append(time.perf_counter() - t0)
            in_candidates += index.candidates(q).count(truth) > 0

        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the brute-force copies

        # Brute force 1: numpy scan of the signatures of all distinct terms, then the same
        # exact-Jaccard re-rank of the best few.
        all_terms, all_sigs = index.terms_and_signatures()
        scan_lat, scan_top1 = [], 0
        for q, truth, _ in typos:
            t0 = time.perf_counter()
            sig = signatures([q], c.num_perm, c.seed)[0]
            agreement = np.count_nonzero(all_sigs == sig, axis=1)
            top = np.argpartition(-agreement, c.rerank)[: c.rerank]
            qs = shingles(q)
            best = max(top.tolist(), key=lambda k: jaccard(qs, shingles(all_terms[k])))
            scan_lat.append(time.perf_counter() - t0)
            scan_top1 += all_terms[best] == truth

        # Brute force 2: exact Jaccard against every term (slow: a few queries only).
        all_shingles = [shingles(t) for t in all_terms]
        exact_scan_lat = []
        for q, _truth, _ in typos[:exact_scan_queries]:
            t0 = time.perf_counter()
            qs = shingles(q)
            max(jaccard(qs, s) for s in all_shingles)
            exact_scan_lat.append(time.perf_counter() - t0)
        del all_shingles

        trigram = _pg_trgm(store, target_ns, typos) if is_postgres(path) else {}
        fuzzy_p50 = _ms(fuzzy_lat, 50)
        result = {
            "backend": "postgresql" if is_postgres(path) else "sqlite",
            "triplets": triplets,
            "namespaces": namespaces,
            "terms_in_index": len(index),
            "typo_queries": len(typos),
            "ingest_per_s": round(triplets / ingest_s),
            "ingest_indexed_per_s": round(len(extra) / ingest_indexed_s),
            "open_s": round(open_s, 4),
            "first_fuzzy_query_s": round(first_fuzzy_s, 4),
            "exact_p50_ms": _ms(exact_lat, 50),
            "fuzzy_p50_ms": fuzzy_p50,
            "fuzzy_p99_ms": _ms(fuzzy_lat, 99),
            "query_fuzzy_p50_ms": _ms(query_lat, 50),
            "recall": round(in_candidates / len(typos), 4),
            "top1": round(top1 / len(typos), 4),
            "scan_p50_ms": _ms(scan_lat, 50),
            "scan_top1": round(scan_top1 / len(typos), 4),
            "exact_scan_p50_ms": _ms(exact_scan_lat, 50),
            "speedup_vs_scan": round(_ms(scan_lat, 50) / fuzzy_p50, 1),
            "peak_rss_mb": round(peak_rss_mb),
            "resident_indexes": len(store._fuzzy.keys()),
            **trigram,
        }
        store.close()
        if is_postgres(path):
            _empty(path)
    return result


def _pg_trgm(store: TripletStore, namespace: str, typos: list[tuple[str, str, str]]) -> dict:
    """pg_trgm as the fuzzy candidate source, on the same typo queries: index build time, latency
    and top-1 of `subject_norm % q ORDER BY similarity(subject_norm, q) DESC LIMIT 1`."""
    t0 = time.perf_counter()
    store._db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    store._db.execute(
        "CREATE INDEX IF NOT EXISTS triplets_subject_trgm ON triplets USING gin (subject_norm gin_trgm_ops)"
    )
    build_s = time.perf_counter() - t0
    lat, top1 = [], 0
    for q, truth, _ in typos:
        t0 = time.perf_counter()
        row = store._db.row(
            "SELECT subject_norm FROM triplets WHERE namespace = ? AND subject_norm % ? "
            "ORDER BY similarity(subject_norm, ?) DESC, subject_norm LIMIT 1",
            (namespace, q, q),
        )
        lat.append(time.perf_counter() - t0)
        top1 += row is not None and row[0] == truth
    store._db.execute("DROP INDEX triplets_subject_trgm")
    return {
        "trgm_index_build_s": round(build_s, 2),
        "trgm_p50_ms": _ms(lat, 50),
        "trgm_p99_ms": _ms(lat, 99),
        "trgm_top1": round(top1 / len(typos), 4),
    }


def _empty(location: str) -> None:
    from memory_runtime.memory.location import open_database

    db = open_database(location)
    try:
        with db.transaction("bench") as cur:
            cur.execute("DELETE FROM triplets")
    finally:
        db.close()
