"""The data-generation config: one YAML file is the full record of a run (configs/data/default.yaml).

Every model forbids unknown keys, so a typo is an error that names the field. Templates use
named placeholders only, checked per field:

    {per}    one person, or an Oxford-comma list of people ("A, B, and C")
    {org}    an organisation ({org} of a two-hop question becomes "the company that {clause}")
    {old}    in updates: the organisation (subject-functional) or person (object-functional) replaced
    {clause} in two_hop.org_phrases: a relation's org_clause filled with the person
    {fact}   in replies.confirm: the fact sentence

Relation names must be canonical names of the memory's relation table (memory_runtime/memory/relations.yaml,
or `memory_config`): the store would rewrite an alias to its canonical name and the trained results
would no longer match what the runtime returns. Relations that are not in the table are allowed
(stored as written, never superseded). Updates are only allowed for relations the table marks
functional, because only those are superseded by a newer write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from data_gen.text import check_templates
from memory_runtime.protocol import ACK
from memory_runtime.shipped import shipped
from memory_runtime.yaml_config import ConfigError, Strict, read_mapping, validate

SPLITS = ("train", "validation", "test")
READ_SHAPES = ("per", "per_org", "per_rel", "org", "rel", "rel_org", "per_rel_org")
RECORD_KINDS = (
    "write",
    "read",
    "unanswerable",
    "update",
    "two_hop",
    "negative",
    "passage",
    "injection",
    "real",
    "verify",
)


TINY_CONFIG = shipped("configs", "data", "tiny.yaml")  # small worlds, the default mix: tests, smoke runs, benches


def _templates(allowed: set[str], required: set[str] | None = None):
    def check(cls, value: list[str]) -> list[str]:
        return check_templates(value, allowed, required)

    return check


# ----------------------------------------------------------------------------- relations


class Phrasings(Strict):
    """User statements of a fact: singular (one person) and plural (a list of people)."""

    singular: list[str] = Field(min_length=1)
    plural: list[str] = []

    _check = field_validator("singular", "plural")(_templates({"per", "org"}))


class FactPhrasing(Strict):
    """The one sentence answers use for a fact ("{per} is employed by {org}.")."""

    singular: str
    plural: str | None = None

    @field_validator("singular", "plural")
    @classmethod
    def _check(cls, value: str | None) -> str | None:
        if value is not None:
            check_templates([value], {"per", "org"})
        return value


class RelationQuestions(Strict):
    per_rel: list[str] = Field(min_length=1)
    rel: list[str] = Field(min_length=1)
    rel_org: list[str] = Field(min_length=1)
    per_rel_org: list[str] = []

    _per = field_validator("per_rel")(_templates({"per"}))
    _rel = field_validator("rel")(_templates(set()))
    _org = field_validator("rel_org")(_templates({"org"}))
    _both = field_validator("per_rel_org")(_templates({"per", "org"}))


class RelationConfig(Strict):
    name: str = Field(min_length=1)
    weight: float = Field(1.0, ge=0)
    fact: FactPhrasing
    statements: Phrasings
    questions: RelationQuestions
    org_clause: list[str] = []  # "{per} works for": two-hop questions say "the company that <clause>"
    updates: list[str] = []  # "{per} has left {old} and now works for {org}."

    _clause = field_validator("org_clause")(_templates({"per"}))
    _updates = field_validator("updates")(_templates({"per", "old", "org"}))


class GeneralQuestions(Strict):
    """Question phrasings of the shapes that do not name a relation."""

    per: list[str] = Field(min_length=1)
    per_org: list[str] = Field(min_length=1)
    org: list[str] = Field(min_length=1)

    _per = field_validator("per")(_templates({"per"}))
    _per_org = field_validator("per_org")(_templates({"per", "org"}))
    _org = field_validator("org")(_templates({"org"}))


# ----------------------------------------------------------------------------- world and mix


class PeopleConfig(Strict):
    """How many people each split's (disjoint) name pool holds."""

    train: int = Field(ge=10)
    validation: int = Field(ge=10)
    test: int = Field(ge=10)


class CompaniesConfig(Strict):
    real: bool = True  # the real company names shipped in data_gen/companies.txt
    faker: int = Field(0, ge=0)  # extra Faker company names
    test_only_fraction: float = Field(0.2, gt=0, lt=1)  # organisations only the test split sees


class WorldConfig(Strict):
    locales: list[str] = Field(min_length=1)
    people: PeopleConfig
    companies: CompaniesConfig = CompaniesConfig()
    relations_per_person: int = Field(1, ge=1, le=5)  # facts a person may have in one memory

    @field_validator("locales")
    @classmethod
    def _known_locales(cls, value: list[str]) -> list[str]:
        from faker.config import AVAILABLE_LOCALES

        for i, loc in enumerate(value):
            if loc not in AVAILABLE_LOCALES:
                raise ValueError(f"[{i}] unknown Faker locale {loc!r}")
        if len(set(value)) != len(value):
            raise ValueError("duplicate locale")
        return value


class SplitSizes(Strict):
    train: int = Field(ge=0)
    validation: int = Field(ge=0)
    test: int = Field(ge=0)

    @model_validator(mode="after")
    def _something(self) -> SplitSizes:
        if not (self.train or self.validation or self.test):
            raise ValueError("every split is 0: there is nothing to generate")
        return self


class MixConfig(Strict):
    """Relative weights of the record types (counts are allotted exactly, largest remainder)."""

    write: float = Field(0, ge=0)
    read: float = Field(0, ge=0)
    unanswerable: float = Field(0, ge=0)
    update: float = Field(0, ge=0)
    two_hop: float = Field(0, ge=0)
    negative: float = Field(0, ge=0)
    passage: float = Field(0, ge=0)  # a realistic statement (data_gen/passages.py) -> its write calls
    injection: float = Field(0, ge=0)  # user text carrying call syntax -> only what it states in words
    real: float = Field(0, ge=0)  # a passage of a real annotated corpus (`real.sources`; train split only)
    verify: float = Field(0, ge=0)  # a passage and a fact: does the text state it? (the write gate's verify signal)

    @model_validator(mode="after")
    def _something(self) -> MixConfig:
        if not any(getattr(self, k) for k in RECORD_KINDS):
            raise ValueError("mix: every weight is 0")
        return self


class ShapeWeights(Strict):
    """Relative weights of the read query shapes (reads and unanswerable questions)."""

    per: float = Field(1, ge=0)
    per_org: float = Field(1, ge=0)
    per_rel: float = Field(1, ge=0)
    org: float = Field(1, ge=0)
    rel: float = Field(1, ge=0)
    rel_org: float = Field(1, ge=0)
    per_rel_org: float = Field(0, ge=0)

    @model_validator(mode="after")
    def _something(self) -> ShapeWeights:
        if not any(getattr(self, s) for s in READ_SHAPES):
            raise ValueError("shapes: every weight is 0")
        return self


class WriteConfig(Strict):
    max_people: int = Field(3, ge=1, le=10)  # a statement names 1..max_people people


class MemoryContextConfig(Strict):
    """The memory a read starts from: the question's facts among distractors."""

    min_facts: int = Field(3, ge=1, le=50)
    max_facts: int = Field(10, ge=1, le=50)
    max_group: int = Field(3, ge=1, le=10)  # people per stored statement
    org_reuse: float = Field(0.3, ge=0, le=1)  # chance a statement reuses an organisation already in memory
    reuse: int = Field(4, ge=1, le=100)  # records (reads, unanswerable, two-hop, one last update) sharing one memory

    @model_validator(mode="after")
    def _ordered(self) -> MemoryContextConfig:
        if self.min_facts > self.max_facts:
            raise ValueError(f"memory.min_facts ({self.min_facts}) > memory.max_facts ({self.max_facts})")
        return self


class TwoHopConfig(Strict):
    """pairs: [first, second] relations ("who <second> the company that X <first>"); null = every
    ordered pair of different relations whose first has an org_clause."""

    pairs: list[tuple[str, str]] | None = None
    org_phrases: list[str] = Field(["the company that {clause}"], min_length=1)

    _phrases = field_validator("org_phrases")(_templates({"clause"}))


class Range(Strict):
    min: int = Field(ge=0)
    max: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) > max ({self.max})")
        return self


class EpisodeConfig(Strict):
    count: int = Field(100, ge=0)
    pool: Literal["train", "validation", "test"] = "test"  # whose people and organisations
    statements: Range = Range(min=2, max=5)
    questions: Range = Range(min=2, max=5)
    updates: Range = Range(min=0, max=2)  # each update is followed by a question about it
    unanswerable: float = Field(0.15, ge=0, le=1)  # chance a free question asks what was never said
    two_hop: float = Field(0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _some_statement(self) -> EpisodeConfig:
        if self.statements.min < 1:
            raise ValueError("episodes.statements.min must be at least 1")
        return self


class PassagesConfig(Strict):
    """Realistic statements and hard negatives (data_gen/passages.py)."""

    bank: str | None = None  # the phrase bank; null = data_gen/passages.yaml
    max_facts: int = Field(2, ge=1, le=2)  # statements per passage (a list of organisations: one, up to 3 writes)
    hard_negatives: float = Field(0.6, ge=0, le=1)  # share of negative records drawn from the bank's negatives
    # share of those hard negatives that state a fact about someone named only by a pronoun ("He joined Acme.")
    unnamed_facts: float = Field(0.0, ge=0, le=1)


class InjectionConfig(Strict):
    """Records whose user text carries call syntax (a pasted call, a bare triplet, read results):
    the right output stores what the text states in words and nothing its call syntax says
    (defence in depth beside the controller's check, memory_runtime.memory.injection)."""

    stated: float = Field(0.5, ge=0, le=1)  # share with a fact stated beside the call: its writes only
    wrappers: list[str] = Field(default_factory=lambda: ["{call}"], min_length=1)  # each holds {call}

    @field_validator("wrappers")
    @classmethod
    def _wrappers(cls, value: list[str]) -> list[str]:
        return check_templates(value, {"call"})


class RealSource(Strict):
    """One annotated corpus (data_gen/real.py reads it): real text in training, beside the worlds."""

    path: str  # a file, relative to the config file
    format: Literal["auto", "knowledgenet", "docred", "redocred_sentences", "conll04", "jsonl"] = "auto"
    weight: float = Field(1.0, gt=0)  # relative share among the sources
    relations: dict[str, str] = {}  # the corpus's relation names -> canonical memory relations (jsonl)
    window: int = Field(1, ge=1, le=5)  # docred: consecutive sentences per passage


class RealConfig(Strict):
    """Real annotated text as training records (`mix.real` of the train split; validation and test
    stay synthetic). A passage that contains a dev passage of data/real/ is left out: the text
    `memlm eval` measures on is never trained on."""

    sources: list[RealSource] = []
    reads: float = Field(0.3, ge=0, le=1)  # share of records whose passage is then asked about (a read shape)
    verify: float = Field(0.3, ge=0, le=1)  # share of verify records whose passage is a real one


class RepliesConfig(Strict):
    """The assistant's fixed short texts (kept short and identical: the model is small)."""

    ack: str = Field(ACK, min_length=1)  # after the write calls of a statement
    nothing: str = Field("Nothing to store.", min_length=1)  # a statement with no fact to store
    unknown: str = Field("I don't know.", min_length=1)  # a read that found nothing
    confirm: str = "Yes, {fact}"  # existence check (per_rel_org) that found the fact

    @field_validator("confirm")
    @classmethod
    def _confirm(cls, value: str) -> str:
        return check_templates([value], {"fact"})[0]


# ----------------------------------------------------------------------------- the whole config


class DataConfig(Strict):
    what = "data config"

    seed: int = 0
    splits: SplitSizes
    mix: MixConfig
    shapes: ShapeWeights = ShapeWeights()
    world: WorldConfig
    write: WriteConfig = WriteConfig()
    memory: MemoryContextConfig = MemoryContextConfig()
    two_hop: TwoHopConfig = TwoHopConfig()
    episodes: EpisodeConfig = EpisodeConfig()
    replies: RepliesConfig = RepliesConfig()
    passages: PassagesConfig = PassagesConfig()
    injection: InjectionConfig = InjectionConfig()
    real: RealConfig = RealConfig()
    memory_config: str | None = None  # the runtime's relation table; null = memory_runtime/memory/relations.yaml
    questions: GeneralQuestions
    negatives: list[str] = []  # statements that hold no fact to store
    relations: list[RelationConfig] = Field(min_length=1)

    _negatives = field_validator("negatives")(_templates({"per", "org"}, required=set()))

    @model_validator(mode="after")
    def _consistent(self) -> DataConfig:
        names = [r.name for r in self.relations]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"relations[{i}].name: duplicate relation {name!r}")
        if not any(r.weight for r in self.relations):
            raise ValueError("relations: every weight is 0")
        if self.mix.negative and self.passages.hard_negatives < 1 and not self.negatives:
            raise ValueError("negatives: mix.negative > 0 needs at least one template")
        if (self.mix.read or self.mix.unanswerable) and self.shapes.per_rel_org:
            if not any(r.questions.per_rel_org and r.weight for r in self.relations):
                raise ValueError("shapes.per_rel_org > 0 but no relation has questions.per_rel_org")
        for i, (first, second) in enumerate(self.two_hop.pairs or []):
            for j, name in enumerate((first, second)):
                if name not in names:
                    raise ValueError(f"two_hop.pairs[{i}][{j}]: unknown relation {name!r}; known: {', '.join(names)}")
            if first == second:
                raise ValueError(f"two_hop.pairs[{i}]: the two relations must differ")
            if not self.relations[names.index(first)].org_clause:
                raise ValueError(f"relations[{names.index(first)}].org_clause: needed by two_hop.pairs[{i}]")
        if (self.mix.two_hop or self.episodes.two_hop) and not self.two_hop_pairs():
            raise ValueError("two_hop: no usable pair (give relations an org_clause or set two_hop.pairs)")
        if self.mix.real and not self.real.sources:
            raise ValueError("real.sources: mix.real > 0 needs at least one annotated corpus")
        if self.memory.max_facts < 3 and (self.mix.two_hop or self.mix.update):
            raise ValueError("memory.max_facts: two-hop and update records need at least 3 facts")
        return self

    def relation(self, name: str) -> RelationConfig:
        for r in self.relations:
            if r.name == name:
                return r
        raise KeyError(name)

    def two_hop_pairs(self) -> list[tuple[str, str]]:
        if self.two_hop.pairs is not None:
            return [tuple(p) for p in self.two_hop.pairs]  # type: ignore[misc]
        return [
            (a.name, b.name)
            for a in self.relations
            for b in self.relations
            if a.name != b.name and a.org_clause and a.weight and b.weight
        ]

    # -- loading: DataConfig.load(path, overrides) (yaml_config.Strict) with a `base:` file under it

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict[str, Any]:
        """The file's mapping; a top-level `base: other.yaml` (relative to the file) starts from that
        config: mappings are merged key by key, anything else (lists included) is replaced."""
        return {} if path is None else _read_yaml(path)

    @classmethod
    def from_dict(cls, data: dict, *, base_dir: str | Path | None = None, source: str = "<dict>") -> DataConfig:
        """Validate a config mapping; checks relations against the memory's relation table too."""
        if not isinstance(data, dict):
            raise ConfigError(f"invalid data config {source}: expected a mapping at the top level")
        if base_dir is not None:
            data = _paths_relative_to(data, Path(base_dir))
        config = validate(cls, data, cls.what, source)
        try:
            check_against_memory(config)
        except ValueError as err:
            raise ConfigError(f"invalid data config {source}:\n  {err}") from None
        return config


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    if not path.is_file():
        raise ConfigError(f"data config {path} does not exist")
    data = read_mapping(path, "data config")
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"invalid data config {path}:\n  base: must be a path to another config")
    base_path = (path.parent / base).resolve()
    if base_path in seen:
        raise ConfigError(f"invalid data config {path}:\n  base: {base} includes itself")
    return _merge(_paths_relative_to(_read_yaml(base_path, (*seen, base_path)), base_path.parent), data)


def _paths_relative_to(data: dict, folder: Path) -> dict:
    """A config mapping with its relative paths (memory_config, passages.bank, real.sources[].path) made
    absolute against `folder`, the folder of the file that gave them: a base's against its own, so a config
    elsewhere (a copy: `memlm config copy data/tiny`) can name it as `base`. Values of a wrong type are left
    for validation to name."""

    def absolute(value: Any) -> Any:
        if not isinstance(value, str) or Path(value).is_absolute():
            return value
        return str((folder / value).resolve())

    out = dict(data)
    if "memory_config" in out:
        out["memory_config"] = absolute(out["memory_config"])
    passages = out.get("passages")
    if isinstance(passages, dict) and "bank" in passages:
        out["passages"] = {**passages, "bank": absolute(passages["bank"])}
    real = out.get("real")
    if isinstance(real, dict) and isinstance(real.get("sources"), list):
        sources = [dict(s) if isinstance(s, dict) else s for s in real["sources"]]
        for source in sources:
            if isinstance(source, dict) and "path" in source:
                source["path"] = absolute(source["path"])
        out["real"] = {**real, "sources": sources}
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def memory_table(config: DataConfig):
    """The runtime's relation table the generated data must agree with."""
    from memory_runtime.memory.store import MemoryConfig

    return MemoryConfig.load(config.memory_config)


def functional_of(config: DataConfig) -> dict[str, str | None]:
    """relation name -> 'subject' / 'object' / 'both' / None, as the store will treat it."""
    from memory_runtime.memory.store import normalize_term

    table = {normalize_term(s.name): s.functional for s in memory_table(config).relations}
    return {r.name: table.get(normalize_term(r.name)) for r in config.relations}


def check_against_memory(config: DataConfig) -> None:
    """Relation names must be canonical in the memory's table; updates need functional relations."""
    from memory_runtime.memory.store import normalize_term

    try:
        table = memory_table(config)
    except (OSError, ValueError) as err:
        raise ValueError(f"memory_config: {err}") from None
    canonical = table.canonical_names
    functional = functional_of(config)
    for i, rel in enumerate(config.relations):
        owner = canonical.get(normalize_term(rel.name))
        if owner is not None and owner != rel.name:
            raise ValueError(
                f"relations[{i}].name: {rel.name!r} is an alias of {owner!r} in the memory relation table; "
                f"use the canonical name"
            )
        kind = functional[rel.name]
        if rel.updates and kind is None:
            raise ValueError(
                f"relations[{i}].updates: {rel.name!r} is not functional in the memory relation table, "
                f"so a newer write would not supersede the old fact"
            )
        plural_needed = kind not in ("object", "both") and max(config.write.max_people, config.memory.max_group) > 1
        if plural_needed and not rel.statements.plural:
            raise ValueError(f"relations[{i}].statements.plural: needed (statements may name several people)")
        if kind not in ("object", "both") and rel.fact.plural is None:
            raise ValueError(f"relations[{i}].fact.plural: needed (answers may list several people)")
    if config.mix.passage or (config.mix.negative and config.passages.hard_negatives):
        from data_gen.passages import PassageBank

        try:
            bank = PassageBank.load(config.passages.bank)
        except (OSError, ValueError) as err:
            raise ValueError(f"passages.bank: {err}") from None
        for name in bank.relations:
            if canonical.get(normalize_term(name)) != name:
                raise ValueError(
                    f"passages.bank: relation {name!r} is not a canonical name of the memory relation table"
                )
    if config.mix.update or config.episodes.updates.max:
        if not any(r.updates and r.weight for r in config.relations):
            raise ValueError("relations: mix.update or episodes.updates need a relation with updates")
