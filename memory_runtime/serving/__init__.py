"""The model with its memory for people: the server (memlm serve), the terminal chat, feedback.

The server: one model behind the controller, one memory namespace per API key.

`POST /v1/chat/completions` speaks the OpenAI chat API (plain and `stream: true`), so any
OpenAI client works unchanged; the controller runs the memory calls server-side and the
client sees only the answer (and, when it asks with `"memlm": {"trace": true}`, the calls).
`/v1/memory/...` lets a user see and edit what the server remembers about them.

Isolation is by construction: the namespace comes from the API key and from nothing a
request can say, so no route can name another user's memory; only a key given several
namespaces in the config (an operator's) may pick one of them per request (Memlm-Namespace).
Generation runs on one model thread (memory_runtime.serving.scheduler): the turns of concurrent users share batches
(`generation.max_batch_size`, memory_runtime.generation.batching), admitted fairly across API keys; a
streamed reply is sent as it is generated, calls never reach the client. The store, which is
thread-safe, is shared by every request.

    serve_config.py ServeConfig (configs/serve/*.yaml): API keys, limits, generation settings
    keys.py        KeyRing: API key -> namespace, and the bearer dependency every route uses;
                   FailedKeys: wrong keys per client address (429); the shipped demo keys
    schemas.py     the request bodies and the OpenAI-shaped APIError
    metrics.py     Metrics: request counts and latencies per route, turn timings (/metrics)
    middleware.py  Instrumented: body-size limit and request metrics, outermost; HostCheck: the
                   server's own names (Host), changes from its own pages only (Origin)
    sse.py         the OpenAI chunk stream of a streamed reply
    app.py         create_app: the server's state (app.state.server), its routes, the page, the middleware
    routes/        the routes, one module per group (APIRouter): completions.py (chat), memory.py
                   (/v1/memory/...), feedback.py, service.py (/health, /metrics, /v1/models);
                   state.py: ServerState, what they share, and the dependencies that read it
    ui.py          the memory page (GET /ui): a template and plain JS over the JSON API
    launch.py      serve (load the model, run uvicorn), serve_memory_page (memlm ui, no model),
                   background_server (tests, benches), check_demo_keys (public keys stay on loopback)
    scheduler.py   the model thread: users' turns share batches, fairly across API keys
    bench_serve.py memlm bench serve: the server under N concurrent clients on loopback
    bench_soak.py  memlm bench soak: the server in its own process under a long mixed load, checked
                   for errors, lost writes, slow minutes and memory growth (run_soak, serve_main)
    soak_settings.py  SoakSettings: the soak's options, its --mix and --client-cpus parsed
    soak_clients.py   the soak's load: Clients (asyncio + httpx) and the bulk import beside them
    soak_recorder.py  Recorder: what the clients measured and acknowledged, and the soak's report

Beside the server, for people at a terminal and for what they teach the model:

    chat.py        memlm chat: the REPL with /facts, /trace, /correct
    feedback.py    👍/👎, corrections and the ask-for-help trigger; trajectories kept for review
"""
