"""The training configuration: one pydantic model that is the full record of a run.

A config is a YAML file (``configs/train/*.yaml``) plus ``key=value`` overrides with dotted
paths (``optim.learning_rate=1e-4``, ``lora.target_modules=[q_proj,v_proj]``), applied to the
raw mapping *before* validation, so every value goes through the same checks.  Every model
forbids unknown keys, and :meth:`TrainConfig.load` raises :class:`ConfigError` naming each bad
field, before anything heavy (model, data) is loaded.  The resolved config is written beside
the run's outputs (``train_config.yaml``) by the trainer.

Groups:

    objective   sft | dpo | kto | grpo: what is trained (sft: the records' labels; dpo/kto: preferences;
                grpo: the policy's own runs, rewarded); training/objectives/ holds one module for each
    method      lora | qlora | full
    model       base model (HF id, local path, or the embedded SmolLM2 default) and dtype
    lora        LoRA hyper-parameters (also used by qlora)
    qlora       bitsandbytes 4-bit settings (nf4, double quant, compute dtype)
    data        where the records come from, system prompt, max length
    optim       optimiser, schedule, batch sizes, steps
    packing     none | padding_free | bfd
    gpu         bf16/fp16, attention kernel, Liger, gradient checkpointing, DeepSpeed
    output      output dir, logging, evaluation, checkpoints, resume
    reference   dpo/kto/grpo: the `memlm train` run (a LoRA adapter) the policy starts from and stays near
    preference  dpo/kto: beta, the loss, KTO's weights, reference log-probs precomputed, the held-out share
                (training/objectives/preference_config.py)
    grpo        grpo: the prompts, runs per prompt, sampling, KL weight and loss
                (training/objectives/grpo_config.py)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from memory_runtime.models.embedded import EMBEDDED_MODEL
from memory_runtime.models.trained_run import TRAIN_CONFIG_FILENAME
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.shipped import shipped
from memory_runtime.yaml_config import ConfigError, Strict
from training.objectives.grpo_config import GrpoSettings
from training.objectives.preference_config import DPO_ONLY, KTO_ONLY, PreferenceSettings
from training.objectives.verifier_config import VerifierSettings

CONFIG_FILENAME = TRAIN_CONFIG_FILENAME
DEEPSPEED_PRESETS_DIR = shipped("configs", "deepspeed")
DEFAULT_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class ModelSettings(Strict):
    name: str = Field(EMBEDDED_MODEL, min_length=1, description="HF hub id, local dir, .gguf file, or embedded:...")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="auto: bfloat16 on GPUs and on CPUs that multiply it natively (AVX512-BF16, AMX), "
        "float32 elsewhere (memory_runtime.models.hardware); the run's train_config.yaml records the choice and why",
    )
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3"] | None = None
    local_files_only: bool = True
    trust_remote_code: bool = False


class LoraSettings(Strict):
    r: int = Field(16, ge=1)
    alpha: float = Field(32, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = Field(default_factory=lambda: list(DEFAULT_LORA_TARGETS))
    bias: Literal["none", "all", "lora_only"] = "none"
    use_rslora: bool = False
    modules_to_save: list[str] | None = None
    layers_to_transform: list[int] | None = Field(
        None, description="decoder layer indices that get adapters (default: all); backward stops below the lowest"
    )
    init_from: str | None = Field(
        None, description="an adapter dir to continue training (its r, targets and base are kept)"
    )
    loraplus_lr_ratio: float | None = Field(
        None,
        ge=1,
        description="LoRA+ (PEFT's create_loraplus_optimizer): the B matrices learn at this multiple "
        "of optim.learning_rate (null: one learning rate)",
    )

    @model_validator(mode="after")
    def _targets(self) -> LoraSettings:
        if isinstance(self.target_modules, list) and not self.target_modules:
            raise ValueError("target_modules must name at least one module (or be 'all-linear')")
        if isinstance(self.target_modules, list) and "lm_head" in self.target_modules:
            raise ValueError(
                "target_modules: TRL computes the loss from lm_head.weight directly; "
                "an adapter on lm_head would never train"
            )
        layers = self.layers_to_transform
        if layers is not None and (not layers or min(layers) < 0 or len(set(layers)) != len(layers)):
            raise ValueError(
                f"layers_to_transform must list distinct layer indices >= 0 (or be null for all), got {layers}"
            )
        return self


class QLoraSettings(Strict):
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: bool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class SyntheticData(Strict):
    """A small set generated in memory from data_gen's tiny config (configs/data/tiny.yaml), for smoke
    runs, benches and tests before (and without) a `memlm generate` directory."""

    train: int = Field(2000, ge=1)
    validation: int = Field(100, ge=0)
    seed: int = 0


class DataSettings(Strict):
    path: str | None = Field(
        None,
        description="sft: the DatasetDict saved by data_gen (datasets.save_to_disk); dpo/kto: a `memlm sample` "
        "directory (its pairs.jsonl / turns.jsonl) or a JSONL file",
    )
    synthetic: SyntheticData | None = None
    train_split: str = "train"
    eval_split: str | None = "validation"
    system_prompt: str | None = SYSTEM_PROMPT
    max_length: int = Field(1024, ge=8)
    overlong: Literal["drop", "truncate", "error"] = "drop"
    max_train_records: int | None = Field(None, ge=1)
    max_eval_records: int | None = Field(None, ge=1)
    num_proc: int | None = Field(None, ge=1)
    extra_jsonl: list[str] = Field(
        default_factory=list,
        description="Record JSONL files added to the train split "
        "(self-instruct kept trajectories, chat/serve feedback trajectories); dpo/kto: more PreferencePair / "
        "LabelledTurn files (reviewed feedback exports)",
    )


class OptimSettings(Strict):
    learning_rate: float = Field(2e-4, gt=0)
    lr_scheduler_type: Literal[
        "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup", "inverse_sqrt"
    ] = "cosine"
    warmup: float = Field(0.03, ge=0, description="< 1: fraction of the steps; >= 1: number of steps")
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, ge=0)
    optim: str = "adamw_torch"
    per_device_train_batch_size: int = Field(8, ge=1)
    max_tokens_per_step: int | None = Field(
        None,
        ge=8,
        description="token-budget micro-batches: records in random order up to this many tokens "
        "computed per device and micro-batch (training/token_budget.py); replaces per_device_train_batch_size",
    )
    per_device_eval_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    num_train_epochs: float = Field(1.0, gt=0)
    max_steps: int = Field(-1, description="> 0 overrides num_train_epochs")
    max_minutes: float | None = Field(
        None,
        gt=0,
        description="wall-clock budget of the training loop: the schedule is shortened to the steps "
        "that fit on this machine (training/budget.py); null: no budget",
    )
    seed: int = 0

    @model_validator(mode="after")
    def _steps(self) -> OptimSettings:
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError("max_steps must be -1 (use num_train_epochs) or a positive number of steps")
        return self


class PackingSettings(Strict):
    """none: padded batches.  padding_free: each batch's records are concatenated into one row
    (position ids restart per record, so attention stays within a record; flash-attention uses
    the varlen kernel, sdpa/eager a block-diagonal mask).  bfd: records are packed best-fit-
    decreasing into rows of block_length tokens, also padding-free.  group_by_length (padded
    batches only) samples batches of similar lengths, which cuts padding without packing."""

    mode: Literal["none", "padding_free", "bfd"] = "none"
    block_length: int | None = Field(None, ge=8, description="bfd row length (default: data.max_length)")
    group_by_length: bool = Field(False, description="mode none: batches of records of similar length")

    @model_validator(mode="after")
    def _grouping(self) -> PackingSettings:
        if self.group_by_length and self.mode != "none":
            raise ValueError("group_by_length only applies to padded batches (packing.mode=none)")
        return self


class GpuSettings(Strict):
    bf16: bool = False
    fp16: bool = False
    tf32: bool | None = None
    gradient_checkpointing: bool = False
    use_liger_kernel: bool = False
    torch_compile: bool = False
    deepspeed: str | None = Field(None, description="zero2 | zero3 (presets in configs/deepspeed) or a JSON path")
    use_cpu: bool = False
    dataloader_num_workers: int = Field(0, ge=0)
    cudnn_attention: bool = Field(
        False,
        description="let sdpa use cuDNN's attention on CUDA. It builds a plan for every new sequence length, and "
        "token-budget, padding-free and padded batches bring a new length almost every micro-batch: in the H200 "
        "profile (docs/archive/training-notes.md) that was 2.9 ms of CPU a call, a third of a step's CPU time. "
        "false leaves PyTorch's flash and memory-efficient kernels",
    )

    @model_validator(mode="after")
    def _precision(self) -> GpuSettings:
        if self.bf16 and self.fp16:
            raise ValueError("bf16 and fp16 are exclusive")
        return self


class OutputSettings(Strict):
    output_dir: str = "runs/train"
    logging_steps: int = Field(10, ge=1)
    eval_strategy: Literal["no", "steps", "epoch"] = "steps"
    eval_steps: int | None = Field(None, ge=1, description="default: logging_steps * 5")
    save_strategy: Literal["no", "steps", "epoch"] = "steps"
    save_steps: int = Field(100, ge=1)
    save_total_limit: int | None = Field(2, ge=1)
    resume_from_checkpoint: bool | str | None = Field(
        None,
        description="null: resume when output_dir holds a checkpoint of this same config (an error if "
        "of another); true: the last checkpoint (an error if none); false: start over, deleting output_dir's "
        "checkpoints; or a checkpoint directory",
    )
    report_to: list[str] = Field(default_factory=list)
    final_eval: bool = True

    @field_validator("eval_strategy", "save_strategy", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # YAML 1.1 reads a bare `no` as false


class TrainConfig(Strict):
    what = "training config"

    objective: Literal["sft", "dpo", "kto", "grpo", "verifier"] = Field(
        "sft",
        description="sft: the records' trained tokens (TRL's SFTTrainer); dpo: PreferencePair JSONL; "
        "kto: LabelledTurn JSONL (both from `reference`, training/objectives/dpo.py, kto.py); grpo: the policy's "
        "own runs with the memory, rewarded (from `reference`, learning_loop/grpo.py); verifier: the write "
        "verifier, a classifier on VerifierExample JSONL (training/objectives/verifier.py)",
    )
    method: Literal["lora", "qlora", "full"] = "lora"
    model: ModelSettings = Field(default_factory=ModelSettings)
    reference: str | None = Field(
        None,
        description="dpo/kto: the SFT run to start from, a `memlm train` output directory (a LoRA adapter of "
        "model.name): the policy is a trainable copy of its adapter, the reference a frozen one",
    )
    lora: LoraSettings = Field(default_factory=LoraSettings)
    qlora: QLoraSettings = Field(default_factory=QLoraSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    preference: PreferenceSettings = Field(default_factory=PreferenceSettings)
    grpo: GrpoSettings = Field(default_factory=GrpoSettings)
    verifier: VerifierSettings = Field(default_factory=VerifierSettings)
    optim: OptimSettings = Field(default_factory=OptimSettings)
    packing: PackingSettings = Field(default_factory=PackingSettings)
    gpu: GpuSettings = Field(default_factory=GpuSettings)
    output: OutputSettings = Field(default_factory=OutputSettings)

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        data, packing = self.data, self.packing
        if data.path is not None and data.synthetic is not None:
            raise ValueError("data: set either data.path (data_gen output) or data.synthetic, not both")
        if packing.block_length is not None and packing.mode != "bfd":
            raise ValueError("packing.block_length only applies to packing.mode=bfd")
        if packing.mode == "bfd" and packing.block_length is not None and packing.block_length < data.max_length:
            raise ValueError(
                f"packing.block_length ({packing.block_length}) must be >= data.max_length ({data.max_length}): "
                "bfd would cut records that do not fit a row"
            )
        if self.output.eval_strategy != "no" and data.eval_split is None:
            raise ValueError("output.eval_strategy needs data.eval_split (or set output.eval_strategy=no)")
        budget = self.optim.max_tokens_per_step
        if budget is not None and packing.mode == "bfd":
            raise ValueError(
                "optim.max_tokens_per_step: bfd packing makes rows of its own (packing.block_length); "
                "use packing.mode padding_free or none with a token budget"
            )
        if budget is not None and budget < data.max_length:
            raise ValueError(
                f"optim.max_tokens_per_step ({budget}) must be at least data.max_length "
                f"({data.max_length}): a record must fit a batch"
            )
        if self.method == "full" and self.lora.loraplus_lr_ratio is not None:
            raise ValueError(
                "lora.loraplus_lr_ratio: LoRA+ sets the adapters' B learning rate; method=full has no adapters"
            )
        if self.method == "qlora" and self.model.dtype == "float16" and self.gpu.bf16:
            raise ValueError("qlora with model.dtype=float16 and gpu.bf16=true mixes precisions; pick one")
        self._objective_fields()
        return self

    def _objective_fields(self) -> None:
        """The settings an objective takes: dpo/kto train LoRA on padded batches; a setting of another
        objective is an error, not a silent no-op. (`reference` is required at training: check_reference.)"""
        objective = self.objective
        changed = sorted(self.preference.model_dump().items() - PreferenceSettings().model_dump().items())
        grpo_changed = self.grpo.model_dump(exclude={"prompts"}) != GrpoSettings().model_dump(exclude={"prompts"})
        if grpo_changed and objective != "grpo":
            raise ValueError(f"grpo: settings of objective grpo; objective is {objective} (set objective=grpo)")
        if objective == "grpo" and changed:
            raise ValueError(f"preference.{changed[0][0]}: a setting of objective dpo/kto; objective is grpo")
        if self.verifier != VerifierSettings() and objective != "verifier":
            raise ValueError(f"verifier: settings of objective verifier; objective is {objective}")
        if objective == "verifier":
            refused = (
                ("reference", self.reference is not None, "a verifier is trained from the base"),
                ("preference", bool(changed), "a setting of objective dpo/kto"),
                ("method", self.method != "lora", "a verifier is a LoRA adapter with its head"),
                ("data.synthetic", self.data.synthetic is not None, "it reads VerifierExample JSONL"),
                ("packing.mode", self.packing.mode != "none", "its batches are padded: packing.mode=none"),
                ("optim.max_tokens_per_step", self.optim.max_tokens_per_step is not None, "an SFT setting"),
            )
            for name, is_set, why in refused:
                if is_set:
                    raise ValueError(f"{name}: not with objective verifier: {why}")
            return
        if objective == "sft":
            if self.reference is not None:
                raise ValueError(
                    "reference: the SFT run that preference training starts from; objective is sft "
                    "(set objective=dpo or objective=kto)"
                )
            if changed:
                raise ValueError(
                    f"preference.{changed[0][0]}: a setting of objective dpo/kto; objective is sft "
                    "(set objective=dpo or objective=kto, or remove the preference settings)"
                )
            return
        other_only = KTO_ONLY if objective == "dpo" else DPO_ONLY
        for key, _ in changed if objective != "grpo" else ():
            if key in other_only:
                other = "kto" if objective == "dpo" else "dpo"
                raise ValueError(f"preference.{key}: a setting of objective {other}; objective is {objective}")
        if self.method != "lora":
            raise ValueError(
                f"method: objective {objective} continues the reference's LoRA adapter: method must be lora "
                f"(got {self.method})"
            )
        refused = (
            ("lora.init_from", self.lora.init_from is not None, "the policy starts from `reference`"),
            ("lora.loraplus_lr_ratio", self.lora.loraplus_lr_ratio is not None, "an SFT setting"),
            ("data.synthetic", self.data.synthetic is not None, "templated SFT records; dpo/kto/grpo read others"),
            ("packing.mode", self.packing.mode != "none", "preference batches are padded: packing.mode=none"),
            ("packing.group_by_length", self.packing.group_by_length, "an SFT setting"),
            ("optim.max_tokens_per_step", self.optim.max_tokens_per_step is not None, "an SFT setting"),
        )
        for name, is_set, why in refused:
            if is_set:
                raise ValueError(f"{name}: not with objective {objective}: {why}")
        per_step = self.optim.per_device_train_batch_size * self.optim.gradient_accumulation_steps
        if objective == "grpo" and per_step % self.grpo.num_generations:
            raise ValueError(
                f"optim.per_device_train_batch_size x gradient_accumulation_steps ({per_step} runs a step) must be "
                f"a multiple of grpo.num_generations ({self.grpo.num_generations}): a step holds whole groups"
            )
        kl = objective == "kto" and self.preference.kto_loss == "kto"
        if kl and self.optim.per_device_train_batch_size < 2:
            raise ValueError(
                "optim.per_device_train_batch_size: KTO estimates its KL term from the other turns of a batch: "
                "it needs at least 2"
            )

    # ------------------------------------------------------------------ helpers

    @property
    def block_length(self) -> int:
        return self.packing.block_length or self.data.max_length

    def differences(self, other: TrainConfig, ignore: Sequence[str] = ()) -> list[str]:
        """`key: ours -> theirs` for every dotted field whose value differs (fields in `ignore` skipped)."""

        def flat(value: Any, prefix: str = "") -> dict[str, Any]:
            if isinstance(value, dict):
                return {k: v for key, child in value.items() for k, v in flat(child, f"{prefix}{key}.").items()}
            return {prefix[:-1]: value}

        ours, theirs = flat(self.model_dump(mode="json")), flat(other.model_dump(mode="json"))
        return [
            f"{key}: {ours.get(key)!r} -> {theirs.get(key)!r}"
            for key in sorted(set(ours) | set(theirs))
            if key not in ignore and ours.get(key) != theirs.get(key)
        ]

    def relative_to(self, folder: Path) -> TrainConfig:
        """grpo.prompts' relative paths are relative to the config file (the others to the working directory,
        where the command line gives them)."""
        self.grpo.prompts.relative_to(folder)
        return self

    def require_data(self) -> None:
        if self.objective == "grpo":
            if self.data.path is None and not self.grpo.prompts.real:
                raise ConfigError(
                    "data.path: no prompts: pass --data DIR (a `memlm generate` directory) or list grpo.prompts.real"
                )
            return
        if self.objective != "sft" and self.data.path is None and not self.data.extra_jsonl:
            what = {
                "dpo": "pairs.jsonl: PreferencePair lines",
                "kto": "turns.jsonl: LabelledTurn lines",
                "verifier": "verifier.jsonl: VerifierExample lines",
            }[self.objective]
            raise ConfigError(
                f"data.path: no training data: pass --data DIR (a `memlm sample` directory with {what}) "
                "or --data FILE.jsonl"
            )
        if self.data.path is None and self.data.synthetic is None and not self.data.extra_jsonl:
            raise ConfigError(
                "data.path: no training data: pass --data DIR (a DatasetDict saved by data_gen) "
                "or set data.synthetic for the templated smoke-test set"
            )


# ---------------------------------------------------------------------- environment checks


def resolve_deepspeed(value: str | None) -> str | None:
    """A preset name (zero2, zero3) or a JSON path -> an existing file path (or None)."""
    if value is None:
        return None
    preset = DEEPSPEED_PRESETS_DIR / f"{value}.json"
    if "/" not in value and not value.endswith(".json") and preset.is_file():
        return str(preset)
    path = Path(value).expanduser()
    if not path.is_file():
        known = sorted(p.stem for p in DEEPSPEED_PRESETS_DIR.glob("*.json"))
        raise ConfigError(f"gpu.deepspeed: {value!r} is neither a preset ({', '.join(known)}) nor a JSON file")
    return str(path)


def check_init_from(config: TrainConfig) -> None:
    """lora.init_from must be a LoRA adapter of this very base."""
    if config.lora.init_from is None:
        return
    init = Path(config.lora.init_from).expanduser()
    if config.method == "full":
        raise ConfigError("lora.init_from: continues a LoRA adapter; method=full trains every weight")
    if not (init / "adapter_config.json").is_file():
        raise ConfigError(f"lora.init_from: {init} is not a PEFT adapter directory (no adapter_config.json)")
    from memory_runtime.models.loading import adapter_base

    if adapter_base(init) != config.model.name:
        raise ConfigError(
            f"lora.init_from: the adapter was trained on {adapter_base(init)!r}, "
            f"but model.name is {config.model.name!r}"
        )


def check_reference(config: TrainConfig) -> None:
    """`reference` (objective dpo/kto/grpo: required) must be a LoRA run of this very base, trained with this
    system prompt (the policy is served with data.system_prompt; the reference learned its own)."""
    if config.objective in ("sft", "verifier"):
        return
    if config.reference is None:
        raise ConfigError(
            f"reference: objective {config.objective} needs the SFT run to start from: "
            "reference=RUN_DIR (a `memlm train` output directory)"
        )
    from memory_runtime.models.loading import adapter_base
    from memory_runtime.models.trained_run import trained_system_prompt

    ref = Path(config.reference).expanduser()
    if not ref.is_dir():
        raise ConfigError(f"reference: {ref} is not a directory (the SFT run to start from: a `memlm train` output)")
    if not (ref / "adapter_config.json").is_file():
        what = "a full model (method=full)" if (ref / "config.json").is_file() else "not a `memlm train` run"
        raise ConfigError(f"reference: {ref} is {what}, not a LoRA adapter directory (no adapter_config.json)")
    try:
        base = adapter_base(ref)
    except ValueError as err:
        raise ConfigError(f"reference: {err}") from None
    if base != config.model.name:
        raise ConfigError(f"reference: the adapter was trained on {base!r}, but model.name is {config.model.name!r}")
    prompt = trained_system_prompt(ref)
    if prompt != config.data.system_prompt:
        raise ConfigError(
            f"data.system_prompt: the reference learned {prompt!r}, this config trains with "
            f"{config.data.system_prompt!r}; the policy must keep the reference's prompt"
        )


def preflight(config: TrainConfig) -> list[str]:
    """Check what the config needs from this machine before any model loads.

    Raises ConfigError for what cannot work (missing bitsandbytes/deepspeed/flash-attn/liger,
    a missing data dir); returns warnings for what will fall back.
    """
    warnings: list[str] = []
    config.require_data()
    if config.data.path is not None and not Path(config.data.path).expanduser().exists():
        raise ConfigError(f"data.path: {config.data.path} does not exist")
    for i, extra in enumerate(config.data.extra_jsonl):
        if not Path(extra).expanduser().is_file():
            raise ConfigError(f"data.extra_jsonl.{i}: {extra} is not a file")

    def need(module: str, what: str, pip: str) -> None:
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"{what} needs the {pip!r} package: pip install {pip} (or pip install 'memlm[gpu]')")

    check_init_from(config)
    check_reference(config)
    if config.method == "qlora":
        need("bitsandbytes", "method=qlora", "bitsandbytes")
    if config.gpu.deepspeed is not None:
        resolve_deepspeed(config.gpu.deepspeed)
        need("deepspeed", "gpu.deepspeed", "deepspeed")
    attn = config.model.attn_implementation
    if attn == "flash_attention_2":
        need("flash_attn", "model.attn_implementation=flash_attention_2", "flash-attn")
    if attn == "flash_attention_3":
        need("flash_attn_interface", "model.attn_implementation=flash_attention_3", "flash-attn-3")
    if config.gpu.use_liger_kernel:
        need("liger_kernel", "gpu.use_liger_kernel", "liger-kernel")
    import torch

    if not torch.cuda.is_available():
        if config.gpu.fp16:
            raise ConfigError("gpu.fp16: fp16 mixed precision needs a GPU (use gpu.bf16 or float32 on the CPU)")
        if attn in ("flash_attention_2", "flash_attention_3"):
            raise ConfigError(f"model.attn_implementation={attn} needs a CUDA GPU")
        if config.gpu.deepspeed is not None:
            warnings.append("gpu.deepspeed is set but no GPU is visible: DeepSpeed will run on the CPU accelerator")
    return warnings
