#!/usr/bin/env bash
# The main job on the embedded default model (SmolLM2-135M-Instruct), on a CPU:
# install -> generate a dataset -> train a LoRA -> evaluate against baselines -> a short chat.
# ~21–23 minutes on 2 cores. Outputs in runs/: data/, cpu-smollm2/ (adapter), eval/ (report.md,
# metrics.json, plots), demo.sqlite (the chat's memory).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
memlm generate --config configs/data/default.yaml --out runs/data --overwrite
memlm train --config configs/train/cpu-smollm2.yaml --data runs/data --output-dir runs/cpu-smollm2
memlm eval --model runs/cpu-smollm2 --data runs/data --out runs/eval --limit ${MEMLM_EVAL_LIMIT:-3} --workers 2
rm -f runs/demo.sqlite*
memlm chat --model runs/cpu-smollm2 --db runs/demo.sqlite --show-calls < scripts/demo_chat.txt
