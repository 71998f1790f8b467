"""The memory page on a large namespace: time to first paint, to the first page of facts and to a
search result, measured in headless Chromium (Debian's `chromium`, driven by Playwright).

    python3 scripts/bench_ui.py                      # 100,000 facts, 5 repeats of each figure
    python3 scripts/bench_ui.py --facts 10000 --repeats 3 --db /tmp/ui-bench.sqlite

It fills an SQLite memory with `--facts` current facts of one namespace (distinct people, a few
thousand organisations, the shipped relations, written over the past year, then 1% of the
employers updated, so as-of views have history), serves it as `memlm ui` does (no model) on
127.0.0.1, signs in, and prints one JSON line: medians in milliseconds, measured in the page
(navigation timing and the page's own performance marks: `memlm:facts-shown` when a page of facts
is in the table, `memlm:search` from submitting a search to its results in the table).

    first_paint_ms         reload (signed in) -> the browser's first contentful paint
    facts_shown_ms         reload -> the newest 50 facts and the count in the table
    search_exact_ms        a subject search that matches exactly
    fuzzy_ready_ms         sign-in -> the namespace's fuzzy indexes built (the page asks for them as it
                           opens: POST /v1/memory/index; `memlm:fuzzy-ready`), while the table is used
    search_fuzzy_first_ms  the first search with a typo, once the page has been open that long
    search_fuzzy_ms        later searches with a typo
    relation_filter_ms     choosing a relation -> its first page and count
    as_of_ms               choosing a date -> the first page valid then and its count
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from memory_runtime.memory.store import TripletStore  # noqa: E402
from memory_runtime.serving.app import create_app  # noqa: E402
from memory_runtime.serving.launch import background_server  # noqa: E402
from memory_runtime.serving.serve_config import ServeConfig  # noqa: E402

NAMESPACE, KEY = "bench", "bench-key-0001"
RELATIONS = ["employed by", "manager of", "investor in", "founder of", "customer of", "member of", "board member of"]
YEAR = 365 * 86400


def people_and_organisations(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """`n` distinct person names and a few thousand organisation names (Faker, seeded)."""
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    firsts = sorted({fake.first_name() for _ in range(4000)})
    lasts = sorted({fake.last_name() for _ in range(4000)})
    if len(firsts) * len(lasts) < n:
        raise ValueError(f"only {len(firsts) * len(lasts)} distinct names for {n} facts")
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < n:
        names.add(f"{rng.choice(firsts)} {rng.choice(lasts)}")
    organisations = sorted({fake.company() for _ in range(5000)})
    return sorted(names), organisations


def fill(store: TripletStore, n: int) -> list[str]:
    """Write `n` current facts (one per person) over the past year, then update 1% of the employers."""
    people, organisations = people_and_organisations(n)
    rng = random.Random(1)
    rng.shuffle(people)
    now, batch = time.time(), 1000
    for start in range(0, n, batch):
        chunk = people[start : start + batch]
        facts = [(p, RELATIONS[(start + i) % len(RELATIONS)], rng.choice(organisations)) for i, p in enumerate(chunk)]
        store.write_many(facts, namespace=NAMESPACE, at=now - YEAR + YEAR * start / n)
    employed = [p for i, p in enumerate(people) if RELATIONS[i % len(RELATIONS)] == "employed by"]
    updates = [(p, "employed by", rng.choice(organisations)) for p in employed[: n // 100]]
    store.write_many(updates, namespace=NAMESPACE, at=now - 3600)
    return people


def typo(name: str, rng: random.Random) -> str:
    """One letter of the name changed (not the first)."""
    i = rng.randrange(1, len(name))
    while name[i] == " ":
        i = rng.randrange(1, len(name))
    return name[:i] + ("a" if name[i] != "a" else "e") + name[i + 1 :]


def wait_until(page, condition: str, timeout: float = 300.0) -> None:
    """Poll a JavaScript condition (page.wait_for_function evaluates a string, which the page's CSP
    forbids; page.evaluate is not subject to it). The figures come from the page's own marks, so
    polling adds nothing to them."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(condition):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{condition} still false after {timeout} s")
        time.sleep(0.005)


def measure(url: str, people: list[str], repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    rng = random.Random(2)
    marks = "performance.getEntriesByName('memlm:facts-shown')"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        page.goto(f"{url}/ui")
        page.fill("#key", KEY)
        page.evaluate("performance.mark('bench:sign-in')")
        page.click("#sign-in-form button")
        wait_until(page, f"{marks}.length > 0")
        wait_until(page, "performance.getEntriesByName('memlm:fuzzy-ready').length > 0")
        fuzzy_ready = page.evaluate(
            "performance.getEntriesByName('memlm:fuzzy-ready')[0].startTime"
            " - performance.getEntriesByName('bench:sign-in')[0].startTime"
        )

        first_paint, facts_shown = [], []
        for _ in range(repeats):
            page.reload()
            wait_until(page, f"{marks}.length > 0")
            paint = page.evaluate(
                "performance.getEntriesByType('paint').filter(e => e.name === 'first-contentful-paint')"
                ".map(e => e.startTime)"
            )
            first_paint.append(paint[0])
            facts_shown.append(page.evaluate(f"{marks}[0].startTime"))

        def search(subject: str) -> float:
            done = page.evaluate("performance.getEntriesByName('memlm:search').length")
            page.fill("#q-subject", subject)
            page.click("#search-form button[type=submit]")
            wait_until(page, f"performance.getEntriesByName('memlm:search').length > {done}")
            return page.evaluate("performance.getEntriesByName('memlm:search').at(-1).duration")

        exact = [search(p) for p in rng.sample(people, repeats)]
        fuzzy_first = search(typo(rng.choice(people), rng))
        fuzzy = [search(typo(p, rng)) for p in rng.sample(people, repeats)]
        done = page.evaluate(f"{marks}.length")
        page.click("#search-clear")
        wait_until(page, f"{marks}.length > {done}")

        def listing(selector: str, value: str) -> float:
            done = page.evaluate(f"{marks}.length")
            page.evaluate("performance.mark('bench:start')")
            page.fill(selector, value)
            page.dispatch_event(selector, "change")
            wait_until(page, f"{marks}.length > {done}")
            start = "performance.getEntriesByName('bench:start').at(-1).startTime"
            return page.evaluate(f"{marks}.at(-1).startTime - {start}")

        relation = [listing("#filter-relation", RELATIONS[i % len(RELATIONS)]) for i in range(repeats)]
        page.fill("#filter-relation", "")
        six_months_ago = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - YEAR / 2))
        as_of = [listing("#as-of", six_months_ago) for _ in range(repeats)]
        shown = page.locator("#page-info").inner_text()
        browser.close()

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    return {
        "first_paint_ms": median(first_paint),
        "facts_shown_ms": median(facts_shown),
        "search_exact_ms": median(exact),
        "fuzzy_ready_ms": round(fuzzy_ready, 1),
        "search_fuzzy_first_ms": round(fuzzy_first, 1),
        "search_fuzzy_ms": median(fuzzy),
        "relation_filter_ms": median(relation),
        "as_of_ms": median(as_of),
        "as_of_page": shown,
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="current facts in the namespace")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per figure (medians are printed)")
    parser.add_argument("--db", type=Path, help="the memory file (kept; reused when it holds the facts already)")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        sys.exit("bench_ui.py: no chromium on PATH (apt-get install chromium; scripts/install.sh --tests does)")
    db = args.db or Path(tempfile.mkdtemp(prefix="memlm-ui-bench-")) / "memory.sqlite"
    config = ServeConfig(api_keys={KEY: NAMESPACE}, api_keys_env=None)
    with TripletStore(db) as store:
        started = time.perf_counter()
        if store.count(NAMESPACE) != args.facts:
            if store.count(NAMESPACE, current=False):
                sys.exit(f"bench_ui.py: {db} holds another bench memory: remove it or pass another --db")
            people = fill(store, args.facts)
        else:
            people = sorted({f.subject for f in store.iter_facts(NAMESPACE)})
        filled = time.perf_counter() - started
        with background_server(create_app(config, store, None, model_name="none")) as url:
            figures = measure(url, people, args.repeats)
        figures.update(
            facts=store.count(NAMESPACE),
            versions=store.count(NAMESPACE, current=False),
            fill_seconds=round(filled, 1),
            repeats=args.repeats,
            cpu=cpu_model(),
            cores=os.cpu_count(),
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
