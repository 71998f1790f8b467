"""Faults and load on loopback, bounded in count and time: a killed server keeps every write it
acknowledged, a flooding key does not starve another, and no input reaches a 500 or another user."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.stats import percentile
from tests.memory_runtime.serving.test_serve import ALICE, BOB, KEYS, MemoryEchoBackend

REPO = Path(__file__).resolve().parents[3]

SERVER = """
import sys, uvicorn
sys.path.insert(0, {repo!r})
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.serving.app import create_app
from memory_runtime.serving.serve_config import Limits, ServeConfig
from memory_runtime.memory.store import TripletStore
from tests.memory_runtime.serving.test_serve import KEYS
from {module} import {backend}
config = ServeConfig(api_keys=KEYS, api_keys_env=None, limits={limits})
app = create_app(config, TripletStore({db!r}), OneAtATime.over({backend}), model_name="test")
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="error")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(
    tmp_path: Path,
    *,
    db: str = ":memory:",
    backend: str = "MemoryEchoBackend",
    module: str = "tests.memory_runtime.serving.test_serve",
    limits: str = "Limits(max_queue=256, max_turns_per_key=64)",
) -> tuple[subprocess.Popen, str]:
    """A server in its own process (clients' threads must not share its interpreter, a test may
    kill it); its base URL once it answers /health."""
    port = _free_port()
    script = tmp_path / f"server-{port}.py"
    script.write_text(SERVER.format(repo=str(REPO), module=module, backend=backend, limits=limits, db=db, port=port))
    server = subprocess.Popen([sys.executable, str(script)], cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, url
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("the server did not start")


def test_kill_9_during_a_write_storm_loses_no_acknowledged_write(tmp_path):
    db = tmp_path / "memory.sqlite"
    server, url = _serve(tmp_path, db=str(db))
    acknowledged: list[tuple[str, str]] = []
    stop = threading.Event()

    def client(k: int, headers: dict, namespace: str) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=10) as c:
            i = 0
            while not stop.is_set():
                person = f"Person {k}-{i}"
                body = {
                    "messages": [{"role": "user", "content": f"remember {person} / employed by / Org {k}"}],
                    "memlm": {"trace": True},
                }
                try:
                    r = c.post("/v1/chat/completions", json=body)
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 200 and r.json()["memlm"]["calls"][0]["status"] == "stored":
                    acknowledged.append((namespace, person))
                i += 1

    clients = [
        threading.Thread(target=client, args=(k, (ALICE, BOB)[k % 2], ("alice", "bob")[k % 2])) for k in range(6)
    ]
    for t in clients:
        t.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 40 and time.monotonic() < deadline:  # the storm is on: writes are acknowledged
        time.sleep(0.05)
    os.kill(server.pid, signal.SIGKILL)  # mid-storm
    server.wait(10)
    stop.set()
    for t in clients:
        t.join(15)
    assert len(acknowledged) > 20
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with TripletStore(db) as store:
        stored = {(ns, f.subject) for ns in ("alice", "bob") for f in store.facts(ns)}
    assert set(acknowledged) <= stored  # every acknowledged write survived
    print(json.dumps({"acknowledged_writes": len(acknowledged), "stored_after_restart": len(stored), "lost": 0}))


class Paced(ScriptedBackend):
    """A stand-in model that takes a fixed time per token: turns of known cost."""

    def __init__(self, **_):
        super().__init__(["Hello there, how are you today?"], chunk=4)

    def stream(self, max_new_tokens):
        for piece in super().stream(max_new_tokens):
            time.sleep(0.004)
            yield piece


def _latencies(url: str, headers: dict, n: int) -> list[float]:
    out = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200
            out.append(time.perf_counter() - t0)
    return out


FLOOD = """
import asyncio, httpx, sys, time
async def one(c, until):
    while time.monotonic() < until:
        await c.post("/v1/chat/completions", json={{"messages": [{{"role": "user", "content": "hi"}}]}})
async def main():
    async with httpx.AsyncClient(base_url={url!r}, headers={{"Authorization": "Bearer alice-key-0001"}}, timeout=60) as c:
        until = time.monotonic() + {seconds}
        await asyncio.gather(*(one(c, until) for _ in range({clients})))
asyncio.run(main())
"""


def test_a_flooding_key_does_not_starve_another(tmp_path):
    """Key A floods with 8 concurrent clients; key B, one request at a time, keeps its p95 within
    3x its p95 alone (turns are admitted round robin across keys)."""
    server, url = _serve(
        tmp_path,
        backend="Paced",
        module="tests.memory_runtime.serving.test_faults",
        limits="Limits(max_queue=64, max_turns_per_key=16)",
    )
    try:
        alone = _latencies(url, BOB, 30)
        flood = subprocess.Popen([sys.executable, "-c", FLOOD.format(url=url, seconds=8, clients=8)])
        time.sleep(1)
        loaded = _latencies(url, BOB, 30)
        flood.wait(60)
    finally:
        server.kill()
        server.wait(10)
    p95_alone, p95_loaded = percentile(alone, 95), percentile(loaded, 95)
    print(
        json.dumps(
            {
                "b_p95_alone_ms": round(1000 * p95_alone, 1),
                "b_p95_under_flood_ms": round(1000 * p95_loaded, 1),
                "ratio": round(p95_loaded / p95_alone, 2),
                "requests_each": 30,
                "flood_clients": 8,
            }
        )
    )
    assert p95_loaded <= 3 * p95_alone


# --------------------------------------------------------------------------- fuzzing every route

ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/memory/facts"),
    ("GET", "/v1/memory/search"),
    ("GET", "/v1/memory/history"),
    ("DELETE", "/v1/memory/facts"),
    ("GET", "/v1/memory/export"),
    ("POST", "/v1/memory/import"),
    ("POST", "/v1/feedback"),
    ("GET", "/v1/models"),
]

json_values = st.recursive(
    # finite floats: a JSON client cannot send others (raw NaN/Infinity bodies are tested below)
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "tool", "x"]),
        "content": st.text(max_size=60) | json_values,
    }
)
chat_body = st.fixed_dictionaries(
    {"messages": st.lists(message, max_size=4)},
    optional={
        "max_tokens": json_values,
        "temperature": json_values,
        "stream": st.booleans(),
        "n": json_values,
        "memlm": json_values,
        "top_p": json_values,
    },
)
fact = st.fixed_dictionaries(
    {"subject": st.text(max_size=30), "relation": st.text(max_size=20), "object": st.text(max_size=30)}
)
bodies = {
    "/v1/chat/completions": chat_body | json_values,
    "/v1/memory/import": st.fixed_dictionaries({"facts": st.lists(fact | json_values, max_size=4)}) | json_values,
    "/v1/feedback": st.fixed_dictionaries({}, optional={"rating": json_values, "correction": json_values}),
}
params = st.dictionaries(
    st.sampled_from(["subject", "relation", "object", "limit", "offset", "purge", "x"]),
    st.text(max_size=30),
    max_size=4,
)


@pytest.fixture(scope="module")
def fuzz_client():
    config = ServeConfig(api_keys=KEYS, api_keys_env=None, allowed_hosts=["testserver"])  # TestClient's Host
    with (
        TripletStore() as store,
        TestClient(
            create_app(config, store, OneAtATime.over(MemoryEchoBackend), model_name="echo"),
            raise_server_exceptions=False,
        ) as c,
    ):
        store.write("Bob Ek", "employed by", "Pfizer", namespace="bob")
        yield c, store


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(ROUTES), data=st.data())
def test_no_input_gets_a_500_or_touches_another_namespace(fuzz_client, route, data):
    client, store = fuzz_client
    method, path = route
    kwargs: dict = {"headers": ALICE, "params": data.draw(params)}
    if method == "POST":
        kwargs["json"] = data.draw(bodies.get(path, json_values))
    r = client.request(method, path, **kwargs)
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        assert "error" in r.json() and r.json()["error"]["message"]
    assert [f.triplet for f in store.facts("bob")] == [("Bob Ek", "employed by", "Pfizer")]


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN"])
@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": %s}'),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "temperature": %s}'),
        ("/v1/memory/import", '{"facts": [{"subject": "A B", "relation": "employed by", "object": %s}]}'),
    ],
)
def test_non_finite_json_numbers_are_refused_not_a_500(fuzz_client, path, body, literal):
    """Python's JSON parser accepts NaN and Infinity, which no JSON client sends: still a 4xx."""
    client, store = fuzz_client
    r = client.post(path, headers={**ALICE, "content-type": "application/json"}, content=body % literal)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    assert r.json()["error"]["message"]
    assert [f.triplet for f in store.facts("bob")] == [("Bob Ek", "employed by", "Pfizer")]


@settings(max_examples=40, deadline=None)
@given(subject=st.text(max_size=30), override=st.text(max_size=30))
def test_the_cli_answers_bad_input_with_a_line_not_a_traceback(tmp_path_factory, subject, override):
    from typer.testing import CliRunner

    from memlm.cli import app

    db = tmp_path_factory.mktemp("cli") / "m.sqlite"
    TripletStore(db).write("Ada Lin", "employed by", "Pfizer")
    runner = CliRunner()
    for args in (
        ["memory", "query", "--db", str(db), "--subject", subject],
        ["memory", "write", "--db", str(db), subject or "x", "employed by", "Acme"],
        ["generate", "--config", "configs/data/tiny.yaml", "--out", str(db.parent / "g"), override],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 2), (args, result.output)
        assert "Traceback" not in result.output
        assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    with TripletStore(db) as store:
        assert ("Ada Lin", "employed by", "Pfizer") in [f.triplet for f in store.facts()]


@pytest.mark.postgres
def test_two_servers_on_one_postgres_database_share_the_memory(tmp_path, postgres_url):
    servers, urls = zip(*(_serve(tmp_path, db=postgres_url) for _ in range(2)))
    try:
        one, two = (httpx.Client(base_url=url, headers=ALICE, timeout=30) for url in urls)

        def say(client, text):
            body = {"messages": [{"role": "user", "content": text}]}
            return client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]

        assert two.get("/v1/memory/search", params={"subject": "Ada Lin"}).json()["data"] == []  # two's index built
        say(one, "remember Ada Lin / employed by / Pfizer")
        assert say(two, "recall Ada Lin") == "You told me: Pfizer."
        found = two.get("/v1/memory/search", params={"subject": "Ada Lyn"}).json()  # fuzzy, caught up
        assert [f["object"] for f in found["data"]] == ["Pfizer"] and found["fuzzy"]
        say(two, "remember Ada Lin / employed by / BMW")  # supersedes through the other server
        assert say(one, "recall Ada Lin") == "You told me: BMW."
        assert two.get("/v1/memory/facts", headers=BOB).json()["total"] == 0  # still one namespace per key
    finally:
        for server in servers:
            server.kill()
            server.wait(10)
