"""On-policy sampling: prompts (never dev text), runs scored by the reward, pairs and labels, the files."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from data_gen.real_records import dev_texts, normalise_text
from data_gen.schema import Schema
from learning_loop.sampling import (
    Prompt,
    SampleConfig,
    gold_statements,
    load_prompts,
    preferences,
    run_prompts,
    sample_preferences,
)
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.jsonl import read_models
from memory_runtime.memory.memory_config import RELATION_TABLE_FILE
from memory_runtime.protocol import render_read, render_write
from memory_runtime.records import LabelledTurn, PreferencePair, Record, Segment
from memory_runtime.yaml_config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FACT = ("Ada Lin", "employed by", "Pfizer")
WRITE = render_write(*FACT) + " Noted."


def record(rid: str, type_: str, user: str, assistant: list[tuple[str, str]], **kw) -> Record:
    segments = [Segment(role="user", text=user, train=False)]
    segments += [Segment(role=role, text=text, train=role == "assistant") for role, text in assistant]
    return Record(id=rid, type=type_, segments=segments, source="synthetic", **kw)


STATEMENT = record(
    "st", "write", "Ada Lin works for Pfizer.", [("assistant", WRITE)], gold_triplets=[FACT], gold_names=["Ada Lin"]
)
NEGATIVE = record("neg", "negative", "Ada Lin likes tea.", [("assistant", "Nothing to store.")])
QUESTION = record(
    "q",
    "read",
    "Who works for Pfizer?",
    [
        ("assistant", render_read(None, "employed by", "Pfizer")),
        ("memory", " {Ada Lin>>employed by>>Pfizer}]"),
        ("assistant", " Ada Lin."),
    ],
    gold_triplets=[FACT],
    gold_names=["Ada Lin"],
    memory=[FACT],
)
HARD = record(
    "hard",
    "write",
    "Bo Ek joined Pfizer.",
    [("assistant", render_write("Bo Ek", "employed by", "Pfizer") + " Noted.")],
    gold_triplets=[("Bo Ek", "employed by", "Pfizer")],
)


def config(**kw) -> SampleConfig:
    return SampleConfig.load(ROOT / "configs/sample/default.yaml", [f"{k}={v}" for k, v in kw.items()])


def run_scripted(prompts: list[Prompt], turns: list, cfg: SampleConfig):
    backend = ScriptedBackend(turns)
    return run_prompts(prompts, OneAtATime(lambda request: backend), cfg), backend


def test_no_dev_passage_is_ever_a_prompt(tmp_path):
    """The shipped real training files, sampled as the default config does, hold no dev passage; a dev
    passage slipped into a training file is left out and counted."""
    dev = dev_texts()
    prompts, sources = load_prompts(config(**{"generation.model": "x"}))
    assert prompts and all(s["left_out_dev"] == 0 for s in sources.values())
    texts = [normalise_text(p.user_text) for p in prompts]
    assert not [t for t in texts if any(d in t or t in d for d in dev)]
    dev_line = (ROOT / "data/real/knowledgenet_person_org_dev.jsonl").read_text().splitlines()[0]
    train_lines = (ROOT / "data/real_train/knowledgenet_person_org_train.jsonl").read_text().splitlines()[:5]
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text("\n".join([*train_lines, dev_line]) + "\n")
    cfg = config(**{"generation.model": "x"})
    cfg.prompts.real = [type(cfg.prompts.real[0])(path=str(leaky))]
    prompts, sources = load_prompts(cfg)
    assert sources["leaky.jsonl"] == {"prompts": 5, "left_out_dev": 1}
    assert normalise_text(json.loads(dev_line)["text"]) not in {normalise_text(p.user_text) for p in prompts}


def test_redocred_no_fact_sentences_are_not_prompts_by_default():
    prompts, _ = load_prompts(config(**{"generation.model": "x"}))
    redocred = [p for p in prompts if "redocred" in p.record.id]
    assert redocred and all(p.record.gold_triplets for p in redocred)
    assert any(not p.record.gold_triplets for p in prompts if "knowledgenet" in p.record.id)


def test_runs_are_scored_and_ranked_into_pairs_and_labels():
    cfg = config(samples_per_prompt=3)
    prompts = [Prompt(STATEMENT, "statement"), Prompt(NEGATIVE, "statement"), Prompt(QUESTION, "question")]
    turns = [
        WRITE,  # exact: 1
        "Nothing to store.",  # missed the fact: 0
        WRITE,  # the same text again: one distinct run
        "Nothing to store.",  # right: 1
        render_write("Ada Lin", "employed by", "Pfizer") + " Noted.",  # a false write: -1
        "Nothing to store.",
        [render_read(None, "employed by", "Pfizer"), " Ada Lin."],  # exact
        [render_read(None, "employed by", "Pfizer"), " I don't know."],  # retrieved, wrong answer: 0.5
        ["Ada Lin."],  # no read, right names: 0.5
    ]
    runs, backend = run_scripted(prompts, turns, cfg)
    assert [r.score.value for r in runs] == [1.0, 0.0, 1.0, 1.0, -1.0, 1.0, 1.0, 0.5, 0.5]
    assert backend.seen[6][-1]["content"] == "Who works for Pfizer?"
    pairs, labelled = preferences(runs, cfg)
    by_id = {p.id: p for p in pairs}
    assert set(by_id) == {"st", "neg", "q"}
    assert (by_id["q"].chosen_score, by_id["q"].rejected_score) == (1.0, 0.5)  # exact against the unread guess
    assert by_id["neg"].chosen_score == 1.0 and by_id["neg"].rejected_score == -1.0 and by_id["neg"].margin == 2.0
    assert "MEM_WRITE" in by_id["neg"].rejected.segments[1].text and by_id["neg"].source == "on_policy"
    # labels: distinct runs at >= 0.75 desirable, <= 0.25 undesirable, 0.5 left out
    assert sorted((t.id, t.desirable) for t in labelled) == [
        ("neg-s0", True),
        ("neg-s1", False),
        ("q-s0", True),
        ("st-s0", True),
        ("st-s1", False),
    ]
    question = [t for t in labelled if t.id == "q-s0"][0].record
    assert [s.role for s in question.segments] == ["user", "assistant", "memory", "assistant"]  # results untrained
    for pair in pairs:  # they are what DPO reads
        PreferencePair.model_validate_json(pair.model_dump_json())


def test_the_gold_turn_is_chosen_when_no_run_is_exact():
    cfg = config(samples_per_prompt=2)
    runs, _ = run_scripted([Prompt(HARD, "statement")], ["Nothing to store.", "Nothing to store."], cfg)
    pairs, labelled = preferences(runs, cfg)
    assert len(pairs) == 1 and pairs[0].source == "on_policy+gold"
    assert pairs[0].chosen.segments == HARD.segments and pairs[0].rejected.segments[1].text == "Nothing to store."
    assert ("hard-gold", True) in {(t.id, t.desirable) for t in labelled}
    off = config(samples_per_prompt=2, gold_when_no_exact_run="false")
    runs, _ = run_scripted([Prompt(HARD, "statement")], ["Nothing to store.", "Nothing to store."], off)
    assert preferences(runs, off)[0] == []  # two identical misses: nothing to prefer


def test_sample_writes_its_files_and_card_and_never_overwrites(tmp_path):
    data = tmp_path / "data" / "jsonl"
    data.mkdir(parents=True)
    (data / "train.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in (STATEMENT, NEGATIVE, QUESTION)))
    cfg = config(
        samples_per_prompt=2,
        **{"generation.model": "run", "prompts.data": str(tmp_path / "data"), "prompts.real": "[]"},
    )
    answers = {
        STATEMENT.segments[0].text: [WRITE, "Nothing to store."],  # a pair
        NEGATIVE.segments[0].text: ["Nothing to store."] * 2,  # all alike: none
        QUESTION.segments[0].text: [["Ada Lin."], [""]],  # an empty run: no record, never a pair
    }

    class ByPrompt(ScriptedBackend):  # the data's prompts come in a seeded order: answer each by its text
        def start(self, messages):
            turn = answers[messages[-1]["content"]].pop(0)
            self._turns = [[turn] if isinstance(turn, str) else turn]
            super().start(messages)

    backend = ByPrompt([])
    runtime = SimpleNamespace(
        decoder=OneAtATime(lambda request: backend), memory=None, system_prompt=None, describe=lambda: "scripted"
    )
    out = tmp_path / "out"
    summary = sample_preferences(cfg, out, log=lambda line: None, runtime=runtime)
    assert summary["runs"]["all"]["runs"] == 6 and summary["pairs"] == 2  # st, and q against its gold turn
    assert {p.name for p in out.iterdir()} == {
        "pairs.jsonl",
        "turns.jsonl",
        "samples.jsonl",
        "README.md",
        "summary.json",
        "sample_config.yaml",
        "verifier.jsonl",  # the write verifier's examples
        "relations.yaml",  # the writer's relation table, kept with them
    }
    pairs = {p.id: p.source for p in read_models(out / "pairs.jsonl", PreferencePair, "a pair")}
    assert pairs == {"st": "on_policy", "q": "on_policy+gold"}
    assert read_models(out / "turns.jsonl", LabelledTurn, "a turn")
    assert "`pairs.jsonl` | 2 PreferencePair" in (out / "README.md").read_text()
    before = (out / "pairs.jsonl").read_text()
    with pytest.raises(FileExistsError, match="is not empty"):
        sample_preferences(cfg, out, log=lambda line: None, runtime=runtime)
    assert (out / "pairs.jsonl").read_text() == before


def test_verifier_statements_are_generated_records_that_state_facts_and_are_no_prompt(tmp_path):
    """`verifier_statements`: statements, passages and updates of the train split with gold facts, never a
    prompt (those are run and judged already), never a negative or a question; their examples join without runs."""
    update = record(
        "up",
        "update",
        "Ada Lin quit Pfizer and joined Acme.",
        [("assistant", render_write("Ada Lin", "employed by", "Acme") + " Noted."), ("user", "Where?")],
        gold_triplets=[("Ada Lin", "employed by", "Acme")],
        memory=[FACT],
    )
    data = tmp_path / "data" / "jsonl"
    data.mkdir(parents=True)
    (data / "train.jsonl").write_text(
        "".join(r.model_dump_json() + "\n" for r in (STATEMENT, NEGATIVE, QUESTION, HARD, update))
    )
    cfg = config(verifier_statements=10, **{"prompts.data": str(tmp_path / "data")})
    chosen = gold_statements(cfg, [Prompt(STATEMENT, "statement")])
    assert sorted(r.id for r in chosen) == ["hard", "up"]
    assert [
        r.id for r in gold_statements(config(verifier_statements=1, **{"prompts.data": str(tmp_path / "data")}), [])
    ] in (["st"], ["hard"], ["up"])
    assert gold_statements(config(**{"prompts.data": str(tmp_path / "data")}), []) == []  # 0: none, file unread
    with pytest.raises(ConfigError, match="verifier_statements"):
        config(verifier_statements=5)  # no prompts.data to draw them from
    with pytest.raises(ConfigError, match="verifier_statements"):
        config(verifier_statements=-1, **{"prompts.data": str(tmp_path / "data")})
    with pytest.raises(FileNotFoundError, match="prompts.data: .*does not exist"):
        gold_statements(config(verifier_statements=5, **{"prompts.data": str(tmp_path / "none")}), [])


def test_real_text_of_another_schema_is_refused_before_the_writer_loads(tmp_path):
    """A writer of people-places-things sampled on the default (person-organisation) real files would teach
    its verifier facts it can never write: one line names the file and relations, before any model loads;
    the writer's own schema's training sentences are taken."""
    writer = tmp_path / "writer"
    writer.mkdir()
    schema = Schema.load(ROOT / "configs/schema/people-places-things.yaml")
    (writer / RELATION_TABLE_FILE).write_text(yaml.safe_dump({"relations": schema.table()}))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"knowledgenet_person_org_train.jsonl states facts in relations the writer"):
        sample_preferences(config(**{"generation.model": str(writer)}), out, log=lambda line: None)
    assert not out.exists()
    own = ROOT / "data/real_train/redocred_train_people_places_things.jsonl"
    cfg = config(**{"generation.model": str(writer), "prompts.real": f"[{{path: {own}, negatives: false}}]"})
    prompts, sources = load_prompts(cfg, memory=cfg.generation.memory())
    assert prompts and sources[own.name]["prompts"] == len(prompts)


def test_bad_configs_are_refused_with_the_field_named():
    with pytest.raises(ConfigError, match="temperature above 0"):
        config(**{"generation.temperature": 0})
    with pytest.raises(ConfigError, match="undesirable"):
        config(desirable=0.2, undesirable=0.5)
    with pytest.raises(ValueError, match="generation.model"):
        sample_preferences(config(), Path("/nonexistent/out"), log=lambda line: None)
