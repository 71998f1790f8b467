#!/usr/bin/env bash
# One cell of the quality curve (docs/results.md#the-quality-curve): train CONFIG for exactly STEPS steps
# (no time budget, so cells compare across machines), then evaluate the run on every part the curve reports.
#
#   bash scripts/curve_cell.sh runs/curve/s-r16-1x configs/train/cpu-smollm2.yaml 440 [key=value ...]
#   python3 scripts/curve.py runs/curve --plot docs/img/curve.png
#
# DIR/model          memlm train (resolved config and metrics.json inside)
# DIR/eval-real      every dev passage of data/real/ (pair and triplet F1, false writes), each write scored by
#                    every write-gate signal (the precision-recall curves; generation.write_gate.score=true)
# DIR/eval-synthetic held-out teacher-forced turns (--limit per category) and episode questions
# MEMLM_CURVE_DATA (default runs/data) is the memlm generate directory; MEMLM_CURVE_LIMIT (default 40) the
# records per category and episodes of the synthetic evaluation; MEMLM_CURVE_EVAL_ARGS (default
# "--workers 2") how the evaluations run. A finished step is not run again. On a GPU, fixed records per step
# (the curve counts records, so no token budget) and batched evaluation:
#   MEMLM_CURVE_EVAL_ARGS="generation.device=cuda generation.max_batch_size=64" bash scripts/curve_cell.sh runs/curve/s-r16-10x \
#     configs/train/gpu-smollm2.yaml 1100 optim.max_tokens_per_step=null optim.per_device_train_batch_size=16 \
#     optim.gradient_accumulation_steps=1
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { echo "usage: $0 DIR CONFIG STEPS [key=value ...]" >&2; exit 2; }
dir=$1 config=$2 steps=$3
shift 3
data=${MEMLM_CURVE_DATA:-runs/data}
limit=${MEMLM_CURVE_LIMIT:-40}
read -r -a eval_args <<< "${MEMLM_CURVE_EVAL_ARGS:---workers 2}"
# Enough distinct records that no cell repeats one (the configs tokenise a 20k subset by default).
records=$((steps * 16 > 20000 ? steps * 16 : 20000))

if [ ! -f "$dir/model/metrics.json" ]; then
  python3 -m memlm train --config "$config" --data "$data" --out "$dir/model" --max-steps "$steps" \
    optim.max_minutes=null output.eval_steps="$steps" output.save_steps="$steps" \
    data.max_train_records="$records" "$@"
fi
if [ ! -f "$dir/eval-real/metrics.json" ]; then
  python3 -m memlm eval --model "$dir/model" --data "$data" --out "$dir/eval-real" --systems memlm \
    --parts real "${eval_args[@]}" generation.write_gate.score=true
fi
if [ ! -f "$dir/eval-synthetic/metrics.json" ]; then
  python3 -m memlm eval --model "$dir/model" --data "$data" --out "$dir/eval-synthetic" --systems memlm \
    --parts records,episodes --limit "$limit" "${eval_args[@]}"
fi
