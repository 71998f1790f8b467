"""`memlm memory ...` (see, query, edit, check, export, import and migrate a memory) and `memlm bench memory`."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from memlm.cli.common import bench_app, console, fail, find_config, log, memory_app, print_json

DB = typer.Option(
    ..., "--db", help="The memory: an SQLite file, or a postgresql:// URL (pip install 'memlm\\[postgres]')."
)
NAMESPACE = typer.Option("default", "--namespace", "-n", help="Whose memory: a user or session name.")
CONFIG = typer.Option(None, "--config", help="Memory config YAML (relation table, fuzzy settings).")
SUBJECT = typer.Option(
    None, "--subject", "-s", help="Subject: what a fact is about (a type of the memory's schema), or leave empty."
)
RELATION = typer.Option(None, "--relation", "-r", help="Relation (aliases allowed), or leave empty.")
OBJECT = typer.Option(None, "--object", "-o", help="Object: the fact's other end, or leave empty.")


def _memory_config(config: Path | None):
    from memory_runtime.memory.memory_config import MemoryConfig

    try:
        return MemoryConfig.load(find_config(config))
    except ValueError as err:
        fail(err)


def _store(db: str, config: Path | None, must_exist: bool = True, writes: bool = False):
    """The memory at `db`; one line and exit 2 where it cannot be opened, or is read-only and `writes`.
    A memory opened read-only says so on stderr, once."""
    from memory_runtime.memory.location import is_postgres
    from memory_runtime.memory.store import TripletStore

    if must_exist and not is_postgres(db) and not Path(db).exists():
        raise typer.BadParameter(f"{db} does not exist", param_hint="--db")
    memory = _memory_config(config)
    try:
        store = TripletStore(db, memory)
    except (ValueError, OSError) as err:
        fail(err)
    if writes and store.read_only:
        store.close()
        _refuse_writes(store)
    if store.read_only_notice:
        log(store.read_only_notice)
    return store


def _refuse_writes(store) -> None:
    """One line and exit 2 where the memory was opened read-only (nothing is written)."""
    from memory_runtime.memory.database import ReadOnlyDatabaseError

    try:
        store.refuse_writes()
    except ReadOnlyDatabaseError as err:
        fail(err)


def _print_facts(facts, title: str) -> None:
    table = Table(title=title)
    from rich.text import Text

    from memory_runtime.memory.facts import local_time

    for column in ("id", "subject", "relation", "object", "valid from", "valid to", "ended by", "source"):
        table.add_column(column, no_wrap=column in ("id", "ended by"))  # times wrap at their space
    for f in facts:  # Text cells: a stored term is never read as rich markup
        table.add_row(
            str(f.id),
            *(Text(term) for term in (f.subject, f.relation, f.object)),
            local_time(f.valid_from),
            local_time(f.valid_to),
            f.ended_by or "",
            Text(f.source or ""),
        )
    Console().print(table)


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
            print_json(f.__dict__)
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
    from memory_runtime.memory.database import ReadOnlyDatabaseError

    with _store(db, config, must_exist=False, writes=True) as store:
        try:
            result = store.write(subject, relation, object, namespace=namespace, source="cli")
        except ReadOnlyDatabaseError as err:  # the file became read-only since it was opened
            fail(err)
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
    from memory_runtime.memory.database import ReadOnlyDatabaseError

    with _store(db, config, writes=True) as store:
        try:
            n = store.forget(subject, relation, object, namespace=namespace, purge=purge)
        except ReadOnlyDatabaseError as err:  # the file became read-only since it was opened
            fail(err)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    console.print(f"{'purged' if purge else 'forgot'} {n} fact(s)")


@memory_app.command("check")
def memory_check(
    db: str = DB,
    fix: bool = typer.Option(
        False,
        "--fix",
        help="Remove the broken links, break the cycles of successors and unlink facts that ended at another "
        "time than their successor began (the facts stay, ended as they were), not only list them.",
    ),
) -> None:
    """Check every fact's history: its superseded_by points at a fact of its own namespace, its successors
    do not lead back to it, it is current or ended with an end after its start, when its successor began;
    exit 1 if one is not."""
    with _store(db, None) as store:
        broken, impossible = store.broken_links(), store.history_problems()
        for problem in [*broken, *impossible]:
            typer.echo(str(problem))
        if not broken and not impossible:
            namespaces = len(store.namespaces())
            console.print(
                f"ok: every superseded_by link of {namespaces} namespace(s) points at a fact of its own, "
                "and every history could have happened"
            )
            return
        if fix:
            _refuse_writes(store)
            unlinked = store.unlink_broken() + store.unlink_cycles() + store.unlink_mistimed()
            console.print(f"unlinked {unlinked} fact(s): they stay, ended as they were")
            left = [problem for problem in store.history_problems() if "lead back" not in problem.reason]
            if not left:
                return
            console.print(f"{len(left)} fact(s) with an impossible history remain: `memlm memory forget --purge`")
            raise typer.Exit(1)
    cycles = sum("lead back" in problem.reason for problem in impossible)
    console.print(
        f"{len(broken)} broken link(s), {cycles} fact(s) in cycles of successors, {len(impossible) - cycles} other "
        "impossible history(ies): `memlm memory check --fix` removes the links (the facts stay), "
        "`memlm memory forget --purge` erases a fact",
        markup=False,
    )
    raise typer.Exit(1)


@memory_app.command("export")
def memory_export(
    db: str = DB,
    namespace: str = NAMESPACE,
    out: Path | None = typer.Option(None, "--out", help="Write the export to this file (default: stdout)."),
) -> None:
    """Write a namespace's memory as JSON: its current facts and every version, with their dates
    (the format of the memory page's Export, which `memlm memory import` restores)."""
    from memory_runtime.memory.transfer import write_export

    with _store(db, None) as store:
        if out is None:
            write_export(store, namespace, sys.stdout)
            return
        try:
            with out.open("w", encoding="utf-8") as stream:
                write_export(store, namespace, stream)
        except OSError as err:
            fail(err)
        facts, versions = store.count(namespace), store.count(namespace, current=False)
    said = f"exported {facts:,} current facts of {namespace!r} ({versions:,} versions) to {out}"
    console.print(said, markup=False, soft_wrap=True)


@memory_app.command("import")
def memory_import(
    file: Path = typer.Argument(
        ...,
        help="An export (`memlm memory export`, the memory page's Export), or a JSON list of "
        "{subject, relation, object}; - reads stdin.",
    ),
    db: str = DB,
    namespace: str = NAMESPACE,
    config: Path | None = CONFIG,
) -> None:
    """Restore a file into a namespace, history and dates included, in one transaction: all of it or
    nothing (the database is created if it does not exist)."""
    from memory_runtime.memory.transfer import BadImport, import_file

    try:  # a file is read as a stream (a file of any size); stdin is read whole
        data = io.BytesIO(sys.stdin.buffer.read()) if str(file) == "-" else file.open("rb")
    except OSError as err:
        fail(err)
    with data, _store(db, config, must_exist=False, writes=True) as store:
        try:
            done = import_file(store, data, namespace=namespace)
        except BadImport as err:
            fail(ValueError(f"{file} was not imported, nothing was stored: {err}"))
    console.print(f"imported {file} into {namespace!r}: {done.message}", markup=False, soft_wrap=True)


@memory_app.command("migrate")
def memory_migrate(
    src: str = typer.Argument(..., help="The memory to copy: an SQLite file or a postgresql:// URL."),
    dst: str = typer.Argument(..., help="An empty memory to copy into (SQLite file, created; or postgresql:// URL)."),
) -> None:
    """Copy a memory between SQLite and PostgreSQL, every version with its id, then verify it row by row."""
    from memory_runtime.memory.location import is_postgres
    from memory_runtime.memory.migrate import migrate

    if not is_postgres(src) and not Path(src).exists():
        fail(FileNotFoundError(f"{src} does not exist"))
    try:
        done = migrate(src, dst)
    except (ValueError, OSError) as err:
        fail(err)
    console.print(
        f"copied and verified {done.rows:,} facts of {done.namespaces} namespaces in {done.seconds:.1f} s",
        markup=False,
    )


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

    memory = _memory_config(config)
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
                config=memory,
                progress=lambda n: bar.advance(task, n),
            )
        except ValueError as err:  # a memory that is not empty, or not reachable
            fail(err)
    print_json(result)
