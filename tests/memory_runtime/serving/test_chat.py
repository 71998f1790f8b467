"""The chat REPL, driven through text streams (a stand-in model) and through stdin (`memlm chat`
as a subprocess over the tiny real model saved to disk)."""

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.store import TripletStore
from memory_runtime.serving.chat import run_chat
from tests.memory_runtime.serving.test_serve import MemoryEchoBackend


def chat(store, lines, user="alice", **options):
    """Run the REPL over these input lines; return what it printed."""
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    run_chat(
        OneAtATime(lambda _: MemoryEchoBackend()),
        store,
        io.StringIO("\n".join(lines)),
        console,
        user=user,
        **options,
    )
    return out.getvalue()


def test_show_calls_prints_each_call_under_the_reply(store):
    out = chat(store, ["remember Tia Batres / works for / BMW", "recall Tia Batres"], show_calls=True)
    assert "  [MEM_WRITE{Tia Batres>>works for>>BMW}] (stored)\nNoted." in out
    assert "  [MEM_READ{Tia Batres>>>>}: -> Tia Batres>>employed by>>BMW\n" in out


def test_history_is_off_by_default_and_carries_the_calls_when_on(store):
    seen = []

    class Recording(MemoryEchoBackend):
        def start(self, messages):
            seen.append(messages)
            super().start(messages)

    def run(**options):
        seen.clear()
        run_chat(
            OneAtATime(lambda _: Recording()),
            store,
            io.StringIO("remember A B / works for / C\nrecall A B\n"),
            Console(file=io.StringIO()),
            **options,
        )
        return seen[-1]

    assert [m["role"] for m in run()] == ["system", "user"]
    with_history = run(history_turns=1)
    assert [m["role"] for m in with_history] == ["system", "user", "assistant", "user"]
    assert "[MEM_WRITE{A B>>works for>>C}]" in with_history[2]["content"]


def test_chat_runs_on_the_batched_engine_as_it_runs_one_turn_at_a_time(tiny_model, smollm2_tokenizer):
    """`memlm chat` runs on the engine that generation.engine opens, as serve and eval do: on the batched
    hf engine a chat (a /correct's turn included) decodes what one turn at a time decodes (greedy)."""
    from memory_runtime.generation.batching import BatchDecoder
    from memory_runtime.generation.hf_backend import HFBackend
    from memory_runtime.generation.runtime import Generation

    lines = ["Tia Batres works for Pfizer.", "Who works for Pfizer?", "/trace", "/correct Tia works for BMW."]

    def chat_on(engine):
        out = io.StringIO()
        with TripletStore() as store:
            console = Console(file=out, width=200, color_system=None)
            lines_in = io.StringIO("\n".join(lines))
            run_chat(engine, store, lines_in, console, generation=Generation(max_new_tokens=6), show_calls=True)
            return re.sub(r"[\d.]+ s\b", "_ s", out.getvalue())  # /trace's timings differ, nothing else

    batched = BatchDecoder(tiny_model, smollm2_tokenizer, max_batch_size=4)
    alone = OneAtATime(lambda r: HFBackend(tiny_model, smollm2_tokenizer, relations=r.store.config.relation_names))
    text = chat_on(batched)
    assert text == chat_on(alone) and "status max_tokens, 6 tokens" in text  # the random model runs to its limit
    assert batched.stats["steps"] >= 3 * 6  # both turns and the correction's, 6 tokens each


@pytest.fixture
def store():
    with TripletStore() as s:
        yield s


def test_statements_are_remembered_and_facts_lists_them(store):
    out = chat(store, ["remember Dorothea Altemus / works for / Pfizer", "recall Dorothea Altemus", "/facts"])
    assert "alice> remember Dorothea Altemus / works for / Pfizer\nNoted." in out
    assert "You told me: Pfizer." in out
    replies, table = out.split("1 fact of 'alice'")
    assert "Dorothea Altemus" in table and "employed by" in table and "Pfizer" in table
    assert "MEM_" not in replies  # replies never show the calls
    assert [f.source for f in store.facts("alice")] == ["chat"]  # what the page's source column shows


def test_trace_shows_the_calls_of_the_last_turn(store):
    out = chat(store, ["/trace", "remember Tia Batres / works for / BMW", "recall Tia Batres", "/trace"])
    assert "no turn yet" in out
    last = out.rsplit("/trace", 1)[1]
    assert "status ok" in last and "read" in last and "[MEM_READ{Tia Batres>>>>}:" in last
    assert "found" in last and "Tia Batres>>employed by>>BMW" in last
    assert "MEM_WRITE" not in last  # only the last turn


def test_forget_takes_a_subject_or_a_pattern(store):
    out = chat(
        store,
        [
            "remember Tia Batres / works for / BMW",
            "remember Ivo Renner / lives in / Lyon",
            "remember Ivo Renner / works for / BMW",
            "/forget Tia Batres",
            "/forget >>employed by>>",
            "/forget nobody",
            "/forget a>>b>>c>>d",
            "/facts",
        ],
    )
    assert "forgot 1 fact\n" in out and "forgot 1 fact\n" in out.split("/forget >>")[1]
    assert "forgot 0 facts (the pattern must match exactly" in out
    assert "usage: /forget" in out
    assert [f.triplet for f in store.facts("alice")] == [("Ivo Renner", "lives in", "Lyon")]
    assert [f.ended_by for f in store.history(subject="Tia Batres", namespace="alice")] == ["forgotten"]


def test_user_switches_memory_and_conversation(store):
    out = chat(
        store,
        [
            "remember Tia Batres / works for / BMW",
            "/user bob",
            "/facts",
            "recall Tia Batres",
            "/trace",
            "/user alice",
            "/trace",
            "/user",
        ],
    )
    assert "now talking as 'bob' (0 facts in memory)" in out and "bob> /facts\nno facts in 'bob'" in out
    assert "bob> recall Tia Batres\nYou told me: ." in out
    assert "now talking as 'alice' (1 fact in memory)" in out
    alice_trace = out.split("alice> /trace")[1]
    assert "MEM_WRITE{Tia Batres>>works for>>BMW}" in alice_trace  # alice's own last turn, not bob's
    assert "talking as 'alice'; switch with /user NAME" in out
    assert store.namespaces() == ["alice"]


def test_help_unknown_commands_and_quit(store):
    out = chat(store, ["/help", "/frobnicate", "/quit", "remember never / said / this"])
    assert "/forget PATTERN" in out and "/user NAME" in out
    assert "unknown command /frobnicate" in out
    assert store.facts("alice") == []  # nothing after /quit ran


def test_terms_that_look_like_markup_are_shown_verbatim(store):
    store.write("[bold]Ann[/bold]", "knows", "[red]Bo", namespace="alice")
    out = chat(store, ["/facts"])
    assert "[bold]Ann[/bold]" in out and "[red]Bo" in out


def test_memlm_chat_reads_stdin_with_the_real_model(tiny_model_dir, tmp_path):
    db = tmp_path / "memory.sqlite"
    TripletStore(db).write("Dorothea Altemus", "works for", "Pfizer", namespace="bob")
    commands = "Who works for Pfizer?\n/trace\n/facts\n/user bob\n/facts\n/forget Dorothea Altemus\n/quit\n"
    env = {**os.environ, "MEMLM_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memlm",
            "chat",
            "--model",
            str(tiny_model_dir),
            "--db",
            str(db),
            "generation.max_new_tokens=3",
        ],
        input=commands,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=Path(__file__).parents[3],
    )
    assert r.returncode == 0, r.stderr
    assert "default> Who works for Pfizer?" in r.stdout
    assert "status max_tokens, 3 tokens" in r.stdout  # the random model runs to its token limit
    assert "no facts in 'default'" in r.stdout
    assert "1 fact of 'bob'" in r.stdout and "forgot 1 fact" in r.stdout
    assert TripletStore(db).facts("bob") == []


def test_trace_shows_a_write_the_gate_held_back_and_its_scores(store):
    from memory_runtime.generation.write_gate import WriteGate, WriteGateConfig
    from tests.memory_runtime.generation.test_write_gate import FixedScorer

    gate = WriteGate(WriteGateConfig(signal="call", threshold=0.5), FixedScorer(call=0.2, verify=0.9))
    out = io.StringIO()
    run_chat(
        OneAtATime(lambda _: MemoryEchoBackend(), write_gate=gate),
        store,
        io.StringIO("remember Tia Batres / works for / BMW\n/trace\n/facts"),
        Console(file=out, width=200, color_system=None),
        show_calls=True,
    )
    text = out.getvalue()
    assert "(held back: call score 0.20 < threshold 0.50)" in text
    assert "(scores call 0.20, call_min 0.10)" in text and "no facts in 'default'" in text


def test_memlm_chat_refuses_an_unknown_write_gate_before_loading_anything(tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    db = tmp_path / "m.sqlite"
    r = CliRunner().invoke(
        app, ["chat", "--model", "x", "--db", str(db), "generation.write_gate.signal=vibes"], input="hi\n"
    )
    assert r.exit_code == 2 and "signal" in r.output and not db.exists()


def test_the_quickstarts_chat_shows_on_the_memory_page_with_the_shipped_key(tmp_path):
    """Issue 44: after the quickstart (`memlm chat --db runs/demo.sqlite`, no --user), `memlm ui` on that
    file, signed in with the shipped demo key, showed 0 facts: the chat wrote to one namespace and the key
    opened another. The chat's default namespace and the shipped key's are the same one now, and the
    start-up line says which key opens which namespace."""
    from fastapi.testclient import TestClient

    from memory_runtime.serving.app import create_app
    from memory_runtime.serving.chat import ChatConfig
    from memory_runtime.serving.launch import keys_line
    from memory_runtime.serving.serve_config import ServeConfig

    db = tmp_path / "demo.sqlite"
    with TripletStore(db) as store:
        out = io.StringIO()
        run_chat(
            OneAtATime(lambda _: MemoryEchoBackend()),
            store,
            io.StringIO("remember Dorothea Altemus / employed by / Pfizer\n"),
            Console(file=out, width=200, color_system=None),
            user=ChatConfig().user,  # what `memlm chat` uses without --user
        )
    shipped = ServeConfig.load(Path(__file__).parents[3] / "configs/serve/default.yaml", ["api_keys_env=null"])
    keys = shipped.resolve_api_keys()
    (key,) = keys
    assert keys_line(keys) == f"key {key!r} opens namespace {ChatConfig().user!r}"
    assert keys_line({**keys, "a-secret-key-1": "alice"}).endswith("1 other key opens 'alice'")
    assert "a-secret-key-1" not in keys_line({"a-secret-key-1": "alice", "a-secret-key-2": "bob"})
    assert keys_line({"ops-secret-key": ("ops", "*"), "b-secret-key-1": ("bob", "carol")}) == (
        "2 other keys open 'bob' (and 'carol'), 'ops' and every other namespace"
    )
    shipped.allowed_hosts = ["testserver"]
    with (
        TripletStore(db) as store,
        TestClient(create_app(shipped, store, None, model_name="none", api_keys=keys)) as page,
    ):
        facts = page.get("/v1/memory/facts", headers={"Authorization": f"Bearer {key}"}).json()["data"]
    assert [(f["subject"], f["relation"], f["object"]) for f in facts] == [
        ("Dorothea Altemus", "employed by", "Pfizer")
    ]


def test_a_conversational_memory_hears_each_turn_from_its_speaker_dated_now():
    """With open relations (a model trained on conversations) the turn is the user's message by name, and its
    facts are dated now, "yesterday" in them said as the day it was."""
    from datetime import date, timedelta

    from memory_runtime.generation.backend import ScriptedBackend
    from memory_runtime.memory.dates import format_day
    from memory_runtime.memory.memory_config import MemoryConfig

    backend = ScriptedBackend(["[MEM_WRITE{Caroline>>went to>>pottery class yesterday}] Noted."])
    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        out = io.StringIO()
        console = Console(file=out, width=200, color_system=None)
        lines = io.StringIO("I went to a pottery class yesterday.")
        run_chat(OneAtATime(lambda _: backend), store, lines, console, user="Caroline")
        assert backend.seen[0][-1]["content"] == "Caroline: I went to a pottery class yesterday."
        [fact] = store.facts("Caroline")
    assert fact.object == f"pottery class on {format_day(date.today() - timedelta(days=1))}"


def test_a_proposed_turn_in_chat_stores_what_its_sampled_runs_add(store):
    """generation.propose=2: the chat's turn runs twice (greedy, then a sampled run on an empty memory) and
    stores the sampled run's new write; /trace shows which run proposed it."""
    from memory_runtime.generation.runtime import Generation
    from tests.memory_runtime.serving.test_serve import ProposingBackend

    out = io.StringIO()
    run_chat(
        OneAtATime.over(ProposingBackend),
        store,
        io.StringIO("Cy Park runs Initech and founded Hooli.\n/trace"),
        Console(file=out, width=200, color_system=None),
        generation=Generation(propose=2, write_gate={"score": True}),
    )
    assert {f.triplet for f in store.facts()} == {
        ("Cy Park", "employed by", "Initech"),
        ("Cy Park", "founder of", "Hooli"),
    }
    assert "(proposed by sampled run 1)" in out.getvalue()
