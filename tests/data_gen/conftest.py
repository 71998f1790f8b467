"""Shared fixtures: the tiny config, generated once per session (in memory and on disk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_gen.data_config import DataConfig

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "data" / "tiny.yaml"
DEFAULT = REPO / "configs" / "data" / "default.yaml"


@pytest.fixture(scope="session")
def tiny_config() -> DataConfig:
    return DataConfig.load(TINY)


@pytest.fixture(scope="session")
def tiny_run(tiny_config):
    """(world, {split: records}, episodes) of the tiny config."""
    from data_gen.generate import generate_records

    return generate_records(tiny_config)


@pytest.fixture(scope="session")
def tiny_records(tiny_run):
    _, splits, _ = tiny_run
    return [r for records in splits.values() for r in records]


@pytest.fixture(scope="session")
def tiny_out(tmp_path_factory) -> Path:
    """The tiny config generated on disk through the CLI."""
    from typer.testing import CliRunner

    from memlm.cli import app

    out = tmp_path_factory.mktemp("gen") / "tiny"
    result = CliRunner().invoke(app, ["generate", "--config", str(TINY), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out
