"""The packages import only downward: memory_runtime <- data_gen <- training, eval <- learning_loop <- memlm.

A package may import its own modules and those of lower layers; training and eval, side by side,
not each other. Imports inside functions count too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER = {"memory_runtime": 0, "data_gen": 1, "training": 2, "eval": 2, "learning_loop": 3, "memlm": 4}


def imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, imported top-level package) for every absolute import of one of our packages."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name.split(".")[0]) for name in names if name.split(".")[0] in LAYER]
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


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    package = tmp_path / "memory_runtime"
    package.mkdir()
    (package / "bad.py").write_text("def f():\n    from eval.metrics import prf\n    import data_gen.world as w\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert upward_imports("memory_runtime") == [
        "memory_runtime/bad.py:2: memory_runtime imports eval",
        "memory_runtime/bad.py:3: memory_runtime imports data_gen",
    ]
