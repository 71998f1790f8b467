"""The data-generation config: one YAML file is the full record of a run (configs/data/default.yaml).

Every model forbids unknown keys, so a typo is an error that names the field. What the worlds are
about (entity types, relations, their phrasings, negatives) is the schema (`schema_file`,
data_gen/schema.py; null = configs/schema/person-organisation.yaml); this config says how many records
of which kind to make from it, and how many names of each type its worlds hold (`world.names`).
The schema is checked against the config when it loads, before anything is generated. A few
field names are those of the person–organisation days, kept so that configs keep loading: "people"
and "person" mean subjects (write.max_people, memory.max_group, world.relations_per_person) and
"org" objects (memory.org_reuse).

Templates here use named placeholders only, checked per field:

    {fact}   in replies.confirm: the fact sentence
    {call}   in injection.wrappers: the pasted call syntax

The memory's relation table the data agrees with is the schema's (`Schema.table`); `memory_config`
adds the store's other settings (fuzzy matching). Updates are only allowed for relations the schema
marks functional, because only those are superseded by a newer write.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from data_gen.schema import Schema
from data_gen.text import check_templates
from memory_runtime.protocol import ACK
from memory_runtime.shipped import resolve_path, shipped
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
    "conversation",
)


TINY_CONFIG = shipped("configs", "data", "tiny.yaml")  # small worlds, the default mix: tests, smoke runs, benches


# ----------------------------------------------------------------------------- world and mix


class TypeNames(Strict):
    """How many names of one schema type a world holds (data_gen/world.py). A type drawn per split
    (schema `pool: split`) gives each split's count; a type the splits share (`pool: shared`) takes its
    listed names (shipped lists, files, inline names) and `faker` more, and holds `test_only_fraction`
    of them out for the test split. Unset fields of a shared type: lists true, faker 0, 0.2."""

    train: int | None = Field(None, ge=10)
    validation: int | None = Field(None, ge=10)
    test: int | None = Field(None, ge=10)
    lists: bool | None = None  # a shared type: its listed names (the person–organisation schema: companies.txt)
    faker: int | None = Field(None, ge=0)  # a shared type: Faker names besides them
    test_only_fraction: float | None = Field(None, gt=0, lt=1)  # a shared type: names only the test split sees


class WorldConfig(Strict):
    locales: list[str] = Field(min_length=1)
    names: dict[str, TypeNames] = {}  # schema type -> how many names (see TypeNames)
    relations_per_person: int = Field(1, ge=1, le=5)  # facts a subject may have in one memory

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
    conversation: float = Field(0, ge=0)  # a turn of a dated two-person conversation (data_gen/conversations.py)

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
    ordered pair of different templated relations with one object type whose first has a clause.
    How the question names the middle object ("the company that {clause}") is its schema type's
    `by_clause`."""

    pairs: list[tuple[str, str]] | None = None


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


class ConversationsConfig(Strict):
    """Dated two-person conversations, one record a turn (data_gen/conversations.py)."""

    bank: str | None = None  # the phrase bank; null = data_gen/conversations.yaml
    personas: str | None = None  # MSC's persona pairs (data/real_train/msc_personas.json); null: none
    persona_share: float = Field(0.5, ge=0, le=1)  # share of facts said with a persona sentence (the split's MSC)
    negatives: float = Field(0.35, ge=0, le=1)  # share of turns without a fact: chit-chat only
    # a turn with facts states one more with this chance, again after each, up to four: LoCoMo's turns say
    # several things at once and a writer taught on one fact a turn writes the first and drops the rest
    # (configs/data/conversations.yaml: 0.5)
    more_facts: float = Field(0.0, ge=0, lt=1)
    # WebNLG's sentences that state 1-4 facts each (data/real_train/webnlg_facts.jsonl, data_gen/webnlg.py): real
    # long sentences a writer copies every fact of, about the people and places they name; null: none
    webnlg: str | None = None
    webnlg_share: float = Field(0.0, ge=0, le=1)  # chance a fact of a turn is said with one of them instead
    # chance a turn shares a photo, captioned as LoCoMo's are ("a photo of a dog on a beach", the bank's photos):
    # the writer writes what it shows (`shared a photo of`); 0: no photos, the data as before
    photos: float = Field(0.0, ge=0, le=1)
    sessions: Range = Range(min=3, max=6)
    turns: Range = Range(min=6, max=14)  # turns a session
    # share of the records that are a reader's questions about a conversation (LoCoMo's kinds but open-domain):
    # dated facts or turns as context, the question, a short answer or "Not mentioned."; 0 = turns only
    questions: float = Field(0.3, ge=0, lt=1)
    context: Range = Range(min=3, max=10)  # facts or turns a question's context holds (what BM25's top k gives)
    # share of answerable questions' contexts whose other lines are the ones BM25 ranks highest for the question
    # (as part locomo reads), not drawn at random, as a read's share the question's words; adversarial ones stay
    # random. At 0.5 LoCoMo triples fell 4.2 points (all questions' contexts matched: 3.5; results.md): 0 ships
    matched_context: float = Field(0.0, ge=0, le=1)
    kinds: QuestionKinds = Field(default_factory=lambda: QuestionKinds())  # the questions' kinds, by share


class QuestionKinds(Strict):
    """How often a reader's question is of each kind; what is left is single-hop. A kind the fact cannot take
    (no time to ask about, no second fact of its relation, the other speaker said the like) falls to single-hop,
    so the realised shares are lower: at the defaults ~22 % temporal, ~3 % multi-hop, ~9 % adversarial."""

    temporal: float = Field(0.3, ge=0, le=1)  # "When did Caroline ...?" answered with the resolved time
    multi_hop: float = Field(0.12, ge=0, le=1)  # "What has Caroline painted?": the objects, a comma list
    adversarial: float = Field(0.15, ge=0, le=1)  # asked of the other speaker, who never said it: "Not mentioned."

    @model_validator(mode="after")
    def _at_most_all(self) -> QuestionKinds:
        if self.temporal + self.multi_hop + self.adversarial > 1:
            raise ValueError("conversations.kinds: temporal + multi_hop + adversarial must be at most 1")
        return self


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
    folder: ClassVar[str] = "data"  # a bare --config name is first looked for in configs/data/

    seed: int = 0
    schema_file: str | None = None  # the entity types and relations (data_gen/schema.py); null = person–organisation
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
    conversations: ConversationsConfig = ConversationsConfig()
    memory_config: str | None = None  # the store's other settings (fuzzy); its relation table is the schema's
    _fitted: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> DataConfig:
        for i, (first, second) in enumerate(self.two_hop.pairs or []):
            if first == second:
                raise ValueError(f"two_hop.pairs[{i}]: the two relations must differ")
        if self.mix.real and not self.real.sources:
            raise ValueError("real.sources: mix.real > 0 needs at least one annotated corpus")
        if self.memory.max_facts < 3 and (self.mix.two_hop or self.mix.update):
            raise ValueError("memory.max_facts: two-hop and update records need at least 3 facts")
        return self

    @property
    def data_schema(self) -> Schema:
        """The schema this config generates from (`schema_file`; loaded once per file version)."""
        return _schema(self.schema_file)

    def two_hop_pairs(self) -> list[tuple[str, str]]:
        if self.two_hop.pairs is not None:
            return [tuple(p) for p in self.two_hop.pairs]  # type: ignore[misc]
        return [(a.name, b.name) for a, b in self.data_schema.two_hop_pairs()]

    # -- loading: DataConfig.load(path, overrides) (yaml_config.Strict) with a `base:` file under it

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict[str, Any]:
        """The file's mapping; a top-level `base: other.yaml` (relative to the file) starts from that
        config: mappings are merged key by key, anything else (lists included) is replaced."""
        return {} if path is None else _read_yaml(path)

    @classmethod
    def from_dict(
        cls, data: dict, *, base_dir: str | Path | None = None, source: str = "<dict>", fitted: Sequence[str] = ()
    ) -> DataConfig:
        """Validate a config mapping, then its schema and the two together (`check_against_schema`);
        `fitted`: what data_gen.fitting left out of it for its schema (`fitted_to_schema`)."""
        if not isinstance(data, dict):
            raise ConfigError(f"invalid data config {source}: expected a mapping at the top level")
        if base_dir is not None:
            data = paths_relative_to(data, Path(base_dir))
        config = validate(cls, data, cls.what, source)
        config.data_schema  # noqa: B018 (a bad schema is an error naming the schema file's field)
        try:
            check_against_schema(config)
        except ValueError as err:
            raise ConfigError(f"invalid data config {source}:\n  {err}") from None
        config._fitted = list(fitted)
        return config

    @property
    def fitted_to_schema(self) -> list[str]:
        """What was left out of the recipe for a schema it was not written for (data_gen/fitting.py)."""
        return list(self._fitted)


def _read_yaml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    if not path.is_file():
        raise ConfigError(f"data config {path} does not exist")
    data = read_mapping(path, "data config")
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"invalid data config {path}:\n  base: must be a path to another config")
    base_path = Path(resolve_path(base, path.parent))
    if base_path in seen:
        raise ConfigError(f"invalid data config {path}:\n  base: {base} includes itself")
    return _merge(paths_relative_to(_read_yaml(base_path, (*seen, base_path)), base_path.parent), data)


def paths_relative_to(data: dict, folder: Path) -> dict:
    """A config mapping with its relative paths (schema_file, memory_config, passages.bank,
    conversations.bank, .personas and .webnlg, real.sources[].path) made
    absolute against `folder`, the folder of the file that gave them: a base's against its own, so a config
    elsewhere (a copy: `memlm config copy data/tiny`) can name it as `base`. Values of a wrong type are left
    for validation to name."""

    def absolute(value: Any) -> Any:
        return resolve_path(value, folder) if isinstance(value, str) else value

    out = dict(data)
    for key in ("memory_config", "schema_file"):
        if key in out:
            out[key] = absolute(out[key])
    for block, keys in (("passages", ("bank",)), ("conversations", ("bank", "personas", "webnlg"))):
        given = out.get(block)
        if isinstance(given, dict):
            out[block] = {**given, **{k: absolute(given[k]) for k in keys if k in given}}
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


def _schema(path: str | None) -> Schema:
    if path is None:
        return Schema.load()
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"schema_file: {path} does not exist")
    stat = file.stat()
    return _schema_version(str(file.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _schema_version(path: str, mtime_ns: int, size: int) -> Schema:
    return Schema.load(path)


def memory_table(config: DataConfig):
    """The runtime's memory the generated data must agree with: the schema's relation table, with the
    other settings (fuzzy matching) of `memory_config`."""
    from memory_runtime.memory.memory_config import MemoryConfig

    raw = MemoryConfig.read_yaml(None if config.memory_config is None else Path(config.memory_config))
    return MemoryConfig.from_dict({**raw, "relations": config.data_schema.table()}, source=str(config.memory_config))


def functional_of(config: DataConfig) -> dict[str, str | None]:
    """relation name -> 'subject' / 'object' / 'both' / None, as the store will treat it."""
    return config.data_schema.functional()


def check_against_schema(config: DataConfig) -> None:
    """What the config asks of its schema: names for every type, phrasings for what is generated,
    relations that exist. A ValueError names the field (the config's, or the schema's as `schema ...`)."""
    schema = config.data_schema
    where = f"schema {config.schema_file or 'person-organisation'}"
    for name in config.world.names:
        if name not in schema.types:
            raise ValueError(f"world.names.{name}: not a type of the schema; types: {', '.join(schema.types)}")
    for name, spec in schema.types.items():
        given = config.world.names.get(name)
        if spec.pool == "split":
            if given is None or None in (given.train, given.validation, given.test):
                raise ValueError(f"world.names.{name}: needs train, validation and test (names drawn per split)")
            for field in ("faker", "test_only_fraction"):
                if getattr(given, field) is not None:
                    raise ValueError(f"world.names.{name}.{field}: only for a type the splits share (pool: shared)")
        elif given is not None:
            for field in ("train", "validation", "test"):
                if getattr(given, field) is not None:
                    raise ValueError(f"world.names.{name}.{field}: only for a type drawn per split (pool: split)")
    phrased = schema.phrased()
    names = [r.name for r in phrased]
    if config.mix.negative and config.passages.hard_negatives < 1 and not schema.negatives:
        raise ValueError(f"{where}: negatives: mix.negative > 0 needs at least one template")
    if (config.mix.read or config.mix.unanswerable) and config.shapes.per_rel_org:
        if not any(r.questions.per_rel_org and r.weight for r in phrased):
            raise ValueError(f"shapes.per_rel_org > 0 but no relation of the {where} has questions.per_rel_org")
    for i, (first, second) in enumerate(config.two_hop.pairs or []):
        for j, name in enumerate((first, second)):
            if name not in names:
                raise ValueError(
                    f"two_hop.pairs[{i}][{j}]: unknown relation {name!r}; templated relations: {', '.join(names)}"
                )
        a, b = schema.relation(first), schema.relation(second)
        if not a.clause:
            raise ValueError(f"{where}: relations.{schema.relations.index(a)}.clause: needed by two_hop.pairs[{i}]")
        if a.object != b.object:
            raise ValueError(f"two_hop.pairs[{i}]: {first!r} and {second!r} have different object types")
    if config.mix.two_hop or config.episodes.two_hop:
        pairs = config.two_hop_pairs()
        if not pairs:
            raise ValueError("two_hop: no usable pair (give relations a clause or set two_hop.pairs)")
        for first, _ in pairs:
            middle = schema.relation(first).object
            if not schema.types[middle].by_clause:
                raise ValueError(f"{where}: types.{middle}.by_clause: needed by two-hop questions")
    many = max(config.write.max_people, config.memory.max_group) > 1
    for rel in phrased:
        i = schema.relations.index(rel)
        if rel.functional not in ("object", "both"):
            if many and not rel.statements.plural:
                raise ValueError(f"{where}: relations.{i}.statements.plural: needed (a statement may name several)")
    if config.mix.update or config.episodes.updates.max:
        if not any(r.updates and r.weight for r in phrased):
            raise ValueError(f"{where}: relations: mix.update or episodes.updates need a relation with updates")
    if config.memory_config is not None:
        from memory_runtime.memory.memory_config import MemoryConfig, RelationSpec

        try:
            own = read_mapping(config.memory_config, "memory config").get("relations")
        except ConfigError as err:
            raise ValueError(f"memory_config: {err}") from None
        table = [RelationSpec.model_validate(r) for r in schema.table()]
        if own is not None and MemoryConfig.model_validate({"relations": own}).relations != table:
            raise ValueError(
                f"memory_config: its relations differ from the {where}'s, which are the relation table of "
                "generated data; leave them out (`memlm schema table` writes the schema's)"
            )
    if config.mix.conversation:
        from data_gen.conversations import check_sources

        check_sources(config.conversations, "person" in schema.types)
    if config.mix.passage or (config.mix.negative and config.passages.hard_negatives):
        from data_gen.passage_bank import PassageBank

        try:
            bank = PassageBank.load(config.passages.bank)
        except (OSError, ValueError) as err:
            raise ValueError(f"passages.bank: {err}") from None
        sides = set()
        for name in bank.relations:
            try:
                rel = schema.relation(name)
            except KeyError:
                raise ValueError(f"passages.bank: relation {name!r} is not a relation of the {where}") from None
            sides.add((rel.subject, rel.object))
        if len(sides) > 1:
            raise ValueError(f"passages.bank: its relations join different types ({sorted(sides)}): one pair only")
