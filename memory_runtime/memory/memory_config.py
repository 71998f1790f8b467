"""The memory's settings (MemoryConfig) and its relation table: each relation's name, aliases and rules
(functional, ends, symmetric, common objects), and how a relation as written resolves to its canonical
name (RelationTable). The table a model learned travels with its run (RELATION_TABLE_FILE), so its
memory is opened with the relations it was trained on."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, model_validator

from memory_runtime.memory.fuzzy import FuzzyConfig
from memory_runtime.memory.terms import checked_term, normalize_term, relation_words
from memory_runtime.yaml_config import Strict, read_mapping


class RelationSpec(Strict):
    name: str = Field(min_length=1)
    aliases: list[str] = []
    functional: Literal["subject", "object", "both"] | None = None
    ends: list[str] = Field(
        default_factory=list,
        description="relations of the same subject that a new fact of "
        "this one ends at every other object (a new employer ends the roles at the old one)",
    )
    symmetric: bool = Field(
        False,
        description="it holds both ways (A spouse of B: B spouse of A): a query with its names either way round "
        "finds the fact (the schema's `symmetric: true`)",
    )
    common_object: bool = Field(
        False,
        description="its objects are common nouns, written in small letters (a food: peanuts), which the "
        "decoding's copy rules otherwise refuse as naming nobody (the schema's type `common: true`)",
    )


# The relation table a dataset was generated with (`memlm generate` writes it from the schema), kept in
# every run trained on it: the memory of a trained model is opened with the relations it learned.
RELATION_TABLE_FILE = "relations.yaml"
ANY_RELATION = "*"  # in MemoryConfig.common_objects: every relation outside the table (open relations)


class MemoryConfig(Strict):
    """The store's settings: the relation table, the fuzzy fallback, how many indexes stay resident."""

    what = "memory config"

    relations: list[RelationSpec] = []
    open_relations: bool = Field(
        False,
        description="relations outside the table are what the memory is mostly about (a conversation's 'went to',"
        " 'painted', 'adopted'): kept as written, decoded freely, their objects may be common nouns",
    )
    fuzzy: FuzzyConfig = FuzzyConfig()
    max_indexes: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _aliases_unique(self) -> MemoryConfig:
        _ = self.canonical_names  # raises on an alias claimed by two relations
        names = {spec.name for spec in self.relations}
        for spec in self.relations:
            unknown = [name for name in spec.ends if name not in names]
            if unknown:
                raise ValueError(f"relation {spec.name!r}: ends {unknown}, which are not relation names of the table")
        return self

    @property
    def canonical_names(self) -> dict[str, str]:
        """The table's alias map: every name and alias, normalised -> its canonical relation name."""
        owner: dict[str, str] = {}
        for spec in self.relations:
            for surface in [spec.name, *spec.aliases]:
                key = normalize_term(surface)
                if owner.get(key, spec.name) != spec.name:
                    raise ValueError(f"relation alias {surface!r} is claimed by both {owner[key]!r} and {spec.name!r}")
                owner[key] = spec.name
        return owner

    @property
    def symmetric(self) -> frozenset[str]:
        """The relations that hold both ways (RelationSpec.symmetric)."""
        return frozenset(spec.name for spec in self.relations if spec.symmetric)

    @property
    def common_objects(self) -> frozenset[str]:
        """The relations whose objects are common nouns (RelationSpec.common_object); with open relations also
        ANY_RELATION, which stands for every relation outside the table ("went to": "pottery class")."""
        named = frozenset(spec.name for spec in self.relations if spec.common_object)
        return named | {ANY_RELATION} if self.open_relations else named

    @property
    def relation_names(self) -> list[str] | None:
        """The canonical relation names (None for an empty table or open relations: relations are then free)."""
        if self.open_relations:
            return None
        return [spec.name for spec in self.relations] or None

    @classmethod
    def of_model(cls, model: str | Path | None, path: str | Path | None = None) -> MemoryConfig:
        """The memory config at `path` (None: memlm's defaults), with the relation table of the run
        `model` was trained in where it keeps one (RELATION_TABLE_FILE) and `path` gives none."""
        table = Path(str(model)).expanduser() / RELATION_TABLE_FILE if model else None
        if table is None or not table.is_file():
            return cls.load(path)
        learned = read_mapping(table, cls.what)
        settings = read_mapping(Path(path), cls.what) if path is not None else {}
        merged = {**cls.read_yaml(None), **settings, "relations": settings.get("relations", learned.get("relations"))}
        if "open_relations" in learned and "open_relations" not in settings:
            merged["open_relations"] = learned["open_relations"]
        return cls.from_dict(merged, source=f"{path or 'defaults'} with the relation table {table}")

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict:
        """A memory config file over memlm's defaults: None gives them; a file without `relations`
        keeps the relation table shipped with memlm (memory_runtime/memory/relations.yaml)."""
        shipped = yaml.safe_load(resources.files("memory_runtime.memory").joinpath("relations.yaml").read_text())
        return shipped if path is None else {"relations": shipped["relations"], **read_mapping(path, cls.what)}


class RelationTable:
    """A MemoryConfig's relations as the store applies them, by normalised canonical name: a relation as
    written resolves to its canonical name (an alias, or the same content words as a name or alias:
    "customer" -> "customer of"), and each name's functional side and the relations its new facts end."""

    def __init__(self, config: MemoryConfig) -> None:
        self.canonical = config.canonical_names  # normalised alias -> canonical relation name
        self.functional: dict[str, str] = {}  # normalised canonical name -> "subject"/"object"/"both"
        self.ends: dict[str, list[str]] = {}  # normalised canonical name -> the relations its new facts end
        self._cache: dict[str, tuple[str, str]] = {}
        # content words of every name and alias -> canonical name ("customer" -> "customer of"); None: ambiguous
        self._by_words: dict[frozenset[str], str | None] = {}
        for spec in config.relations:
            for surface in [spec.name, *spec.aliases]:
                words = relation_words(normalize_term(surface))
                owner = self._by_words.get(words, spec.name)
                self._by_words[words] = spec.name if owner == spec.name else None
            if spec.functional:
                self.functional[normalize_term(spec.name)] = spec.functional
            if spec.ends:
                self.ends[normalize_term(spec.name)] = [normalize_term(name) for name in spec.ends]

    def terms(self, relation: object) -> tuple[str, str]:
        """(display, norm) of a relation after alias resolution (TypeError / ValueError as checked_term
        says); cached, relations are few."""
        cached = self._cache.get(relation) if isinstance(relation, str) else None
        if cached is None:
            display, norm = checked_term(relation, "relation")
            display = self.canonical.get(norm) or self._by_words.get(relation_words(norm)) or display
            cached = (display, normalize_term(display))
            if len(self._cache) < 10_000:
                self._cache[relation] = cached  # type: ignore[index]
        return cached

    def fact_terms(self, subject: object, relation: object, object_: object) -> tuple[tuple[str, str], ...]:
        """(display, norm) of each field of a fact, its relation resolved (TypeError / ValueError as
        checked_term says)."""
        return checked_term(subject, "subject"), self.terms(relation), checked_term(object_, "object")
