"""`memlm bench soak`: a real server in its own process under mixed clients, a few seconds of it; and the
scripted stand-in model it serves by default."""

import json
import os

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memlm.cli import app
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.scripted_model import SENTENCES, ScriptedMemoryModel, script
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.serving.soak_settings import DEFAULT_MIX, KINDS, parse_cpus, parse_mix

KEY = {"Authorization": "Bearer alice-key-0001"}


def say(client, text):
    body = {"messages": [{"role": "user", "content": text}], "memlm": {"trace": True}}
    return client.post("/v1/chat/completions", json=body, headers=KEY).json()


def test_the_scripted_model_writes_statements_and_answers_questions_from_the_memory():
    config = ServeConfig(api_keys={"alice-key-0001": "alice"}, api_keys_env=None, allowed_hosts=["testserver"])
    with (
        TripletStore() as store,
        TestClient(create_app(config, store, OneAtATime.over(ScriptedMemoryModel), model_name="s")) as c,
    ):
        turn = say(c, "Dorothea Altemus works for Pfizer.")
        assert turn["choices"][0]["message"]["content"] == "Noted."
        assert [(x["kind"], x["status"]) for x in turn["memlm"]["calls"]] == [("write", "stored")]
        say(c, "Tia Batres invested in BMW.")
        say(c, "Dorothea Altemus works for BMW.")  # employed by is functional: Pfizer is superseded
        answer = say(c, "Who does Dorothea Altemus work for?")
        assert answer["choices"][0]["message"]["content"] == "Dorothea Altemus works for BMW."
        assert say(c, "Who invested in BMW?")["choices"][0]["message"]["content"] == "Tia Batres invested in BMW."
        assert say(c, "Who founded Airbus?")["choices"][0]["message"]["content"] == "I don't know."
        assert say(c, "good morning")["choices"][0]["message"]["content"] == "Hello."
        assert [f.triplet for f in store.history(namespace="alice")] == [
            ("Dorothea Altemus", "employed by", "Pfizer"),
            ("Tia Batres", "investor in", "BMW"),
            ("Dorothea Altemus", "employed by", "BMW"),
        ]
    for sentence in SENTENCES:  # every form it says and asks is one it reads back
        assert script(sentence.say("Ada Lin", "Acme")) == [f"[MEM_WRITE{{Ada Lin>>{sentence.relation}>>Acme}}] Noted."]
        assert script(sentence.ask("Ada Lin", "Acme"))[0].startswith("[MEM_READ{")


def test_a_mix_names_known_kinds_with_weights():
    assert parse_mix("chat=25,read=30,write=15,list=15,export=8,import=7") == DEFAULT_MIX
    assert parse_mix("read=1") == {**dict.fromkeys(KINDS, 0.0), "read": 1.0}
    for bad in ("reads=1", "read", "read=x", "read=-1", "read=0"):
        try:
            parse_mix(bad)
        except ValueError as err:
            assert str(err).startswith("--mix")
        else:
            raise AssertionError(bad)


def test_a_short_soak_reports_every_figure_with_no_error_and_no_lost_write(tmp_path):
    out = tmp_path / "soak.json"
    args = ["bench", "soak", "--minutes", "0.05", "--clients", "6", "--namespaces", "12", "--think-ms", "20"]
    args += ["--mix", ",".join(f"{kind}=1" for kind in KINDS), "--bulk-facts", "2000", "--bulk-at", "0.5"]
    args += ["--interval", "1", "--out", str(out)]  # 3 s: most of the test's time is the server starting
    cpus = sorted(os.sched_getaffinity(0))
    apart = len(cpus) > 1  # the clients on the last CPU, the server on the others
    r = CliRunner().invoke(app, args + (["--client-cpus", str(cpus[-1])] if apart else []))
    assert r.exit_code == 0, r.output
    assert sorted(os.sched_getaffinity(0)) == cpus  # this process's CPUs as they were
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert json.loads(out.read_text()) == report  # --out holds the same figures
    assert report["complete"] and report["model"] == "scripted" and report["db"].startswith("sqlite")
    assert report["errors"]["count"] == 0, report["errors"]
    provoked = report["errors"]["provoked"]  # bad imports: each refused with 400
    assert provoked["sent"] == provoked["refused_as_expected"]
    assert report["requests"] > 0 and report["requests_per_s"] > 0
    assert set(report["kinds"]) == set(KINDS)
    for figures in report["kinds"].values():
        assert figures["requests"] > 0 and 0 < figures["p50_ms"] <= figures["p99_ms"]
    assert [s["interval"] for s in report["intervals"]] == [1, 2, 3]  # 3 s in steps of 1
    assert all(set(s["kinds"]) <= set(KINDS) for s in report["intervals"])
    writes = report["acknowledged_writes"]
    assert writes["lost"] == 0 and writes["checked"] >= 2000 and writes["acknowledged"] >= writes["checked"]
    assert report["memory_check"] == {"broken_links": 0, "history_problems": 0, "first": [], "ok": True}
    bulk = report["bulk_import"]
    assert bulk["status"] == 200 and bulk["facts"] == 2000 and bulk["seconds"] > 0
    assert bulk["message"].startswith("2,000 stored")
    assert {"read_p99_ms", "list_p99_ms", "reads_during", "lists_during"} <= set(bulk)
    assert report["exports_checked"]["exports"] > 0
    rss = report["rss"]
    assert len(rss["samples"]) >= 2 and rss["peak_mb"] >= rss["first_mb"] > 0 and "growth_pct" in rss
    machine = report["machine"]  # the CPU time the hypervisor took says whether a slow minute was the server's
    assert machine["cores"] >= 1 and machine["cpu_model"]
    assert 0 <= machine["cpu"]["steal_pct"] <= 100 and 0 < machine["cpu"]["busy_pct"] <= 100
    targets = report["targets"]
    assert set(targets) == {"errors", "lost_writes", "read_p99_ms", "list_p99_ms", "rss_growth_pct"}
    assert targets["errors"]["pass"] and targets["lost_writes"]["pass"]
    assert targets["read_p99_ms"]["at_most"] == 50 and targets["list_p99_ms"]["at_most"] == 200
    assert isinstance(report["pass"], bool) and report["server"]["alive_at_end"]
    seen_by_server = report["server"]["latency_ms"]  # the server's own /metrics, beside the clients' figures
    assert {"/v1/chat/completions", "/v1/memory/search"} <= set(seen_by_server)
    assert all(0 < f["p50"] <= f["p99"] and f["of_last"] > 0 for f in seen_by_server.values())
    if apart:
        assert report["cpus"] == {"clients": cpus[-1:], "server": cpus[:-1]}


def test_client_cpus_are_some_of_this_process_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    for bad in ("x", "3-", "", ",".join(map(str, cpus)), str(max(cpus) + 1)):
        with pytest.raises(ValueError, match="--client-cpus"):
            parse_cpus(bad)
    if len(cpus) > 1:
        assert parse_cpus(f"{cpus[0]}-{cpus[0]}") == [cpus[0]]


def test_overrides_without_a_model_are_refused():
    r = CliRunner().invoke(app, ["bench", "soak", "--minutes", "0.1", "generation.max_new_tokens=8"])
    assert r.exit_code != 0 and "--model" in r.output
