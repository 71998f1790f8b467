"""`memlm cache list | clean`: the cache's entries with their sizes and total; clean removes what it is
told to (asking first unless --yes), --dry-run nothing, and never anything outside the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlm.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}  # rich folds long names at its default 80 columns


def cache(*args: str, input: str | None = None):
    return runner.invoke(app, ["cache", *args], env=WIDE, input=input)


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    write(root / "models" / "SmolLM2-135M-Instruct" / "model.safetensors", 540_000)
    write(root / "models" / "merged" / "run-0123456789ab" / "model.safetensors", 538_000)
    write(root / "gguf" / "gemma-3-270m-q4_k_m.gguf", 300_000)
    write(root / "onnx" / "SmolLM2-135M-Instruct-0123456789ab-int8" / "model.onnx", 170_000)
    write(root / "onnx" / "run-0123456789ab-int4" / "model.onnx", 90_000)
    write(root / "serve_engine.json", 100)
    monkeypatch.setenv("MEMLM_CACHE", str(root))
    return root


def test_list_shows_every_entry_with_its_size_and_the_total(root):
    listed = cache("list")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    for kind, name, size in [
        ("base model", "models/SmolLM2-135M-Instruct", "540 kB"),
        ("merged model", "models/merged/run-0123456789ab", "538 kB"),
        ("assembled GGUF", "gguf/gemma-3-270m-q4_k_m.gguf", "300 kB"),
        ("ONNX export", "onnx/SmolLM2-135M-Instruct-0123456789ab-int8", "170 kB"),
        ("ONNX export", "onnx/run-0123456789ab-int4", "90 kB"),
        ("engine choice", "serve_engine.json", "100 B"),
    ]:
        assert any(kind in line and name in line and size in line for line in lines), (name, listed.output)
    assert any("total" in line and "6 entries" in line and "1.64 MB" in line for line in lines), listed.output
    assert str(root) in listed.output

    rows = [json.loads(line) for line in cache("list", "--json").stdout.splitlines()]
    assert {row["name"]: (row["kind"], row["bytes"]) for row in rows}["onnx/run-0123456789ab-int4"] == ("onnx", 90_000)
    assert sum(row["bytes"] for row in rows) == 1_638_100


def test_clean_kind_onnx_removes_only_the_onnx_exports(root):
    done = cache("clean", "--kind", "onnx", "--yes")
    assert done.exit_code == 0, done.output
    assert not list((root / "onnx").iterdir())
    assert (root / "models" / "SmolLM2-135M-Instruct").is_dir() and (root / "models" / "merged").is_dir()
    assert (root / "gguf" / "gemma-3-270m-q4_k_m.gguf").is_file() and (root / "serve_engine.json").is_file()
    assert "removed onnx/run-0123456789ab-int4 (90 kB)" in done.output
    assert "freed 260 kB (2 entries)" in done.output


def test_clean_asks_first_and_a_no_removes_nothing(root):
    asked = cache("clean", "run-0123456789ab-int4", input="n\n")
    assert asked.exit_code == 1 and "remove 1 entry (90 kB)?" in asked.output
    assert (root / "onnx" / "run-0123456789ab-int4").is_dir()
    assert cache("clean", "onnx/run-0123456789ab-int4", input="y\n").exit_code == 0
    assert not (root / "onnx" / "run-0123456789ab-int4").exists()


def test_dry_run_removes_nothing(root):
    before = sorted(p for p in root.rglob("*"))
    dry = cache("clean", "--dry-run")  # no kind: everything a run rebuilds
    assert dry.exit_code == 0, dry.output
    assert "would free 1.64 MB (6 entries); nothing removed" in dry.output
    assert sorted(p for p in root.rglob("*")) == before


@pytest.mark.parametrize("make", [False, True])
def test_an_empty_or_missing_cache_is_nothing_cached(tmp_path, monkeypatch, make):
    root = tmp_path / "none"
    if make:
        root.mkdir()
    monkeypatch.setenv("MEMLM_CACHE", str(root))
    for args in (["list"], ["clean", "--yes"], ["clean", "--kind", "onnx"]):
        done = cache(*args)
        assert done.exit_code == 0 and f"nothing cached in {root}" in done.output, done.output
    assert root.exists() == make


def test_a_link_out_of_the_cache_is_neither_followed_nor_removed(root, tmp_path):
    precious = tmp_path / "precious"
    write(precious / "weights.bin", 5_000_000)
    (root / "onnx" / "elsewhere").symlink_to(precious)
    (root / "models" / "merged" / "run-0123456789ab" / "shared").symlink_to(precious)

    listed = cache("list")
    assert "5 MB" not in listed.output and "1.64 MB" in listed.output  # its size is not counted
    assert "a link out of the cache: kept" in listed.output

    done = cache("clean", "--kind", "onnx", "--kind", "merged", "--yes")
    assert done.exit_code == 0, done.output
    assert f"kept onnx/elsewhere: a link out of the cache (to {precious})" in done.output
    assert (root / "onnx" / "elsewhere").is_symlink()
    assert not (root / "models" / "merged" / "run-0123456789ab").exists()  # the link in it unlinked, not followed
    assert (precious / "weights.bin").stat().st_size == 5_000_000


def test_an_unknown_kind_or_name_is_one_line(root):
    for args, says in [(["--kind", "nope"], "unknown kind 'nope'"), (["nope"], "no cache entry is called 'nope'")]:
        done = cache("clean", *args, "--yes")
        assert done.exit_code == 2 and says in done.output and len(done.output.strip().splitlines()) == 1
    assert len(list(root.rglob("*"))) > 6
