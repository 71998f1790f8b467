from collections import Counter

import pytest

from data_gen.data_config import functional_of, memory_table
from data_gen.episodes import Episode, EpisodeTurn, build_episodes, load_episodes
from data_gen.oracle import MemoryOracle
from memory_runtime.jsonl import write_jsonl
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore

TABLE = MemoryConfig.load()


@pytest.fixture(scope="module")
def episodes(tiny_run, tiny_config):
    world, _, _ = tiny_run
    oracle = MemoryOracle(memory_table(tiny_config))
    return build_episodes(tiny_config, world.pools["test"], oracle, functional_of(tiny_config), 40)


def test_tiny_run_has_episodes(tiny_run, tiny_config):
    _, _, eps = tiny_run
    assert len(eps) == tiny_config.episodes.count
    assert [e.id for e in eps] == [f"episode-{i:05d}" for i in range(len(eps))]


def test_episodes_have_every_kind_of_turn(episodes):
    kinds = Counter(t.kind for e in episodes for t in e.turns)
    assert kinds["statement"] and kinds["update"] and kinds["question"]
    questions = [t for e in episodes for t in e.turns if t.kind == "question"]
    assert any(t.answer_names == [] for t in questions)  # unanswerable
    assert any("the company that" in t.user or "the organization that" in t.user for t in questions)  # two-hop
    for e in episodes:
        assert e.turns[0].kind == "statement"


def test_episodes_replay_against_a_fresh_store(episodes):
    """Gold writes reproduce expected_facts; questions rest on current facts; updates are asked about."""
    for e in episodes:
        with TripletStore(":memory:", TABLE) as store:
            for i, turn in enumerate(e.turns):
                if turn.kind in ("statement", "update"):
                    for w in turn.writes:
                        store.write(*w)
                    assert [tuple(f.triplet) for f in store.facts()] == [tuple(t) for t in turn.expected_facts], e.id
                    assert turn.answer_names is None
                    if turn.kind == "update":  # the next turn asks about the new fact
                        after = e.turns[i + 1]
                        assert after.kind == "question" and tuple(turn.writes[0]) in map(tuple, after.expected_facts)
                else:
                    current = {tuple(f.triplet) for f in store.facts()}
                    assert {tuple(t) for t in turn.expected_facts} <= current, e.id
                    assert bool(turn.answer_names) == bool(turn.expected_facts), e.id
                    names = {n for t in turn.expected_facts for n in (t[0], t[2])}
                    assert set(turn.answer_names) <= names, e.id


def test_episode_jsonl_round_trip_and_validation(episodes, tmp_path):
    path = tmp_path / "episodes.jsonl"
    write_jsonl(path, episodes)
    assert load_episodes(path) == episodes
    with pytest.raises(ValueError):
        EpisodeTurn(user="Who works for BMW?", kind="question", writes=[["a", "employed by", "BMW"]], answer_names=[])
    with pytest.raises(ValueError):
        EpisodeTurn(user="Tia works for BMW.", kind="statement", answer_names=["Tia"])
    path.write_text('{"id": "x", "turns": []}\n')
    with pytest.raises(ValueError, match=":1:"):
        load_episodes(path)
    assert Episode.model_validate({"id": "e", "turns": [{"user": "Hi.", "kind": "statement"}]}).turns[0].writes == []
