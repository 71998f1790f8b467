import copy
import json
from datetime import datetime
from pathlib import Path

import pytest

from eval.locomo import (
    LocomoError,
    LocomoQuestion,
    answer_words,
    evidence_recall,
    load_locomo,
    normalize_answer,
    score_answer,
    summarize,
    token_f1,
)

REPO = Path(__file__).resolve().parents[2]
LOCOMO = REPO / "benchmarks" / "locomo" / "locomo_dev.json"

VALID = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I painted a lake."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a photo of a dog"},
        ],
        "session_2_date_time": "9 June 2023",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "We adopted him in 2022."}],
        "session_3_date_time": "10:00 am on 1 July, 2023",  # dated, never held: skipped
    },
    "qa": [
        {"question": "What did Ann paint?", "answer": "a lake", "evidence": ["D1:1"], "category": 4},
        {"question": "When was the dog adopted?", "answer": 2022, "evidence": ["D2:1"], "category": 2},
        {"question": "What did Bo paint?", "adversarial_answer": "a lake", "evidence": ["D1:1"], "category": 5},
    ],
}


def _load(tmp_path, conversations) -> list:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(conversations))
    return load_locomo(path)


def _set(path: str, value):
    """An edit of VALID setting one field, e.g. _set("conversation.session_1.0.text", ""); None deletes it."""

    def edit(data):
        *parents, last = [int(key) if key.isdigit() else key for key in path.split(".")]
        for key in parents:
            data = data[key]
        if value is None:
            del data[last]
        else:
            data[last] = value

    return edit


def _both(first, second):
    return lambda data: (first(data), second(data))


def _edited(edit) -> dict:
    conversation = copy.deepcopy(VALID)
    edit(conversation)
    return conversation


def test_the_real_file_loads_whole():
    conversations = load_locomo(LOCOMO)
    assert [c.sample_id for c in conversations] == ["conv-26", "conv-30"]
    assert [len(c.sessions) for c in conversations] == [19, 19]  # conv-26 dates 35 sessions but holds 19
    assert sum(len(c.turns()) for c in conversations) == 788
    assert sum(len(c.questions) for c in conversations) == 304
    first = conversations[0].turns()[0]
    assert (first.dia_id, first.speaker, first.session) == ("D1:1", "Caroline", 1)
    assert first.date == datetime(2023, 5, 8, 13, 56)
    assert sum(turn.caption is not None for c in conversations for turn in c.turns()) == 188
    answers = [q.answer for c in conversations for q in c.questions]
    assert all(isinstance(a, str) for a in answers) and "2022" in answers
    evidence = {q.question: q.evidence for q in conversations[0].questions}
    assert evidence["What did Melanie paint recently?"] == ("D8:6", "D9:17")  # LoCoMo's "D8:6; D9:17"


def test_a_small_conversation_keeps_order_dates_captions_and_answers(tmp_path):
    (conversation,) = _load(tmp_path, [VALID])
    assert conversation.speakers == ("Ann", "Bo")
    assert [s.index for s in conversation.sessions] == [1, 2]
    assert [t.dia_id for t in conversation.turns()] == ["D1:1", "D1:2", "D2:1"]
    assert conversation.sessions[1].date == datetime(2023, 6, 9)
    assert [t.caption for t in conversation.turns()] == [None, "a photo of a dog", None]
    assert [q.answer for q in conversation.questions] == ["a lake", "2022", "a lake"]
    assert conversation.questions[2].category == 5


@pytest.mark.parametrize(
    "edit, expected",
    [
        (_set("conversation.session_1_date_time", None), "conv-x, session 1: no date"),
        (
            _set("conversation.session_2_date_time", "sometime in June"),
            "conv-x, session 2: unreadable date 'sometime in June'",
        ),
        (_set("conversation.session_1.1.text", None), "conv-x, session 1, turn 2 (D1:2): no text"),
        (_set("conversation.session_1.0.speaker", ""), "conv-x, session 1, turn 1 (D1:1): no speaker"),
        (_set("conversation.session_2.0.dia_id", None), "conv-x, session 2, turn 1: no dia_id"),
        (_set("conversation.session_1.0.speaker", "Cy"), "conv-x, session 1, turn 1 (D1:1): speaker 'Cy' is neither"),
        (_set("qa.0.answer", None), "conv-x, question 1: no answer"),
        (_set("qa.1.category", None), "conv-x, question 2: no category"),
        (_set("qa.1.category", 6), "conv-x, question 2: category 6 is not one of 1-5"),
        (_set("qa.1.category", "2"), "conv-x, question 2: category '2' is not one of 1-5"),
        (_both(_set("conversation.session_1", []), _set("conversation.session_2", [])), "conv-x: no turns"),
        (_set("conversation.speaker_b", None), "conv-x: speaker_a and speaker_b"),
    ],
)
def test_bad_input_is_one_line_naming_the_item(tmp_path, edit, expected):
    with pytest.raises(LocomoError) as raised:
        _load(tmp_path, [_edited(edit)])
    assert expected in str(raised.value) and "\n" not in str(raised.value)


def test_an_adversarial_question_needs_no_answer(tmp_path):
    (conversation,) = _load(tmp_path, [_edited(_set("qa.2.adversarial_answer", None))])
    assert conversation.questions[2].answer == ""


def test_a_file_of_another_shape_says_what_was_expected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(LocomoError, match="not JSON"):
        load_locomo(path)
    with pytest.raises(LocomoError, match="expected a list of LoCoMo conversations"):
        _load(tmp_path, {"conv-x": VALID})
    with pytest.raises(LocomoError, match=r"conv-x: expected 'conversation' \(an object\) and 'qa'"):
        _load(tmp_path, [_edited(_set("qa", None))])


def test_nothing_is_returned_when_a_later_conversation_is_bad(tmp_path):
    bad = _edited(_set("sample_id", "conv-y"))
    bad["qa"][0]["category"] = 0
    with pytest.raises(LocomoError, match="conv-y, question 1"):
        _load(tmp_path, [VALID, bad])


def _question(answer: str, category: int) -> LocomoQuestion:
    return LocomoQuestion("?", answer, category, ("D1:1",))


def test_normalisation_stems_and_drops_articles_and_punctuation():
    assert normalize_answer("The Painted, an Apple and a Pear!") == ["paint", "appl", "pear"]
    assert normalize_answer("painting") == normalize_answer("painted")
    assert normalize_answer("don't") == ["dont"]  # deleted, not spaced, as LoCoMo does


def test_token_f1():
    assert token_f1("She painted a sunset", "painting the sunset") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert token_f1("the lake", "Lake.") == 1.0
    assert token_f1("a mountain", "the lake") == 0.0
    assert token_f1("", "lake") == 0.0


def test_multi_hop_averages_the_best_match_of_each_gold_part():
    question = _question("pottery, camping, painting", 1)
    assert score_answer(question, "Painting, pottery") == pytest.approx(2 / 3)
    assert score_answer(question, "camping, pottery, painted") == 1.0
    assert score_answer(question, "pottery camping painting") == pytest.approx(0.5)  # one part: F1 1/2 each


def test_open_domain_is_scored_on_the_gold_before_its_reason():
    question = _question("Likely no; though she likes reading, she wants to be a counselor", 3)
    assert score_answer(question, "Likely no") == 1.0
    assert score_answer(_question("Likely no; though she likes reading", 4), "Likely no") < 1.0


@pytest.mark.parametrize(
    "prediction", ["That is not mentioned.", "I DON'T KNOW", "There is no information on it.", "Unknown."]
)
def test_adversarial_questions_want_a_refusal(prediction):
    question = _question("a lake", 5)
    assert score_answer(question, prediction) == 1.0
    assert score_answer(question, "A lake.") == 0.0  # the trap answer is never compared


def test_answer_words_counts_the_answer_s_scored_words_that_texts_hold():
    """Normalised and stemmed as scored: "a", "the" do not count; "running" is met by "runs" (both "run")."""
    assert answer_words("a guinea pig", ["Caroline has pets", "she got a guinea pig named Oscar"]) == 1.0
    assert answer_words("a guinea pig", ["Caroline has pets"]) == 0.0
    assert answer_words("Running, pottery", ["Melanie runs", "she took up pottery"]) == 1.0
    assert answer_words("Running, pottery", ["Melanie likes pottery"]) == 0.5
    assert answer_words("the", ["anything"]) is None


def test_evidence_recall():
    assert evidence_recall(["D1:1", "D2:3"], {"D1:1", "D9:9"}) == 0.5
    assert evidence_recall([], {"D1:1"}) is None


def test_summarize_weighs_questions_and_leaves_adversarial_out_of_overall():
    summary = summarize([(1, 1.0), (1, 0.0), (4, 1.0), (4, 1.0), (4, 0.5), (5, 1.0), (5, 0.0), (5, 0.0)])
    assert summary["categories"][1] == {"name": "multi-hop", "questions": 2, "f1": 50.0}
    assert summary["categories"][4]["f1"] == 83.3
    assert summary["overall_f1"] == 70.0  # 3.5 of 5 questions; a mean of category means would be 66.7
    assert summary["adversarial_refused_pct"] == 33.3
    assert summarize([(5, 1.0)])["overall_f1"] is None


def test_locomo_is_never_shipped_or_trained_on():
    setuptools = pytest.importorskip("tomllib").loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = [*setuptools["packages"], *(p for globs in setuptools["package-data"].values() for p in globs)]
    assert not [name for name in shipped if "benchmarks" in name or "locomo" in name]
    said = {turn.text.lower() for c in load_locomo(LOCOMO) for turn in c.turns() if len(turn.text.split()) >= 8}
    sources = [*(REPO / "data").rglob("*"), *(REPO / "data_gen").glob("*.*"), *(REPO / "configs").rglob("*")]
    texts = [path.read_text(errors="ignore").lower() for path in sources if path.is_file() and path.suffix != ".pyc"]
    assert not [turn for turn in said if any(turn in text for text in texts)]
