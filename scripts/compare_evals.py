"""Turn by turn, two `memlm eval` runs of the same cases: the share of turns whose calls, reply and
status are identical, and every turn that differs (e.g. the hf and the vllm engine, greedy).

    python3 scripts/compare_evals.py runs/eval-hf runs/eval-vllm [--show 20]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def turns(run: Path) -> dict[tuple, dict]:
    """Every turn of a run's cases.jsonl, keyed by system, part, case id and turn number."""
    out: dict[tuple, dict] = {}
    for line in (run / "cases.jsonl").read_text().splitlines():
        row = json.loads(line)
        for i, turn in enumerate(row.get("turns") or [row]):
            key = (row["system"], row["part"], row["id"], turn.get("turn", i))
            out[key] = {"user": turn.get("user"), **{k: turn.get(k) for k in ("calls", "reply", "status")}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--show", type=int, default=20, help="differences printed (default 20)")
    args = parser.parse_args()
    a, b = turns(args.a), turns(args.b)
    common = sorted(set(a) & set(b), key=str)
    if not common:
        raise SystemExit("the two runs share no turn: were they run on the same data, seed and limit?")
    fields = ("calls", "reply", "status")
    differ = [k for k in common if [a[k][f] for f in fields] != [b[k][f] for f in fields]]
    calls_differ = [k for k in differ if a[k]["calls"] != b[k]["calls"]]
    by_part: dict[str, list[int]] = {}
    for k in common:
        by_part.setdefault(k[1], [0, 0])[0] += 1
    for k in differ:
        by_part[k[1]][1] += 1
    only = len(a) - len(common), len(b) - len(common)
    print(f"{args.a} vs {args.b}: {len(common)} turns in both ({only[0]} and {only[1]} only in one)")
    same = len(common) - len(differ)
    print(f"identical (calls, reply, status): {same}/{len(common)} = {same / len(common):.1%}")
    print(f"calls differ: {len(calls_differ)}; reply or status only: {len(differ) - len(calls_differ)}")
    for part, (n, d) in sorted(by_part.items()):
        print(f"  {part}: {n - d}/{n} identical")
    for k in differ[: args.show]:
        print(f"\n{k[1]} {k[2]} turn {k[3]}: {a[k]['user']!r}")
        for name, run in ((args.a.name, a), (args.b.name, b)):
            print(f"  {name}: calls={run[k]['calls']} reply={run[k]['reply']!r} status={run[k]['status']}")


if __name__ == "__main__":
    main()
