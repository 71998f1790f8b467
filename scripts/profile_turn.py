"""Where one memory turn's time goes, at batch 1 on this machine: a sampling profile (py-spy) of write
turns and of read-and-answer turns, split into the model's forward, the logits work of constrained
decoding, the call parser and controller, the memory, tokenisation and the rest (Python).

    python3 scripts/profile_turn.py --model runs/cpu-smollm2 --data runs/data --turns 20

It takes the first `--turns` write records (a statement: the model writes) and read records (a
question: the model reads, the memory answers, the model answers) of the data's test split, runs each
alone through the engine a user gets (`generation` as configured, batch 1) against a memory holding
the record's facts, under `py-spy record` (100 samples a second, native frames off), and prints one
JSON line per kind: turns, wall seconds per turn (p50, p95), generated tokens per turn, and each
part's share of the samples taken inside the turns (model loading and set-up are not counted).
py-spy comes with the dev extra (scripts/install.sh --tests). `--inside` is the child py-spy runs;
`--folded FILE` re-reads a profile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

TURN_FRAME = "run_turns"  # the function whose samples are counted (below); set-up happens outside it

# (part, does a frame "function (file:line)" belong to it): a sample goes to the first part, leaf
# first, that one of its frames matches, so tokenisation inside the copy rule counts as tokenisation
PARTS = [
    ("memory (store, SQL, fuzzy)", ("memory_runtime/memory/", "sqlite3", "datasketch")),
    ("tokenisation", ("tokenizers", "tokenization_utils", "_decode (", "text_of (", "encode (", "apply_chat_template")),
    (
        "model forward",
        ("torch/nn/", "transformers/models/", "transformers/integrations/", "batch_cache.py", "onnx_backend.py"),
    ),
    (
        "constrained decoding (logits work)",
        ("field_copy.py", "_copied_fields_only", "_name_heads_restored", "_copies (", "_choose (", "_backtrack ("),
    ),
    ("call parser and controller", ("protocol.py", "controller.py", "injection.py")),
]
OTHER = "the rest (Python: the engine's loop, sampling, stats)"


def part_of(stack: list[str]) -> str:
    for frame in reversed(stack):  # leaf first
        for part, marks in PARTS:
            if any(mark in frame for mark in marks):
                return part
    return OTHER


def shares(folded: Path) -> dict[str, dict[str, float]]:
    """Per kind (the frame `run_turns_<kind>`), each part's share of the samples inside the turns."""
    counts: dict[str, Counter] = {}
    for line in folded.read_text().splitlines():
        stack_text, _, n = line.rpartition(" ")
        stack = stack_text.split(";")
        names = (f.split(" ")[0].rpartition(".")[2] for f in stack)  # "inside.<locals>.run_turns_write (...)"
        kind = next((name[len(TURN_FRAME) + 1 :] for name in names if name.startswith(TURN_FRAME + "_")), None)
        if kind:
            counts.setdefault(kind, Counter())[part_of(stack)] += int(n)
    return {
        kind: {part: round(n / sum(c.values()), 3) for part, n in c.most_common()} | {"samples": sum(c.values())}
        for kind, c in counts.items()
    }


def records(data: Path, kind: str, n: int) -> list[dict]:
    out = []
    with open(data / "jsonl" / "test.jsonl") as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == kind:
                out.append(record)
                if len(out) == n:
                    break
    return out


def inside(args: argparse.Namespace) -> None:
    """The child under py-spy: open the model, run the turns kind by kind, print their timings."""
    from memory_runtime.generation.runtime import Generation, open_runtime
    from memory_runtime.memory.store import TripletStore

    generation = Generation(model=args.model, max_batch_size=1, **dict(o.split("=", 1) for o in args.overrides))
    runtime = open_runtime(generation)

    def run(kind: str) -> dict:
        turns = []
        for record in records(Path(args.data), kind, args.turns):
            with TripletStore.scratch(runtime.memory, [tuple(t) for t in record.get("memory") or []]) as store:
                user = next(s["text"] for s in record["segments"] if s["role"] == "user")
                request = runtime.request(user, store)
                start = time.perf_counter()
                (result,) = runtime.decoder.run([request])
                turns.append((time.perf_counter() - start, result.generated_tokens))
        walls = sorted(t for t, _ in turns)
        return {
            "kind": kind,
            "turns": len(turns),
            "wall_s_p50": round(statistics.median(walls), 3),
            "wall_s_p95": round(walls[min(len(walls) - 1, int(0.95 * len(walls)))], 3),
            "tokens_per_turn": round(statistics.mean(n for _, n in turns), 1),
            "tokens_per_s": round(sum(n for _, n in turns) / sum(walls), 1),
        }

    # one function per kind, so the profile tells their samples apart (TURN_FRAME + "_" + kind)
    def run_turns_write() -> dict:
        return run("write")

    def run_turns_read() -> dict:
        return run("read")

    for kind in ("write", "read"):  # warm-up, outside the count: the first turns allocate and compile
        args_turns, args.turns = args.turns, 1
        run(kind)
        args.turns = args_turns
    print(json.dumps({"engine": runtime.describe(), **{"write": run_turns_write(), "read": run_turns_read()}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/cpu-smollm2", help="a memlm train run (or any model generation takes)")
    parser.add_argument("--data", default="runs/data", help="a memlm generate directory (its test split)")
    parser.add_argument("--turns", type=int, default=20, help="turns of each kind")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--folded", type=Path, help="print the shares of an existing py-spy raw profile")
    parser.add_argument("overrides", nargs="*", help="generation key=value (e.g. dtype=float32)")
    args = parser.parse_args()
    if args.inside:
        return inside(args)
    if args.folded:
        print(json.dumps(shares(args.folded)))
        return
    folded = Path(tempfile.mkdtemp(prefix="memlm-profile-")) / "turns.folded"
    child = [sys.executable, __file__, "--inside", "--model", args.model, "--data", args.data]
    child += ["--turns", str(args.turns), *args.overrides]
    command = ["py-spy", "record", "-r", str(args.rate), "-f", "raw", "-o", str(folded), "--", *child]
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        sys.exit(f"profile_turn.py: the profiled run failed:\n{out.stderr[-3000:]}")
    timings = json.loads(lines[-1])
    split = shares(folded)
    for kind in ("write", "read"):
        print(json.dumps({"engine": timings["engine"], **timings[kind], "shares": split.get(kind, {})}))
    print(f"profile: {folded}", file=sys.stderr)


if __name__ == "__main__":
    main()
