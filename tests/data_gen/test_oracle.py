from data_gen.oracle import MemoryOracle
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore

TABLE = MemoryConfig.load()
MEMORY = [("Dorothea Altemus", "employed by", "Pfizer"), ("Tia Batres", "customer of", "BMW")]


def test_reads_are_the_store_results():
    session = MemoryOracle(TABLE).open(MEMORY)
    assert session.read(None, "works for", None) == [MEMORY[0]]  # aliases resolved by the store
    assert session.read("Zebulon Quartermaine", None, None) == []
    with TripletStore(":memory:", TABLE) as store:  # the fuzzy store agrees on the unanswerable read
        store.write_many(MEMORY)
        assert store.query("Zebulon Quartermaine").triplets == []


def test_near_misses_are_refused_not_guessed():
    session = MemoryOracle(TABLE).open(MEMORY)
    assert session.read("Dorothea Altemas", None, None) is None  # the fuzzy fallback would match it
    assert session.read(None, None, "BMW AG") is None


def test_sessions_survive_a_store_reset():
    oracle = MemoryOracle(TABLE, reset_every=2)
    first = oracle.open(MEMORY)
    later = [oracle.open([(f"Person {i}", "manager of", "Siemens")]) for i in range(5)]
    first.write(("Dorothea Altemus", "employed by", "BMW"))  # supersedes Pfizer
    assert first.read("Dorothea Altemus", None, None) == [("Dorothea Altemus", "employed by", "BMW")]
    assert later[-1].read(None, "manager of", None) == [("Person 4", "manager of", "Siemens")]
    assert first.facts() == [MEMORY[1], ("Dorothea Altemus", "employed by", "BMW")]
