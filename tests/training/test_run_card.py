"""The run card: README.md of a `memlm train` run in memlm's words, rendered from the config and a fake
state, and written by a real (tiny) run in place of the hub card TRL and PEFT leave."""

from __future__ import annotations

import json
import shlex

import typer

from tests.training.conftest import tiny_config
from training.run_card import RunFacts, run_card
from training.train_config import TrainConfig


def _facts(**changes) -> RunFacts:
    facts = dict(
        directory="runs/my run",
        metrics={
            "train_loss": 0.3415,
            "eval_loss": 0.0320,
            "wall_seconds": 1061.7,
            "data": {
                "train": {"records": 20000, "tokens": 2342338, "trained_tokens": 270212, "max_length": 509},
                "validation": {"records": 32, "tokens": 3433, "trained_tokens": 417, "max_length": 482},
            },
            "dtype": {"dtype": "bfloat16", "reason": "CPU has amx_bf16"},
            "distributed": {"processes": 1, "type": "NO", "zero_stage": None},
            "budget": {"max_minutes": 15, "requested_steps": 500, "reached_steps": 335},
        },
        global_step=335,
        max_steps=335,
        epoch=0.067,
        log_history=[{"loss": 0.5, "step": 330}, {"loss": 0.1087, "step": 335}, {"train_loss": 0.3415, "step": 335}],
        resolved_base="/cache/memlm/models/SmolLM2-135M-Instruct",
        adapter={"r": 16, "lora_alpha": 32.0, "target_modules": ["v_proj", "q_proj"]},
        relations={"relations": [{"name": "lives in"}, {"name": "works as"}], "open_relations": True},
        data_schema="conversations",
        machine="CPU Intel(R) Xeon(R) Processor (16 cores)",
        version="0.1.0",
    )
    return RunFacts(**{**facts, **changes})


def _every_required_option_given(words: list[str]) -> None:
    """The card's command gives every option its memlm command requires (it runs as printed)."""
    from memlm.cli import app

    command = typer.main.get_command(app).commands[words[1]]
    required = [p.opts for p in command.params if p.required and p.param_type_name == "option"]
    assert all(any(opt in words for opt in opts) for opts in required), (words, required)


def test_card_says_base_schema_data_steps_figures_and_commands():
    config = TrainConfig.load(None, ["data.path=runs/conversations-data", "output.output_dir=runs/my run"])
    card = run_card(config, _facts())
    assert card.startswith("# my run: memlm SFT run, LoRA\n")
    assert "`embedded:SmolLM2-135M-Instruct` (loaded from `/cache/memlm/models/SmolLM2-135M-Instruct`)" in card
    assert "LoRA r 16, alpha 32.0 on q_proj, v_proj" in card
    assert "2 relation(s): lives in, works as" in card and "open relations: yes" in card
    assert "schema: `conversations`" in card
    assert "`runs/conversations-data`" in card and "runs/conversations-data/config.yaml" in card
    assert "train: 20,000 records (2,342,338 tokens, 270,212 trained)" in card and "eval: 32 records" in card
    assert "335 of 335 (optim.max_minutes 15: 500 requested)" in card
    assert "| learning rate | 0.0002, cosine, warmup 0.03 |" in card
    assert "bfloat16 (CPU has amx_bf16)" in card and "17.7 min" in card and "Xeon" in card and "0.1.0" in card
    assert "train loss: 0.1087 (last logged, step 335)" in card and "eval loss: 0.0320" in card
    commands = card.split("## Use it\n\n```\n")[1].split("```")[0].splitlines()
    assert [c.split(" --")[0] for c in commands] == ["memlm eval", "memlm chat", "memlm serve"]
    for command in commands:
        _every_required_option_given(shlex.split(command, comments=True))
        assert "--model 'runs/my run'" in command  # the path as given, quoted for a shell
    assert "The full record of the run is `train_config.yaml`" in card
    assert 'model="None"' not in card and "huggingface.co" not in card


def test_card_of_a_preference_run_without_table_or_eval():
    config = TrainConfig.load(
        None, ["objective=dpo", "reference=runs/sft", "data.path=runs/samples", "output.output_dir=runs/dpo"]
    )
    metrics = {"data": {"train": {"pairs": 8, "tokens": 900, "trained_tokens": 80}}, "rewards/margins": 0.25}
    card = run_card(config, _facts(directory="runs/dpo", metrics=metrics, relations=None, data_schema=None))
    assert card.startswith("# dpo: memlm DPO run, LoRA\n")
    assert "starts from: `runs/sft`" in card and "`memlm sample`" in card
    assert "train: 8 pairs" in card and "eval: none" in card and "eval loss: none" in card
    assert "rewards/margins: 0.250" in card and "none kept in the run" in card


def test_a_training_run_leaves_the_run_card(tiny_model_dir, tiny_datasets, tmp_path):
    from training.objectives.sft import train_sft

    out = tmp_path / "card-run"
    cfg = tiny_config(tiny_model_dir, out, "optim.max_steps=2", "lora.r=4", "lora.target_modules=[q_proj,v_proj]")
    train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    card = (out / "README.md").read_text()
    assert card.startswith("# card-run: memlm SFT run, LoRA")
    assert f"`{tiny_model_dir}`" in card and f"memlm eval --model {out} --out {out}-eval " in card
    assert "2 of 2" in card and "train loss:" in card and "LoRA r 4, alpha 32 on q_proj, v_proj" in card
    assert 'model="None"' not in card and "huggingface.co" not in card
    adapter = json.loads((out / "adapter_config.json").read_text())  # PEFT's, as it wrote it
    assert adapter["r"] == 4 and adapter["base_model_name_or_path"] == str(tiny_model_dir)
    assert not list(out.glob("*.partial"))
