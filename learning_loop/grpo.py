"""GRPO with the memory in the loop: the policy's own runs, executed, rewarded by what the memory ends up
holding and answering (``objective: grpo``; its config section: training/objectives/grpo_config.py). It lives
here, not beside the other objectives in training/objectives/: its rollouts run through learning_loop.sampling
and are scored by learning_loop/reward.py, which reads eval's metrics.

Each step TRL's GRPOTrainer asks for `grpo.num_generations` runs of a few prompts. :class:`MemoryRollout`
makes them with the model being trained, the way it runs at inference: memlm's batched decoder with the
field-copy constraint, a scratch memory per run holding the prompt's own facts, the controller executing
every write and pausing at every read to insert the results (learning_loop.sampling.run_cases, the same
runs `memlm sample` makes). Each run is scored by the one reward (learning_loop/reward.py) and handed
back to TRL tokenised as a training record (training/tokenize.py), with the read results the controller
inserted masked (TRL's ``env_mask``): the policy gradient moves only what the model generated. Advantages
are the rewards normalised within each prompt's group (GRPO); the KL term keeps the policy near the
reference, the supervised run (``reference``), held as TRL's frozen "ref" copy of its adapter.

The tokens TRL scores are the run's text tokenised again, as the SFT data is; a sampled token that is not
how the tokenizer would split its text (rare: "Pf"+"izer" for "Pfizer") is scored in the tokenizer's
split. With one optimisation pass per rollout (TRL's num_iterations=1) the ratio of new to old
probabilities is computed on the same ids, so this changes which sequence is reinforced, not the maths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trl import GRPOConfig, GRPOTrainer

from learning_loop.sampling import Prompt, Run, load_prompts, run_cases
from memory_runtime.generation.runtime import Generation
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.yaml_config import ConfigError
from training.run import (
    LogFn,
    SavesPolicyOnly,
    TrainResult,
    _stderr,
    load_policy,
    plan_resume,
    start_run,
    training_arguments,
)
from training.train_config import TrainConfig

REWARD_NAME = "memory"


@dataclass
class MemoryRollout:
    """TRL's rollout_func: runs of the prompts with the memory controller, scored (see the module docstring)."""

    prompts: dict[str, Prompt]  # by user text: TRL passes the chat messages only
    tokenizer: Any
    generation: Generation  # temperature, top_p, max_new_tokens, max_calls, max_batch_size
    seed: int
    system_prompt: str | None
    memory: MemoryConfig | None = None
    rounds: int = 0
    last: list[Run] = field(default_factory=list)  # the latest rollout (logs, tests)

    def __call__(self, prompts: list[list[dict[str, str]]], trainer: Any) -> dict[str, list]:
        from memory_runtime.generation.batching import BatchDecoder

        model = trainer.accelerator.unwrap_model(trainer.model)
        training = model.training
        model.eval()  # no dropout while the policy acts
        seen: dict[str, int] = {}
        cases = []
        for messages in prompts:  # TRL repeats each prompt num_generations times: each copy its own run
            text = messages[-1]["content"]
            if text not in self.prompts:
                raise KeyError(f"grpo rollout: a prompt that was not loaded: {text[:80]!r}")
            index = seen[text] = seen.get(text, -1) + 1
            cases.append((self.prompts[text], index))
        decoder = BatchDecoder.of(self.generation, model, self.tokenizer)
        try:
            runs = run_cases(
                cases, decoder, self.generation, self.seed + 1_000_003 * self.rounds, self.memory, self.system_prompt
            )
        finally:
            model.train(training)
        self.rounds += 1
        self.last = runs
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "env_mask": [], "logprobs": None}
        for run in runs:
            prompt_ids, completion_ids, mask = self.tokens(run)
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["env_mask"].append(mask)
        out["memlm_reward"] = [run.score.value for run in runs]
        out["memlm_exact"] = [float(run.score.exact) for run in runs]
        return out

    def tokens(self, run: Run) -> tuple[list[int], list[int], list[int]]:
        """(prompt ids, completion ids up to the end of turn, 1 per generated token and 0 per inserted one)."""
        from training.data import split_completion
        from training.tokenize import tokenize_record

        if not run.result.text.strip():  # the end of turn at once: nothing but that token was generated
            prompt = self.tokenizer.apply_chat_template(
                [
                    *([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []),
                    {"role": "user", "content": run.prompt.user_text},
                ],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
            )
            return list(prompt["input_ids"]), [self.tokenizer.eos_token_id], [1]
        encoded = tokenize_record(run.record(), self.tokenizer, system_prompt=self.system_prompt)
        prompt_ids, completion_ids, mask = split_completion(encoded)
        end = max(i for i, m in enumerate(mask) if m) + 1  # the template after the end of turn is no completion
        return prompt_ids, completion_ids[:end], mask[:end]


def memory_reward(prompts: Sequence, completions: Sequence, memlm_reward: Sequence[float], **kwargs: Any) -> list:
    """GRPO's reward function: the reward each run earned in the rollout (TRL passes the rollout's extra
    fields through). The runs were already scored against what their memory held and answered."""
    return [float(r) for r in memlm_reward]


memory_reward.__name__ = REWARD_NAME


def grpo_prompts(config: TrainConfig) -> list[Prompt]:
    """The prompts of a GRPO run (`grpo.prompts`, `data.path` as their generate directory), one per user text."""
    from learning_loop.sampling import SampleConfig

    sampling = SampleConfig(seed=config.optim.seed, prompts=config.grpo.prompts.model_copy(deep=True))
    if config.data.path is not None:
        sampling.prompts.data = str(Path(config.data.path).expanduser().resolve())
    prompts, _ = load_prompts(sampling)
    unique: dict[str, Prompt] = {}
    for prompt in prompts:
        unique.setdefault(prompt.user_text, prompt)  # the same text twice: the first gold judges it
    return list(unique.values())


def build_grpo_config(config: TrainConfig, *, output_dir: str | None = None) -> GRPOConfig:
    g = config.grpo
    return GRPOConfig(
        **training_arguments(config, GRPOConfig.__dataclass_fields__, has_eval=False, output_dir=output_dir),
        num_generations=g.num_generations,
        temperature=g.temperature,
        top_p=g.top_p,
        max_completion_length=g.max_new_tokens,
        beta=g.beta,
        loss_type=g.loss_type,
        epsilon=g.epsilon,
        scale_rewards=g.scale_rewards,
        remove_unused_columns=False,
        log_completions=False,
    )


class MemoryGRPOTrainer(SavesPolicyOnly, GRPOTrainer):
    """TRL's GRPOTrainer saving one adapter (the frozen reference copy left out, as DPO and KTO do)."""


def train_grpo(
    config: TrainConfig,
    *,
    datasets: dict[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    log: LogFn = _stderr,
) -> TrainResult:
    """Train `config` (objective grpo) from its reference: the same outputs as any `memlm train` run, plus
    the rewards of the last rollouts in metrics.json. It makes its own data, the runs of `grpo.prompts`:
    ``datasets`` (the other objectives' tokenised records, for tests) is refused."""
    import warnings

    from datasets import Dataset

    from memory_runtime.models.trained_run import trained_system_prompt

    if datasets is not None:
        raise ConfigError("datasets: objective grpo trains on its own runs of grpo.prompts, not on given records")
    run = start_run(config, check_all=True, log=log)
    config, log = run.config, run.log
    warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)  # TRL: experimental
    prompts = grpo_prompts(config)
    kinds = {k: sum(p.kind == k for p in prompts) for k in ("statement", "question")}
    log(f"grpo: {len(prompts)} prompts ({kinds['statement']} statements, {kinds['question']} questions)")
    tokenizer = run.load_tokenizer()
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p.user_text}]} for p in prompts])
    run.resume = plan_resume(config, log)
    run.save_config(relation_table=False)
    g = config.grpo
    generation = Generation(
        max_new_tokens=g.max_new_tokens,
        max_calls=g.max_calls,
        temperature=g.temperature,
        top_p=g.top_p,
        max_batch_size=g.rollout_batch_size,
    )
    rollout = MemoryRollout(
        {p.user_text: p for p in prompts},
        tokenizer,
        generation,
        config.optim.seed,
        trained_system_prompt(str(config.reference)),
        generation.memory(),
    )
    args = build_grpo_config(config)
    model = load_policy(config)
    log(f"policy: a trainable copy of {config.reference}'s adapter; reference: a frozen copy ('ref' adapter)")
    trainer = MemoryGRPOTrainer(
        model=model,
        reward_funcs=[memory_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
        callbacks=run.callbacks(callbacks),
    )
    result = run.train(trainer)
    stats = {"prompts": len(prompts), **kinds, "rollouts": rollout.rounds}
    history = [h for h in trainer.state.log_history if "reward" in h]
    rewards = (
        {"first": history[0]["reward"], "last": history[-1]["reward"], "logged": len(history)} if history else None
    )
    return run.finish(trainer, result, has_eval=False, stats=stats, extra={"rewards": rewards} if rewards else None)
