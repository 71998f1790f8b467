"""The terminal chat: talk to a model with a memory, and look into that memory as you go.

Lines are statements or questions for the model; lines starting with "/" are commands
(`/help`). The REPL reads from any text stream, so a test can drive it through stdin or a
StringIO; on a terminal it uses readline, with the history kept in the memlm cache.
Each user name is its own memory namespace and its own conversation. Every turn, and the model's
turn on a /correct, runs through the decoder that `generation.engine` opened, as serve and
eval run theirs (memory_runtime.generation.decoder): hf, batched, or vLLM.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import Field, model_validator
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.proposals import proposed_turn
from memory_runtime.generation.runtime import Generation, with_defaults
from memory_runtime.generation.turn import TurnResult, turn_messages
from memory_runtime.memory.conversation import turn_message
from memory_runtime.memory.facts import local_time
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SEPARATOR, SYSTEM_PROMPT
from memory_runtime.serving.feedback import Correction, Exchange, Feedback
from memory_runtime.shipped import resolve_path
from memory_runtime.yaml_config import Strict

HELP = """\
Type a statement ("Dorothea Altemus works for Pfizer.") or a question ("Who works for Pfizer?").
  /facts            list what the memory holds for the current user
  /trace            the memory calls of the last turn, with their results
  /forget PATTERN   forget facts: "subject", or "subject>>relation>>object" (empty field = any)
  /user NAME        switch to another user (their own memory and conversation)
  /good  /bad       rate the last reply (a good exchange is kept as a feedback trajectory)
  /correct TEXT     correct the last reply ("No, Dorothea works for BMW now."): the model writes the fix
  /help             this help
  /quit             leave (Ctrl-D too)"""


@dataclass
class _Model:
    """The engine and how the chat's turns run on it: `generation`'s limits and sampling, `system_prompt` first."""

    engine: Decoder
    store: TripletStore
    generation: Generation
    system_prompt: str | None

    def turn(self, user: str, text: str, history: list[dict[str, str]]) -> TurnResult:
        if self.store.config.open_relations:  # a conversational memory: its model reads each turn as said by someone
            text = turn_message(user, text)
        messages = turn_messages(text, history, self.system_prompt)
        # its facts dated now, "yesterday" in them said as the day it was
        request = self.generation.request(
            messages, self.store, namespace=user, source=CHAT_SOURCE, said_at=datetime.now()
        )
        return self.engine.run_sessions([proposed_turn(request, self.generation.propose)])[0]  # its runs pooled

    def correct(self, feedback: Feedback, user: str, text: str, last: Exchange | None) -> Correction:
        session = feedback.correction(user, text, last, self.generation, system_prompt=self.system_prompt)
        return self.engine.run_sessions([session])[0]


@dataclass
class _Conversation:
    history: list[dict[str, str]] = field(default_factory=list)
    last: TurnResult | None = None
    last_user: str = ""  # the text `last` answered (what feedback is about)


def run_chat(
    engine: Decoder,
    store: TripletStore,
    input_stream: TextIO,
    console: Console,
    *,
    generation: Generation | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    user: str = "default",
    history_turns: int = 0,
    history_file: Path | None = None,
    show_calls: bool = False,
    feedback: Feedback | None = None,
) -> None:
    """Run the REPL until end of input or /quit.

    `engine` runs every turn (a decoder: memory_runtime.generation.decoder), each with `generation`'s
    limits and sampling (default: its defaults) after `system_prompt`; the last `history_turns`
    exchanges (calls included, as in training) are sent with each turn. The default is none:
    the memory, not the history, is what lasts, and the models memlm trains see single turns.
    `show_calls` prints each turn's memory calls under the reply.
    `history_file` is readline's history, used only when the input is an interactive terminal.
    """
    model = _Model(engine, store, generation or Generation(), system_prompt)
    conversations: dict[str, _Conversation] = {}
    feedback = feedback or Feedback(store)  # /good /bad /correct; logged to disk when it has a FeedbackLog dir
    console.print(f"memlm chat as {user!r}: /help for commands, Ctrl-D to leave.", markup=False, highlight=False)

    def prompt() -> str:  # reads `user` when called: /user changes the prompt
        return f"{user}> "

    for line in _lines(input_stream, console, prompt, history_file):
        line = line.strip()
        if not line:
            continue
        conversation = conversations.setdefault(user, _Conversation())
        if not line.startswith("/"):
            _turn(model, user, conversation, line, console, history_turns, show_calls)
            conversation.last_user = line
            if conversation.last and feedback.repeated_wrong(user, line, conversation.last.reply):
                _say(console, "(this answer was marked wrong before: please /correct it)")
            continue
        command, _, argument = line.partition(" ")
        argument = argument.strip()
        if command in ("/quit", "/exit"):
            break
        elif command == "/help":
            console.print(HELP, markup=False, highlight=False)
        elif command == "/facts":
            _print_facts(store, user, console)
        elif command == "/trace":
            _print_trace(conversation.last, console)
        elif command in ("/good", "/bad", "/correct"):
            _feedback(feedback, model, user, conversation, command, argument, console)
        elif command == "/forget":
            _forget(store, user, argument, console)
        elif command == "/user" and argument:
            user = argument
            console.print(
                f"now talking as {user!r} ({_count(len(store.facts(user)))} in memory)", markup=False, highlight=False
            )
        elif command == "/user":
            console.print(f"talking as {user!r}; switch with /user NAME", markup=False, highlight=False)
        else:
            console.print(f"unknown command {command}: /help lists them", style="red", markup=False, highlight=False)


def _lines(stream: TextIO, console: Console, prompt: Callable[[], str], history_file: Path | None) -> Iterator[str]:
    """Input lines: readline's input() on a terminal, plain reads (prompt and line echoed) otherwise."""
    if stream is sys.stdin and stream.isatty():
        yield from _readline_lines(prompt, history_file)
        return
    while True:
        console.print(prompt(), end="", markup=False, highlight=False)
        line = stream.readline()
        if not line:
            console.print()
            return
        console.print(line.rstrip("\n"), markup=False, highlight=False)
        yield line


def _readline_lines(prompt: Callable[[], str], history_file: Path | None) -> Iterator[str]:
    try:
        import readline
    except ImportError:  # not on every platform: input() still works, without history
        readline = None
    if readline is not None and history_file is not None:
        history_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            readline.read_history_file(history_file)
        except OSError:
            pass
        readline.set_history_length(1000)
    try:
        while True:
            try:
                yield input(prompt())
            except EOFError:
                print()
                return
            except KeyboardInterrupt:  # Ctrl-C drops the line, as in a shell
                print()
    finally:
        if readline is not None and history_file is not None:
            readline.write_history_file(history_file)


CHAT_SOURCE = "chat"  # the source of the facts `memlm chat` stores (the memory page and `memlm memory facts` show it)


def _turn(
    model: _Model, user: str, conversation: _Conversation, text: str, console: Console, keep: int, show_calls: bool
) -> None:
    result = model.turn(user, text, conversation.history[-2 * keep :] if keep else [])
    conversation.last = result
    conversation.history += [{"role": "user", "content": text}, {"role": "assistant", "content": result.text}]
    if show_calls:
        for call in result.calls:
            results = "; ".join(SEPARATOR.join(t) for t in call.results) if call.kind == "read" else ""
            line = f"  {call.text}" + (f" -> {results or 'nothing'}" if call.kind == "read" else f" ({call.status})")
            console.print(Text(line, style="dim"))
    console.print(Text(result.reply or "(no answer)", style="bold"))
    if result.status != "ok":
        console.print(f"(stopped: {result.status})", style="dim", markup=False, highlight=False)


def _say(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _feedback(
    feedback: Feedback,
    model: _Model,
    user: str,
    conversation: _Conversation,
    command: str,
    argument: str,
    console: Console,
) -> None:
    last = Exchange(conversation.last_user, conversation.last) if conversation.last else None
    if command == "/correct":
        if not argument:
            return _say(console, "usage: /correct TEXT  e.g. /correct No, Dorothea works for BMW now.")
        fix = model.correct(feedback, user, argument, last)
        if not fix.writes:
            return _say(console, "no fact found in the correction: nothing stored")
        for triplet in fix.writes:
            _say(console, f"stored {SEPARATOR.join(triplet)}")
        for triplet in fix.superseded + fix.ended:
            _say(console, f"  replaces {SEPARATOR.join(triplet)} (kept in history)")
        return None
    if last is None:
        return _say(console, "no reply to rate yet")
    event = feedback.rate(user, last, good=command == "/good")
    _say(
        console,
        "thanks: kept as a good example"
        if command == "/good"
        else "marked wrong" + (" again: /correct TEXT tells me the right fact" if event.get("repeated_wrong") else ""),
    )
    return None


def _print_facts(store: TripletStore, user: str, console: Console) -> None:
    facts = store.facts(user)
    if not facts:
        console.print(f"no facts in {user!r}'s memory", markup=False, highlight=False)
        return
    table = Table(title=f"{_count(len(facts))} of {user!r}")
    for column in ("subject", "relation", "object", "since"):
        table.add_column(column)
    for f in facts:  # Text cells: a stored term is never read as rich markup
        table.add_row(Text(f.subject), Text(f.relation), Text(f.object), Text(local_time(f.valid_from)))
    console.print(table)


def _print_trace(turn: TurnResult | None, console: Console) -> None:
    if turn is None:
        console.print("no turn yet", markup=False, highlight=False)
        return
    console.print(
        f"status {turn.status}, {turn.generated_tokens} tokens, {turn.wall_seconds:.3f} s"
        f" (model {turn.model_seconds:.3f} s, memory {turn.store_seconds * 1000:.1f} ms)",
        markup=False,
        highlight=False,
    )
    if not turn.calls:
        console.print("no memory calls", markup=False, highlight=False)
        return
    table = Table()
    for column in ("kind", "call", "status", "results"):
        table.add_column(column)
    for call in turn.calls:
        results = "; ".join(SEPARATOR.join(t) for t in call.results)
        if call.fuzzy:
            results += "".join(f"\n(fuzzy {m.field}: {m.asked!r} -> {m.matched!r})" for m in call.fuzzy)
        if call.superseded:
            results += "".join(f"\n(supersedes {SEPARATOR.join(t)})" for t in call.superseded)
        if call.scores:
            results += "\n(scores " + ", ".join(f"{k} {v:.2f}" for k, v in call.scores.items()) + ")"
        if call.run:
            results += f"\n(proposed by sampled run {call.run})"
        table.add_row(Text(call.kind), Text(call.text), Text(call.status), Text(results))
    console.print(table)


def _forget(store: TripletStore, user: str, pattern: str, console: Console) -> None:
    fields = [f.strip() or None for f in pattern.split(SEPARATOR)]
    if len(fields) > 3 or not any(fields):
        console.print(
            "usage: /forget SUBJECT  or  /forget subject>>relation>>object (empty = any)",
            style="red",
            markup=False,
            highlight=False,
        )
        return
    fields += [None] * (3 - len(fields))
    try:
        n = store.forget(*fields, namespace=user)
    except (TypeError, ValueError) as err:
        console.print(f"cannot forget: {err}", style="red", markup=False, highlight=False)
        return
    hint = "" if n else " (the pattern must match exactly: see /facts)"
    console.print(f"forgot {_count(n)}{hint}", markup=False, highlight=False)


def _count(n: int) -> str:
    return f"{n} fact" if n == 1 else f"{n} facts"


class ChatConfig(Strict):
    """configs/chat/default.yaml: whose memory a chat starts with, what each turn sees and shows,
    where feedback goes, and how the model runs (`generation`, as in serve and eval). Relative paths are
    relative to the file."""

    what = "chat config"

    user: str = Field(
        "default", min_length=1, description="whose memory to start with (a namespace); /user NAME switches"
    )
    history_turns: int = Field(
        0,
        ge=0,
        description="earlier exchanges sent with each turn (0: none; the memory is what lasts, and memlm's models "
        "train on single turns)",
    )
    show_calls: bool = Field(False, description="print each turn's memory calls under the reply")
    feedback_dir: Path | None = Field(
        None,
        description="where /good /bad /correct are logged (pending/: trajectories to review with `memlm feedback`; "
        "null: the memory's name + '-feedback' beside it)",
    )
    generation: Generation = Field(
        default_factory=lambda: Generation(max_batch_size=1),
        description="the model and how it runs (generation.engine); a chat runs one turn at a time, so "
        "max_batch_size 1, and auto takes the onnx engine on a CPU where it is installed",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_turn_at_a_time(cls, data: Any) -> Any:
        return with_defaults(data, max_batch_size=1)

    def relative_to(self, folder: Path) -> ChatConfig:
        if self.feedback_dir is not None:
            self.feedback_dir = Path(resolve_path(self.feedback_dir, folder))
        self.generation.relative_to(folder)
        return self


def default_feedback_dir(db: str | Path) -> Path:
    """Beside an SQLite file (its name + '-feedback'); for a PostgreSQL memory, ./memlm-feedback."""
    from memory_runtime.memory.location import is_postgres

    return Path("memlm-feedback") if is_postgres(str(db)) else Path(db).with_name(Path(db).stem + "-feedback")


def chat(config: ChatConfig, db: str | Path) -> None:
    """`memlm chat`: open the model with its memory at `db` on its engine (generation.engine), then run the
    REPL on stdin/stdout. /good /bad /correct are kept as JSONL in `config.feedback_dir` (pending/: reviewed
    with `memlm feedback`); `generation.write_gate` may hold back unsure writes."""
    from memory_runtime.generation.runtime import open_runtime
    from memory_runtime.models.cache import CHAT_HISTORY_FILE, cache_root
    from memory_runtime.serving.feedback import FeedbackLog

    # before the db: a model that does not load leaves no empty file
    runtime = open_runtime(config.generation)
    try:
        with runtime.open_store(db) as store:
            console = Console()
            console.print(f"chatting with {runtime.describe()}", style="dim", markup=False, highlight=False)
            run_chat(
                runtime.decoder,
                store,
                sys.stdin,
                console,
                generation=runtime.generation,
                system_prompt=runtime.system_prompt,
                user=config.user,
                history_file=cache_root() / CHAT_HISTORY_FILE,
                history_turns=config.history_turns,
                show_calls=config.show_calls,
                feedback=Feedback(store, FeedbackLog(config.feedback_dir or default_feedback_dir(db))),
            )
    finally:
        runtime.close()
