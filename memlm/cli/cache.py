"""`memlm cache list` and `memlm cache clean`: what memlm keeps in its cache ($MEMLM_CACHE or ~/.cache/memlm)
and removing it (memory_runtime.models.cache knows the layout; this module only formats)."""

from __future__ import annotations

import time
from datetime import datetime

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memlm.cli.common import app, fail, log, print_json

cache_app = typer.Typer(
    help="What memlm keeps in its cache ($MEMLM_CACHE, default ~/.cache/memlm): list it with sizes, clean it. "
    "A run rebuilds what it needs of what was removed.",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


def human(size: int) -> str:
    """Bytes as a person reads them: 512 B, 3.4 kB, 12.3 MB, 1.07 GB (powers of 1000, as `ls --si`)."""
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if value < 999.5 or unit == "TB":
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def _name(entry) -> Text:  # Text: a file name is never read as rich markup
    if entry.link is None:
        return Text(entry.name)
    return Text(f"{entry.name} -> {entry.link}" + (" (a link out of the cache: kept)" if entry.outside else ""))


def _table(entries, title: str) -> Table:
    total = sum(entry.size for entry in entries)
    table = Table(title=title, title_justify="left", show_footer=True)
    table.add_column("kind", footer="total", no_wrap=True)
    table.add_column("name", footer=_entries(len(entries)), overflow="fold")
    table.add_column("size", footer=human(total), justify="right", no_wrap=True)
    table.add_column("modified", no_wrap=True)
    for entry in entries:
        table.add_row(entry.what, _name(entry), human(entry.size), _when(entry.modified))
    return table


@cache_app.command("list")
def cache_list(
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines (one an entry) instead of a table."),
) -> None:
    """Every entry of the cache: its kind, name (its path in the cache), size and when it last changed, then
    the total and the cache's path."""
    from memory_runtime.models.cache import cache_entries, cache_root

    root = cache_root()
    entries = cache_entries(root)
    if as_json:
        for entry in entries:
            print_json(
                {
                    "kind": entry.kind,
                    "what": entry.what,
                    "name": entry.name,
                    "path": str(entry.path),
                    "bytes": entry.size,
                    "modified": datetime.fromtimestamp(entry.modified).isoformat(timespec="seconds"),
                    "link": entry.link,
                    "outside": entry.outside,
                }
            )
        return
    if not entries:
        log(f"nothing cached in {root}")
        return
    Console().print(_table(entries, f"memlm cache: {root}"))


@cache_app.command("clean")
def cache_clean(
    names: list[str] | None = typer.Argument(
        None,
        help="Entries to remove by name (the name column of `memlm cache list`, or its last part).",
        show_default=False,
    ),
    kinds: list[str] | None = typer.Option(
        None,
        "--kind",
        "-k",
        help="Remove the entries of this kind (repeatable): base (a GGUF converted), gguf (a chunked GGUF "
        "assembled), merged (an adapter merged into its base), onnx (an ONNX export), engine (serve's engine "
        "measurement), history (chat's line history), unfinished (an interrupted conversion), other.",
        show_default=False,
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Remove without asking."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print what would be removed and the space freed."),
) -> None:
    """Remove cache entries: those of --kind and those NAMES name; with neither, everything a run rebuilds
    (all but the chat history and files memlm does not know). Asks first unless --yes. memlm cannot tell
    whether a running command is reading an entry: clean when none is running; a later run rebuilds what it
    needs (a conversion, a merge or an export takes seconds to minutes). A link out of the cache is never
    followed nor removed."""
    from memory_runtime.models.cache import cache_entries, cache_root, remove_entry, select_entries

    root = cache_root()
    entries = cache_entries(root)
    if not entries:
        log(f"nothing cached in {root}")
        return
    try:
        chosen = select_entries(entries, kinds or (), names or ())
    except ValueError as err:
        fail(err)
    for entry in chosen:
        if entry.outside:
            log(f"kept {entry.name}: a link out of the cache (to {entry.link})")
    chosen = [entry for entry in chosen if not entry.outside]
    if not chosen:
        log(f"nothing to remove in {root}")
        return
    total = human(sum(entry.size for entry in chosen))
    if dry_run or not yes:
        Console().print(_table(chosen, f"{'would remove' if dry_run else 'to remove'} from {root}"))
    if dry_run:
        print(f"would free {total} ({_entries(len(chosen))}); nothing removed (--dry-run)")
        return
    if not yes:
        typer.confirm(f"remove {_entries(len(chosen))} ({total})?", abort=True)
    freed, failed = 0, 0
    for entry in chosen:
        try:
            remove_entry(entry, root)
        except (ValueError, OSError) as err:
            failed += 1
            log(f"kept {entry.name}: {err}")
            continue
        freed += entry.size
        print(f"removed {entry.name} ({human(entry.size)})")
    print(f"freed {human(freed)} ({_entries(len(chosen) - failed)}) in {root}")
    if failed:
        raise typer.Exit(1)
