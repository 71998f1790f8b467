"""Self-instruct with a scripted model: drafting, augmentation filters, execution through a decoder, kept
records, a round."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from learning_loop.self_instruct import SelfInstructConfig, run_rounds
from learning_loop.self_instruct_execute import run_tasks
from learning_loop.self_instruct_tasks import Task, augment, draft_tasks, load_tasks, rejection
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.generation.runtime import Generation
from memory_runtime.protocol import render_read, render_write
from memory_runtime.records import Record

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs" / "self_instruct"
STATEMENT = Task(
    id="t1",
    type="write",
    gold_triplets=[("Ada Lin", "employed by", "Pfizer"), ("Bo Ek", "employed by", "Pfizer")],
    gold_names=["Ada Lin", "Bo Ek", "Pfizer"],
)
MEMORY = [("Ada Lin", "employed by", "Pfizer"), ("Bo Ek", "employed by", "Pfizer"), ("Cy Do", "investor in", "BMW")]
QUESTION = Task(
    id="t2",
    type="read",
    shape="rel_org",
    gold_triplets=MEMORY[:2],
    gold_names=["Ada Lin", "Bo Ek"],
    reads=[(None, "employed by", "Pfizer")],
    memory=MEMORY,
)


def test_shipped_seed_and_test_tasks_cover_every_shape_and_are_disjoint():
    seeds, tests = load_tasks(CONFIGS / "seed_tasks.jsonl"), load_tasks(CONFIGS / "paraphrase_test.jsonl")
    assert len(seeds) >= 24 and len(tests) >= 40
    for tasks in (seeds, tests):
        assert {t.type for t in tasks} == {"write", "read", "unanswerable", "two_hop"}
        assert {t.shape for t in tasks if t.type == "read"} == {
            "per",
            "per_org",
            "per_rel",
            "org",
            "rel",
            "rel_org",
            "per_rel_org",
        }
    seed_names = {n for t in seeds for n in t.names()}
    test_people = {t[0] for t in tests for t in [*t.memory, *t.gold_triplets]}
    assert not seed_names & test_people  # the held-out test shares no person with the seeds
    SelfInstructConfig.load(CONFIGS / "default.yaml")


def test_draft_tasks_come_with_gold_from_the_world(tmp_path):
    drafts = draft_tasks(REPO / "configs" / "data" / "tiny.yaml", 12, seed=1)
    assert len(drafts) == 12 and {d.type for d in drafts} >= {"write", "read"}
    for d in drafts:
        assert d.text == "" and d.required_names() is not None
        assert d.spec().startswith("state: " if d.type == "write" else "ask: ")
        if d.type == "read":
            assert d.gold_triplets and set(map(tuple, d.gold_triplets)) <= set(map(tuple, d.memory))


def test_rejection_filters_generations():
    seen = {"ada lin and bo ek work for pfizer"}
    assert rejection(STATEMENT, "Pfizer took on Ada Lin and Bo Ek.", seen) is None
    assert rejection(STATEMENT, "Pfizer took on Ada Lin.", seen) == "missing name"
    assert rejection(STATEMENT, "Ada Lin and Bo Ek work for Pfizer.", seen) == "copy of an example"
    assert rejection(STATEMENT, "Do Ada Lin and Bo Ek work for Pfizer?", seen) == "not a statement"
    assert rejection(QUESTION, "Who is on the staff at Pfizer?", seen) is None
    assert rejection(QUESTION, "Pfizer staff.", seen) == "not a question"
    assert rejection(QUESTION, "Does Ada Lin work at Pfizer?", seen) == "gives the answer away"
    assert rejection(QUESTION, "", seen) == "empty"


def test_augment_with_a_scripted_backend_keeps_only_valid_generations():
    seeds = load_tasks(CONFIGS / "seed_tasks.jsonl")
    backend = ScriptedBackend(
        [
            "Sentence: Pfizer took on Ada Lin and Bo Ek.\nSpec: ...",
            "Pfizer took on Ada Lin.",
            "Who is on the staff at Pfizer?",
        ]
    )
    drafts = [STATEMENT, STATEMENT.model_copy(update={"id": "t3"}), QUESTION]
    tasks, log = augment(drafts, seeds, backend, demos=3, rng=random.Random(0))
    assert [t.text for t in tasks] == ["Pfizer took on Ada Lin and Bo Ek.", "Who is on the staff at Pfizer?"]
    assert [row["rejected"] for row in log] == [None, "missing name", None]
    prompt = backend.seen[0]  # seed examples of the same type as chat turns, then the draft's spec
    assert [m["role"] for m in prompt] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert all(m["content"].startswith("Spec: state:") for m in prompt if m["role"] == "user")
    assert prompt[-1]["content"] == "Spec: state: Ada Lin >> employed by >> Pfizer; Bo Ek >> employed by >> Pfizer"


def test_run_tasks_keeps_reward_one_trajectories_as_records():
    statement = STATEMENT.model_copy(update={"text": "Pfizer took on Ada Lin and Bo Ek."})
    question = QUESTION.model_copy(update={"text": "Who is on the staff at Pfizer?"})
    writes = render_write("Ada Lin", "employed by", "Pfizer") + " " + render_write("Bo Ek", "employed by", "Pfizer")
    backend = ScriptedBackend(
        [
            writes + " Noted.",
            [render_read(None, "employed by", "Pfizer"), " Ada Lin and Bo Ek are employed by Pfizer."],
            render_write("Ada Lin", "employed by", "Pfizer") + " Noted.",  # partial: dropped
            [render_read(None, "employed by", "Pfizer"), " Ada Lin is employed by Pfizer."],  # wrong: dropped
        ]
    )
    kept, log = run_tasks([statement, question, statement, question], OneAtATime(lambda _: backend), Generation())
    assert [r["exact"] for r in log] == [1, 1, 0, 0]
    assert [r["reason"] for r in log][2:] == ["partial writes", "wrong answer"]
    read = kept[1]
    assert (
        isinstance(read, Record) and read.type == "read" and read.shape == "rel_org" and read.source == "self_instruct"
    )
    assert [(s.role, s.train) for s in read.segments] == [
        ("user", False),
        ("assistant", True),
        ("memory", False),
        ("assistant", True),
    ]
    assert read.segments[2].text == " {Ada Lin>>employed by>>Pfizer}; {Bo Ek>>employed by>>Pfizer}]"
    Record.model_validate_json(read.model_dump_json())


def test_a_round_logs_counts_and_trains_on_the_kept_trajectories(tmp_path, monkeypatch):
    """The loop end to end with a scripted model and a recording trainer (no real model)."""
    config = SelfInstructConfig.load(CONFIGS / "default.yaml")
    config.tasks_per_round, config.test_tasks = 3, None
    seen_configs = []

    class Echo(ScriptedBackend):
        """Augmentation: 'X and Y work for O.'-ish sentences built from the prompt's spec; execution: writes."""

        def __init__(self):
            super().__init__([])

        def start(self, messages):
            text = messages[-1]["content"]
            if "Spec:" in text:
                spec = text.rsplit("Spec: ", 1)[1]
                self._answer = f"Sentence: {spec.replace('>>', '')}." if spec.startswith("state:") else "Who?"
            else:
                self._answer = "Nothing to store."
            self._turns = [[self._answer]]
            super().start(messages)

    config.generation.model = "scripted"
    rows = run_rounds(
        config,
        tmp_path,
        log=lambda line: None,
        backend_for=lambda m: Echo(),
        engine_for=lambda m: OneAtATime(lambda _: Echo()),
        train_fn=seen_configs.append,
    )
    assert len(rows) == 1 and rows[0]["drafts"] == 3 and rows[0]["kept"] == 0
    assert json.loads((tmp_path / "rounds.jsonl").read_text())["kept_ratio"] == rows[0]["kept_ratio"]
    assert SelfInstructConfig.load(tmp_path / "self_instruct_config.yaml") == config  # the resolved config, kept
    train = seen_configs[0]
    assert train.data.path.endswith("templates") and train.data.extra_jsonl == []
    assert train.output.output_dir == str(tmp_path / "round-1" / "adapter") and train.optim.max_steps == 60


def test_rounds_continue_the_current_adapter(tmp_path):
    """Round 1 trains on from a trained --model, round 2 from round 1's adapter (same base)."""
    config = SelfInstructConfig.load(CONFIGS / "default.yaml")
    config.tasks_per_round, config.test_tasks, config.rounds, config.real_limit = 2, None, 2, None
    start = tmp_path / "trained"
    start.mkdir()
    (start / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": "embedded:SmolLM2-135M-Instruct"})
    )
    seen = []

    def record_and_save(train_config):
        seen.append(train_config)
        out = Path(train_config.output.output_dir)
        out.mkdir(parents=True)
        (out / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": train_config.model.name}))

    backend = ScriptedBackend([["Nothing to store."]] * 50)
    config.generation.model = str(start)
    run_rounds(
        config,
        tmp_path / "out",
        log=lambda line: None,
        backend_for=lambda m: backend,
        engine_for=lambda m: OneAtATime(lambda _: backend),
        train_fn=record_and_save,
    )
    assert [c.lora.init_from for c in seen] == [str(start.resolve()), str(tmp_path / "out" / "round-1" / "adapter")]
    assert {c.model.name for c in seen} == {"embedded:SmolLM2-135M-Instruct"}
    config.continue_adapter = False
    seen.clear()
    run_rounds(
        config,
        tmp_path / "fresh",
        log=lambda line: None,
        backend_for=lambda m: backend,
        engine_for=lambda m: OneAtATime(lambda _: backend),
        train_fn=record_and_save,
    )
    assert [c.lora.init_from for c in seen] == [None, None]


def test_rounds_measure_the_real_text_probe_before_and_after(tmp_path):
    config = SelfInstructConfig.load(CONFIGS / "default.yaml")
    config.tasks_per_round, config.test_tasks, config.real_limit = 2, None, 5
    real = tmp_path / "real.jsonl"
    real.write_text(
        "".join(
            json.dumps(row) + "\n"
            for row in [
                {
                    "text": "Ann Lee works for Pfizer.",
                    "annotated": ["EMPLOYEE_OR_MEMBER_OF"],
                    "triples": [{"person": "Ann Lee", "relation": "employee or member of", "organization": "Pfizer"}],
                },
                {"text": "The weather was fine.", "annotated": ["EMPLOYEE_OR_MEMBER_OF"], "triples": []},
            ]
        )
    )
    config.real = str(real)
    writes = ScriptedBackend([["[MEM_WRITE{Ann Lee>>employed by>>Pfizer}] Noted."]] * 50)
    config.generation.model = "scripted"
    rows = run_rounds(
        config,
        tmp_path / "out",
        log=lambda line: None,
        backend_for=lambda m: writes,
        engine_for=lambda m: OneAtATime(lambda _: writes),
        train_fn=lambda c: None,
    )
    for key in ("real_before", "real_after"):
        assert rows[0][key]["passages"] == 2 and rows[0][key]["pair_recall"] == 1.0
        assert rows[0][key]["pair_precision"] == 0.5  # the same write on the passage that states nothing
        assert rows[0][key]["false_write_rate"] == 1.0  # it wrote for the passage that states nothing


def test_rounds_run_every_task_against_the_configured_memory(tmp_path, monkeypatch):
    from learning_loop import self_instruct

    memory = tmp_path / "memory.yaml"
    memory.write_text("fuzzy: {threshold: 0.9}\n")
    overrides = [f"generation.memory_config={memory}", "tasks_per_round=2", "test_tasks=null", "real_limit=null"]
    config = SelfInstructConfig.load(CONFIGS / "default.yaml", [*overrides, "generation.model=scripted"])
    seen = []
    run_tasks = self_instruct.run_tasks

    def spy(tasks, decoder, generation, memory_config=None, **prompt):
        seen.append(memory_config)
        return run_tasks(tasks, decoder, generation, memory_config, **prompt)

    monkeypatch.setattr(self_instruct, "run_tasks", spy)
    backend = ScriptedBackend([["Nothing to store."]] * 50)
    run_rounds(
        config,
        tmp_path / "out",
        log=lambda line: None,
        backend_for=lambda m: backend,
        engine_for=lambda m: OneAtATime(lambda _: backend),
        train_fn=lambda c: None,
    )
    assert seen and all(m.fuzzy.threshold == 0.9 for m in seen)


def test_cli_names_a_bad_config_field(tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    bad = tmp_path / "si.yaml"
    bad.write_text("rounds: 0\ntask_per_round: 3\n")
    result = CliRunner().invoke(app, ["self-instruct", "--config", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "rounds" in result.output and "task_per_round" in result.output


@pytest.mark.slow
def test_one_real_round_with_the_embedded_model(tmp_path):
    """Augment, execute, reward and a 1-step training run with the real embedded default model."""
    from memory_runtime.models.embedded import EMBEDDED_MODEL

    config = SelfInstructConfig.load(CONFIGS / "default.yaml")
    config.tasks_per_round, config.test_tasks, config.augment_max_new_tokens, config.real_limit = 3, None, 24, 1
    config.generation.max_new_tokens, config.generation.model = 24, EMBEDDED_MODEL
    config.train.overrides = [*config.train.overrides, "optim.max_steps=1", "data.max_train_records=8"]
    rows = run_rounds(config, tmp_path, log=lambda line: None)
    assert rows[0]["drafts"] == 3 and 0 <= rows[0]["kept"] <= rows[0]["generated"] <= 3
    assert len((tmp_path / "round-1" / "augment.jsonl").read_text().splitlines()) == 3
    assert (tmp_path / "round-1" / "adapter" / "adapter_config.json").exists()
    assert rows[0]["real_before"]["passages"] == rows[0]["real_after"]["passages"] == 2


def test_spread_takes_every_kind():
    from learning_loop.self_instruct import spread

    tests = load_tasks(CONFIGS / "paraphrase_test.jsonl")
    assert {t.type for t in spread(tests, 12)} == {"write", "read", "unanswerable", "two_hop"}
    assert spread(tests, None) == tests and spread(tests[:3], 5) == tests[:3]


def test_clean_generation_takes_the_sentence_not_an_echoed_spec():
    from learning_loop.self_instruct_tasks import clean_generation

    assert clean_generation("Spec: ask: X >> ?\nSentence: Remind me of X.\n\nSpec: ...") == "Remind me of X."
    assert clean_generation("Spec: state: X >> founder of Y\n\nSpec: state: Z") == ""
    assert clean_generation('  "Who runs Pfizer?"\nmore') == "Who runs Pfizer?"
    assert rejection(STATEMENT, "Ada Lin >> Bo Ek >> Pfizer", set()) == "not a plain sentence"


def test_config_overrides_and_bad_fields(tmp_path):
    config = SelfInstructConfig.load(CONFIGS / "default.yaml", ["rounds=3", "train.overrides=[optim.max_steps=5]"])
    assert config.rounds == 3 and config.train.overrides == ["optim.max_steps=5"]
    with pytest.raises(ValueError, match=r"invalid self-instruct config .*\n  round: unknown field"):
        SelfInstructConfig.load(CONFIGS / "default.yaml", ["round=3"])
    with pytest.raises(ValueError, match="rounds"):
        SelfInstructConfig.load(CONFIGS / "default.yaml", ["rounds=0"])
