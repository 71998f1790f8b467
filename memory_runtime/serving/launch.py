"""Running the server: `memlm serve` (load the model, then uvicorn), `memlm ui` (the memory page,
no model) and a background server for tests and benchmarks."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_runtime.memory.database import ReadOnlyDatabaseError
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.keys import SHIPPED_CONFIGS, shipped_demo_keys
from memory_runtime.serving.middleware import is_loopback
from memory_runtime.serving.schemas import APIError
from memory_runtime.serving.serve_config import ServeConfig
from memory_runtime.yaml_config import ConfigError


def http_protocol() -> type:
    """uvicorn's HTTP/1.1 protocol on httptools (its C parser; with uvloop a read's server CPU 4.00 → 3.71 ms
    on the 2-core Xeon, docs/archive/serving-notes.md), answering a request that is not HTTP (two Host headers, a header
    line that is no header) with the server's JSON error saying why, where uvicorn answers plain text
    "Invalid HTTP request received." (uvicorn's `http=`; the imports are deferred as uvicorn's)."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class JSONErrorsHttpToolsProtocol(HttpToolsProtocol):
        why: str | None = None

        def data_received(self, data: bytes) -> None:  # uvicorn's, keeping the parser's reason
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError as err:
                self.why = self.why or str(err)
                self.send_400_response(self.why)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.hosts = 0

        def on_header(self, name: bytes, value: bytes) -> None:
            if name.lower() == b"host":
                self.hosts += 1
                if self.hosts > 1:  # which one the client meant is unknown (h11 refuses them too)
                    self.why = "found multiple Host headers"
                    raise ValueError(self.why)
            super().on_header(name, value)

        def send_400_response(self, msg: str) -> None:
            why = f": {self.why[:1].lower() + self.why[1:]}" if self.why else ""
            error = APIError(400, f"the request is not valid HTTP{why}", code="invalid_http").response()
            head = [
                b"HTTP/1.1 400 Bad Request\r\n",
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(error.body)).encode() + b"\r\n",
                b"connection: close\r\n\r\n",
            ]
            self.transport.write(b"".join(head) + bytes(error.body))
            self.transport.close()

    return JSONErrorsHttpToolsProtocol


def uvicorn_settings() -> dict[str, Any]:
    """How every memlm server runs uvicorn: no proxy headers (the app believes the proxies of
    forwarded_allow_ips itself: create_app), JSON errors for requests that are not HTTP, and uvloop's
    event loop (libuv: less of the GIL for every request's reads and writes)."""
    return {"proxy_headers": False, "http": http_protocol(), "loop": "uvloop"}


# How long a thread holds the GIL while others wait for it (CPython's default: 5 ms). A server's Python
# work that runs long (checking an import's 60,000 facts) made each request wait up to that for every
# step of the event loop: a read's p99 went from ~30 ms to 405 ms beside such an import.
SWITCH_INTERVAL_S = 0.0005


def check_port(host: str, port: int) -> None:
    """A ValueError naming the address when this process cannot listen there (another server holds the port,
    or the host is not this machine's), found before anything is loaded or created."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ValueError(
            f"cannot serve on {host}:{port}: {err.strerror} (--host: a name or address of this machine)"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a port in TIME_WAIT is free
        try:
            sock.bind(address)
        except OSError as err:
            raise ValueError(
                f"cannot serve on {host}:{port}: {err.strerror} (another server there? --port gives another)"
            ) from None


def run_server(app: Any, host: str, port: int, log_level: str) -> None:
    """Serve `app` under uvicorn until stopped, in this process (which the server then has to itself)."""
    import uvicorn

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_settings())


@contextmanager
def background_server(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Run `app` under uvicorn on a thread of this process; yields its base URL (port 0 = a free one)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", **uvicorn_settings())
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="memlm-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def serve(
    db: str | Path,
    config: ServeConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    allow_demo_key: bool = False,
    on_ready: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> None:
    """Open `config.generation`'s model with its memory and serve it until interrupted. Config, keys
    (check_demo_keys) and DB are checked before the model loads, so a mistake fails in a second, not
    after the load."""
    from memory_runtime.generation.runtime import open_runtime

    keys, access = config.resolve_api_keys(), config.resolve_key_access()
    warning = check_demo_keys(host, keys, config, allow_demo_key=allow_demo_key)
    check_port(host, port)  # before the model loads and the memory file is made: nothing is left behind
    with TripletStore(db, config.generation.memory()) as store:
        refuse_read_only(store, "memlm serve")
        runtime = open_runtime(config.generation, serving=True, log=on_ready)
        app = create_app(
            config,
            store,
            runtime.decoder,
            model_name=config.model_name or runtime.name,
            api_keys=access,  # with the namespaces beyond each key's own
            host=host,
            system_prompt=runtime.system_prompt,
            on_shutdown=runtime.close,  # vLLM's engine processes end with the server
        )
        if warning is not None and on_warning is not None:
            on_warning(warning)
        if on_ready is not None:
            on_ready(
                f"serving {runtime.describe()} on http://{host}:{port} (memory {db}; {keys_line(access)});"
                f" the memory page: http://{host}:{port}/ui"
            )
        run_server(app, host, port, log_level)


def serve_memory_page(
    db: str | Path,
    config: ServeConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    allow_demo_key: bool = False,
    on_ready: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> None:
    """`memlm ui`: the memory page and the memory routes over a memory file, no model (no chat).
    The same app as `memlm serve`, so the page signs in with the same API keys, under the same checks."""
    keys, access = config.resolve_api_keys(), config.resolve_key_access()
    warning = check_demo_keys(host, keys, config, allow_demo_key=allow_demo_key)
    check_port(host, port)
    with TripletStore(db, config.generation.memory()) as store:
        refuse_read_only(store, "memlm ui")
        app = create_app(config, store, None, model_name="none", api_keys=access, host=host)
        if warning is not None and on_warning is not None:
            on_warning(warning)
        if on_ready is not None:
            on_ready(f"the memory page of {db}: http://{host}:{port}/ui (sign in with an API key: {keys_line(access)})")
        run_server(app, host, port, log_level)


def refuse_read_only(store: TripletStore, command: str) -> None:
    """A server writes to its memory (every turn, the page's edits): a memory opened read-only is refused
    before a model loads, in one line, rather than failing each write of a running server."""
    if store.read_only:
        raise ReadOnlyDatabaseError(
            f"{store.read_only_notice}; {command} writes to its memory: serve a writable copy "
            "(memlm memory facts / export read this one)"
        )


def _opens(namespaces: str | Sequence[str]) -> str:
    """What a key opens, in words: its namespace, and those it may also act in ("*": any)."""
    first, *rest = (namespaces,) if isinstance(namespaces, str) else namespaces
    if "*" in rest:
        return f"{first!r} and every other namespace"
    return f"{first!r} (and {', '.join(map(repr, rest))})" if rest else repr(first)


def keys_line(keys: Mapping[str, str | Sequence[str]]) -> str:
    """Which key opens which namespace, for the start-up line: a shipped demo key by name (its config
    prints it already), every other key by its namespaces only (never a secret). `keys`: key -> its
    namespace, or the namespaces it may act in (ServeConfig.resolve_key_access)."""
    shipped = shipped_demo_keys()
    parts = [f"key {key!r} opens namespace {_opens(ns)}" for key, ns in sorted(keys.items()) if key in shipped]
    others = sorted({_opens(ns) for key, ns in keys.items() if key not in shipped})
    if others:
        n = sum(key not in shipped for key in keys)
        parts.append(f"{n} other key{'s' if n > 1 else ''} open{'' if n > 1 else 's'} {', '.join(others)}")
    return "; ".join(parts) or "no API keys: nothing can sign in"


def check_demo_keys(host: str, keys: dict[str, str], config: ServeConfig, *, allow_demo_key: bool) -> str | None:
    """A server beyond loopback must not take memlm's shipped demo keys (keys.shipped_demo_keys), which
    anyone can read: that is refused (ConfigError) unless told twice, with --allow-demo-key
    (`allow_demo_key`) and the serve config's `allow_demo_key: true`; then the loud warning to show
    is returned. None on loopback, or with no shipped key among `keys`."""
    shipped = shipped_demo_keys()
    exposed = {key: namespace for key, namespace in keys.items() if key in shipped}
    if is_loopback(host) or not exposed:
        return None
    namespaces = ", ".join(sorted({repr(namespace) for namespace in exposed.values()}))
    files = ", ".join(sorted({_shown(shipped[key]) for key in exposed}))
    what = f"memlm's public demo key (namespace {namespaces}; the key is in {files})"
    if not (allow_demo_key and config.allow_demo_key):
        given = "--allow-demo-key" if allow_demo_key else "allow_demo_key: true" if config.allow_demo_key else None
        raise ConfigError(
            f"refusing to listen on {host} with {what}: anyone who can reach this machine could read and write "
            "that memory. Remove the key from the serve config's api_keys and give each user a key of their own "
            "(api_keys_env, api_keys_file), or, for a demo on a network you trust, say so twice: --allow-demo-key "
            "and allow_demo_key: true in the serve config" + (f" (only {given} was given)" if given else "")
        )
    return (
        f"WARNING: listening on {host} with {what}: anyone who can reach this machine can read and write that "
        "memory (--allow-demo-key and allow_demo_key: true said so)"
    )


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(SHIPPED_CONFIGS.parent))
    except ValueError:
        return str(path)
