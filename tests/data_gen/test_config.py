import copy

import pytest
import yaml

from data_gen.config import ConfigError, DataConfig

from .conftest import DEFAULT, TINY


@pytest.fixture(scope="module")
def base() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


def invalid(data: dict) -> str:
    with pytest.raises(ConfigError) as err:
        DataConfig.from_dict(data)
    return str(err.value)


def test_shipped_configs_load():
    default = DataConfig.load(DEFAULT)
    assert sum(default.splits.model_dump().values()) == 100_000
    tiny = DataConfig.load(TINY)  # `base: default.yaml` merged key by key
    assert tiny.splits.train == 120 and tiny.world.people.test == 100
    assert tiny.world.locales == default.world.locales and tiny.relations == default.relations
    assert tiny.world.companies.faker == 10 and tiny.world.companies.real is True


def test_seed_override_and_yaml_round_trip(tmp_path):
    config = DataConfig.load(TINY, ["seed=7"])
    assert config.seed == 7
    path = tmp_path / "again.yaml"
    path.write_text(config.to_yaml())
    assert DataConfig.load(path) == config


def test_unknown_field_is_named(base):
    data = copy.deepcopy(base)
    data["world"]["localez"] = ["en_US"]
    message = invalid(data)
    assert "world.localez" in message and "unknown field" in message
    data = copy.deepcopy(base)
    data["relations"][0]["questions"]["per_rell"] = ["Where?"]
    assert "relations.0.questions.per_rell" in invalid(data)


def test_wrong_type_is_named(base):
    data = copy.deepcopy(base)
    data["splits"]["train"] = "many"
    assert "splits.train" in invalid(data)
    data = copy.deepcopy(base)
    data["mix"]["read"] = -1
    assert "mix.read" in invalid(data)


@pytest.mark.parametrize("k", [0, 11])
def test_people_per_statement_out_of_range(base, k):
    data = copy.deepcopy(base)
    data["write"]["max_people"] = k
    assert "write.max_people" in invalid(data)


def test_unknown_relation_in_two_hop_pairs(base):
    data = copy.deepcopy(base)
    data["two_hop"]["pairs"] = [["employed by", "manages"]]
    message = invalid(data)
    assert "two_hop.pairs[0][1]" in message and "'manages'" in message


def test_unknown_placeholder_in_template_is_named(base):
    data = copy.deepcopy(base)
    data["relations"][2]["questions"]["rel_org"].append("Who backs {company}?")
    message = invalid(data)
    assert "relations.2.questions.rel_org" in message and "{company}" in message
    data = copy.deepcopy(base)
    data["relations"][0]["statements"]["singular"] = ["{per} works somewhere."]
    assert "relations.0.statements.singular" in invalid(data) and "missing placeholder {org}" in invalid(data)


def test_relation_names_must_be_canonical_in_the_memory_table(base):
    data = copy.deepcopy(base)
    data["relations"][0]["name"] = "works for"  # an alias of "employed by"
    message = invalid(data)
    assert "relations[0].name" in message and "'employed by'" in message


def test_updates_need_a_functional_relation(base):
    data = copy.deepcopy(base)
    data["relations"][2]["updates"] = ["{per} sold {old} and bought {org}."]  # investor in: not functional
    assert "relations[2].updates" in invalid(data)


def test_new_relation_by_config_alone(base):
    data = copy.deepcopy(base)
    data["relations"].append(
        {
            "name": "advisor to",
            "fact": {"singular": "{per} is an advisor to {org}.", "plural": "{per} are advisors to {org}."},
            "statements": {"singular": ["{per} advises {org}."], "plural": ["{per} advise {org}."]},
            "questions": {
                "per_rel": ["Whom does {per} advise?"],
                "rel": ["Who is an advisor?"],
                "rel_org": ["Who advises {org}?"],
            },
        }
    )
    config = DataConfig.from_dict(data)
    assert config.relation("advisor to").weight == 1


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        DataConfig.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        DataConfig.load(bad)
    loop = tmp_path / "loop.yaml"
    loop.write_text("base: loop.yaml\n")
    with pytest.raises(ConfigError, match="base"):
        DataConfig.load(loop)
