"""The world records are drawn from: the names of each type of the schema, and which split may use which.

Each entity type of the schema (data_gen/schema.py) says where its names come from and how the splits
share them; the data config (`world.names`) says how many:

- A type drawn per split (`pool: split`; the person–organisation schema's people): each split draws
  its own names, unique after the memory's normalisation (so the store never conflates two of them)
  and disjoint across splits: listed names first (shuffled), then Faker names ("{first_name}
  {last_name}"), one Faker per configured locale reseeded per split.
- A type the splits share (`pool: shared`; the organisations): its listed names (the real company
  names of companies.txt) plus `faker` Faker names. A seeded share of them is reserved for the test
  split only, to measure generalisation to names never seen in training; train and validation share
  the rest.

Facts are not part of the world: every record (and every episode) samples a fresh memory over
these pools, so no name has a fixed fact a model could memorise instead of reading memory.
"""

from __future__ import annotations

import hashlib
import random
import string
from dataclasses import dataclass

from faker import Faker

from data_gen.data_config import SPLITS, DataConfig, TypeNames
from data_gen.schema import RESERVED, NameSource
from memory_runtime.memory.terms import normalize_term


def derive_seed(*parts: object) -> int:
    """A stable 64-bit seed from the run seed and a purpose (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class Pool:
    """What one split may draw from: type -> names."""

    split: str
    names: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class World:
    pools: dict[str, Pool]
    test_only: dict[str, tuple[str, ...]]  # a shared type -> its names only the test split sees
    plurals: dict[str, str]  # type -> how world.json names its names ("people")

    def to_dict(self) -> dict:
        out: dict = {plural: {s: list(p.names[t]) for s, p in self.pools.items()} for t, plural in self.plurals.items()}
        out.update({f"test_only_{self.plurals[t]}": list(names) for t, names in self.test_only.items()})
        return out


def real_companies() -> list[str]:
    """The real company names shipped with data_gen (companies.txt)."""
    return NameSource(shipped="companies").listed()


def _plain(name: str, min_words: int) -> bool:
    return len(name.split()) >= min_words and not (set(name) & RESERVED) and name == " ".join(name.split())


def _closed_abbreviation(name: str) -> str:
    """'... S.L.N.E' -> '... S.L.N.E.': a sentence ending with the name would otherwise make
    the gold term (no period) and the text (period) disagree, an ambiguity no model can learn."""
    last = name.rsplit(" ", 1)[-1]
    return name + "." if "." in last and not name.endswith(".") else name


def _faker_name(template: str, fk: Faker) -> str:
    """A Faker format filled, its providers called in the order it names them."""
    parts = []
    for literal, provider, _, _ in string.Formatter().parse(template):
        parts.append(literal)
        if provider:
            parts.append(str(getattr(fk, provider)()))
    return _closed_abbreviation("".join(parts))


def build_world(config: DataConfig) -> World:
    """Every type's names per split: drawn per split (disjoint) or shared (with a test-only share)."""
    schema, wc = config.data_schema, config.world
    fakers = {loc: Faker(loc) for loc in wc.locales}
    names: dict[str, dict[str, tuple[str, ...]]] = {}  # type -> split -> names
    test_only: dict[str, tuple[str, ...]] = {}
    for type_name, spec in schema.types.items():
        counts = wc.names.get(type_name) or TypeNames()
        if spec.pool == "split":
            names[type_name] = _split_names(config, type_name, counts, fakers)
        else:
            shared, test_only[type_name] = _shared_names(config, type_name, counts, fakers)
            names[type_name] = {"train": shared, "validation": shared, "test": shared + test_only[type_name]}
    pools = {split: Pool(split, {t: names[t][split] for t in schema.types}) for split in SPLITS}
    return World(pools, test_only, {t: schema.plural(t) for t in schema.types})


def _sources(config: DataConfig, type_name: str, lists: bool) -> tuple[list[str], list[str]]:
    """(listed names, in source order, unique after normalisation; the Faker formats)."""
    spec = config.data_schema.types[type_name]
    listed = [n for src in spec.names for n in src.listed()] if lists else []
    formats = [src.faker for src in spec.names if src.faker is not None]
    return listed, formats


def _split_names(config: DataConfig, type_name: str, counts: TypeNames, fakers: dict[str, Faker]) -> dict:
    """Each split's own names, disjoint: listed names (shuffled once) first, then Faker draws."""
    seed, wc, spec = config.seed, config.world, config.data_schema.types[type_name]
    key = spec.faker_seed or config.data_schema.plural(type_name)
    listed, formats = _sources(config, type_name, counts.lists is not False)
    if listed:
        random.Random(derive_seed(seed, key, "lists")).shuffle(listed)
    left = iter(listed)
    taken: set[str] = set()
    out: dict[str, tuple[str, ...]] = {}
    for split in SPLITS:
        want = getattr(counts, split)
        drawn: list[str] = []
        for name in left:  # a listed name is kept whole (the schema lists it as it is)
            _take(name, 1, taken, drawn)
            if len(drawn) == want:
                break
        if len(drawn) < want and formats:
            rng = random.Random(derive_seed(seed, key, split))
            for loc, fk in fakers.items():
                fk.seed_instance(derive_seed(seed, key, split, loc))
            for _ in range(want * 50):
                if len(drawn) == want:
                    break
                fk = fakers[rng.choice(wc.locales)]
                name = _faker_name(formats[0] if len(formats) == 1 else rng.choice(formats), fk)
                _take(name, spec.min_words, taken, drawn)
        if len(drawn) < want:
            raise ValueError(
                f"world.names.{type_name}.{split}: could draw only {len(drawn)} unique names of {want} "
                f"(locales {wc.locales}); add names or locales, or ask for fewer"
            )
        out[split] = tuple(drawn)
    return out


def _take(name: str, min_words: int, taken: set[str], drawn: list[str]) -> None:
    """Add `name` to `drawn` unless it is not plain or taken (after the memory's normalisation)."""
    norm = normalize_term(name)
    if norm and norm not in taken and _plain(name, min_words):
        taken.add(norm)
        drawn.append(name)


def _shared_names(config: DataConfig, type_name: str, counts: TypeNames, fakers: dict[str, Faker]):
    """(the names every split shares, the names only the test split sees)."""
    seed, wc, spec = config.seed, config.world, config.data_schema.types[type_name]
    plural = config.data_schema.plural(type_name)
    names, formats = _sources(config, type_name, counts.lists is not False)
    n_faker = counts.faker or 0
    if n_faker and formats:
        key = spec.faker_seed or plural
        rng = random.Random(derive_seed(seed, key))
        for loc, fk in fakers.items():
            fk.seed_instance(derive_seed(seed, key, loc))
        extra: list[str] = []
        for _ in range(n_faker * 50):
            if len(extra) == n_faker:
                break
            fk = fakers[rng.choice(wc.locales)]
            name = _faker_name(formats[0] if len(formats) == 1 else rng.choice(formats), fk)
            if _plain(name, spec.min_words):
                extra.append(name)
        names += extra
    elif n_faker:
        raise ValueError(f"world.names.{type_name}.faker: the schema gives {type_name} no Faker source")
    unique, seen = [], set()
    for name in names:
        norm = normalize_term(name)
        if norm and norm not in seen:
            seen.add(norm)
            unique.append(name)
    if len(unique) < 10:
        raise ValueError(
            f"world.names.{type_name}: only {len(unique)} distinct names; a world needs at least 10 (add names "
            f"to the schema's types.{type_name}.names, or a faker source and world.names.{type_name}.faker)"
        )
    random.Random(derive_seed(seed, plural)).shuffle(unique)
    fraction = 0.2 if counts.test_only_fraction is None else counts.test_only_fraction
    n_test = max(1, round(fraction * len(unique)))
    return tuple(unique[n_test:]), tuple(unique[:n_test])
