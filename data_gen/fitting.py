"""A data recipe put on a schema it was not written for: `memlm generate --schema FILE` with a shipped config
(person–organisation recipes) fits it to the schema (`load_fitted`), saying in one line what it left out.

Above data_gen.data_config (the strict config: a config file that names its own schema is checked, never fitted)
and data_gen.real (whose corpora's relations decide whether real text applies).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data_gen.data_config import SPLITS, DataConfig, PassagesConfig, RealConfig, paths_relative_to
from data_gen.schema import Schema
from memory_runtime.shipped import shipped
from memory_runtime.yaml_config import apply_overrides, blamed_on


def load_fitted(path: str | Path | None, overrides: Sequence[str] = ()) -> DataConfig:
    """`DataConfig.load`, but when an override (`--schema`) puts the recipe on a schema the file does not name,
    the recipe is fitted to it first (`fit_to_schema`; the config's `fitted_to_schema` says what changed)."""
    path = None if path is None else Path(path)
    raw = DataConfig.read_yaml(path)
    own = raw.get("schema_file")
    raw = apply_overrides(raw, overrides)
    folder = None if path is None else path.parent
    source = str(path or "defaults")
    given = any(o.split("=", 1)[0].strip() == "schema_file" for o in overrides)
    with blamed_on(overrides):
        if not given or _schema_path(raw.get("schema_file"), Path()) == _schema_path(own, folder or Path()):
            return DataConfig.from_dict(raw, base_dir=folder, source=source)
        data = copy.deepcopy(paths_relative_to(raw, folder) if folder is not None else raw)
        schema_file = data.get("schema_file")
        schema = Schema.load(schema_file if isinstance(schema_file, str) else None)
        notes = fit_to_schema(data, schema, f"schema {schema.name}")
        return DataConfig.from_dict(data, source=f"{source} fitted to schema {schema_file}", fitted=notes)


def _schema_path(value: Any, folder: Path) -> Any:
    """A schema_file value as the file it names (None: the shipped person–organisation schema)."""
    if value is None:
        return shipped("configs", "schema", "person-organisation.yaml").resolve()
    return (folder / value).resolve() if isinstance(value, str) else value


def fit_to_schema(data: dict, schema: Schema, where: str) -> list[str]:
    """Fit a data config's mapping (paths already absolute) to a schema it was not written for, in place:
    `memlm generate --schema FILE` with a shipped recipe. What the schema cannot make is left out (two-hop
    questions without a clause, updates without an updatable relation, the passage bank's or a real corpus's
    relations it lacks, several people a statement without plural phrasings) and names are drawn for its
    own types, sized as the recipe's; returns one note per change, naming what was left out and why.
    A bad field of the schema itself stays an error, naming it."""
    notes: list[str] = []
    mix, world = data.setdefault("mix", {}), data.setdefault("world", {})
    names = world.get("names") or {}
    foreign = [n for n in names if n not in schema.types]
    sized = [v for v in names.values() if isinstance(v, dict)]
    split_size = next((v for v in sized if "train" in v), {"train": 2000, "validation": 500, "test": 500})
    faker = next((v["faker"] for v in sized if v.get("faker")), 100)
    fitted = {n: v for n, v in names.items() if n in schema.types}
    for name, spec in schema.types.items():
        if name in fitted:
            continue
        if spec.pool == "split":
            fitted[name] = {k: split_size[k] for k in SPLITS}
        else:
            fitted[name] = {"faker": faker if any(s.faker for s in spec.names) else 0}
    if fitted != names:
        world["names"] = fitted
        drawn = ", ".join(
            f"{n} ({'/'.join(str(v[k]) for k in SPLITS)} a split)" if "train" in v else f"{n} (its names)"
            for n, v in fitted.items()
            if n not in names
        )
        notes.append(f"names for {drawn}" + (f" instead of {', '.join(foreign)}" if foreign else ""))

    def off(keys: list[str], why: str) -> None:
        """Set mix weights (and other dotted keys) to 0; a note when something was on."""
        changed = []
        for key in keys:
            block, _, field = key.rpartition(".")
            holder = data
            for part in block.split(".") if block else []:
                holder = holder.setdefault(part, {})
            value = holder.get(field)
            zero = {"min": 0, "max": 0} if isinstance(value, dict) else 0
            if value and value != zero:
                holder[field] = zero
                changed.append(key)
        if changed:
            notes.append(f"no {', '.join(changed)} ({why})")

    phrased = schema.phrased()
    rel_names = {r.name for r in schema.relations}
    pairs = schema.two_hop_pairs()
    if not data.get("two_hop", {}).get("pairs") and not any(schema.types[a.object].by_clause for a, _ in pairs):
        middles = sorted({a.object for a, _ in pairs})
        why = (
            f"{where} gives no types.{{{','.join(middles)}}}.by_clause to name the middle by"
            if middles
            else f"no relation of {where} has a clause and shares its object type with another"
        )
        off(["mix.two_hop", "episodes.two_hop"], f"two-hop questions: {why}")
    if not any(r.updates and r.weight for r in phrased):
        off(["mix.update", "episodes.updates"], f"updates: no relation of {where} has updates")
    if not any(r.questions.per_rel_org and r.weight for r in phrased):
        off(["shapes.per_rel_org"], f"no relation of {where} has questions.per_rel_org")
    singles = [r.name for r in phrased if r.functional not in ("object", "both") and not r.statements.plural]
    if singles:
        changed = []
        for key, block in (("max_people", "write"), ("max_group", "memory")):
            if data.setdefault(block, {}).get(key, 3) > 1:
                data[block][key] = 1
                changed.append(f"{block}.{key}")
        if changed:
            notes.append(
                f"one subject a statement: {', '.join(changed)} 1 ({', '.join(singles)}: no statements.plural)"
            )
    passages = data.setdefault("passages", {})
    hard_default = PassagesConfig.model_fields["hard_negatives"].default
    hard = mix.get("negative") and passages.get("hard_negatives", hard_default)
    bank = _bank_relations(passages.get("bank")) if mix.get("passage") or mix.get("verify") or hard else set()
    if not bank <= rel_names or len({(schema.relation(r).subject, schema.relation(r).object) for r in bank}) > 1:
        why = f"the phrase bank states {_some(bank - rel_names)}, which {where} lacks"
        off(["mix.passage", "mix.verify", "passages.hard_negatives"], f"passages and verify records: {why}")
    if not schema.negatives and mix.get("negative"):  # a schema that sets `negatives: []`
        hard = passages.get("hard_negatives", hard_default)
        if not hard:
            off(["mix.negative"], f"{where} has no negatives and the phrase bank's do not apply")
        elif hard < 1:
            passages["hard_negatives"] = 1
            notes.append(f"passages.hard_negatives 1 ({where} has no negatives of its own)")
    real = data.setdefault("real", {})
    used = mix.get("real") or (mix.get("verify") and real.get("verify", RealConfig.model_fields["verify"].default))
    lacking = {r for s in real.get("sources") or [] for r in _corpus_relations(s)} - rel_names if used else set()
    if lacking:
        off(["mix.real", "real.verify"], f"real text: its corpora state {_some(lacking)}, which {where} lacks")
    return notes


def _some(names: set[str]) -> str:
    """A few names of a set, sorted, for a one-line note."""
    ordered = sorted(names)
    return ", ".join(ordered[:3]) + (f" and {len(ordered) - 3} more" if len(ordered) > 3 else "")


def _bank_relations(bank: str | None) -> set[str]:
    from data_gen.passage_bank import PassageBank

    try:
        return set(PassageBank.load(bank).relations)
    except (OSError, ValueError):
        return set()  # a bad bank is named when the config is checked


def _corpus_relations(source: Any) -> set[str]:
    """The memory relations a real corpus's records are written in (its mapping's; a jsonl's own names are
    checked when it is read)."""
    if not isinstance(source, dict) or not isinstance(source.get("path"), str):
        return set()
    from data_gen.real_corpora import detect_format
    from data_gen.real_mapping import redocred_schema

    try:
        form = source.get("format", "auto")
        form = detect_format(source["path"]) if form == "auto" else form
    except (OSError, ValueError):
        return set()
    relations = redocred_schema(source["path"] if form == "redocred_sentences" else None).relations.values()
    return {*relations, *(source.get("relations") or {}).values()} if form != "jsonl" else set()
