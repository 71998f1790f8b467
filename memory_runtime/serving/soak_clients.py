"""A soak's load: concurrent clients (asyncio + httpx), each in namespaces drawn at random, sending
requests of the kinds its mix draws, and the one bulk import beside them; what they are told and
acknowledged goes to the Recorder. Also what they say: each namespace's small world of people and
organisations, and the server's RSS sampled as they run."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
import psutil

from memory_runtime.generation.scripted_model import SENTENCES
from memory_runtime.serving.soak_recorder import Recorder
from memory_runtime.serving.soak_settings import KINDS, SoakSettings

BULK_NAMESPACE = "soak-bulk"
PROVOKED_SHARE = 0.05  # of imports: a file with an empty subject, which must get 400
ACKNOWLEDGING = ("stored", "duplicate")  # a write call's statuses that say the fact is in memory

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


class Clients:
    """The soak's clients and its bulk import, run until the soak's deadline (or the server has gone)."""

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
