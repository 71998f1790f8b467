"""The phrase bank of realistic statements (data_gen/passages.yaml, or `passages.bank`), validated as it
loads: a typo is an error naming its field, and a template that would state two different facts is
refused. data_gen/passages.py puts its pieces together into passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from data_gen.text import check_templates
from memory_runtime.yaml_config import ConfigError, Strict, read_mapping

ORG_KINDS = ("company", "university", "party", "club", "agency", "ngo", "media", "band", "team")
NAME_FORMS = ("plain", "middle_initial", "middle_name", "title", "suffix")
_FACT_SLOTS = {"per", "org", "job", "job_a", "role", "year", "year2", "city", "weekday"}
_DISTRACTOR_SLOTS = {"city", "year", "org2", "weekday"}
_NEGATIVE_SLOTS = {"per", "per2", "org", "org2", "city", "year", "pron", "product", "weekday"}
_ORG_NAME_SLOTS = {"city", "country", "field", "surname", "adjective"}
_APPOSITION_SLOTS = {"descriptor", "descriptor_a", "city", "country"}
_TEMPLATE_SLOTS = ("vp", "s", "app", "pre", "list_vp", "list_app", "plural_vp", "plural_s", "org_rel")


def _check(templates: list[str], allowed: set[str], required: set[str] = frozenset()) -> list[str]:
    return check_templates(templates, allowed, set(required))


class NameBank(Strict):
    forms: dict[str, float]
    titles: list[str] = Field(min_length=1)
    suffixes: list[str] = Field(min_length=1)

    @field_validator("forms")
    @classmethod
    def _forms(cls, value: dict[str, float]) -> dict[str, float]:
        for form, weight in value.items():
            if form not in NAME_FORMS:
                raise ValueError(f"unknown name form {form!r}; known: {', '.join(NAME_FORMS)}")
            if weight < 0:
                raise ValueError(f"{form}: weight must be >= 0")
        if not any(value.values()):
            raise ValueError("every weight is 0")
        return value


class OrgKind(Strict):
    weight: float = Field(ge=0)
    names: list[str] = []
    noun: str | None = None  # how news refers back to it after naming it ("the company"); null: by name

    _names = field_validator("names")(lambda cls, v: _check(v, _ORG_NAME_SLOTS))


class Words(Strict):
    cities: list[str] = Field(min_length=1)
    countries: list[str] = Field(min_length=1)
    fields: list[str] = Field(min_length=1)
    adjectives: list[str] = Field(min_length=1)
    jobs: list[str] = Field(min_length=1)
    products: list[str] = Field(min_length=1)
    pronouns: list[str] = Field(min_length=1)
    roles: list[str] = Field(min_length=1)
    weekdays: list[str] = Field(min_length=1)
    # organisation kind -> what the text may call one ("bank", "carmaker"); kinds not listed: none
    descriptors: dict[str, list[str]] = {}

    @field_validator("descriptors")
    @classmethod
    def _descriptors(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for kind in value:
            if kind not in ORG_KINDS:
                raise ValueError(f"unknown organisation kind {kind!r}; known: {', '.join(ORG_KINDS)}")
        return value


class TemplateGroup(Strict):
    kinds: list[str] = Field(min_length=1)
    vp: list[str] = Field(min_length=1)
    s: list[str] = []
    app: list[str] = []
    pre: list[str] = []
    list_vp: list[str] = []  # {orgs}: two or three organisations, "both A and B" / "A, B and C"
    list_app: list[str] = []
    plural_vp: list[str] = []  # after "{per} and {per2}": agrees with a plural subject
    plural_s: list[str] = []  # {per} is "Jane Roe and Karl Berg"
    org_rel: list[str] = []  # after "{org}, ": "which {per} founded in {year}", "where {per} works"

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: list[str]) -> list[str]:
        for kind in value:
            if kind not in ORG_KINDS:
                raise ValueError(f"unknown organisation kind {kind!r}; known: {', '.join(ORG_KINDS)}")
        return value

    _vp = field_validator("vp", "app", "pre", "plural_vp")(lambda cls, v: _check(v, _FACT_SLOTS - {"per"}, {"org"}))
    _s = field_validator("s", "plural_s")(lambda cls, v: _check(v, _FACT_SLOTS, {"per", "org"}))
    _list = field_validator("list_vp", "list_app")(
        lambda cls, v: _check(v, _FACT_SLOTS - {"per", "org"} | {"orgs"}, {"orgs"})
    )
    _org_rel = field_validator("org_rel")(lambda cls, v: _check(v, _FACT_SLOTS - {"org"}, {"per"}))


class RelationBank(Strict):
    weight: float = Field(1.0, ge=0)
    groups: list[TemplateGroup] = Field(min_length=1)


class Distractors(Strict):
    vp: list[str] = Field(min_length=1)
    plural_vp: list[str] = Field(min_length=1)
    openers: list[str] = []
    trailers: list[str] = []
    reported: list[str] = []  # what an organisation says a person did or will do: "would lead the team in {city}"
    org_vp: list[str] = []  # what an organisation did: "{org}, which ..., <org_vp>."
    org_lead: list[str] = []  # words before an organisation, someone with no relation to it: "{per2} visited"
    org_apposition: list[str] = []  # after an organisation's name: "{descriptor_a} based in {city}"

    _check = field_validator("vp", "plural_vp", "openers", "trailers", "reported", "org_vp")(
        lambda cls, v: _check(v, _DISTRACTOR_SLOTS)
    )
    _lead = field_validator("org_lead")(lambda cls, v: _check(v, _DISTRACTOR_SLOTS | {"per2"}))
    _apposition = field_validator("org_apposition")(lambda cls, v: _check(v, _APPOSITION_SLOTS))


class CombinedRole(Strict):
    """One title that states several relations of one person to one organisation ("founder and
    chief executive of {org}"): one write per relation, in the order of `relations`, which is the
    order the title names them. A title may state one relation only ("president and CEO of {org}":
    the bank has no president relation)."""

    relations: list[str] = Field(min_length=1, max_length=2)
    kinds: list[str] = Field(min_length=1)
    vp: list[str] = []
    app: list[str] = []
    pre: list[str] = []

    _vp = field_validator("vp", "app", "pre")(lambda cls, v: _check(v, _FACT_SLOTS - {"per"}, {"org"}))


class Biography(Strict):
    """A Wikipedia first sentence: "{per} ({born}) is {a nationality} {profession}, <roles>."."""

    professions: list[str] = Field(min_length=1)
    roles: list[str] = []  # roles that name no organisation ("a philanthropist"): no write

    _check = field_validator("professions", "roles")(lambda cls, v: _check(v, set()))


class News(Strict):
    """How news reports a fact through an organisation that speaks ({speaker})."""

    intros: list[str] = []  # before the person: "In a statement on {weekday}, {speaker} said that"
    sources: list[str] = []  # after the fact: "{speaker} said in a statement"

    _check = field_validator("intros", "sources")(lambda cls, v: _check(v, {"speaker", "weekday"}, {"speaker"}))


class PassageBank(Strict):
    """data_gen/passages.yaml, validated: a typo is an error naming the field."""

    what = "passage bank"

    names: NameBank
    organisations: dict[str, OrgKind]
    words: Words
    relations: dict[str, RelationBank] = Field(min_length=1)
    distractors: Distractors
    news: News = News()
    combined_roles: list[CombinedRole] = []
    biography: Biography | None = None
    negatives: list[str] = Field(min_length=1)

    _negatives = field_validator("negatives")(lambda cls, v: _check(v, _NEGATIVE_SLOTS))

    @model_validator(mode="after")
    def _consistent(self) -> PassageBank:
        for kind, spec in self.organisations.items():
            if kind not in ORG_KINDS:
                raise ValueError(f"organisations.{kind}: unknown kind; known: {', '.join(ORG_KINDS)}")
            if kind != "company" and spec.weight and not spec.names:
                raise ValueError(f"organisations.{kind}.names: needed (only companies come from the pool)")
        stated: dict[tuple[str, str], str] = {}  # (template, kind) -> the relation it states, in any slot
        for name, rel in self.relations.items():
            for i, group in enumerate(rel.groups):
                for kind in group.kinds:
                    if kind not in self.organisations:
                        raise ValueError(f"relations.{name}.groups[{i}].kinds: {kind!r} is not under organisations")
                    for slot in _TEMPLATE_SLOTS:
                        for template in getattr(group, slot):
                            other = stated.setdefault((template, kind), name)
                            if other != name:  # the same text would be trained as two different facts
                                raise ValueError(
                                    f"relations.{name}.groups[{i}].{slot}: {template!r} also states "
                                    f"{other!r} for kind {kind!r}"
                                )
        for i, role in enumerate(self.combined_roles):
            name = " and ".join(role.relations)
            for relation in role.relations:
                if relation not in self.relations:
                    raise ValueError(f"combined_roles[{i}].relations: {relation!r} is not under relations")
                kinds = {k for g in self.relations[relation].groups for k in g.kinds}
                if missing := [k for k in role.kinds if k not in kinds]:
                    raise ValueError(f"combined_roles[{i}].kinds: {relation!r} has no templates for {missing[0]!r}")
            for slot in ("vp", "app", "pre"):
                for template in getattr(role, slot):
                    for kind in role.kinds:
                        other = stated.setdefault((template, kind), name)
                        if other != name:
                            raise ValueError(
                                f"combined_roles[{i}].{slot}: {template!r} also states {other!r} for kind {kind!r}"
                            )
        return self

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Sequence[str] = ()) -> PassageBank:
        """The bank at `path` (None: the one shipped with data_gen, validated once per process)."""
        if path is None and not overrides:
            return _shipped_bank()
        return super().load(path, overrides)

    @classmethod
    def read_yaml(cls, path: Path | None) -> dict:
        if path is None:
            import yaml

            return yaml.safe_load(resources.files("data_gen").joinpath("passages.yaml").read_text(encoding="utf-8"))
        if not path.is_file():
            raise ConfigError(f"passage bank {path} does not exist")
        return read_mapping(path, cls.what)


@lru_cache(maxsize=1)
def _shipped_bank() -> PassageBank:
    return PassageBank.from_dict(PassageBank.read_yaml(None), source="data_gen/passages.yaml")
