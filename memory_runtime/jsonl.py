"""JSONL files: one reader and one writer for records, episodes, tasks, real passages, samples and logs.

Appending a line is not atomic: a process killed mid-append leaves a last line cut short (no
newline at its end). Such a torn last line is skipped with a warning; anything else that does not
parse is an error naming the file and the line, so a damaged file is never read in silence.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def read_jsonl(path: str | Path, *, comments: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, line) of every non-blank line (``#`` lines skipped when `comments`), the torn
    last line of an interrupted append left out with a warning."""
    path = Path(path).expanduser()
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    torn = bool(lines) and not text.endswith("\n") and not _parses(lines[-1])
    if torn:
        logger.warning("%s:%d: skipped a torn last line (an append was interrupted)", path, len(lines))
        lines = lines[:-1]
    for n, line in enumerate(lines, 1):
        if line.strip() and not (comments and line.lstrip().startswith("#")):
            yield n, line


def read_models(path: str | Path, model: type[M], what: str, *, comments: bool = False) -> list[M]:
    """Every line of `path` as a `model`; a bad line raises ValueError naming the file, the line and
    what is wrong with it."""
    return list(_parsed(path, lambda line: model.model_validate_json(line), what, comments))


def read_dicts(path: str | Path, what: str) -> list[tuple[int, dict]]:
    """(line number, JSON object) of every line of `path`."""
    out = []
    for n, line in read_jsonl(path):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{n}: not JSON ({err})") from None
        if not isinstance(value, dict):
            raise ValueError(f"{path}:{n}: expected a JSON object ({what}), got {type(value).__name__}")
        out.append((n, value))
    return out


def _parsed(path: str | Path, parse: Callable[[str], M], what: str, comments: bool) -> Iterator[M]:
    for n, line in read_jsonl(path, comments=comments):
        try:
            yield parse(line)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'line'}: {e['msg']}" for e in err.errors(include_url=False)
            )
            raise ValueError(f"{path}:{n}: not {what}: {problems}") from None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def jsonl_line(row: BaseModel | dict) -> str:
    """One row as its line: a pydantic model as its JSON, a mapping through json, non-ASCII kept as written."""
    return (row.model_dump_json() if isinstance(row, BaseModel) else json.dumps(row, ensure_ascii=False)) + "\n"


def write_jsonl(path: str | Path, rows: Iterable[BaseModel | dict], *, append: bool = False) -> int:
    """Every row as a line of `path` (its folder made; `append`: after what the file holds, as a log grows);
    the number of lines written. What it writes, the readers above read."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(jsonl_line(row))
            written += 1
    return written
