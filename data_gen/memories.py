"""The memories records are asked about, and how they are sampled.

Everything about the world comes from the schema (data_gen/schema.py): relations, their subject
and object types. Memories are sampled over the split's pools (one per type): a planted two-hop
chain among random statements (distractors), each subject holding at most
`world.relations_per_person` facts, functional relations never contradicted. One memory serves up
to `memory.reuse` records (reads, unanswerable and two-hop questions never ask the same query twice;
an update is its last use), which divides the cost of writing memories into the store.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from data_gen.data_config import DataConfig
from data_gen.oracle import MemoryOracle, Session
from data_gen.schema import Relation
from data_gen.world import Pool
from memory_runtime.protocol import Triplet

Query = tuple[str | None, str | None, str | None]


def query_of(shape: str, fact: Triplet) -> Query:
    """The read query of a shape, taken from a fact (None = wildcard)."""
    s, r, o = fact
    return {
        "per": (s, None, None),
        "per_org": (s, None, o),
        "per_rel": (s, r, None),
        "org": (None, None, o),
        "rel": (None, r, None),
        "rel_org": (None, r, o),
        "per_rel_org": (s, r, o),
    }[shape]


@dataclass(frozen=True)
class Rel:
    """A relation as the generator uses it: its phrasings and how the store treats it."""

    cfg: Relation
    functional: str | None  # 'subject' / 'object' / 'both' / None, from the schema's relation table

    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def one_subject(self) -> bool:
        """An object has one subject at a time (a newer one supersedes: one CEO per organisation)."""
        return self.functional in ("object", "both")

    @property
    def one_object(self) -> bool:
        """A subject has it to one object at a time (one employer per person)."""
        return self.functional in ("subject", "both")


@dataclass
class Group:
    """One statement of memory: subjects with the same relation to one object."""

    rel: Rel
    obj: str
    subjects: list[str]


@dataclass
class Scene:
    """A memory under construction, as the statements that were made, in order."""

    groups: list[Group] = field(default_factory=list)
    n_facts: int = 0
    facts_of: Counter = field(default_factory=Counter)  # subject -> facts
    subject_types: dict = field(default_factory=dict)  # subject -> its type
    held: set = field(default_factory=set)  # (subject, relation) of one_object relations
    filled: set = field(default_factory=set)  # (object, relation) of one_subject relations
    facts: set = field(default_factory=set)
    objects: dict = field(default_factory=dict)  # object -> its type, in the order first stated
    locked: set = field(default_factory=set)  # subjects who must get no further fact

    def add(self, group: Group, at: int | None = None) -> None:
        self.groups.insert(len(self.groups) if at is None else at, group)
        self.n_facts += len(group.subjects)
        for p in group.subjects:
            self.facts_of[p] += 1
            self.subject_types[p] = group.rel.cfg.subject
            self.facts.add((p, group.rel.name, group.obj))
            if group.rel.one_object:
                self.held.add((p, group.rel.name))
        if group.rel.one_subject:
            self.filled.add((group.obj, group.rel.name))
        self.objects.setdefault(group.obj, group.rel.cfg.object)

    def memory(self) -> list[Triplet]:
        return [(p, g.rel.name, g.obj) for g in self.groups for p in g.subjects]

    def subjects_of(self, type_name: str) -> list[str]:
        return [p for p in self.facts_of if self.subject_types[p] == type_name]

    def objects_of(self, type_name: str) -> list[str]:
        return [o for o, t in self.objects.items() if t == type_name]


@dataclass
class Memory:
    """A sampled memory and its store namespace, shared by up to `memory.reuse` records."""

    scene: Scene
    facts: list[Triplet]
    session: Session
    uses: int
    asked: set = field(default_factory=set)  # queries already asked of it (no record repeats another)


class MemorySampler:
    """Draws relations, fresh names and memories for one split's records; all randomness comes from `rng`,
    the record builder's."""

    def __init__(
        self,
        config: DataConfig,
        pool: Pool,
        oracle: MemoryOracle,
        rng: random.Random,
        by_name: dict[str, Rel],
        rels: list[Rel],
        pairs: list[tuple[Rel, Rel]],
    ) -> None:
        self.config = config
        self.pool = pool
        self.oracle = oracle
        self.rng = rng
        self.rels = rels  # those of weight > 0
        self.pairs = pairs  # the two-hop chains' relations: (first, second)
        self.pairs_by_first: dict[str, list[tuple[Rel, Rel]]] = {}
        for first, second in self.pairs:
            self.pairs_by_first.setdefault(first.name, []).append((first, second))
        self.plant_chains = bool(self.pairs) and config.mix.two_hop > 0  # two-hop records need a chain
        self._memory: Memory | None = None
        # the roles each type plays in templated facts: a fresh name is one the memory holds in none
        self.roles: dict[str, set[str]] = {}
        for rel in by_name.values():
            self.roles.setdefault(rel.cfg.subject, set()).add("subject")
            self.roles.setdefault(rel.cfg.object, set()).add("object")

    def pick_rel(self, among: list[Rel] | None = None, exclude: Rel | None = None) -> Rel:
        rels = [r for r in (self.rels if among is None else among) if r is not exclude]
        return self.rng.choices(rels, weights=[r.cfg.weight for r in rels])[0]

    def fresh(self, scene: Scene, type_name: str, avoid: str | None = None) -> str:
        """A name of the type the memory does not hold in any role the type plays, and not `avoid` (the
        other side of the fact being made, where both sides are of one type: "sibling of")."""
        roles = self.roles.get(type_name, set())
        for _ in range(10_000):  # a memory of `room` facts leaves names free: this ends within a few draws
            name = self.rng.choice(self.pool.names[type_name])
            held = ("subject" in roles and name in scene.facts_of) or ("object" in roles and name in scene.objects)
            if not held and name != avoid:
                return name
        raise ValueError(
            f"world.names.{type_name}: every one of its {len(self.pool.names[type_name])} names of the "
            f"{self.pool.split} split is held by the memory being made; give the schema's types.{type_name} more names"
        )

    def fresh_subject(self, scene: Scene, rel: Rel, avoid: str | None = None) -> str:
        return self.fresh(scene, rel.cfg.subject, avoid)

    def fresh_object(self, scene: Scene, rel: Rel, avoid: str | None = None) -> str:
        return self.fresh(scene, rel.cfg.object, avoid)

    def subject_for(self, scene: Scene, rel: Rel, obj: str, taken: list[str]) -> str:
        """A subject who may take (rel, obj): usually a new one; with several facts per subject allowed,
        sometimes one already in memory."""
        if self.config.world.relations_per_person > 1 and self.rng.random() < 0.5:
            limit = self.config.world.relations_per_person
            candidates = [
                p
                for p in scene.subjects_of(rel.cfg.subject)
                if scene.facts_of[p] < limit
                and p not in scene.locked
                and p not in taken
                and p != obj
                and (p, rel.name, obj) not in scene.facts
                and not (rel.one_object and (p, rel.name) in scene.held)
            ]
            if candidates:
                return self.rng.choice(candidates)
        while True:
            p = self.fresh_subject(scene, rel, avoid=obj)
            if p not in taken:
                return p

    def group_size(self, rel: Rel, budget: int, cap: int) -> int:
        return 1 if rel.one_subject else self.rng.randint(1, max(1, min(cap, budget)))

    def random_group(self, scene: Scene, budget: int, exclude: Rel | None = None) -> Group:
        rel = self.pick_rel(exclude=exclude)
        objects = scene.objects_of(rel.cfg.object)
        if objects and self.rng.random() < self.config.memory.org_reuse:
            obj = self.rng.choice(objects)
        else:
            obj = self.fresh_object(scene, rel)
        if rel.one_subject and (obj, rel.name) in scene.filled:
            obj = self.fresh_object(scene, rel)
        subjects: list[str] = []
        for _ in range(self.group_size(rel, budget, self.config.memory.max_group)):
            subjects.append(self.subject_for(scene, rel, obj, subjects))
        return Group(rel, obj, subjects)

    def fill(self, scene: Scene, n: int, exclude: Rel | None = None) -> Scene:
        """`scene` with facts up to `n`, of any relation but `exclude` (a schema of that one relation: none)."""
        if all(r is exclude for r in self.rels):
            return scene
        while scene.n_facts < n:
            scene.add(self.random_group(scene, n - scene.n_facts, exclude))
        return scene

    def n_facts(self) -> int:
        return self.rng.randint(self.config.memory.min_facts, self.room)

    @cached_property
    def room(self) -> int:
        """The most facts a sampled memory holds: memory.max_facts, or fewer where a type has few names (a
        schema's ten projects), so that two of every type stay free for a fresh fact (a larger memory left no
        project unheld, and drawing a fresh one never ended)."""
        most = self.config.memory.max_facts
        smallest = min((len(names) for names in self.pool.names.values() if names), default=most)
        return max(self.config.memory.min_facts, min(most, smallest - 2))

    def shuffle_in(self, scene: Scene, group: Group) -> None:
        """Move `group` to a random place in the order of statements."""
        scene.groups.remove(group)
        scene.groups.insert(self.rng.randint(0, len(scene.groups)), group)

    def plant_two_hop(self, scene: Scene, first: Rel, second: Rel) -> list[Group]:
        """Add 'people <second> org' and 'person <first> org' (the person has no other fact)."""
        org = self.fresh_object(scene, second)
        people: list[str] = []
        for _ in range(self.group_size(second, self.config.memory.max_group, self.config.memory.max_group)):
            people.append(self.subject_for(scene, second, org, people))
        person = self.fresh_subject(scene, first, avoid=org)
        groups = [Group(second, org, people), Group(first, org, [person])]
        for group in groups:
            scene.add(group)
        scene.locked.add(person)
        return groups

    # ------------------------------------------------------------------ shared memories

    def memory_context(self) -> Memory:
        """The current shared memory (a new one when the last is used up): a two-hop chain planted
        among random statements. Reads, unanswerable and two-hop questions share it; an update
        changes it, so it is its last use."""
        m = self._memory
        if m is None or m.uses <= 0:
            scene = Scene()
            planted = self.plant_two_hop(scene, *self.rng.choice(self.pairs)) if self.plant_chains else []
            self.fill(scene, self.n_facts())
            for group in planted:
                self.shuffle_in(scene, group)
            facts = scene.memory()
            m = self._memory = Memory(scene, facts, self.oracle.open(facts), self.config.memory.reuse)
        m.uses -= 1
        return m

    def retire(self) -> None:
        if self._memory is not None:
            self._memory.uses = 0

    def chains(self, facts: list[Triplet]) -> list[tuple[Triplet, Rel, Rel]]:
        """Two-hop chains in current facts: (person's only `first` fact, first, second) such that the
        organisation has `second` holders and the person is not one of them."""
        holders = Counter((r, o) for _, r, o in facts)
        firsts = Counter((s, r) for s, r, _ in facts)
        fact_set = set(map(tuple, facts))
        return [
            (f, first, second)
            for f in facts
            for first, second in self.pairs_by_first.get(f[1], ())
            if firsts[(f[0], f[1])] == 1 and holders[(second.name, f[2])] and (f[0], second.name, f[2]) not in fact_set
        ]
