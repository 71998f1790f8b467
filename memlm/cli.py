"""The `memlm` command line: thin wrappers that parse arguments and call one package function."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from eval.parts import NAMES as EVAL_PARTS
from memory_runtime.runtime import ENGINE_HELP, Engine

app = typer.Typer(
    help="memlm: teach language models to use an explicit read-write triplet memory.",
    no_args_is_help=True,
    add_completion=False,
)
bench_app = typer.Typer(help="Benchmarks that print their figures as one JSON line.", no_args_is_help=True)
memory_app = typer.Typer(
    help="Inspect, edit and migrate a memory database (an SQLite file or a postgresql:// URL).", no_args_is_help=True
)
# Warnings every run would print and no user can act on (library internals); also set in the
# environment so that eval's worker processes inherit them.
QUIET_WARNINGS = (
    ("`is_gradient_checkpointing` is deprecated", FutureWarning),
    ("'pin_memory' argument is set as true but no accelerator", UserWarning),
    # transformers 5.24 renamed the forward's `past_key_values` to `cache` (the old name goes in 5.40),
    # but the pin (transformers>=5.17) still allows versions without `cache`, so memory_runtime passes
    # the old name. Remove this line when the pin's floor is 5.24 or later and the forward calls of
    # memory_runtime (hf_backend, batching, batch_cache) pass `cache=`.
    ("`past_key_values` is deprecated", FutureWarning),
)


@app.callback()
def _quiet_known_warnings() -> None:
    import os
    import re
    import warnings

    specs = [f"ignore:{message}:{category.__name__}" for message, category in QUIET_WARNINGS]
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), *specs]))
    for message, category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)


app.add_typer(bench_app, name="bench")
app.add_typer(memory_app, name="memory")
feedback_app = typer.Typer(
    help="Review the feedback chat and serve kept (DIR/pending/): nothing trains until it is accepted.",
    no_args_is_help=True,
)
app.add_typer(feedback_app, name="feedback")

console = Console(stderr=True)
DB = typer.Option(
    ..., "--db", help="The memory: an SQLite file, or a postgresql:// URL (pip install 'memlm[postgres]')."
)
NAMESPACE = typer.Option("default", "--namespace", "-n", help="Whose memory: a user or session name.")
CONFIG = typer.Option(None, "--config", help="Memory config YAML (relation table, fuzzy settings).")
SUBJECT = typer.Option(None, "--subject", "-s", help="Subject (a person), or leave empty.")
RELATION = typer.Option(None, "--relation", "-r", help="Relation (aliases allowed), or leave empty.")
OBJECT = typer.Option(None, "--object", "-o", help="Object (an organisation), or leave empty.")


PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _find_config(path: Path | None) -> Path | None:
    """A config path as given, or, when it is relative and not found from the working directory, the
    shipped file of that name in the memlm checkout: `--config configs/train/cpu-smollm2.yaml` works
    from any directory."""
    if path is None or path.exists() or path.is_absolute() or not (PROJECT_ROOT / path).exists():
        return path
    return PROJECT_ROOT / path


def _default_feedback_dir(db: str) -> Path:
    """Beside an SQLite file (its name + '-feedback'); for a PostgreSQL memory, ./memlm-feedback."""
    from memory_runtime.databases import is_postgres

    return Path("memlm-feedback") if is_postgres(db) else Path(db).with_name(Path(db).stem + "-feedback")


def _store(db: str, config: Path | None, must_exist: bool = True):
    from memory_runtime.databases import is_postgres
    from memory_runtime.store import MemoryConfig, TripletStore

    if must_exist and not is_postgres(db) and not Path(db).exists():
        raise typer.BadParameter(f"{db} does not exist", param_hint="--db")
    try:
        return TripletStore(db, MemoryConfig.load(_find_config(config)))
    except (ValueError, OSError) as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None


def _print_facts(facts, title: str) -> None:
    table = Table(title=title)
    for column in ("id", "subject", "relation", "object", "valid from", "valid to", "ended by"):
        table.add_column(column)
    for f in facts:
        table.add_row(
            str(f.id),
            f.subject,
            f.relation,
            f.object,
            f"{f.valid_from:.0f}",
            "" if f.valid_to is None else f"{f.valid_to:.0f}",
            f.ended_by or "",
        )
    Console().print(table)


@bench_app.command("memory")
def bench_memory(
    triplets: int = typer.Option(100_000, "--triplets", min=100, help="How many triplets to ingest."),
    namespaces: int = typer.Option(1, "--namespaces", min=1, help="Spread the triplets over this many namespaces."),
    queries: int = typer.Option(1000, "--queries", min=10, help="Exact and one-typo queries to time."),
    batch: int = typer.Option(10_000, "--batch", min=1, help="Writes per transaction while ingesting."),
    seed: int = typer.Option(0, "--seed"),
    config: Path | None = CONFIG,
    db: str | None = typer.Option(
        None,
        "--db",
        help="An empty postgresql:// database to measure (emptied again "
        "after; default: a temporary SQLite file). PostgreSQL also times pg_trgm.",
    ),
) -> None:
    """Ingest speed, exact and fuzzy lookup latency, recall, and fuzzy vs brute-force scans."""
    from rich.progress import Progress

    from eval.bench_memory import run_memory_bench
    from memory_runtime.store import MemoryConfig

    try:
        memory_config = MemoryConfig.load(_find_config(config))
    except ValueError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("ingesting", total=triplets)
        try:
            result = run_memory_bench(
                triplets,
                namespaces,
                queries,
                seed=seed,
                batch=batch,
                db=db,
                config=memory_config,
                progress=lambda done: bar.update(task, completed=done),
            )
        except ValueError as err:  # a memory that is not empty, or not reachable
            _fail(err)
    print(json.dumps(result))


# ----------------------------------------------------------------------------- training

DEVICE = typer.Option(
    "auto", "--device", help="auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda, cuda:N."
)
DTYPE = typer.Option(
    "auto",
    "--dtype",
    help="auto (bfloat16 on GPUs and on CPUs that multiply it natively, else float32), float32, bfloat16, float16.",
)

TRAIN_CONFIG = typer.Option(..., "--config", help="Training config YAML (configs/train/*.yaml).")
OVERRIDES = typer.Argument(
    None, help="Config overrides as dotted key=value, e.g. optim.learning_rate=1e-4.", show_default=False
)


def _fail(err: Exception) -> None:
    """Print an error (its text may contain [brackets]: no rich markup) and exit with status 2."""
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(str(err))}", soft_wrap=True)
    raise typer.Exit(2)


def _log(line: str) -> None:
    """A progress line on stderr, never wrapped or marked up."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _quiet_training_logs() -> None:
    """DeepSpeed guesses the accelerator at import and warns on every CPU run; tell it instead."""
    import os

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def _train_config(
    config: Path,
    overrides: list[str] | None,
    data: str | None = None,
    output_dir: str | None = None,
    max_steps: int | None = None,
    max_minutes: float | None = None,
    fresh: bool = False,
):
    """Load + validate a training config (flags win over key=value overrides); exit 2 on errors."""
    from training.config import ConfigError, load_config

    items = list(overrides or [])
    if max_minutes is not None:
        items.append(f"optim.max_minutes={max_minutes}")
    if fresh:
        items.append("output.resume_from_checkpoint=false")
    if data is not None:
        items.append(f"data.path={json.dumps(data)}")
        items.append("data.synthetic=null")
    if output_dir is not None:
        items.append(f"output.output_dir={json.dumps(output_dir)}")
    if max_steps is not None:
        items.append(f"optim.max_steps={max_steps}")
    try:
        return load_config(_find_config(config), items)
    except ConfigError as err:
        _fail(err)


@app.command("train")
def train_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = OVERRIDES,
    data: str | None = typer.Option(None, "--data", help="DatasetDict saved by data_gen (sets data.path)."),
    output_dir: str | None = typer.Option(None, "--output-dir", help="Sets output.output_dir."),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Sets optim.max_steps."),
    max_minutes: float | None = typer.Option(
        None,
        "--max-minutes",
        min=0.01,
        help="Sets optim.max_minutes: a wall-clock budget; the schedule is shortened to the steps that fit.",
    ),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="Start over, deleting the output dir's checkpoints (by default "
        "a run resumes from a checkpoint of the same config there).",
    ),
) -> None:
    """Fine-tune a model to emit memory calls (LoRA / QLoRA / full, as configured).

    Resumes by default when --output-dir holds a checkpoint of the same config; model.dtype auto
    picks bfloat16 only where this machine multiplies it natively (the log says which and why)."""
    import logging

    from training.config import ConfigError
    from training.trainer import is_main_process, train

    cfg = _train_config(config, overrides, data, output_dir, max_steps, max_minutes, fresh)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _quiet_training_logs()
    try:
        result = train(cfg, log=_log)
    except (ConfigError, ValueError, FileNotFoundError) as err:  # bad config, data or model: one line, no traceback
        _fail(err)
    keep = (
        "train_loss",
        "eval_loss",
        "eval_mean_token_accuracy",
        "train_runtime",
        "global_step",
        "dtype",
        "budget",
        "distributed",
    )
    if is_main_process():
        print(json.dumps({"output_dir": str(result.output_dir), **{k: result.metrics.get(k) for k in keep}}))


@app.command("inspect")
def inspect_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = OVERRIDES,
    data: str | None = typer.Option(None, "--data", help="DatasetDict saved by data_gen (sets data.path)."),
    n: int = typer.Option(3, "--n", min=1, help="How many records to show."),
    split: str | None = typer.Option(None, "--split", help="Split to read (default: data.train_split)."),
) -> None:
    """Show how records are tokenised: every token with its label (-100 = not trained)."""
    from rich.text import Text

    from memory_runtime.models import load_tokenizer
    from training.data import _row_to_record, load_record_splits
    from training.tokenize import RecordError, format_token_table, tokenize_record

    cfg = _train_config(config, overrides, data)
    if split is not None:
        cfg.data.train_split = split
    if cfg.data.synthetic is not None:
        cfg.data.synthetic.train = min(cfg.data.synthetic.train, n)
    try:
        rows = load_record_splits(cfg)["train"]
    except (ValueError, OSError) as err:
        _fail(err)
    tokenizer = load_tokenizer(cfg.model.name, local_files_only=cfg.model.local_files_only)
    out = Console()
    for i in range(min(n, len(rows))):
        record = _row_to_record(rows[i])
        try:
            enc = tokenize_record(record, tokenizer, system_prompt=cfg.data.system_prompt)
        except RecordError as err:
            out.print(Text(f"record {record.id}: {err}", style="red"))
            continue
        trained = sum(1 for x in enc["labels"] if x != -100)
        out.rule(f"record {record.id} ({record.type}): {len(enc['input_ids'])} tokens, {trained} trained")
        line = Text()
        for tid, text, label, is_trained in format_token_table(enc, tokenizer):
            line.append(repr(text)[1:-1], style="bold green" if is_trained else "dim")
            line.append(f"({label}, {tid}) ", style="green" if is_trained else "dim")
        out.print(line, soft_wrap=True)
        labelled = [t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab != -100]
        trained_text = tokenizer.decode(labelled, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        out.print(Text("trained text: ", style="bold") + Text(repr(trained_text)), soft_wrap=True)


@bench_app.command("train")
def bench_train_command(
    config: Path = TRAIN_CONFIG,
    overrides: list[str] | None = OVERRIDES,
    data: str | None = typer.Option(None, "--data", help="DatasetDict saved by data_gen (default: templated records)."),
    steps: int = typer.Option(6, "--steps", min=1, help="Timed optimizer steps per mode."),
    warmup: int = typer.Option(1, "--warmup", min=0, help="Untimed warm-up steps per mode (and round)."),
    rounds: int = typer.Option(
        1,
        "--rounds",
        min=1,
        help="Modes take turns this many times (A B A B ...); each "
        "mode's figures sum its rounds, so drift in the machine's speed cancels out.",
    ),
    modes: str = typer.Option(
        "none,padding_free",
        "--modes",
        help="Comma-separated: none (padded), grouped (padded, similar lengths), padding_free, bfd.",
    ),
    dtypes: str = typer.Option(
        "",
        "--dtypes",
        help="Comma-separated base-weight dtypes to time side by side, e.g. "
        "auto,float32,bfloat16 (default: model.dtype of the config).",
    ),
    batches: str = typer.Option(
        "",
        "--batches",
        help="Comma-separated batchings to time side by side: a record "
        "count per step (16) or a token budget per step (tokens=2048), e.g. 4,16,tokens=2048 "
        "(default: the config's).",
    ),
    random_init: str | None = typer.Option(
        None,
        "--random-init",
        help="A model config.json (or its directory): "
        "time that architecture with random weights and the embedded model's "
        "tokenizer (e.g. configs/models/qwen2.5-7b-instruct.json).",
    ),
) -> None:
    """Training throughput (trained and total tokens/s) and peak memory, padded vs padding-free."""
    from training.bench import bench_train
    from training.config import ConfigError

    cfg = _train_config(config, overrides, data)
    _quiet_training_logs()
    try:
        result = bench_train(
            cfg,
            steps=steps,
            warmup_steps=warmup,
            modes=[m.strip() for m in modes.split(",") if m.strip()],
            rounds=rounds,
            dtypes=[d.strip() for d in dtypes.split(",") if d.strip()],
            batches=[b.strip() for b in batches.split(",") if b.strip()],
            random_init=str(_find_config(Path(random_init))) if random_init else None,
            log=_log,
        )
    except (ConfigError, ValueError) as err:
        _fail(err)
    rounds_note = f", {rounds} rounds" if rounds > 1 else ""
    table = Table(title=f"training throughput ({result['device']}{rounds_note})")
    for column in (
        "mode",
        "records/step",
        "trained tok/s",
        "tokens/s",
        "positions/s",
        "s/step",
        "peak MB",
        "MFU",
        "GPU %",
    ):
        table.add_column(column)
    for mode, r in result["modes"].items():
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "–"
        util = f"{r['gpu_utilisation_pct']:.0f}" if r.get("gpu_utilisation_pct") is not None else "–"
        table.add_row(
            mode,
            f"{r['records_per_step']:.1f}",
            f"{r['trained_tokens_per_s']:.0f}",
            f"{r['tokens_per_s']:.0f}",
            f"{r['padded_positions_per_s']:.0f}",
            f"{r['step_s']:.2f}",
            f"{r['peak_mem_mb']:.0f}",
            mfu,
            util,
        )
    console.print(table)
    print(json.dumps(result))


@app.command("merge")
def merge_command(
    adapter: Path = typer.Argument(..., help="A PEFT adapter directory (e.g. a memlm train output dir)."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the merged model."),
    base: str | None = typer.Option(None, "--base", help="Base model (default: the one the adapter records)."),
    dtype: str = typer.Option("float32", "--dtype", help="float32 | bfloat16 | float16"),
) -> None:
    """Merge a LoRA/QLoRA adapter into its base model and save a plain HF model."""
    from training.merge import merge_adapter

    try:
        out = merge_adapter(adapter, output, base=base, dtype=dtype)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        _fail(err)
    console.print(f"merged {adapter} into {out}")


@memory_app.command("facts")
def memory_facts(
    db: str = DB,
    namespace: str = NAMESPACE,
    config: Path | None = CONFIG,
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """List the current facts of a namespace."""
    with _store(db, config) as store:
        facts = store.facts(namespace)
    if as_json:
        for f in facts:
            print(json.dumps(f.__dict__))
    else:
        _print_facts(facts, f"{len(facts)} facts of {namespace!r}")


@memory_app.command("query")
def memory_query(
    db: str = DB,
    subject: str | None = SUBJECT,
    relation: str | None = RELATION,
    object: str | None = OBJECT,
    namespace: str = NAMESPACE,
    config: Path | None = CONFIG,
) -> None:
    """Ask the memory as a model's MEM_READ would (exact first, then fuzzy)."""
    with _store(db, config) as store:
        try:
            result = store.query(subject, relation, object, namespace=namespace)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    for m in result.fuzzy.values():
        console.print(f"fuzzy {m.field}: {m.asked!r} -> {m.matched!r} (Jaccard {m.score:.2f})")
    _print_facts(result.facts, f"{len(result)} matching facts")


@memory_app.command("history")
def memory_history(
    db: str = DB,
    subject: str | None = SUBJECT,
    relation: str | None = RELATION,
    object: str | None = OBJECT,
    namespace: str = NAMESPACE,
    config: Path | None = CONFIG,
) -> None:
    """Every version of the matching facts, superseded and forgotten ones included."""
    with _store(db, config) as store:
        facts = store.history(subject, relation, object, namespace=namespace)
    _print_facts(facts, f"history: {len(facts)} versions")


@memory_app.command("write")
def memory_write(
    subject: str,
    relation: str,
    object: str,
    db: str = DB,
    namespace: str = NAMESPACE,
    config: Path | None = CONFIG,
) -> None:
    """Store one fact by hand (the database is created if it does not exist)."""
    with _store(db, config, must_exist=False) as store:
        try:
            result = store.write(subject, relation, object, namespace=namespace)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    console.print(
        f"{result.status}: {result.fact.triplet}" + "".join(f"\n  supersedes {f.triplet}" for f in result.superseded)
    )


@memory_app.command("forget")
def memory_forget(
    db: str = DB,
    subject: str | None = SUBJECT,
    relation: str | None = RELATION,
    object: str | None = OBJECT,
    namespace: str = NAMESPACE,
    purge: bool = typer.Option(False, "--purge", help="Delete every version for good instead of ending them."),
    config: Path | None = CONFIG,
) -> None:
    """End (or with --purge, erase) the facts that match exactly."""
    with _store(db, config) as store:
        try:
            n = store.forget(subject, relation, object, namespace=namespace, purge=purge)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"{'purged' if purge else 'forgot'} {n} fact(s)")


@memory_app.command("migrate")
def memory_migrate(
    src: str = typer.Argument(..., help="The memory to copy: an SQLite file or a postgresql:// URL."),
    dst: str = typer.Argument(..., help="An empty memory to copy into (SQLite file, created; or postgresql:// URL)."),
) -> None:
    """Copy a memory between SQLite and PostgreSQL, every version with its id, then verify it row by row."""
    from memory_runtime.databases import is_postgres
    from memory_runtime.migrate import migrate

    if not is_postgres(src) and not Path(src).exists():
        _fail(FileNotFoundError(f"{src} does not exist"))
    try:
        done = migrate(src, dst)
    except (ValueError, OSError) as err:
        _fail(err)
    console.print(
        f"copied and verified {done.rows:,} facts of {done.namespaces} namespaces in {done.seconds:.1f} s",
        markup=False,
    )


@app.command("generate")
def generate(
    config: Path = typer.Option(Path("configs/data/default.yaml"), "--config", help="Data config YAML."),
    overrides: list[str] | None = OVERRIDES,
    out: Path = typer.Option(
        ..., "--out", help="Output directory (DatasetDict, JSONL, README.md card, config.yaml: the resolved config)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Override the config's seed."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier output in --out."),
) -> None:
    """Generate memory training data: train/validation/test records and episodes from synthetic worlds,
    and from real annotated corpora where the config names some (real.sources; the default config
    trains on the KnowledgeNet passages of data/real_train/)."""
    from data_gen.generate import generate_from_file

    try:
        report = generate_from_file(
            _find_config(config), out, seed=seed, overrides=overrides or [], overwrite=overwrite
        )
    except (ValueError, OSError) as err:  # a bad config or corpus (named in the message), an existing --out
        _fail(err)
    console.print(report.summary(), markup=False, highlight=False, soft_wrap=True)


# ----------------------------------------------------------------------------- feedback review

FEEDBACK_DIR = typer.Option(..., "--dir", help="A feedback directory (chat's --feedback-dir, serve's feedback_dir).")
FEEDBACK_NAMESPACE = typer.Option(None, "--namespace", "-n", help="Only this user's (namespace's) trajectories.")


@feedback_app.command("list")
def feedback_list(
    directory: Path = FEEDBACK_DIR,
    namespace: str | None = FEEDBACK_NAMESPACE,
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """The trajectories waiting for review: id, namespace, what the user said, what would be trained."""
    from learning_loop.review import summary

    try:
        rows = summary(directory, namespace)
    except (OSError, ValueError) as err:
        _fail(err)
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return
    table = Table(title=f"{len(rows)} pending in {directory}")
    for column in ("id", "namespace", "user", "trained"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(str(row[k]) for k in ("id", "namespace", "user", "trained")))
    Console().print(table)


def _decide(directory: Path, ids: list[str] | None, every: bool, namespace: str | None, accept: bool) -> None:
    from learning_loop.review import decide

    if bool(ids) == every:
        _fail(ValueError("name the trajectories to decide on (IDS) or pass --all, not both"))
    try:
        moved = decide(directory, None if every else ids, accept=accept, namespace=namespace)
    except (OSError, ValueError) as err:
        _fail(err)
    where = directory / ("accepted.jsonl" if accept else "rejected.jsonl")
    console.print(f"{'accepted' if accept else 'rejected'} {len(moved)} trajectories: {where}")


@feedback_app.command("accept")
def feedback_accept(
    ids: list[str] | None = typer.Argument(None, help="Trajectory ids (from `memlm feedback list`)."),
    directory: Path = FEEDBACK_DIR,
    every: bool = typer.Option(False, "--all", help="Every pending trajectory (of --namespace, if given)."),
    namespace: str | None = FEEDBACK_NAMESPACE,
) -> None:
    """Move trajectories to DIR/accepted.jsonl: `memlm train ... 'data.extra_jsonl=[DIR/accepted.jsonl]'`."""
    _decide(directory, ids, every, namespace, accept=True)


@feedback_app.command("reject")
def feedback_reject(
    ids: list[str] | None = typer.Argument(None, help="Trajectory ids (from `memlm feedback list`)."),
    directory: Path = FEEDBACK_DIR,
    every: bool = typer.Option(False, "--all", help="Every pending trajectory (of --namespace, if given)."),
    namespace: str | None = FEEDBACK_NAMESPACE,
) -> None:
    """Move trajectories to DIR/rejected.jsonl: kept for the record, never trained on."""
    _decide(directory, ids, every, namespace, accept=False)


# ----------------------------------------------------------------------------- eval


def _flag_overrides(**flags: object) -> list[str]:
    """``key=value`` overrides for the flags that were given (None: not given), as YAML values."""
    return [f"{key}={json.dumps(value)}" for key, value in flags.items() if value is not None]


def _csv(value: str | None) -> list[str] | None:
    return None if value is None else [item.strip() for item in value.split(",") if item.strip()]


@app.command("eval")
def eval_command(
    model: str | None = typer.Option(
        None,
        "--model",
        help="A training run directory (adapter), or a base model "
        "(embedded:SmolLM2-135M-Instruct, a hub id, a local path). Required, here "
        "or in the config.",
    ),
    data: Path | None = typer.Option(
        None, "--data", help="A `memlm generate` output directory: its test records and episodes are evaluated."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Report directory: metrics.json, report.md, PNG plots, cases.jsonl, "
        "eval_config.yaml (the resolved config).",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="Eval config YAML (configs/eval/default.yaml lists "
        "every field); flags and key=value overrides win over it.",
    ),
    overrides: list[str] | None = OVERRIDES,
    base: str | None = typer.Option(
        None,
        "--base",
        help="Base model of the baselines (default: the adapter's base, run with the adapter switched off).",
    ),
    episodes: Path | None = typer.Option(
        None,
        "--episodes",
        help="Episodes JSONL to run end to end (the format "
        "is documented in data_gen/episodes.py; default: DATA/jsonl/episodes.jsonl).",
    ),
    real: Path | None = typer.Option(
        None,
        "--real",
        help="Real-text JSONL (Re-DocRED or KnowledgeNet format) "
        "or directory (default: data/real/ in the repository, dev data never trained on).",
    ),
    systems: str | None = typer.Option(
        None,
        "--systems",
        help="Comma-separated: memlm (the model with memory), "
        "few_shot (base + memory + API examples), zero_shot (base, facts in the "
        "prompt, no memory). Default: all three.",
    ),
    parts: str | None = typer.Option(
        None, "--parts", help=f"Comma-separated subset of {','.join(EVAL_PARTS)} (default: all)."
    ),
    limit: int | None = typer.Option(
        None,
        "--limit",
        min=1,
        help="At most N records per category, N episodes, N passages per real source (quick runs).",
    ),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed (default 0; decoding is greedy)."),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", min=8, help="Generated tokens per turn (default 128)."
    ),
    baseline_max_new_tokens: int | None = typer.Option(
        None,
        "--baseline-max-new-tokens",
        min=8,
        help="Generated tokens per turn of the baselines (default 64: the base model rambles past its answer).",
    ),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="torch CPU threads per process (default: one per core, or 1 with --workers)."
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="Processes evaluating cases in parallel, "
        "each with its own copy of the model (default 1; CPU: 2 workers of 1 "
        "thread do more than 1 worker of 2).",
    ),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        min=1,
        help="Turns decoded at once per process (the same greedy results as 1; default: 64 on a GPU, 8 on the CPU).",
    ),
    device: str | None = typer.Option(
        None, "--device", help="auto (default: a CUDA GPU when one is visible, else the CPU), cpu, cuda, cuda:N."
    ),
    dtype: str | None = typer.Option(
        None,
        "--dtype",
        help="auto (default: bfloat16 on GPUs and on CPUs that "
        "multiply it natively, else float32), float32, bfloat16, float16.",
    ),
    copy_fields: bool | None = typer.Option(
        None,
        "--copy-fields/--free-fields",
        help="Decode the names in calls "
        "copied from the conversation and their relations from the relation "
        "table, as chat and serve do (the default; --free-fields: the "
        "model's own spelling, to measure the model alone).",
    ),
    memory_config: Path | None = typer.Option(
        None, "--memory-config", help="Memory config YAML (relation table, fuzzy settings; default: the shipped one)."
    ),
) -> None:
    """Measure calls, answers, episodes, typo robustness and real-text writes, against baselines."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from eval.report import headline, markdown_table, verdict_lines
    from eval.run import load_eval_config, run_eval
    from memory_runtime.store import MemoryConfig

    def path(value: Path | None) -> str | None:
        return None if value is None else str(_find_config(value))

    items = [
        *(overrides or []),
        *_flag_overrides(
            model=model,
            base=base,
            data=None if data is None else str(data),
            episodes=None if episodes is None else str(episodes),
            real=None if real is None else str(real),
            systems=_csv(systems),
            parts=_csv(parts),
            limit=limit,
            seed=seed,
            max_new_tokens=max_new_tokens,
            baseline_max_new_tokens=baseline_max_new_tokens,
            threads=threads,
            workers=workers,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            copy_fields=copy_fields,
            memory_config=path(memory_config),
        ),
    ]
    try:
        cfg = load_eval_config(_find_config(config), items)
        memory = MemoryConfig.load(cfg.memory_config)
    except ValueError as err:
        _fail(err)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
    ) as bar:

        def progress(description: str, total: int):
            task = bar.add_task(description, total=total)
            return lambda: bar.advance(task)

        try:
            summary = run_eval(cfg, out, memory_config=memory, progress=progress)
        except (FileNotFoundError, ValueError) as err:
            _fail(err)
    print(markdown_table(headline(summary)))
    print("\n".join(verdict_lines(summary, cfg.model_dump())))
    console.print(f"report: {out / 'report.md'}  metrics: {out / 'metrics.json'}")


# ---- serving and chat

SERVE_CONFIG = Path("configs/serve/default.yaml")
MODEL = typer.Option(
    "embedded:SmolLM2-135M-Instruct",
    "--model",
    "-m",
    help="Model: a `memlm train` run directory (PEFT adapter), a Hugging Face model directory or hub id, "
    "or embedded:SmolLM2-135M-Instruct (the default base model, shipped in a package).",
)
SERVE_DB = typer.Option(..., "--db", help="The memory: an SQLite file (created if missing) or a postgresql:// URL.")


def _serve_config(path: Path, overrides: list[str] | None = None):
    """Load a serve config; the default path falls back to the copy beside this package (run from anywhere)."""
    from memory_runtime.serving.config import ServeConfig, ServeConfigError

    try:
        return ServeConfig.load(_find_config(path), overrides or [])
    except ServeConfigError as err:
        _fail(err)


@app.command("serve")
def serve_command(
    model: str = MODEL,
    db: str = typer.Option(
        ...,
        "--db",
        help="The memory: an SQLite file (created if missing) or a postgresql:// URL, which several servers may "
        "share; every user's facts, one namespace per API key.",
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Interface to listen on: 127.0.0.1 is this machine only; "
        "0.0.0.0 is every interface (remove the demo key first).",
    ),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port to listen on."),
    config: Path = typer.Option(
        SERVE_CONFIG,
        "--config",
        help="Serve config YAML: API keys -> namespaces "
        "(also from an env variable or a file), limits, "
        "default sampling; see its comments.",
    ),
    log_level: str = typer.Option(
        "info", "--log-level", help="uvicorn's log level: critical, error, warning, info, debug, trace."
    ),
    overrides: list[str] | None = OVERRIDES,
) -> None:
    """Serve a model with its memory behind an OpenAI-compatible API (POST /v1/chat/completions),
    with per-user memory endpoints (/v1/memory/...), /health and /metrics."""
    from memory_runtime.serving.config import ServeConfigError
    from memory_runtime.serving.launch import serve

    cfg = _serve_config(config, overrides)
    try:
        serve(model, db, cfg, host=host, port=port, log_level=log_level, on_ready=_log)
    except (ServeConfigError, ValueError, FileNotFoundError) as err:
        _fail(err)


@app.command("ui")
def ui_command(
    db: str = typer.Option(..., "--db", help="The memory to inspect: an SQLite file or a postgresql:// URL."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (127.0.0.1: this machine only)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port to listen on."),
    config: Path = typer.Option(
        SERVE_CONFIG, "--config", help="Serve config YAML: the API keys the page signs in with (as memlm serve)."
    ),
    overrides: list[str] | None = OVERRIDES,
) -> None:
    """The memory page (http://HOST:PORT/ui) on a memory, without a model: see, search, time-travel,
    correct, forget, export and import the facts of one API key's namespace. No chat pane."""
    from memory_runtime.databases import is_postgres
    from memory_runtime.serving.config import ServeConfigError
    from memory_runtime.serving.launch import serve_memory_page

    if not is_postgres(db) and not Path(db).exists():
        raise typer.BadParameter(f"{db} does not exist", param_hint="--db")
    cfg = _serve_config(config, overrides)
    try:
        serve_memory_page(db, cfg, host=host, port=port, on_ready=_log)
    except (ServeConfigError, ValueError, FileNotFoundError) as err:
        _fail(err)


@app.command("chat")
def chat_command(
    model: str = MODEL,
    db: str = SERVE_DB,
    user: str = typer.Option(
        "default", "--user", "-u", help="Whose memory to start with (a namespace); /user NAME switches."
    ),
    max_new_tokens: int = typer.Option(256, "--max-new-tokens", min=1, help="Generated tokens per turn, at most."),
    max_calls: int = typer.Option(16, "--max-calls", min=1, help="Memory calls per turn, at most."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="Sampling temperature (0: greedy)."),
    memory_config: Path | None = typer.Option(
        None, "--memory-config", help="Memory config YAML (relation table, fuzzy settings)."
    ),
    history_turns: int = typer.Option(
        0,
        "--history-turns",
        min=0,
        help="Earlier exchanges sent with each turn "
        "(0: none; the memory is what lasts, and memlm's models train on single turns).",
    ),
    show_calls: bool = typer.Option(False, "--show-calls", help="Print each turn's memory calls under the reply."),
    copy_fields: bool = typer.Option(
        True,
        "--copy-fields/--free-fields",
        help="Names in memory calls are copied "
        "from the conversation and relations taken from the relation table (default), "
        "or spelled freely by the model.",
    ),
    feedback_dir: Path | None = typer.Option(
        None,
        "--feedback-dir",
        help="Where /good /bad /correct are logged "
        "(pending/: trajectories to review with `memlm feedback`; "
        "default: DB's name + '-feedback' beside it).",
    ),
    device: str = DEVICE,
    dtype: str = DTYPE,
    write_gate: str | None = typer.Option(
        None,
        "--write-gate",
        help="Hold back writes the model is unsure of: none, call or call_min (its probability of the call: "
        "per-token mean, least token) or verify (it is asked whether the text states the fact); default: none, "
        "every write stored "
        "(memory_runtime/write_gate.py). /trace shows each write's scores.",
    ),
    write_threshold: float | None = typer.Option(
        None, "--write-threshold", min=0.0, max=1.0, help="The score a write needs to be stored (with --write-gate)."
    ),
) -> None:
    """Chat with a model and its memory in the terminal: /facts, /trace, /forget PATTERN, /user NAME, /help.

    Reads stdin when it is not a terminal (lines are echoed), so a session can be scripted."""
    from memory_runtime.chat import chat
    from memory_runtime.write_gate import WriteGateConfig

    try:
        gate = {"signal": write_gate, "threshold": write_threshold}
        gate_config = WriteGateConfig.model_validate({k: v for k, v in gate.items() if v is not None})
        chat(
            model,
            db,
            user=user,
            max_new_tokens=max_new_tokens,
            max_calls=max_calls,
            temperature=temperature,
            memory_config=_find_config(memory_config),
            history_turns=history_turns,
            show_calls=show_calls,
            copy_fields=copy_fields,
            feedback_dir=feedback_dir or _default_feedback_dir(db),
            device=device,
            dtype=dtype,
            write_gate_config=gate_config,
        )
    except (ValueError, FileNotFoundError) as err:
        _fail(err)


@bench_app.command("serve")
def bench_serve_command(
    model: str = MODEL,
    clients: str = typer.Option(
        "4", "--clients", help="Concurrent clients, each its own API key and namespace; comma-separated: one cell each."
    ),
    seconds: float = typer.Option(30.0, "--seconds", min=0.1, help="How long the clients keep sending requests."),
    max_tokens: int = typer.Option(32, "--max-tokens", min=1, help="max_tokens of every request."),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="CPU threads of the model (default: torch's, one per core)."
    ),
    max_batch_size: int = typer.Option(
        8, "--max-batch-size", min=1, help="Turns of concurrent clients decoded together (1: one at a time)."
    ),
    device: str = DEVICE,
    dtype: str = DTYPE,
    engines: str = typer.Option(
        "hf", "--engines", help="Comma-separated engines, each at every number of clients. " + ENGINE_HELP
    ),
) -> None:
    """The server on 127.0.0.1 under concurrent streaming clients: requests/s, latency p50/p99, time to
    the first streamed words, controller overhead."""
    from memory_runtime.bench_serve import bench_serve

    try:
        result = bench_serve(
            model,
            clients=_counts(clients, "--clients", 256),
            engines=[_engine(e) for e in engines.split(",") if e.strip()],
            seconds=seconds,
            max_tokens=max_tokens,
            threads=threads,
            max_batch_size=max_batch_size,
            device=device,
            dtype=dtype,
        )
    except (ValueError, FileNotFoundError) as err:
        _fail(err)
    print(json.dumps(result))


def _counts(text: str, option: str, most: int) -> list[int]:
    try:
        counts = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        _fail(ValueError(f"{option}: expected comma-separated whole numbers, got {text!r}"))
    if not counts or not all(1 <= c <= most for c in counts):
        _fail(ValueError(f"{option}: each number must be 1 to {most}, got {text!r}"))
    return counts


def _engine(name: str) -> Engine:
    name = name.strip()
    if name not in ("hf", "vllm"):
        _fail(ValueError(f"unknown engine {name!r}: expected hf or vllm"))
    return name  # type: ignore[return-value]


@app.command("env")
def env_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """What this machine is and has (CPU and flags, the dtype auto picks and why, CUDA devices, library
    versions, embedded models and caches): paste it into a bug report."""
    from memlm.env import environment, render

    env = environment()
    if as_json:
        print(json.dumps(env, indent=2))
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in render(env):
        table.add_row(label, value)
    Console().print(table)


@bench_app.command("decode")
def bench_decode_command(
    model: str = MODEL,
    data: Path = typer.Option(..., "--data", help="A `memlm generate` output directory: its test records are decoded."),
    turns: int = typer.Option(64, "--turns", min=13, help="About this many teacher-forced turns, every category."),
    batch_sizes: str = typer.Option("1,8", "--batch-sizes", help="Comma-separated; the first is the baseline."),
    engines: str = typer.Option(
        "hf",
        "--engines",
        help="Comma-separated engines, each at every batch size (hf, vllm: vLLM's engine; run from the "
        "environment that has it, e.g. .venv-vllm/bin/python -m memlm on a CPU).",
    ),
    rounds: int = typer.Option(1, "--rounds", min=1, help="Cells take turns this many times."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", min=8),
    device: str = DEVICE,
    dtype: str = DTYPE,
) -> None:
    """Decoding throughput: turns/s at each batch size on each engine, the same cases, side by side, and
    the share of turns each decoded as the first did."""
    from eval.bench_decode import bench_decode

    try:
        sizes = [int(b) for b in batch_sizes.split(",") if b.strip()]
        result = bench_decode(
            model,
            str(data),
            turns=turns,
            batch_sizes=sizes,
            engines=[_engine(e) for e in engines.split(",") if e.strip()],
            rounds=rounds,
            device=device,
            dtype=dtype,
            max_new_tokens=max_new_tokens,
            log=_log,
        )
    except (ValueError, FileNotFoundError) as err:
        _fail(err)
    print(json.dumps(result))


# ---- self-instruct and feedback


@app.command("self-instruct")
def self_instruct_command(
    config: Path = typer.Option(
        Path("configs/self_instruct/default.yaml"),
        "--config",
        help="Self-instruct config YAML: rounds, tasks per round, seed and test tasks, "
        "the training config of each round (see its comments).",
    ),
    model: str = MODEL,
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output directory: round-N/ (tasks, augment and execution logs, "
        "kept.jsonl, adapter/), templates/, rounds.jsonl.",
    ),
    rounds: int | None = typer.Option(None, "--rounds", min=1, help="Override the config's rounds."),
    tasks: int | None = typer.Option(None, "--tasks", min=1, help="Override the config's tasks_per_round."),
    overrides: list[str] | None = OVERRIDES,
) -> None:
    """Self-instructed trajectories: the model phrases tasks with known gold, runs them with its memory,
    keeps the exactly right runs (reward 1) and trains on templates + kept runs; repeat with the new adapter.

    Logs per round how many tasks were drafted, generated and kept, and the held-out paraphrase test
    (configs/self_instruct/paraphrase_test.jsonl) before and after."""
    from learning_loop.self_instruct import SelfInstructConfig, run_rounds

    items = [*(overrides or []), *_flag_overrides(rounds=rounds, tasks_per_round=tasks)]
    try:
        cfg = SelfInstructConfig.load(_find_config(config), items)
    except ValueError as err:
        _fail(err)
    try:
        rows = run_rounds(cfg, model, out, log=_log)
    except (ValueError, FileNotFoundError) as err:
        _fail(err)
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    app()
