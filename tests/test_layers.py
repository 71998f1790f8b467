"""The packages import only downward: memory_runtime <- data_gen <- training, eval <- learning_loop <- memlm.

A package may import its own modules and those of lower layers; training and eval, side by side,
not each other. Inside memory_runtime the rooms do the same: its top-level modules (the protocol, the
record schema, configs) <- memory, models <- generation <- serving. Imports inside functions count
too: a lazy import is still a dependency.

Within a package no module imports itself round a circle, counting lazy imports and those only for type
checkers: a circle of either still means neither module can be read, or moved, without the other
(eval's config lived in run.py, which imports the parts, whose types named it)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER = {"memory_runtime": 0, "data_gen": 1, "training": 2, "eval": 2, "learning_loop": 3, "memlm": 4}
ROOM = {"": 0, "memory": 1, "models": 1, "generation": 2, "serving": 3}  # memory_runtime/<room>/; "": its top


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) for every absolute import, lazy and ``if TYPE_CHECKING:`` ones included;
    ``from a import b`` gives ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, imported top-level package) for every absolute import of one of our packages."""
    return sorted({(line, name.split(".")[0]) for line, name in imported_modules(path) if name.split(".")[0] in LAYER})


def room_of(parts: tuple[str, ...]) -> str:
    """The room of memory_runtime that a module path (its parts after memory_runtime) is in."""
    return parts[0] if len(parts) > 1 and parts[0] in ROOM else ""


def upward_room_imports() -> list[str]:
    root = REPO / "memory_runtime"
    found = []
    for path in sorted(root.rglob("*.py")):
        own = room_of(path.relative_to(root).with_suffix("").parts)
        for line, name in imported_modules(path):
            parts = tuple(name.split("."))
            if parts[0] != "memory_runtime" or len(parts) < 2:
                continue
            target = room_of(parts[1:])
            if target != own and ROOM[target] >= ROOM[own]:
                found.append(f"{path.relative_to(REPO)}:{line}: {own or 'the top'} imports {target or 'the top'}")
    return found


def upward_imports(package: str) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{line}: {package} imports {target}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, target in imported_packages(path)
        if target != package and LAYER[target] >= LAYER[package]
    ]


@pytest.mark.parametrize("package", list(LAYER))
def test_no_package_imports_its_own_layer_or_above(package):
    assert upward_imports(package) == []


def test_no_room_of_memory_runtime_imports_its_own_rank_or_above():
    assert upward_room_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    package = tmp_path / "memory_runtime"
    package.mkdir()
    (package / "bad.py").write_text("def f():\n    from eval.metrics import prf\n    import data_gen.world as w\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert upward_imports("memory_runtime") == [
        "memory_runtime/bad.py:2: memory_runtime imports eval",
        "memory_runtime/bad.py:3: memory_runtime imports data_gen",
    ]


def test_the_check_sees_a_room_importing_upward_or_sideways(tmp_path, monkeypatch):
    for room in ("memory", "generation"):
        (tmp_path / "memory_runtime" / room).mkdir(parents=True)
    (tmp_path / "memory_runtime" / "protocol.py").write_text("from memory_runtime.memory.store import X\n")
    (tmp_path / "memory_runtime" / "memory" / "store.py").write_text(
        "from memory_runtime.protocol import P\nfrom memory_runtime.models import loading\n"
    )
    (tmp_path / "memory_runtime" / "generation" / "controller.py").write_text(
        "def f():\n    from memory_runtime.serving.app import create_app\n    from memory_runtime.memory import store\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert upward_room_imports() == [
        "memory_runtime/generation/controller.py:2: generation imports serving",
        "memory_runtime/memory/store.py:2: memory imports models",
        "memory_runtime/protocol.py:1: the top imports memory",
    ]


def import_cycles(packages=tuple(LAYER)) -> list[list[str]]:
    """Groups of our modules that import each other, directly or round a circle (imports inside
    functions and those under ``if TYPE_CHECKING:`` count)."""
    modules = {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): path
        for package in packages
        for path in (REPO / package).rglob("*.py")
    }

    def module(imported: str) -> str | None:  # "a.b.f" of `from a.b import f` is module a.b, or a.b.f itself
        return next((m for m in (imported, imported.rsplit(".", 1)[0]) if m in modules), None)

    graph = {name: {module(m) for _, m in imported_modules(path)} - {None, name} for name, path in modules.items()}
    reach = {}
    for start in graph:  # every module's reachable set: small graphs, no cleverness needed
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += graph[m]
        reach[start] = seen
    cycles = {tuple(sorted(m for m in reach[a] if a in reach[m])) for a in graph if a in reach[a]}
    return sorted(list(c) for c in cycles)


def test_no_module_imports_itself_round_a_circle():
    assert import_cycles() == []


def test_the_cycle_check_sees_a_lazy_circle_and_one_for_type_checkers(tmp_path, monkeypatch):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "a.py").write_text("from eval.b import f\n")
    (tmp_path / "eval" / "b.py").write_text("def f():\n    from eval.a import g\n")
    (tmp_path / "eval" / "c.py").write_text("from eval.a import x\nfrom eval.d import w\n")
    (tmp_path / "eval" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from eval.c import y\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert import_cycles(("eval",)) == [["eval.a", "eval.b"], ["eval.c", "eval.d"]]


MAX_MODULE_LINES = 600
"""A module a newcomer can read in one sitting; one over it holds several jobs (issue 59: store.py held the
relation table, the store, its history and its indexes in 1,258 lines)."""


def long_modules(root: Path = REPO, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """`package/module.py` -> lines, for every module of the library's packages longer than `limit`."""
    return {
        path.relative_to(root).as_posix(): lines
        for package in LAYER
        for path in sorted((root / package).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > limit
    }


def test_no_module_of_the_library_is_over_600_lines():
    assert long_modules() == {}, f"modules over {MAX_MODULE_LINES} lines (split them by job)"


def test_the_module_length_check_sees_a_long_module_in_a_subfolder(tmp_path):
    (tmp_path / "eval" / "deep").mkdir(parents=True)
    (tmp_path / "eval" / "deep" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "eval" / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "tool.py").write_text("x = 1\n" * 2000)  # scripts are not the library
    assert long_modules(tmp_path) == {"eval/deep/long.py": MAX_MODULE_LINES + 1}
