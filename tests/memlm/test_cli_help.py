"""Every command's --help as a user reads it: one spelling for an output (--out), --config optional everywhere
(a shipped default), override examples of the command's own config that load, and help text shown whole
(rich markup does not eat `memlm[postgres]`)."""

from __future__ import annotations

import re

import click
import pytest
import typer
from typer.testing import CliRunner

from data_gen.data_config import DataConfig
from eval.eval_config import EvalConfig
from learning_loop.sampling import SampleConfig
from learning_loop.self_instruct import SelfInstructConfig
from memlm.cli import app
from memlm.cli.common import find_config
from memory_runtime.serving.chat import ChatConfig
from memory_runtime.serving.serve_config import ServeConfig
from training.train_config import TrainConfig

runner = CliRunner()

# the config class each command reads its overrides into (bench decode/serve/soak: a generation section)
OVERRIDES_READ_BY = {
    "generate": DataConfig,
    "train": TrainConfig,
    "inspect": TrainConfig,
    "bench train": TrainConfig,
    "eval": EvalConfig,
    "bench decode": EvalConfig,
    "serve": ServeConfig,
    "ui": ServeConfig,
    "bench serve": ServeConfig,
    "bench soak": ServeConfig,
    "chat": ChatConfig,
    "self-instruct": SelfInstructConfig,
    "sample": SampleConfig,
}


def _commands(group: click.Command, prefix: str = "") -> dict[str, click.Command]:
    found = {}
    for name, command in group.commands.items():
        full = f"{prefix}{name}"
        if hasattr(command, "commands"):  # a group (typer 0.29: not a click.Group)
            found.update(_commands(command, f"{full} "))
        else:
            found[full] = command
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _override_examples(command: click.Command) -> list[str]:
    (argument,) = [p for p in command.params if p.name == "overrides"]
    shown = re.search(r"e\.g\. (.+)\.$", argument.help or "").group(1)
    return shown.replace("\\[", "[").split()


def test_every_command_with_overrides_is_known_here():
    with_overrides = {name for name, c in COMMANDS.items() if any(p.name == "overrides" for p in c.params)}
    assert with_overrides == set(OVERRIDES_READ_BY)


@pytest.mark.parametrize("name", sorted(OVERRIDES_READ_BY))
def test_each_commands_override_examples_load_with_its_config(name):
    examples = _override_examples(COMMANDS[name])
    assert examples and not any(e == "generation.max_new_tokens=64" for e in examples) or name == "bench decode"
    needs_model = OVERRIDES_READ_BY[name] in (EvalConfig, ServeConfig, ChatConfig)
    default = next((p.default for p in COMMANDS[name].params if p.name == "config"), None)  # the shipped one
    given = [*examples, *(["generation.model=run1"] if needs_model else [])]
    OVERRIDES_READ_BY[name].load(find_config(default, None) if default else None, given)
    shown = runner.invoke(app, [*name.split(), "--help"], terminal_width=200)
    assert shown.exit_code == 0 and all(e in shown.output for e in examples), shown.output


def test_examples_differ_between_commands_that_read_different_configs():
    firsts = {_override_examples(COMMANDS[name])[0] for name in ("generate", "train", "eval", "serve", "chat")}
    assert len(firsts) == 5


def test_every_output_is_spelt_out():
    """Options that name where a command writes: --out, whatever the command (old names kept as aliases)."""
    for name, command in COMMANDS.items():
        for param in command.params:
            if param.param_type_name == "option" and param.name in ("out", "output", "output_dir"):
                assert param.opts[0] == "--out", (name, param.opts)


def test_config_is_optional_on_every_command():
    for name, command in COMMANDS.items():
        for param in command.params:
            if param.param_type_name == "option" and param.opts[0] == "--config":
                assert not param.required, name


@pytest.mark.parametrize("name", ["memory query", "memory facts", "memory write"])
def test_help_text_in_brackets_is_shown_whole(name):
    shown = runner.invoke(app, [*name.split(), "--help"], terminal_width=200)
    assert shown.exit_code == 0 and "memlm[postgres]" in re.sub(r"\s+", "", shown.output), shown.output


def test_no_help_text_loses_a_bracketed_word():
    """rich reads [word] as markup and drops it: every help text's bracketed words reach the screen."""
    for name, command in COMMANDS.items():
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        words = {w.replace("\\[", "[") for text in texts for w in re.findall(r"\S*\[[a-z_,]+\]\S*", text)}
        if not words:
            continue
        shown = re.sub(r"\s+|[│╭╮╰╯─]", "", runner.invoke(app, [*name.split(), "--help"], terminal_width=200).output)
        for word in words:
            assert re.sub(r"\s+", "", word).rstrip(".,;:)") in shown, (name, word)
