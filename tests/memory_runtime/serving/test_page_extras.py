"""The memory page's extras, through the API: undo of a forget (POST /v1/memory/facts/restore), a key
that may act in several namespaces (the Memlm-Namespace header, GET /v1/memory/namespaces), and that
every other key stays in its own namespace. The page itself: test_ui.py."""

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memlm.cli import app as cli_app
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.keys import NAMESPACE_HEADER, KeyRing
from memory_runtime.serving.serve_config import Limits, ServeConfig
from memory_runtime.yaml_config import ConfigError
from tests.memory_runtime.serving.test_serve import MemoryEchoBackend

KEYS = {
    "alice-key-0001": "alice",
    "bob-key-000002": "bob",
    "ops-key-000003": ["ops", "*"],  # may act in any namespace
    "team-key-00004": ["team", "alice"],  # in its own and alice's
}
ALICE, BOB = {"Authorization": "Bearer alice-key-0001"}, {"Authorization": "Bearer bob-key-000002"}
OPS, TEAM = {"Authorization": "Bearer ops-key-000003"}, {"Authorization": "Bearer team-key-00004"}
PFIZER = {"subject": "Dorothea Altemus", "relation": "employed by", "object": "Pfizer"}


def config() -> ServeConfig:
    return ServeConfig(api_keys=KEYS, api_keys_env=None, limits=Limits(), allowed_hosts=["testserver"])


@pytest.fixture
def served():
    with (
        TripletStore() as store,
        TestClient(create_app(config(), store, OneAtATime.over(MemoryEchoBackend), model_name="echo")) as c,
    ):
        yield c, store


def acting_in(namespace: str, headers: dict) -> dict:
    return {**headers, NAMESPACE_HEADER: namespace}


# --------------------------------------------------------------------------- undo of a forget


def test_a_forget_is_undone_by_restoring_the_fact_and_the_history_shows_both(served):
    c, store = served
    fact = store.write(**PFIZER, namespace="alice", at=1.0).fact
    assert c.delete("/v1/memory/facts", params=PFIZER, headers=ALICE).json()["forgotten"] == 1
    assert c.get("/v1/memory/facts", headers=ALICE).json()["total"] == 0

    r = c.post("/v1/memory/facts/restore", json={"id": fact.id}, headers=ALICE)
    assert r.status_code == 200, r.text
    restored = r.json()["restored"]
    assert (restored["object"], restored["source"], restored["valid_to"], r.json()["from"]) == (
        "Pfizer",
        "restore",
        None,
        fact.id,
    )
    assert [f["object"] for f in c.get("/v1/memory/facts", headers=ALICE).json()["data"]] == ["Pfizer"]
    history = c.get("/v1/memory/history", params={"subject": "Dorothea Altemus"}, headers=ALICE).json()["data"]
    assert [(h["id"], h["ended_by"], h["source"]) for h in history] == [
        (fact.id, "forgotten", None),
        (restored["id"], None, "restore"),
    ]

    r = c.post("/v1/memory/facts/restore", json={"id": fact.id}, headers=ALICE)  # twice: it is back already
    assert r.status_code == 409 and r.json()["error"]["code"] == "restore_refused"
    assert "current again already" in r.json()["error"]["message"]


def test_a_restore_that_would_overwrite_a_newer_value_or_a_purged_fact_is_refused_with_a_sentence(served):
    c, store = served
    fact = store.write(**PFIZER, namespace="alice", at=1.0).fact
    c.delete("/v1/memory/facts", params=PFIZER, headers=ALICE)
    c.post("/v1/memory/facts", json={**PFIZER, "object": "BMW"}, headers=ALICE)  # the newer employer
    r = c.post("/v1/memory/facts/restore", json={"id": fact.id}, headers=ALICE)
    assert r.status_code == 409 and r.json()["error"]["param"] == "id"
    assert r.json()["error"]["message"].startswith(
        "restoring “Dorothea Altemus employed by Pfizer” would end “Dorothea Altemus employed by BMW”"
    )
    assert [f.object for f in store.facts("alice")] == ["BMW"]  # nothing changed

    c.delete("/v1/memory/facts", params={"subject": "Dorothea Altemus", "purge": "true"}, headers=ALICE)
    r = c.post("/v1/memory/facts/restore", json={"id": fact.id}, headers=ALICE)
    assert r.status_code == 404 and r.json()["error"]["code"] == "fact_not_found"
    assert "purged (erased for good, which no restore undoes)" in r.json()["error"]["message"]
    for bad in ({"id": 0}, {"id": "one"}, {}, {"id": 1, "namespace": "bob"}):
        assert c.post("/v1/memory/facts/restore", json=bad, headers=ALICE).status_code == 400


def test_a_key_cannot_restore_another_namespaces_fact(served):
    c, store = served
    fact = store.write(**PFIZER, namespace="alice").fact
    store.forget(**PFIZER, namespace="alice")
    r = c.post("/v1/memory/facts/restore", json={"id": fact.id}, headers=BOB)
    assert r.status_code == 404 and "not in namespace 'bob'" in r.json()["error"]["message"]  # as if it were not there
    assert store.facts("alice") == [] and store.namespaces() == ["alice"]


# --------------------------------------------------------------------------- namespaces of a key


def test_a_key_acts_in_its_own_namespace_and_any_other_is_refused_on_every_route(served):
    c, store = served
    store.write(**PFIZER, namespace="bob")
    assert c.get("/v1/memory/namespaces", headers=ALICE).json() == {
        "object": "list",
        "namespace": "alice",
        "any": False,
        "data": ["alice"],
        "next": None,
    }
    assert c.get("/v1/memory/facts", headers=acting_in("alice", ALICE)).json()["namespace"] == "alice"
    probe = acting_in("bob", ALICE)
    for method, path, kwargs in [
        ("GET", "/v1/memory/facts", {}),
        ("GET", "/v1/memory/search", {"params": {"subject": "Dorothea Altemus"}}),
        ("GET", "/v1/memory/history", {"params": {"subject": "Dorothea Altemus"}}),
        ("GET", "/v1/memory/export", {}),
        ("GET", "/v1/memory/namespaces", {}),
        ("POST", "/v1/memory/facts", {"json": PFIZER}),
        ("POST", "/v1/memory/facts/restore", {"json": {"id": 1}}),
        ("POST", "/v1/memory/import", {"json": {"facts": [PFIZER]}}),
        ("DELETE", "/v1/memory/facts", {"params": {"subject": "Dorothea Altemus", "purge": "true"}}),
        ("POST", "/v1/chat/completions", {"json": {"messages": [{"role": "user", "content": "recall Dorothea"}]}}),
        ("POST", "/v1/feedback", {"json": {"rating": "good"}}),
    ]:
        r = c.request(method, path, headers=probe, **kwargs)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "namespace_not_allowed"
        assert r.json()["error"]["message"] == "this API key may not act in namespace 'bob'"
    for nobody in ("carol", "ops"):  # the same answer whether the namespace holds facts or not
        assert c.get("/v1/memory/facts", headers=acting_in(nobody, ALICE)).status_code == 403
    assert [f.namespace for f in store.facts("bob")] == ["bob"] and store.namespaces() == ["bob"]
    for _ in range(12):  # a right key asking for a namespace is no key guessed: never 429
        c.get("/v1/memory/facts", headers=probe)
    assert c.get("/v1/memory/facts", headers=ALICE).status_code == 200
    for bad in (" ", "*"):
        r = c.get("/v1/memory/facts", headers=acting_in(bad, OPS))
        assert r.status_code == 400 and r.json()["error"]["param"] == NAMESPACE_HEADER


def test_a_key_of_several_namespaces_lists_them_and_acts_in_the_one_asked(served):
    c, store = served
    store.write(**PFIZER, namespace="bob")
    store.write("Tia Batres", "lives in", "Lyon", namespace="alice")
    assert c.get("/v1/memory/namespaces", headers=OPS).json() == {
        "object": "list",
        "namespace": "ops",
        "any": True,
        "data": ["ops", "alice", "bob"],  # its own first, then every namespace the memory holds
        "next": None,
    }
    for name in ("carol", "dave", "erin"):
        store.write(**PFIZER, namespace=name)
    first = c.get("/v1/memory/namespaces", params={"limit": 2}, headers=OPS).json()  # paged, in order
    assert (first["data"], first["next"]) == (["ops", "alice", "bob"], "bob")
    second = c.get("/v1/memory/namespaces", params={"limit": 2, "after": "bob"}, headers=OPS).json()
    assert (second["data"], second["next"]) == (["carol", "dave"], "dave")
    last = c.get("/v1/memory/namespaces", params={"limit": 2, "after": "dave"}, headers=OPS).json()
    assert (last["data"], last["next"]) == (["erin"], None)
    assert c.get("/v1/memory/facts", headers=OPS).json()["total"] == 0  # its own by default
    in_bob = acting_in("bob", OPS)
    page = c.get("/v1/memory/facts", headers=in_bob).json()
    assert page["namespace"] == "bob" and [f["object"] for f in page["data"]] == ["Pfizer"]
    assert c.get("/v1/memory/namespaces", headers=in_bob).json()["namespace"] == "bob"
    c.post("/v1/memory/facts", json={**PFIZER, "object": "BMW"}, headers=in_bob)
    assert [f.object for f in store.facts("bob")] == ["BMW"] and store.facts("ops") == []
    r = c.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "recall Dorothea Altemus"}], "memlm": {"trace": True}},
        headers=in_bob,
    )
    assert r.json()["memlm"]["namespace"] == "bob" and r.json()["choices"][0]["message"]["content"].endswith("BMW.")
    assert c.get("/v1/memory/facts", headers=acting_in("new-team", OPS)).json()["namespace"] == "new-team"

    assert c.get("/v1/memory/namespaces", headers=TEAM).json()["data"] == ["team", "alice"]
    assert c.get("/v1/memory/facts", headers=acting_in("alice", TEAM)).json()["total"] == 1
    assert c.get("/v1/memory/facts", headers=acting_in("bob", TEAM)).status_code == 403


def test_keys_of_several_namespaces_come_from_the_config_and_the_key_file(tmp_path):
    (tmp_path / "keys.yaml").write_text("file-key-0003: [carol, alice]\n")
    (tmp_path / "serve.yaml").write_text(
        "api_keys: {conf-key-0001: [ops, '*'], conf-key-0002: bob}\napi_keys_file: keys.yaml\n"
    )
    cfg = ServeConfig.load(tmp_path / "serve.yaml")
    environ = {"MEMLM_API_KEYS": "env-key-00004=dave"}
    assert cfg.resolve_key_access(environ=environ) == {
        "conf-key-0001": ("ops", "*"),
        "conf-key-0002": ("bob",),
        "file-key-0003": ("carol", "alice"),
        "env-key-00004": ("dave",),
    }
    assert cfg.resolve_api_keys(environ=environ)["conf-key-0001"] == "ops"  # each key's own namespace
    for value in ("['*', ops]", "[]", "[ops, '']", "[ops, 3]", "{a: b}"):
        with pytest.raises(ConfigError, match="key #1") as err:
            ServeConfig(api_keys={"secret-key-1": __import__("yaml").safe_load(value)}).resolve_api_keys(environ={})
        assert "secret-key-1" not in str(err.value)
    ring = KeyRing({"alice-key-0001": "alice", "ops-key-000003": ["ops", "*"]})
    assert ring.namespace("ops-key-000003") == "ops" and ring.access("ops-key-000003").may_act_in("anyone")
    assert not ring.access("alice-key-0001").may_act_in("ops") and ring.access("wrong-key-0001") is None


def test_memlm_ui_takes_a_key_of_several_namespaces_from_its_config(tmp_path, monkeypatch):
    import uvicorn

    db = tmp_path / "m.sqlite"
    with TripletStore(db) as store:
        store.write("Tia Batres", "lives in", "Lyon", namespace="alice")
    (tmp_path / "serve.yaml").write_text(
        "api_keys: {ops-key-000003: [ops, '*'], alice-key-0001: alice}\napi_keys_env: null\n"
        "allowed_hosts: [testserver]\n"
    )
    seen = {}

    def run(app, host, port, log_level, **_):  # instead of serving: ask the app memlm ui built
        with TestClient(app) as c:
            seen["ops"] = c.get("/v1/memory/facts", headers=acting_in("alice", OPS)).json()
            seen["alice"] = c.get("/v1/memory/facts", headers=acting_in("ops", ALICE)).status_code

    monkeypatch.setattr(uvicorn, "run", run)
    r = CliRunner().invoke(cli_app, ["ui", "--db", str(db), "--config", str(tmp_path / "serve.yaml")])
    assert r.exit_code == 0, r.output
    assert seen["ops"]["namespace"] == "alice" and [f["object"] for f in seen["ops"]["data"]] == ["Lyon"]
    assert seen["alice"] == 403
