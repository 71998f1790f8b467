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
    from training.config import TrainConfig

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
