"""Running the server: `memlm serve` (load the model, then uvicorn), `memlm ui` (the memory page,
no model) and a background server for tests and benchmarks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.app import create_app
from memory_runtime.serving.config import ServeConfig


@contextmanager
def background_server(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Run `app` under uvicorn on a thread of this process; yields its base URL (port 0 = a free one)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
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
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Open `config.generation`'s model with its memory and serve it until interrupted. Config, keys
    and DB are checked before the model loads, so a mistake fails in a second, not after the load."""
    import uvicorn

    from memory_runtime.generation.runtime import open_runtime

    keys = config.resolve_api_keys()
    with TripletStore(db, config.generation.memory()) as store:
        runtime = open_runtime(config.generation)
        app = create_app(
            config,
            store,
            runtime.backend if runtime.model is not None else None,  # corrections decode alone (hf only)
            model_name=config.model_name or runtime.name,
            decoder=runtime.decoder,
            api_keys=keys,
            system_prompt=runtime.system_prompt,
            on_shutdown=runtime.close,  # vLLM's engine processes end with the server
        )
        if on_ready is not None:
            on_ready(
                f"serving {runtime.describe()} on http://{host}:{port} ({len(keys)} API keys, memory {db});"
                f" the memory page: http://{host}:{port}/ui"
            )
        uvicorn.run(app, host=host, port=port, log_level=log_level)


def serve_memory_page(
    db: str | Path,
    config: ServeConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """`memlm ui`: the memory page and the memory routes over a memory file, no model (no chat).
    The same app as `memlm serve`, so the page signs in with the same API keys."""
    import uvicorn

    keys = config.resolve_api_keys()
    with TripletStore(db, config.generation.memory()) as store:
        app = create_app(config, store, None, model_name="none", api_keys=keys)
        if on_ready is not None:
            on_ready(f"the memory page of {db}: http://{host}:{port}/ui (sign in with an API key; {len(keys)} keys)")
        uvicorn.run(app, host=host, port=port, log_level=log_level)
