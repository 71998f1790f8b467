"""Bulk writes on PostgreSQL with the server's plan setting and without it, side by side in one run.

psycopg prepares a statement that runs five times on a connection; PostgreSQL then plans it once for any
values (a generic plan), which chose badly for the store's lookups by value: `write_many` ran several
times slower from its sixth run on. memlm's connections set plan_cache_mode=force_custom_plan
(memory_runtime/memory/databases.py: CONNECTION_SETTINGS). This script writes `--runs` batches of
`--facts` new facts into one namespace (each batch superseding the previous employers of half of its
subjects), once with the setting and once with PostgreSQL's default (auto), each in a database of its
own, and prints one JSON line: every run's seconds for both, and the ratio of the runs after the fifth.

    bash scripts/postgres.sh start /tmp/pg     # prints the URL
    python3 scripts/bench_pg_plans.py --url "postgresql://memlm@/postgres?host=/tmp/pg"
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import psycopg

from memory_runtime.memory import databases
from memory_runtime.memory.store import TripletStore


def fresh_database(url: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def runs(url: str, settings: dict, n_runs: int, facts: int) -> list[float]:
    databases.CONNECTION_SETTINGS = settings  # read when the store opens its pool
    seconds = []
    with TripletStore(url) as store:
        for run in range(n_runs):
            batch = [
                (f"Person {i:06d}", "employed by", f"Company {run}-{i % 97}")
                for i in range(run * facts // 2, run * facts // 2 + facts)
            ]
            start = time.perf_counter()
            store.write_many(batch, namespace="bench")
            seconds.append(round(time.perf_counter() - start, 3))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL server's URL (scripts/postgres.sh start DIR)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--facts", type=int, default=2000, help="facts a run (half of them new subjects)")
    args = parser.parse_args()
    shipped = dict(databases.CONNECTION_SETTINGS)
    default = {k: v for k, v in shipped.items() if k != "options"}
    out: dict = {"bench": "pg_plans", "runs": args.runs, "facts_per_run": args.facts}
    for label, settings in (("force_custom_plan", shipped), ("default_plans", default)):
        out[label] = runs(fresh_database(args.url, f"memlm_plans_{label}"), settings, args.runs, args.facts)
    late = slice(5, None)  # from the sixth run: psycopg has prepared the statements by then
    out["median_after_5_s"] = {k: statistics.median(out[k][late]) for k in ("force_custom_plan", "default_plans")}
    out["default_vs_custom_after_5"] = round(
        out["median_after_5_s"]["default_plans"] / out["median_after_5_s"]["force_custom_plan"], 2
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
