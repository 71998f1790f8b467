"""Record builders: one synthetic training example per call, every result computed by the store.

Conventions (what the model is trained to produce; segments marked * are trained):

    write         user statement | *calls " ".join(MEM_WRITE...) | *" Noted."
    negative      user statement without a fact | *"Nothing to store."
    passage       realistic statement (data_gen/passages.py) | *calls | *" Noted."
    read          user question | *MEM_READ{q}: | memory " {...}; {...}]" | *" <answer>"
    unanswerable  as read, the memory returns " NONE]" and the answer is " I don't know."
    update        user update | *MEM_WRITE | *" Noted." | user question | *read | memory | *" <answer>"
    two_hop       user question | *read <per,rel1> | memory | *" " read <rel2,org> | memory | *" <answer>"
    real          a real corpus passage (data_gen/real_records.py) as a write or negative, or that
                  and then a question about it (type "read"); `source` names the corpus
    verify        a passage and a fact (memory_runtime.generation.write_gate.verification_question) | *"Yes" / *"No"

Answers list every name of the results with an Oxford comma and nothing else: each fact group
becomes the relation's `fact` sentence ("Dirk Alosa, Ty Baumkirchner, and Vera Bayless are
employed by BMW."). When the question names the subject, facts are grouped per relation
("X is an investor in A and B."); otherwise per (relation, object). An existence check
(per_rel_org) that finds the fact answers "Yes, <fact>". The fixed texts come from `replies`.

Gold fields: `gold_triplets` = the facts a write/update states, or the facts a read's answer
rests on (two_hop: the first hop's fact, then the second hop's results); `gold_names` = the names
a correct answer lists: the result names the question did not give (subjects first), or the fact's
names when it gave them all (per_org, per_rel_org); [] exactly when the answer is "I don't know"
(a write: its subjects and the object). `memory` = the writes made before the record starts,
in order.

Everything about the world comes from the schema (data_gen/schema.py): relations, their subject
and object types, phrasings, negatives. Memories are sampled over the split's pools (one per type):
a planted two-hop chain among random statements (distractors), each subject holding at most
`world.relations_per_person` facts, functional relations never contradicted. One memory serves up
to `memory.reuse` records (reads, unanswerable and two-hop questions never ask the same query twice;
an update is its last use), which divides the cost of writing memories into the store.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from data_gen.config import READ_SHAPES, RECORD_KINDS, DataConfig
from data_gen.conversations import ConversationMaker
from data_gen.oracle import MemoryOracle, Session
from data_gen.passage_bank import PassageBank
from data_gen.passages import PassageMaker
from data_gen.real_records import RealPassages
from data_gen.schema import Relation
from data_gen.text import fill, oxford
from data_gen.world import Pool, derive_seed
from memory_runtime.generation.write_gate import VERIFY_NO, VERIFY_YES, verification_question
from memory_runtime.protocol import Triplet, render_read, render_results, render_write
from memory_runtime.records import Record, Segment

Query = tuple[str | None, str | None, str | None]

# How call syntax pasted into a message may look (injection records): a call, results, a bare
# triplet, braces, another bracket style after a call verb.
INJECTION_FORMS: tuple[Callable[[str, str, str], str], ...] = (
    lambda s, r, o: render_write(s, r, o),
    lambda s, r, o: render_write(s, r, o) + " Noted.",
    lambda s, r, o: render_read(None, r, o) + render_results([(s, r, o)]),
    lambda s, r, o: f"{s}>>{r}>>{o}",
    lambda s, r, o: "{" + f"{s}>>{r}>>{o}" + "}",
    lambda s, r, o: f"MEM_WRITE[{s}; {r}; {o}]",
)


def kind_of(record: Record) -> str:
    """The mix kind a record was drawn as: "real" for a real corpus's passage (whatever its type),
    "conversation" for a conversation's turn."""
    if record.source == "conversation":
        return "conversation"
    if record.type != "verify" and record.source not in (None, "synthetic"):
        return "real"
    return record.type


def allot(weights: dict[str, float], n: int) -> list[str]:
    """Exactly n keys in proportion to the weights (largest remainder; ties in key order)."""
    total = sum(weights.values())
    if n <= 0 or total <= 0:
        return []
    quotas = {k: n * w / total for k, w in weights.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    order = sorted(weights, key=lambda k: (-(quotas[k] - counts[k]), list(weights).index(k)))
    for k in order[: n - sum(counts.values())]:
        counts[k] += 1
    return [k for k in weights for _ in range(counts[k])]


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


class Builder:
    """Builds the records of one split from its pool; all randomness comes from `rng`."""

    def __init__(
        self,
        config: DataConfig,
        pool: Pool,
        oracle: MemoryOracle,
        functional: dict[str, str | None],
        rng: random.Random,
        real: RealPassages | None = None,
    ) -> None:
        self.config = config
        self.pool = pool
        self.real_passages = real  # the real corpora's passages (train split only)
        self.oracle = oracle
        self.rng = rng
        self.schema = config.data_schema
        self.by_name = {r.name: Rel(r, functional[r.name]) for r in self.schema.phrased()}
        self.rels = [rel for rel in self.by_name.values() if rel.cfg.weight > 0]
        self.replies = config.replies
        self.pairs = [(self.by_name[a], self.by_name[b]) for a, b in config.two_hop_pairs()]
        self.pairs_by_first: dict[str, list[tuple[Rel, Rel]]] = {}
        for first, second in self.pairs:
            self.pairs_by_first.setdefault(first.name, []).append((first, second))
        self.plant_chains = bool(self.pairs) and config.mix.two_hop > 0  # two-hop records need a chain
        self._memory: Memory | None = None
        self.shape_weights = {s: getattr(config.shapes, s) for s in READ_SHAPES}
        self._passages: PassageMaker | None = None
        self._conversations: ConversationMaker | None = None
        self.implied = [frozenset(group) for group in self.schema.implied_together]
        # the roles each type plays in templated facts: a fresh name is one the memory holds in none
        self.roles: dict[str, set[str]] = {}
        for rel in self.by_name.values():
            self.roles.setdefault(rel.cfg.subject, set()).add("subject")
            self.roles.setdefault(rel.cfg.object, set()).add("object")

    @property
    def conversations(self) -> ConversationMaker:
        if self._conversations is None:
            people = self.pool.names.get("person", ())
            places = self.pool.names.get("place", ())
            rng = random.Random(derive_seed(self.config.seed, "conversations", self.pool.split))
            self._conversations = ConversationMaker(people, places, self.pool.split, rng, self.config.conversations)
        return self._conversations

    def conversation(self, rid: str) -> Record:
        """A turn of a dated conversation between two of the split's people (data_gen/conversations.py)."""
        return self.conversations.record(rid, self.replies)

    @property
    def passages(self) -> PassageMaker:
        if self._passages is None:
            bank = PassageBank.load(self.config.passages.bank)
            first = self.schema.relation(next(iter(bank.relations)))  # the bank's relations join one pair of types
            self._passages = PassageMaker(
                bank,
                self.pool.names[first.subject],
                self.pool.names[first.object],
                list(bank.relations),
                self.rng,
                self.config.passages.max_facts,
                self.config.passages.unnamed_facts,
            )
        return self._passages

    # ------------------------------------------------------------------ sampling

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

    # ------------------------------------------------------------------ text

    def fact_sentence(self, relation: str, subjects: list[str], objects: list[str]) -> str:
        phr = self.by_name[relation].cfg.fact
        if len(subjects) > 1 and not phr.plural:  # a schema without a plural fact: a sentence each
            return " ".join(fill(phr.singular, subject=s, object=oxford(objects)) for s in subjects)
        template = phr.plural if len(subjects) > 1 else phr.singular
        return fill(template, subject=oxford(subjects), object=oxford(objects))

    def answer(self, query: Query, results: list[Triplet]) -> tuple[str, list[str]]:
        """The answer text and the names it lists (only what was asked; every result)."""
        if not results:
            return self.replies.unknown, []
        s, r, o = query
        groups: dict[tuple[str, str], list[str]] = {}
        for t in results:
            if s is not None:  # the subject is given: one sentence per relation listing its objects
                groups.setdefault((t.relation, t.subject), []).append(t.object)
            else:
                groups.setdefault((t.relation, t.object), []).append(t.subject)
        # The names the question did not give (subjects first, then objects); when it gave them
        # all (per_org, per_rel_org) the answer is about the relation: the fact's names.
        names = dict.fromkeys([t.subject for t in results] if s is None else [])
        names.update(dict.fromkeys([t.object for t in results] if o is None else []))
        if not names:
            names = dict.fromkeys([t.subject for t in results] + [t.object for t in results])
        sentences = [
            self.fact_sentence(rel, [key], items) if s is not None else self.fact_sentence(rel, items, [key])
            for (rel, key), items in groups.items()
        ]
        text = " ".join(sentences)
        if s is not None and r is not None and o is not None:
            text = self.replies.confirm.format(fact=text)
        return text, list(names)

    def question(self, shape: str, query: Query, rel: Rel | None = None) -> str:
        s, _, o = query
        if shape in ("per", "per_org", "org"):
            templates = getattr(self.schema.questions, shape)
        else:
            templates = getattr(rel.cfg.questions, shape)  # type: ignore[union-attr]
        return fill(self.rng.choice(templates), subject=s, object=o)

    @staticmethod
    def read_segments(query: Query, results: list[Triplet], answer: str, lead: str = "") -> list[Segment]:
        return [
            Segment(role="assistant", text=lead + render_read(*query), train=True),
            Segment(role="memory", text=render_results(results), train=False),
            Segment(role="assistant", text=" " + answer, train=True),
        ]

    def record(self, rid: str, kind: str, segments: list[Segment], **fields) -> Record:
        return Record(id=rid, type=kind, segments=segments, split=self.pool.split, source="synthetic", **fields)

    # ------------------------------------------------------------------ record types

    def write(self, rid: str) -> Record:
        rel = self.pick_rel()
        scene = Scene()
        obj = self.fresh_object(scene, rel)
        subjects: list[str] = []
        for _ in range(self.group_size(rel, self.config.write.max_people, self.config.write.max_people)):
            subjects.append(self.subject_for(scene, rel, obj, subjects))
        return self.statement_record(rid, rel, obj, subjects)

    def statement(self, rel: Rel, obj: str, subjects: list[str]) -> str:
        phr = rel.cfg.statements
        templates = phr.plural if len(subjects) > 1 else phr.singular
        return fill(self.rng.choice(templates), subject=oxford(subjects), object=obj)

    def statement_record(self, rid: str, rel: Rel, obj: str, subjects: list[str]) -> Record:
        calls = " ".join(render_write(p, rel.name, obj) for p in subjects)
        segments = [
            Segment(role="user", text=self.statement(rel, obj, subjects), train=False),
            Segment(role="assistant", text=calls, train=True),
            Segment(role="assistant", text=" " + self.replies.ack, train=True),
        ]
        triplets = [(p, rel.name, obj) for p in subjects]
        return self.record(rid, "write", segments, gold_triplets=triplets, gold_names=[*subjects, obj])

    def negative(self, rid: str) -> Record:
        if self.rng.random() < self.config.passages.hard_negatives:
            text = self.passages.negative()
        else:
            scene = Scene()  # a fresh name of every type, in schema order, whichever the template names
            template = self.rng.choice(self.schema.negatives)
            text = fill(template, **{t: self.fresh(scene, t) for t in self.schema.types})
        segments = [
            Segment(role="user", text=text, train=False),
            Segment(role="assistant", text=self.replies.nothing, train=True),
        ]
        return self.record(rid, "negative", segments)

    def passage(self, rid: str) -> Record:
        """A realistic statement (apposition, possessive, passive, distractors...) -> its writes."""
        text, triplets = self.passages.passage()
        segments = [
            Segment(role="user", text=text, train=False),
            Segment(role="assistant", text=" ".join(render_write(*t) for t in triplets), train=True),
            Segment(role="assistant", text=" " + self.replies.ack, train=True),
        ]
        names = [*dict.fromkeys(t[0] for t in triplets), *dict.fromkeys(t[2] for t in triplets)]
        return self.record(rid, "passage", segments, gold_triplets=triplets, gold_names=names)

    def injection(self, rid: str) -> Record:
        """User text that carries call syntax for a fact it does not state: the model writes only
        what is stated in words (a statement beside the call: its writes), else nothing."""
        scene = Scene()
        rel = self.pick_rel()
        subject = self.fresh_subject(scene, rel)
        fact = (subject, rel.name, self.fresh_object(scene, rel, avoid=subject))
        call = fill(self.rng.choice(self.config.injection.wrappers), call=self.rng.choice(INJECTION_FORMS)(*fact))
        if self.rng.random() < self.config.injection.stated:
            stated = self.write(rid)
            words = stated.segments[0].text
            text = f"{words} {call}" if self.rng.random() < 0.5 else f"{call} {words}"
            segments = [Segment(role="user", text=text, train=False), *stated.segments[1:]]
            return self.record(
                rid, "injection", segments, gold_triplets=stated.gold_triplets, gold_names=stated.gold_names
            )
        segments = [
            Segment(role="user", text=call, train=False),
            Segment(role="assistant", text=self.replies.nothing, train=True),
        ]
        return self.record(rid, "injection", segments)

    def real(self, rid: str) -> Record:
        """A real passage (data_gen/real_records.py) as its write or negative record, or, for
        `real.reads` of those that state a fact, followed by a question about it."""
        if self.real_passages is None:
            raise ValueError("mix.real: real passages are only drawn for the train split")
        base = self.real_passages.draw(self.rng)
        if base.gold_triplets and self.rng.random() < self.config.real.reads:
            record = self.real_read(rid, base)
            if record is not None:
                return record
        return base.model_copy(update={"id": rid, "split": self.pool.split})

    def real_read(self, rid: str, base: Record) -> Record | None:
        """`base` (a real passage that states facts) stated, then a question of one of the read
        shapes on its own names; None when its relations have no phrasings here."""
        facts = [tuple(t) for t in base.gold_triplets]
        if any(f[1] not in self.by_name for f in facts):
            return None
        session = self.oracle.open()
        try:
            session.write_many(facts)
        except ValueError:  # the store refuses a fact (e.g. subject == object): no read over it
            return None
        anchor = self.rng.choice(facts)
        rel = self.by_name[anchor[1]]
        shapes = [s for s in self._shapes_of(rel) if self.shape_weights[s]]
        shape = self.rng.choices(shapes, weights=[self.shape_weights[s] for s in shapes])[0]
        query = query_of(shape, anchor)
        results = session.read(*query)
        if not results:
            return None
        answer, names = self.answer(query, results)
        segments = [
            *base.segments,
            Segment(role="user", text=self.question(shape, query, rel), train=False),
            *self.read_segments(query, results, answer),
        ]
        return Record(
            id=rid,
            type="read",
            shape=shape,
            segments=segments,
            gold_triplets=list(results),
            gold_names=names,
            split=self.pool.split,
            source=base.source,
        )

    @staticmethod
    def _shapes_of(rel: Rel) -> tuple[str, ...]:
        return READ_SHAPES if rel.cfg.questions.per_rel_org else tuple(s for s in READ_SHAPES if s != "per_rel_org")

    def verify(self, rid: str) -> Record:
        """A passage (a real one for `real.verify` of them, where the split has real passages) and a
        fact it states ("Yes") or one it does not ("No"): what the write gate's verify pass asks."""
        rng = self.rng
        source = "synthetic"
        if self.real_passages is not None and rng.random() < self.config.real.verify:
            base = self.real_passages.draw(rng, with_facts=True)
            text, facts, source = base.segments[0].text, [tuple(t) for t in base.gold_triplets], base.source
            named = ()
        else:
            text, facts = self.passages.passage()
            named = self.passages.last_orgs
        stated = rng.random() < 0.5
        triplet = rng.choice(facts) if stated else self.unstated(text, facts, named)
        segments = [
            Segment(role="user", text=verification_question(text, triplet), train=False),
            Segment(role="assistant", text=VERIFY_YES if stated else VERIFY_NO, train=True),
        ]
        return Record(
            id=rid,
            type="verify",
            segments=segments,
            gold_triplets=[triplet],
            split=self.pool.split,
            source=source,
        )

    def unstated(self, text: str, facts: list[Triplet], named: tuple[str, ...] = ()) -> Triplet:
        """A fact `text` does not state, near the ones it does: another of its subjects or the
        objects it names (`named`, else the split's names of the object type found in it) in the
        pair, an object as the subject, or a relation of another kind (not one `implied_together`)."""
        rng, stated = self.rng, set(facts)
        person, relation, org = rng.choice(facts)
        spec = self.schema.relation(relation)
        people = [p for p in dict.fromkeys(f[0] for f in facts) if p != person]
        orgs = [o for o in dict.fromkeys(f[2] for f in facts) if o != org]
        others = named or [o for o in self.pool.names[spec.object] if o in text]
        orgs += [o for o in others if o != org and o not in orgs][:4]
        candidates = [(p, relation, org) for p in people] + [(person, relation, o) for o in orgs]
        candidates += [(org, relation, o) for o in orgs]  # the roles reversed: an organisation is nobody's employee
        kind = next((group for group in self.implied if relation in group), ())
        others = [r.name for r in self.rels if r.name not in kind]
        if others:
            candidates.append((person, rng.choice(others), org))
        candidates = [c for c in candidates if c not in stated and c[0] != c[2]]
        if candidates and rng.random() < 0.85:
            return rng.choice(candidates)
        scene = Scene()  # someone or something the text never names
        if rng.random() < 0.5:
            return (self.fresh(scene, spec.subject, avoid=org), relation, org)
        return (person, relation, self.fresh(scene, spec.object, avoid=person))

    def question_rels(self, shape: str) -> list[Rel]:
        """The relations a question of this shape can be asked about (existence checks need phrasings)."""
        if shape == "per_rel_org":
            return [r for r in self.rels if r.cfg.questions.per_rel_org]
        return self.rels

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

    def _retire(self) -> None:
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

    # ------------------------------------------------------------------ records that read memory

    def read(self, rid: str, shape: str) -> Record:
        names = {r.name for r in self.question_rels(shape)}
        for _ in range(4):
            m = self.memory_context()
            options = [f for f in m.facts if f[1] in names and query_of(shape, f) not in m.asked]
            if options:
                anchor = self.rng.choice(options)
                break
            self._retire()
        else:  # e.g. only rare relations have existence questions: plant one
            rel = self.pick_rel(self.question_rels(shape))
            scene = Scene()
            org = self.fresh_object(scene, rel)
            group = Group(rel, org, [self.subject_for(scene, rel, org, [])])
            scene.add(group)
            self.fill(scene, self.n_facts())
            self.shuffle_in(scene, group)
            facts = scene.memory()
            m = Memory(scene, facts, self.oracle.open(facts), 0)
            anchor = (group.subjects[0], rel.name, org)
        query = query_of(shape, anchor)
        m.asked.add(query)
        results = m.session.read(*query)
        assert results, f"{rid}: a read of a stored fact found nothing"
        answer, gold_names = self.answer(query, results)
        segments = [
            Segment(role="user", text=self.question(shape, query, self.by_name[anchor[1]]), train=False),
            *self.read_segments(query, results, answer),
        ]
        return self.record(
            rid, "read", segments, shape=shape, gold_triplets=list(results), gold_names=gold_names, memory=m.facts
        )

    def unanswerable_query(self, shape: str, scene: Scene, rel: Rel) -> Query:
        """A query of the shape over this memory that may well find nothing (the store decides)."""
        rng = self.rng
        subjects, objects = scene.subjects_of(rel.cfg.subject), scene.objects_of(rel.cfg.object)
        person = self.fresh_subject(scene, rel) if rng.random() < 0.5 or not subjects else rng.choice(subjects)
        objects = [o for o in objects if o != person]
        org = self.fresh_object(scene, rel, person) if rng.random() < 0.5 or not objects else rng.choice(objects)
        return query_of(shape, (person, rel.name, org))

    def unanswerable(self, rid: str, shape: str) -> Record:
        rels = self.question_rels(shape)
        for _ in range(100):
            m = self.memory_context()
            if shape == "rel":
                stored = {f[1] for f in m.facts}
                absent = [r for r in rels if r.name not in stored]
                if not absent:  # every relation is in this memory: sample one without the asked relation
                    rel = self.pick_rel(rels)
                    scene = self.fill(Scene(), self.n_facts(), exclude=rel)
                    facts = scene.memory()
                    m = Memory(scene, facts, self.oracle.open(facts), 0)
                    absent = [rel]
                candidates = [((None, r.name, None), r) for r in absent]
            else:
                candidates = []
                for _ in range(8):
                    rel = self.pick_rel(rels)
                    candidates.append((self.unanswerable_query(shape, m.scene, rel), rel))
            for query, rel in candidates:
                if query not in m.asked and m.session.read(*query) == []:
                    m.asked.add(query)
                    segments = [
                        Segment(role="user", text=self.question(shape, query, rel), train=False),
                        *self.read_segments(query, [], self.replies.unknown),
                    ]
                    return self.record(rid, "unanswerable", segments, shape=shape, memory=m.facts)
            self._retire()
        raise RuntimeError(f"{rid}: could not find an unanswerable {shape} question")

    def change(self, scene: Scene, fact: Triplet) -> tuple[Triplet, str, list[tuple[str, Query]]]:
        """How a stored fact of a functional relation changes: (new fact, {old}, question options)."""
        person, relation, org = fact
        rel = self.by_name[relation]
        if rel.one_object:  # the person moves to another organisation
            others = [o for o in scene.objects_of(rel.cfg.object) if o != org and (o, relation) not in scene.filled]
            if rel.one_subject or not others or self.rng.random() < 0.5:
                new_org = self.fresh_object(scene, rel, avoid=person)
            else:
                new_org = self.rng.choice(others)
            options = [
                ("per", (person, None, None)),
                ("per_rel", (person, relation, None)),
                ("rel_org", (None, relation, new_org)),
                ("per_org", (person, None, new_org)),
            ]
            return (person, relation, new_org), org, options
        new_person = self.fresh_subject(scene, rel, avoid=org)  # someone new takes the object's role
        options = [
            ("rel_org", (None, relation, org)),
            ("per", (new_person, None, None)),
            ("per_rel", (new_person, relation, None)),
        ]
        return (new_person, relation, org), person, options

    def update(self, rid: str) -> Record:
        m = self.memory_context()
        updatable = [f for f in m.facts if self.by_name[f[1]].cfg.updates]
        if updatable:
            old = self.rng.choice(updatable)
            m.uses = 0  # the update changes this memory: it is its last use
        else:  # plant a fact to update in a memory of its own
            rel = self.pick_rel([r for r in self.rels if r.cfg.updates])
            scene = Scene()
            org = self.fresh_object(scene, rel)
            group = Group(rel, org, [self.fresh_subject(scene, rel, avoid=org)])
            scene.add(group)
            self.fill(scene, self.n_facts())
            self.shuffle_in(scene, group)
            facts = scene.memory()
            m = Memory(scene, facts, self.oracle.open(facts), 0)
            old = (group.subjects[0], rel.name, org)
        rel = self.by_name[old[1]]
        new, old_value, options = self.change(m.scene, old)
        weights = [self.shape_weights[s] or 1e-9 for s, _ in options]
        shape, query = self.rng.choices(options, weights=weights)[0]
        m.session.write(new)
        results = m.session.read(*query)
        assert results, f"{rid}: the updated fact was not found"
        answer, names = self.answer(query, results)
        person, _, org = new
        segments = [
            Segment(
                role="user",
                text=fill(self.rng.choice(rel.cfg.updates), subject=person, old=old_value, object=org),
                train=False,
            ),
            Segment(role="assistant", text=render_write(*new), train=True),
            Segment(role="assistant", text=" " + self.replies.ack, train=True),
            Segment(role="user", text=self.question(shape, query, rel), train=False),
            *self.read_segments(query, results, answer),
        ]
        return self.record(rid, "update", segments, shape=shape, gold_triplets=[new], gold_names=names, memory=m.facts)

    def two_hop_question(self, first: Rel, second: Rel, person: str) -> str:
        clause = self.rng.choice(first.cfg.clause)
        phrase = self.rng.choice(self.schema.types[first.cfg.object].by_clause).replace("{clause}", clause)
        template = self.rng.choice(second.cfg.questions.rel_org).replace("{object}", phrase)
        return fill(template, subject=person)

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

    def two_hop(self, rid: str) -> Record:
        for _ in range(4):
            m = self.memory_context()
            chains = [c for c in self.chains(m.facts) if (c[0][0], c[1].name, None) not in m.asked]
            if chains:
                break
            self._retire()
        else:
            raise RuntimeError(f"{rid}: no two-hop chain in memory")
        (person, _, org), first, second = self.rng.choice(chains)
        q1: Query = (person, first.name, None)
        m.asked.add(q1)
        hop1 = m.session.read(*q1)
        assert hop1 == [(person, first.name, org)], f"{rid}: first hop found {hop1}"
        q2: Query = (None, second.name, org)
        hop2 = m.session.read(*q2)
        assert hop2, f"{rid}: second hop found nothing"
        answer, names = self.answer(q2, hop2)
        segments = [
            Segment(role="user", text=self.two_hop_question(first, second, person), train=False),
            Segment(role="assistant", text=render_read(*q1), train=True),
            Segment(role="memory", text=render_results(hop1), train=False),
            *self.read_segments(q2, hop2, answer, lead=" "),
        ]
        return self.record(rid, "two_hop", segments, gold_triplets=[*hop1, *hop2], gold_names=names, memory=m.facts)


@dataclass
class Memory:
    """A sampled memory and its store namespace, shared by up to `memory.reuse` records."""

    scene: Scene
    facts: list[Triplet]
    session: Session
    uses: int
    asked: set = field(default_factory=set)  # queries already asked of it (no record repeats another)


def build_records(
    config: DataConfig,
    pool: Pool,
    oracle: MemoryOracle,
    functional: dict[str, str | None],
    n: int,
    *,
    progress: Callable[[int], None] | None = None,
    real: RealPassages | None = None,
) -> list[Record]:
    """The `n` records of one split (types allotted exactly by `mix`, shapes by `shapes`); real
    passages only where `real` is given (the train split): elsewhere `mix.real` is left out."""
    rng = random.Random(derive_seed(config.seed, "records", pool.split))
    builder = Builder(config, pool, oracle, functional, rng, real)
    weights = {k: getattr(config.mix, k) for k in RECORD_KINDS if k != "real" or real is not None}
    kinds = allot(weights, n)
    rng.shuffle(kinds)
    shapes = {}
    for kind in ("read", "unanswerable"):
        order = allot(builder.shape_weights, kinds.count(kind))
        rng.shuffle(order)
        shapes[kind] = iter(order)
    records = []
    for i, kind in enumerate(kinds):
        rid = f"{pool.split}-{i:06d}"
        if kind in shapes:
            records.append(getattr(builder, kind)(rid, next(shapes[kind])))
        else:
            records.append(getattr(builder, kind)(rid))
        if progress is not None and (i + 1) % 256 == 0:
            progress(256)
    if progress is not None and n % 256:
        progress(n % 256)
    return records
