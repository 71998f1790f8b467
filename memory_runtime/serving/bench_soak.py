"""`memlm bench soak`: the server under a long mixed load, checked for errors, lost writes, slow minutes
and memory growth.

The real app (create_app) runs under uvicorn in a process of its own, over an SQLite file or a
PostgreSQL URL, with `namespaces` API keys (an api_keys_file), one namespace each, and a model: the
scripted stand-in by default (memory_runtime.generation.scripted_model, which writes and reads the
memory as a trained model does), or a real one (`generation`, opened as `memlm serve` opens it).

This process drives it with `clients` concurrent clients (asyncio + httpx), each acting in namespaces
drawn at random (a few requests in one, then another), each request of a kind drawn by `mix`: chat
turns (POST /v1/chat/completions, half of them streamed: statements the model writes, questions it
reads), memory reads (GET /v1/memory/search, some with a typo: fuzzy), writes (POST /v1/memory/facts),
page listings (GET /v1/memory/facts?limit=50), exports (GET /v1/memory/export, which must hold every
write of that namespace acknowledged before it began) and imports (POST /v1/memory/import of a small
file; one in 20 a file with a bad fact, which must be refused with 400: errors provoked on purpose).
Once, at `bulk_at` seconds, a `bulk_facts`-fact import into a namespace of its own runs beside them.

Every write the server acknowledged (a chat turn's stored write, a written fact, an imported file) is
recorded and, once the server has stopped, looked for in the memory: it must be current or in history.
Errors are every other non-2xx and every connection error. At the end the memory is checked
(TripletStore.broken_links() and history_problems(): both empty). Latencies are what the client sees,
queueing included, summarised per kind for each `interval` seconds (by when a request finished); the
server process's RSS is sampled every `rss_every` seconds, and with it the machine's CPU times: the share
stolen by the hypervisor says whether a slow minute was the server's or a shared host's. The report (one
dict, see `report`) is written to `out` every interval, so a long run that is interrupted keeps what it
measured.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.scripted_model import SENTENCES
from memory_runtime.memory.config import MemoryConfig
from memory_runtime.memory.databases import is_postgres
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.models.hardware import cpu_info

KINDS = ("chat", "read", "write", "list", "export", "import")
DEFAULT_MIX = {"chat": 25, "read": 30, "write": 15, "list": 15, "export": 8, "import": 7}
# what the soak is held to: 0 errors, 0 lost writes, p99 of a read and of a listing in every interval
# (the bulk import's included), RSS growth after the first rss_baseline seconds
TARGETS = {"errors": 0, "lost_writes": 0, "read_p99_ms": 50.0, "list_p99_ms": 200.0, "rss_growth_pct": 10.0}
BULK_NAMESPACE = "soak-bulk"
PROVOKED_SHARE = 0.05  # of imports: a file with an empty subject, which must get 400

_FIRST = (
    "Dorothea Tia Cyrus Marta Ivo Aiko Bram Celia Dario Elin Farid Greta Hugo Ines Jonas Kira Lars Mina Nils Oona "
    "Pavel Quinn Rosa Sven Tomas Ulla Vera Wim Xenia Yusuf"
).split()
_LAST = (
    "Altemus Batres Alfred Quinlan Renner Sato Okafor Lindqvist Moreau Novak Petrov Rossi Schmidt Tanaka Varga "
    "Weber Young Zhang Berg Costa Dahl Engel Fischer Garcia Hansen Ito Jensen Kowalski Laine Meyer"
).split()
_ORGS = (
    "Pfizer BMW Siemens Nestle Airbus Lufthansa Bosch Philips Novartis Ericsson Nokia Roche Danone Heineken Volvo "
    "Unilever Bayer Carlsberg Lego Spotify Zalando Adidas Puma Henkel Merck Sanofi Renault Fiat Skoda Maersk"
).split()
PEOPLE_PER_NAMESPACE = 40


@dataclass
class SoakSettings:
    """How long, how many, what mix: `memlm bench soak`'s options."""

    seconds: float = 1800.0
    clients: int = 64
    namespaces: int = 1000
    think_ms: float = 1000.0  # a client's mean pause between its requests (exponential; 0: none)
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    bulk_facts: int = 60_000  # 0: no bulk import
    bulk_at: float | None = None  # seconds into the run (None: min(120, a third of the run))
    interval: float = 60.0  # the time series' step; --out is rewritten at each
    rss_every: float = 5.0
    rss_baseline: float = 300.0  # growth is measured from here (from half the run when it is shorter)
    small_import_facts: int = 10
    max_tokens: int = 64
    request_timeout: float = 60.0
    seed: int = 0
    client_cpus: list[int] | None = None  # the clients' process on these CPUs (the server keeps the rest)

    def bulk_start(self) -> float | None:
        if self.bulk_facts <= 0:
            return None
        at = min(120.0, self.seconds / 3) if self.bulk_at is None else self.bulk_at
        return at if at < self.seconds else None


def parse_cpus(text: str) -> list[int]:
    """`12-15` or `0,2,4-5` -> those CPU numbers, each one this process may run on; ValueError otherwise."""
    cpus: set[int] = set()
    try:
        for item in filter(None, (p.strip() for p in text.split(","))):
            first, _, last = item.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise ValueError(f"--client-cpus {text!r}: give CPU numbers and ranges, e.g. 12-15 or 0,2,4-5") from None
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed or cpus == allowed:
        raise ValueError(
            f"--client-cpus {text!r}: give some of the CPUs this process may use ({_ranges(allowed)}), not all of them"
        )
    return sorted(cpus)


def _save_report(report: dict[str, Any], out: Path | None) -> None:
    """`out` replaced by the report whole (written beside it first): an interrupted run leaves a full file."""
    if out is not None:
        partial = out.with_name(out.name + ".part")
        partial.write_text(json.dumps(report, indent=1))
        partial.replace(out)


@contextmanager
def _cpus_apart(client_cpus: list[int] | None, server_pid: int, context: dict[str, Any]) -> Iterator[None]:
    """The clients (this process) on `client_cpus`, the server on the other CPUs it may use, while the
    clients run; this process's CPUs as they were afterwards. Recorded in `context["cpus"]`."""
    if not client_cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    server_cpus = sorted(os.sched_getaffinity(server_pid) - set(client_cpus))
    os.sched_setaffinity(server_pid, server_cpus)
    os.sched_setaffinity(0, client_cpus)
    context["cpus"] = {"clients": client_cpus, "server": server_cpus}
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _ranges(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def parse_mix(text: str) -> dict[str, float]:
    """`chat=25,read=30,...` -> weights; kinds not named get 0. ValueError saying what is wrong."""
    mix = dict.fromkeys(KINDS, 0.0)
    for item in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, weight = item.partition("=")
        kind = kind.strip()
        if not sep or kind not in KINDS:
            raise ValueError(f"--mix: {item!r} is not KIND=WEIGHT with KIND one of {', '.join(KINDS)}")
        try:
            mix[kind] = float(weight)
        except ValueError:
            raise ValueError(f"--mix: the weight of {kind} is {weight.strip()!r}, not a number") from None
        if not (math.isfinite(mix[kind]) and mix[kind] >= 0):
            raise ValueError(f"--mix: the weight of {kind} must be a number >= 0, got {weight.strip()}")
    if not any(mix.values()):
        raise ValueError("--mix: at least one kind needs a weight above 0")
    return mix


# --------------------------------------------------------------------------- the server, in its own process


def serve_main() -> None:
    """The server process: `python -c "...serve_main()" SPEC.json` (what run_soak starts)."""

    from memory_runtime.generation.scripted_model import ScriptedMemoryModel
    from memory_runtime.serving.app import create_app
    from memory_runtime.serving.config import Limits, ServeConfig
    from memory_runtime.serving.launch import run_server, serve

    spec = json.loads(Path(sys.argv[1]).read_text())
    config = ServeConfig(
        api_keys_env=None,
        api_keys_file=Path(spec["keys_file"]),
        limits=Limits(max_queue=spec["max_queue"]),
        generation=Generation.model_validate(spec["generation"]),
    )
    if spec["scripted"]:
        with TripletStore(spec["db"], config.generation.memory()) as store:
            app = create_app(config, store, ScriptedMemoryModel, model_name="scripted")
            run_server(app, "127.0.0.1", spec["port"], "warning")
    else:
        serve(spec["db"], config, port=spec["port"], log_level="warning")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(spec: dict[str, Any], folder: Path, wait_s: float) -> tuple[subprocess.Popen, str, Path]:
    """The server process over `spec`, once it answers /health: (process, base URL, its log file)."""
    spec_file, log_file = folder / "server.json", folder / "server.log"
    spec_file.write_text(json.dumps(spec))
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    code = "from memory_runtime.serving.bench_soak import serve_main; serve_main()"
    with log_file.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-c", code, str(spec_file)], stdout=log, stderr=log, env=env)
    url = f"http://127.0.0.1:{spec['port']}"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}) before it answered: {_tail(log_file)}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url, log_file
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    _stop(process)
    raise RuntimeError(f"the server did not answer /health within {wait_s:.0f} s: {_tail(log_file)}")


def _stop(process: subprocess.Popen, grace: float = 60.0) -> int:
    """SIGTERM (uvicorn's graceful shutdown), then SIGKILL after `grace` seconds; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    return process.returncode


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _machine() -> dict[str, Any]:
    info = cpu_info()
    return {"cpu_model": info.model, "cores": info.cores}


def _rss_mb(pid: int) -> float | None:
    """The server's resident memory: its process's and its children's (a large import runs in one)."""
    try:
        process = psutil.Process(pid)
        total = process.memory_info().rss
        children = process.children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        try:
            total += child.memory_info().rss
        except psutil.Error:  # ended meanwhile
            pass
    return round(total / 2**20, 1)


# --------------------------------------------------------------------------- what the clients say


def person(namespace: int, k: int) -> str:
    """The k-th person of a namespace's small world (PEOPLE_PER_NAMESPACE of them)."""
    return f"{_FIRST[(k + namespace) % len(_FIRST)]} {_LAST[(k * 7 + namespace // len(_FIRST)) % len(_LAST)]}"


def _typo(name: str, rng: random.Random) -> str:
    """Two neighbouring letters of the name swapped: the search must match it fuzzily."""
    i = rng.randrange(1, len(name) - 2)
    return name[:i] + name[i + 1] + name[i] + name[i + 2 :] if name[i] != " " and name[i + 1] != " " else name


def _fact(namespace: int, rng: random.Random) -> dict[str, str]:
    sentence = rng.choice(SENTENCES)
    who = person(namespace, rng.randrange(PEOPLE_PER_NAMESPACE))
    return {"subject": who, "relation": sentence.relation, "object": rng.choice(_ORGS)}


def bulk_facts(n: int) -> list[dict[str, str]]:
    """The bulk import's `n` facts, each of a different person (a list of {subject, relation, object})."""
    return [
        {
            "subject": f"{_FIRST[i % len(_FIRST)]} {_LAST[(i // len(_FIRST)) % len(_LAST)]} {i // 900 + 1}",
            "relation": SENTENCES[i % len(SENTENCES)].relation,
            "object": _ORGS[(i * 7) % len(_ORGS)],
        }
        for i in range(n)
    ]


# --------------------------------------------------------------------------- measuring


@dataclass
class _Series:
    """One interval's latencies per kind (seconds), filled as requests finish."""

    latencies: dict[str, array] = field(default_factory=lambda: {k: array("d") for k in KINDS})
    summary: dict[str, Any] | None = None  # once the interval is over: its figures, and latencies dropped


class Recorder:
    """Everything the clients measure and acknowledge, summarised in `report`."""

    def __init__(self, settings: SoakSettings, memory: MemoryConfig) -> None:
        self.settings = settings
        self.start = time.monotonic()
        self.intervals: list[_Series] = []
        self.all: dict[str, array] = {k: array("d") for k in KINDS}
        self.slots = max(1, math.ceil(settings.seconds / settings.interval))  # requests finishing late: the last
        self.bulk_window: tuple[float, float | None] | None = None  # when the bulk import ran (end None: running)
        self.during: dict[str, array] = {k: array("d") for k in ("read", "list")}  # latencies overlapping it
        self.errors = 0
        self.first_errors: list[dict[str, Any]] = []
        self.provoked = {"sent": 0, "refused_as_expected": 0}
        self.export_checks = {"exports": 0, "writes_looked_for": 0}
        self.acknowledged: dict[str, set[tuple[str, str, str]]] = {}
        self.acked_at: dict[str, list[tuple[float, tuple[str, str, str]]]] = {}  # for the exports' check
        self.n_acknowledged = 0
        self.rss: list[tuple[float, float]] = []
        self.cpu: list[tuple[float, Any]] = []  # (seconds, psutil.cpu_times()) with each RSS sample
        self.bulk: dict[str, Any] | None = None
        self._canonical = TripletStore(":memory:", memory)  # relation names as the server's store keeps them

    def now(self) -> float:
        return time.monotonic() - self.start

    def key(self, subject: str, relation: str, object_: str) -> tuple[str, str, str]:
        """A fact as the store matches it (a model may write an alias of the relation, another case)."""
        relation = self._canonical.canonical_relation(relation)
        return normalize_term(subject), normalize_term(relation), normalize_term(object_)

    def done(self, kind: str, started: float, latency: float) -> None:
        end = started + latency
        slot = min(int(end // self.settings.interval), self.slots - 1)
        while len(self.intervals) <= slot:
            self.intervals.append(_Series())
        self.intervals[slot].latencies[kind].append(latency)
        self.all[kind].append(latency)
        window = self.bulk_window
        if (
            kind in self.during
            and window is not None
            and end > window[0]
            and (window[1] is None or started < window[1])
        ):
            self.during[kind].append(latency)

    def error(self, kind: str, started: float, what: str) -> None:
        self.errors += 1
        if len(self.first_errors) < 10:
            self.first_errors.append({"at_s": round(started, 2), "kind": kind, "error": what[:300]})

    def acknowledge(self, namespace: str, triplets: list, *, at: float | None) -> None:
        """Writes the server acknowledged in `namespace` (`at`: when, for the exports' check)."""
        keys = self.acknowledged.setdefault(namespace, set())
        for s, r, o in triplets:
            key = self.key(s, r, o)
            keys.add(key)
            self.n_acknowledged += 1
            if at is not None:
                self.acked_at.setdefault(namespace, []).append((at, key))

    def close(self) -> None:
        self._canonical.close()

    # ------------------------------------------------------------------ figures

    def _summary(self, slot: int, final: bool) -> dict[str, Any]:
        series = self.intervals[slot]
        if series.summary is not None:
            return series.summary
        step = self.settings.interval
        span = min(step, max(self.now() - slot * step, 1e-9))
        kinds = {}
        for kind, values in series.latencies.items():
            if values:
                ordered = sorted(values)
                kinds[kind] = {
                    "requests": len(ordered),
                    "requests_per_s": round(len(ordered) / span, 2),
                    "p50_ms": _ms(_rank(ordered, 50)),
                    "p99_ms": _ms(_rank(ordered, 99)),
                }
        summary = {
            "interval": slot + 1,
            "from_s": round(slot * step, 1),
            "seconds": round(span, 1),
            "kinds": kinds,
            "cpu": self._cpu_shares(slot * step, (slot + 1) * step),
        }
        if final or (slot < self.slots - 1 and self.now() > (slot + 1) * step):  # over: nothing more finishes in it
            series.summary, series.latencies = summary, {}
        return summary

    def report(self, *, final: bool, checks: dict[str, Any] | None = None, context: dict[str, Any]) -> dict[str, Any]:
        """The soak's figures so far (final: the run is over; `checks`: the lost writes and the memory check)."""
        elapsed = self.now()
        requests = sum(len(v) for v in self.all.values())
        kinds = {}
        for kind, values in self.all.items():
            if values:
                ordered = sorted(values) if final else None
                kinds[kind] = {
                    "requests": len(values),
                    "requests_per_s": round(len(values) / elapsed, 2),
                    **({"p50_ms": _ms(_rank(ordered, 50)), "p99_ms": _ms(_rank(ordered, 99))} if ordered else {}),
                }
        series = [self._summary(slot, final) for slot in range(len(self.intervals))]
        out: dict[str, Any] = {
            **context,
            "complete": final,
            "elapsed_s": round(elapsed, 1),
            "requests": requests,
            "requests_per_s": round(requests / elapsed, 2) if elapsed else None,
            "kinds": kinds,
            "intervals": series,
            "errors": {"count": self.errors, "first": self.first_errors, "provoked": self.provoked},
            "exports_checked": self.export_checks,
            "rss": self._rss_figures(),
            "machine": {**_machine(), "cpu": self._cpu_shares(0.0, math.inf)},
            "bulk_import": self._bulk_figures(),
            "acknowledged_writes": {"acknowledged": self.n_acknowledged, "checked": None, "lost": None},
            "memory_check": None,
        }
        if checks is not None:
            out.update(checks)
        out["targets"] = self._targets(out)
        out["pass"] = all(t["pass"] is not False for t in out["targets"].values()) if final else None
        return out

    def _bulk_figures(self) -> dict[str, Any] | None:
        if self.bulk is None:
            return None
        out = dict(self.bulk)
        for kind, values in self.during.items():  # the requests that overlapped the import
            ordered = sorted(values)
            out[f"{kind}s_during"] = len(ordered)
            out[f"{kind}_p99_ms"] = _ms(_rank(ordered, 99)) if ordered else None
            out[f"{kind}_max_ms"] = _ms(ordered[-1]) if ordered else None
        return out

    def _rss_figures(self) -> dict[str, Any]:
        samples = self.rss
        out: dict[str, Any] = {
            "every_s": self.settings.rss_every,
            "samples": [[round(t, 1), mb] for t, mb in samples],
            "first_mb": samples[0][1] if samples else None,
            "peak_mb": max(mb for _, mb in samples) if samples else None,
            "last_mb": samples[-1][1] if samples else None,
        }
        if len(samples) >= 2:
            last_t = samples[-1][0]
            at = self.settings.rss_baseline if last_t >= 2 * self.settings.rss_baseline else last_t / 2
            base_t, base = min(samples, key=lambda s: abs(s[0] - at))
            out.update(
                baseline_at_s=round(base_t, 1),
                baseline_mb=base,
                growth_pct=round(100 * (samples[-1][1] - base) / base, 2),
            )
        return out

    def _cpu_shares(self, start: float, end: float) -> dict[str, float] | None:
        """The machine's CPU time between two moments of the run, in % of all its cores' time: busy
        (user, system and the rest) and stolen (taken by the hypervisor for other guests: not the server's)."""
        inside = [times for t, times in self.cpu if start - self.settings.rss_every / 2 <= t <= end]
        if len(inside) < 2:
            return None
        first, last = inside[0], inside[-1]
        spent = {name: getattr(last, name) - getattr(first, name) for name in first._fields}
        total = sum(spent.values())
        if total <= 0:
            return None
        idle = spent.get("idle", 0.0) + spent.get("iowait", 0.0)
        steal = spent.get("steal", 0.0)
        return {"busy_pct": round(100 * (total - idle - steal) / total, 1), "steal_pct": round(100 * steal / total, 1)}

    def _targets(self, out: dict[str, Any]) -> dict[str, dict[str, Any]]:
        def worst(kind: str) -> float | None:
            p99s = [s["kinds"][kind]["p99_ms"] for s in out["intervals"] if kind in s["kinds"]]
            bulk = (out["bulk_import"] or {}).get(f"{kind}_p99_ms")
            return max([*p99s, *([bulk] if bulk is not None else [])], default=None)

        lost = out["acknowledged_writes"]["lost"]
        figures = {
            "errors": (out["errors"]["count"], TARGETS["errors"]),
            "lost_writes": (lost, TARGETS["lost_writes"]),
            "read_p99_ms": (worst("read"), TARGETS["read_p99_ms"]),
            "list_p99_ms": (worst("list"), TARGETS["list_p99_ms"]),
            "rss_growth_pct": (out["rss"].get("growth_pct"), TARGETS["rss_growth_pct"]),
        }
        return {
            name: {"value": value, "at_most": limit, "pass": None if value is None else value <= limit}
            for name, (value, limit) in figures.items()
        }


def _rank(ordered: Any, q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


# --------------------------------------------------------------------------- the clients


class _Clients:
    def __init__(
        self,
        url: str,
        keys: list[str],
        bulk_key: str,
        settings: SoakSettings,
        recorder: Recorder,
        server_alive: Callable[[], bool],
    ) -> None:
        self.url, self.keys, self.bulk_key = url, keys, bulk_key
        self.settings, self.rec, self.server_alive = settings, recorder, server_alive
        self.kinds = [k for k in KINDS if settings.mix.get(k, 0) > 0]
        self.weights = [settings.mix[k] for k in self.kinds]
        self.deadline = 0.0

    async def run(self, server_pid: int, on_interval: Callable[[], None]) -> None:
        s = self.settings
        bulk = bulk_facts(s.bulk_facts) if s.bulk_start() is not None else []
        body = json.dumps(bulk).encode()
        self.rec.start = time.monotonic()  # the run's clock starts now
        self.deadline = s.seconds
        background = [
            asyncio.create_task(self._sample_rss(server_pid)),
            asyncio.create_task(self._every_interval(on_interval)),
        ]
        work = [self._client(i) for i in range(s.clients)]
        if s.bulk_start() is not None:
            work.append(self._bulk(s.bulk_start(), bulk, body))
        await asyncio.gather(*work)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if (mb := _rss_mb(server_pid)) is not None:
            self.rec.rss.append((self.rec.now(), mb))
        self.rec.cpu.append((self.rec.now(), psutil.cpu_times()))

    def _connection(self) -> httpx.AsyncClient:
        """A client's own connection: one pool of many is slow to share (httpx scans every connection of a
        pool for each request), and it lets an idle connection go before uvicorn's keep-alive of 5 s
        closes it (a request sent as the server closes the connection would fail)."""
        limits = httpx.Limits(max_connections=1, keepalive_expiry=2.0)
        # verify=False: plain HTTP to loopback, and loading the CA bundle cost 62 ms a client, on this
        # process's event loop: 64 clients made every first request of the run wait 4 s
        return httpx.AsyncClient(base_url=self.url, timeout=self.settings.request_timeout, limits=limits, verify=False)

    async def _sample_rss(self, pid: int) -> None:
        while True:
            mb = _rss_mb(pid)
            if mb is not None:
                self.rec.rss.append((self.rec.now(), mb))
            self.rec.cpu.append((self.rec.now(), psutil.cpu_times()))
            await asyncio.sleep(self.settings.rss_every)

    async def _every_interval(self, on_interval: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(self.settings.interval)
            on_interval()

    async def _client(self, i: int) -> None:
        rng = random.Random(self.settings.seed * 100_003 + i)
        think = self.settings.think_ms / 1000
        async with self._connection() as http:
            if think > 0:  # users arrive over the first think time, not all in one instant
                await asyncio.sleep(rng.random() * think)
            while self.rec.now() < self.deadline:
                namespace = rng.randrange(len(self.keys))
                for _ in range(rng.randint(1, 8)):  # a few requests in one namespace, then another
                    if self.rec.now() >= self.deadline:
                        return
                    kind = rng.choices(self.kinds, self.weights)[0]
                    await getattr(self, f"_{kind}")(http, namespace, rng)
                    if think > 0:
                        await asyncio.sleep(rng.expovariate(1 / think))

    def _unless_gone(self) -> None:
        """After a connection error: a server that has exited ends the run (its memory is still checked)."""
        if not self.server_alive():
            self.deadline = min(self.deadline, self.rec.now())

    def _headers(self, namespace: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[namespace]}"}

    async def _request(
        self, http: httpx.AsyncClient, kind: str, namespace: int, method: str, path: str, **kwargs: Any
    ) -> Any:
        """One request, timed; its response when it was a 2xx (errors recorded, None returned)."""
        started = self.rec.now()
        t0 = time.perf_counter()
        try:
            response = await http.request(method, path, headers=self._headers(namespace), **kwargs)
        except httpx.HTTPError as err:
            self.rec.error(kind, started, f"{method} {path}: {type(err).__name__}: {err}")
            self._unless_gone()
            return None
        latency = time.perf_counter() - t0
        if not response.is_success:
            self.rec.error(kind, started, f"{method} {path}: {response.status_code} {response.text[:200]}")
            return None
        self.rec.done(kind, started, latency)
        return response

    async def _chat(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        fact = _fact(namespace, rng)
        sentence = next(s for s in SENTENCES if s.relation == fact["relation"])
        said = rng.random() < 0.5
        text = (sentence.say if said else sentence.ask)(fact["subject"], fact["object"])
        body = {
            "model": "soak",
            "messages": [{"role": "user", "content": text}],
            "max_tokens": self.settings.max_tokens,
            "memlm": {"trace": True},
        }
        if rng.random() < 0.5:
            trace = await self._streamed(http, namespace, body)
        else:
            response = await self._request(http, "chat", namespace, "POST", "/v1/chat/completions", json=body)
            trace = response.json().get("memlm") if response is not None else None
        if trace:
            writes = [c["fields"] for c in trace["calls"] if c["kind"] == "write" and c["status"] in ACKNOWLEDGING]
            if writes:
                self.rec.acknowledge(f"soak-{namespace:04d}", writes, at=self.rec.now())

    async def _streamed(self, http: httpx.AsyncClient, namespace: int, body: dict[str, Any]) -> dict[str, Any] | None:
        body = {**body, "stream": True}
        started = self.rec.now()
        t0 = time.perf_counter()
        trace = None
        try:
            async with http.stream(
                "POST", "/v1/chat/completions", json=body, headers=self._headers(namespace)
            ) as response:
                if not response.is_success:
                    await response.aread()
                    self.rec.error("chat", started, f"stream: {response.status_code} {response.text[:200]}")
                    return None
                ended = False
                async for line in response.aiter_lines():
                    if line == "data: [DONE]":
                        ended = True
                    elif line.startswith("data: {"):
                        chunk = json.loads(line[len("data: ") :])
                        if "error" in chunk:
                            self.rec.error("chat", started, f"stream: {chunk['error'].get('message')}")
                            return None
                        trace = chunk.get("memlm", trace)
        except (httpx.HTTPError, ValueError) as err:
            self.rec.error("chat", started, f"stream: {type(err).__name__}: {err}")
            self._unless_gone()
            return None
        if not ended:
            self.rec.error("chat", started, "stream: it ended without data: [DONE]")
            return None
        self.rec.done("chat", started, time.perf_counter() - t0)
        return trace

    async def _read(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        fact = _fact(namespace, rng)
        roll = rng.random()
        if roll < 0.7:
            params = {"subject": fact["subject"]}
        elif roll < 0.9:
            params = {"relation": fact["relation"], "object": fact["object"]}
        else:
            params = {"subject": _typo(fact["subject"], rng)}
        response = await self._request(http, "read", namespace, "GET", "/v1/memory/search", params=params)
        if response is not None and not isinstance(response.json().get("data"), list):
            self.rec.error("read", self.rec.now(), f"search answered no list: {response.text[:200]}")

    async def _write(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        response = await self._request(http, "write", namespace, "POST", "/v1/memory/facts", json=_fact(namespace, rng))
        if response is not None:
            self.rec.acknowledge(f"soak-{namespace:04d}", response.json()["written"], at=self.rec.now())

    async def _list(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        params = {"limit": 50, **({"order": "newest"} if rng.random() < 0.3 else {})}
        response = await self._request(http, "list", namespace, "GET", "/v1/memory/facts", params=params)
        if response is not None and len(response.json()["data"]) > 50:
            self.rec.error("list", self.rec.now(), "a page of limit=50 held more than 50 facts")

    async def _export(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        name = f"soak-{namespace:04d}"
        before = self.rec.now()
        response = await self._request(http, "export", namespace, "GET", "/v1/memory/export")
        if response is None:
            return
        try:
            doc = response.json()
            held = {self.rec.key(f["subject"], f["relation"], f["object"]) for f in doc["history"]}
        except (ValueError, KeyError, TypeError) as err:
            self.rec.error("export", before, f"the export is no export: {type(err).__name__}: {err}")
            return
        expected = [key for at, key in self.rec.acked_at.get(name, []) if at < before]
        self.rec.export_checks["exports"] += 1
        self.rec.export_checks["writes_looked_for"] += len(expected)
        missing = [key for key in expected if key not in held]
        if missing:
            self.rec.error(
                "export", before, f"the export of {name} lacks {len(missing)} acknowledged writes: {missing[:3]}"
            )

    async def _import(self, http: httpx.AsyncClient, namespace: int, rng: random.Random) -> None:
        facts = [_fact(namespace, rng) for _ in range(self.settings.small_import_facts)]
        if rng.random() < PROVOKED_SHARE:  # a bad file: 400, nothing stored
            facts[rng.randrange(len(facts))]["subject"] = ""
            self.rec.provoked["sent"] += 1
            started = self.rec.now()
            try:
                response = await http.post("/v1/memory/import", json=facts, headers=self._headers(namespace))
            except httpx.HTTPError as err:
                self.rec.error("import", started, f"bad import: {type(err).__name__}: {err}")
                return
            if response.status_code == 400:
                self.rec.provoked["refused_as_expected"] += 1
            else:
                self.rec.error(
                    "import", started, f"a bad import got {response.status_code}, not 400: {response.text[:200]}"
                )
            return
        response = await self._request(http, "import", namespace, "POST", "/v1/memory/import", json={"facts": facts})
        if response is not None:
            self.rec.acknowledge(
                f"soak-{namespace:04d}", [(f["subject"], f["relation"], f["object"]) for f in facts], at=self.rec.now()
            )

    async def _bulk(self, at: float, facts: list[dict[str, str]], body: bytes) -> None:
        await asyncio.sleep(max(0.0, at - self.rec.now()))
        started = self.rec.now()
        self.rec.bulk = {"facts": self.settings.bulk_facts, "bytes": len(body), "started_at_s": round(started, 1)}
        self.rec.bulk_window = (started, None)
        try:
            async with self._connection() as http:
                response = await http.post(
                    "/v1/memory/import",
                    content=body,
                    headers={"Authorization": f"Bearer {self.bulk_key}", "Content-Type": "application/json"},
                    timeout=max(600.0, self.settings.request_timeout),
                )
        except httpx.HTTPError as err:
            self.rec.bulk_window = (started, self.rec.now())
            self.rec.error("bulk_import", started, f"{type(err).__name__}: {err}")
            self.rec.bulk["status"] = type(err).__name__
            return
        ended = self.rec.now()
        self.rec.bulk_window = (started, ended)
        self.rec.bulk.update(status=response.status_code, seconds=round(ended - started, 2))
        if not response.is_success:
            self.rec.error("bulk_import", started, f"{response.status_code} {response.text[:200]}")
            return
        self.rec.bulk["message"] = response.json().get("message")
        self.rec.acknowledge(BULK_NAMESPACE, [(f["subject"], f["relation"], f["object"]) for f in facts], at=None)


ACKNOWLEDGING = ("stored", "duplicate")  # a write call's statuses that say the fact is in memory


# --------------------------------------------------------------------------- the run


def _checks(db: str, memory: MemoryConfig, recorder: Recorder) -> dict[str, Any]:
    """Every acknowledged write looked for in the memory (current or in history), and the memory check."""
    lost: list[str] = []
    checked = 0
    with TripletStore(db, memory) as store:
        for namespace, keys in recorder.acknowledged.items():
            held = {recorder.key(*f.triplet) for f in store.iter_facts(namespace, current=False)}
            checked += len(keys)
            lost += [f"{namespace}: {' >> '.join(key)}" for key in sorted(keys - held)]
        broken, problems = store.broken_links(), store.history_problems()
    return {
        "acknowledged_writes": {
            "acknowledged": recorder.n_acknowledged,
            "checked": checked,  # distinct facts (a fact written twice is looked for once)
            "lost": len(lost),
            "first_lost": lost[:10],
        },
        "memory_check": {
            "broken_links": len(broken),
            "history_problems": len(problems),
            "first": [str(p) for p in [*broken, *problems][:5]],
            "ok": not broken and not problems,
        },
    }


def _server_latencies(url: str) -> dict[str, Any] | None:
    """The server's own p50/p99 per route (GET /metrics: its last 2,048 requests of each), from when a
    request reached the app until it answered: what the clients' figures add to it is the network,
    uvicorn's parsing and the waits of the clients' own process on this machine."""
    try:
        routes = httpx.get(f"{url}/metrics", timeout=30).json()["requests"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return {
        route: {"p50": figures["p50_ms"], "p99": figures["p99_ms"], "of_last": min(figures["count"], 2048)}
        for route, figures in routes.items()
        if route.startswith("/v1/")
    }


def _write_keys(namespaces: int, path: Path) -> tuple[list[str], str]:
    """An API key per namespace and one for the bulk import's, in an api_keys_file at `path`."""
    keys = [f"soak-key-{i:04d}-{os.urandom(4).hex()}" for i in range(namespaces)]
    bulk_key = f"soak-key-bulk-{os.urandom(4).hex()}"
    access = {key: f"soak-{i:04d}" for i, key in enumerate(keys)} | {bulk_key: BULK_NAMESPACE}
    path.write_text(json.dumps(access))
    return keys, bulk_key


def _describe_db(db: str) -> str:
    if is_postgres(db):
        return "postgresql"
    return f"sqlite ({db})"


def run_soak(
    settings: SoakSettings,
    *,
    db: str | None = None,
    generation: Generation | None = None,
    out: Path | None = None,
    log: Callable[[str], None] | None = None,
    server_wait_s: float | None = None,
) -> dict[str, Any]:
    """Run the soak (see the module) and return its report; `out` is rewritten with it every interval and
    at the end. `db`: an SQLite file or a postgresql:// URL (None: a temporary SQLite file); `generation`:
    the real model to serve (None: the scripted stand-in)."""
    say = log or (lambda _: None)
    scripted = generation is None
    generation = generation or Generation(max_new_tokens=settings.max_tokens)
    memory = generation.memory()
    with tempfile.TemporaryDirectory(prefix="memlm-soak-") as tmp:
        folder = Path(tmp)
        db = db or str(folder / "soak.sqlite")
        keys, bulk_key = _write_keys(settings.namespaces, folder / "keys.json")
        spec = {
            "db": db,
            "port": _free_port(),
            "keys_file": str(folder / "keys.json"),
            "max_queue": max(32, 2 * settings.clients),
            "generation": generation.model_dump(mode="json"),
            "scripted": scripted,
        }
        context = {
            "bench": "soak",
            "db": _describe_db(db),
            "model": "scripted" if scripted else generation.model,
            "settings": {**asdict(settings), "bulk_at": settings.bulk_start()},
        }
        process, url, log_file = _start_server(spec, folder, server_wait_s or (120.0 if scripted else 1800.0))
        say(
            f"soak: server {process.pid} on {url} ({context['db']}, {context['model']} model);"
            f" {settings.clients} clients for {settings.seconds:.0f} s"
        )
        recorder = Recorder(settings, memory)

        def on_interval() -> None:
            report = recorder.report(final=False, context=context)
            _save_report(report, out)
            done = max(0, min(len(report["intervals"]), int(report["elapsed_s"] // settings.interval)) - 1)
            last = report["intervals"][done]  # the interval that just ended
            p99 = {k: v["p99_ms"] for k, v in last["kinds"].items()}
            say(
                f"soak {report['elapsed_s']:.0f} s: {report['requests_per_s']} requests/s, p99 ms of interval"
                f" {last['interval']} {p99}, errors {report['errors']['count']}, RSS {report['rss']['last_mb']} MB,"
                f" CPU stolen {(last['cpu'] or {}).get('steal_pct')} %"
            )

        try:
            clients = _Clients(url, keys, bulk_key, settings, recorder, lambda: process.poll() is None)
            with _cpus_apart(settings.client_cpus, process.pid, context):
                asyncio.run(clients.run(process.pid, on_interval))
            alive = process.poll() is None
            seen_by_server = _server_latencies(url) if alive else None
        finally:
            code = _stop(process)
        context["server"] = {
            "alive_at_end": alive,
            "exit_code": code,
            "log_tail": _tail(log_file, 10) or None,
            "latency_ms": seen_by_server,
        }
        report = recorder.report(final=False, context=context)
        _save_report(report, out)
        say("soak: the clients are done; looking for every acknowledged write and checking the memory")
        checks = _checks(db, memory, recorder)
        recorder.close()
        report = recorder.report(final=True, checks=checks, context=context)
        _save_report(report, out)
    return report
