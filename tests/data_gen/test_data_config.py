import copy

import pytest
import yaml

from data_gen.data_config import ConfigError, DataConfig

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
    assert tiny.splits.train == 120 and tiny.world.names["person"].test == 100
    assert tiny.world.locales == default.world.locales and tiny.data_schema == default.data_schema
    assert tiny.world.names["organisation"].faker == 10 and tiny.world.names["organisation"].lists is True


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
    data["world"]["names"]["person"]["trian"] = 10
    assert "world.names.person.trian" in invalid(data)


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


def test_world_names_must_fit_the_schema_types(base):
    data = copy.deepcopy(base)
    data["world"]["names"]["company"] = {"faker": 3}
    assert "world.names.company: not a type of the schema" in invalid(data)
    data = copy.deepcopy(base)
    del data["world"]["names"]["person"]
    assert "world.names.person: needs train, validation and test" in invalid(data)
    data = copy.deepcopy(base)
    data["world"]["names"]["organisation"]["train"] = 40
    assert "world.names.organisation.train: only for a type drawn per split" in invalid(data)
    data = copy.deepcopy(base)
    data["world"]["names"]["person"]["faker"] = 40
    assert "world.names.person.faker: only for a type the splits share" in invalid(data)


def test_the_schema_is_the_relation_table_of_generated_data(base, tmp_path):
    """memory_config brings the store's other settings; a relation table of its own that is not the
    schema's would make data the runtime disagrees with."""
    memory = tmp_path / "memory.yaml"
    memory.write_text("fuzzy: {threshold: 0.6}\n")
    data = copy.deepcopy(base) | {"memory_config": str(memory)}
    config = DataConfig.from_dict(data)
    from data_gen.data_config import memory_table

    table = memory_table(config)
    assert table.fuzzy.threshold == 0.6 and "employed by" in table.relation_names
    memory.write_text("relations:\n  - {name: employed by, functional: subject}\n")
    assert "memory_config: its relations differ from the schema" in invalid(data)


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


def test_an_error_says_which_override_set_the_field(tmp_path):
    """The error names the config file; a field set on the command line says so, where the file does not."""
    with pytest.raises(ConfigError) as err:
        DataConfig.load(TINY, ["mix.read=-1", "seed=3"])
    lines = str(err.value).splitlines()
    assert str(TINY) in lines[0]
    assert lines[1].startswith("  mix.read: ") and lines[1].endswith("(set by override mix.read=-1)")
