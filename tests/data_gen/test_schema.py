"""The schema (data_gen/schema.py): the shipped person–organisation schema makes the records of before,
the memory's relation table is derived from it, bad schemas are errors naming their field, another
shape of schema generates, and `memlm schema check|table`."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
import yaml
from typer.testing import CliRunner

from data_gen.data_config import DataConfig
from data_gen.fitting import load_fitted
from data_gen.generate import generate_records
from data_gen.schema import PERSON_ORGANISATION, Schema
from memlm.cli import app
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.yaml_config import ConfigError

from .conftest import DEFAULT, REPO, TINY

SCHEMAS = REPO / "tests" / "data_gen" / "schemas"
PEOPLE_PLACES = SCHEMAS / "people-places.yaml"
runner = CliRunner()

# sha256 (first 16 hex digits) of the JSONL lines `memlm generate` writes and of world.json, made at
# commit ac3d3d5, before schemas existed (the person–organisation code of data_gen)
BEFORE_SCHEMAS = {
    "tiny, seed 0": (
        TINY,
        ["seed=0"],
        {
            "train": "14259b5c78df4b60",
            "validation": "fb8f0654b82d2574",
            "test": "98a0e058ace572aa",
            "episodes": "ad636fae8d91c863",
            "world": "afe72934ee6c49b5",
        },
    ),
    "default with real text and verify, smaller, seed 7": (
        DEFAULT,
        ["seed=7", "splits.train=3000", "splits.validation=300", "splits.test=300", "episodes.count=20"],
        {
            "train": "cd9057a390acb859",
            "validation": "73554c8d561cd0e9",
            "test": "d81b1bb2b2f9621f",
            "episodes": "8f8fcf2f8f925c6a",
            "world": "da245e997fd07e32",
        },
    ),
}


def digests(config: DataConfig) -> dict[str, str]:
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    world, splits, episodes = generate_records(config)
    out = {split: sha("".join(r.model_dump_json() + "\n" for r in records)) for split, records in splits.items()}
    out["episodes"] = sha("".join(e.model_dump_json() + "\n" for e in episodes))
    out["world"] = sha(json.dumps(world.to_dict(), ensure_ascii=False, indent=1) + "\n")
    return out


@pytest.mark.parametrize("name", list(BEFORE_SCHEMAS))
def test_the_shipped_schema_makes_the_records_of_before(name):
    path, overrides, expected = BEFORE_SCHEMAS[name]
    assert digests(DataConfig.load(path, overrides)) == expected
    named = DataConfig.load(path, [*overrides, f"schema_file={PERSON_ORGANISATION}"])  # --schema, spelled out
    assert digests(named) == expected


def test_the_memory_relation_table_is_the_shipped_schemas():
    """memory_runtime/memory/relations.yaml, the runtime's default table, is what the schema derives."""
    derived = MemoryConfig.model_validate({"relations": Schema.load().table()}).relations
    assert derived == MemoryConfig.load().relations


def test_schema_loads_and_says_what_it_generates():
    schema = Schema.load()
    assert list(schema.types) == ["person", "organisation"]
    assert [r.name for r in schema.phrased()][:2] == ["employed by", "manager of"]
    assert schema.relation("CEO of").functional == "object" and not schema.relation("coached").in_table
    assert "coached" not in [entry["name"] for entry in schema.table()]
    other = Schema.load(PEOPLE_PLACES)
    assert other.types["city"].names[0].listed()[:2] == ["Paris", "Lyon"]  # a file relative to the schema


# ----------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(PEOPLE_PLACES.read_text())


def error(data: dict) -> str:
    with pytest.raises(ConfigError) as err:
        Schema.from_dict(data, base_dir=SCHEMAS, source="mine.yaml")
    message = str(err.value)
    assert message.startswith("invalid schema mine.yaml:\n  ")
    return message.split("\n", 1)[1].strip()  # the line that names the field


def test_a_relation_naming_an_unknown_type(raw):
    data = copy.deepcopy(raw)
    data["relations"][1]["object"] = "town"
    assert error(data) == "relations.1.object: unknown type 'town'; types: person, city, food"


def test_two_relations_sharing_an_alias(raw):
    data = copy.deepcopy(raw)
    data["relations"][1]["aliases"].append("Resides  in")  # as 'lives in' has it, after normalisation
    assert error(data).startswith("relations.1.aliases: 'Resides  in' is also a name or alias of 'lives in'")
    data = copy.deepcopy(raw)
    data["relations"][2]["aliases"].append("born in")  # another relation's name
    assert error(data).startswith("relations.2.aliases: 'born in' is also a name or alias of 'born in'")


def test_a_phrasing_with_an_unknown_slot(raw):
    data = copy.deepcopy(raw)
    data["relations"][0]["questions"]["rel_org"].append("Who lives in {city}?")
    message = error(data)
    assert message.startswith("relations.0.questions.rel_org: template [1] 'Who lives in {city}?': unknown placeholder")
    data = copy.deepcopy(raw)
    data["negatives"].append("{place} is far away.")
    assert "negatives: template [3]" in error(data) and "{place}" in error(data)
    data = copy.deepcopy(raw)
    data["relations"][0]["statements"]["singular"] = ["{subject} lives somewhere."]
    assert "missing placeholder {object}" in error(data)


def test_an_empty_name_source(raw, tmp_path):
    data = copy.deepcopy(raw)
    data["types"]["food"]["names"] = [{"names": []}]
    assert error(data) == "types.food.names.0: empty: no names in the list"
    data["types"]["food"]["names"] = [{"faker": "just words"}]
    assert error(data).startswith("types.food.names.0.faker: 'just words' names no Faker provider")
    data["types"]["food"]["names"] = [{"faker": "{favourite_food}"}]
    assert error(data) == "types.food.names.0.faker: unknown Faker provider {favourite_food}"
    data["types"]["food"]["names"] = [{"faker": "{favourite_food}"}, {"shipped": "foods"}]  # two problems, two lines
    with pytest.raises(ConfigError) as err:
        Schema.from_dict(data, base_dir=SCHEMAS, source="mine.yaml")
    assert str(err.value).splitlines()[1:] == [
        "  types.food.names.0.faker: unknown Faker provider {favourite_food}",
        "  types.food.names.1.shipped: no list 'foods'; shipped lists: companies",
    ]
    empty = tmp_path / "none.txt"
    empty.write_text("# nothing yet\n\n")
    data["types"]["food"]["names"] = [{"file": str(empty)}]
    assert error(data) == f"types.food.names.0: empty: no names in {empty}"
    data["types"]["food"]["names"] = []
    assert error(data).startswith("types.food.names: List should have at least 1 item")


def test_a_functional_relation_with_several_in_one_statement(raw):
    data = copy.deepcopy(raw)
    data["relations"][3]["functional"] = "object"  # one sibling per person, yet "A and B are X's siblings"
    assert error(data).startswith("relations.3.statements.plural: 'sibling of' is functional (object: one subject")


def test_other_schema_errors_name_their_field(raw):
    data = copy.deepcopy(raw)
    data["relations"][2]["updates"] = ["{subject} grew out of {old} and now reacts to {object}."]
    assert error(data).startswith("relations.2.updates: 'allergic to' is not functional")
    data = copy.deepcopy(raw)
    data["relations"][0]["ends"] = ["moved to"]
    assert error(data).startswith("relations.0.ends: 'moved to' is not a relation")
    data = copy.deepcopy(raw)
    data["implied_together"] = [["lives in", "grew up in"]]
    assert error(data) == "implied_together.0: unknown relation 'grew up in'"


def test_a_data_config_that_asks_more_than_its_schema_gives(tmp_path, raw):
    """A config file that names its schema and asks what the schema cannot give (a two-hop question needs a
    way to name the middle object) is an error naming the schema's field, before anything is generated; the
    same recipe put on the schema from outside (`--schema`) leaves two-hop out and says why."""
    data = copy.deepcopy(raw)
    del data["types"]["city"]["by_clause"]
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(data))
    (tmp_path / "cities.txt").write_text((SCHEMAS / "cities.txt").read_text())
    own = tmp_path / "data.yaml"
    own.write_text(yaml.safe_dump({"base": str(TINY), "schema_file": "schema.yaml"}))
    with pytest.raises(ConfigError, match=r"types\.city\.by_clause: needed by two-hop questions"):
        DataConfig.load(own, _names_for_people_places())
    fitted = load_fitted(TINY, [f"schema_file={schema}", *_names_for_people_places()])
    assert fitted.mix.two_hop == 0 and fitted.episodes.two_hop == 0
    assert any("two-hop" in note and "types.{city}.by_clause" in note for note in fitted.fitted_to_schema)


# ----------------------------------------------------------------------------- another shape


def _names_for_people_places() -> list[str]:
    return [
        "world.names={person: {train: 60, validation: 20, test: 20}, city: {}, food: {}}",
        "mix.passage=0",
        "passages.hard_negatives=0",
    ]


def test_a_schema_of_another_shape_generates():
    """People, cities from a file, foods listed inline, a person–person relation: the generators read
    the schema, and every fact joins the types its relation names."""
    config = DataConfig.load(TINY, [f"schema_file={PEOPLE_PLACES}", *_names_for_people_places()])
    world, splits, episodes = generate_records(config)
    assert set(world.to_dict()) == {"people", "cities", "foods", "test_only_cities", "test_only_foods"}
    schema = config.data_schema
    records = [r for records in splits.values() for r in records]
    kinds = {r.type for r in records}
    assert {"write", "read", "unanswerable", "update", "two_hop", "negative"} <= kinds
    for r in records:
        pool = world.pools[r.split].names
        for s, rel, o in [*r.memory, *r.gold_triplets]:
            spec = schema.relation(rel)
            assert s in pool[spec.subject] and o in pool[spec.object] and s != o, (r.id, s, rel, o)
    assert any(t[1] == "sibling of" for r in records for t in r.gold_triplets)
    assert any("the city where" in r.segments[0].text for r in records if r.type == "two_hop")
    assert episodes and all(t.user for e in episodes for t in e.turns)


# ----------------------------------------------------------------------------- the commands


def test_schema_check_prints_the_schema_and_a_sample():
    result = runner.invoke(app, ["schema", "check", str(PEOPLE_PLACES), "--records", "20"])
    assert result.exit_code == 0, result.output
    assert "schema people-places" in result.output and ": valid" in result.output
    assert "relation sibling of: person -> person" in result.output
    assert "[write]" in result.output and "MEM_WRITE{" in result.output and "[episode]" in result.output
    shipped = runner.invoke(app, ["schema", "check", "person-organisation", "--records", "5"])
    assert shipped.exit_code == 0 and "relation CEO of: person -> organisation; functional object" in shipped.output


def test_a_symmetric_relation_joins_two_of_one_type(raw):
    data = copy.deepcopy(raw)
    data["relations"][0]["symmetric"] = True  # lives in: a person and a city
    with pytest.raises(ConfigError, match="relations.0.symmetric: 'lives in' joins person to city"):
        Schema.from_dict(data, base_dir=SCHEMAS)
    table = Schema.load(REPO / "configs/schema/people-places-things.yaml").table()
    assert {e["name"] for e in table if e.get("symmetric")} == {"spouse of", "sibling of", "colleague of"}


def test_schema_check_names_the_bad_field(tmp_path, raw):
    data = copy.deepcopy(raw)
    data["relations"][0]["subject"] = "persons"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["schema", "check", str(bad)])
    assert result.exit_code == 2
    assert "relations.0.subject: unknown type 'persons'" in result.output


def test_schema_table_writes_the_memory_config(tmp_path):
    out = tmp_path / "memory.yaml"
    result = runner.invoke(app, ["schema", "table", str(PEOPLE_PLACES), "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = MemoryConfig.load(out)
    assert table.canonical_names["resides in"] == "lives in"
    assert {r.name: r.functional for r in table.relations}["lives in"] == "subject"
    shipped = runner.invoke(app, ["schema", "table", "person-organisation"])
    assert MemoryConfig.model_validate(yaml.safe_load(shipped.output)).relations == MemoryConfig.load().relations


def test_generate_takes_a_schema(tmp_path):
    out = tmp_path / "places"
    args = ["generate", "--config", str(TINY), "--schema", str(PEOPLE_PLACES), "--out", str(out)]
    result = runner.invoke(app, [*args, *_names_for_people_places(), "splits.train=40", "episodes.count=2"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((out / "config.yaml").read_text())["schema_file"] == str(PEOPLE_PLACES)
    assert yaml.safe_load((out / "schema.yaml").read_text())["name"] == "people-places"
    # the schema's relation table, which runs trained on this data keep (training.run.keep_relation_table)
    table = MemoryConfig.load(out / "relations.yaml")
    assert table.relation_names == [r.name for r in Schema.load(PEOPLE_PLACES).relations if r.in_table]
    assert "schema: people-places" in (out / "README.md").read_text()


def test_the_second_shipped_schema_makes_the_same_data_under_any_hash_seed(tmp_path):
    """people-places-things, its shipped data config, in two processes with different string hashing:
    the same bytes (Faker's it_IT town list is ordered by hashing, so that locale is left out)."""
    import os
    import subprocess
    import sys

    digests = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        args = ["--config", "people-places-things", "--out", str(out), "splits.train=200", "splits.validation=50"]
        args += ["splits.test=100", "episodes.count=5"]
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-m", "memlm", "generate", *args], env=env, check=True, capture_output=True)
        files = [*sorted((out / "jsonl").glob("*.jsonl")), out / "world.json", out / "relations.yaml"]
        digests.append([hashlib.sha256(f.read_bytes()).hexdigest() for f in files])
    assert digests[0] == digests[1]
    table = MemoryConfig.load(tmp_path / "1" / "relations.yaml")
    assert table.common_objects == {"allergic to"} and "spouse of" in table.relation_names


SHIPPED_PPT = REPO / "configs" / "schema" / "people-places-things.yaml"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["relations"][1].update(docred=["born"]), "relations.1.docred: 'born' is no Wikidata relation id"),
        (lambda d: d["relations"][5].update(docred_reversed=["P999"]), "relations.5.docred_reversed: an id here must"),
        (lambda d: d["relations"][0].update(docred_reversed=["P551"]), "relations.0.docred_reversed: the types say"),
        (lambda d: d["types"]["place"].pop("docred"), "relations.0.docred: its object type 'place' has no docred"),
        (lambda d: d["relations"][1].update(docred=["P551"]), "relations.1.docred: P551 is also an id of 'lives in'"),
    ],
)
def test_real_text_ids_in_a_schema_are_checked(change, message):
    """A schema maps (Re-)DocRED relation ids onto its relations in YAML: bad ones are one-line errors."""
    data = yaml.safe_load(SHIPPED_PPT.read_text())
    change(data)
    assert error(data).startswith(message)


def test_a_schema_of_your_own_gets_re_docred_real_text_with_no_code(tmp_path):
    """RedocredSchema.of reads a schema's docred ids: a renamed relation and a new id reach the mapping."""
    from data_gen.real_mapping import PEOPLE_PLACES, RedocredSchema, redocred_schema

    data = yaml.safe_load(SHIPPED_PPT.read_text())
    data["name"] = "my-family"
    data["relations"][0]["docred"] = ["P551", "P937"]  # also work location, as a home
    path = tmp_path / "my-family.yaml"
    path.write_text(yaml.safe_dump(data))
    mine = redocred_schema(schema=str(path))
    assert mine.name == "my-family" and mine.stem == "my_family" and mine.subject_type == "PER"
    assert mine.relations == {**PEOPLE_PLACES.relations, "P937": "lives in"}
    assert mine.object_first == {"P40"} and mine.annotated == PEOPLE_PLACES.annotated
    assert RedocredSchema.of(Schema.load(SHIPPED_PPT)) == PEOPLE_PLACES
    data["relations"] = [dict(r, docred=[], docred_reversed=[]) for r in data["relations"]]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="maps no \\(Re-\\)DocRED relation"):
        redocred_schema(schema=str(path))
