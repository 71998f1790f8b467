"""DPO and KTO (training/objectives/dpo.py, kto.py, preference.py) on the tiny random model: the loss skips
the read results the controller inserted, a few steps move the policy and not the reference, the run saves
one loadable adapter on the reference's base, resumes, and bad input overwrites nothing."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from trl import DPOTrainer, KTOTrainer

from memory_runtime.protocol import render_results
from tests.training.conftest import preference_config, preference_pair
from training.data import tokenize_labelled_turn, tokenize_pair
from training.objectives.dpo import MaskedDPOTrainer, PairCollator, build_dpo_config, train_dpo
from training.objectives.kto import LabelledTurnCollator, MaskedKTOTrainer, build_kto_config, train_kto
from training.run import load_policy
from training.train_config import ConfigError

SYSTEM = "You have a memory."


def _snapshot(directory):
    return {
        str(p.relative_to(directory)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _lora_weights(directory, adapter="default"):
    """An adapter directory's weights keyed as a loaded PeftModel names them (adapter `adapter`)."""
    return {
        k.replace(".weight", f".{adapter}.weight"): v
        for k, v in load_file(directory / "adapter_model.safetensors").items()
    }


def _trainer(kind, config, datasets, tokenizer):
    build, cls, collator = (
        (build_dpo_config, MaskedDPOTrainer, PairCollator)
        if kind == "dpo"
        else (build_kto_config, MaskedKTOTrainer, LabelledTurnCollator)
    )
    return cls(
        model=load_policy(config),
        args=build(config, has_eval=False),
        data_collator=collator(pad_token_id=tokenizer.pad_token_id),
        train_dataset=datasets,
        processing_class=tokenizer,
    )


@torch.no_grad()
def _sft_logps(model, prompt, completion, mask):
    """Sum of log p(token) over the trained tokens, from the plain forward (no TRL): the reference figure."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, :-1].float()
    targets = ids[0, 1:]
    trained = torch.tensor([0] * len(prompt) + mask)[1:].bool()
    return logits.log_softmax(-1).gather(-1, targets[:, None]).squeeze(-1)[trained].sum().item()


@pytest.mark.parametrize(
    ("ours", "trl_class"), [(MaskedDPOTrainer, DPOTrainer), (MaskedKTOTrainer, KTOTrainer)], ids=["dpo", "kto"]
)
def test_trl_still_prepares_its_data_in_the_private_method_we_override(ours, trl_class):
    """No public hook of TRL takes pre-tokenised preference data, so the trainers override its private
    `_prepare_dataset`. If TRL renames it, changes its arguments or stops calling it from `__init__`, the
    override would be skipped without a word and TRL would tokenise text our data does not have: fail here."""
    import inspect

    assert "_prepare_dataset" in vars(trl_class), f"{trl_class.__name__}._prepare_dataset is gone"
    expected = ["self", "dataset", "processing_class", "args", "dataset_name"]
    assert list(inspect.signature(trl_class._prepare_dataset).parameters) == expected
    assert list(inspect.signature(ours._prepare_dataset).parameters) == expected
    assert "self._prepare_dataset(" in inspect.getsource(trl_class.__init__)


def test_collators_keep_the_per_token_masks(smollm2_tokenizer):
    pairs = [tokenize_pair(preference_pair(i), smollm2_tokenizer, system_prompt=SYSTEM) for i in (1, 4)]
    batch = PairCollator(pad_token_id=smollm2_tokenizer.pad_token_id)(pairs)
    rows = [(p, side) for side in ("chosen", "rejected") for p in pairs]  # chosen first, then rejected
    assert batch["input_ids"].shape[0] == 4
    for row, (pair, side) in enumerate(rows):
        n_prompt, n = len(pair["prompt_ids"]), len(pair["prompt_ids"]) + len(pair[f"{side}_ids"])
        assert batch["input_ids"][row, :n].tolist() == pair["prompt_ids"] + pair[f"{side}_ids"]
        assert batch["completion_mask"][row, :n].tolist() == [0] * n_prompt + pair[f"{side}_mask"]
        assert batch["attention_mask"][row].sum() == n and not batch["completion_mask"][row, n:].any()
    assert 0 in pairs[0]["chosen_mask"]  # the read results: inside the completion, masked
    turns = [tokenize_labelled_turn(t, smollm2_tokenizer, system_prompt=SYSTEM) for t in _turns(3)]
    turns = [
        {**t, "KL_completion_ids": u["completion_ids"], "KL_completion_mask": u["completion_mask"]}
        for t, u in zip(turns, turns[::-1])
    ]
    batch = LabelledTurnCollator(pad_token_id=smollm2_tokenizer.pad_token_id)(turns)
    assert batch["label"].tolist() == [True, False]
    n = len(turns[0]["prompt_ids"]) + len(turns[1]["completion_ids"])
    assert (
        batch["KL_completion_mask"][0, :n].tolist() == [0] * len(turns[0]["prompt_ids"]) + turns[1]["completion_mask"]
    )


def _turns(i):
    from tests.training.conftest import labelled_turns

    return labelled_turns(i)


def test_a_read_result_token_gets_no_loss_and_a_generated_token_does(
    tiny_model_dir, reference_run, preference_dir, smollm2_tokenizer, tmp_path
):
    """What TRL scores is what SFT trains: with PairCollator's mask the fused head gives the read results the
    controller inserted a log-probability of 0 (no loss, no reward) and each generated token its own; TRL's
    collator (all ones after the prompt) would score the results too."""
    from datasets import Dataset
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    pair = tokenize_pair(preference_pair(1), smollm2_tokenizer, system_prompt=SYSTEM)
    config = preference_config(tiny_model_dir, tmp_path, reference_run, preference_dir)
    trainer = _trainer("dpo", config, Dataset.from_list([pair]), smollm2_tokenizer)
    model = trainer.model.eval()
    ids = pair["prompt_ids"] + pair["chosen_ids"]
    results = smollm2_tokenizer(render_results([("Tia Batres", "employed by", "Acme Rockets 1")]))["input_ids"]
    start = next(i for i in range(len(ids)) if ids[i : i + len(results)] == results)
    result_token, generated_token = start + 1, len(pair["prompt_ids"])  # inside the results; the first call token

    def per_token_log_probs(batch):
        labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
        with torch.no_grad():
            out = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels, fused_lm_head=True
            )
        return out.log_probs[0]  # position t - 1 scores token t

    ours = per_token_log_probs(PairCollator(smollm2_tokenizer.pad_token_id)([pair]))
    trls = per_token_log_probs(DataCollatorForPreference(smollm2_tokenizer.pad_token_id)([pair]))
    assert ours[result_token - 1] == 0 and trls[result_token - 1] < 0
    assert ours[generated_token - 1] < 0 and ours[generated_token - 1] == trls[generated_token - 1]
    # the sequence log-probability DPO compares is the sum over exactly SFT's trained tokens
    chosen, rejected = trainer.compute_ref_log_probs(model, PairCollator(smollm2_tokenizer.pad_token_id)([pair]))
    for side, value in (("chosen", chosen), ("rejected", rejected)):
        expected = _sft_logps(model, pair["prompt_ids"], pair[f"{side}_ids"], pair[f"{side}_mask"])
        assert value.item() == pytest.approx(expected, rel=1e-4)


def test_precomputed_reference_log_probs_are_the_masked_ones(
    tiny_model_dir, reference_run, preference_dir, smollm2_tokenizer, tmp_path
):
    from datasets import Dataset

    pairs = [tokenize_pair(preference_pair(i), smollm2_tokenizer, system_prompt=SYSTEM) for i in (2, 5)]
    config = preference_config(
        tiny_model_dir, tmp_path, reference_run, preference_dir, "dpo", "preference.precompute_ref_log_probs=true"
    )
    trainer = _trainer("dpo", config, Dataset.from_list(pairs), smollm2_tokenizer)
    model = trainer.model.eval()
    for row, pair in zip(trainer.train_dataset, pairs):
        for side in ("chosen", "rejected"):
            expected = _sft_logps(model, pair["prompt_ids"], pair[f"{side}_ids"], pair[f"{side}_mask"])
            assert row[f"ref_{side}_logps"] == pytest.approx(expected, rel=1e-4)


@pytest.fixture(scope="module")
def dpo_run(tiny_model_dir, reference_run, preference_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("dpo-run")
    before = _snapshot(reference_run)
    config = preference_config(
        tiny_model_dir,
        out,
        reference_run,
        preference_dir,
        "dpo",
        "optim.max_steps=3",
        "optim.per_device_train_batch_size=2",
        "optim.learning_rate=5e-3",
        "preference.eval_share=0.25",
        "output.save_strategy=steps",
        "output.save_steps=2",
        "optim.max_minutes=30",  # the time budget's callback, as the shipped configs run it
    )
    lines: list[str] = []
    result = train_dpo(config, log=lines.append)
    return config, result, lines, before


def test_dpo_moves_the_policy_and_saves_a_run_like_sfts(dpo_run, reference_run, tiny_model_dir, smollm2_tokenizer):
    from memory_runtime.models.loading import adapter_base, load_model
    from training.train_config import TrainConfig

    config, result, lines, before = dpo_run
    out = result.output_dir
    assert _snapshot(reference_run) == before  # the reference run is read, never written
    # the policy moved from the reference; the trainer's "ref" adapter is still the reference's weights
    reference, trained = _lora_weights(reference_run), _lora_weights(out)
    assert reference.keys() == trained.keys()
    assert sum((trained[k] - reference[k]).abs().sum() for k in reference) > 0
    model = result.trainer.model
    for name, weight in _lora_weights(reference_run, "ref").items():
        torch.testing.assert_close(model.get_parameter(name).detach().cpu(), weight)
    # one adapter, on the reference's base, that memlm's loaders load like an SFT run's
    assert not (out / "ref").exists() and not (out / "checkpoint-2" / "ref").exists()
    assert adapter_base(out) == adapter_base(reference_run) == str(tiny_model_dir)
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4  # the reference's shape
    saved = TrainConfig.load(out / "train_config.yaml")
    assert saved.objective == "dpo" and saved.reference == str(reference_run)
    ids = torch.tensor([tokenize_pair(preference_pair(1), smollm2_tokenizer, system_prompt=SYSTEM)["prompt_ids"]])
    with torch.no_grad():
        loaded, _ = load_model(str(out), dtype="float32")
        ref_model, _ = load_model(str(reference_run), dtype="float32")
        assert not torch.allclose(loaded(input_ids=ids).logits, ref_model(input_ids=ids).logits)
    from training.merge import merge_adapter

    merged, _ = load_model(str(merge_adapter(out, out.parent / f"{out.name}-merged")), dtype="float32")
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, loaded(input_ids=ids).logits, atol=1e-4, rtol=1e-4)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["budget"]["reached_steps"] == 3 and metrics["budget"]["max_minutes"] == 30
    assert metrics["global_step"] == 3 and metrics["data"]["train"]["pairs"] == 6
    assert metrics["data"]["validation"]["pairs"] == 2 and metrics["eval_loss"] > 0
    for key in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "eval_rewards/margins"):
        assert isinstance(metrics[key], float), key
    assert metrics["rewards/margins"] > 0  # chosen pulled up against rejected
    assert any(line.startswith("step 3/3 | loss") and "rewards/margins" in line for line in lines)


@pytest.fixture(scope="module")
def kto_run(tiny_model_dir, reference_run, preference_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("kto-run")
    config = preference_config(
        tiny_model_dir,
        out,
        reference_run,
        preference_dir,
        "kto",
        "optim.max_steps=2",
        "optim.learning_rate=5e-3",
        "preference.precompute_ref_log_probs=true",  # the precomputed path of KTO (and its KL column)
    )
    lines: list[str] = []
    return config, train_kto(config, log=lines.append), lines


def test_kto_moves_the_policy_and_saves_one_adapter(kto_run, reference_run, tiny_model_dir):
    from memory_runtime.models.loading import adapter_base

    config, result, lines = kto_run
    out = result.output_dir
    reference, trained = _lora_weights(reference_run), _lora_weights(out)
    assert sum((trained[k] - reference[k]).abs().sum() for k in reference) > 0
    assert not (out / "ref").exists() and adapter_base(out) == str(tiny_model_dir)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["global_step"] == 2 and metrics["data"]["train"] == {
        "turns": 16,
        "desirable": 8,
        "tokens": metrics["data"]["train"]["tokens"],
        "trained_tokens": metrics["data"]["train"]["trained_tokens"],
        "max_length": metrics["data"]["train"]["max_length"],
    }
    assert "kl" in metrics and "rewards/margins" in metrics
    assert "kto: 8 desirable and 8 undesirable turns" in lines


def test_a_preference_run_resumes_from_its_checkpoint(dpo_run, tmp_path):
    config, result, _, _ = dpo_run
    shutil.copytree(result.output_dir / "checkpoint-2", tmp_path / "checkpoint-2")
    shutil.copy(result.output_dir / "train_config.yaml", tmp_path / "train_config.yaml")
    again = config.model_copy(deep=True)
    again.output.output_dir = str(tmp_path)
    lines: list[str] = []
    resumed = train_dpo(again, log=lines.append)
    assert "training: 3 steps (from step 2)" in lines and resumed.metrics["global_step"] == 3
    assert any(line.startswith(f"resuming from {tmp_path / 'checkpoint-2'}") for line in lines)


def test_bad_input_leaves_the_output_directory_untouched(dpo_run, tiny_model_dir, preference_dir, tmp_path):
    """Even with --fresh (which removes old checkpoints), nothing changes until data and reference are checked."""
    _, result, _, _ = dpo_run
    out = tmp_path / "out"
    shutil.copytree(result.output_dir, out)
    before = _snapshot(out)
    same = preference_pair(1).model_dump(mode="json")
    same["rejected"] = same["chosen"]
    bad_pairs = tmp_path / "pairs.jsonl"
    bad_pairs.write_text(json.dumps(same) + "\n")
    cases = [
        (result.output_dir, bad_pairs, ValueError, "pairs.jsonl:1: .*chosen is the same turn as rejected"),
        (result.output_dir, preference_dir / "turns.jsonl", ValueError, "a LabelledTurn"),
        (tmp_path / "nowhere", preference_dir, ConfigError, "reference: .* is not a directory"),
        (preference_dir, preference_dir, ConfigError, "reference: .* not a `memlm train` run"),
    ]
    for reference, data, error, message in cases:
        config = preference_config(tiny_model_dir, out, reference, data, "dpo", "output.resume_from_checkpoint=false")
        with pytest.raises(error, match=message):
            train_dpo(config, log=lambda s: None)
        assert _snapshot(out) == before, message
