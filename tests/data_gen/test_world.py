from data_gen.world import build_world, real_companies
from memory_runtime.memory.terms import normalize_term


def test_real_company_list_is_shipped():
    companies = real_companies()
    assert len(companies) >= 150
    assert len({normalize_term(c) for c in companies}) == len(companies)
    assert "Pfizer" in companies and "BMW" in companies


def test_people_pools_are_disjoint_and_unique(tiny_run, tiny_config):
    world, _, _ = tiny_run
    pools = world.pools
    keys = {s: {normalize_term(p) for p in pool.names["person"]} for s, pool in pools.items()}
    for split, pool in pools.items():
        people = pool.names["person"]
        assert len(people) == getattr(tiny_config.world.names["person"], split)
        assert len(keys[split]) == len(people)  # unique even after normalisation
        assert all(len(p.split()) >= 2 for p in people)
    assert not keys["train"] & keys["validation"]
    assert not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]


def test_test_split_has_organisations_never_seen_in_training(tiny_run):
    world, _, _ = tiny_run
    unseen = set(world.test_only["organisation"])
    orgs = {split: set(pool.names["organisation"]) for split, pool in world.pools.items()}
    assert unseen and unseen <= orgs["test"]
    assert not unseen & orgs["train"]
    assert not unseen & orgs["validation"]
    assert orgs["train"] == orgs["validation"]
    assert len(unseen) == round(0.2 * len(orgs["test"]))
    assert set(world.to_dict()) == {"people", "orgs", "test_only_orgs"}  # world.json, as before schemas


def test_world_is_seeded(tiny_config, tiny_run):
    world, _, _ = tiny_run
    assert build_world(tiny_config) == world
    other = build_world(tiny_config.model_copy(update={"seed": 3}))
    assert other.pools["train"].names["person"] != world.pools["train"].names["person"]


def test_organisation_names_never_end_in_an_open_abbreviation(tiny_config):
    # "Contreras & Asociados S.L.N.E" at the end of a sentence reads "S.L.N.E." in the text:
    # the gold term and the text would disagree, so such names get their closing period.
    raw = tiny_config.model_dump()
    raw["world"]["names"]["organisation"]["faker"] = 400
    raw["world"]["locales"] = ["es_ES", "pl_PL", "it_IT"]
    config = type(tiny_config).model_validate(raw)
    orgs = build_world(config).pools["test"].names["organisation"]
    assert any(o.endswith(".") for o in orgs)
    assert not [o for o in orgs if "." in o.rsplit(" ", 1)[-1] and not o.endswith(".")]
