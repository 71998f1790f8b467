"""Fuzzy term matching: datasketch MinHash-LSH over character 3-gram shingles.

One `FuzzyIndex` holds the distinct terms of one field in one namespace. A query term is
looked up in the LSH, the candidates are pre-ranked by MinHash agreement (a numpy compare on
their signatures) and the best few are re-ranked by exact Jaccard of their shingle sets; the
winner is accepted only above `FuzzyConfig.threshold`.

Why compute signatures ourselves: `MinHash.update_batch` hashes one term at a time in
Python, which caps ingest far below 20k terms/s. `signatures()` computes, in bulk with numpy,
exactly the values datasketch's "affine32" MinHash gives with `hashfunc=shingle_hash`
(tests/memory_runtime/memory/test_fuzzy.py checks this), and the index itself is datasketch's
`MinHashLSH`, fed `LeanMinHash` objects.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH
from pydantic import Field, model_validator

from memory_runtime.yaml_config import Strict

_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier
_PAD = "  "  # two pad characters: word edges weigh more, so one-typo names score higher


class FuzzyConfig(Strict):
    """How tolerant the fallback is, and what the LSH costs.

    `threshold` is the exact-Jaccard score a candidate needs to be accepted. `bands` x `rows`
    are the LSH parameters (datasketch `params=(b, r)`): a pair of Jaccard J becomes a
    candidate with probability 1-(1-J^r)^b. One-typo names score J ~ 0.6-0.75, names that
    merely share a first name ~ 0.35; r=3, b=14 catches the first 97-99.8% of the time while
    keeping the second (and the background of names sharing a few trigrams) out of the
    candidates; r=2 would let thousands of them in at a million terms. Memory grows with b
    (about 70 bytes per term per band, the bulk of an index): at a million terms b=14 keeps the
    process under 2 GB where b=16 needs 2.1 GB, for a recall of 0.994 instead of 0.997
    (`memlm bench memory --triplets 1000000`). `bucket_bits` compresses each band key to that many
    bits (datasketch's `hashfunc`): shared buckets cost far less than one Python set per key,
    and the few random candidates they add are removed by the signature pre-rank.
    """

    threshold: float = Field(0.5, gt=0.0, le=1.0)
    num_perm: int = Field(42, ge=4, le=512)
    bands: int = Field(14, ge=2)
    rows: int = Field(3, ge=1)
    bucket_bits: int = Field(16, ge=8, le=24)
    rerank: int = Field(16, ge=1, description="candidates re-ranked by exact Jaccard")
    seed: int = 1

    @model_validator(mode="after")
    def _bands_fit(self) -> FuzzyConfig:
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands*rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")
        return self


@dataclass(frozen=True)
class FuzzyMatch:
    query: str  # the normalised term that was asked for
    term: str  # the stored normalised term it was matched to
    score: float  # exact Jaccard of their 3-gram shingle sets


def shingles(term: str) -> set[str]:
    """Character 3-grams of the term padded with two spaces on each side."""
    padded = _PAD + term + _PAD
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def shingle_hash(shingle: str) -> int:
    """32-bit hash of a 3-character shingle (the `hashfunc` given to datasketch's MinHash).

    The three code points (21 bits each) are packed into one integer and Fibonacci-hashed;
    `_shingle_hashes` computes the same values vectorised.
    """
    c0, c1, c2 = (ord(ch) for ch in shingle)
    x = (c0 << 42) | (c1 << 21) | c2
    return ((x * int(_MUL)) & 0xFFFFFFFFFFFFFFFF) >> 32


def _fmix32(h: np.ndarray) -> np.ndarray:
    # datasketch's affine32 pre-mix (MurmurHash3 finalizer), element-wise on uint32.
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


@functools.cache
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return a.astype(np.uint32), b.astype(np.uint32)


def signatures(terms: Sequence[str], num_perm: int, seed: int = 1, chunk: int = 8192) -> np.ndarray:
    """MinHash signatures (len(terms) x num_perm, uint32) of the terms' shingle sets, in bulk."""
    a, b = _permutations(num_perm, seed)
    out = np.empty((len(terms), num_perm), dtype=np.uint32)
    for lo in range(0, len(terms), chunk):
        batch = terms[lo : lo + chunk]
        padded = [_PAD + t + _PAD for t in batch]
        lengths = np.fromiter((len(p) for p in padded), dtype=np.int64, count=len(padded))
        codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        packed = (codes[:-2] << np.uint64(42)) | (codes[1:-1] << np.uint64(21)) | codes[2:]
        # A shingle starting at position p belongs to its term if p+2 is inside the same term.
        ends = np.cumsum(lengths)
        starts = ends - lengths
        counts = lengths - 2
        keep = np.repeat(starts, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        hashed = ((packed[keep] * _MUL) >> np.uint64(32)).astype(np.uint32)
        permuted = _fmix32(hashed)[:, None] * a[None, :] + b[None, :]
        out[lo : lo + len(batch)] = np.minimum.reduceat(permuted, np.cumsum(counts) - counts, axis=0)
    return out


@functools.cache
def _bucket_hash(bits: int):
    # Return shared int objects: the LSH keeps one bucket id per band per key, and a fresh
    # int for each would cost 28 bytes apiece. One function (and one list of ids) per width for every
    # index of the process: a list made per index cost 2.5 MB each (256 resident indexes: 640 MB).
    mask = (1 << bits) - 1
    ids = list(range(1 << bits))

    def bucket(band: bytes) -> int:
        return ids[zlib.crc32(band) & mask]

    return bucket


class FuzzyIndex:
    """The distinct terms of one (namespace, field), searchable by approximate Jaccard."""

    def __init__(self, config: FuzzyConfig | None = None) -> None:
        self.config = config or FuzzyConfig()
        c = self.config
        self._lsh = MinHashLSH(num_perm=c.num_perm, params=(c.bands, c.rows), hashfunc=_bucket_hash(c.bucket_bits))
        self._ids: dict[str, int] = {}
        self._terms: list[str | None] = []
        self._free: list[int] = []
        self._sigs = np.empty((0, c.num_perm), dtype=np.uint32)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, term: str) -> bool:
        return term in self._ids

    def add(self, terms: Iterable[str]) -> None:
        """Index new terms (already-indexed ones are skipped); one numpy pass for the batch."""
        new = list(dict.fromkeys(t for t in terms if t not in self._ids))
        if not new:
            return
        c = self.config
        sigs = signatures(new, c.num_perm, c.seed)
        reused = [self._free.pop() for _ in range(min(len(self._free), len(new)))]
        keys = reused + list(range(len(self._terms), len(self._terms) + len(new) - len(reused)))
        self._terms.extend([None] * (len(new) - len(reused)))
        if not len(self._sigs):  # a build from SQLite: adopt the array, no copy
            self._sigs = sigs
        else:
            if len(self._terms) > len(self._sigs):
                # Grow in place by a quarter (realloc: no second copy alive, no doubling's slack,
                # which at a million terms would be 200 MB). No view of _sigs outlives a call.
                rows = max(len(self._terms), len(self._sigs) * 5 // 4)
                self._sigs.resize((rows, c.num_perm), refcheck=False)
            self._sigs[keys] = sigs
        for key, term, sig in zip(keys, new, sigs):
            self._terms[key] = term
            self._ids[term] = key
            self._lsh.insert(key, LeanMinHash(seed=c.seed, hashvalues=sig, scheme="affine32"), check_duplication=False)

    def remove(self, term: str) -> None:
        key = self._ids.pop(term, None)
        if key is None:
            return
        self._lsh.remove(key)
        self._terms[key] = None
        self._free.append(key)

    def candidates(self, term: str) -> list[str]:
        """The LSH candidates of a term, before any re-ranking (for diagnostics and benchmarks)."""
        keys, _ = self._lookup(term)
        return [self._terms[k] for k in keys.tolist()]

    def terms_and_signatures(self) -> tuple[list[str], np.ndarray]:
        """Every indexed term and its signature row (what a brute-force scan would compare)."""
        keys = np.fromiter(self._ids.values(), dtype=np.int64, count=len(self._ids))
        return list(self._ids), self._sigs[keys]

    def _lookup(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        c = self.config
        sig = signatures([term], c.num_perm, c.seed)[0]
        keys = self._lsh.query(LeanMinHash(seed=c.seed, hashvalues=sig, scheme="affine32")) if self._ids else []
        return np.fromiter(keys, dtype=np.int64, count=len(keys)), sig

    def search(self, term: str) -> FuzzyMatch | None:
        """The stored term most similar to `term`, if its Jaccard reaches the threshold."""
        c = self.config
        keys, sig = self._lookup(term)
        if not len(keys):
            return None
        if len(keys) > c.rerank:
            agreement = np.count_nonzero(self._sigs[keys] == sig, axis=1)
            keys = keys[np.argpartition(-agreement, c.rerank)[: c.rerank]]
        query_shingles = shingles(term)
        scored = [(jaccard(query_shingles, shingles(self._terms[k])), self._terms[k]) for k in keys.tolist()]
        score, best = min(scored, key=lambda st: (-st[0], st[1]))
        if score < c.threshold:
            return None
        return FuzzyMatch(query=term, term=best, score=score)
