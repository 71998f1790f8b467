"""The memory page (`GET /ui`): see and fix what the memory holds, and chat with the trace beside.

The page is one Jinja2 template and plain JavaScript (static/ui.js), no build step and nothing
fetched from elsewhere. It holds no data of its own: after sign-in it calls the JSON API
(`/v1/memory/...`, `/v1/chat/completions`, `/v1/feedback`) with the key in the Authorization
header, so it passes the same checks as any client and sees the key's namespace only (or,
for a key given several, the one chosen in its select, sent as the Memlm-Namespace header).

Why it is safe to open in a browser:
- the key lives in the tab's sessionStorage and travels only in that header: never in a URL, never
  in a cookie, so another site cannot make the browser send it (no CSRF);
- every text from the memory or the model is put in the page as text (textContent), never as HTML;
- the Content-Security-Policy allows scripts and styles from this server only, no inline script,
  no form submission (a form cannot post the key anywhere if the script fails), no framing.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

UI_DIR = Path(__file__).parent / "ui"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def mount_memory_page(app: FastAPI, *, chat: bool, model_name: str, max_import_bytes: int | None = None) -> None:
    """Add `GET /ui` and its static files (`/ui/static/`) to `app`; `chat` adds the chat pane.
    `max_import_bytes`: the server's limit of an import, which the page tells before sending a file."""
    templates = Jinja2Templates(directory=UI_DIR / "templates")  # autoescapes .html
    app.mount("/ui/static", StaticFiles(directory=UI_DIR / "static"), name="ui-static")

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def memory_page(request: Request) -> HTMLResponse:
        context = {
            "chat": chat,
            "model_name": model_name,
            "root": request.scope.get("root_path", ""),
            "max_import_bytes": max_import_bytes or "",
        }
        return templates.TemplateResponse(request, "memory.html", context, headers=PAGE_HEADERS)
