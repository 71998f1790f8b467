"""The model's bare decode step at batch 1, side by side: a DynamicCache, the same with int8 weights
(memory_runtime.models.quantize), a StaticCache, and a StaticCache with the step compiled by torch.compile
(inductor, full graph). What issue 46's fixes would buy before
they are built into the engines: `python3 scripts/bench_forward.py --model runs/cpu-smollm2`."""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import DynamicCache, StaticCache

from memory_runtime.models.loading import load_model
from memory_runtime.models.quantize import quantize_int8


def time_decode(model, step, prompt: torch.Tensor, cache, tokens: int) -> tuple[float, list[int]]:
    """Seconds per token of `tokens` greedy steps after the prompt's prefill, and the tokens."""
    with torch.inference_mode():
        n = prompt.shape[1]
        out = model(input_ids=prompt, past_key_values=cache, use_cache=True, cache_position=torch.arange(n))
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        chosen = []
        start = time.perf_counter()
        for i in range(tokens):
            out = step(input_ids=token, past_key_values=cache, use_cache=True, cache_position=torch.tensor([n + i]))
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            chosen.append(int(token))
        return (time.perf_counter() - start) / tokens, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded:SmolLM2-135M-Instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, tokenizer = load_model(args.model, dtype=args.dtype, merge=True)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Dorothea Altemus works for Pfizer."}],
        add_generation_prompt=True,
        return_dict=True,
    )
    prompt = torch.tensor([list(rendered["input_ids"])])
    compiled = torch.compile(model, dynamic=False, fullgraph=True)
    int8, _ = load_model(args.model, dtype=args.dtype, merge=True)
    quantize_int8(int8)
    cells = {
        "dynamic cache, eager": (model, lambda: DynamicCache()),
        "dynamic cache, int8 weights": (int8, lambda: DynamicCache()),
        "static cache, eager": (model, lambda: StaticCache(config=model.config, max_cache_len=512)),
        "static cache, compiled": (compiled, lambda: StaticCache(config=model.config, max_cache_len=512)),
    }
    start = time.perf_counter()
    time_decode(model, compiled, prompt, cells["static cache, compiled"][1](), 2)  # compiles
    compile_s = time.perf_counter() - start
    rows, chosen = {}, {}
    for _ in range(args.repeats):  # the cells alternate, so a busy moment touches every cell alike
        for name, (step, cache) in cells.items():
            seconds, tokens = time_decode(int8 if step is int8 else model, step, prompt, cache(), args.tokens)
            rows.setdefault(name, []).append(seconds)
            chosen[name] = tokens
    for name, times in rows.items():
        best = min(times)
        same = chosen[name] == chosen["dynamic cache, eager"]  # greedy tokens as the engines' cache gives them
        print(
            json.dumps(
                {
                    "cell": name,
                    "ms_per_token": round(best * 1000, 1),
                    "tokens_per_s": round(1 / best, 1),
                    "same_tokens": same,
                }
            )
        )
    print(json.dumps({"dtype": str(model.dtype), "compile_s": round(compile_s, 1), "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
