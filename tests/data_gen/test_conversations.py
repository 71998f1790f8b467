"""Dated conversations with gold writes (data_gen/conversations.py): what each turn writes, and that no LoCoMo
sentence is in any of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from data_gen.conversations import (
    PERSONAS_FILE,
    answered_object,
    asked_object,
    persona_fact,
    persona_pairs,
    phrase_bank,
    third_person,
)
from data_gen.data_config import DataConfig
from data_gen.generate import generate_records
from eval.locomo import load_locomo
from memory_runtime.memory.conversation import ANSWER_PROMPT, FACTS_HEADER, NOT_MENTIONED
from memory_runtime.protocol import parse_calls

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "data" / "conversations.yaml"


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        ("I have two dogs.", ("has", "two dogs")),
        ("I work at a bank.", ("works at", "bank")),
        ("I am a nurse.", ("is", "nurse")),
        ("I'm training for a marathon.", ("is training for", "marathon")),
        ("My favorite color is blue.", ("favorite color is", "blue")),
        ("I do not drink alcohol.", ("does not drink", "alcohol")),
        ("I used to work for cisco.", ("used to work for", "cisco")),
        ("I just went to a concert.", ("went to", "concert")),
        ("I love to cook.", ("loves to", "cook")),
        ("I write romance novels.", ("writes", "romance novels")),
        ("I watch movies with my family.", None),  # the object is still in the first person
        ("Do you like dogs?", None),
        ("I like pizza, pasta and wine.", None),  # a list: not plain
        ("He has red hair.", None),
    ],
)
def test_a_persona_sentence_is_read_as_a_fact_about_its_speaker_where_its_shape_is_plain(sentence, fact):
    assert persona_fact(sentence) == fact


def test_a_question_names_an_object_as_a_friend_would_and_the_answer_gives_it_bare():
    assert asked_object("a pottery class") == "the pottery class"
    assert asked_object("my cousins in Lisbon") == "their cousins in Lisbon"
    assert answered_object("an award for my essay") == "award for their essay"
    assert answered_object("Lisbon") == "Lisbon"


def test_verbs_are_said_of_someone_else():
    assert [third_person(v) for v in ["have", "go", "watch", "try", "play", "went", "painted", "can"]] == [
        "has",
        "goes",
        "watches",
        "tries",
        "plays",
        "went",
        "painted",
        "can",
    ]


@pytest.fixture(scope="module")
def generated():
    config = DataConfig.load(CONFIG, ["splits.train=1500", "splits.validation=300", "splits.test=300"])
    _, splits, episodes = generate_records(config)
    return config, splits, episodes


def test_every_turn_writes_the_speakers_facts_copied_from_what_they_said(generated):
    _, splits, episodes = generated
    assert not episodes
    for records in splits.values():
        kinds = {r.type for r in records}
        assert kinds == {"write", "negative", "answer"} and all(r.source == "conversation" for r in records)
        for record in records:
            if record.type == "answer":
                continue  # a reader's question: below
            user, answer = record.segments
            speaker, said = user.text.split(": ", 1)
            calls = parse_calls(answer.text)
            assert [c.fields for c in calls] == [tuple(t) for t in record.gold_triplets]
            if record.type == "negative":
                assert answer.text == "Nothing to store." and not record.gold_triplets
                continue
            assert answer.text.endswith(" Noted.")
            for subject, _, obj in record.gold_triplets:
                assert subject == speaker  # "I" is written as the speaker's name
                assert obj.lower() in said.lower(), (obj, said)  # the object as the turn says it
    turns = [r for r in splits["train"] if r.type != "answer"]
    writes = sum(r.type == "write" for r in turns) / len(turns)
    assert 0.5 < writes < 0.8  # about a third of the turns are chit-chat


def test_a_shared_photo_is_captioned_as_locomo_captions_and_written_as_what_it_shows():
    """conversations.photos: a turn shares a photo ("(shares a photo: a photo of a dog on a beach)", as part
    locomo shows LoCoMo's); the writer writes its scene; no LoCoMo caption is among the bank's."""
    config = DataConfig.load(
        CONFIG, ["splits.train=600", "splits.validation=50", "splits.test=50", "conversations.photos=0.3"]
    )
    _, splits, _ = generate_records(config)
    turns = [r for r in splits["train"] if r.type != "answer"]
    shared = [r for r in turns if "(shares a photo: a photo of " in r.segments[0].text]
    assert 0.2 < len(shared) / len(turns) < 0.4
    for record in shared:
        speaker = record.segments[0].text.split(": ", 1)[0]
        scene = re.search(r"\(shares a photo: a photo of (.+)\)$", record.segments[0].text).group(1)
        assert record.type == "write" and record.gold_triplets[-1] == (
            speaker,
            "shared a photo of",
            re.sub(r"^(a|an|the) ", "", scene),
        )
    contexts = " ".join(r.system or "" for r in splits["train"] if r.type == "answer")
    assert "(shares a photo: a photo of " in contexts  # chunks' dated turns show the photo too
    captions = {
        t.caption.lower()
        for c in load_locomo(REPO / "benchmarks" / "locomo" / "locomo_dev.json")
        for t in c.turns()
        if t.caption
    }
    said = " ".join(r.segments[0].text for r in turns).lower()
    assert len(captions) > 150 and not [c for c in captions if c in said]


def test_photos_need_a_bank_that_has_them(tmp_path):
    bank = {k: v for k, v in phrase_bank().items() if k != "photos"}
    (tmp_path / "bank.yaml").write_text(yaml.safe_dump(bank))
    with pytest.raises(ValueError, match=r"conversations\.photos: the bank .*bank\.yaml has no photos"):
        DataConfig.load(CONFIG, [f"conversations.bank={tmp_path / 'bank.yaml'}", "conversations.photos=0.2"])
    DataConfig.load(CONFIG, [f"conversations.bank={tmp_path / 'bank.yaml'}"])  # without photos it needs none


def test_a_reader_is_asked_about_the_conversation_with_the_prompt_eval_asks_it(generated):
    """A share of the records are questions about a conversation: the reader's prompt (the one part locomo
    asks), a context of dated facts or dated turns, a short answer; a temporal answer is the time the memory
    resolved; what was never said of the one asked about is answered "Not mentioned."."""
    _, splits, _ = generated
    questions = [r for r in splits["train"] if r.type == "answer"]
    assert 0.22 < len(questions) / len(splits["train"]) < 0.38  # conversations.questions: 0.3
    kinds = {"facts": 0, "turns": 0, "when": 0, "list": 0, "not mentioned": 0}
    for record in questions:
        (question, answer) = (s.text for s in record.segments)
        assert record.system.startswith(ANSWER_PROMPT + "\n\n")
        context = record.system.split("\n\n", 1)[1]
        lines = context.split("\n")[1:]
        kinds["facts" if context.startswith(FACTS_HEADER) else "turns"] += 1
        assert lines and all(re.match(r"\((?:\d+:\d\d [AP]M on )?\d+ [A-Z][a-z]+ \d{4}\) ", line) for line in lines)
        (subject, relation, _), *_ = record.gold_triplets  # what it asks about
        if answer == NOT_MENTIONED:  # asked of the other speaker, who never said it; the fact in the context
            kinds["not mentioned"] += 1
            assert not re.search(rf"\b{subject}\b", question) and any(subject in line for line in lines)
            continue
        assert all(re.search(rf"\b{t[0]}\b", question) for t in record.gold_triplets)
        if question.startswith("When "):
            kinds["when"] += 1
            assert re.search(r"\d{4}", answer), (question, answer)  # a day, a month or a year
            if context.startswith(FACTS_HEADER):
                assert answer in context  # the resolved time, or the day it was said
        elif "," in answer:
            kinds["list"] += 1
            assert len(record.gold_triplets) >= 2
        else:
            assert answer.split()[-1].lower() in context.lower(), (question, answer)
    assert all(n > 10 for n in kinds.values()), kinds


def test_the_kinds_of_questions_follow_their_shares():
    """conversations.kinds sets how often a question is of each kind (what is left is single-hop)."""

    def refused(kinds: str) -> float:
        overrides = ["splits.train=600", "splits.validation=10", "splits.test=10", "conversations.questions=0.5"]
        overrides.append("conversations.more_facts=0")  # the shares as measured on one or two facts a turn
        _, splits, _ = generate_records(DataConfig.load(CONFIG, [*overrides, kinds]))
        answers = [r.segments[1].text for r in splits["train"] if r.type == "answer"]
        return sum(a == NOT_MENTIONED for a in answers) / len(answers)

    none, many = refused("conversations.kinds.adversarial=0"), refused("conversations.kinds.adversarial=0.5")
    assert none == 0 and many > 0.2, (none, many)
    with pytest.raises(
        ValueError, match="conversations.kinds: temporal \\+ multi_hop \\+ adversarial must be at most 1"
    ):
        DataConfig.load(CONFIG, ["conversations.kinds.adversarial=0.7"])


def test_more_facts_makes_turns_that_say_several_things_each_written():
    """conversations.more_facts: a fact turn states another fact with that chance, again after each (up to 4),
    every one written; at 0 a turn states one or two."""

    def facts_a_turn(more: str) -> list[int]:
        overrides = ["splits.train=600", "splits.validation=10", "splits.test=10", "conversations.questions=0"]
        _, splits, _ = generate_records(DataConfig.load(CONFIG, [*overrides, f"conversations.more_facts={more}"]))
        writes = [r for r in splits["train"] if r.type == "write"]
        assert all(
            [c.fields for c in parse_calls(r.segments[1].text)] == [tuple(t) for t in r.gold_triplets] for r in writes
        )
        return [len(r.gold_triplets) for r in writes]

    sparse, dense = facts_a_turn("0"), facts_a_turn("0.6")
    assert max(sparse) == 2 and max(dense) == 4
    assert sum(dense) / len(dense) > 1.5 > sum(sparse) / len(sparse)
    with pytest.raises(ValueError, match="more_facts"):
        DataConfig.load(CONFIG, ["conversations.more_facts=1"])


def test_matched_context_gives_a_question_the_lines_that_match_it_as_a_read_returns_them():
    """conversations.matched_context: an answerable question's other context lines are those BM25 ranks highest
    for it (they share its words, as part locomo's reads do), not lines drawn at random; an adversarial
    question's ("Not mentioned.") stay random."""

    def shared_words(matched: str, adversarial: bool = False) -> float:
        overrides = ["splits.train=400", "splits.validation=10", "splits.test=10", "conversations.questions=0.5"]
        config = DataConfig.load(CONFIG, [*overrides, f"conversations.matched_context={matched}"])
        _, splits, _ = generate_records(config)
        shares = []
        asked_records = [r for r in splits["train"] if r.type == "answer"]
        for record in (r for r in asked_records if (r.segments[1].text == NOT_MENTIONED) == adversarial):
            asked = {w for w in re.findall(r"[a-z]{4,}", record.segments[0].text.lower())} - {"what", "when"}
            lines = record.system.split("\n\n", 1)[1].split("\n")[1:]
            shares.append(sum(bool(asked & set(re.findall(r"[a-z]{4,}", x.lower()))) for x in lines) / len(lines))
        return sum(shares) / len(shares)

    drawn, matched = shared_words("0"), shared_words("1")
    assert matched > drawn + 0.1, (drawn, matched)
    assert abs(shared_words("1", adversarial=True) - shared_words("0", adversarial=True)) < 0.1
    with pytest.raises(ValueError, match="matched_context"):
        DataConfig.load(CONFIG, ["conversations.matched_context=1.5"])


def test_relative_times_follow_the_objects_they_date_and_the_personas_are_real(generated):
    _, splits, _ = generated
    objects = [t[2] for r in splits["train"] for t in r.gold_triplets]
    times = [o for o in objects if re.search(r"\b(?:yesterday|last \w+|ago|next \w+|tomorrow)$", o)]
    assert len(times) > 0.1 * len(objects)
    persona_sentences = {s for pair in persona_pairs(str(PERSONAS_FILE), "train") for side in pair for s in side}
    said = [r.segments[0].text.split(": ", 1)[1] for r in splits["train"] if r.type != "answer"]
    from_personas = sum(any(s in text for s in persona_sentences if len(s) > 25) for text in said[:300])
    assert from_personas > 30  # real phrasings, not only the bank's


def test_each_split_reads_its_own_published_persona_split(generated):
    _, splits, _ = generated
    train = {s for pair in persona_pairs(str(PERSONAS_FILE), "train") for side in pair for s in side}
    test = {s for pair in persona_pairs(str(PERSONAS_FILE), "test") for side in pair for s in side}
    only_test = {s for s in test - train if len(s.split()) >= 6}
    said_in_train = " ".join(r.segments[0].text for r in splits["train"])
    assert only_test and not [s for s in only_test if s in said_in_train]


def test_no_locomo_sentence_is_in_what_is_generated_or_its_sources(generated):
    """LoCoMo is measured, never trained on: none of its sentences (6+ words) in the generated records, the
    persona file, the WebNLG sentences or the phrase bank."""
    _, splits, _ = generated
    sentences = set()
    for conversation in load_locomo(REPO / "benchmarks" / "locomo" / "locomo_dev.json"):
        for turn in conversation.turns():
            sentences |= {s.lower() for s in re.split(r"(?<=[.!?])\s+", turn.text) if len(s.split()) >= 6}
            if turn.caption and len(turn.caption.split()) >= 6:  # a shared photo's caption
                sentences.add(turn.caption.lower())
    assert len(sentences) > 1000
    texts = [PERSONAS_FILE.read_text().lower(), (REPO / "data_gen" / "conversations.yaml").read_text().lower()]
    texts.append((REPO / "data" / "real_train" / "webnlg_facts.jsonl").read_text(encoding="utf-8").lower())
    texts += [" ".join(s.text for r in records for s in r.segments).lower() for records in splits.values()]
    assert not [s for s in sentences if any(s in text for text in texts)]


def test_the_bank_and_the_personas_load():
    bank = phrase_bank()
    assert bank["events"] and bank["closed"] and bank["times"]["past"] and bank["chit_chat"]["questions"]
    assert len(persona_pairs(str(PERSONAS_FILE), "train")) == 4000


@pytest.mark.parametrize(
    ("override", "written", "says"),
    [
        ("conversations.personas=missing.json", None, r"conversations\.personas: .*missing\.json cannot be read"),
        ("conversations.personas=personas.json", '{"train": []}', r"conversations\.personas: .* is not MSC's"),
        ("conversations.personas=personas.json", "[1, 2", r"conversations\.personas: .* is not MSC's"),
        ("conversations.bank=bank.yaml", "events: []\n", r"conversations\.bank: .* has no closed, jobs, pets"),
        ("conversations.bank=missing.yaml", None, r"conversations\.bank: .*missing\.yaml cannot be read"),
        ("conversations.webnlg=missing.jsonl", None, r"conversations\.webnlg: .*missing\.jsonl cannot be read"),
        ("conversations.webnlg=facts.jsonl", '{"eid": 1}\n', r"conversations\.webnlg: .*line 1 is not a WebNLG"),
        (
            "conversations.bank=bank.yaml",
            "events: [{relation: painted, asks: {when: 'When did {name} paint?'}}]\n"
            "closed: []\njobs: []\npets: []\ntimes: {}\nchit_chat: {}\n",
            r"conversations\.bank: .* the asks of events entry 'painted' must map what",
        ),
    ],
)
def test_bad_conversation_sources_are_refused_when_the_config_loads(tmp_path, override, written, says):
    from memory_runtime.yaml_config import ConfigError

    key, _, name = override.partition("=")
    if written is not None:
        (tmp_path / name).write_text(written)
    with pytest.raises(ConfigError, match=says):
        DataConfig.load(CONFIG, [f"{key}={tmp_path / name}"])


def test_conversations_need_a_schema_with_people():
    from data_gen.conversations import check_sources
    from data_gen.data_config import ConversationsConfig

    with pytest.raises(ValueError, match="conversations: the schema has no type 'person'"):
        check_sources(ConversationsConfig(), person_type=False)
    check_sources(ConversationsConfig(), person_type=True)  # the shipped bank, no personas: nothing to refuse


def test_webnlg_sentences_say_several_facts_about_whom_they_name_each_written():
    """conversations.webnlg_share: a fact of a turn is said with a WebNLG sentence with that chance, every fact it
    states written as it says it (about whom it names, not the speaker); validation reads its own entries."""
    from data_gen.webnlg import FACTS_FILE, load_facts

    overrides = ["splits.train=400", "splits.validation=200", "splits.test=10", "conversations.questions=0"]
    _, splits, _ = generate_records(DataConfig.load(CONFIG, [*overrides, "conversations.webnlg_share=0.5"]))
    own = {s: dict(load_facts(str(FACTS_FILE), s)) for s in ("train", "validation")}
    for split in ("train", "validation"):
        said = 0
        for record in (r for r in splits[split] if r.type == "write"):
            text = record.segments[0].text
            calls = [c.fields for c in parse_calls(record.segments[1].text)]
            for sentence in (s for s in own[split] if s in text):
                said += 1
                assert all(tuple(t) in calls for t in own[split][sentence]), (sentence, calls)
            other = "validation" if split == "train" else "train"
            mine = [s for s in own[split] if s in text]  # another split's sentence only inside one of these
            assert not [s for s in own[other] if s in text and s not in own[split] and not any(s in m for m in mine)]
        assert said > 20, split
    with pytest.raises(ValueError, match="conversations.webnlg_share: needs conversations.webnlg"):
        DataConfig.load(CONFIG, ["conversations.webnlg=null", "conversations.webnlg_share=0.2"])
