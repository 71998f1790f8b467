"""memlm train / inspect / merge / bench train: thin commands over the training package."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from memlm.cli import app

CPU_CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "train" / "cpu-smollm2.yaml")
runner = CliRunner()


def test_train_rejects_an_invalid_config_before_loading_anything(tmp_path, monkeypatch):
    import memory_runtime.models.loading as models

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", boom)
    monkeypatch.setattr(models, "load_tokenizer", boom)
    result = runner.invoke(app, ["train", "--config", CPU_CONFIG, "--out", str(tmp_path), "lora.r=0", "optim.lr=1"])
    assert result.exit_code == 2
    assert "lora.r: Input should be greater than or equal to 1" in result.output
    assert "optim.lr: unknown field" in result.output
    result = runner.invoke(app, ["train", "--config", CPU_CONFIG, "--out", str(tmp_path)])
    assert result.exit_code == 2 and "no training data" in result.output
    result = runner.invoke(app, ["train", "--config", CPU_CONFIG, "--data", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_inspect_prints_tokens_with_their_labels(tiny_model_dir):
    result = runner.invoke(
        app, ["inspect", "--config", CPU_CONFIG, "--n", "2", f"model.name={tiny_model_dir}", "data.synthetic.train=50"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("record train-") == 2
    assert "<|im_start|>(-100, 1)" in result.output  # untrained prompt token: (label, id)
    assert "<|im_end|>(2, 2)" in result.output  # the trained end of turn
    assert "trained text: '[MEM_" in result.output or 'trained text: "[MEM_' in result.output


def test_train_on_a_data_gen_style_dataset_dir_and_merge(tiny_model_dir, tmp_path):
    """--data DIR loads a DatasetDict saved with save_to_disk (what data_gen writes), extra columns ignored."""
    from data_gen.generate import tiny_dataset_dict

    dd = tiny_dataset_dict(12, 4, seed=3)
    dd["train"] = dd["train"].add_column("episode", list(range(12)))
    dd.save_to_disk(str(tmp_path / "data"))
    (tmp_path / "data" / "relations.yaml").write_text("relations:\n- {name: lives in}\n")  # its schema's table
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            CPU_CONFIG,
            "--data",
            str(tmp_path / "data"),
            "--out",
            str(out),
            "--max-steps",
            "2",
            f"model.name={tiny_model_dir}",
            "optim.per_device_train_batch_size=4",
            "output.eval_steps=1",
            "output.save_strategy=no",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 2 and summary["eval_loss"] > 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data"]["train"]["records"] == 12 and metrics["data"]["validation"]["records"] == 4
    assert (out / "relations.yaml").read_text() == (tmp_path / "data" / "relations.yaml").read_text()  # kept
    merged = runner.invoke(app, ["merge", str(out), "--output", str(tmp_path / "merged")])
    assert merged.exit_code == 0, merged.output
    assert (tmp_path / "merged" / "model.safetensors").exists()
    bad = runner.invoke(app, ["merge", str(tmp_path / "data"), "--out", str(tmp_path / "m2")])
    assert bad.exit_code == 2 and "not a PEFT adapter" in bad.output


def test_bench_train_reports_both_modes(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "1",
            "--warmup",
            "0",
            "--modes",
            "none,grouped,padding_free",
            f"model.name={tiny_model_dir}",
            "model.dtype=float32",
            "optim.per_device_train_batch_size=4",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    padded, packed = figures["modes"]["none"], figures["modes"]["padding_free"]
    assert padded["trained_tokens"] == packed["trained_tokens"] > 0  # the same records in both modes
    assert padded["tokens"] == packed["tokens"] and padded["padded_positions"] >= packed["padded_positions"]
    for mode in (padded, packed):
        assert mode["trained_tokens_per_s"] > 0 and mode["tokens_per_s"] > 0 and mode["peak_mem_mb"] > 0
    assert figures["modes"]["grouped"]["trained_tokens"] > 0  # same records, other batches: other timed steps
    assert figures["speedup_padding_free_vs_padded"] > 0 and figures["speedup_grouped_vs_padded"] > 0


def test_bench_train_rounds_alternate_the_modes_and_sum_them(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "1",
            "--warmup",
            "0",
            "--rounds",
            "2",
            f"model.name={tiny_model_dir}",
            "model.dtype=float32",
            "optim.per_device_train_batch_size=4",
        ],
    )
    assert result.exit_code == 0, result.output
    order = [line.split(":")[1].strip() for line in result.output.splitlines() if "warm-up), round" in line]
    assert order == ["none", "padding_free", "none", "padding_free"]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["rounds"] == 2 and len(figures["speedup_padding_free_vs_padded_per_round"]) == 2
    padded, packed = figures["modes"]["none"], figures["modes"]["padding_free"]
    assert padded["steps"] == packed["steps"] == 2
    assert padded["trained_tokens"] == packed["trained_tokens"] > 0
    bad = runner.invoke(
        app, ["bench", "train", "--config", CPU_CONFIG, "--rounds", "0", f"model.name={tiny_model_dir}"]
    )
    assert bad.exit_code == 2 and "--rounds" in bad.output


def test_bench_train_rejects_layers_the_model_lacks(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "1",
            "--warmup",
            "0",
            f"model.name={tiny_model_dir}",
            "model.dtype=float32",
            "lora.layers_to_transform=[5]",
        ],
    )
    assert result.exit_code != 0 and "has layers 0..1, got 5" in result.output, result.output


def test_bench_train_times_dtypes_side_by_side(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "1",
            "--warmup",
            "0",
            "--modes",
            "padding_free",
            "--dtypes",
            "auto,bfloat16",
            f"model.name={tiny_model_dir}",
            "optim.per_device_train_batch_size=4",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(figures["modes"]) == {"padding_free/auto", "padding_free/bfloat16"}
    assert (
        figures["modes"]["padding_free/auto"]["trained_tokens"]
        == figures["modes"]["padding_free/bfloat16"]["trained_tokens"]
    )
    assert figures["dtypes"]["bfloat16"]["dtype"] == "bfloat16"
    assert figures["dtypes"]["auto"]["dtype"] in ("float32", "bfloat16") and figures["dtypes"]["auto"]["reason"]
    assert figures["speedup_padding_free/bfloat16_vs_auto"] > 0


def test_shipped_configs_are_found_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["train", "--config", "configs/train/cpu-smollm2.yaml", "--data", "missing"])
    assert result.exit_code == 2 and "data.path: missing does not exist" in result.output  # the config was found
    result = runner.invoke(app, ["train", "--config", "configs/train/nope.yaml", "--data", "missing"])
    assert result.exit_code == 2 and "nope.yaml" in result.output


def test_env_reports_the_machine_and_the_dtype_choice():
    result = runner.invoke(app, ["env", "--json"])
    assert result.exit_code == 0, result.output
    env = json.loads(result.stdout)
    assert env["cpu"]["model"] and env["dtype_auto"]["cpu"]["dtype"] in ("float32", "bfloat16")
    assert env["dtype_auto"]["cpu"]["reason"] and env["packages"]["torch"] and env["packages"]["trl"]
    assert env["paths"]["real_text"].endswith("data/real")
    assert env["embedded_models"][0]["name"] == "embedded:SmolLM2-135M-Instruct"
    assert env["engine_auto"]["engine"] in ("hf", "vllm") and env["engine_auto"]["reason"].startswith("auto: ")
    assert env["engine_auto"]["one_at_a_time"]["engine"] in ("hf", "vllm", "onnx")
    assert env["cpu"]["read_gb_per_s"] > 0  # the bound on decoding one token at a time
    table = runner.invoke(app, ["env"])
    assert table.exit_code == 0 and "dtype auto (cpu)" in table.output and "engine auto" in table.output


def test_every_command_sends_vllms_log_to_stderr(monkeypatch):
    """vLLM logs to stdout by default, where a benchmark prints its JSON line."""
    monkeypatch.delenv("VLLM_LOGGING_STREAM", raising=False)
    assert runner.invoke(app, ["env", "--json"]).exit_code == 0
    assert os.environ["VLLM_LOGGING_STREAM"] == "ext://sys.stderr"


def test_bench_train_times_an_architecture_from_its_config_alone(tiny_model_dir):
    """--random-init: the architecture from a config.json, random weights, the embedded tokenizer."""
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "1",
            "--warmup",
            "0",
            "--modes",
            "padding_free",
            "--random-init",
            str(tiny_model_dir / "config.json"),
            "optim.per_device_train_batch_size=4",
            "model.dtype=float32",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["random_init"].endswith("config.json") and figures["modes"]["padding_free"]["tokens"] > 0
    bad = runner.invoke(app, ["bench", "train", "--config", CPU_CONFIG, "--random-init", "nowhere.json"])
    assert bad.exit_code == 2 and "is not a config.json" in bad.output


def test_bench_train_with_a_token_budget(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "2",
            "--warmup",
            "0",
            "--modes",
            "none,padding_free",
            f"model.name={tiny_model_dir}",
            "model.dtype=float32",
            "optim.max_tokens_per_step=600",
            "data.synthetic.train=200",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["max_tokens_per_step"] == 600
    padded, packed = figures["modes"]["none"], figures["modes"]["padding_free"]
    assert padded["padded_positions"] <= 2 * 600 and packed["padded_positions"] <= 2 * 600


def test_bench_train_compares_record_counts_and_token_budgets_side_by_side(tiny_model_dir):
    result = runner.invoke(
        app,
        [
            "bench",
            "train",
            "--config",
            CPU_CONFIG,
            "--steps",
            "2",
            "--warmup",
            "0",
            "--modes",
            "padding_free",
            "--batches",
            "2,tokens=600",
            f"model.name={tiny_model_dir}",
            "model.dtype=float32",
            "data.synthetic.train=200",
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    two, budget = figures["modes"]["padding_free/2rec"], figures["modes"]["padding_free/600tok"]
    assert two["records_per_step"] == 2 and two["tokens"] < budget["tokens"] <= 2 * 600
    assert budget["records_per_step"] > 2
    assert figures["speedup_padding_free/600tok_vs_2rec"] > 0
    bad = runner.invoke(app, ["bench", "train", "--config", CPU_CONFIG, "--batches", "tokens=lots"])
    assert bad.exit_code == 2 and "neither a record count" in bad.output


def test_a_data_dir_that_holds_no_dataset_is_one_line_and_leaves_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", CPU_CONFIG, "--data", str(tmp_path / "empty"), "--out", str(out)])
    assert result.exit_code == 2 and "cannot load a dataset" in result.output
    assert "Traceback" not in result.output and not out.exists()


DPO_CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "train" / "dpo-smollm2.yaml")
KTO_CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "train" / "kto-smollm2.yaml")


def test_inspect_shows_a_pairs_prompt_chosen_and_rejected_with_their_masks(tiny_model_dir, preference_dir):
    result = runner.invoke(
        app,
        ["inspect", "--config", DPO_CONFIG, "--data", str(preference_dir), "--n", "1", f"model.name={tiny_model_dir}"],
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pair p0" in out and "source on_policy, scores 1 > 0" in out
    prompt, chosen, rejected = (out.index(f"\n{side}: ") for side in ("prompt", "chosen", "rejected"))
    assert prompt < chosen < rejected
    assert "<|im_start|>(-100, 1)" in out[prompt:chosen] and "(-100," in out[chosen:rejected]  # results: masked
    assert "}:(25027, 25027)" in out[chosen:rejected] and "<|im_end|>(2, 2)" in out[rejected:]  # generated: trained
    assert "trained text: ' I don" not in out and "trained text: \"[MEM_READ{>>employed by>>Pfizer 0}: I don't" in out


def test_inspect_shows_a_kto_turn_and_its_label(tiny_model_dir, preference_dir):
    result = runner.invoke(
        app,
        ["inspect", "--config", KTO_CONFIG, "--data", str(preference_dir), "--n", "2", f"model.name={tiny_model_dir}"],
    )
    assert result.exit_code == 0, result.output
    assert "turn good0 (desirable)" in result.output and "turn bad0 (undesirable)" in result.output
    assert "\nturn: " in result.output and "source on_policy, score 0" in result.output


def test_train_with_bad_preference_data_fails_in_one_line_and_writes_nothing(tiny_model_dir, reference_run, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"id": "p1", "chosen": \n')
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            DPO_CONFIG,
            "--data",
            str(pairs),
            "--out",
            str(out),
            f"reference={reference_run}",
            f"model.name={tiny_model_dir}",
        ],
    )
    assert result.exit_code == 2
    assert f"error: {pairs}:1: not a PreferencePair (DPO's format)" in result.output
    assert not out.exists()
    result = runner.invoke(app, ["train", "--config", KTO_CONFIG, "--data", str(pairs), "--out", str(out)])
    assert result.exit_code == 2 and "reference: objective kto needs the SFT run to start from" in result.output


def test_bench_train_profiles_the_timed_steps(tiny_model_dir, tmp_path):
    """--profile: each variant's timed steps under torch.profiler, an operator table and a trace per variant."""
    import gzip

    args = ["bench", "train", "--config", CPU_CONFIG, "--steps", "2", "--warmup", "1", "--modes", "padding_free"]
    result = runner.invoke(
        app,
        [*args, "--profile", str(tmp_path / "prof"), f"model.name={tiny_model_dir}", "model.dtype=float32"],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    profile = figures["modes"]["padding_free"]["profile"]
    assert profile["steps"] == 2 and profile["wall_s"] > 0 and 0 < profile["operator_cpu_s"]
    ops = (tmp_path / "prof" / "padding_free.ops.txt").read_text()
    assert "by self CPU time" in ops and "aten::mm" in ops and "Python stack" in ops
    trace = json.loads(gzip.open(tmp_path / "prof" / "padding_free.trace.json.gz").read())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert "aten::mm" in names and any("compute_loss" in n for n in names)  # operators and their Python callers


def test_a_finished_run_is_replaced_only_by_its_own_config_or_with_fresh(tiny_model_dir, tmp_path):
    """A finished run's directory (its adapter, no checkpoint) is not silently overwritten by another recipe or
    base: one line, the adapter untouched; the same config trains again, --fresh replaces it."""
    from data_gen.generate import tiny_dataset_dict

    tiny_dataset_dict(12, 4, seed=3).save_to_disk(str(tmp_path / "data"))
    out = tmp_path / "run"

    def train(*extra: str):
        return runner.invoke(
            app,
            ["train", "--config", CPU_CONFIG, "--data", str(tmp_path / "data"), "--out", str(out),
             "--max-steps", "1", f"model.name={tiny_model_dir}", "output.save_strategy=no", *extra],
        )  # fmt: skip

    assert train().exit_code == 0
    adapter = (out / "adapter_model.safetensors").read_bytes()
    other = train("lora.r=4")
    assert other.exit_code == 2 and "holds the adapter of a finished run of another config (lora.r" in other.output
    assert "--fresh" in other.output and (out / "adapter_model.safetensors").read_bytes() == adapter
    again = train()
    assert again.exit_code == 0 and "finished run of this same config (replaced)" in again.output
    assert train("lora.r=4", "--fresh").exit_code == 0
