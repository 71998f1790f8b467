from data_gen.episodes import Episode
from eval.episodes import evaluate_episode
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.protocol import render_read, render_write

EPISODE = Episode.model_validate(
    {
        "id": "e",
        "turns": [
            {
                "user": "Tia Batres works for Pfizer.",
                "kind": "statement",
                "writes": [["Tia Batres", "employed by", "Pfizer"]],
                "expected_facts": [["Tia Batres", "employed by", "Pfizer"]],
            },
            {
                "user": "Cyrus Alfred works for BMW.",
                "kind": "statement",
                "writes": [["Cyrus Alfred", "employed by", "BMW"]],
                "expected_facts": [["Tia Batres", "employed by", "Pfizer"], ["Cyrus Alfred", "employed by", "BMW"]],
            },
            {
                "user": "Who works for BMW?",
                "kind": "question",
                "answer_names": ["Cyrus Alfred"],
                "expected_facts": [["Cyrus Alfred", "employed by", "BMW"]],
            },
            {"user": "Who founded Pfizer?", "kind": "question", "answer_names": [], "expected_facts": []},
        ],
    }
)


def run(script):
    backend = ScriptedBackend(script)
    return evaluate_episode(System("memlm", None, None, decoder=OneAtATime(lambda request: backend)), EPISODE)


def test_a_wrong_early_write_does_not_fail_later_statements_but_the_memory_stays_off():
    result = run(
        [
            render_write("Tia Batres", "employed by", "Pfizerr") + " Noted.",
            render_write("Cyrus Alfred", "works for", "BMW") + " Noted.",  # an alias: same canonical triplet
            [render_read(None, "employed by", "BMW"), " Cyrus Alfred works for BMW."],
            [render_read(None, "founder of", "Pfizer"), " I don't know."],
        ]
    )
    first, second, question, unanswerable = result["turns"]
    assert not first["correct"] and second["correct"]
    assert not second["memory_matches"]  # the first mistake is still in memory
    assert question["correct"] and unanswerable["correct"] and result["correct"]


def test_a_wrong_answer_fails_the_episode():
    result = run(
        [
            render_write("Tia Batres", "employed by", "Pfizer") + " Noted.",
            render_write("Cyrus Alfred", "employed by", "BMW") + " Noted.",
            [render_read(None, "employed by", "BMW"), " Cyrus Alfred and Tia Batres."],
            [render_read(None, "founder of", "Pfizer"), " I don't know."],
        ]
    )
    assert [t.get("correct") for t in result["turns"]] == [True, True, False, True]
    assert result["correct"] is False
