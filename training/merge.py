"""Merge a LoRA adapter into its base model and save a plain Hugging Face model directory.

The base is the one the adapter records (``embedded:SmolLM2-135M-Instruct`` for adapters
trained on the embedded default, resolved through memory_runtime.models.loading), loaded *unquantised*
in ``dtype``: a QLoRA adapter is merged into full-precision weights (merging into 4-bit
weights would round the update away).  The merged model then loads with any HF tooling or
``memory_runtime.models.loading.load_model(output_dir)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def merge_adapter(
    adapter_dir: str | Path,
    output_dir: str | Path,
    *,
    base: str | None = None,
    dtype: str = "float32",
    local_files_only: bool = True,
) -> Path:
    """Load ``base`` (default: the adapter's recorded base) + the adapter, merge, save to ``output_dir``."""
    from memory_runtime.models.loading import is_adapter_dir, load_model

    adapter_dir, output_dir = Path(adapter_dir), Path(output_dir)
    if not is_adapter_dir(adapter_dir):
        raise ValueError(f"{adapter_dir} is not a PEFT adapter directory (no adapter_config.json)")
    if output_dir.exists() and any(output_dir.iterdir()):
        raise FileExistsError(f"{output_dir} exists and is not empty")
    if base is None:
        model, tokenizer = load_model(str(adapter_dir), dtype=dtype, local_files_only=local_files_only)
    else:
        model, tokenizer = load_model(base, adapter=str(adapter_dir), dtype=dtype, local_files_only=local_files_only)
    merged = merge_loaded(model)
    output_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(output_dir))
    tokenizer.save_pretrained(str(output_dir))
    recorded = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
    (output_dir / "memlm_merge.json").write_text(
        json.dumps({"adapter": str(adapter_dir.resolve()), "base": base or recorded, "dtype": dtype}, indent=2) + "\n"
    )
    return output_dir


def merge_loaded(model: Any) -> Any:
    """``merge_and_unload`` a PeftModel (LoRA weights folded into the base linear layers)."""
    if not hasattr(model, "merge_and_unload"):
        raise ValueError("the model has no adapter to merge")
    merged = model.merge_and_unload()
    merged.eval()
    return merged
