"""`memlm bench serve`: concurrent clients against a real server on 127.0.0.1, figures as one JSON line."""

import json
import time

from typer.testing import CliRunner

from memlm.cli import app
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.bench_serve import run_serve_bench


class TimedBackend(ScriptedBackend):
    """Writes what the user said and spends 10 ms "in the model" per piece, counted as forward time (enough
    that the server's own time stays the smaller part on a loaded 2-core machine: 2 ms gave 0.52 in CI)."""

    def __init__(self, **_: object) -> None:
        super().__init__([], chunk=8)

    def start(self, messages):
        self._turns = [["[MEM_WRITE{Bench>>heard>>Said " + messages[-1]["content"].rstrip(".?") + "}] Noted."]]
        super().start(messages)

    def stream(self, max_new_tokens):
        for piece in super().stream(max_new_tokens):
            time.sleep(0.01)
            self.stats["forward_seconds"] += 0.01
            yield piece


def test_bench_reports_throughput_latency_and_overhead():
    with TripletStore() as store:
        result = run_serve_bench(OneAtATime.over(TimedBackend), store, clients=3, seconds=0.5, max_tokens=64)
        namespaces = store.namespaces()
        said = {f.object for f in store.facts("bench-0")}
    assert result["errors"] == 0 and result["requests"] >= 3 and result["clients"] == 3
    assert result["requests_per_s"] > 0 and 0 < result["p50_ms"] <= result["p99_ms"]
    assert 0 < result["first_token_p50_ms"] <= result["p50_ms"]  # the reply streams before it ends
    assert 0 <= result["overhead_fraction"] < 0.5  # mostly "model" time by construction
    assert namespaces == ["bench-0", "bench-1", "bench-2"]  # each client its own key and namespace
    assert said == {"Said Dorothea Altemus works for Pfizer", "Said Who works for Pfizer"}


def test_memlm_bench_serve_prints_one_json_line(tiny_model_dir):
    r = CliRunner().invoke(
        app,
        ["bench", "serve", "--model", str(tiny_model_dir), "--clients", "1,2", "--seconds", "0.5", "--max-tokens", "3"],
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result["cells"]) == {"hf:1", "hf:2"} and result["speedup_hf:2_vs_hf:1"] > 0
    for cell in result["cells"].values():
        for key in ("requests_per_s", "p50_ms", "p99_ms", "first_token_p50_ms", "overhead_fraction", "errors"):
            assert key in cell
        assert cell["errors"] == 0 and cell["requests"] >= cell["clients"] and 0 < cell["overhead_fraction"] < 1


def test_bench_serve_refuses_a_bad_client_count(tiny_model_dir):
    r = CliRunner().invoke(app, ["bench", "serve", "--model", str(tiny_model_dir), "--clients", "2,x"])
    assert r.exit_code != 0 and "--clients" in r.output


def test_bench_serve_refuses_an_unknown_engine(tiny_model_dir):
    r = CliRunner().invoke(app, ["bench", "serve", "--model", str(tiny_model_dir), "--engines", "hf,vlm"])
    assert r.exit_code != 0 and "unknown engine 'vlm'" in r.output
