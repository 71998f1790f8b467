"""`memlm serve` (a model with its memory behind an OpenAI-compatible API), `memlm ui` (the memory
page, no model), `memlm bench serve` and `memlm bench soak` (memory_runtime.serving)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from memlm.cli.common import (
    MODEL,
    app,
    bench_app,
    console,
    counts,
    engine_names,
    fail,
    load,
    load_generation,
    log,
    overrides_argument,
    print_json,
)

if TYPE_CHECKING:
    from memory_runtime.serving.serve_config import ServeConfig

SERVE_CONFIG = Path("configs/serve/default.yaml")
HOST = typer.Option(
    "127.0.0.1",
    "--host",
    help="Interface to listen on: 127.0.0.1 is this machine only; 0.0.0.0 is every interface (a shipped demo key "
    "is refused there: see --allow-demo-key). Requests must name the server by it (the Host header): loopback "
    "answers to localhost, 127.0.0.1 and ::1; 0.0.0.0 to those, this machine's name and any IP address.",
)
PORT = typer.Option(8000, "--port", min=1, max=65535, help="TCP port to listen on.")
ALLOW_HOST = typer.Option(
    None,
    "--allow-host",
    help="A name the server also answers to (the Host header, e.g. memlm.example.com), beyond those of --host; "
    "repeat for more; added to the serve config's allowed_hosts. '*': any name (turns the check off: only behind "
    "a proxy that checks Host). Other names get 400, which stops DNS rebinding.",
    show_default=False,
)
FORWARDED_ALLOW_IPS = typer.Option(
    None,
    "--forwarded-allow-ips",
    help="Comma-separated proxies (IP addresses or networks; '*': any) whose X-Forwarded-For names the client, "
    "added to the serve config's forwarded_allow_ips. Without them a client is its connection's address: what the "
    "wrong-key limit counts by, so no header can spread guesses over forged addresses or lock another out.",
    show_default=False,
)
ALLOW_DEMO_KEY = typer.Option(
    False,
    "--allow-demo-key",
    help="Listen beyond loopback although a shipped demo key (public: it is in configs/) is among the API keys. "
    "Only together with allow_demo_key: true in the serve config (or the override allow_demo_key=true): say so "
    "twice, and a loud warning is printed.",
)


def with_hosts(cfg: ServeConfig, allow_host: list[str] | None, proxies: str | None = None) -> ServeConfig:
    """The serve config with the --allow-host names added to its allowed_hosts and the
    --forwarded-allow-ips proxies to its forwarded_allow_ips, each checked as the file's are."""
    from memory_runtime.serving.serve_config import ServeConfig, host_name

    try:
        names = [host_name(name) for name in allow_host or []]
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--allow-host") from None
    cfg.allowed_hosts = [*cfg.allowed_hosts, *names]
    added = [p.strip() for p in (proxies or "").split(",") if p.strip()]
    try:
        cfg.forwarded_allow_ips = ServeConfig._proxy_addresses([*cfg.forwarded_allow_ips, *added])
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--forwarded-allow-ips") from None
    return cfg


def warn(line: str) -> None:
    """A warning nobody should miss, on stderr."""
    console.print(line, style="bold red", markup=False, highlight=False, soft_wrap=True)


@app.command("serve")
def serve_command(
    model: str | None = MODEL,
    db: str = typer.Option(
        ...,
        "--db",
        help="The memory: an SQLite file (created if missing) or a postgresql:// URL, which several servers may "
        "share; every user's facts, one namespace per API key.",
    ),
    host: str = HOST,
    port: int = PORT,
    config: Path = typer.Option(
        SERVE_CONFIG,
        "--config",
        help="Serve config YAML: API keys -> namespaces (also from an env variable or a file), limits, "
        "generation (how the model runs); see its comments.",
    ),
    log_level: str = typer.Option(
        "info", "--log-level", help="uvicorn's log level: critical, error, warning, info, debug, trace."
    ),
    allow_host: list[str] | None = ALLOW_HOST,
    forwarded_allow_ips: str | None = FORWARDED_ALLOW_IPS,
    allow_demo_key: bool = ALLOW_DEMO_KEY,
    overrides: list[str] | None = overrides_argument("generation.engine=onnx", "limits.max_queue=64"),
) -> None:
    """Serve a model with its memory behind an OpenAI-compatible API (POST /v1/chat/completions),
    with per-user memory endpoints (/v1/memory/...), /health and /metrics."""
    from memory_runtime.serving.launch import serve
    from memory_runtime.serving.serve_config import ServeConfig

    cfg = with_hosts(load(ServeConfig, config, overrides, {"generation.model": model}), allow_host, forwarded_allow_ips)
    try:
        serve(
            db,
            cfg,
            host=host,
            port=port,
            log_level=log_level,
            allow_demo_key=allow_demo_key,
            on_ready=log,
            on_warning=warn,
        )
    except (ValueError, FileNotFoundError) as err:
        fail(err)


@app.command("ui")
def ui_command(
    db: str = typer.Option(..., "--db", help="The memory to inspect: an SQLite file or a postgresql:// URL."),
    host: str = HOST,
    port: int = PORT,
    config: Path = typer.Option(
        SERVE_CONFIG, "--config", help="Serve config YAML: the API keys the page signs in with (as memlm serve)."
    ),
    allow_host: list[str] | None = ALLOW_HOST,
    forwarded_allow_ips: str | None = FORWARDED_ALLOW_IPS,
    allow_demo_key: bool = ALLOW_DEMO_KEY,
    overrides: list[str] | None = overrides_argument("allow_demo_key=false"),
) -> None:
    """The memory page (http://HOST:PORT/ui) on a memory, without a model: see, search, time-travel,
    correct, forget, export and import the facts of one API key's namespace. No chat pane."""
    from memory_runtime.memory.location import is_postgres
    from memory_runtime.serving.launch import serve_memory_page
    from memory_runtime.serving.serve_config import ServeConfig

    if not is_postgres(db) and not Path(db).exists():
        raise typer.BadParameter(f"{db} does not exist", param_hint="--db")
    cfg = with_hosts(load(ServeConfig, config, overrides), allow_host, forwarded_allow_ips)
    try:
        serve_memory_page(db, cfg, host=host, port=port, allow_demo_key=allow_demo_key, on_ready=log, on_warning=warn)
    except (ValueError, FileNotFoundError) as err:
        fail(err)


@bench_app.command("serve")
def bench_serve_command(
    model: str | None = MODEL,
    clients: str = typer.Option(
        "4", "--clients", help="Concurrent clients, each its own API key and namespace; comma-separated: one cell each."
    ),
    seconds: float = typer.Option(30.0, "--seconds", min=0.1, help="How long the clients keep sending requests."),
    max_tokens: int = typer.Option(32, "--max-tokens", min=1, help="max_tokens of every request."),
    engines: str | None = typer.Option(
        None,
        "--engines",
        help="Comma-separated engines (hf, onnx, vllm), each at every number of clients (default: generation.engine, "
        "auto: vllm where installed).",
    ),
    overrides: list[str] | None = overrides_argument("generation.max_batch_size=16"),
) -> None:
    """The server on 127.0.0.1 under concurrent streaming clients: requests/s, latency p50/p99, time to
    the first streamed words, controller overhead; one cell per engine and number of clients. Overrides:
    generation.KEY=VALUE (as serve runs the model), e.g. generation.max_batch_size=1."""
    from memory_runtime.serving.bench_serve import bench_serve

    generation = load_generation(overrides, {"generation.model": model})
    cells = counts(clients, "--clients", 256)
    try:
        result = bench_serve(
            generation,
            clients=cells,
            engines=engine_names(engines, generation),
            seconds=seconds,
            max_tokens=max_tokens,
        )
    except (ValueError, FileNotFoundError) as err:
        fail(err)
    print_json(result)


@bench_app.command("soak")
def bench_soak_command(
    minutes: float = typer.Option(30.0, "--minutes", min=0.05, help="How long the clients keep sending requests."),
    db: str | None = typer.Option(
        None,
        "--db",
        help="The memory the server runs over: an SQLite file or a postgresql:// URL (default: a temporary "
        "SQLite file). It is written to: give an empty one.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Serve this model (as memlm serve opens it; overrides: generation.KEY=VALUE) instead of the "
        "scripted stand-in, which writes and reads the memory as a trained model does, without weights.",
        show_default=False,
    ),
    clients: int = typer.Option(64, "--clients", min=1, max=1024, help="Concurrent clients (one process, asyncio)."),
    namespaces: int = typer.Option(
        1000, "--namespaces", min=1, max=100_000, help="Namespaces, each its own API key; clients act in random ones."
    ),
    think_ms: float = typer.Option(
        1000.0,
        "--think-ms",
        min=0.0,
        help="A client's mean pause between its requests (exponential): 64 clients are 64 users. 0: none (the "
        "server saturates, and latency is mostly queueing).",
    ),
    mix: str | None = typer.Option(
        None,
        "--mix",
        help="Weights of the kinds of request: chat (turns), read (search), write (a fact), list (a page of 50), "
        "export, import (a small file); a kind not named gets 0. Default: "
        "chat=25,read=30,write=15,list=15,export=8,import=7.",
        show_default=False,
    ),
    bulk_facts: int = typer.Option(
        60_000, "--bulk-facts", min=0, help="Facts of the one large import beside the clients (0: none)."
    ),
    bulk_at: float | None = typer.Option(
        None,
        "--bulk-at",
        min=0.0,
        help="When it starts, in seconds into the run (default: 120, or a third of a shorter run).",
    ),
    interval: float = typer.Option(
        60.0, "--interval", min=1.0, help="The time series' step in seconds (latency per kind; --out rewritten)."
    ),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1, help="max_tokens of every chat turn."),
    seed: int = typer.Option(0, "--seed", help="Seed of the clients' choices."),
    client_cpus: str | None = typer.Option(
        None,
        "--client-cpus",
        help="Run the clients on these CPUs (e.g. 12-15) and the server on the others it may use, so that the "
        "server's latency is its own (default: all share every CPU).",
        show_default=False,
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Also write the report (indented) here, rewritten every --interval: an interrupted run keeps it.",
    ),
    overrides: list[str] | None = overrides_argument("generation.max_new_tokens=32"),
) -> None:
    """The server in a process of its own under a long mixed load: chat turns, reads, writes, page listings,
    exports and small imports by concurrent clients in random namespaces, one large import beside them.
    Prints one JSON line: requests/s, p50/p99 per kind and interval, errors, the server's RSS over time,
    acknowledged writes looked for afterwards (lost), the memory check, the large import's duration with the
    read and listing p99 meanwhile, and each figure against its target (pass/fail)."""
    from memory_runtime.serving.bench_soak import run_soak
    from memory_runtime.serving.soak_settings import DEFAULT_MIX, SoakSettings, parse_cpus, parse_mix

    if overrides and model is None:
        fail(ValueError("generation overrides are for a real model: give --model too"))
    generation = load_generation(overrides, {"generation.model": model}) if model is not None else None
    try:
        settings = SoakSettings(
            seconds=minutes * 60,
            clients=clients,
            namespaces=namespaces,
            think_ms=think_ms,
            mix=parse_mix(mix) if mix else dict(DEFAULT_MIX),
            bulk_facts=bulk_facts,
            bulk_at=bulk_at,
            interval=interval,
            max_tokens=max_tokens,
            seed=seed,
            client_cpus=parse_cpus(client_cpus) if client_cpus else None,
        )
        result = run_soak(settings, db=db, generation=generation, out=out, log=log)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        fail(err)
    print_json(result)
