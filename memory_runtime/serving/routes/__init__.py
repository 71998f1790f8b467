"""The server's routes, one module per group, each an APIRouter that create_app (serving/app.py) includes:

    state.py        ServerState, what every route shares (app.state.server), and the dependencies
                    that read it: the server's state, the caller and the namespace it acts in
    service.py      GET /health, GET /metrics (no key), GET /v1/models
    completions.py  POST /v1/chat/completions: a request checked, made a turn, answered plain or streamed
    memory.py       /v1/memory/...: the caller's facts, their history, search, forget, restore, export, import
    feedback.py     POST /v1/feedback: ratings and corrections of the caller's last reply

The memory page (GET /ui) is serving/ui.py.
"""
