"""`memlm schema check` and `memlm schema table`: a schema (data_gen/schema.py) validated, shown by a
sample of what it generates, and the memory's relation table derived from it."""

from __future__ import annotations

from pathlib import Path

import typer

from memlm.cli.common import app, fail, find_config, log

schema_app = typer.Typer(
    help="Schemas: the entity types and relations generated data is about (configs/schema/*.yaml).",
    no_args_is_help=True,
)
app.add_typer(schema_app, name="schema")

SCHEMA = typer.Argument(
    ..., help="A schema YAML, or a shipped one's name (schema/person-organisation).", show_default=False
)


@schema_app.command("check")
def schema_check(
    schema: Path = SCHEMA,
    records: int = typer.Option(12, "--records", min=1, max=1000, help="How many sample records to generate."),
    seed: int = typer.Option(0, "--seed", help="The sample's seed."),
) -> None:
    """Validate a schema (every error names its field), then print its types and relations and a sample
    of the records and an episode `memlm generate` makes from it (the tiny data config on the schema)."""
    from data_gen.generate import schema_sample

    path = find_config(schema, "schema")
    try:
        config, sample, episodes = schema_sample(path, records, seed=seed)
    except ValueError as err:
        fail(err)
    spec = config.data_schema
    print(f"schema {spec.name} ({path}): valid")
    if config.fitted_to_schema:
        print("  a recipe on it leaves out: " + "; ".join(config.fitted_to_schema))
    for name, kind in spec.types.items():
        print(f"  type {name}: pool {kind.pool}; names from {', '.join(map(_source, kind.names))}")
    for rel in spec.relations:
        notes = [f"{rel.subject} -> {rel.object}", f"functional {rel.functional}" if rel.functional else ""]
        notes.append("symmetric" if rel.symmetric else "")
        notes += [f"{len(rel.aliases)} aliases" if rel.aliases else "", "" if rel.in_table else "not in the table"]
        notes += ["templated" if rel.phrased and rel.weight else "passages and real text only"]
        print(f"  relation {rel.name}: {'; '.join(n for n in notes if n)}")
    print(f"\nsample ({records} records, seed {seed}):")
    for record in sample:
        print(f"\n[{record.type}{'/' + record.shape if record.shape else ''}]")
        for segment in record.segments:
            who = {"user": "user ", "assistant": "model", "memory": "memory"}[segment.role]
            print(f"  {who}: {segment.text.strip()}")
    for episode in episodes:
        print(f"\n[episode] {len(episode.turns)} turns")
        for turn in episode.turns:
            print(f"  {turn.kind:<9} {turn.user}")


def _source(source) -> str:
    if source.faker is not None:
        return f"faker {source.faker}"
    if source.shipped is not None:
        return f"shipped list {source.shipped}"
    return f"file {source.file}" if source.file is not None else f"{len(source.names)} names"


@schema_app.command("table")
def schema_table(
    schema: Path = SCHEMA,
    out: Path | None = typer.Option(None, "--out", help="Write the memory config here (default: stdout)."),
) -> None:
    """The memory's relation table of a schema as a memory config (names, aliases, functional, ends): give it
    as `memory_config` to chat, serve, eval and self-instruct, so the runtime treats relations as the data did."""
    import yaml

    from data_gen.schema import Schema

    try:
        spec = Schema.load(find_config(schema, "schema"))
    except ValueError as err:
        fail(err)
    text = f"# the relation table of the schema {spec.name} (memlm schema table)\n" + yaml.safe_dump(
        {"relations": spec.table()}, sort_keys=False, allow_unicode=True, width=110
    )
    if out is None:
        print(text, end="")
    else:
        out.write_text(text, encoding="utf-8")
        log(f"wrote {out}")
