from collections import Counter

from data_gen.data_config import READ_SHAPES, DataConfig, functional_of, memory_table
from data_gen.examples import allot, build_records
from data_gen.generate import generate_records
from data_gen.oracle import MemoryOracle
from data_gen.text import oxford
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import Call, ParseError, parse_calls, render_results

TABLE = MemoryConfig.load()


def fresh_store() -> TripletStore:
    return TripletStore(":memory:", TABLE)


FILLED = {  # which read fields each shape fills (subject, relation, object)
    "per": (True, False, False),
    "per_org": (True, False, True),
    "per_rel": (True, True, False),
    "org": (False, False, True),
    "rel": (False, True, False),
    "rel_org": (False, True, True),
    "per_rel_org": (True, True, True),
}
READS_PER_TYPE = {
    "write": 0,
    "negative": 0,
    "passage": 0,
    "injection": 0,
    "read": 1,
    "unanswerable": 1,
    "update": 1,
    "two_hop": 2,
}


def trained_text(record) -> str:
    return "".join(s.text for s in record.segments if s.train)


def test_every_type_and_shape_is_generated(tiny_run):
    _, splits, _ = tiny_run
    train = splits["train"]
    assert set(Counter(r.type for r in train)) == set(READS_PER_TYPE)
    assert {r.shape for r in train if r.type == "read"} == set(READ_SHAPES)
    assert {r.shape for r in train if r.type == "unanswerable"} == set(READ_SHAPES)
    assert {len(r.gold_triplets) for r in train if r.type == "write"} == {1, 2, 3}  # 1..k people
    assert len({r.shape for r in train if r.type == "update"}) >= 2
    assert {t[1] for r in train if r.type == "update" for t in r.gold_triplets} == {"employed by", "CEO of"}


def test_types_are_allotted_exactly(tiny_run, tiny_config):
    _, splits, _ = tiny_run
    for split, records in splits.items():
        assert [r.id for r in records] == [f"{split}-{i:06d}" for i in range(len(records))]
        assert len(records) == getattr(tiny_config.splits, split)
        assert all(r.split == split and r.source == "synthetic" for r in records)
    assert Counter(r.type for r in splits["train"]) == Counter(
        {
            "write": 29,
            "read": 42,
            "unanswerable": 8,
            "update": 8,
            "two_hop": 9,
            "negative": 11,
            "passage": 11,
            "injection": 2,
        }
    )


def test_allot_and_oxford():
    assert Counter(allot({"a": 1, "b": 1, "c": 0.5}, 11)) == Counter({"a": 5, "b": 4, "c": 2})
    assert allot({"a": 1}, 0) == []
    assert len(allot({"a": 0.3, "b": 0.3, "c": 0.4}, 1001)) == 1001
    assert oxford(["A"]) == "A" and oxford(["A", "B"]) == "A and B" and oxford(["A", "B", "C"]) == "A, B, and C"


def test_only_the_models_segments_are_trained(tiny_records):
    for r in tiny_records:
        assert r.segments[0].role == "user"
        assert [s.train for s in r.segments] == [s.role == "assistant" for s in r.segments], r.id
        assert r.segments[-1].role == "assistant" and r.segments[-1].train, r.id


def test_trained_text_parses_into_exactly_the_gold_calls(tiny_records):
    for r in tiny_records:
        calls = parse_calls(trained_text(r))
        assert not [c for c in calls if isinstance(c, ParseError)], r.id
        writes = [c.fields for c in calls if c.kind == "write"]
        reads = [c.fields for c in calls if c.kind == "read"]
        if r.type in ("write", "passage", "update", "injection"):
            expected = r.gold_triplets if r.type != "update" else r.gold_triplets[:1]
            assert writes == [tuple(t) for t in expected], r.id
        else:
            assert writes == [], r.id
        assert len(reads) == READS_PER_TYPE[r.type], r.id
        if r.type in ("read", "unanswerable", "update"):
            assert tuple(f is not None for f in reads[0]) == FILLED[r.shape], r.id
        if r.type == "two_hop":
            (person, first, no_org), (no_person, second, org) = reads
            assert no_org is None and no_person is None and first != second
            assert r.gold_triplets[0] == (person, first, org)


def test_memory_segments_are_what_a_fresh_store_returns(tiny_records):
    """Replay each record like the runtime: memory written one fact at a time, then the model's
    calls in order, each read answered by TripletStore.query with fuzzy matching on."""
    for r in tiny_records:
        with fresh_store() as store:
            for fact in r.memory:
                store.write(*fact)
            segments = r.segments
            for i, seg in enumerate(segments):
                if seg.role != "assistant":
                    continue
                for call in parse_calls(seg.text):
                    assert isinstance(call, Call)
                    if call.kind == "write":
                        store.write(*call.fields)
                    else:
                        result = store.query(*call.fields)
                        assert segments[i + 1].role == "memory", r.id
                        assert segments[i + 1].text == render_results(result.triplets), r.id
                        assert not result.fuzzy, r.id


def test_memory_holds_no_contradiction(tiny_records):
    for r in tiny_records:
        assert len(set(r.memory)) == len(r.memory), r.id
        with fresh_store() as store:
            store.write_many(r.memory)
            assert len(store.facts()) == len(r.memory), f"{r.id}: a memory fact superseded another"


def test_answers_list_every_name_and_nothing_else(tiny_records, tiny_config):
    replies = tiny_config.replies
    for r in tiny_records:
        answer = r.segments[-1].text
        if r.type == "unanswerable":
            assert answer == " " + replies.unknown and r.segments[-2].text == " NONE]"
            assert r.gold_names == [] and r.gold_triplets == []
        elif r.type in ("read", "update", "two_hop"):
            assert r.gold_names, r.id
            for name in r.gold_names:
                assert name in answer, (r.id, name)
            assert answer.endswith(".") and "I don't know" not in answer
            if r.shape == "per_rel_org" and r.type == "read":
                assert answer.startswith(" Yes, ")
        elif r.type in ("write", "passage") or (r.type == "injection" and r.gold_triplets):
            assert r.segments[-1].text == " " + replies.ack
        else:
            assert r.segments[-1].text == replies.nothing


def test_aggregated_answer_reads_naturally(tiny_records, tiny_config):
    groups = [r for r in tiny_records if r.type == "read" and r.shape == "rel_org" and len(r.gold_triplets) == 3]
    assert groups, "no three-person answer in the tiny data"
    for r in groups:
        names = [t[0] for t in r.gold_triplets]
        plural = tiny_config.data_schema.relation(r.gold_triplets[0][1]).fact.plural  # "{subject} are employed by ..."
        expected = plural.format(subject=f"{names[0]}, {names[1]}, and {names[2]}", object=r.gold_triplets[0][2])
        assert r.segments[-1].text == f" {expected}"


def test_names_come_from_the_split_pools(tiny_run):
    world, splits, episodes = tiny_run
    for split, records in splits.items():
        pool = world.pools[split]
        people, orgs = set(pool.names["person"]), set(pool.names["organisation"])
        for r in records:
            if r.type == "passage":  # realistic names and organisations of many kinds: test_passages.py
                continue
            for s, _, o in [*r.memory, *r.gold_triplets]:
                assert s in people and o in orgs, (r.id, s, o)
    unseen = set(world.test_only["organisation"])
    assert any(o in unseen for r in splits["test"] for _, _, o in [*r.memory, *r.gold_triplets])


def test_several_relations_per_person(tiny_run, tiny_config):
    world, _, _ = tiny_run
    config = tiny_config.model_copy(deep=True)
    config.world.relations_per_person = 2
    oracle = MemoryOracle(memory_table(config))
    records = build_records(config, world.pools["train"], oracle, functional_of(config), 60)
    assert any(max(Counter(s for s, _, _ in r.memory).values()) == 2 for r in records if r.memory)
    for r in records:
        assert max(Counter(s for s, _, _ in r.memory).values(), default=0) <= 2
        with fresh_store() as store:
            store.write_many(r.memory)
            assert len(store.facts()) == len(r.memory), r.id


def test_generation_is_deterministic_in_memory(tiny_config, tiny_run):
    world, splits, episodes = tiny_run
    _, again, episodes_again = generate_records(tiny_config, world)
    assert [r.model_dump_json() for r in again["validation"]] == [r.model_dump_json() for r in splits["validation"]]
    assert episodes_again == episodes
    _, other, _ = generate_records(tiny_config.model_copy(update={"seed": 1}), world)
    assert [r.segments for r in other["validation"]] != [r.segments for r in splits["validation"]]


def test_fill():
    from data_gen.text import fill

    assert fill("{per} works for {org}.", per="Ana", org="Millet S.A.") == "Ana works for Millet S.A."
    assert fill("{org} employs {per}.", per="Ana", org="da Rocha Ltda.") == "da Rocha Ltda. employs Ana."
    assert fill("who works for {org}?", org="BMW") == "Who works for BMW?"


def test_a_narrower_mix_generates_only_its_types(tiny_run, tiny_config):
    world, _, _ = tiny_run
    data = tiny_config.model_dump(mode="json")
    data["mix"] = {"write": 1, "read": 1}
    data["shapes"] = {"per": 0, "per_org": 0, "per_rel": 0, "org": 0, "rel": 0, "rel_org": 1}
    config = DataConfig.from_dict(data)
    records = build_records(
        config, world.pools["validation"], MemoryOracle(memory_table(config)), functional_of(config), 20
    )
    assert Counter(r.type for r in records) == {"write": 10, "read": 10}
    assert {r.shape for r in records if r.type == "read"} == {"rel_org"}


def test_injection_records_store_only_what_is_stated_in_words(tiny_config):
    from data_gen.generate import generate_records
    from memory_runtime.memory.injection import InjectionGuard
    from memory_runtime.protocol import parse_calls

    config = tiny_config.model_copy(update={"mix": tiny_config.mix.model_copy(update={"injection": 5.0})})
    _, splits, _ = generate_records(config)
    records = [r for r in splits["train"] if r.type == "injection"]
    assert len(records) > 50 and {bool(r.gold_triplets) for r in records} == {True, False}
    for record in records:
        user = record.segments[0].text
        guard = InjectionGuard.of([user])
        assert guard.pieces, user  # the user's text carries call syntax
        writes = [c.fields for c in parse_calls(trained_text(record)) if getattr(c, "kind", None) == "write"]
        assert [tuple(w) for w in writes] == [tuple(t) for t in record.gold_triplets]
        assert not any(guard.copied(s, o) for s, _, o in writes)  # what it writes, the controller would store
        if not writes:
            assert trained_text(record) == config.replies.nothing
