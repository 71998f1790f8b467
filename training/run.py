"""A training run's lifecycle, shared by every objective (training/objectives/: sft, dpo, kto; grpo in
learning_loop/grpo.py): the checks before anything loads, the model and its adapter, the reference copy,
TRL's arguments, progress lines, the time budget, resuming, and the ending (final evaluation, metrics.json,
the save, the run card), written once in :class:`Run` so that an objective only builds its trainer."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from memory_runtime.jsonl import write_jsonl
from memory_runtime.memory.memory_config import RELATION_TABLE_FILE
from memory_runtime.models.hardware import DtypeChoice, resolve_dtype
from training.run_card import README_FILENAME, write_run_card
from training.train_config import (
    CONFIG_FILENAME,
    ConfigError,
    TrainConfig,
    check_init_from,
    check_reference,
    preflight,
    resolve_deepspeed,
)

logger = logging.getLogger(__name__)

METRICS_FILENAME = "metrics.json"
LOG_FILENAME = "train_log.jsonl"

LogFn = Callable[[str], None]


def keep_relation_table(config: TrainConfig, out: Path) -> None:
    """Copy the memory relation table the data was made with (relations.yaml of a `memlm generate`
    directory, else of the run this one starts from) into the run `out`: eval, chat and serve open the
    trained model's memory with the relations it learned (MemoryConfig.of_model)."""
    for source in (config.data.path, config.model.name):
        table = Path(str(source)).expanduser() / RELATION_TABLE_FILE if source else None
        if table is not None and table.is_file():
            shutil.copyfile(table, out / RELATION_TABLE_FILE)
            return


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _silent(line: str) -> None:
    """The log of a data-parallel run's other processes: rank 0 says it once."""


@dataclass
class TrainResult:
    output_dir: Path
    metrics: dict[str, Any]
    log_history: list[dict[str, Any]] = field(default_factory=list)
    trainer: Any = None


# --------------------------------------------------------------------------- building blocks


def is_main_process() -> bool:
    """Rank 0 of a launched run (torchrun / accelerate launch set RANK), or a run of one process:
    the one that prints, so a data-parallel run logs each line once."""
    return int(os.environ.get("RANK", "0")) == 0


def training_device() -> str:
    """Where the Trainer will put the model: the GPU when one is visible."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def model_dtype(config: TrainConfig) -> DtypeChoice:
    """model.dtype for this machine (``auto``: memory_runtime.models.hardware.choose_dtype), with its reason."""
    return resolve_dtype(config.model.dtype, training_device())


def quantized_device() -> str:
    """Where a 4-bit model is quantised: this process's GPU, else the CPU."""
    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return "cpu"


def build_quantization_config(config: TrainConfig) -> Any:
    from transformers import BitsAndBytesConfig

    q = config.qlora
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=q.quant_type,
        bnb_4bit_use_double_quant=q.double_quant,
        bnb_4bit_compute_dtype=getattr(torch, q.compute_dtype),
        bnb_4bit_quant_storage=getattr(torch, q.compute_dtype),  # lets FSDP/ZeRO-3 shard the 4-bit weights
    )


def build_model(config: TrainConfig) -> Any:
    """Load the base model for training (memory_runtime.models.loading.load_model; 4-bit for QLoRA)."""
    from memory_runtime.models.loading import load_model

    kwargs: dict[str, Any] = {}
    if config.model.attn_implementation is not None:
        kwargs["attn_implementation"] = config.model.attn_implementation
    if config.model.trust_remote_code:
        kwargs["trust_remote_code"] = True
    dtype: Any = model_dtype(config).torch_dtype
    device = "cpu"  # the Trainer moves the model to its device
    if config.gpu.deepspeed is not None and torch.distributed.is_initialized():
        import deepspeed

        # ZeRO-3 shards the weights as they load and asks DeepSpeed's own process group for the world
        # size: join the group accelerate made (on GPUs transformers already has; a no-op then)
        deepspeed.init_distributed()
    if config.method == "qlora":
        device = quantized_device()
        kwargs["quantization_config"] = build_quantization_config(config)
        kwargs["device_map"] = {"": device}
        if config.model.dtype == "float32":  # non-quantised parts (norms, embeddings) in the compute dtype
            dtype = getattr(torch, config.qlora.compute_dtype)
    model, _ = load_model(
        config.model.name, dtype=dtype, device=device, local_files_only=config.model.local_files_only, **kwargs
    )
    if config.method == "qlora":
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=config.gpu.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
    layers, n_layers = config.lora.layers_to_transform, getattr(model.config, "num_hidden_layers", None)
    if layers and n_layers is not None and max(layers) >= n_layers:  # the range is the model's: checked once loaded
        raise ConfigError(
            f"lora.layers_to_transform: {config.model.name} has layers 0..{n_layers - 1}, got {max(layers)}"
        )
    model.config.use_cache = False
    return model


def build_peft_config(config: TrainConfig, task_type: str = "CAUSAL_LM") -> Any:
    """LoraConfig for lora / qlora, None for full fine-tuning or an adapter continued (lora.init_from).
    `task_type` SEQ_CLS: a classifier's (PEFT then trains and saves its head, `score`, whole)."""
    if config.method == "full" or config.lora.init_from is not None:
        return None
    from peft import LoraConfig

    lora = config.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        bias=lora.bias,
        use_rslora=lora.use_rslora,
        modules_to_save=lora.modules_to_save,
        layers_to_transform=lora.layers_to_transform,
        task_type=task_type,
    )


REFERENCE_ADAPTER = "ref"
"""The name TRL's DPO, KTO and GRPO trainers give the frozen copy of a PeftModel's adapter (the reference)."""


def load_policy(config: TrainConfig) -> Any:
    """The model a run from ``reference`` trains (objective dpo, kto): the base (:func:`build_model`) with
    the reference run's LoRA adapter loaded as its trainable "default" adapter.

    TRL's DPO, KTO and GRPO trainers, given a PeftModel and no ``ref_model``, add a frozen copy of that
    adapter named "ref" (PEFT's ``add_adapter``, the weights copied at construction) and score the reference
    with it active (``trl.trainer.utils.use_adapter``): the policy starts as the SFT run and the reference
    stays the SFT run, on one base in memory. The copy is never saved (:func:`drop_reference_copy`).
    ``check_reference`` has checked the directory and its base before anything loads."""
    from peft import PeftModel

    if config.reference is None:
        raise ConfigError(f"reference: objective {config.objective} needs the SFT run to start from")
    model = build_model(config)
    return PeftModel.from_pretrained(model, str(Path(config.reference).expanduser()), is_trainable=True)


def drop_reference_copy(directory: str | Path) -> None:
    """Remove the frozen "ref" adapter PEFT saves beside the trained one (``DIR/ref/``): a run holds the
    adapter it trained, as an SFT run does (its reference is the run named in train_config.yaml), and a
    checkpoint without it resumes into the trained adapter alone (the reference is rebuilt from ``reference``)."""
    copy = Path(directory) / REFERENCE_ADAPTER
    if (copy / "adapter_config.json").is_file():
        shutil.rmtree(copy)


class SavesPolicyOnly:
    """Mixed into a TRL trainer that holds the frozen "ref" copy (DPO, KTO, GRPO): its saves, checkpoints
    included, keep the trained adapter alone (:func:`drop_reference_copy`)."""

    def save_model(self, output_dir: str | None = None, **kwargs: Any) -> None:
        super().save_model(output_dir, **kwargs)
        if self.args.should_save:
            drop_reference_copy(output_dir or self.args.output_dir)


def training_arguments(
    config: TrainConfig, fields: dict[str, Any], *, has_eval: bool, output_dir: str | None = None
) -> dict[str, Any]:
    """The TrainingArguments every objective's TRL config takes from optim, gpu and output. ``fields``: the
    config class's dataclass fields (transformers 5.18 renamed gradient checkpointing; 5.17 has the old name)."""
    o, g, opt = config.output, config.gpu, config.optim
    eval_strategy = o.eval_strategy if has_eval else "no"
    kwargs: dict[str, Any] = dict(
        output_dir=output_dir or o.output_dir,
        per_device_train_batch_size=opt.per_device_train_batch_size,
        per_device_eval_batch_size=opt.per_device_eval_batch_size,
        gradient_accumulation_steps=opt.gradient_accumulation_steps,
        learning_rate=opt.learning_rate,
        lr_scheduler_type=opt.lr_scheduler_type,
        warmup_steps=opt.warmup,
        weight_decay=opt.weight_decay,
        max_grad_norm=opt.max_grad_norm,
        optim=opt.optim,
        num_train_epochs=opt.num_train_epochs,
        max_steps=opt.max_steps,
        seed=opt.seed,
        bf16=g.bf16,
        fp16=g.fp16,
        tf32=g.tf32,
        use_liger_kernel=g.use_liger_kernel,
        torch_compile=g.torch_compile,
        deepspeed=resolve_deepspeed(g.deepspeed),
        ddp_find_unused_parameters=False,  # every trainable parameter (LoRA or full) is used in each forward
        # on a machine without CUDA train on the CPU (as training_device() and the dtype choice assume):
        # transformers needs it for CPU bf16, and accelerate for data parallel across CPU processes (gloo)
        use_cpu=g.use_cpu or training_device() == "cpu",
        dataloader_num_workers=g.dataloader_num_workers,
        logging_steps=o.logging_steps,
        logging_first_step=True,
        eval_strategy=eval_strategy,
        save_strategy=o.save_strategy,
        save_steps=o.save_steps,
        save_total_limit=o.save_total_limit,
        report_to=o.report_to or "none",
        disable_tqdm=True,  # ProgressLogger prints one line per log instead
    )
    if eval_strategy == "steps":
        kwargs["eval_steps"] = o.eval_steps or o.logging_steps * 5
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    kwargs[checkpointing] = g.gradient_checkpointing
    kwargs[f"{checkpointing}_kwargs"] = {"use_reentrant": False} if g.gradient_checkpointing else None
    return kwargs


# --------------------------------------------------------------------------- progress


class ProgressLogger(TrainerCallback):
    """One line per log event (step, loss, lr, eval loss, speed, ETA) + a JSON-lines log file."""

    def __init__(self, log: LogFn = _stderr, path: Path | None = None) -> None:
        self.log = log
        self.path = path
        self.start = time.perf_counter()
        self.first_step: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()
        self.first_step = state.global_step
        self.log(f"training: {state.max_steps} steps (from step {state.global_step})")

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        if self.path is not None and state.is_world_process_zero:
            write_jsonl(self.path, [{"step": state.global_step, **logs}], append=True)
        if not state.is_world_process_zero:
            return
        elapsed = time.perf_counter() - self.start
        done = state.global_step - (self.first_step or 0)
        eta = ""
        if done > 0 and state.max_steps:
            eta = f" | eta {elapsed / done * (state.max_steps - state.global_step):.0f}s"
        parts = [f"step {state.global_step}/{state.max_steps}"]
        for key, fmt in (
            ("loss", "{:.4f}"),
            ("eval_loss", "{:.4f}"),
            ("learning_rate", "{:.2e}"),
            ("grad_norm", "{:.3f}"),
            ("mean_token_accuracy", "{:.3f}"),
            ("eval_mean_token_accuracy", "{:.3f}"),
            ("rewards/margins", "{:.3f}"),  # dpo, kto
            ("rewards/accuracies", "{:.3f}"),
            ("kl", "{:.3f}"),
            ("eval_rewards/margins", "{:.3f}"),
            ("eval_rewards/accuracies", "{:.3f}"),
            ("train_loss", "{:.4f}"),
        ):
            if key in logs and isinstance(logs[key], (int, float)):
                parts.append(f"{key.replace('learning_rate', 'lr')} {fmt.format(logs[key])}")
        self.log(" | ".join(parts) + f" | {elapsed:.0f}s{eta}")


# --------------------------------------------------------------------------- training


RESUME_IGNORES = ("output.resume_from_checkpoint", "output.output_dir", "output.report_to", "output.logging_steps")
"""Fields that may change between a run and its resumption: they do not change what is trained."""


def plan_resume(config: TrainConfig, log: LogFn = _stderr) -> str | None:
    """The checkpoint to resume from, or None to start from step 0 (output.resume_from_checkpoint).

    By default (null) a run resumes when its output directory holds a checkpoint written with the
    same config (train_config.yaml there), and refuses to mix runs when the config differs."""
    from transformers.trainer_utils import get_last_checkpoint

    resume, out = config.output.resume_from_checkpoint, Path(config.output.output_dir)
    last = get_last_checkpoint(str(out)) if out.is_dir() else None
    if resume is False:
        if last is not None and is_main_process():
            old = sorted(out.glob("checkpoint-*"))
            for checkpoint in old:
                shutil.rmtree(checkpoint)
            log(f"starting over: removed {len(old)} checkpoint(s) of the earlier run in {out}")
        return None
    start_over = "pass --fresh (output.resume_from_checkpoint=false) to start over, or choose another --out"
    if resume is None and last is None:
        finished_run_here(config, out, start_over, log)
        return None
    if resume is None:
        differences = earlier_differences(config, out)
        if differences is None:
            raise ConfigError(
                f"{out} holds {Path(last).name} but no {CONFIG_FILENAME} to check it against: {start_over}"
            )
        if differences:
            raise ConfigError(
                f"{out} holds {Path(last).name} of a run with another config "
                f"({'; '.join(differences[:6])}): {start_over}"
            )
        log(f"resuming from {last}: {out} holds a checkpoint of this same config (--fresh starts over)")
        return last
    if resume is True or (isinstance(resume, str) and resume.lower() in ("true", "latest", "last")):
        if last is None:
            raise ConfigError(f"output.resume_from_checkpoint: no checkpoint-* directory in {out} to resume from")
        return last
    if not Path(resume).is_dir():
        raise ConfigError(f"output.resume_from_checkpoint: {resume} is not a checkpoint directory")
    return str(resume)


def earlier_differences(config: TrainConfig, out: Path) -> list[str] | None:
    """How the config of the run that wrote `out` differs from `config` in what is trained (RESUME_IGNORES
    aside); None when `out` holds no train_config.yaml to tell."""
    saved = out / CONFIG_FILENAME
    return TrainConfig.load(saved).differences(config, ignore=RESUME_IGNORES) if saved.is_file() else None


def finished_run_here(config: TrainConfig, out: Path, start_over: str, log: LogFn) -> None:
    """A finished run's adapter in the output directory (no checkpoint left to resume) is replaced only by a run
    of the same config, or with --fresh: another base or recipe trained there would silently take its place."""
    if not (out / "adapter_config.json").is_file():
        return
    differences = earlier_differences(config, out)
    if differences is None or differences:
        what = f"of another config ({'; '.join(differences[:6])})" if differences else f"with no {CONFIG_FILENAME}"
        raise ConfigError(f"{out} holds the adapter of a finished run {what}: {start_over}")
    log(f"training again into {out}: it holds the adapter of a finished run of this same config (replaced)")


def dtype_note(config: TrainConfig, choice: DtypeChoice) -> tuple[str, str | None]:
    """The line that says which dtype the run uses and why, and a warning when it is a slow choice here."""
    if config.model.dtype == "auto":
        return f"model.dtype: auto -> {choice.dtype} on this machine: {choice.reason}", None
    auto = resolve_dtype("auto", training_device())
    note = f"model.dtype: {choice.dtype} (set; auto would choose {auto.dtype} here: {auto.reason})"
    slow = choice.dtype == "bfloat16" and auto.dtype == "float32" and training_device() == "cpu"
    return note, (
        "model.dtype=bfloat16 on a CPU without native bfloat16: every step may run tens of times "
        "slower than in float32; model.dtype=auto picks float32 here"
    ) if slow else None


PREFERENCE_METRICS = ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "kl")
"""What DPO and KTO log besides the loss (TRL's names; KTO has kl, DPO accuracies): metrics.json keeps the last."""


def choose_attention_kernels(config: TrainConfig) -> None:
    """Which of PyTorch's sdpa kernels training may use on CUDA (gpu.cudnn_attention); a no-op elsewhere."""
    if torch.cuda.is_available() and not config.gpu.use_cpu:
        torch.backends.cuda.enable_cudnn_sdp(config.gpu.cudnn_attention)


@dataclass
class Run:
    """A run that passed its checks (:func:`start_run`), as every objective drives it: ``resume`` (plan_resume)
    and ``load_tokenizer``, then ``save_config``, the trainer built with ``callbacks(...)``, ``train`` and
    ``finish``. ``started`` is when the run's own work began (metrics.json's wall_seconds)."""

    config: TrainConfig  # as it runs: model.dtype resolved
    choice: DtypeChoice
    notes: list[str]  # what train_config.yaml says about the run besides its config
    log: LogFn  # this process's: a data-parallel run's other processes are silent
    started: float
    resume: str | None = None
    tokenizer: Any = None
    budget: Any = None  # the TimeBudget callback of optim.max_minutes, made by callbacks()

    @property
    def out(self) -> Path:
        return Path(self.config.output.output_dir)

    def load_tokenizer(self) -> Any:
        from memory_runtime.models.loading import load_tokenizer

        model = self.config.model
        self.tokenizer = load_tokenizer(model.name, local_files_only=model.local_files_only)
        return self.tokenizer

    def save_config(self, *, relation_table: bool = True) -> None:
        """Create the output directory and write train_config.yaml (and the relation table, keep_relation_table)
        into it: called once the input is known good, so that bad data leaves nothing."""
        self.out.mkdir(parents=True, exist_ok=True)
        if is_main_process():
            self.config.save(self.out / CONFIG_FILENAME, self.notes)
            if relation_table:
                keep_relation_table(self.config, self.out)

    def data_stats(self, train_ds: Any, eval_ds: Any, measure: Callable[[Any], dict]) -> dict[str, Any]:
        """`measure` (an objective's token statistics) of the train split and the validation split where there is
        one, logged as the `data:` line: what :meth:`finish` writes as metrics.json's `data`."""
        stats = {"train": measure(train_ds)}
        if eval_ds is not None:
            stats["validation"] = measure(eval_ds)
        self.log(f"data: {json.dumps(stats)}")
        return stats

    def callbacks(self, callbacks: Sequence[Any] = ()) -> list[Any]:
        """The trainer's callbacks: the progress lines and train_log.jsonl, the time budget, then the caller's."""
        self.budget = time_budget(self.config, self.resume, self.log)
        return [ProgressLogger(self.log, self.out / LOG_FILENAME), *([self.budget] if self.budget else []), *callbacks]

    def train(self, trainer: Any) -> Any:
        """trainer.train(), from the checkpoint to resume, with ProgressLogger's lines instead of the printed logs."""
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        log_trainable(trainer, self.config, self.log)
        return trainer.train(resume_from_checkpoint=self.resume)

    def finish(
        self, trainer: Any, result: Any, *, has_eval: bool, stats: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> TrainResult:
        """After :meth:`train`: the final evaluation, metrics.json (with `extra`, an objective's own figures),
        what the budget reached, the save, and the run card (README.md, training/run_card.py)."""
        config, out, notes, log = self.config, self.out, self.notes, self.log
        metrics: dict[str, Any] = dict(result.metrics)
        if has_eval and config.output.final_eval:
            last = trainer.state.log_history[-2:] if trainer.state.log_history else []
            done = [h for h in last if "eval_loss" in h and h.get("step") == trainer.state.global_step]
            # the last step was just evaluated: reuse it rather than run the same evaluation again
            metrics.update({k: v for k, v in done[-1].items() if k.startswith("eval_")} if done else trainer.evaluate())
        history = trainer.state.log_history
        seen = [h["num_tokens"] for h in history if "num_tokens" in h]
        metrics["num_tokens"] = seen[-1] if seen else None  # tokens trained on (padding excluded), as TRL counts
        for key in PREFERENCE_METRICS:  # the last logged value (the mean of a logging window); none for sft
            logged = [h[key] for h in history if key in h]
            if logged:
                metrics[key] = logged[-1]
        metrics["data"] = stats
        metrics["wall_seconds"] = time.perf_counter() - self.started
        metrics["global_step"] = trainer.state.global_step
        metrics["dtype"] = {"dtype": self.choice.dtype, "reason": self.choice.reason}
        metrics["distributed"] = distributed_summary(trainer)
        metrics.update(extra or {})
        if self.budget is not None:
            metrics["budget"] = outcome = self.budget.outcome(trainer.state.global_step)
            reached = (
                f"optim.max_minutes {outcome['max_minutes']:g}: trained {outcome['reached_steps']} of "
                f"{outcome['requested_steps']} steps in {outcome['spent_minutes']:.1f} min on this machine"
            )
            if outcome["reached_steps"] < outcome["requested_steps"]:
                speed = f"{outcome['step_s']:.2f} s/step; " if outcome["step_s"] else ""
                reached += (
                    f" ({speed}to repeat the run elsewhere: "
                    f"optim.max_steps={outcome['reached_steps']} optim.max_minutes=null)"
                )
            notes.append(reached)
            log(reached)

        trainer.save_model(str(out))  # adapter (or full model) + tokenizer
        if trainer.is_world_process_zero():
            self.tokenizer.save_pretrained(str(out))
            config.save(out / CONFIG_FILENAME, notes)
            (out / METRICS_FILENAME).write_text(json.dumps(_jsonable(metrics), indent=2) + "\n")
            trainer.save_state()
            # last: TRL writes its hub card at every checkpoint, PEFT at every save_model; the run card replaces it
            write_run_card(config, trainer, metrics, out)
            saved = f"{CONFIG_FILENAME}, {METRICS_FILENAME} and {README_FILENAME}"
            log(f"saved {config.method} model, tokenizer, {saved} to {out}")
        return TrainResult(out, metrics, list(trainer.state.log_history), trainer)


def start_run(config: TrainConfig, *, check_all: bool, log: LogFn) -> Run:
    """The checks before anything heavy, and the dtype this machine trains in. ``check_all``: everything
    :func:`preflight` checks (False: datasets were given; only the adapters named in the config)."""
    if not is_main_process():
        log = _silent
    # PEFT looks the base up by name at every save to see whether embeddings were resized; an
    # embedded:... base is no hub id, and nothing was resized (we never add tokens)
    warnings.filterwarnings("ignore", message="Could not find a config file in embedded:", category=UserWarning)
    if check_all:  # configuration problems surface before anything heavy is imported or loaded
        for warning in preflight(config):
            log(f"warning: {warning}")
    else:
        check_init_from(config)
        check_reference(config)
    choose_attention_kernels(config)
    choice = model_dtype(config)
    note, slow = dtype_note(config, choice)
    config = config.model_copy(deep=True)
    config.model.dtype = choice.dtype  # the saved config records what ran, its notes why
    log(note)
    if slow:
        log(f"warning: {slow}")
    return Run(config, choice, [note], log, started=time.perf_counter())


def time_budget(config: TrainConfig, resume: str | None, log: LogFn) -> Any:
    """The TimeBudget callback of optim.max_minutes (None: no budget), with a resumed checkpoint's state."""
    if config.optim.max_minutes is None:
        return None
    from training.budget import TimeBudget, read_checkpoint_budget

    before = read_checkpoint_budget(resume) if resume is not None else None
    return TimeBudget(
        config.optim.max_minutes,
        log,
        requested_steps=config.optim.max_steps if config.optim.max_steps > 0 else None,
        spent_s=(before or {}).get("spent_s", 0.0),
        planned_steps=(before or {}).get("planned_steps"),
    )


def log_trainable(trainer: Any, config: TrainConfig, log: LogFn) -> None:
    if config.method != "full" and trainer.is_world_process_zero():
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in trainer.model.parameters())
        log(f"model: {config.model.name} ({config.method}), trainable {trainable:,} of {total:,} parameters")


def distributed_summary(trainer: Any) -> dict[str, Any]:
    """How the run was spread: processes, accelerate's distributed type, the ZeRO stage if DeepSpeed ran."""
    accelerator = trainer.accelerator
    plugin = accelerator.state.deepspeed_plugin if trainer.is_deepspeed_enabled else None
    return {
        "processes": accelerator.num_processes,
        "type": accelerator.distributed_type.value,
        "zero_stage": plugin.zero_stage if plugin is not None else None,
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
