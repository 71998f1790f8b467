"""Objective verifier: a classifier run on VerifierExample lines, its threshold chosen on held-out passages,
a card a gate can read, and a model that loads and scores; settings of other objectives refused."""

import json

import pytest

from memory_runtime.yaml_config import ConfigError
from tests.training.conftest import tiny_config


def examples_file(tmp_path, n_passages=12):
    rows = []
    for i in range(n_passages):
        text = f"Person {i} works for Company {i}. The weather was fine."
        for j, (triplet, holds) in enumerate(
            [
                ((f"Person {i}", "employed by", f"Company {i}"), True),
                ((f"Person {i}", "CEO of", f"Company {i}"), False),
                ((f"Person {i}", "employed by", f"Company {i + 1}"), False),
            ]
        ):
            origin = ("gold", "swap", "writer")[j]
            rows.append(
                {
                    "id": f"p{i}-{j}",
                    "passage_id": f"p{i}",
                    "text": text,
                    "triplet": list(triplet),
                    "holds": holds,
                    "origin": origin,
                    "source": "synthetic",
                }
            )
    path = tmp_path / "verifier.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_verifier_run_leaves_a_card_and_a_model_that_scores(tiny_model_dir, tmp_path):
    from learning_loop.train import train
    from memory_runtime.generation.verifier import Verifier, read_card

    data = examples_file(tmp_path)
    config = tiny_config(
        tiny_model_dir,
        tmp_path / "run",
        "objective=verifier",
        f"data.path={data}",
        "data.synthetic=null",
        "packing.mode=none",
        "verifier.held_out=0.34",
        "optim.max_steps=3",
    )
    result = train(config, log=lambda line: None)
    card = read_card(result.output_dir)
    assert card.base == str(tiny_model_dir) and "employed by" in card.relations and 0 <= card.threshold <= 1
    figures = result.metrics["verifier"]
    assert figures["held_out_all"] > 0 and figures["auc_all"] is not None
    verifier = Verifier.load(result.output_dir, dtype="float32")
    scores = verifier.score("Person 1 works for Company 1.", [("Person 1", "employed by", "Company 1")] * 3)
    assert len(scores) == 3 and all(0 < s < 1 for s in scores) and len(set(scores)) == 1
    # a batch is padded (to a multiple of 64 tokens): each candidate scores as it does alone
    mixed = [("Person 1", "employed by", "Company 1"), ("A much longer name of a person", "CEO of", "Company 2")]
    together = verifier.score("Person 1 works for Company 1.", mixed)
    alone = [verifier.score("Person 1 works for Company 1.", [t])[0] for t in mixed]
    assert together == pytest.approx(alone, abs=1e-5)
    assert "write verifier" in (result.output_dir / "README.md").read_text()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("reference=runs/x", "reference: not with objective verifier"),
        ("packing.mode=padding_free", "packing.mode: not with objective verifier"),
        ("method=full", "method: not with objective verifier"),
    ],
)
def test_settings_a_verifier_cannot_take_are_refused(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config("m", tmp_path, "objective=verifier", "data.synthetic=null", "packing.mode=none", override)


def test_verifier_settings_need_objective_verifier(tmp_path):
    with pytest.raises(ConfigError, match="verifier: settings of objective verifier; objective is sft"):
        tiny_config("m", tmp_path, "verifier.held_out=0.3")
