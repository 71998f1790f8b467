"""Token-budget batches: every micro-batch within N computed tokens, every record once an epoch,
reshuffled each epoch; the trainer feeds them to TRL's collator (padding-free or padded)."""

from __future__ import annotations

import pytest

from tests.training.conftest import tiny_config
from training.objectives.sft import train_sft
from training.token_budget import TokenBudgetSampler
from training.train_config import ConfigError, TrainConfig

LENGTHS = [30, 90, 12, 250, 64, 64, 8, 120, 45, 77, 300, 16, 33]


@pytest.mark.parametrize("padded", [False, True])
def test_batches_stay_within_the_budget_and_cover_every_record(padded):
    sampler = TokenBudgetSampler(LENGTHS, 256, padded=padded, seed=1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
    for batch in batches:
        lengths = [LENGTHS[i] for i in batch]
        assert sampler.cost(lengths) <= 256 or len(batch) == 1  # a record over the budget rides alone
    assert any(len(b) > 2 for b in batches) and len(sampler) == len(batches)
    sampler.set_epoch(1)
    assert list(sampler) != batches and list(TokenBudgetSampler(LENGTHS, 256, padded=padded, seed=1)) == batches


def test_the_trainer_steps_through_token_budget_batches(tiny_model_dir, tiny_datasets, tmp_path):
    cfg = tiny_config(
        tiny_model_dir,
        tmp_path,
        "packing.mode=padding_free",
        "optim.max_tokens_per_step=256",
        "data.max_length=200",
        "optim.max_steps=3",
    )
    result = train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    assert result.metrics["global_step"] == 3
    loader = result.trainer.get_train_dataloader()
    sizes = [(batch["input_ids"].numel(), int((batch["labels"] != -100).any(-1).sum())) for batch in loader]
    assert all(tokens <= 256 for tokens, _ in sizes)  # one padding-free row of at most 256 tokens
    assert sum(tokens for tokens, _ in sizes) == sum(len(x) for x in tiny_datasets["train"]["input_ids"])


def test_bfd_packing_or_a_budget_below_a_record_is_refused():
    with pytest.raises(ConfigError, match="bfd packing makes rows of its own"):
        TrainConfig.load(None, ["optim.max_tokens_per_step=1024", "packing.mode=bfd"])
    with pytest.raises(ConfigError, match="must be at least data.max_length"):
        TrainConfig.load(None, ["optim.max_tokens_per_step=256", "data.max_length=512"])
