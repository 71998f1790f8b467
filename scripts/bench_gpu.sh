#!/usr/bin/env bash
# The GPU training figures of docs/results.md ("On a GPU"), one benchmark per line of the table, each
# change measured against the same recipe without it. Run on a CUDA machine from the repository root:
#   bash scripts/bench_gpu.sh [OUT_DIR]        # DATA=runs/data by default (memlm generate's output)
# Each benchmark writes OUT_DIR/NAME.log (progress and table) and OUT_DIR/NAME.json (its figures).
set -euo pipefail
OUT=${1:-runs/bench-gpu}
DATA=${DATA:-runs/data}
MEMLM=${MEMLM:-memlm}
mkdir -p "$OUT"

bench() {  # NAME ARGS...: one `memlm bench train`, its last line (the JSON figures) kept apart
    local name=$1; shift
    echo "== $name: $MEMLM bench train $*"
    $MEMLM bench train "$@" > "$OUT/$name.log" 2>&1 || { echo "   failed: see $OUT/$name.log"; return 0; }
    tail -n 1 "$OUT/$name.log" > "$OUT/$name.json"
    grep -E "^(│|┃|┏|┡|└|╇)" "$OUT/$name.log" || true
}

SMOL="--config configs/train/gpu-smollm2.yaml --data $DATA --modes padding_free --steps 20 --warmup 3"
# 135M: records per step against token budgets, side by side
bench smollm2-batches $SMOL --batches 16,64,tokens=4096,tokens=8192,tokens=16384
# 135M: one change at a time against the recipe
bench smollm2-padded --config configs/train/gpu-smollm2.yaml --data $DATA --modes none,padding_free --steps 20 --warmup 3
bench smollm2-fused-adamw $SMOL optim.optim=adamw_torch_fused
bench smollm2-liger $SMOL gpu.use_liger_kernel=true
bench smollm2-compile $SMOL gpu.torch_compile=true
bench smollm2-flash-attn $SMOL model.attn_implementation=flash_attention_2
bench smollm2-full $SMOL method=full optim.learning_rate=5e-5

# 7B-shaped LoRA (random weights, Qwen2.5-7B's shape): tokens/s, MFU and peak memory per batching
Q7="--config configs/train/gpu-qwen2.5-7b-lora.yaml --random-init configs/models/qwen2.5-7b-instruct.json --steps 6 --warmup 2"
bench qwen7b-batches $Q7 --modes padding_free --batches 8,16,tokens=4096,tokens=8192
bench qwen7b-padded $Q7 --modes none,padding_free
bench qwen7b-no-checkpointing $Q7 --modes padding_free gpu.gradient_checkpointing=false optim.max_tokens_per_step=4096
bench qwen7b-fused-adamw $Q7 --modes padding_free optim.optim=adamw_torch_fused optim.max_tokens_per_step=4096
bench qwen7b-liger $Q7 --modes padding_free gpu.use_liger_kernel=true optim.max_tokens_per_step=4096
echo "figures in $OUT/*.json"
