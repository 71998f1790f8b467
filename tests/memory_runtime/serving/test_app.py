"""The server's shape (serving/app.py, serving/routes/): each group of routes in a module of its own, what
they share on app.state, every route in /metrics' names, and no function too long to read at once."""

import ast
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import ROUTERS, create_app
from memory_runtime.serving.middleware import Instrumented
from memory_runtime.serving.routes.state import ServerState
from memory_runtime.serving.serve_config import ServeConfig

REPO = Path(__file__).resolve().parents[3]
SERVING = REPO / "memory_runtime" / "serving"
MAX_LINES = 80  # a function longer than this is read in pieces: split it
# Functions of serving/ over MAX_LINES that this test lets be, each at most as long as it is now; remove an
# entry once its function is split (the test says so).
KNOWN_LONG = {"bench_serve.py:run_serve_bench": 110}

ROUTE_MODULES = {
    "service": {"/health", "/metrics", "/v1/models"},
    "completions": {"/v1/chat/completions"},
    "memory": {
        "/v1/memory/facts",
        "/v1/memory/facts/restore",
        "/v1/memory/namespaces",
        "/v1/memory/relations",
        "/v1/memory/search",
        "/v1/memory/index",
        "/v1/memory/history",
        "/v1/memory/export",
        "/v1/memory/import",
    },
    "feedback": {"/v1/feedback"},
}


def long_functions(folder: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """`file:function` -> lines (from `def` to its last line, nested functions included) of every
    function in `folder` longer than `limit`."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found[f"{path.relative_to(folder).as_posix()}:{node.name}"] = lines
    return found


def test_no_function_of_the_server_is_over_80_lines():
    found = long_functions(SERVING)
    grown = {name: n for name, n in found.items() if n > KNOWN_LONG.get(name, MAX_LINES)}
    assert grown == {}, f"functions over {MAX_LINES} lines (split them): {grown}"
    assert set(KNOWN_LONG) <= set(found), f"now short enough, remove from KNOWN_LONG: {set(KNOWN_LONG) - set(found)}"


def test_the_length_check_sees_a_long_function_even_a_nested_one(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    nested = body.replace("    ", "        ")
    (tmp_path / "a.py").write_text(f"def short():\n    pass\n\n\ndef outer():\n    def inner():\n{nested}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text(f"async def route():\n{body}")
    assert long_functions(tmp_path) == {"a.py:outer": MAX_LINES + 2, "a.py:inner": MAX_LINES + 1, "sub/b.py:route": 81}


@pytest.fixture
def app():
    config = ServeConfig(api_keys={"alice-key-0001": "alice"}, api_keys_env=None, allowed_hosts=["testserver"])
    with TripletStore() as store:
        yield create_app(config, store, None, model_name="none")


def test_each_group_of_routes_lives_in_a_module_of_its_own(app):
    by_module = {}
    for router in ROUTERS:
        for route in router.routes:
            by_module.setdefault(route.endpoint.__module__.rsplit(".", 1)[-1], set()).add(route.path)
    assert by_module == ROUTE_MODULES
    assert set(app.openapi()["paths"]) == set().union(*ROUTE_MODULES.values())  # the docs: the routers' routes


def test_what_the_routes_share_is_one_typed_state_on_app_state(app):
    assert isinstance(app.state.server, ServerState)
    with TestClient(app) as client:
        assert client.get("/health").json() == {"status": "ok", "model": "none"}
        r = client.get("/v1/memory/facts", headers={"Authorization": "Bearer alice-key-0001"})
        assert r.status_code == 200 and r.json()["namespace"] == "alice"


def test_metrics_name_every_route_the_app_answers(app):
    """Instrumented counts a request by its path when the app has that route, else as "other": the
    routers' paths must be among its names, with the docs' and the page's."""
    middleware = next(m for m in app.user_middleware if m.cls is Instrumented)
    assert [m.cls.__name__ for m in app.user_middleware] == ["Instrumented", "HostCheck"]  # outermost first
    names = middleware.kwargs["routes"]
    assert set().union(*ROUTE_MODULES.values()) | {"/openapi.json", "/docs", "/redoc", "/ui", "/ui/static"} <= names


def test_every_package_of_the_server_ships_in_the_wheel():
    """pyproject.toml names its packages one by one: a package of serving/ left out is missing from a
    wheel, whose `memlm serve` then fails on an import (tests/test_wheel.py sees it only in its slow part)."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")  # [tool.setuptools] packages
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in SERVING.rglob("__init__.py")}
    assert {p for p in packages if f'"{p}"' not in pyproject} == set()
