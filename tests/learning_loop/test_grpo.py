"""GRPO with the memory in the loop: what a rollout hands TRL (read results masked), a run that trains, the
config's refusals."""

from __future__ import annotations

import pytest

from learning_loop.grpo import MemoryRollout, grpo_prompts, train_grpo
from learning_loop.reward import TurnScore
from learning_loop.sampling import Prompt, Run
from memory_runtime.generation.turn import TurnResult
from memory_runtime.protocol import render_read
from memory_runtime.yaml_config import ConfigError
from tests.learning_loop.test_sampling import HARD, NEGATIVE, QUESTION, STATEMENT
from tests.training.conftest import tiny_config

READ = render_read(None, "employed by", "Pfizer")
RESULTS = " {Ada Lin>>employed by>>Pfizer}]"


def turn(text: str) -> TurnResult:
    return TurnResult(
        reply="",
        text=text,
        calls=[],
        status="done",
        generated_tokens=0,
        wall_seconds=0,
        model_seconds=0,
        store_seconds=0,
    )


def run_of(prompt: Prompt, text: str) -> Run:
    return Run(prompt, 0, turn(text), TurnScore(0.0, False, "test"))


def test_a_rollout_masks_the_read_results_the_controller_inserted(smollm2_tokenizer):
    """The completion TRL trains on is the model's text with the results of its reads masked out (env_mask 0),
    ending at the end of turn; an empty run is the end of turn alone."""
    rollout = MemoryRollout({}, smollm2_tokenizer, None, 0, None)  # tokens() needs only the tokenizer
    prompt_ids, ids, mask = rollout.tokens(run_of(Prompt(QUESTION, "question"), READ + RESULTS + " Ada Lin."))
    assert len(ids) == len(mask) and mask[0] == 1 and mask[-1] == 1
    masked = smollm2_tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    trained = smollm2_tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert masked == RESULTS
    assert trained.startswith(READ) and "Ada Lin>>" not in trained and trained.rstrip().endswith("<|im_end|>")
    assert smollm2_tokenizer.decode(prompt_ids).rstrip().endswith("<|im_start|>assistant")
    assert "Who works for Pfizer?" in smollm2_tokenizer.decode(prompt_ids)

    prompt_ids, ids, mask = rollout.tokens(run_of(Prompt(STATEMENT, "statement"), ""))
    assert ids == [smollm2_tokenizer.eos_token_id] and mask == [1]
    assert "Ada Lin works for Pfizer." in smollm2_tokenizer.decode(prompt_ids)


@pytest.fixture
def generate_dir(tmp_path):
    """A `memlm generate`-shaped directory: a train split of four records."""
    path = tmp_path / "data"
    (path / "jsonl").mkdir(parents=True)
    (path / "jsonl" / "train.jsonl").write_text(
        "".join(r.model_dump_json() + "\n" for r in (STATEMENT, NEGATIVE, QUESTION, HARD))
    )
    return path


def grpo_config(model_dir, output_dir, reference, data, *overrides: str):
    return tiny_config(
        model_dir,
        output_dir,
        "objective=grpo",
        f"reference={reference}",
        f"data.path={data}",
        "data.synthetic=null",
        "data.eval_split=null",
        "grpo.prompts.real=[]",
        "grpo.prompts.statements=3",
        "grpo.prompts.questions=1",
        "grpo.num_generations=2",
        "grpo.max_new_tokens=12",
        "grpo.rollout_batch_size=4",
        "optim.max_steps=2",
        "optim.learning_rate=1e-2",
        "output.final_eval=false",
        *overrides,
    )


def test_grpo_runs_the_policy_with_the_memory_and_moves_its_adapter(
    tiny_model_dir, reference_run, generate_dir, tmp_path, monkeypatch
):
    """Two GRPO steps of the tiny model: every run is executed and scored, TRL gets one completion per run,
    the adapter moves away from the reference's, and only the policy's adapter is saved."""
    from safetensors.torch import load_file

    rollouts = []
    executed = MemoryRollout.__call__

    def with_spread(self, prompts, trainer):  # a random model's runs often all score alike: no advantage, no step
        out = executed(self, prompts, trainer)
        rollouts.append((list(self.last), dict(out)))
        out["memlm_reward"] = [1.0 if i % 2 else -1.0 for i in range(len(out["memlm_reward"]))]
        return out

    monkeypatch.setattr(MemoryRollout, "__call__", with_spread)
    out = tmp_path / "grpo"
    cfg = grpo_config(tiny_model_dir, out, reference_run, generate_dir)
    assert len(grpo_prompts(cfg)) == 4
    result = train_grpo(cfg, log=lambda s: None)

    assert result.metrics["global_step"] == 2 and "rewards" in result.metrics
    assert rollouts
    for runs, batch in rollouts:
        assert len(runs) == len(batch["completion_ids"]) == len(batch["env_mask"]) == 4  # 2 prompts x 2 runs
        assert batch["memlm_reward"] == [run.score.value for run in runs]
        assert all(-1 <= r <= 1 for r in batch["memlm_reward"])
        assert all(len(c) == len(m) and m[-1] == 1 for c, m in zip(batch["completion_ids"], batch["env_mask"]))
        assert sorted(run.index for run in runs) == [0, 0, 1, 1]  # each prompt's copies are runs of their own
    before = load_file(reference_run / "adapter_model.safetensors")
    after = load_file(out / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    assert any(not before[k].equal(after[k]) for k in before)
    assert not (out / "ref").exists()


def test_grpo_settings_are_checked_before_anything_loads(tiny_model_dir, reference_run, generate_dir, tmp_path):
    with pytest.raises(ConfigError, match="num_generations"):
        grpo_config(tiny_model_dir, tmp_path / "a", reference_run, generate_dir, "optim.per_device_train_batch_size=3")
    with pytest.raises(ConfigError, match="grpo"):
        tiny_config(tiny_model_dir, tmp_path / "b", "grpo.num_generations=6")  # grpo settings on an sft run
    with pytest.raises(ConfigError, match="its own runs"):  # GRPO makes its data: records given are refused
        train_grpo(grpo_config(tiny_model_dir, tmp_path / "c", reference_run, generate_dir), datasets={})
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()
