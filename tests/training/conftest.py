"""Fixtures for the training tests: small hand-built records and a tiny model on disk."""

from __future__ import annotations

import pytest

from memory_runtime.protocol import render_read, render_results, render_write
from memory_runtime.records import Record, Segment


def _seg(role: str, text: str) -> Segment:
    return Segment(role=role, text=text, train=role == "assistant")


def write_record(i: int, s: str, r: str, o: str) -> Record:
    return Record(
        id=f"w{i}",
        type="write",
        segments=[_seg("user", f"{s} works for {o}."), _seg("assistant", render_write(s, r, o) + " Noted.")],
        gold_triplets=[(s, r, o)],
    )


def read_record(i: int, s: str, r: str, o: str, found: bool = True) -> Record:
    facts = [(s, r, o)] if found else []
    return Record(
        id=f"r{i}",
        type="read" if found else "unanswerable",
        shape="rel_org",
        segments=[
            _seg("user", f"Who works for {o}?"),
            _seg("assistant", render_read(None, r, o)),
            _seg("memory", render_results(facts)),
            _seg("assistant", f" {s} works for {o}." if found else " I don't know."),
        ],
        gold_triplets=facts,
        gold_names=[s] if found else [],
        memory=facts,
    )


PEOPLE = ["Dorothea Altemus", "Tia Batres", "Ansel Quigg", "Maren Oduya", "Lev Petrakis", "Wren Castellanos"]
ORGS = ["Pfizer", "Acme Rockets", "Blue Heron Labs", "Nordwind GmbH", "Okapi Foods", "Tessellate"]


@pytest.fixture(scope="session")
def records() -> list[Record]:
    """Writes and reads (one with NONE), plus the edge cases tokenisation must handle."""
    out = []
    for i, (s, o) in enumerate(zip(PEOPLE, ORGS)):
        out.append(write_record(i, s, "employed by", o))
        out.append(read_record(i, s, "employed by", o, found=i % 3 != 2))
    # results followed by text that would merge with "}]" if tokenised together ("}]." -> "}", "].")
    out.append(
        Record(
            id="merge",
            type="read",
            segments=[
                _seg("user", "Who works for Pfizer?"),
                _seg("assistant", render_read(None, "employed by", "Pfizer")),
                _seg("memory", render_results([("Tia Batres", "employed by", "Pfizer")])),
                _seg("assistant", ". Tia Batres."),
            ],
        )
    )
    # two turns, the first assistant turn given (not trained), the second trained
    out.append(
        Record(
            id="two-turns",
            type="feedback",
            segments=[
                _seg("user", "Ansel Quigg works for Okapi Foods."),
                Segment(role="assistant", text=render_write("Ansel Quigg", "employed by", "Okapi Foods"), train=False),
                _seg("user", "Sorry, I meant Tessellate."),
                _seg("assistant", render_write("Ansel Quigg", "employed by", "Tessellate") + " Fixed."),
            ],
        )
    )
    return out


@pytest.fixture(scope="session")
def tiny_datasets(records, smollm2_tokenizer):
    """Tokenised train/validation datasets of the hand-built records."""
    from datasets import Dataset

    from training.tokenize import tokenize_record

    def build(recs):
        rows = [tokenize_record(r, smollm2_tokenizer) for r in recs]
        return Dataset.from_dict({"input_ids": [r["input_ids"] for r in rows], "labels": [r["labels"] for r in rows]})

    return {"train": build(records), "validation": build(records[:4])}


def tiny_config(model_dir, output_dir, *overrides: str):
    """A training config for the tiny model: fast, no evaluation unless asked."""
    from training.train_config import TrainConfig

    return TrainConfig.load(
        None,
        [
            f"model.name={model_dir}",
            f"output.output_dir={output_dir}",
            "optim.per_device_train_batch_size=4",
            "optim.learning_rate=1e-3",
            "optim.warmup=0",
            "optim.lr_scheduler_type=constant",
            "optim.max_steps=4",
            "output.eval_strategy=no",
            "output.save_strategy=no",
            "output.logging_steps=1",
            "lora.dropout=0",
            "data.synthetic.train=8",
            *overrides,
        ],
    )


# ----------------------------------------------------------------------------- preference data (dpo, kto)


def answered_read(i: int, answer: str, rid: str | None = None) -> Record:
    """A read of prompt i (its own organisation, so each i is its own prompt) whose results the controller
    inserts, then `answer` from the model."""
    s, o = PEOPLE[i % len(PEOPLE)], f"{ORGS[i % len(ORGS)]} {i}"
    return Record(
        id=rid or f"read{i}",
        type="read",
        segments=[
            _seg("user", f"Who works for {o}?"),
            _seg("assistant", render_read(None, "employed by", o)),
            _seg("memory", render_results([(s, "employed by", o)])),
            _seg("assistant", answer),
        ],
    )


def preference_pair(i: int):
    """Prompt i answered from its results (chosen) or not (rejected)."""
    from memory_runtime.records import PreferencePair

    s, o = PEOPLE[i % len(PEOPLE)], f"{ORGS[i % len(ORGS)]} {i}"
    return PreferencePair(
        id=f"p{i}",
        chosen=answered_read(i, f" {s} works for {o}.", f"c{i}"),
        rejected=answered_read(i, " I don't know.", f"r{i}"),
        chosen_score=1.0,
        rejected_score=0.0,
        source="on_policy",
    )


def labelled_turns(i: int) -> list:
    """Both runs of pair i as KTO turns: the right answer desirable, "I don't know." undesirable."""
    from memory_runtime.records import LabelledTurn

    pair = preference_pair(i)
    return [
        LabelledTurn(id=f"good{i}", record=pair.chosen, desirable=True, score=1.0, source="on_policy"),
        LabelledTurn(id=f"bad{i}", record=pair.rejected, desirable=False, score=0.0, source="on_policy"),
    ]


def write_jsonl(path, items) -> None:
    path.write_text("".join(item.model_dump_json() + "\n" for item in items))


@pytest.fixture(scope="session")
def preference_dir(tmp_path_factory):
    """A `memlm sample`-style directory: pairs.jsonl (8 prompts) and turns.jsonl (their 16 runs)."""
    path = tmp_path_factory.mktemp("preference-data")
    write_jsonl(path / "pairs.jsonl", [preference_pair(i) for i in range(8)])
    write_jsonl(path / "turns.jsonl", [turn for i in range(8) for turn in labelled_turns(i)])
    (path / "README.md").write_text("# On-policy samples\n")
    return path


@pytest.fixture(scope="session")
def reference_run(tiny_model_dir, tiny_datasets, tmp_path_factory):
    """A `memlm train` LoRA run of the tiny model (2 SFT steps): what DPO and KTO start from."""
    from training.objectives.sft import train_sft

    out = tmp_path_factory.mktemp("reference-run")
    cfg = tiny_config(tiny_model_dir, out, "optim.max_steps=2", "lora.r=4", "lora.target_modules=[q_proj,v_proj]")
    train_sft(cfg, datasets={"train": tiny_datasets["train"]}, log=lambda s: None)
    return out


def preference_config(model_dir, output_dir, reference, data, objective="dpo", *overrides: str):
    """tiny_config for objective dpo/kto from `reference` on `data` (a directory or a JSONL file)."""
    return tiny_config(
        model_dir,
        output_dir,
        f"objective={objective}",
        f"reference={reference}",
        f"data.path={data}",
        "data.synthetic=null",
        "preference.eval_share=0",
        *overrides,
    )
