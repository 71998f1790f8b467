"""memory_runtime.models.cache: the cache's entries by kind with their sizes, chosen and removed without
ever leaving the cache root."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_runtime.models.cache import KINDS, REBUILT, CacheEntry, cache_entries, remove_entry, select_entries


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache with an entry of every kind memlm writes, where each owner writes it."""
    root = tmp_path / "cache"
    write(root / "models" / "SmolLM2-135M-Instruct" / "model.safetensors", 1000)
    write(root / "models" / "SmolLM2-135M-Instruct" / "memlm_conversion.json", 10)
    write(root / "models" / "gguf" / "mine-0123456789ab" / "model.safetensors", 300)
    write(root / "models" / "merged" / "run-0123456789ab" / "model.safetensors", 700)
    write(root / "models" / ".run-0123456789ab.tmp-x1" / "model.safetensors", 5)
    write(root / "models" / ".SmolLM2-135M-Instruct.lock", 0)
    write(root / "gguf" / "gemma-3-270m-q4_k_m.gguf", 400)
    write(root / "onnx" / "run-0123456789ab-int8" / "model.onnx", 200)
    write(root / "onnx" / "other-0123456789ab-int4.failed", 20)
    write(root / "serve_engine.json", 30)
    write(root / "chat_history", 40)
    write(root / "notes.txt", 3)
    monkeypatch.setenv("MEMLM_CACHE", str(root))
    return root


def test_each_entry_has_its_kind_and_size(cache):
    entries = {entry.name: (entry.kind, entry.size) for entry in cache_entries()}
    assert entries == {
        "models/SmolLM2-135M-Instruct": ("base", 1010),
        "models/gguf/mine-0123456789ab": ("base", 300),
        "gguf/gemma-3-270m-q4_k_m.gguf": ("gguf", 400),
        "models/merged/run-0123456789ab": ("merged", 700),
        "onnx/other-0123456789ab-int4.failed": ("onnx", 20),
        "onnx/run-0123456789ab-int8": ("onnx", 200),
        "serve_engine.json": ("engine", 30),
        "chat_history": ("history", 40),
        "models/.run-0123456789ab.tmp-x1": ("unfinished", 5),
        "notes.txt": ("other", 3),
    }  # the lock file is no entry
    order = [list(KINDS).index(entry.kind) for entry in cache_entries()]
    assert order == sorted(order)  # by kind


def test_a_missing_root_has_no_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path / "none"))
    assert cache_entries() == []


def test_selection_by_kind_name_or_by_default_what_a_run_rebuilds(cache):
    entries = cache_entries()
    assert {e.name for e in select_entries(entries, ["onnx"])} == {
        "onnx/run-0123456789ab-int8",
        "onnx/other-0123456789ab-int4.failed",
    }
    assert [e.name for e in select_entries(entries, names=["run-0123456789ab"])] == ["models/merged/run-0123456789ab"]
    assert {e.kind for e in select_entries(entries)} == set(REBUILT)  # not the history, nor the unknown file
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        select_entries(entries, ["nope"])
    with pytest.raises(ValueError, match="no cache entry is called 'nope'"):
        select_entries(entries, names=["nope"])


def test_remove_deletes_the_entry_and_its_lock_only(cache):
    base = next(e for e in cache_entries() if e.name == "models/SmolLM2-135M-Instruct")
    remove_entry(base)
    assert not base.path.exists() and not (cache / "models" / ".SmolLM2-135M-Instruct.lock").exists()
    assert (cache / "models" / "merged" / "run-0123456789ab").is_dir()


def test_links_are_never_followed(cache, tmp_path):
    outside = tmp_path / "precious"
    write(outside / "weights.bin", 5000)
    (cache / "onnx" / "linked-out").symlink_to(outside)
    (cache / "onnx" / "run-0123456789ab-int8" / "inner").symlink_to(outside)
    entries = {e.name: e for e in cache_entries()}
    out = entries["onnx/linked-out"]
    assert out.outside and out.link == str(outside) and out.size < 5000
    assert entries["onnx/run-0123456789ab-int8"].size < 5000  # the link inside an export: not followed
    with pytest.raises(ValueError, match="links out of the cache"):
        remove_entry(out)
    remove_entry(entries["onnx/run-0123456789ab-int8"])
    assert (outside / "weights.bin").stat().st_size == 5000 and out.path.is_symlink()


def test_an_entry_reached_through_a_linked_folder_is_not_removed(cache, tmp_path):
    """The onnx folder itself a link elsewhere: no entry under it, and one pointed there is refused."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "export" / "model.onnx", 50)
    (cache / "models" / "merged").rename(tmp_path / "merged-moved")
    (cache / "models" / "merged").symlink_to(elsewhere)
    names = {e.name: e for e in cache_entries()}
    assert "models/merged/export" not in names and names["models/merged"].outside
    forged = CacheEntry("merged", "models/merged/export", cache / "models" / "merged" / "export", 50, 0.0)
    with pytest.raises(ValueError, match="not inside the cache"):
        remove_entry(forged)
    assert (elsewhere / "export" / "model.onnx").is_file()
