"""Preference data (training/data.py): PreferencePair and LabelledTurn JSONL read, split and tokenised so the
loss is on exactly what the model generated."""

from __future__ import annotations

import json

import pytest

from memory_runtime.protocol import render_results
from tests.training.conftest import labelled_turns, preference_config, preference_pair, write_jsonl
from training.data import (
    build_preference_datasets,
    preference_token_stats,
    read_preference_items,
    split_preference_items,
    tokenize_labelled_turn,
    tokenize_pair,
)
from training.tokenize import tokenize_record, trained_text


def _decode(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _config(tmp_path, data, objective="dpo", *overrides):
    return preference_config("embedded:SmolLM2-135M-Instruct", tmp_path / "out", tmp_path, data, objective, *overrides)


def test_a_pair_shares_its_prompt_and_trains_only_what_the_model_generated(smollm2_tokenizer):
    pair = preference_pair(1)
    enc = tokenize_pair(pair, smollm2_tokenizer, system_prompt="You have a memory.")
    for side in ("chosen", "rejected"):
        record = getattr(pair, side)
        ids, mask = enc[f"{side}_ids"], enc[f"{side}_mask"]
        # exactly the token stream SFT trains on, cut at the first trained token
        sft = tokenize_record(record, smollm2_tokenizer, system_prompt="You have a memory.")
        assert enc["prompt_ids"] + ids == sft["input_ids"]
        assert [int(x != -100) for x in sft["labels"][len(enc["prompt_ids"]) :]] == mask
        assert mask[0] == 1 and len(mask) == len(ids)
        trained = _decode(smollm2_tokenizer, [t for t, m in zip(ids, mask) if m])
        untrained = _decode(smollm2_tokenizer, [t for t, m in zip(ids, mask) if not m])
        assert trained == trained_text(record, smollm2_tokenizer, system_prompt="You have a memory.")
        results = render_results([("Tia Batres", "employed by", "Acme Rockets 1")])
        assert results in untrained and results not in trained  # the inserted read results: no loss
        assert trained.startswith("[MEM_READ{>>employed by>>Acme Rockets 1}:") and trained.endswith("<|im_end|>")
    prompt = _decode(smollm2_tokenizer, enc["prompt_ids"])
    assert prompt.endswith("Who works for Acme Rockets 1?<|im_end|>\n<|im_start|>assistant\n")
    assert "I don't know." in _decode(smollm2_tokenizer, enc["rejected_ids"])


def test_a_labelled_turn_keeps_its_label_and_mask(smollm2_tokenizer):
    good, bad = labelled_turns(2)
    for turn in (good, bad):
        enc = tokenize_labelled_turn(turn, smollm2_tokenizer, system_prompt=None)
        assert enc["label"] is turn.desirable
        sft = tokenize_record(turn.record, smollm2_tokenizer, system_prompt=None)
        assert enc["prompt_ids"] + enc["completion_ids"] == sft["input_ids"]
        assert sum(enc["completion_mask"]) == sum(x != -100 for x in sft["labels"])


def test_pairs_and_turns_come_from_a_sample_directory_or_files(preference_dir, tmp_path):
    assert [p.id for p in read_preference_items(_config(tmp_path, preference_dir))] == [f"p{i}" for i in range(8)]
    turns = read_preference_items(_config(tmp_path, preference_dir, "kto"))
    assert len(turns) == 16 and {t.desirable for t in turns} == {True, False}
    extra = tmp_path / "accepted.jsonl"
    write_jsonl(extra, [preference_pair(9)])
    items = read_preference_items(
        _config(tmp_path, preference_dir / "pairs.jsonl", "dpo", f"data.extra_jsonl=[{extra}]")
    )
    assert [p.id for p in items][-2:] == ["p7", "p9"]


def _pair_json(i: int, **change) -> str:
    row = json.loads(preference_pair(i).model_dump_json())
    row.update(change)
    return json.dumps(row)


@pytest.mark.parametrize(
    "lines, message",
    [
        (["{not json"], r"pairs.jsonl:2: not a PreferencePair \(DPO's format\): .*[Ii]nvalid JSON"),
        (
            [_pair_json(3, rejected=json.loads(preference_pair(3).model_dump_json())["chosen"])],
            "pairs.jsonl:2: .*pair p3: chosen is the same turn as rejected",
        ),
        (
            [
                _pair_json(
                    3,
                    chosen={
                        **json.loads(preference_pair(3).model_dump_json())["chosen"],
                        "segments": [
                            {"role": "user", "text": "Who works for Okapi Foods 3?", "train": False},
                            {"role": "assistant", "text": "  ", "train": True},
                        ],
                    },
                )
            ],
            "pairs.jsonl:2: .*pair p3: chosen: the model's turn is empty",
        ),
    ],
)
def test_preference_data_that_does_not_parse_names_file_and_line(tmp_path, lines, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(preference_pair(0).model_dump_json() + "\n" + "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=message):
        read_preference_items(_config(tmp_path, path))


def test_the_other_objectives_data_is_refused(preference_dir, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"turns.jsonl:1: a LabelledTurn \(KTO's format\), but objective dpo reads "
        r"PreferencePair lines: set objective=kto",
    ):
        read_preference_items(_config(tmp_path, preference_dir / "turns.jsonl"))
    with pytest.raises(ValueError, match=r"pairs.jsonl:1: a PreferencePair \(DPO's format\), but objective kto"):
        read_preference_items(_config(tmp_path, preference_dir / "pairs.jsonl", "kto"))
    only_turns = tmp_path / "sample"
    only_turns.mkdir()
    (only_turns / "turns.jsonl").write_text((preference_dir / "turns.jsonl").read_text())
    with pytest.raises(
        ValueError,
        match=r"has no pairs.jsonl, which objective dpo reads \(it holds turns.jsonl: "
        r"objective=kto reads that\)",
    ):
        read_preference_items(_config(tmp_path, only_turns))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="no PreferencePair in"):
        read_preference_items(_config(tmp_path, tmp_path / "empty.jsonl"))


def test_the_held_out_share_is_seeded_and_keeps_a_prompts_runs_together(preference_dir, tmp_path):
    config = _config(tmp_path, preference_dir, "kto", "preference.eval_share=0.25")
    turns = read_preference_items(config)
    train, held = split_preference_items(turns, config)
    assert len(held) == 4 and len(train) == 12  # 2 of the 8 prompts, both runs of each
    prompts = lambda items: {t.record.segments[0].text for t in items}  # noqa: E731
    assert not prompts(train) & prompts(held) and len(prompts(held)) == 2
    again = split_preference_items(turns, config)
    assert [t.id for t in again[1]] == [t.id for t in held]
    other = split_preference_items(
        turns, _config(tmp_path, preference_dir, "kto", "preference.eval_share=0.25", "optim.seed=1")
    )
    assert [t.id for t in other[0]] != [t.id for t in train]
    assert split_preference_items(turns, _config(tmp_path, preference_dir, "kto"))[1] == []  # the test default: none


def test_datasets_drop_a_pair_with_an_overlong_run(preference_dir, smollm2_tokenizer, tmp_path):
    long_pair = preference_pair(9).model_copy(update={"rejected": preference_pair(9).rejected.model_copy(deep=True)})
    long_pair.rejected.segments[-1] = long_pair.rejected.segments[-1].model_copy(update={"text": " no" * 200})
    path = tmp_path / "pairs.jsonl"
    write_jsonl(path, [preference_pair(i) for i in range(3)] + [long_pair])
    datasets = build_preference_datasets(_config(tmp_path, path, "dpo", "data.max_length=128"), smollm2_tokenizer)
    assert len(datasets["train"]) == 3 and datasets["validation"] is None
    stats = preference_token_stats(datasets["train"])
    assert stats["pairs"] == 3 and 0 < stats["trained_tokens"] < stats["tokens"] and stats["max_length"] <= 128
    with pytest.raises(ValueError, match="record r9: .* more than max_length=128"):
        build_preference_datasets(
            _config(tmp_path, path, "dpo", "data.max_length=128", "data.overlong=error"), smollm2_tokenizer
        )
