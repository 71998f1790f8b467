"""Score the writes of a real-text evaluation again with another verifier, without running the writer again.

`memlm eval --parts real` with `generation.write_gate.score=true` keeps every write the writer proposed
with its scores (cases.jsonl). A second verifier (another training seed, another recipe) judges the same
candidates: this copies the evaluation folder's cases with each write's `verifier` score replaced by the
new verifier's, so scripts/curve.py pools and pairs them as cells (`OUT@verifier:T`):

    python3 scripts/rescore_verifier.py runs/v57/eval-s0 runs/v57/verifier-s1 runs/v57/eval-s0-v1

The passages' text comes from the evaluation's own real-text source (its metrics.json), read again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evaluation", type=Path, help="a `memlm eval` folder with real-text cases, scored")
    parser.add_argument("verifier", type=Path, help="a verifier run (`memlm train` objective verifier)")
    parser.add_argument("out", type=Path, help="the new folder: its cases.jsonl and metrics.json")
    args = parser.parse_args()

    from eval.real_probe import real_sample
    from memory_runtime.generation.verifier import Verifier

    metrics = json.loads((args.evaluation / "metrics.json").read_text())
    source = metrics["sources"]["real"]["path"] if "sources" in metrics else None
    texts = {r.id: r.segments[0].text for r in real_sample(source)}
    verifier = Verifier.load(args.verifier)
    args.out.mkdir(parents=True, exist_ok=True)
    scored = 0
    with (args.evaluation / "cases.jsonl").open() as f, (args.out / "cases.jsonl").open("w") as out:
        for line in f:
            case = json.loads(line)
            writes = case.get("gated_writes") or []
            if case.get("part") == "real" and writes:
                scores = verifier.score(texts[case["id"]], [w["triplet"] for w in writes])
                for w, score in zip(writes, scores):
                    w["scores"]["verifier"] = score
                scored += len(writes)
            out.write(json.dumps(case) + "\n")
    (args.out / "metrics.json").write_text(json.dumps(metrics))
    print(f"{scored} writes scored by {args.verifier} -> {args.out}")


if __name__ == "__main__":
    main()
