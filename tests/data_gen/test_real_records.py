"""Real annotated text in training: real records and verify records, and the guarantee that the dev
text `memlm eval` measures on is never trained on."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from data_gen.data_config import ConfigError, DataConfig
from data_gen.real import is_mentioned, load_corpus, load_real
from data_gen.real_records import RealPassages, dev_texts, normalise_text, overlaps
from memory_runtime.generation.write_gate import VERIFY_NO, VERIFY_YES
from memory_runtime.memory.terms import normalize_term, triplet_key
from memory_runtime.protocol import parse_calls
from memory_runtime.records import messages

from .conftest import REPO

REAL_CONFIG = REPO / "configs" / "data" / "default.yaml"
TRAIN_FILE = REPO / "data" / "real_train" / "knowledgenet_person_org_train.jsonl"
REDOCRED_TRAIN_FILE = REPO / "data" / "real_train" / "redocred_train_person_org.jsonl"
REDOCRED_DEV_FILE = REPO / "data" / "real" / "redocred_dev_person_org.jsonl"
SMALL = ["splits.train=1500", "splits.validation=200", "splits.test=200", "episodes.count=0"]


@pytest.fixture(scope="module")
def real_run():
    from data_gen.generate import generate_records

    config = DataConfig.load(REAL_CONFIG, overrides=[*SMALL, "mix.real=1", "mix.verify=0.5"])
    return config, generate_records(config)[1]


def test_the_dev_set_is_large_enough_and_disjoint_from_the_training_passages():
    dev = load_real()
    assert len(dev) >= 400 and sum(not r.gold_triplets for r in dev) >= 180
    train = load_corpus(TRAIN_FILE, "knowledgenet")
    redocred_train = load_corpus(REDOCRED_TRAIN_FILE, "redocred_sentences")
    assert len(redocred_train) >= 80
    dev_norm = dev_texts()
    assert not [r.id for r in train + redocred_train if overlaps(r.segments[0].text, dev_norm)]
    # nor do they share a person or an organisation (the KnowledgeNet split grouped passages by their gold names)
    names = {
        normalise_text(n) for r in dev if r.source == "knowledgenet" for t in r.gold_triplets for n in (t[0], t[2])
    }
    assert not [t for r in train for t in r.gold_triplets if {normalise_text(t[0]), normalise_text(t[2])} & names]
    # nor a Re-DocRED document (that split is by document)
    titles = [
        {json.loads(line)["title"] for line in f.read_text().splitlines()}
        for f in (REDOCRED_DEV_FILE, REDOCRED_TRAIN_FILE)
    ]
    assert titles[0] and titles[1] and not titles[0] & titles[1]


def test_no_dev_passage_appears_in_any_generated_training_record(real_run):
    _, splits = real_run
    dev = dev_texts()
    for split, records in splits.items():
        for r in records:
            for m in messages(r):
                if m["role"] == "user":
                    text = normalise_text(m["content"])
                    assert not [d for d in dev if d in text], (split, r.id)


def test_real_passages_train_the_train_split_only(real_run):
    config, splits = real_run
    sources = {split: Counter(r.source for r in records) for split, records in splits.items()}
    assert sources["train"]["knowledgenet"] > 0
    assert set(sources["validation"]) == set(sources["test"]) == {"synthetic"}
    real = [r for r in splits["train"] if r.source == "knowledgenet" and r.type != "verify"]
    assert {r.type for r in real} == {"write", "negative", "read"}
    assert all(r.split == "train" for r in real)


def training_passages(config) -> dict:
    """The real passages as training uses them (named facts only), by text."""
    return {r.segments[0].text: r for _, records in RealPassages.load(config).by_source for r in records}


def test_a_real_read_states_the_passage_then_asks_about_its_own_names(real_run):
    config, splits = real_run
    reads = [r for r in splits["train"] if r.source == "knowledgenet" and r.type == "read"]
    assert len(reads) > 20
    assert len({r.shape for r in reads}) >= 5  # the read shapes of the synthetic data
    by_text = training_passages(config)
    for r in reads:
        passage = by_text[r.segments[0].text]  # the passage as the corpus gives it
        assert r.segments[1].text == passage.segments[1].text  # its writes, as the write record has them
        calls = parse_calls("".join(s.text for s in r.segments[4:]))
        assert calls[0].kind == "read"
        asked = {normalize_term(f) for f in calls[0].fields if f}
        names = {normalize_term(n) for t in passage.gold_triplets for n in t}
        assert asked <= names, (asked, names)  # the question is about the passage's own facts
        assert {triplet_key(t) for t in r.gold_triplets} <= {triplet_key(t) for t in passage.gold_triplets}


def test_verify_records_ask_about_stated_and_unstated_facts(real_run):
    config, splits = real_run
    verify = [r for r in splits["train"] if r.type == "verify"]
    answers = Counter(r.segments[-1].text for r in verify)
    assert set(answers) == {VERIFY_YES, VERIFY_NO} and min(answers.values()) > 0.35 * len(verify)
    assert Counter(r.source for r in verify)["knowledgenet"] > 0
    corpus = training_passages(config)
    for r in verify:
        (fact,) = r.gold_triplets
        assert fact[0] != fact[2]
        text = r.segments[0].text.split("\n\nDoes the text above state")[0]
        if r.source == "knowledgenet":
            stated = {tuple(t) for t in corpus[text].gold_triplets}
            assert (tuple(fact) in stated) == (r.segments[-1].text == VERIFY_YES)
    # the hard "No": both names in the passage, not linked by it (a passage's other organisation, say)
    unstated = [r for r in verify if r.source == "synthetic" and r.segments[-1].text == VERIFY_NO]
    named = [
        r for r in unstated if all(n in r.segments[0].text for n in (r.gold_triplets[0][0], r.gold_triplets[0][2]))
    ]
    assert len(named) > 0.6 * len(unstated)


def test_facts_about_someone_the_passage_does_not_name_are_not_trained(real_run):
    config, _ = real_run
    raw = {r.segments[0].text: r for r in load_corpus(TRAIN_FILE, "knowledgenet")}
    used = training_passages(config)
    pronoun_only = [t for t, r in raw.items() if r.gold_triplets and not used[t].gold_triplets]
    assert pronoun_only and all(used[t].type == "negative" for t in pronoun_only)  # "He founded X." names nobody
    assert all(is_mentioned(r, f) for r in used.values() for f in r.gold_triplets)
    assert not [f for r in used.values() for f in r.gold_triplets if f[2].startswith('"')]  # '"Bellevue' -> 'Bellevue'


def test_a_corpus_passage_holding_dev_text_is_left_out(tmp_path):
    dev = load_real()[0].segments[0].text
    path = tmp_path / "mine.jsonl"
    rows = [
        {"text": f"Earlier that year. {dev}", "triples": []},
        {"text": "Mara Quell works for Pfizer.", "triples": [["Mara Quell", "employed by", "Pfizer"]]},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = DataConfig.load(
        REAL_CONFIG, overrides=[*SMALL, "mix.real=1", f"real.sources=[{{path: {path}, format: jsonl}}]"]
    )
    passages = RealPassages.load(config)
    assert passages.dropped == {str(path): 1}
    assert [r.segments[0].text for _, rs in passages.by_source for r in rs] == ["Mara Quell works for Pfizer."]


def test_real_records_need_a_source():
    with pytest.raises(ConfigError, match="real.sources"):
        DataConfig.load(REAL_CONFIG, overrides=["real.sources=[]"])
    with pytest.raises(ConfigError, match="format"):
        DataConfig.load(REAL_CONFIG, overrides=[f"real.sources=[{{path: {TRAIN_FILE}, format: csv}}]"])


def test_the_dataset_card_lists_the_real_corpora(real_run):
    from data_gen.generate import dataset_card
    from data_gen.world import build_world

    config, splits = real_run
    card = dataset_card(config, build_world(config), splits, [], RealPassages.load(config))
    assert "## Real corpora" in card and "knowledgenet_person_org_train.jsonl" in card
    assert "| real |" in card


def test_a_bad_corpus_ends_the_cli_in_one_line_and_writes_nothing(tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    corpus = tmp_path / "mine.jsonl"
    corpus.write_text(
        json.dumps({"text": "Mara Quell adores Pfizer.", "triples": [["Mara Quell", "adores", "Pfizer"]]})
    )
    out = tmp_path / "out"
    source = f"real.sources=[{{path: {corpus}, format: jsonl}}]"
    result = CliRunner().invoke(app, ["generate", "--config", str(REAL_CONFIG), "--out", str(out), *SMALL, source])
    assert result.exit_code == 2 and "adores" in result.output and "Traceback" not in result.output
    assert not out.exists()
