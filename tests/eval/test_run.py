"""The eval pipeline end to end: a scripted oracle scores perfectly, a tiny real model runs
every part and writes a valid, reproducible report."""

import json
from pathlib import Path

import pytest

from data_gen.data_config import DataConfig
from data_gen.generate import generate
from eval import FULL_PARTS
from eval.eval_config import EvalConfig
from eval.records import evaluate_records, load_records, relation_types, summarise_records
from eval.run import run_eval
from eval.systems import System
from eval.typos import with_typo
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.runtime import Generation
from memory_runtime.memory.store import TripletStore


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    generate(
        DataConfig.load(Path(__file__).parents[2] / "configs/data/tiny.yaml"), out, overwrite=True, show_progress=False
    )
    return out


def _scripted_turns(records):
    """What a perfect model generates, turn by turn in evaluation order: the gold assistant
    text, split where the controller inserts read results (a memory segment)."""
    turns = []
    for record in records:
        for seg in record.segments:
            if seg.role == "user":
                turns.append([""])
            elif seg.role == "assistant":
                turns[-1][-1] += seg.text
            else:
                turns[-1].append("")
    return turns


def test_an_oracle_scores_perfectly_on_every_category(tiny_data):
    records = load_records(EvalConfig(data=str(tiny_data), limit=3, generation={"model": "x"}))
    assert {r.type for r in records} >= {"write", "read", "unanswerable", "update", "two_hop", "negative"}
    backend = ScriptedBackend(_scripted_turns(records), chunk=4)
    oracle = System("memlm", None, None, decoder=OneAtATime(lambda request: backend))
    rows = evaluate_records(oracle, records)
    summary = summarise_records(rows, uses_memory=True)
    assert summary["calls"]["exact"] == 1.0, [r for r in rows if not r["calls_exact"]][:2]
    assert summary["calls"]["write_triplets"]["f1"] == 1.0
    assert summary["answers"]["correct"] == 1.0
    assert summary["answers"]["abstention_accuracy"] == 1.0
    assert summary["answers"]["exact_match"] == 1.0
    assert all(v["calls_exact"] == 1.0 for v in summary["by_category"].values())


def test_a_readers_record_is_left_to_part_locomo(tmp_path):
    """A record with its own system message (a reader answering from a context) is not replayed as a turn of
    the memory protocol: the records part leaves it out."""
    from memory_runtime.records import Record, Segment

    def record(rid: str, **extra) -> Record:
        segments = [Segment(role="user", text="Q?", train=False), Segment(role="assistant", text="A", train=True)]
        return Record(id=rid, segments=segments, **extra)

    (tmp_path / "jsonl").mkdir()
    records = [record("w", type="negative"), record("r", type="answer", system="Answer from these facts.")]
    (tmp_path / "jsonl" / "test.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    loaded = load_records(EvalConfig(data=str(tmp_path), generation={"model": "x"}))
    assert [r.id for r in loaded] == ["w"]


def test_calls_are_reported_per_relation_and_entity_type(tiny_data):
    """A turn counts under each relation its gold calls name and each type those relations join (the
    data's schema.yaml); a wrong call of one relation moves that relation's figure alone."""
    config = EvalConfig(data=str(tiny_data), limit=40, generation={"model": "x"})
    records = [r for r in load_records(config) if r.type == "write"]
    types = relation_types(config)
    assert types["employed by"] == ("person", "organisation")
    turns = _scripted_turns(records)
    wrong = next(i for i, r in enumerate(records) if "employed by" in turns[i][0])
    turns[wrong] = [turns[wrong][0].replace(">>employed by>>", ">>founder of>>")] + turns[wrong][1:]
    backend = ScriptedBackend(turns, chunk=4)
    oracle = System("memlm", None, None, decoder=OneAtATime(lambda request: backend))
    summary = summarise_records(evaluate_records(oracle, records, types=types), uses_memory=True)
    by_relation = summary["by_relation"]
    assert by_relation["employed by"]["calls_exact"] < 1.0
    assert all(v["calls_exact"] == 1.0 for name, v in by_relation.items() if name != "employed by"), by_relation
    assert set(summary["by_type"]) == {"person", "organisation"}
    assert summary["by_type"]["person"]["turns"] == summary["turns"] == len(records)  # every write names a person


def test_a_wrong_call_is_scored_wrong(tiny_data):
    records = [
        r for r in load_records(EvalConfig(data=str(tiny_data), generation={"model": "x"})) if r.type == "write"
    ][:1]
    gold = _scripted_turns(records)[0]
    broken = [gold[0].replace(">>", ">>X", 1)] + gold[1:]
    oracle = System("memlm", None, None, decoder=OneAtATime(lambda request: ScriptedBackend([broken])))
    (row,) = evaluate_records(oracle, records)
    assert not row["calls_exact"]
    assert row["writes"]["tp"] < row["writes"]["gold"]


def test_typo_variant_changes_one_given_name(tiny_data):
    records = load_records(EvalConfig(data=str(tiny_data), generation={"model": "x"}))
    typos = [t for t in (with_typo(r, seed=0) for r in records) if t]
    assert typos
    for clean, noisy, name in typos:
        assert name in clean and name not in noisy
        assert abs(len(noisy) - len(clean)) <= 1


def test_tiny_model_runs_every_part_and_writes_a_reproducible_report(
    tiny_data, tiny_model, smollm2_tokenizer, tmp_path
):
    config = EvalConfig(
        data=str(tiny_data), limit=1, parts=list(FULL_PARTS), generation={"model": "tiny", "max_new_tokens": 8}
    )
    systems = {
        name: System(name, tiny_model, smollm2_tokenizer, Generation(max_new_tokens=8, max_calls=8))
        for name in ("memlm", "few_shot", "zero_shot")
    }
    summary = run_eval(config, tmp_path / "a", systems=systems)
    files = {p.name for p in (tmp_path / "a").iterdir()}
    assert {
        "metrics.json",
        "report.md",
        "cases.jsonl",
        "accuracy_by_shape.png",
        "answer_f1.png",
        "latency_per_turn.png",
    } <= files
    for png in (tmp_path / "a").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert set(metrics["systems"]) == {"memlm", "few_shot", "zero_shot"}
    assert "calls" in metrics["systems"]["memlm"]["records"]
    assert "calls" not in metrics["systems"]["zero_shot"]["records"]  # no memory, no calls to score
    assert "typos" in metrics["systems"]["memlm"]
    report = (tmp_path / "a" / "report.md").read_text()
    assert "| memlm |" in report and "![accuracy_by_shape]" in report

    again = run_eval(config, tmp_path / "b", systems=systems)
    strip = lambda s: json.loads(
        json.dumps(s).replace("wall_s", "w"),
        object_hook=lambda d: {k: v for k, v in d.items() if k not in ("w_per_turn_p50", "w_per_turn_p90", "by_kind")},
    )
    assert strip(again) == strip(summary)


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="memlm generate"):
        load_records(EvalConfig(data=str(tmp_path), generation={"model": "x"}))


def test_a_named_locomo_reader_that_cannot_be_opened_is_a_clear_error(tiny_model_dir, tmp_path):
    """locomo.reader naming a model that is not there: one error naming the setting, before anything is written."""
    from eval.run import load_systems

    config = EvalConfig(
        generation={"model": str(tiny_model_dir), "engine": "hf"},
        parts=["locomo"],
        locomo={"reader": str(tmp_path / "missing")},
    )
    with pytest.raises(ValueError, match=r"locomo.reader: .*missing cannot be opened"):
        load_systems(config)


def test_memlm_eval_command_writes_the_report(tiny_data, tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    real = tmp_path / "kn.jsonl"
    real.write_text(
        json.dumps(
            {
                "text": "Ann Lee is the CEO of Pfizer.",
                "annotated": ["CEO"],
                "triples": [{"person": "Ann Lee", "relation": "CEO of", "organization": "Pfizer"}],
            }
        )
        + "\n"
        + json.dumps({"text": "It rained in Oslo.", "annotated": ["CEO"], "triples": []})
        + "\n"
    )
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path / "out"),
            "--limit",
            "2",
            "generation.max_new_tokens=8",
            "--systems",
            "memlm,zero_shot",
            "--parts",
            "records,real",
            f"real={real}",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "| memlm |" in r.stdout and "| zero_shot |" in r.stdout
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    real_figures = metrics["systems"]["memlm"]["real"]["knowledgenet"]
    assert real_figures["passages"] == 2 and real_figures["no_fact_passages"] == 1
    assert "real" not in metrics["systems"]["zero_shot"]  # no memory: nothing is written


def test_memlm_eval_rejects_an_unknown_system(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    r = CliRunner().invoke(
        app, ["eval", "--model", "x", "--data", str(tiny_data), "--out", str(tmp_path), "--systems", "memlm,gpt5"]
    )
    assert r.exit_code == 2 and "gpt5" in r.output


def _cases(path):
    rows = [json.loads(line) for line in (path / "cases.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("wall_s", None)
        for turn in row.get("turns", []):
            turn.pop("wall_s"), turn.pop("model_s")
    return rows


def test_worker_processes_give_the_same_results(tiny_data, tiny_model_dir, tmp_path):
    # float32 and short turns: a random model's logits are nearly tied, and bfloat16 (dtype auto on a
    # CPU with AMX) rounds a batch of 3 differently from a batch of 1, which flips a greedy choice
    # after a few dozen tokens; what is compared here is how cases are split across processes
    base = dict(
        data=str(tiny_data),
        limit=1,
        baseline_max_new_tokens=8,
        systems=["memlm", "zero_shot"],
        parts=["records", "episodes"],
    )
    generation = {"model": str(tiny_model_dir), "max_new_tokens": 8, "dtype": "float32", "threads": 1}
    one = run_eval(EvalConfig(**base, generation=generation), tmp_path / "one")
    two = run_eval(EvalConfig(**base, workers=2, generation={**generation, "max_batch_size": 3}), tmp_path / "two")
    assert _cases(tmp_path / "two") == _cases(tmp_path / "one")
    assert two["memlm"]["records"] == one["memlm"]["records"]


def test_batched_decoding_gives_the_same_cases_as_one_turn_at_a_time(tiny_data, tiny_model_dir, tmp_path):
    base = dict(data=str(tiny_data), limit=2, systems=["memlm", "few_shot", "zero_shot"])
    # float32: bfloat16 rounds a batch differently from one row, and a random model's ties flip
    generation = {"model": str(tiny_model_dir), "max_new_tokens": 12, "dtype": "float32", "engine": "hf"}
    one = run_eval(EvalConfig(**base, generation={**generation, "max_batch_size": 1}), tmp_path / "one")
    batched = run_eval(EvalConfig(**base, generation={**generation, "max_batch_size": 8}), tmp_path / "batched")
    assert _cases(tmp_path / "batched") == _cases(tmp_path / "one")
    assert batched["memlm"]["records"] == one["memlm"]["records"]
    assert json.loads((tmp_path / "batched" / "metrics.json").read_text())["meta"]["batch_size"] == 8


def test_memlm_eval_names_a_real_file_of_unknown_format(tiny_data, tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"passage": "Ann Lee works for Pfizer."}) + "\n")
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            "x",
            "--data",
            str(tiny_data),
            "--out",
            str(tmp_path / "o"),
            "--parts",
            "real",
            f"real={bad}",
        ],
    )
    assert r.exit_code == 2 and "neither Re-DocRED" in r.output
    assert not (tmp_path / "o").exists()  # nothing written for a run that could not start


def test_the_model_under_test_is_prompted_as_trained_and_decoded_as_configured(tiny_model_dir, tmp_path):
    import shutil

    from eval.run import load_systems
    from eval.systems import FEW_SHOT_PROMPT

    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run)
    (run / "train_config.yaml").write_text("data:\n  system_prompt: You have a memory.\n")
    systems = load_systems(
        EvalConfig(systems=["memlm", "few_shot"], generation={"model": str(run), "copy_fields": False})
    )
    assert systems["memlm"].system_prompt == "You have a memory."
    assert not systems["memlm"].generation.copy_fields and not systems["few_shot"].generation.copy_fields
    for name, prompt in (("memlm", "You have a memory."), ("few_shot", FEW_SHOT_PROMPT)):
        scripted = ScriptedBackend(["Hello."])
        systems[name].decoder = OneAtATime(lambda request: scripted)
        with TripletStore(":memory:") as store:
            systems[name].turn("hi", store)
        assert scripted.seen[0][0] == {"role": "system", "content": prompt}


def test_a_clone_evaluates_the_shipped_real_text_with_nothing_beside_it(tiny_model_dir, tmp_path, monkeypatch):
    """The real dev data is part of the repository (a clone has it) and eval reads it by default,
    from any working directory, with no ../shared and no $MEMLM_REAL_DIR."""
    import subprocess

    from typer.testing import CliRunner

    from memlm.cli import app

    root = Path(__file__).resolve().parents[2]
    tracked = subprocess.run(["git", "ls-files", "data/real"], cwd=root, capture_output=True, text=True, check=True)
    assert {
        "data/real/README.md",
        "data/real/knowledgenet_person_org_dev.jsonl",
        "data/real/redocred_dev_person_org.jsonl",
    } <= set(tracked.stdout.split())
    monkeypatch.delenv("MEMLM_REAL_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(tiny_model_dir),
            "--out",
            "out",
            "--systems",
            "memlm",
            "--parts",
            "real",
            "--limit",
            "2",
            "generation.max_new_tokens=8",
        ],
    )
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "out" / "metrics.json").read_text())["meta"]
    assert meta["sources"]["real"]["path"] == str(root / "data" / "real")
    assert meta["sources"]["real"]["chosen_by"] == "default"
    assert {source: c["passages"] for source, c in meta["sources"]["real"]["by_source"].items()} == {
        "knowledgenet": 2,
        "redocred": 2,
    }


def test_bench_decode_prints_turns_per_second_per_batch_size(tiny_data, tiny_model_dir):
    from typer.testing import CliRunner

    from memlm.cli import app

    r = CliRunner().invoke(
        app,
        [
            "bench",
            "decode",
            "--model",
            str(tiny_model_dir),
            "--data",
            str(tiny_data),
            "--turns",
            "13",
            "--batch-sizes",
            "1,4",
            "generation.max_new_tokens=8",
            "generation.dtype=float32",  # bfloat16 rounds a batch differently from one row: a random model's ties flip
        ],
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["same_results"] is True and result["turns"] >= 13
    assert set(result["cells"]) == {"hf:1", "hf:4"} and result["speedup_hf:4_vs_hf:1"] > 0
    assert result["exact_calls"]["hf:1"] == result["exact_calls"]["hf:4"] and result["agreement"]["hf:4"] == 1.0
    # the bound on one stream: bandwidth over the weights' bytes, and each cell's share of it
    assert result["bandwidth_gb_per_s"] > 0 and result["model_bytes"] > 0
    ceiling = result["bandwidth_gb_per_s"] * 1e9 / result["model_bytes"]
    assert result["ceiling_tokens_per_s"] == pytest.approx(ceiling, rel=0.01)
    share = result["cells"]["hf:1"]["tokens_per_s"] / ceiling
    assert result["share_of_ceiling"]["hf:1"] == pytest.approx(share, rel=0.02, abs=0.002)


def test_bench_decode_puts_int8_weights_beside_full_ones(tiny_data, tiny_model_dir):
    from typer.testing import CliRunner

    from memlm.cli import app

    args = ["bench", "decode", "--model", str(tiny_model_dir), "--data", str(tiny_data), "--turns", "13"]
    args += ["--batch-sizes", "1", "generation.max_new_tokens=8", "generation.dtype=bfloat16"]
    r = CliRunner().invoke(app, [*args, "--weights", "full,int8"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result["cells"]) == {"hf:1", "hf-int8:1"} and 0 <= result["agreement"]["hf-int8:1"] <= 1
    assert result["dtype"] == {"hf": "bfloat16", "hf-int8": "bfloat16"}
    assert result["model_bytes"]["hf-int8"] < result["model_bytes"]["hf"]  # the linear layers' bytes halve
    # int8 is refused on float32 (slower there), before anything is decoded
    refused = CliRunner().invoke(app, [*args[:-1], "generation.dtype=float32", "--weights", "int8"])
    assert refused.exit_code != 0 and "generation.weights=full" in refused.output


def test_bench_decode_runs_a_one_at_a_time_engine_at_batch_1_only(tiny_data, tiny_model_dir, tmp_path, monkeypatch):
    """onnx decodes one turn at a time: asked for batch sizes 1 and 4 it has one cell, not a second alike."""
    pytest.importorskip("onnxruntime_genai")
    from typer.testing import CliRunner

    from memlm.cli import app

    monkeypatch.setenv("MEMLM_CACHE", str(tmp_path))  # the tiny model's export, not the user's cache
    args = ["bench", "decode", "--model", str(tiny_model_dir), "--data", str(tiny_data), "--turns", "13"]
    args += ["--batch-sizes", "1,4", "--engines", "hf,onnx", "--weights", "full"]
    r = CliRunner().invoke(app, [*args, "generation.max_new_tokens=8", "generation.dtype=float32"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result["cells"]) == {"hf:1", "hf:4", "onnx:1"} and "onnx decodes one turn at a time" in r.output
    assert result["agreement"]["hf:4"] == 1.0 and result["agreement"]["onnx:1"] == 1.0  # float32 both ways


def test_eval_reads_a_config_with_overrides_and_saves_the_resolved_one(tiny_data, tiny_model_dir, tmp_path):
    """--config FILE, then key=value overrides, then flags; OUT/eval_config.yaml runs it again."""
    import yaml
    from typer.testing import CliRunner

    from memlm.cli import app

    config = tmp_path / "eval.yaml"
    config.write_text(
        f"generation: {{model: {tiny_model_dir}}}\ndata: {tiny_data}\nsystems: [memlm]\nparts: [records]\nlimit: 5\n"
    )
    runner = CliRunner()
    r = runner.invoke(
        app,
        [
            "eval",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "a"),
            "limit=2",
            "generation.max_new_tokens=8",
            "seed=3",
            "--limit",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    saved = yaml.safe_load((tmp_path / "a" / "eval_config.yaml").read_text())
    assert (saved["limit"], saved["generation"]["max_new_tokens"], saved["seed"], saved["systems"]) == (
        1,
        8,
        3,
        ["memlm"],
    )
    again = runner.invoke(
        app, ["eval", "--config", str(tmp_path / "a" / "eval_config.yaml"), "--out", str(tmp_path / "b")]
    )
    assert again.exit_code == 0, again.output
    assert _cases(tmp_path / "b") == _cases(tmp_path / "a")

    bad = runner.invoke(app, ["eval", "--config", str(config), "--out", str(tmp_path / "c"), "limt=2"])
    assert bad.exit_code == 2 and "limt: unknown field" in bad.output
    missing = runner.invoke(app, ["eval", "--out", str(tmp_path / "d"), "--data", str(tiny_data)])
    assert missing.exit_code == 2 and "model: Field required" in missing.output
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


def test_eval_with_no_cases_is_an_error_not_a_table_of_dashes(tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    (tmp_path / "data" / "jsonl").mkdir(parents=True)
    (tmp_path / "data" / "jsonl" / "test.jsonl").write_text("")
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            "x",
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "out"),
            "--parts",
            "records",
        ],
    )
    assert r.exit_code == 2 and "nothing to evaluate for records" in r.output and "test.jsonl" in r.output
    assert not (tmp_path / "out").exists()
    (tmp_path / "data" / "jsonl" / "test.jsonl").write_text('{"id": "r1"}\n{"id": "r2"}\n')
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            "x",
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "out"),
            "--parts",
            "records",
        ],
    )
    assert r.exit_code == 2 and "test.jsonl:1: not a Record" in r.output


def test_bench_decode_refuses_a_bad_batch_size(tiny_model_dir, tiny_data):
    from typer.testing import CliRunner

    from memlm.cli import app

    r = CliRunner().invoke(
        app, ["bench", "decode", "--model", str(tiny_model_dir), "--data", str(tiny_data), "--batch-sizes", "1,x"]
    )
    assert r.exit_code != 0 and "--batch-sizes" in r.output


def _without_timings(value):
    """A summary without what the clock measured (the same cases decode to the same text, not in the same time)."""
    if isinstance(value, dict):
        timed = ("second", "latency", "wall", "per_s", "_s")
        return {k: _without_timings(v) for k, v in value.items() if not any(t in k for t in timed)}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_a_stopped_eval_keeps_its_finished_parts_and_resume_finishes_it(tiny_data, tiny_model_dir, tmp_path):
    """The report is written as each part ends: an eval stopped in its second part keeps the first (and says
    what is unfinished); --resume runs only the rest, to the figures of an eval never stopped; an earlier run
    of another config is not mixed in."""
    config = EvalConfig(
        data=str(tiny_data),
        limit=1,
        systems=["memlm"],
        parts=["records", "episodes"],
        generation={"model": str(tiny_model_dir), "max_new_tokens": 8},
    )
    whole = run_eval(config, tmp_path / "whole")

    class Stopped(Exception):
        pass

    def stop_at_episodes(description: str, total: int):
        if description == "memlm: episodes":
            raise Stopped
        return lambda n: None

    with pytest.raises(Stopped):
        run_eval(config, tmp_path / "cut", progress=stop_at_episodes)
    metrics = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert metrics["meta"]["unfinished"] == ["memlm: episodes"] and "records" in metrics["systems"]["memlm"]
    assert "--resume finishes the run" in (tmp_path / "cut" / "report.md").read_text()
    said: list[str] = []
    resumed = run_eval(config, tmp_path / "cut", resume=True, log=said.append)
    assert [line.split(" (")[0] for line in said] == ["memlm: records kept from the earlier run"]
    assert _without_timings(resumed) == _without_timings(whole)
    assert not json.loads((tmp_path / "cut" / "metrics.json").read_text())["meta"].get("unfinished")
    with pytest.raises(ValueError, match=r"another config \(differs in limit\)"):
        run_eval(config.model_copy(update={"limit": 2}), tmp_path / "cut", resume=True)
    cases = tmp_path / "cut" / "cases.jsonl"
    damaged = '{"system": "memlm", "part": "records"}\n{"rows": 1}\n'
    cases.write_text(damaged)
    with pytest.raises(ValueError, match=r"cases.jsonl:2: a case without its system and part"):
        run_eval(config, tmp_path / "cut", resume=True)
    assert cases.read_text() == damaged  # refused before anything is written: nothing of it is lost
    assert not list((tmp_path / "cut").glob("*.partial"))  # every report file was written whole


def test_a_part_of_another_schema_is_skipped_saying_why_and_never_scored(tiny_model_dir, tmp_path):
    """Real text checked only for person–organisation relations says nothing of a model of another schema:
    the part is skipped, the report says why, no figure is made."""
    from memory_runtime.memory.memory_config import MemoryConfig

    team = MemoryConfig.model_validate({"relations": [{"name": "maintains"}, {"name": "mentors"}]})
    config = EvalConfig(limit=1, systems=["memlm"], parts=["real"], generation={"model": str(tiny_model_dir)})
    said: list[str] = []
    summary = run_eval(config, tmp_path / "out", memory_config=team, log=said.append)
    assert "real" not in summary.get("memlm", {})
    assert said and said[0].startswith("real: skipped, its passages are checked for ")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Part real skipped: its passages are checked for" in report
    assert "Not run: the baselines few_shot, zero_shot and parts records, typos, episodes, injection" in report


def test_a_trained_run_is_measured_on_its_own_datas_test_split_when_no_data_is_given(
    tiny_data, tiny_model_dir, tmp_path
):
    """`memlm eval --model RUN` with no --data: the test split of the directory the run was trained on (its
    train_config.yaml says which), said in a line; a model with no such record still needs --data."""
    import shutil

    import yaml

    run = Path(shutil.copytree(tiny_model_dir, tmp_path / "run"))
    (run / "train_config.yaml").write_text(yaml.safe_dump({"data": {"path": str(tiny_data)}}))
    config = EvalConfig(
        limit=1, systems=["memlm"], parts=["records"], generation={"model": str(run), "max_new_tokens": 8}
    )
    said: list[str] = []
    summary = run_eval(config, tmp_path / "out", log=said.append)
    assert said[0] == f"data: {tiny_data} (what the model was trained on: its test split, which training never read)"
    assert "records" in summary["memlm"]
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["meta"]["data"] == str(tiny_data)
    with pytest.raises(ValueError, match="--data is needed"):
        run_eval(
            config.model_copy(
                update={"generation": config.generation.model_copy(update={"model": str(tiny_model_dir)})}
            ),
            tmp_path / "o2",
        )


def test_the_schema_warning_reads_a_table_of_open_relations(tmp_path):
    """A conversational memory's table (open relations: relation_names is None) is compared by its names, and
    a data directory of another schema is named, not a crash."""
    import yaml

    from eval.run import schema_mismatch
    from memory_runtime.memory.memory_config import MemoryConfig

    conversations = {"open_relations": True, "relations": [{"name": "lives in"}, {"name": "works as"}]}
    (tmp_path / "relations.yaml").write_text(yaml.safe_dump(conversations))
    config = EvalConfig(data=str(tmp_path), generation={"model": "x"})
    assert schema_mismatch(config, MemoryConfig.model_validate(conversations)) == []
    other = MemoryConfig.model_validate({"relations": [{"name": "maintains"}]})
    assert "is of another schema" in schema_mismatch(config, other)[0]
