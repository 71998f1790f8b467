"""docs/architecture.md walks a chat turn and a training step by `path.py:LINE` `name`; code moves and line
numbers go stale, so every such reference is checked here against the file it names. A reference is a
backticked `path.py:LINE` (from the repository's root), then a space or a line break, then a backticked
name: a Python name (`chat_completions`, `TripletStore.write`, `OBJECTIVES`) must be defined on that line
(def, class or assignment, qualified by its enclosing classes and functions); any other name (`INSERT INTO
triplets`, `self.engine.step()`) must be text that line holds. Pure text and ast: nothing is imported."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"
REFERENCE = re.compile(r"`([\w./-]+\.py):(\d+)`((?:[ \t]+|[ \t]*\n[ \t]*)`([^`\n]+)`)?")  # the name may wrap
PYTHON_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
PAGE_LIMIT = 15_000  # characters: a map read through, as the user guides are (tests/test_docs.py)


def definitions(source: str) -> dict[int, set[str]]:
    """line -> the qualified names defined there: functions and classes (on their `def` / `class` line,
    not a decorator's) and the names assigned by a statement that starts on that line."""
    found: dict[int, set[str]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                found.setdefault(child.lineno, set()).add(name)
                visit(child, name + ".")
                continue
            if isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(child.lineno, set()).add(prefix + target.id)
            visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def wrong_references(page: Path, repo: Path = REPO) -> list[str]:
    """`page: reference (why)` for every reference whose file, line or name does not hold; a page
    without any reference is wrong too (the pattern would then check nothing)."""
    text = page.read_text(encoding="utf-8")
    found, parsed = [], {}
    matches = list(REFERENCE.finditer(text))
    if not matches:
        return [f"{page.name}: no `path.py:LINE` `name` reference"]
    for match in matches:
        path, line, name = match.group(1), int(match.group(2)), match.group(4)
        where = f"{page.name}: {path}:{line}"
        if name is None:
            found.append(f"{where} (no `name` after it)")
            continue
        file = repo / path
        if not file.is_file():
            found.append(f"{where} `{name}` (no such file)")
            continue
        lines = file.read_text(encoding="utf-8").splitlines()
        if not 1 <= line <= len(lines):
            found.append(f"{where} `{name}` (the file has {len(lines)} lines)")
            continue
        if PYTHON_NAME.fullmatch(name):
            if path not in parsed:
                parsed[path] = definitions("\n".join(lines))
            defined = parsed[path].get(line, set())
            if name not in defined:
                said = ", ".join(sorted(defined)) or "nothing"
                found.append(f"{where} `{name}` (not defined there; that line defines {said})")
        elif name not in lines[line - 1]:
            found.append(f"{where} `{name}` (not on that line)")
    return found


def moved_references(page: Path) -> str:
    """The page's text with every Python-name reference that no longer holds moved to the one line of its
    file that defines the name (code above it grew or shrank); references it cannot place stay as they are."""

    def move(match: re.Match) -> str:
        path, line, name = REPO / match.group(1), int(match.group(2)), match.group(4)
        if not name or not PYTHON_NAME.fullmatch(name) or not path.exists():
            return match.group(0)
        lines = [n for n, names in definitions(path.read_text(encoding="utf-8")).items() if name in names]
        if len(lines) != 1 or lines[0] == line:
            return match.group(0)
        return f"`{match.group(1)}:{lines[0]}`{match.group(3)}"

    return REFERENCE.sub(move, page.read_text(encoding="utf-8"))


def test_every_line_reference_of_the_architecture_page_holds():
    assert wrong_references(PAGE) == [], "python3 tests/test_architecture_walk.py --fix moves the lines that moved"


def test_the_page_fits_in_a_read():
    assert len(PAGE.read_text(encoding="utf-8")) <= PAGE_LIMIT


def test_both_walks_are_there():
    """The route-to-SQL walk and the CLI-to-TRL walk: a reference each to where they start and end."""
    text = PAGE.read_text(encoding="utf-8")
    for start_or_end in (
        r"completions\.py:\d+` `chat_completions`",
        r"` `INSERT INTO triplets`",
        r"` `SELECT \{COLUMNS\} FROM triplets`",
        r"memlm/cli/train\.py:\d+` `train_command`",
        r"` `TrainedPositionsSFTTrainer\.compute_loss`",
    ):
        assert re.search(start_or_end, text), start_or_end


def test_the_check_sees_a_wrong_line_a_wrong_name_and_a_missing_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "TABLE = {}\n"
        "\n"
        "\n"
        "class Store:\n"
        "    @property\n"
        "    def write(self):\n"
        "        return 'INSERT INTO triplets'\n"
        "\n"
        "\n"
        "def write():\n"
        "    pass\n"
    )
    page = tmp_path / "walk.md"
    page.write_text(
        "1. `pkg/mod.py:6` `Store.write` and `pkg/mod.py:10` `write` and `pkg/mod.py:1` `TABLE`\n"
        "2. `pkg/mod.py:7` `INSERT INTO triplets` and `pkg/mod.py:4` `Store`\n"
        "3. `pkg/mod.py:5` `Store.write`: the decorator's line, not the def's\n"
        "4. `pkg/mod.py:6` `write`: a method named as a module function\n"
        "5. `pkg/mod.py:10` `SELECT id FROM triplets`, `pkg/mod.py:99` `write`, `pkg/gone.py:1` `x`\n"
        "6. `pkg/mod.py:10` with no name\n"
    )
    assert wrong_references(page, tmp_path) == [
        "walk.md: pkg/mod.py:5 `Store.write` (not defined there; that line defines nothing)",
        "walk.md: pkg/mod.py:6 `write` (not defined there; that line defines Store.write)",
        "walk.md: pkg/mod.py:10 `SELECT id FROM triplets` (not on that line)",
        "walk.md: pkg/mod.py:99 `write` (the file has 11 lines)",
        "walk.md: pkg/gone.py:1 `x` (no such file)",
        "walk.md: pkg/mod.py:10 (no `name` after it)",
    ]


def test_a_page_without_references_is_reported(tmp_path):
    page = tmp_path / "empty.md"
    page.write_text("# Nothing here\n\n`mod.py` alone is no reference.\n")
    assert wrong_references(page, tmp_path) == ["empty.md: no `path.py:LINE` `name` reference"]


def test_fix_moves_a_reference_to_where_its_name_now_is(tmp_path, monkeypatch):
    module = tmp_path / "m.py"
    module.write_text("import os\n\n\nclass A:\n    def f(self):\n        pass\n")
    page = tmp_path / "page.md"
    page.write_text("`m.py:2` `A.f` and `m.py:1` `import os` and `m.py:9` `gone`\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert moved_references(page) == "`m.py:5` `A.f` and `m.py:1` `import os` and `m.py:9` `gone`\n"


if __name__ == "__main__":  # python3 tests/test_architecture_walk.py --fix: after code above a reference moved
    if sys.argv[1:] == ["--fix"]:
        PAGE.write_text(moved_references(PAGE), encoding="utf-8")
    print("\n".join(wrong_references(PAGE)) or "every reference holds")
