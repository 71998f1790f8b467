"""``memlm bench train``: training throughput, padded batches vs padding-free packing, in one run.

Both modes run the real training step (the trainer of ``memlm train``: TRL's collator, its loss,
backward, optimizer step) on the same model and the *same records in the same order*, for
the same number of optimizer steps; only the batching differs.  Reported per mode:

- ``trained_tokens_per_s``: tokens that carry a label (what the model learns from),
- ``tokens_per_s``: real (non-pad) tokens processed,
- ``padded_positions_per_s``: positions computed, padding included,
- ``peak_mem_mb``: peak process RSS during the mode's steps (CPU) or peak CUDA memory
  allocated (GPU), and ``step_s``: mean seconds per optimizer step.

Warm-up steps are excluded from the timing.  With ``rounds`` > 1 the modes take turns (A B A B ...)
and each mode's figures sum its rounds: a machine that speeds up or slows down during the run
then shifts both modes alike instead of the ratio.  Modes: ``none`` (padded), ``grouped`` (padded,
batches of similar lengths), ``padding_free``, ``bfd`` (packed rows of ``packing.block_length``
tokens).  ``grouped`` and ``bfd`` see the same records as the others, batched differently.

On CUDA the figures include MFU: model FLOPs per trained-on token (``model_flops_per_token``: the
linear layers' 2 FLOPs per weight forward, 2 more for the input gradients backward, and 2 more for
weight gradients only where weights train, so LoRA's frozen base costs 4 per weight, not 6; plus
attention over each token's context), times tokens/s, over the GPU's dense bf16 peak
(``GPU_PEAK_TFLOPS``); and the GPU's utilisation sampled during the steps. ``random_init`` (a model
config.json) builds the model from its config with random weights and the embedded model's
tokenizer, so any architecture, the 7B ones included, can be timed without its weights.
``optim.max_tokens_per_step`` times token-budget batches (the modes then see different records).
``batches`` (e.g. ``4,16,tokens=2048``) times several batchings side by side: N records a step, or a
token budget of N tokens a step (token-budget batches see records in their own order).

``dtypes`` (e.g. ``auto,float32,bfloat16``) times each mode with the base weights in each dtype
(one model per dtype, the variants taking turns like the modes): how much a CPU without native
bfloat16 loses to it, in one run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from training.train_config import TrainConfig

MODES = ("none", "grouped", "padding_free", "bfd")

# Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by a substring of torch.cuda.get_device_name().
GPU_PEAK_TFLOPS = {
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,
    "GH200": 989.0,
    "B200": 2250.0,
    "A100": 312.0,
    "A10G": 125.0,
    "A10": 125.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
    "RTX 4090": 165.0,
    "RTX 3090": 71.0,
    "V100": 125.0,
    "T4": 65.0,
}


def gpu_peak_tflops(name: str) -> float | None:
    """The dense bf16 peak of a GPU by its name (longest matching key), None when unknown."""
    matches = [key for key in GPU_PEAK_TFLOPS if key in name]
    return GPU_PEAK_TFLOPS[max(matches, key=len)] if matches else None


def model_flops_per_token(model: Any, mean_context: float) -> float:
    """Training FLOPs per token of `model` as it trains (see the module docstring): 6 per trained
    linear weight, 4 per frozen one (no weight gradient), and attention's scores and weighted sums
    (fwd 4 x context x width per layer, backward twice that) over `mean_context` earlier tokens."""
    frozen = trained = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            n = module.weight.numel()
            if module.weight.requires_grad:
                trained += n
            else:
                frozen += n
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    width = getattr(config, "num_attention_heads", 0) * (
        getattr(config, "head_dim", None) or config.hidden_size // max(1, config.num_attention_heads)
    )
    attention = 12 * config.num_hidden_layers * width * mean_context
    return 4 * frozen + 6 * trained + attention


class _GpuUtilisation:
    """Samples torch.cuda.utilization() (NVML) in a thread; mean percent, or None without NVML."""

    def __init__(self, interval: float = 0.1) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(float(torch.cuda.utilization()))
            except Exception:  # no NVML (pynvml) here: nothing to report
                return
            self._stop.wait(0.1)

    def __enter__(self) -> _GpuUtilisation:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


def record_lengths(inputs: dict[str, Any]) -> list[int]:
    """The real length of each record in a collated batch (padded rows, or padding-free segments)."""
    if "attention_mask" in inputs:
        return [int(n) for n in inputs["attention_mask"].sum(-1)]
    positions = inputs["position_ids"].flatten().tolist()
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
    return [b - a for a, b in zip(starts, starts[1:])]


def random_model(config_json: str, dtype: Any) -> Any:
    """A model of the architecture in `config_json` (a Hugging Face config.json, or a directory
    holding one) with random weights: for timing architectures whose weights are not here."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(config_json)
    if not (path / "config.json" if path.is_dir() else path).is_file():
        raise ValueError(f"--random-init: {config_json} is not a config.json (or a directory with one)")
    config = AutoConfig.from_pretrained(str(path))
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # initialise 7B weights where they will run, not on the CPU first
        return AutoModelForCausalLM.from_config(config, dtype=dtype)


class _PeakRss:
    """Samples the process RSS in a thread (CPU peak memory of one phase)."""

    def __init__(self, interval: float = 0.005) -> None:
        import psutil

        self._proc = psutil.Process(os.getpid())
        self._interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> _PeakRss:
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def start_profiler(on_cuda: bool) -> Any:
    """torch.profiler over the timed steps: operators, kernels, and the Python calls around them."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_cuda else [])]
    profiler = profile(activities=activities, with_stack=True)
    profiler.start()
    return profiler


def write_profile(profiler: Any, prefix: str, seconds: float, steps: int, on_cuda: bool) -> dict[str, Any]:
    """Write PREFIX.ops.txt (operators by self device time and by self CPU time, and CPU time by the
    Python stack that called it) and PREFIX.trace.json.gz (a Chrome/Perfetto trace); return the
    headline: the share of the profiled wall time that kernels kept the GPU busy."""
    import gzip
    import shutil

    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    events = profiler.key_averages()
    device_s = sum(e.self_device_time_total for e in events) / 1e6 if on_cuda else 0.0
    cpu_s = sum(e.self_cpu_time_total for e in events) / 1e6
    headline = {
        "steps": steps,
        "wall_s": round(seconds, 3),
        "operator_cpu_s": round(cpu_s, 3),
        **({"kernel_s": round(device_s, 3), "gpu_busy_pct": round(100 * device_s / seconds, 1)} if on_cuda else {}),
    }
    headline["summary"] = (
        f"{seconds / steps:.3f} s a step, kernels {100 * device_s / seconds:.0f}% of the wall time"
        if on_cuda
        else f"{seconds / steps:.3f} s a step, operators' own CPU time {cpu_s / steps:.3f} s a step"
    )
    tables = []
    if on_cuda:
        tables.append(("by self device time", events.table(sort_by="self_device_time_total", row_limit=40)))
    tables.append(("by self CPU time", events.table(sort_by="self_cpu_time_total", row_limit=40)))
    stacks = profiler.key_averages(group_by_stack_n=6)
    tables.append(("CPU time by calling Python stack", stacks.table(sort_by="self_cpu_time_total", row_limit=30)))
    with open(f"{prefix}.ops.txt", "w") as out:
        out.write(f"{headline}\n")
        for title, table in tables:
            out.write(f"\n== {title}\n{table}\n")
    raw = f"{prefix}.trace.json"
    profiler.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(f"{raw}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    return headline


def parse_batches(spec: Sequence[str]) -> list[tuple[str, int | None, int | None]]:
    """``["4", "tokens=2048"]`` -> ``[("4rec", 4, None), ("2048tok", None, 2048)]``: (label, records, token budget)."""
    out = []
    for item in spec:
        item = item.strip()
        key, _, value = item.partition("=") if "=" in item else ("records", "", item)
        if key not in ("records", "tokens") or not value.isdigit() or int(value) < 1:
            raise ValueError(f"bench batches: {item!r} is neither a record count (16) nor a token budget (tokens=2048)")
        n = int(value)
        out.append((f"{n}rec", n, None) if key == "records" else (f"{n}tok", None, n))
    return out


def _mode_config(
    config: TrainConfig, mode: str, steps: int, output_dir: str, records: int | None = None, tokens: int | None = None
) -> TrainConfig:
    data = config.model_dump()
    if records is not None:
        data["optim"].update(per_device_train_batch_size=records, max_tokens_per_step=None)
    if tokens is not None:
        data["optim"]["max_tokens_per_step"] = tokens
    data["packing"] = {
        "mode": "none" if mode == "grouped" else mode,
        "block_length": config.packing.block_length if mode == "bfd" else None,
        "group_by_length": mode == "grouped",
    }
    data["optim"]["max_steps"] = steps
    data["optim"]["warmup"] = 0
    data["optim"]["lr_scheduler_type"] = "constant"
    data["output"].update(
        output_dir=output_dir,
        eval_strategy="no",
        save_strategy="no",
        final_eval=False,
        logging_steps=10**6,
        report_to=[],
        resume_from_checkpoint=None,
    )
    return TrainConfig.model_validate(data)


def bench_train(
    config: TrainConfig,
    *,
    steps: int = 6,
    warmup_steps: int = 1,
    modes: Sequence[str] = ("none", "padding_free"),
    rounds: int = 1,
    dtypes: Sequence[str] = (),
    batches: Sequence[str] = (),
    random_init: str | None = None,
    profile_dir: str | None = None,
    model: Any = None,
    tokenizer: Any = None,
    train_dataset: Any = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Time ``steps`` optimizer steps per mode and round (after ``warmup_steps`` each); return the figures.

    ``model``/``tokenizer``/``train_dataset`` (tokenised) may be given (tests); by default they
    come from the config (data: data.path, data.synthetic, or a templated set of
    ``steps * batch * 4`` records when the config names no data). ``profile_dir``: the timed steps of
    each variant's first round run under torch.profiler (``write_profile``: where a step's time goes).
    """
    import tempfile

    from transformers import PrinterCallback, TrainerCallback

    from memory_runtime.models.loading import load_tokenizer
    from training.data import build_datasets
    from training.objectives.sft import TrainedPositionsSFTTrainer, build_sft_config
    from training.run import build_model, build_peft_config, choose_attention_kernels

    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"unknown bench modes {bad}; choose from {MODES}")
    if steps < 1 or warmup_steps < 0 or rounds < 1:
        raise ValueError("steps and rounds must be >= 1 and warmup_steps >= 0")
    total_steps = steps + warmup_steps
    choose_attention_kernels(config)
    batchings = parse_batches(batches) or [("", None, None)]
    accumulate = config.optim.gradient_accumulation_steps
    batch = max(n or config.optim.per_device_train_batch_size for _, n, _ in batchings) * accumulate
    budgets = [t for _, _, t in batchings if t] or (
        [config.optim.max_tokens_per_step] if config.optim.max_tokens_per_step and not batches else []
    )

    if tokenizer is None:
        tokenizer = load_tokenizer(config.model.name, local_files_only=config.model.local_files_only)
    if train_dataset is None:
        raw = config.model_dump()
        raw["data"]["eval_split"] = None  # the bench only trains
        raw["output"].update(eval_strategy="no", final_eval=False)
        if config.data.path is None and config.data.synthetic is None:
            raw["data"]["synthetic"] = {"train": total_steps * batch * 4, "validation": 0, "seed": config.optim.seed}
        train_dataset = build_datasets(TrainConfig.model_validate(raw), tokenizer)["train"]
    need = total_steps * batch
    if not budgets and len(train_dataset) < need:
        raise ValueError(
            f"the bench needs {need} records ({total_steps} steps x {batch}); the data has {len(train_dataset)}"
        )
    train_dataset = train_dataset.shuffle(seed=config.optim.seed)
    if not budgets:
        train_dataset = train_dataset.select(range(need))
    vocab = getattr(tokenizer, "vocab_size", None)

    from memory_runtime.models.hardware import resolve_dtype
    from training.run import model_dtype, training_device

    peft_config = build_peft_config(config)

    def ready(model: Any) -> Any:
        if peft_config is not None and not hasattr(model, "peft_config"):
            from peft import get_peft_model

            model = get_peft_model(model, peft_config)
        return model

    # variant name -> (mode, model); with several dtypes a variant is "mode/dtype"
    dtype_names = list(dict.fromkeys(dtypes)) or [config.model.dtype]
    chosen = {
        name: (model_dtype(config) if name == config.model.dtype else resolve_dtype(name, training_device()))
        for name in dtype_names
    }
    models: dict[str, Any] = {}
    for name in dtype_names:
        if model is not None and len(dtype_names) == 1:
            models[name] = ready(model)
        else:
            variant = config.model_copy(deep=True)
            variant.model.dtype = name
            if random_init is not None:
                built = random_model(random_init, chosen[name].torch_dtype)
                if vocab and built.get_input_embeddings().num_embeddings < len(tokenizer):
                    raise ValueError(
                        f"--random-init: the model's vocabulary is smaller than the tokenizer's ({len(tokenizer)})"
                    )
                models[name] = ready(built)
            else:
                models[name] = ready(build_model(variant))
    # variant name -> (mode, model, records, token budget): "mode", "mode/dtype", "mode/4rec", "mode/2048tok"
    variants = {
        "/".join([mode, *([name] if len(dtype_names) > 1 else []), *([label] if len(batchings) > 1 else [])]): (
            mode,
            models[name],
            records,
            tokens,
        )
        for mode in modes
        for name in dtype_names
        for label, records, tokens in batchings
    }
    on_cuda = torch.cuda.is_available() and not config.gpu.use_cpu

    class Counting(TrainedPositionsSFTTrainer):
        def training_step(self, model, inputs, *args, **kwargs):
            labels = inputs["labels"]
            self.bench_counts["trained"] += int((labels[:, 1:] != -100).sum())
            if "attention_mask" in inputs:
                self.bench_counts["tokens"] += int(inputs["attention_mask"].sum())
            else:
                self.bench_counts["tokens"] += int(inputs["input_ids"].numel())
            self.bench_counts["positions"] += int(inputs["input_ids"].numel())
            lengths = record_lengths(inputs)
            self.bench_counts["records"] += len(lengths)
            self.bench_counts["context"] += sum(n * (n + 1) // 2 for n in lengths)
            return super().training_step(model, inputs, *args, **kwargs)

    class Timer(TrainerCallback):
        def __init__(self, trainer_ref: list, profile_to: str | None) -> None:
            self.ref = trainer_ref
            self.t0: float | None = None
            self.profile_to = profile_to
            self.profiler: Any = None

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == warmup_steps:
                trainer = self.ref[0]
                trainer.bench_counts = {"trained": 0, "tokens": 0, "positions": 0, "records": 0, "context": 0}
                if on_cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                if self.profile_to:
                    self.profiler = start_profiler(on_cuda)
                self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == total_steps and self.t0 is not None:
                if on_cuda:
                    torch.cuda.synchronize()
                self.ref[0].bench_seconds = time.perf_counter() - self.t0
                if self.profiler is not None:
                    self.profiler.stop()
                    self.ref[0].bench_profile = write_profile(
                        self.profiler, self.profile_to, self.ref[0].bench_seconds, steps, on_cuda
                    )
                    self.profiler = None

    totals = {
        key: {"seconds": 0.0, "trained": 0, "tokens": 0, "positions": 0, "records": 0, "context": 0, "peak": 0.0}
        for key in variants
    }
    round_speedups: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memlm-bench-") as tmp:
        for r in range(rounds):
            step_s: dict[str, float] = {}
            for key, (mode, model, records, tokens) in variants.items():
                cfg = _mode_config(config, mode, total_steps, os.path.join(tmp, key.replace("/", "-")), records, tokens)
                ref: list = []
                profile_to = os.path.join(profile_dir, key.replace("/", "-")) if profile_dir and r == 0 else None
                trainer = Counting(
                    model=model,
                    args=build_sft_config(cfg, has_eval=False),
                    train_dataset=train_dataset,
                    processing_class=tokenizer,
                    callbacks=[Timer(ref, profile_to)],
                    max_tokens_per_step=cfg.optim.max_tokens_per_step,
                )
                trainer.remove_callback(PrinterCallback)
                trainer.bench_counts = {"trained": 0, "tokens": 0, "positions": 0, "records": 0, "context": 0}
                ref.append(trainer)
                size = (
                    f"up to {cfg.optim.max_tokens_per_step} tokens"
                    if cfg.optim.max_tokens_per_step
                    else f"{cfg.optim.per_device_train_batch_size * accumulate} records"
                )
                log(
                    f"bench: {key}: {total_steps} steps of {size} ({warmup_steps} warm-up)"
                    + (f", round {r + 1}/{rounds}" if rounds > 1 else "")
                )
                with _PeakRss() as rss, _GpuUtilisation() if on_cuda else contextlib.nullcontext() as util:
                    trainer.train()
                seconds = getattr(trainer, "bench_seconds", None) or float("nan")
                t = totals[key]
                t["seconds"] += seconds
                for count in ("trained", "tokens", "positions", "records", "context"):
                    t[count] += trainer.bench_counts[count]
                t["peak"] = max(t["peak"], (torch.cuda.max_memory_allocated() if on_cuda else rss.peak) / 2**20)
                if on_cuda and util.mean is not None:
                    t.setdefault("utilisation", []).append(util.mean)
                t["model"] = model
                step_s[key] = seconds / steps
                if getattr(trainer, "bench_profile", None):
                    t["profile"] = trainer.bench_profile
                    log(f"bench: {key}: profile in {profile_to}.*: {trainer.bench_profile['summary']}")
                log(
                    f"bench: {key}: {trainer.bench_counts['trained'] / seconds:.0f} trained tokens/s, "
                    f"{trainer.bench_counts['tokens'] / seconds:.0f} tokens/s, {step_s[key]:.2f} s/step"
                )
                del trainer
            if "none" in step_s and "padding_free" in step_s:
                round_speedups.append(step_s["none"] / step_s["padding_free"])
    results: dict[str, Any] = {}
    for key, t in totals.items():
        results[key] = {
            "steps": steps * rounds,
            "step_s": t["seconds"] / (steps * rounds),
            "records_per_step": t["records"] / (steps * rounds),
            "trained_tokens": t["trained"],
            "tokens": t["tokens"],
            "padded_positions": t["positions"],
            "trained_tokens_per_s": t["trained"] / t["seconds"],
            "tokens_per_s": t["tokens"] / t["seconds"],
            "padded_positions_per_s": t["positions"] / t["seconds"],
            "peak_mem_mb": t["peak"],
            **({"profile": t["profile"]} if "profile" in t else {}),
        }
        if on_cuda:
            flops = model_flops_per_token(t["model"], t["context"] / max(1, t["tokens"]))
            peak = gpu_peak_tflops(torch.cuda.get_device_name())
            achieved = flops * t["tokens"] / t["seconds"] / 1e12
            results[key].update(
                model_tflops=round(achieved, 2), gpu_peak_tflops=peak, mfu=round(achieved / peak, 4) if peak else None
            )
            if t.get("utilisation"):
                results[key]["gpu_utilisation_pct"] = sum(t["utilisation"]) / len(t["utilisation"])
    out: dict[str, Any] = {
        "model": config.model.name,
        "method": config.method,
        "device": "cuda" if on_cuda else "cpu",
        "threads": torch.get_num_threads(),
        "batch_records": batch,
        "rounds": rounds,
        "dtypes": {name: {"dtype": c.dtype, "reason": c.reason} for name, c in chosen.items()},
        **({"random_init": random_init} if random_init else {}),
        **({"max_tokens_per_step": budgets[0]} if len(budgets) == 1 and len(batchings) == 1 else {}),
        **({"batches": [label for label, _, _ in batchings]} if len(batchings) > 1 else {}),
        **({"gpu": torch.cuda.get_device_name()} if on_cuda else {}),
        "modes": results,
    }
    if rounds > 1 and round_speedups:
        out["speedup_padding_free_vs_padded_per_round"] = round_speedups
    if "none" in results:
        base = results["none"]["trained_tokens_per_s"]
        for mode in results:
            if mode != "none":
                out[f"speedup_{mode}_vs_padded"] = results[mode]["trained_tokens_per_s"] / base
    if len(batchings) > 1:  # each batching against the first, mode by mode
        first = batchings[0][0]
        for mode in modes:
            for label, _, _ in batchings[1:]:
                out[f"speedup_{mode}/{label}_vs_{first}"] = (
                    results[f"{mode}/{label}"]["trained_tokens_per_s"]
                    / results[f"{mode}/{first}"]["trained_tokens_per_s"]
                )
    if len(dtype_names) > 1:  # each dtype against the first, mode by mode
        first = dtype_names[0]
        for mode in modes:
            for name in dtype_names[1:]:
                out[f"speedup_{mode}/{name}_vs_{first}"] = (
                    results[f"{mode}/{name}"]["trained_tokens_per_s"]
                    / results[f"{mode}/{first}"]["trained_tokens_per_s"]
                )
    return out
