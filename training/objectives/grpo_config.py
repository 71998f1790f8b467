"""The `grpo` section of a training config (objective grpo) and the prompts it runs on, which `memlm sample`
draws too (learning_loop.sampling.SampleConfig). GRPO's trainer is learning_loop/grpo.py, not beside this
file: its rollouts are scored with eval's metrics, a layer training may not import; the section lives here,
where TrainConfig (training/train_config.py) can compose it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from memory_runtime.shipped import resolve_path, shipped
from memory_runtime.yaml_config import Strict


class RealPrompts(Strict):
    """A real training file whose passages are prompts, and whether its no-fact passages are."""

    path: str
    negatives: bool = Field(
        True,
        description="its no-fact passages as prompts (a write there costs -1): only where the annotation is "
        "exhaustive. Re-DocRED's is not: 13 (+4 arguable) of 40 of its no-fact sentences read by hand state a "
        "person-organisation fact nobody labelled (data/real/README.md), and -1 there would teach not to write",
    )


class Prompts(Strict):
    """The prompts the model runs on to learn from its outcomes (`memlm sample`, objective grpo): statements
    and questions of a `memlm generate` directory's train split, and real training passages. Dev passages
    (data/real/) never: learning_loop.sampling.load_prompts leaves out any that overlaps one."""

    data: str | None = Field(None, description="a `memlm generate` directory (--data): its jsonl/train.jsonl")
    statements: int = Field(300, ge=0, description="statement records drawn from the data (seeded)")
    questions: int = Field(150, ge=0, description="question records drawn from the data, their memory stored first")
    real: list[RealPrompts] = Field(
        default_factory=lambda: [
            RealPrompts(path=str(shipped("data", "real_train", "knowledgenet_person_org_train.jsonl"))),
            RealPrompts(path=str(shipped("data", "real_train", "redocred_train_person_org.jsonl")), negatives=False),
        ],
        description="real annotated training passages (any format data_gen.real reads): all of each file",
    )
    real_limit: int | None = Field(None, ge=1, description="passages per real file at most (seeded; null: all)")
    data_config: str = Field(
        str(shipped("configs", "data", "default.yaml")),
        description="the data config whose replies a real passage's gold turn uses (as `memlm generate` trains it)",
    )

    def relative_to(self, folder: Path) -> Prompts:
        """Relative paths made relative to the config file's `folder`."""
        self.data = resolve_path(self.data, folder)
        self.data_config = resolve_path(self.data_config, folder)
        for real in self.real:
            real.path = resolve_path(real.path, folder)
        return self


class GrpoSettings(Strict):
    """GRPO (objective grpo; learning_loop/grpo.py): each step, `num_generations` runs of a few prompts by the
    model being trained, with the memory controller executing their calls, rewarded by what the memory ends
    up holding and answering (learning_loop/reward.py); TRL's GRPOTrainer moves the policy towards the runs
    that beat their group, with a KL term towards the reference."""

    prompts: Prompts = Field(default_factory=Prompts, description="which prompts (data: --data)")
    num_generations: int = Field(4, ge=2, description="runs per prompt: a group, whose rewards are compared")
    temperature: float = Field(1.0, gt=0, le=2, description="sampling temperature of the runs")
    top_p: float = Field(0.95, gt=0, le=1)
    max_new_tokens: int = Field(96, ge=8, description="generated tokens per run, at most (as eval's turns)")
    max_calls: int = Field(8, ge=1, description="memory calls per run, at most")
    rollout_batch_size: int = Field(8, ge=1, description="runs decoded together (memlm's batched decoder)")
    beta: float = Field(0.04, ge=0, description="KL weight towards the reference (0: no reference scored)")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = Field("dapo", description="TRL's loss aggregation")
    epsilon: float = Field(0.2, gt=0, description="the clipping range of the probability ratio")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="advantages divided by the rewards' std in the group, the batch, or not at all"
    )
