"""A newcomer's own schema on the first try (issue 58): three hand-made schemas of different shapes
(tests/memlm/schemas: one relation; three relations, none functional, no plural phrasings, no questions or
negatives of its own; three types with updates and two-hop) each go through `schema check`, `generate` with a
shipped person–organisation recipe, `train`, `eval` and `chat`, with no setting changed for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlm.cli import app

runner = CliRunner()
SCHEMAS = Path(__file__).resolve().parent / "schemas"
CPU_CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "train" / "cpu-smollm2.yaml")


def memlm(*args) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", ["readers", "team", "music"])
def test_a_schema_of_your_own_checks_generates_trains_evaluates_and_chats_first_time(name, tiny_model_dir, tmp_path):
    schema = SCHEMAS / f"{name}.yaml"
    checked = memlm("schema", "check", schema, "--records", "6")
    assert f"schema {name} ({schema}): valid" in checked
    data, run, report = tmp_path / "data", tmp_path / "run", tmp_path / "eval"
    said = memlm("generate", "--config", "tiny", "--schema", schema, "--out", data, "episodes.count=2")
    assert f"tiny fitted to schema {name}: " in said  # one line: what the person–organisation recipe left out
    config = yaml.safe_load((data / "config.yaml").read_text())
    assert config["mix"]["passage"] == 0 and set(config["world"]["names"]) == set(
        yaml.safe_load(schema.read_text())["types"]
    )
    written = [json.loads(line) for line in (data / "jsonl" / "train.jsonl").read_text().splitlines()]
    relations = {r["name"] for r in yaml.safe_load(schema.read_text())["relations"]}
    assert {t[1] for r in written for t in r["gold_triplets"]} <= relations
    assert {"write", "read", "negative"} <= {r["type"] for r in written}  # negatives: the schema's defaults
    memlm("train", "--config", CPU_CONFIG, "--data", data, "--out", run, "--max-steps", "3",
          f"model.name={tiny_model_dir}", "output.save_strategy=no")  # fmt: skip
    memlm("eval", "--model", run, "--data", data, "--out", report, "--limit", "1", "--systems", "memlm",
          "--parts", "records,episodes", "generation.max_new_tokens=8")  # fmt: skip
    metrics = json.loads((report / "metrics.json").read_text())
    assert "memlm" in json.dumps(metrics) and (report / "report.md").is_file()
    chatted = runner.invoke(
        app, ["chat", "--model", str(run), "--db", str(tmp_path / "m.sqlite"), "generation.max_new_tokens=8"],
        input="Hello there.\n",
    )  # fmt: skip
    assert chatted.exit_code == 0 and "Traceback" not in chatted.output, chatted.output


def test_a_schema_with_too_few_names_is_one_line_naming_where_to_add_them(tmp_path):
    schema = yaml.safe_load((SCHEMAS / "readers.yaml").read_text())
    schema["types"]["book"]["names"] = [{"names": ["Emma", "Dune", "Beloved"]}]
    (tmp_path / "few.yaml").write_text(yaml.safe_dump(schema))
    result = runner.invoke(
        app, ["generate", "--config", "tiny", "--schema", str(tmp_path / "few.yaml"), "--out", str(tmp_path / "d")]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "world.names.book: only 3 distinct names" in result.output and "types.book.names" in result.output
    assert not (tmp_path / "d").exists()
