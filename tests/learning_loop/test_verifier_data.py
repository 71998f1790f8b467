"""The verifier's examples: gold facts hold, swaps and writes the gold rules out do not, writes the gold cannot
judge are left out; and no dev passage ever becomes one (dev never trains the verifier)."""

import random

from learning_loop.sampling import SampleConfig, load_prompts
from learning_loop.verifier_data import label_write, swapped, verifier_examples
from memory_runtime.records import Record, Segment

RELATIONS = ["employed by", "CEO of", "founder of", "spouse of"]


def passage(gold, annotated=None, text="Cy Park, CEO of Initech, hired Ann Lee at Acme."):
    return Record(
        id="p1",
        type="passage",
        segments=[Segment(role="user", text=text, train=False), Segment(role="assistant", text="ok", train=True)],
        gold_triplets=gold,
        annotated_relations=annotated,
        source="knowledgenet" if annotated else "synthetic",
    )


def test_a_write_is_labelled_only_where_the_gold_can_judge_it():
    record = passage([("Cy Park", "CEO of", "Initech")], annotated=["CEO of"])
    assert label_write(("cy park", "CEO of", "Initech"), record) is True
    assert label_write(("Ann Lee", "CEO of", "Acme"), record) is False  # a CEO fact the passage does not state
    assert label_write(("Cy Park", "founder of", "Initech"), record) is None  # never checked for founders
    synthetic = passage([("Cy Park", "CEO of", "Initech")])
    assert label_write(("Cy Park", "founder of", "Initech"), synthetic) is False  # generated: all relations
    spouses = passage([("Ann Lee", "spouse of", "Cy Park")])
    assert label_write(("Cy Park", "spouse of", "Ann Lee"), spouses, symmetric=frozenset({"spouse of"})) is True


def test_swaps_are_never_gold_and_stay_within_the_annotated_relations():
    gold = [("Cy Park", "CEO of", "Initech"), ("Ann Lee", "employed by", "Acme")]
    rng = random.Random(0)
    for annotated in (None, ["CEO of", "employed by"]):
        record = passage(gold, annotated)
        swaps = swapped(record, RELATIONS, rng)
        assert swaps and not set(swaps) & set(gold)
        if annotated:
            assert {r for _, r, _ in swaps} <= set(annotated)
    assert {s for s, _, _ in swapped(passage(gold), RELATIONS, random.Random(1))} <= {"Cy Park", "Ann Lee"}


def test_an_update_teaches_that_the_fact_it_ends_no_longer_holds():
    """ "Ada Lin quit Pfizer and joined Acme.": employed by Acme holds; employed by Pfizer (the memory's fact the
    passage names) is the object swap that does not. A memory fact the passage does not name is no swap."""
    update = passage([("Ada Lin", "employed by", "Acme")], text="Ada Lin quit Pfizer and joined Acme.").model_copy(
        update={"type": "update", "memory": [("Ada Lin", "employed by", "Pfizer"), ("Bo Ek", "CEO of", "Initech")]}
    )
    examples = {(tuple(e.triplet), e.holds) for e in verifier_examples([(update, [])], RELATIONS)}
    assert (("Ada Lin", "employed by", "Acme"), True) in examples
    assert (("Ada Lin", "employed by", "Pfizer"), False) in examples
    assert not any(t[2] == "Initech" for t, _ in examples)


def test_examples_hold_gold_and_swaps_and_judged_writes_once_each():
    record = passage([("Cy Park", "CEO of", "Initech")], annotated=["CEO of", "employed by"])
    writes = [("Cy Park", "CEO of", "Initech"), ("Ann Lee", "employed by", "Acme"), ("Ann Lee", "founder of", "Acme")]
    examples = verifier_examples([(record, writes + writes)], RELATIONS)
    by_origin = {(e.origin, tuple(e.triplet), e.holds) for e in examples}
    assert ("writer", ("Cy Park", "CEO of", "Initech"), True) in by_origin  # a gold fact the writer proposed
    assert ("writer", ("Ann Lee", "employed by", "Acme"), False) in by_origin
    missed = verifier_examples([(record, writes[1:])], RELATIONS)
    assert ("gold", ("Cy Park", "CEO of", "Initech"), True) in {(e.origin, tuple(e.triplet), e.holds) for e in missed}
    assert not any(e.triplet[1] == "founder of" for e in examples)  # unannotated: no label
    assert len({(e.passage_id, tuple(e.triplet)) for e in examples}) == len(examples)
    assert all(e.text == record.segments[0].text and e.passage_id == "p1" for e in examples)


def test_no_dev_passage_becomes_a_verifier_example():
    """The verifier's passages are `memlm sample`'s prompts: the real training files with every passage
    overlapping dev left out. Built from all of them, no example's text overlaps a dev passage."""
    from data_gen.real_records import dev_texts, overlaps

    config = SampleConfig.model_validate({"prompts": {"statements": 0, "questions": 0}})
    prompts, sources = load_prompts(config)
    assert sum(s["prompts"] for s in sources.values()) > 100
    examples = verifier_examples([(p.record, []) for p in prompts], RELATIONS)
    dev = dev_texts()
    assert examples and not any(overlaps(e.text, dev) for e in {e.text: e for e in examples}.values())
