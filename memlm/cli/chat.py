"""`memlm chat`: a model and its memory in the terminal (memory_runtime.serving.chat)."""

from __future__ import annotations

from pathlib import Path

import typer

from memlm.cli.common import MODEL, app, fail, load, overrides_argument


@app.command("chat")
def chat_command(
    model: str | None = MODEL,
    db: str = typer.Option(..., "--db", help="The memory: an SQLite file (created if missing) or a postgresql:// URL."),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="Chat config YAML (configs/chat/default.yaml lists every field at its default: history, "
        "feedback, generation); key=value overrides and flags win over it.",
    ),
    overrides: list[str] | None = overrides_argument("generation.temperature=0.7", "generation.max_new_tokens=128"),
    user: str | None = typer.Option(
        None, "--user", "-u", help="Sets user: whose memory to start with (a namespace); /user NAME switches."
    ),
    show_calls: bool | None = typer.Option(
        None, "--show-calls", help="Sets show_calls: print each turn's memory calls under the reply."
    ),
    feedback_dir: Path | None = typer.Option(
        None,
        "--feedback-dir",
        help="Sets feedback_dir: where /good /bad /correct are logged (pending/: trajectories to review with "
        "`memlm feedback`; default: DB's name + '-feedback' beside it).",
    ),
) -> None:
    """Chat with a model and its memory in the terminal: /facts, /trace, /forget PATTERN, /user NAME, /help.

    Reads stdin when it is not a terminal (lines are echoed), so a session can be scripted."""
    from memory_runtime.serving.chat import ChatConfig, chat

    flags = {"generation.model": model, "user": user, "show_calls": show_calls, "feedback_dir": feedback_dir}
    cfg = load(ChatConfig, config, overrides, flags)
    try:
        chat(cfg, db)
    except (ValueError, FileNotFoundError) as err:
        fail(err)
