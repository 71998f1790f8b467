"""memory_runtime/shipped: the configs and data memlm ships are found through importlib.resources (in a
checkout, the top-level configs/ and data/ through the package's links), and a config is found by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_runtime.shipped import config_names, find_config, shipped

REPO = Path(__file__).resolve().parents[2]


def test_in_a_checkout_the_shipped_files_are_the_top_level_folders():
    assert shipped("configs") == REPO / "configs" and shipped("data") == REPO / "data"
    assert shipped("configs", "data", "tiny.yaml").is_file()
    assert (shipped("data", "real") / "knowledgenet_person_org_dev.jsonl").is_file()


def test_every_config_file_is_listed_by_its_name():
    files = {p.relative_to(REPO / "configs") for p in (REPO / "configs").rglob("*") if p.suffix in (".yaml", ".json")}
    assert config_names() == sorted(str(f.with_suffix("")) for f in files)
    assert "train/cpu-smollm2" in config_names() and "deepspeed/zero2" in config_names()
    assert not [name for name in config_names() if name.endswith("seed_tasks")]  # .jsonl: data, not a config


@pytest.mark.parametrize(
    "name",
    [
        "configs/train/cpu-smollm2.yaml",
        "train/cpu-smollm2.yaml",
        "train/cpu-smollm2",
        "cpu-smollm2",
        "cpu-smollm2.yaml",
    ],
)
def test_a_config_is_found_by_its_path_its_name_or_its_bare_name(name):
    assert find_config(name) == REPO / "configs" / "train" / "cpu-smollm2.yaml"


def test_a_dotted_name_keeps_its_dots_and_json_configs_are_found_too():
    assert find_config("models/qwen2.5-7b-instruct") == REPO / "configs" / "models" / "qwen2.5-7b-instruct.json"
    assert find_config("zero3") == REPO / "configs" / "deepspeed" / "zero3.json"


def test_a_name_no_config_has_is_none_and_one_several_have_is_refused_naming_them():
    for name in ("nope", "train/nope", "configs/nope.yaml", "/etc/passwd", "data/real/README.md"):
        assert find_config(name) is None, name
    with pytest.raises(ValueError, match=r"^default: several shipped configs .*\(chat/default, data/default, "):
        find_config("default")
