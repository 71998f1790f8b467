"""The world records are drawn from: people, organisations, and which split may use which.

- People: Faker full names ("first last") from the configured locales, one Faker per locale
  reseeded per split. Names are unique after the memory's normalisation (so the store never
  conflates two people) and the three splits draw from disjoint name pools.
- Organisations: the real company names shipped in companies.txt, plus optional Faker company
  names. A seeded share of them is reserved for the test split only, to measure generalisation
  to organisations never seen in training; train and validation share the rest.

Facts are not part of the world: every record (and every episode) samples a fresh memory over
these pools, so no person has a fixed fact a model could memorise instead of reading memory.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from importlib import resources

from faker import Faker

from data_gen.config import SPLITS, DataConfig
from memory_runtime.memory.store import normalize_term

_BAD_CHARS = set('{}[]<>;\\,"()')  # keep names plain: no protocol characters, no list commas


def derive_seed(*parts: object) -> int:
    """A stable 64-bit seed from the run seed and a purpose (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class Pool:
    """What one split may draw from."""

    split: str
    people: tuple[str, ...]
    orgs: tuple[str, ...]


@dataclass(frozen=True)
class World:
    pools: dict[str, Pool]
    test_only_orgs: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "people": {s: list(p.people) for s, p in self.pools.items()},
            "orgs": {s: list(p.orgs) for s, p in self.pools.items()},
            "test_only_orgs": list(self.test_only_orgs),
        }


def real_companies() -> list[str]:
    """The real company names shipped with data_gen (companies.txt)."""
    text = resources.files("data_gen").joinpath("companies.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _plain(name: str) -> bool:
    return len(name.split()) >= 2 and not (set(name) & _BAD_CHARS) and name == " ".join(name.split())


def _closed_abbreviation(name: str) -> str:
    """'... S.L.N.E' -> '... S.L.N.E.': a sentence ending with the name would otherwise make
    the gold term (no period) and the text (period) disagree, an ambiguity no model can learn."""
    last = name.rsplit(" ", 1)[-1]
    return name + "." if "." in last and not name.endswith(".") else name


def build_world(config: DataConfig) -> World:
    """People per split (disjoint), organisations (real + Faker), test-only organisations."""
    seed, wc = config.seed, config.world
    fakers = {loc: Faker(loc) for loc in wc.locales}
    taken: set[str] = set()
    people: dict[str, tuple[str, ...]] = {}
    for split in SPLITS:
        want = getattr(wc.people, split)
        rng = random.Random(derive_seed(seed, "people", split))
        for loc, fk in fakers.items():
            fk.seed_instance(derive_seed(seed, "people", split, loc))
        names: list[str] = []
        for _ in range(want * 50):
            if len(names) == want:
                break
            fk = fakers[rng.choice(wc.locales)]
            name = f"{fk.first_name()} {fk.last_name()}"
            key = normalize_term(name)
            if key in taken or not _plain(name):
                continue
            taken.add(key)
            names.append(name)
        else:
            if len(names) < want:
                raise ValueError(
                    f"world.people.{split}: could draw only {len(names)} unique names of {want} "
                    f"from locales {wc.locales}; add locales or ask for fewer people"
                )
        people[split] = tuple(names)

    orgs = real_companies() if wc.companies.real else []
    if wc.companies.faker:
        rng = random.Random(derive_seed(seed, "companies"))
        for loc, fk in fakers.items():
            fk.seed_instance(derive_seed(seed, "companies", loc))
        extra: list[str] = []
        for _ in range(wc.companies.faker * 50):
            if len(extra) == wc.companies.faker:
                break
            name = _closed_abbreviation(fakers[rng.choice(wc.locales)].company())
            if _plain(name):
                extra.append(name)
        orgs += extra
    unique, seen = [], set()
    for org in orgs:
        key = normalize_term(org)
        if key and key not in seen:
            seen.add(key)
            unique.append(org)
    if len(unique) < 10:
        raise ValueError(f"world.companies: only {len(unique)} organisations; need at least 10")
    random.Random(derive_seed(seed, "orgs")).shuffle(unique)
    n_test = max(1, round(wc.companies.test_only_fraction * len(unique)))
    test_only, shared = tuple(unique[:n_test]), tuple(unique[n_test:])
    pools = {
        "train": Pool("train", people["train"], shared),
        "validation": Pool("validation", people["validation"], shared),
        "test": Pool("test", people["test"], shared + test_only),
    }
    return World(pools, test_only)
