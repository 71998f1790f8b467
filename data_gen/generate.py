"""The whole run of `memlm generate`: world, records per split, episodes, and the files in OUT.

    OUT/dataset_dict.json, OUT/{train,validation,test,episodes}/   Hugging Face DatasetDict (save_to_disk)
    OUT/jsonl/{train,validation,test}.jsonl                          records (memory_runtime.records.Record)
    OUT/jsonl/episodes.jsonl                                         episodes (data_gen.episodes.Episode)
    OUT/world.json                                                   name pools per type and split, test-only names
    OUT/config.yaml                                                  the config used (seed included)
    OUT/schema.yaml                                                  the schema used (data_gen/schema.py)
    OUT/relations.yaml                                               its memory relation table (runs keep it)
    OUT/README.md                                                    dataset card: counts, conventions, config

Nothing in OUT depends on the clock or the machine: the same config and seed give byte-identical
files. Timings are returned (and printed by the CLI), never written. Everything is written into a
temporary sibling folder renamed into place when complete: an interrupted run leaves the earlier
output (or nothing), never half of each.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from data_gen.data_config import READ_SHAPES, RECORD_KINDS, SPLITS, TINY_CONFIG, DataConfig, functional_of, memory_table
from data_gen.episodes import Episode, build_episodes
from data_gen.examples import build_records, kind_of
from data_gen.oracle import MemoryOracle
from data_gen.real_records import RealPassages
from data_gen.world import World, build_world
from memory_runtime.jsonl import write_jsonl
from memory_runtime.memory.memory_config import RELATION_TABLE_FILE
from memory_runtime.progress import Advance
from memory_runtime.records import Record


@dataclass
class Report:
    out_dir: Path
    seed: int
    counts: dict[str, dict[str, int]]  # split -> record type -> count
    shapes: dict[str, dict[str, int]]  # split -> read shape -> count (reads, unanswerable, updates)
    episodes: int
    generate_seconds: float  # wall clock, world and records (file writing excluded)
    total_seconds: float  # wall clock, files included
    generate_cpu_seconds: float = 0.0  # CPU time of this process (what "one core" costs on a shared machine)
    total_cpu_seconds: float = 0.0

    @property
    def examples(self) -> int:
        return sum(sum(c.values()) for c in self.counts.values()) + self.episodes

    @property
    def rate(self) -> float:
        """Examples (records + episodes) generated per second, file writing excluded."""
        return self.examples / self.generate_seconds if self.generate_seconds else float("inf")

    def summary(self) -> str:
        lines = [f"wrote {self.out_dir}  (seed {self.seed})"]
        for split, counts in self.counts.items():
            lines.append(
                f"  {split:<10} {sum(counts.values()):>7}  " + "  ".join(f"{k}={v}" for k, v in counts.items())
            )
        lines.append(f"  {'episodes':<10} {self.episodes:>7}")
        lines.append(
            f"generated {self.examples} examples in {self.generate_seconds:.1f} s ({self.rate:,.0f} examples/s; "
            f"CPU {self.generate_cpu_seconds:.1f} s); with writing the files {self.total_seconds:.1f} s "
            f"({self.examples / self.total_seconds:,.0f} examples/s; CPU {self.total_cpu_seconds:.1f} s)"
        )
        return "\n".join(lines)


# ----------------------------------------------------------------------------- schema of the datasets


def _features():
    from datasets import Features, List, Value

    triplets = List(List(Value("string")))
    records = Features(
        {
            "id": Value("string"),
            "type": Value("string"),
            "shape": Value("string"),
            "segments": List({"role": Value("string"), "text": Value("string"), "train": Value("bool")}),
            "gold_triplets": triplets,
            "gold_names": List(Value("string")),
            "memory": triplets,
            "split": Value("string"),
            "source": Value("string"),
            "annotated_relations": List(Value("string")),
            "system": Value("string"),
        }
    )
    episodes = Features(
        {
            "id": Value("string"),
            "turns": List(
                {
                    "user": Value("string"),
                    "kind": Value("string"),
                    "writes": triplets,
                    "answer_names": List(Value("string")),
                    "expected_facts": triplets,
                }
            ),
        }
    )
    return records, episodes


def record_row(record, features) -> dict:
    """A record as a row of the records' columns (a field a record leaves out when unset, as `system`, is null)."""
    data = record.model_dump(mode="json")
    return {k: data.get(k) for k in features}


def dataset_dict_from_jsonl(jsonl_dir: Path, names: list[str]):
    """The DatasetDict of the exported JSONL files (read by Arrow with the explicit schema: fast, and
    the dataset holds exactly what the JSONL holds). "episodes" has its own columns."""
    import pyarrow.json as pj
    from datasets import Dataset, DatasetDict, DatasetInfo

    record_features, episode_features = _features()
    out = {}
    for name in names:
        features = episode_features if name == "episodes" else record_features
        table = pj.read_json(
            jsonl_dir / f"{name}.jsonl",
            read_options=pj.ReadOptions(block_size=1 << 24),
            parse_options=pj.ParseOptions(explicit_schema=features.arrow_schema, unexpected_field_behavior="error"),
        )
        out[name] = Dataset(table.combine_chunks(), info=DatasetInfo(features=features))
    return DatasetDict(out)


def tiny_dataset_dict(train: int, validation: int = 0, *, seed: int = 0):
    """A small in-memory DatasetDict (splits train and, when asked, validation) from the tiny data
    config (configs/data/tiny.yaml: the default mix with small worlds): the records smoke runs,
    benches and tests train on before, and without, a `memlm generate` directory."""
    from datasets import Dataset, DatasetDict, DatasetInfo

    config = DataConfig.load(
        TINY_CONFIG,
        [
            f"splits.train={train}",
            f"splits.validation={validation}",
            "splits.test=0",
            "episodes.count=0",
            f"seed={seed}",
        ],
    )
    _, splits, _ = generate_records(config)
    features, _ = _features()
    return DatasetDict(
        {
            split: Dataset.from_list([record_row(r, features) for r in records], info=DatasetInfo(features=features))
            for split, records in splits.items()
            if records
        }
    )


def schema_sample(schema_file: str | Path | None, records: int = 12, *, seed: int = 0):
    """What a schema generates, small: (config, records, episodes) of the tiny data config fitted to the schema
    as `memlm generate --schema` fits a recipe (`fit_to_schema`: `config.fitted_to_schema` says what it left
    out), without real text. `memlm schema check` prints it. Raises ConfigError for a bad schema."""
    from data_gen.fitting import fit_to_schema
    from data_gen.schema import Schema

    schema = Schema.load(schema_file)
    raw = DataConfig.read_yaml(TINY_CONFIG)
    raw["schema_file"] = None if schema_file is None else str(Path(schema_file).resolve())
    raw["seed"] = seed
    raw["splits"] = {"train": records, "validation": 0, "test": 0}
    raw["world"]["names"] = {
        name: {"train": 30, "validation": 10, "test": 10}
        if spec.pool == "split"
        else {"faker": 30 if any(s.faker for s in spec.names) else 0}
        for name, spec in schema.types.items()
    }
    raw["mix"].update(real=0, verify=0)
    raw["episodes"].update(count=1, pool="train")
    source = f"the tiny data config on {schema_file or 'person-organisation'}"
    notes = fit_to_schema(raw, schema, f"schema {schema.name}")
    config = DataConfig.from_dict(raw, source=source, fitted=notes)
    _, splits, episodes = generate_records(config)
    return config, splits["train"], episodes


# ----------------------------------------------------------------------------- the run


def _check_out(out_dir: Path, overwrite: bool) -> None:
    """`out_dir` may be written: new, empty, or (with overwrite) an earlier `memlm generate` output."""
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out_dir} exists and is not empty (pass --overwrite to replace it)")
        if not (out_dir / "dataset_dict.json").exists():
            raise FileExistsError(f"{out_dir} is not the output of memlm generate; refusing to delete it")


def _install(tmp: Path, out_dir: Path) -> None:
    """Put the finished output in place: the old one (if any) is renamed away first and deleted
    after, so at every moment `out_dir` is either the old output or the new one."""
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def generate_records(config: DataConfig, world: World | None = None, *, progress: Advance | None = None, real=None):
    """Records of every split and the episodes, in memory: (world, {split: records}, episodes).
    Real corpora (`real.sources`) feed the train split only; `real` may pass them in already loaded."""
    world = world or build_world(config)
    real = real if real is not None else load_real_passages(config)
    oracle = MemoryOracle(memory_table(config))
    functional = functional_of(config)
    try:
        splits = {
            split: build_records(
                config,
                world.pools[split],
                oracle,
                functional,
                getattr(config.splits, split),
                progress=progress,
                real=real if split == "train" else None,
            )
            for split in SPLITS
        }
        episodes = build_episodes(
            config, world.pools[config.episodes.pool], oracle, functional, config.episodes.count, progress=progress
        )
    finally:
        oracle.close()
    return world, splits, episodes


def load_real_passages(config: DataConfig) -> RealPassages | None:
    """The real corpora's passages when the mix draws on them (real or verify records), else None."""
    if config.real.sources and (config.mix.real or (config.mix.verify and config.real.verify)):
        return RealPassages.load(config)
    return None


def generate(config: DataConfig, out_dir: str | Path, *, overwrite: bool = False, show_progress: bool = True) -> Report:
    """Generate everything `config` asks for into `out_dir` (see the module docstring)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    out_dir = Path(out_dir)
    _check_out(out_dir, overwrite)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))  # a crash leaves the old output
    total = sum(getattr(config.splits, s) for s in SPLITS) + config.episodes.count
    # Millions of small objects and no reference cycles: the cyclic GC would rescan the growing heap
    # again and again (~30% of the run), so it is paused for the run.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start, start_cpu = time.perf_counter(), time.process_time()
        with Progress(
            TextColumn("generating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
            disable=not show_progress,
        ) as bar:
            task = bar.add_task("generate", total=total)
            real = load_real_passages(config)
            world, splits, episodes = generate_records(config, progress=lambda n: bar.advance(task, n), real=real)
        generated, generated_cpu = time.perf_counter(), time.process_time()
        write_outputs(config, tmp, world, splits, episodes, real)
        _install(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if gc_was_enabled:
            gc.enable()
    report = Report(
        out_dir=out_dir,
        seed=config.seed,
        counts={s: _type_counts(rs) for s, rs in splits.items()},
        shapes={s: _shape_counts(rs) for s, rs in splits.items()},
        episodes=len(episodes),
        generate_seconds=generated - start,
        total_seconds=time.perf_counter() - start,
        generate_cpu_seconds=generated_cpu - start_cpu,
        total_cpu_seconds=time.process_time() - start_cpu,
    )
    return report


def write_outputs(
    config: DataConfig,
    out_dir: Path,
    world: World,
    splits: dict[str, list[Record]],
    episodes: list[Episode],
    real: RealPassages | None = None,
) -> None:
    import datasets

    jsonl = out_dir / "jsonl"
    jsonl.mkdir(exist_ok=True)
    for split, records in splits.items():
        write_jsonl(jsonl / f"{split}.jsonl", records)
    write_jsonl(jsonl / "episodes.jsonl", episodes)
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        names = [split for split, records in splits.items() if records] + (["episodes"] if episodes else [])
        dataset_dict_from_jsonl(jsonl, names).save_to_disk(str(out_dir))  # (Arrow has no empty JSONL table)
    finally:
        if was_enabled:
            datasets.enable_progress_bars()
    (out_dir / "world.json").write_text(
        json.dumps(world.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    config.save(out_dir / "config.yaml", [f"fitted to its schema: {note}" for note in config.fitted_to_schema])
    (out_dir / "schema.yaml").write_text(config.data_schema.to_yaml(), encoding="utf-8")
    # the memory's relation table of this schema: runs trained on this data keep it (training), and a
    # trained model's memory is opened with it (MemoryConfig.of_model)
    schema = config.data_schema
    entries = {"relations": schema.table(), **({"open_relations": True} if schema.open_relations else {})}
    table = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True)
    (out_dir / RELATION_TABLE_FILE).write_text(table, encoding="utf-8")
    (out_dir / "README.md").write_text(dataset_card(config, world, splits, episodes, real), encoding="utf-8")


def _type_counts(records: list[Record]) -> dict[str, int]:
    counts = Counter(kind_of(r) for r in records)
    return {k: counts[k] for k in RECORD_KINDS if counts[k]}


def _shape_counts(records: list[Record]) -> dict[str, int]:
    counts = Counter(r.shape for r in records if r.shape)
    return {k: counts[k] for k in READ_SHAPES if counts[k]}


# ----------------------------------------------------------------------------- the dataset card


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _real_section(config: DataConfig, real: RealPassages | None) -> str:
    if real is None:
        return "No real corpus: every record is synthetic."
    rows = [
        [f"`{source.path}`", source.format, source.weight, len(records), real.dropped.get(source.path, 0)]
        for source, records in real.by_source
    ]
    return (
        "Real annotated text (`real.sources`), in the train split only (records keep their corpus in `source`):\n\n"
        + _table(["file", "format", "weight", "passages", "left out (dev text)"], rows)
        + f"\n\n{config.real.reads:.0%} of real passages that state a fact are then asked about; "
        f"{config.real.verify:.0%} of verify records use a real passage. A passage containing a dev passage of "
        "`data/real/` (or contained in one) is left out: what `memlm eval` measures on is never trained on."
    )


def dataset_card(
    config: DataConfig,
    world: World,
    splits: dict[str, list[Record]],
    episodes: list[Episode],
    real: RealPassages | None = None,
) -> str:
    import datasets
    import faker

    types = [k for k in RECORD_KINDS if getattr(config.mix, k)]
    type_rows = []
    for split, records in splits.items():
        counts = Counter(kind_of(r) for r in records)
        type_rows.append([split, len(records), *(counts[k] for k in types)])
    type_rows.append(
        [
            "all",
            sum(len(r) for r in splits.values()),
            *(sum(1 for rs in splits.values() for r in rs if kind_of(r) == k) for k in types),
        ]
    )
    shape_rows = []
    for split, records in splits.items():
        for kind in ("read", "unanswerable", "update"):
            counts = Counter(r.shape for r in records if r.type == kind)
            if counts:
                shape_rows.append([split, kind, *(counts[s] for s in READ_SHAPES)])
    turns = Counter(t.kind for e in episodes for t in e.turns)
    unanswerable = sum(1 for e in episodes for t in e.turns if t.kind == "question" and t.answer_names == [])
    schema = config.data_schema
    plurals = list(world.plurals.values())
    pools = [[s, *(len(p.names[t]) for t in world.plurals)] for s, p in world.pools.items()]
    disjoint = ", ".join(schema.plural(t) for t, spec in schema.types.items() if spec.pool == "split") or "none"
    held_out = ", ".join(f"{len(names)} {world.plurals[t]}" for t, names in world.test_only.items()) or "no names"
    unseen = {name for names in world.test_only.values() for name in names}
    test = splits.get("test", [])
    n_unseen = sum(1 for r in test if any(t[0] in unseen or t[2] in unseen for t in [*r.memory, *r.gold_triplets]))
    return f"""# memlm synthetic memory data

Worlds of the schema's entity types and relations, and training examples for a model with an explicit
read-write triplet memory (RET-LLM style), generated by `memlm generate` (package `data_gen`).

- seed: **{config.seed}** — the same config and seed give byte-identical files
- generator: faker {faker.VERSION}, datasets {datasets.__version__}
- schema: {config.data_schema.name}; templated relations: {", ".join(r.name for r in config.data_schema.phrased())}

## Files

| path | what |
|---|---|
| `dataset_dict.json`, `train/`, `validation/`, `test/`, `episodes/` | Hugging Face `DatasetDict` (`datasets.load_from_disk`) |
| `jsonl/train.jsonl`, `jsonl/validation.jsonl`, `jsonl/test.jsonl` | the same records, one `memory_runtime.records.Record` per line |
| `jsonl/episodes.jsonl` | episodes, one `data_gen.episodes.Episode` per line (the format of the eval's `episodes=`) |
| `world.json` | the names of each type per split (a type drawn per split: disjoint pools), the test-only names of shared types |
| `config.yaml` | the config of this run |
| `schema.yaml` | the schema of this run: entity types, relations, phrasings |
| `relations.yaml` | the memory's relation table of the schema; a run trained on this data keeps it |

## Counts

Records per type and split:

{_table(["split", "total", *types], type_rows)}

Query shapes (read = answerable, unanswerable = nothing stored, update = the question after the update):

{_table(["split", "type", *READ_SHAPES], shape_rows)}

Episodes: {len(episodes)} from the {config.episodes.pool} pool — {turns["statement"]} statement, {turns["update"]} update
and {turns["question"]} question turns ({unanswerable} unanswerable).

Name pools ({disjoint} disjoint across splits; {held_out} only in test):

{_table(["split", *plurals], pools)}

{n_unseen} of {len(test)} test records involve a name never seen in training (`world.json` lists
them under {", ".join(f"`test_only_{world.plurals[t]}`" for t in world.test_only) or "nothing"}).

## Record conventions

Segments: `user` (what the user typed, not trained), `assistant` (the model's calls and answers,
trained), `memory` (results the controller inserts after a read, not trained). Every record ends
with a trained assistant segment; the training tokenizer appends the end-of-turn.

| type | segments (* = trained) |
|---|---|
| write | user statement, *write calls (one per person, space-separated), *" {config.replies.ack}" |
| negative | user statement with no fact, *"{config.replies.nothing}" |
| injection | user text carrying call syntax for a fact it does not state (a pasted call, results, a bare triplet) beside a statement or alone, *the statement's write calls and *" {config.replies.ack}", or *"{config.replies.nothing}" |
| passage | realistic statement (apposition, possessive, passive, distractors; data_gen/passages.py), *write calls in the order the facts appear, *" {config.replies.ack}" |
| read | user question, *read call, memory results, *" answer" listing every name (Oxford comma) |
| unanswerable | user question, *read call, memory " NONE]", *" {config.replies.unknown}" |
| update | user update, *write call, *" {config.replies.ack}", user question, *read call, memory, *" answer" (the new fact: the store superseded the old one) |
| two_hop | user question, *read ⟨per,rel⟩, memory, *" " read ⟨rel,org⟩, memory, *" answer" |
| real | a real corpus passage: *its write calls and *" {config.replies.ack}", or *"{config.replies.nothing}"; some then a question about it (type `read`) |
| verify | a passage and a fact, "Does the text above state this fact …?", *"Yes" or *"No" (the write gate's verify pass) |

## Real corpora

{_real_section(config, real)}

`memory` holds the writes made before the record starts; the results in memory segments are exactly
what `memory_runtime.memory.store.TripletStore` returns for them. `gold_triplets`: the facts a write or
update states, or the facts an answer rests on; `gold_names`: the names a correct answer lists.

## Config

```yaml
{config.to_yaml().rstrip()}
```
"""
