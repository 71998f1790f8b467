"""Bulk writes on PostgreSQL with PostgreSQL's default plans and with every statement planned for its
values (plan_cache_mode=force_custom_plan), side by side in one run.

psycopg prepares a statement that runs five times on a connection; PostgreSQL may then plan it once for
any values (a generic plan). Before the store's partial indexes of current facts, that plan read every
version of a subject and `write_many` ran 2-5x slower from its sixth run on; memlm's connections then
forced custom plans. This script writes `--runs` batches of `--facts` facts into one namespace (each batch
superseding the previous employers of half of its subjects) under both settings, each in a database of
its own, run by run in turns, and prints one JSON line: every run's seconds for both, and the ratio of
the medians after the fifth run (memory_runtime/memory/postgres_database.py: CONNECTION_SETTINGS says which won).

    bash scripts/postgres.sh start /tmp/pg     # prints the URL
    python3 scripts/bench_pg_plans.py --url "postgresql://memlm@/postgres?host=/tmp/pg"
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import psycopg

from memory_runtime.memory import postgres_database
from memory_runtime.memory.store import TripletStore


def fresh_database(url: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = url.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def batch(run: int, facts: int) -> list[tuple[str, str, str]]:
    return [
        (f"Person {i:06d}", "employed by", f"Company {run}-{i % 97}")
        for i in range(run * facts // 2, run * facts // 2 + facts)
    ]


def timed_write(store: TripletStore, facts: list[tuple[str, str, str]]) -> float:
    start = time.perf_counter()
    store.write_many(facts, namespace="bench")
    return round(time.perf_counter() - start, 3)


def open_store(url: str, settings: dict) -> TripletStore:
    postgres_database.CONNECTION_SETTINGS = settings  # read when the store opens its pool
    return TripletStore(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL server's URL (scripts/postgres.sh start DIR)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--facts", type=int, default=2000, help="facts a run (half of them new subjects)")
    args = parser.parse_args()
    default = {"autocommit": True}
    custom = {**default, "options": "-c plan_cache_mode=force_custom_plan"}
    out: dict = {"bench": "pg_plans", "runs": args.runs, "facts_per_run": args.facts}
    settings = {"force_custom_plan": custom, "default_plans": default}
    stores = {label: open_store(fresh_database(args.url, f"memlm_plans_{label}"), s) for label, s in settings.items()}
    out.update({label: [] for label in settings})
    labels = list(settings)
    for run in range(args.runs):  # the two side by side, taking turns to go first: the machine's drift hits both
        for label in labels if run % 2 == 0 else labels[::-1]:
            out[label].append(timed_write(stores[label], batch(run, args.facts)))
    for store in stores.values():
        store.close()
    late = slice(5, None)  # from the sixth run: psycopg has prepared the statements by then
    out["median_after_5_s"] = {k: statistics.median(out[k][late]) for k in ("force_custom_plan", "default_plans")}
    out["default_vs_custom_after_5"] = round(
        out["median_after_5_s"]["default_plans"] / out["median_after_5_s"]["force_custom_plan"], 2
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
