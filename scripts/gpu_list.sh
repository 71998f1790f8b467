#!/usr/bin/env bash
# The pending GPU list (docs/results.md, issue text), in order of what it decides, sized for one short GPU
# lease (~8 minutes of work on one H100/H200 for steps 0-9, ~7 more for step 10). Each step has its own time
# limit and writes its figures as it ends, so a lease that runs out keeps what was done. Run from the
# repository root on a CUDA machine:
#   DATA=runs/data bash scripts/gpu_list.sh [OUT_DIR]          # DATA: memlm generate's output
#  0 cudnn             the GPU recipe's step with cuDNN's attention allowed and not (gpu.cudnn_attention), side
#                      by side, the second under torch.profiler (bench train --profile): does the fixed cost go?
#  1 qwen7b            7B-shaped LoRA training throughput and peak memory (random weights of Qwen2.5-7B's shape)
#  2 gpu-recipe        configs/train/gpu-smollm2.yaml (440 steps x 2 x 4,096 tokens, at most 4 minutes)
#  3 eval              memlm eval on CUDA of ADAPTER (default: step 2's, else the base): first 150 record turns
#                      with generation.one_forward_per_step false and true side by side (joining prompts and
#                      read results fed alone or in the step's forward: does the new GPU default pay?), then
#                      records + episodes, --limit 40 (the 560 test turns and 40 episodes of the CPU recipe's figures)
#  4 serve             memlm bench serve on CUDA of ADAPTER, hf engine, 1 and 32 clients
#  5 smollm2-batches   the 135M LoRA's tokens/s per batching (bench_gpu.sh's first line)
#  6 sample            memlm sample on CUDA of step 2's adapter (407 prompts x 4 runs, as the CPU measurement)
#  7 dpo               DPO of step 2's adapter on step 6's pairs (configs/train/dpo-smollm2.yaml, 2 minutes)
#  8 grpo              GRPO of step 2's adapter with the memory in the loop (grpo-smollm2.yaml, 3 minutes)
#  9 soak              memlm bench soak (scripted model, SQLite, 64 clients, a 60,000-fact import at 120 s) for
#                      8 minutes on the machine's 16 cores, the server on cores the clients do not share: do the
#                      read/listing p99 targets (50/200 ms) hold where the 2-core VM's steal and shared cores
#                      are gone? (needs the server's packages: fastapi, uvicorn, httptools, uvloop, httpx, psutil, datasketch)
# 10 locomo            issue 56 on a GPU: the conversational data (seed 0, as the CPU recipe's), the GPU recipe of
#                      the 135M on it (configs/train/gpu-smollm2-conversations.yaml, at most 5 minutes), then
#                      part locomo on CUDA: memlm's full context, chunks and triples read by its own reader, and
#                      the base's full context and chunks (needs bm25s and PyStemmer besides the training packages)
# Step 10 runs first: it is what the one open issue waits for; the others are figures of closed ones.
# Steps 6-8 need step 2's adapter (a supervised run). STEPS="1 2 3 4 5" picks steps; MEMLM (default "python3 -m memlm") runs memlm.
# Steps 3 and 4 run under py-spy (OUT/NAME.folded: where a turn's time goes) when py-spy is on the PATH.
set -uo pipefail
OUT=${1:-runs/gpu-list}
MEMLM=${MEMLM:-python3 -m memlm}
DATA=${DATA:-runs/data}
STEPS=${STEPS:-10 0 1 2 3 4 5 6 7 8 9}
TOKENIZER=${TOKENIZER:-embedded:SmolLM2-135M-Instruct}  # the 7B shape's tokens (no hub here): ~same lengths
mkdir -p "$OUT"

step() {  # NAME SECONDS COMMAND...: run one step under its time limit, log and wall time kept
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    echo "== $name (limit ${limit}s): $*"
    timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "   rc $rc, $((SECONDS - start)) s"
    printf '{"step": "%s", "rc": %d, "wall_s": %d}\n' "$name" "$rc" "$((SECONDS - start))" >> "$OUT/steps.jsonl"
    tail -n 3 "$OUT/$name.log" | cut -c1-400
}

spy() {  # NAME: the words that run a command under py-spy into OUT/NAME.folded, if py-spy is here
    command -v py-spy > /dev/null && echo "py-spy record -r 50 -f raw --nonblocking -o $OUT/$1.folded --"
}

adapter() { [ -f "$OUT/gpu-smollm2/adapter_config.json" ] && echo "$OUT/gpu-smollm2" || echo "$TOKENIZER"; }
for s in $STEPS; do
    case $s in
    0) SMOL="--config configs/train/gpu-smollm2.yaml --data $DATA --modes padding_free --steps 6 --warmup 3"
       step cudnn-on 120 $MEMLM bench train $SMOL gpu.cudnn_attention=true
       step cudnn-off 150 $MEMLM bench train $SMOL gpu.cudnn_attention=false --profile "$OUT/profile" ;;
    1) step qwen7b 200 $MEMLM bench train --config configs/train/gpu-qwen2.5-7b-lora.yaml \
           --random-init configs/models/qwen2.5-7b-instruct.json --steps 4 --warmup 1 --modes padding_free \
           --batches tokens=4096,tokens=8192 model.name="$TOKENIZER" model.local_files_only=true ;;
    2) step gpu-recipe 330 $MEMLM train --config configs/train/gpu-smollm2.yaml --data "$DATA" \
           --out "$OUT/gpu-smollm2" optim.max_minutes=4 ;;
    3) for together in false true; do
           step "eval-together-$together" 90 $MEMLM eval --model "${ADAPTER:-$(adapter)}" --data "$DATA" \
               --out "$OUT/eval-together-$together" --systems memlm --parts records --limit 10 generation.device=cuda \
               generation.max_batch_size=64 generation.one_forward_per_step=$together
       done
       step eval 180 $(spy eval) $MEMLM eval --model "${ADAPTER:-$(adapter)}" --data "$DATA" --out "$OUT/eval" --systems memlm \
           --parts records,episodes --limit 40 generation.device=cuda generation.max_batch_size=64 ;;
    4) step serve 150 $(spy serve) $MEMLM bench serve --model "${ADAPTER:-$(adapter)}" --clients 1,32 --seconds 20 --engines hf \
           generation.device=cuda generation.max_batch_size=32 ;;
    5) step smollm2-batches 150 $MEMLM bench train --config configs/train/gpu-smollm2.yaml --data "$DATA" \
           --modes padding_free --steps 20 --warmup 3 --batches 16,64,tokens=4096,tokens=8192,tokens=16384 ;;
    6) step sample 200 $MEMLM sample --model "$OUT/gpu-smollm2" --data "$DATA" --out "$OUT/sample" --overwrite \
           prompts.statements=120 prompts.questions=60 generation.device=cuda generation.max_batch_size=64 ;;
    7) step dpo 200 $MEMLM train --config configs/train/dpo-smollm2.yaml --data "$OUT/sample" \
           reference="$OUT/gpu-smollm2" --out "$OUT/dpo" --fresh optim.max_minutes=2 ;;
    8) step grpo 260 $MEMLM train --config configs/train/grpo-smollm2.yaml --data "$DATA" \
           reference="$OUT/gpu-smollm2" --out "$OUT/grpo" --fresh optim.max_minutes=3 grpo.rollout_batch_size=16 ;;
    9) step soak 560 taskset -c 0-11 $MEMLM bench soak --minutes 8 --client-cpus 12-15 --out "$OUT/soak.json" ;;
    10) step locomo-data 120 $MEMLM generate --config conversations --out "$OUT/conversations-data" --overwrite \
            seed=0 conversations.more_facts=0.5
        step locomo-train 360 $MEMLM train --config configs/train/gpu-smollm2-conversations.yaml \
            --data "$OUT/conversations-data" --out "$OUT/gpu-conversations" --fresh optim.max_minutes=5
        step locomo-eval 300 $MEMLM eval --model "$OUT/gpu-conversations" --parts locomo --systems memlm,zero_shot \
            --out "$OUT/locomo" generation.engine=hf generation.max_batch_size=64 locomo.answer_tokens=16 \
            locomo.reader=model "locomo.structures=[full_context,chunks,triples]" ;;
    *) echo "unknown step $s" >&2 ;;
    esac
done
