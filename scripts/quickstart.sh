#!/usr/bin/env bash
# The main job on the embedded default model (SmolLM2-135M-Instruct), on any x86 CPU:
# install -> generate a dataset -> train a LoRA adapter -> evaluate it against baselines -> a short chat.
# The install (scripts/install.sh: what the job needs, no test tools) goes into the Python that `python3`
# names, an active virtual environment's or the system's (PYTHON=... picks another), and every step runs on it.
# At most ~30 minutes on 2 cores: training has a wall-clock budget (optim.max_minutes in
# configs/train/cpu-smollm2.yaml), so a CPU that emulates bfloat16 or runs slower trains fewer steps
# instead of for hours; the summary at the end says what the run reached.
# Outputs in runs/: data/, cpu-smollm2/ (adapter), eval/ (report.md, metrics.json, plots), demo.sqlite.
# Run it again after an interruption: training resumes from its last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
stage() { printf '\n=== [%s] %s (at %s)\n' "$1" "$2" "$(date -u -d "@$(($(date +%s) - START))" +%M:%S)" >&2; }
CONFIG=configs/train/cpu-smollm2.yaml
LIMIT=${MEMLM_EVAL_LIMIT:-3}
PY=${PYTHON:-python3}
memlm() { "$PY" -m memlm "$@"; }  # the install's own interpreter, whatever PATH holds

stage 1/5 "install memlm and the embedded model (~2 min; under a minute when already installed)"
bash scripts/install.sh
MINUTES=$("$PY" -c "import yaml; print(yaml.safe_load(open('$CONFIG'))['optim']['max_minutes'])")
memlm env --json | "$PY" -c "import json,sys; e=json.load(sys.stdin); c=e['dtype_auto']['cpu']; \
print(f\"this machine: {e['cpu']['model']}, {e['cpu']['cores']} cores; training in {c['dtype']} ({c['reason']})\")" >&2

stage 2/5 "generate 100k synthetic training records (~30 s)"
memlm generate --config configs/data/default.yaml --out runs/data --overwrite

stage 3/5 "train a LoRA adapter: at most $MINUTES min of training, plus ~1 min of loading and a final eval"
memlm train --config "$CONFIG" --data runs/data --out runs/cpu-smollm2

stage 4/5 "evaluate the adapter and two baselines on $LIMIT cases per category (a smoke test, ~7-9 min)"
memlm eval --model runs/cpu-smollm2 --data runs/data --out runs/eval --limit "$LIMIT" --workers 2 --full

stage 5/5 "chat with the adapter and its memory from a script, calls shown (~1 min)"
rm -f runs/demo.sqlite*
memlm chat --model runs/cpu-smollm2 --db runs/demo.sqlite --show-calls < scripts/demo_chat.txt

"$PY" - "$START" <<'EOF' >&2
import json, sys, time
train = json.load(open("runs/cpu-smollm2/metrics.json"))
evaluation = json.load(open("runs/eval/metrics.json"))
budget, dtype = train.get("budget") or {}, train["dtype"]
calls = evaluation["systems"]["memlm"].get("records", {})
turns, exact = calls.get("turns"), (calls.get("calls") or {}).get("exact")
print(f"\n=== done in {(time.time() - float(sys.argv[1])) / 60:.1f} min")
print(f"training: {train['global_step']} of {budget.get('requested_steps', train['global_step'])} steps in "
      f"{budget.get('spent_minutes', train['train_runtime'] / 60):.1f} min ({dtype['dtype']}); eval loss {train['eval_loss']:.4f}")
if exact is not None:
    print(f"eval: {100 * exact:.1f}% exact memory calls on {turns} held-out turns (a smoke test; "
          "docs/results.md has larger samples)")
print("report: runs/eval/report.md   adapter: runs/cpu-smollm2   memory: runs/demo.sqlite")
print("its facts on the memory page: memlm ui --db runs/demo.sqlite, sign in with memlm-demo-key")
EOF
