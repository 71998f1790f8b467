"""The `preference` section of a training config (objective dpo and kto, training/objectives/dpo.py and
kto.py): one section for both, as TRL's DPOConfig and KTOConfig share most of it. A module of its own so
that loading a config imports no trainer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memory_runtime.yaml_config import Strict


class PreferenceSettings(Strict):
    """DPO and KTO (objective dpo | kto; training/objectives/dpo.py, kto.py). Each setting maps onto TRL's DPOConfig or
    KTOConfig; the ones marked DPO or KTO only are refused with the other objective, all of them with sft."""

    beta: float = Field(
        0.1,
        gt=0,
        description="how far the policy may move from the reference (TRL's beta): higher stays closer",
    )
    dpo_loss: Literal[
        "sigmoid", "ipo", "hinge", "sigmoid_norm", "apo_zero", "apo_down", "bco_pair", "nca_pair", "sppo_hard"
    ] = Field("sigmoid", description="DPO only: TRL's loss_type (sigmoid: the DPO paper's)")
    kto_loss: Literal["kto", "apo_zero_unpaired"] = Field("kto", description="KTO only: TRL's loss_type")
    desirable_weight: float = Field(1.0, gt=0, description="KTO only: weight of the desirable turns' losses")
    undesirable_weight: float = Field(1.0, gt=0, description="KTO only: weight of the undesirable turns' losses")
    precompute_ref_log_probs: bool = Field(
        False,
        description="score every pair/turn under the reference once before training (outside optim.max_minutes) "
        "instead of in every step",
    )
    eval_share: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="share of the prompts held out (seeded by optim.seed; all pairs/turns of a prompt on one "
        "side) for the eval loss and rewards; 0: none",
    )


DPO_ONLY = ("dpo_loss",)
KTO_ONLY = ("kto_loss", "desirable_weight", "undesirable_weight")
