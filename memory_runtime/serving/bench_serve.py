"""`memlm bench serve`: the server under N concurrent clients, on the loopback interface.

The server runs in this process (uvicorn on a thread, port picked by the OS); each client is
a thread with its own API key, hence its own namespace, that alternates a statement and a
question for T seconds (each at least once, however short T), streaming each reply. Latency is
what the client sees (queueing included); time to first token is when the first words of the
reply reach it; the controller overhead is measured inside each turn, from the trace: (wall -
model forward passes) / wall. Turns of concurrent clients share the model's batches
(`max_batch_size`).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.runtime import Engine, Generation, open_runtime
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.serving.app import create_app
from memory_runtime.serving.launch import background_server
from memory_runtime.serving.serve_config import Limits, ServeConfig
from memory_runtime.stats import percentile

# the shipped person–organisation schema's turns: the load a served model of the default schema sees
# (what it generates and how long does not depend on which schema the names come from)
_PEOPLE = ["Dorothea Altemus", "Tia Batres", "Cyrus Alfred", "Marta Quinlan", "Ivo Renner", "Aiko Sato"]
_ORGS = ["Pfizer", "BMW", "Siemens", "Nestle", "Airbus", "Lufthansa"]


def _prompts(client: int) -> list[str]:
    """A statement then a question about it, different per client."""
    person, org = _PEOPLE[client % len(_PEOPLE)], _ORGS[(client // len(_PEOPLE)) % len(_ORGS)]
    return [f"{person} works for {org}.", f"Who works for {org}?"]


def run_serve_bench(
    decoder: Decoder,
    store: TripletStore,
    *,
    clients: int = 4,
    seconds: float = 30.0,
    max_tokens: int = 32,
    model_name: str = "bench",
    system_prompt: str | None = SYSTEM_PROMPT,
) -> dict[str, Any]:
    """Drive a fresh server over `store` and return the figures (one JSON-able dict)."""
    keys = {f"bench-key-{i:04d}": f"bench-{i}" for i in range(clients)}
    config = ServeConfig(
        api_keys=keys,
        api_keys_env=None,
        limits=Limits(max_queue=max(32, 2 * clients)),
        generation=Generation(max_new_tokens=max_tokens),
    )
    app = create_app(
        config,
        store,
        decoder,
        model_name=model_name,
        api_keys=keys,
        system_prompt=system_prompt,
    )
    latencies: list[float] = []
    first_tokens: list[float] = []
    overheads: list[float] = []
    tokens = [0]
    errors: list[str] = []
    lock = threading.Lock()

    def client(i: int, url: str, deadline: float, timed: bool) -> None:
        headers = {"Authorization": f"Bearer bench-key-{i:04d}"}
        prompts = _prompts(i)
        with httpx.Client(base_url=url, headers=headers, timeout=max(60.0, seconds)) as http:
            n = 0
            while time.monotonic() < deadline or n < (len(prompts) if timed else 1):  # a timed client asks both
                body = {
                    "model": model_name,
                    "max_tokens": max_tokens,
                    "memlm": {"trace": True},
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "messages": [{"role": "user", "content": prompts[n % 2]}],
                }
                t0 = time.perf_counter()
                first: float | None = None
                try:
                    with http.stream("POST", "/v1/chat/completions", json=body) as response:
                        response.raise_for_status()
                        data: dict[str, Any] = {}
                        for line in response.iter_lines():
                            if not line.startswith("data: {"):
                                continue
                            chunk = json.loads(line[len("data: ") :])
                            if "error" in chunk:
                                raise ValueError(chunk["error"]["message"])
                            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
                            if delta.get("content") and first is None:
                                first = time.perf_counter() - t0
                            data.update({k: chunk[k] for k in ("memlm", "usage") if k in chunk})
                    elapsed = time.perf_counter() - t0
                except (httpx.HTTPError, ValueError) as err:
                    with lock:
                        errors.append(f"{type(err).__name__}: {err}")
                    n += 1
                    continue
                n += 1
                if not timed:
                    return
                timings = data["memlm"]["timings"]
                with lock:
                    latencies.append(elapsed)
                    if first is not None:
                        first_tokens.append(first)
                    tokens[0] += data["usage"]["completion_tokens"]
                    if timings["wall_seconds"] > 0:
                        overheads.append(timings["overhead_seconds"] / timings["wall_seconds"])

    def wave(url: str, duration: float, timed: bool) -> float:
        start = time.monotonic()
        threads = [threading.Thread(target=client, args=(i, url, start + duration, timed)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.monotonic() - start

    with background_server(app) as url:
        wave(url, 0.0, timed=False)  # warm-up: one request per client (first forwards are slow)
        errors.clear()
        elapsed = wave(url, seconds, timed=True)
    return {
        "clients": clients,
        "seconds": round(elapsed, 3),
        "max_tokens": max_tokens,
        "requests": len(latencies),
        "errors": len(errors),
        "requests_per_s": round(len(latencies) / elapsed, 3),
        "completion_tokens_per_s": round(tokens[0] / elapsed, 2),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
        "p99_ms": round(percentile(latencies, 99) * 1000, 1) if latencies else None,
        "first_token_p50_ms": round(percentile(first_tokens, 50) * 1000, 1) if first_tokens else None,
        "overhead_fraction": round(sum(overheads) / len(overheads), 4) if overheads else None,
        **({"first_error": errors[0]} if errors else {}),
    }


def bench_serve(
    generation: Generation,
    *,
    clients: Sequence[int] = (4,),
    engines: Sequence[Engine] = ("hf",),
    seconds: float = 30.0,
    max_tokens: int = 32,
) -> dict[str, Any]:
    """Open `generation`'s model on each engine in turn and benchmark it behind the server at each
    number of clients, every cell (engine:clients) on a fresh SQLite memory in a temp dir; figures
    side by side. An engine is closed before the next opens, so an idle one takes no core from the other."""
    import gc

    import torch

    on = {engine: Generation.model_validate({**generation.model_dump(), "engine": engine}) for engine in engines}
    cells: dict[str, dict[str, Any]] = {}
    dtypes: dict[str, str] = {}
    device = generation.device
    name = generation.model
    for engine in engines:
        runtime = open_runtime(on[engine])
        dtypes[engine], device, name = runtime.dtype, runtime.device, runtime.name
        for n in clients:
            with (
                tempfile.TemporaryDirectory(prefix="memlm-bench-serve-") as tmp,
                runtime.open_store(Path(tmp) / "m.sqlite") as store,
            ):
                cell = run_serve_bench(
                    runtime.decoder,
                    store,
                    clients=n,
                    seconds=seconds,
                    max_tokens=max_tokens,
                    model_name=runtime.name,
                    system_prompt=runtime.system_prompt,
                )
            if engine == "vllm":  # the engine's forward passes are not timed in this process
                cell["overhead_fraction"] = None
            cells[f"{engine}:{n}"] = cell
        runtime.close()  # before the next engine opens: an idle one would take cores from it
        del runtime
        gc.collect()
    out: dict[str, Any] = {
        "model": name,
        "device": device,
        "dtype": dtypes,
        "max_batch_size": generation.batch_size(),
        "torch_threads": torch.get_num_threads(),
        "cells": cells,
    }
    first = f"{engines[0]}:{clients[0]}"
    for name, cell in cells.items():
        if name != first and cells[first]["requests_per_s"]:
            out[f"speedup_{name}_vs_{first}"] = round(cell["requests_per_s"] / cells[first]["requests_per_s"], 3)
    return out
