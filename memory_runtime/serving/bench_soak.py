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
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from memory_runtime.generation.runtime import Generation
from memory_runtime.memory.location import is_postgres
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.soak_clients import BULK_NAMESPACE, Clients
from memory_runtime.serving.soak_recorder import Recorder
from memory_runtime.serving.soak_settings import SoakSettings


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


# --------------------------------------------------------------------------- the server, in its own process


def serve_main() -> None:
    """The server process: `python -c "...serve_main()" SPEC.json` (what run_soak starts)."""

    from memory_runtime.generation.batching import OneAtATime
    from memory_runtime.generation.scripted_model import ScriptedMemoryModel
    from memory_runtime.serving.app import create_app
    from memory_runtime.serving.launch import run_server, serve
    from memory_runtime.serving.serve_config import Limits, ServeConfig

    spec = json.loads(Path(sys.argv[1]).read_text())
    config = ServeConfig(
        api_keys_env=None,
        api_keys_file=Path(spec["keys_file"]),
        limits=Limits(max_queue=spec["max_queue"]),
        generation=Generation.model_validate(spec["generation"]),
    )
    if spec["scripted"]:
        with TripletStore(spec["db"], config.generation.memory()) as store:
            app = create_app(config, store, OneAtATime.over(ScriptedMemoryModel), model_name="scripted")
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
            clients = Clients(url, keys, bulk_key, settings, recorder, lambda: process.poll() is None)
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
