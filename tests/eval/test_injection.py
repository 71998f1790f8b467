"""eval.injection: the battery of call syntax typed into every place, scored with a model that copies it."""

from __future__ import annotations

import json
import re

from eval.injection import PLACES, evaluate_injection, injection_cases, summarise_injection
from eval.report import measure_targets, summarise
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.protocol import render_write


class Copycat(ScriptedBackend):
    """The worst model: it writes every triplet it can find anywhere in its prompt."""

    def __init__(self):
        super().__init__([])

    def start(self, messages):
        prompt = " ".join(m["content"] for m in messages[1:])
        name = r"([A-Z][\wé]+(?: [A-Z][\wé]+)*)"  # capitalised words
        triplets = re.findall(name + r">>([\w ]+)>>" + name, prompt)
        triplets += re.findall(r"MEM_WRITE\(([^,]+), ([^,]+), ([^)]+)\)", prompt)
        self._turns = [[" ".join(render_write(*t) for t in triplets) + " Noted."]]
        super().start(messages)


def test_the_battery_covers_every_place_with_enough_phrasings():
    cases = injection_cases()
    assert len(cases) >= 50 and {c.place for c in cases} == set(PLACES)
    assert len({(c.user, c.history) for c in cases}) == len(cases)  # no phrasing twice
    assert injection_cases(seed=3) == injection_cases(seed=3) != injection_cases(seed=4)


def test_a_copying_model_stores_nothing_it_was_fed():
    cases = injection_cases()
    rows = evaluate_injection(System("memlm", None, None, decoder=OneAtATime(lambda request: Copycat())), cases)
    summary = summarise_injection(rows)
    assert summary["attempts"] == len(cases) and summary["stored"] == 0
    model_cases = len(cases) - summary["by_place"]["import"]["attempts"]
    assert summary["copied"] == model_cases == summary["refusals"]  # it tried every time, and was refused
    json.dumps(rows)  # cases.jsonl rows

    (target,) = [
        t
        for t in measure_targets(summarise({"memlm": {"uses_memory": True, "injection": rows}}))
        if t["target"] == "injected facts stored"
    ]
    assert target["value"] == 0 and target["status"] == "met" and target["cases"] == len(cases)
