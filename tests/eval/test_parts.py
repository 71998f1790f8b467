"""eval/parts.py: every part is one module listed once (MODULES, eval/__init__.py); the CLI, the config, the
run and the report all take the parts from that list, so a new part needs its module and its line there."""

from __future__ import annotations

import json
import sys
import types
import typing

import pytest

from eval import DEFAULT_PARTS, FULL_PARTS, MODULES, NAMES, parts
from eval.eval_config import EvalConfig
from eval.parts import Part
from eval.run import run_eval
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime


def test_every_listed_module_gives_its_part_and_everything_offers_the_same_names():
    import typer

    from memlm.cli import app

    assert [part.name for part in parts.registered()] == list(NAMES) == list(MODULES)
    assert typing.get_args(typing.get_args(EvalConfig.model_fields["parts"].annotation)[0]) == NAMES
    assert EvalConfig(generation={"model": "x"}).parts == list(DEFAULT_PARTS) == ["records", "episodes"]
    assert list(FULL_PARTS) == [n for n in NAMES if n != "locomo"]
    (option,) = [p for p in typer.main.get_command(app).commands["eval"].params if p.name == "parts"]
    assert (
        option.help == f"Sets parts, comma-separated subset of {','.join(NAMES)} (default: {','.join(DEFAULT_PARTS)})."
    )
    for part in parts.registered():
        assert part.load or parts.get(part.cases_key).load, part.name


def _echo_module() -> types.ModuleType:
    """A part of its own: asks each of three questions and counts the replies that repeat it."""
    module = types.ModuleType("echo_part")

    def evaluate(system, questions, config, memory_config, progress, batch_size):
        from eval.systems import run_sessions
        from memory_runtime.memory.store import TripletStore

        def session(question):
            result = yield system.request(question, TripletStore(":memory:", memory_config))
            return {"question": question, "echoed": question in result.reply}

        return run_sessions(system, (session(q) for q in questions), batch_size, progress)

    module.PART = Part(
        name="echo",
        systems=("memlm",),
        load=lambda config: ["Who is Ann?", "Who is Bob?", "Who is Cy?"],
        evaluate=evaluate,
        summarise=lambda rows, uses_memory: {"asked": len(rows), "echoed": sum(r["echoed"] for r in rows)},
        sample_groups=lambda summary: [("echo questions", summary["asked"])],
        sources=lambda config, questions: {"used": len(questions)},
        source_line=lambda source: f"- echo: {source['used']} built-in questions",
        sections=lambda summary, meta: ["## Echo", "", f"{summary['memlm']['echo']['echoed']} echoed.", ""],
    )
    return module


@pytest.fixture
def echo_registered(monkeypatch):
    monkeypatch.setitem(sys.modules, "echo_part", _echo_module())
    monkeypatch.setitem(MODULES, "echo", "echo_part")
    yield
    parts.get.cache_clear()


def test_a_new_part_is_its_module_and_a_line_in_the_list(echo_registered, tmp_path):
    replies = ScriptedBackend(["Who is Ann? I don't know.", "Nobody.", "Who is Cy?"])
    systems = {"memlm": System("memlm", None, None, decoder=OneAtATime(lambda request: replies))}
    config = EvalConfig(generation={"model": "scripted"}, systems=["memlm"]).model_copy(update={"parts": ["echo"]})
    summary = run_eval(config, tmp_path, systems=systems)

    assert summary == {"memlm": {"echo": {"asked": 3, "echoed": 2}}}
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["meta"]["cases"] == {"echo": 3} and metrics["meta"]["sources"] == {"echo": {"used": 3}}
    report = (tmp_path / "report.md").read_text()
    assert "- echo: 3 built-in questions" in report and "## Echo\n\n2 echoed." in report
    assert "(smallest group: echo questions, 3)" in report
    rows = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert [(r["system"], r["part"], r["echoed"]) for r in rows] == [("memlm", "echo", e) for e in (True, False, True)]
