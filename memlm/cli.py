"""The `memlm` command line: thin wrappers that parse arguments and call one package function."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="memlm: teach language models to use an explicit read-write triplet memory.",
    no_args_is_help=True,
    add_completion=False,
)
bench_app = typer.Typer(help="Benchmarks that print their figures as one JSON line.", no_args_is_help=True)
memory_app = typer.Typer(
    help="Inspect and edit a memory database (an SQLite file written by memlm).", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
app.add_typer(memory_app, name="memory")

console = Console(stderr=True)
DB = typer.Option(..., "--db", help="Path of the memory database (SQLite file).")
NAMESPACE = typer.Option("default", "--namespace", "-n", help="Whose memory: a user or session name.")
CONFIG = typer.Option(None, "--config", help="Memory config YAML (relation table, fuzzy settings).")


def _store(db: Path, config: Optional[Path], must_exist: bool = True):
    from memory_runtime.store import MemoryConfig, TripletStore

    if must_exist and not db.exists():
        raise typer.BadParameter(f"{db} does not exist", param_hint="--db")
    try:
        return TripletStore(db, MemoryConfig.load(config))
    except (ValueError, OSError) as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(2) from None


def _print_facts(facts, title: str) -> None:
    table = Table(title=title)
    for column in ("id", "subject", "relation", "object", "valid from", "valid to", "ended by"):
        table.add_column(column)
    for f in facts:
        table.add_row(str(f.id), f.subject, f.relation, f.object, f"{f.valid_from:.0f}",
                      "" if f.valid_to is None else f"{f.valid_to:.0f}", f.ended_by or "")
    Console().print(table)


@bench_app.command("memory")
def bench_memory(
    triplets: int = typer.Option(100_000, "--triplets", min=100, help="How many triplets to ingest."),
    namespaces: int = typer.Option(1, "--namespaces", min=1, help="Spread the triplets over this many namespaces."),
    queries: int = typer.Option(1000, "--queries", min=10, help="Exact and one-typo queries to time."),
    seed: int = typer.Option(0, "--seed"),
    config: Optional[Path] = CONFIG,
) -> None:
    """Ingest speed, exact and fuzzy lookup latency, recall, and fuzzy vs brute-force scans."""
    from rich.progress import Progress

    from eval.bench_memory import run_memory_bench
    from memory_runtime.store import MemoryConfig

    memory_config = MemoryConfig.load(config)

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("ingesting", total=triplets)
        result = run_memory_bench(
            triplets, namespaces, queries, seed=seed, config=memory_config, progress=lambda done: bar.update(task, completed=done)
        )
    print(json.dumps(result))


@memory_app.command("facts")
def memory_facts(db: Path = DB, namespace: str = NAMESPACE, config: Optional[Path] = CONFIG,
                 as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table.")) -> None:
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
    db: Path = DB,
    subject: Optional[str] = typer.Option(None, "--subject", "-s"),
    relation: Optional[str] = typer.Option(None, "--relation", "-r"),
    object: Optional[str] = typer.Option(None, "--object", "-o"),
    namespace: str = NAMESPACE,
    config: Optional[Path] = CONFIG,
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
    db: Path = DB,
    subject: Optional[str] = typer.Option(None, "--subject", "-s"),
    relation: Optional[str] = typer.Option(None, "--relation", "-r"),
    object: Optional[str] = typer.Option(None, "--object", "-o"),
    namespace: str = NAMESPACE,
    config: Optional[Path] = CONFIG,
) -> None:
    """Every version of the matching facts, superseded and forgotten ones included."""
    with _store(db, config) as store:
        facts = store.history(subject, relation, object, namespace=namespace)
    _print_facts(facts, f"history: {len(facts)} versions")


@memory_app.command("write")
def memory_write(
    subject: str, relation: str, object: str, db: Path = DB, namespace: str = NAMESPACE,
    config: Optional[Path] = CONFIG,
) -> None:
    """Store one fact by hand (the database is created if it does not exist)."""
    with _store(db, config, must_exist=False) as store:
        try:
            result = store.write(subject, relation, object, namespace=namespace)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"{result.status}: {result.fact.triplet}" +
                  "".join(f"\n  supersedes {f.triplet}" for f in result.superseded))


@memory_app.command("forget")
def memory_forget(
    db: Path = DB,
    subject: Optional[str] = typer.Option(None, "--subject", "-s"),
    relation: Optional[str] = typer.Option(None, "--relation", "-r"),
    object: Optional[str] = typer.Option(None, "--object", "-o"),
    namespace: str = NAMESPACE,
    purge: bool = typer.Option(False, "--purge", help="Delete every version for good instead of ending them."),
    config: Optional[Path] = CONFIG,
) -> None:
    """End (or with --purge, erase) the facts that match exactly."""
    with _store(db, config) as store:
        try:
            n = store.forget(subject, relation, object, namespace=namespace, purge=purge)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"{'purged' if purge else 'forgot'} {n} fact(s)")


if __name__ == "__main__":
    app()
