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

How answers, questions and statements are worded is data_gen/phrasing.py; how the memories they
are asked about are sampled and shared, data_gen/memories.py.

Gold fields: `gold_triplets` = the facts a write/update states, or the facts a read's answer
rests on (two_hop: the first hop's fact, then the second hop's results); `gold_names` = the names
a correct answer lists: the result names the question did not give (subjects first), or the fact's
names when it gave them all (per_org, per_rel_org); [] exactly when the answer is "I don't know"
(a write: its subjects and the object). `memory` = the writes made before the record starts,
in order.

Everything about the world comes from the schema (data_gen/schema.py): relations, their subject
and object types, phrasings, negatives.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from data_gen.conversations import ConversationMaker
from data_gen.data_config import READ_SHAPES, RECORD_KINDS, DataConfig
from data_gen.memories import Group, Memory, MemorySampler, Query, Rel, Scene, query_of
from data_gen.oracle import MemoryOracle
from data_gen.passage_bank import PassageBank
from data_gen.passages import PassageMaker
from data_gen.phrasing import Phrasing, read_segments
from data_gen.real_records import RealPassages
from data_gen.text import fill
from data_gen.world import Pool, derive_seed
from memory_runtime.generation.write_gate import VERIFY_NO, VERIFY_YES, verification_question
from memory_runtime.progress import Advance
from memory_runtime.protocol import Triplet, render_read, render_results, render_write
from memory_runtime.records import Record, Segment

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
        self.sampler = MemorySampler(config, pool, oracle, rng, self.by_name, self.rels, self.pairs)
        self.phrasing = Phrasing(self.schema, self.by_name, self.replies, rng)
        self.shape_weights = {s: getattr(config.shapes, s) for s in READ_SHAPES}
        self._passages: PassageMaker | None = None
        self._conversations: ConversationMaker | None = None
        self.implied = [frozenset(group) for group in self.schema.implied_together]

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

    def record(self, rid: str, kind: str, segments: list[Segment], **fields) -> Record:
        return Record(id=rid, type=kind, segments=segments, split=self.pool.split, source="synthetic", **fields)

    # ------------------------------------------------------------------ record types

    def write(self, rid: str) -> Record:
        rel = self.sampler.pick_rel()
        scene = Scene()
        obj = self.sampler.fresh_object(scene, rel)
        subjects: list[str] = []
        for _ in range(self.sampler.group_size(rel, self.config.write.max_people, self.config.write.max_people)):
            subjects.append(self.sampler.subject_for(scene, rel, obj, subjects))
        return self.statement_record(rid, rel, obj, subjects)

    def statement_record(self, rid: str, rel: Rel, obj: str, subjects: list[str]) -> Record:
        calls = " ".join(render_write(p, rel.name, obj) for p in subjects)
        segments = [
            Segment(role="user", text=self.phrasing.statement(rel, obj, subjects), train=False),
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
            text = fill(template, **{t: self.sampler.fresh(scene, t) for t in self.schema.types})
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
        rel = self.sampler.pick_rel()
        subject = self.sampler.fresh_subject(scene, rel)
        fact = (subject, rel.name, self.sampler.fresh_object(scene, rel, avoid=subject))
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
        answer, names = self.phrasing.answer(query, results)
        segments = [
            *base.segments,
            Segment(role="user", text=self.phrasing.question(shape, query, rel), train=False),
            *read_segments(query, results, answer),
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
            return (self.sampler.fresh(scene, spec.subject, avoid=org), relation, org)
        return (person, relation, self.sampler.fresh(scene, spec.object, avoid=person))

    def question_rels(self, shape: str) -> list[Rel]:
        """The relations a question of this shape can be asked about (existence checks need phrasings)."""
        if shape == "per_rel_org":
            return [r for r in self.rels if r.cfg.questions.per_rel_org]
        return self.rels

    # ------------------------------------------------------------------ records that read memory

    def read(self, rid: str, shape: str) -> Record:
        names = {r.name for r in self.question_rels(shape)}
        for _ in range(4):
            m = self.sampler.memory_context()
            options = [f for f in m.facts if f[1] in names and query_of(shape, f) not in m.asked]
            if options:
                anchor = self.rng.choice(options)
                break
            self.sampler.retire()
        else:  # e.g. only rare relations have existence questions: plant one
            rel = self.sampler.pick_rel(self.question_rels(shape))
            scene = Scene()
            org = self.sampler.fresh_object(scene, rel)
            group = Group(rel, org, [self.sampler.subject_for(scene, rel, org, [])])
            scene.add(group)
            self.sampler.fill(scene, self.sampler.n_facts())
            self.sampler.shuffle_in(scene, group)
            facts = scene.memory()
            m = Memory(scene, facts, self.oracle.open(facts), 0)
            anchor = (group.subjects[0], rel.name, org)
        query = query_of(shape, anchor)
        m.asked.add(query)
        results = m.session.read(*query)
        assert results, f"{rid}: a read of a stored fact found nothing"
        answer, gold_names = self.phrasing.answer(query, results)
        segments = [
            Segment(role="user", text=self.phrasing.question(shape, query, self.by_name[anchor[1]]), train=False),
            *read_segments(query, results, answer),
        ]
        return self.record(
            rid, "read", segments, shape=shape, gold_triplets=list(results), gold_names=gold_names, memory=m.facts
        )

    def unanswerable_query(self, shape: str, scene: Scene, rel: Rel) -> Query:
        """A query of the shape over this memory that may well find nothing (the store decides)."""
        rng = self.rng
        subjects, objects = scene.subjects_of(rel.cfg.subject), scene.objects_of(rel.cfg.object)
        person = self.sampler.fresh_subject(scene, rel) if rng.random() < 0.5 or not subjects else rng.choice(subjects)
        objects = [o for o in objects if o != person]
        org = (
            self.sampler.fresh_object(scene, rel, person) if rng.random() < 0.5 or not objects else rng.choice(objects)
        )
        return query_of(shape, (person, rel.name, org))

    def unanswerable(self, rid: str, shape: str) -> Record:
        rels = self.question_rels(shape)
        for _ in range(100):
            m = self.sampler.memory_context()
            if shape == "rel":
                stored = {f[1] for f in m.facts}
                absent = [r for r in rels if r.name not in stored]
                if not absent:  # every relation is in this memory: sample one without the asked relation
                    rel = self.sampler.pick_rel(rels)
                    scene = self.sampler.fill(Scene(), self.sampler.n_facts(), exclude=rel)
                    facts = scene.memory()
                    m = Memory(scene, facts, self.oracle.open(facts), 0)
                    absent = [rel]
                candidates = [((None, r.name, None), r) for r in absent]
            else:
                candidates = []
                for _ in range(8):
                    rel = self.sampler.pick_rel(rels)
                    candidates.append((self.unanswerable_query(shape, m.scene, rel), rel))
            for query, rel in candidates:
                if query not in m.asked and m.session.read(*query) == []:
                    m.asked.add(query)
                    segments = [
                        Segment(role="user", text=self.phrasing.question(shape, query, rel), train=False),
                        *read_segments(query, [], self.replies.unknown),
                    ]
                    return self.record(rid, "unanswerable", segments, shape=shape, memory=m.facts)
            self.sampler.retire()
        raise RuntimeError(f"{rid}: could not find an unanswerable {shape} question")

    def change(self, scene: Scene, fact: Triplet) -> tuple[Triplet, str, list[tuple[str, Query]]]:
        """How a stored fact of a functional relation changes: (new fact, {old}, question options)."""
        person, relation, org = fact
        rel = self.by_name[relation]
        if rel.one_object:  # the person moves to another organisation
            others = [o for o in scene.objects_of(rel.cfg.object) if o != org and (o, relation) not in scene.filled]
            if rel.one_subject or not others or self.rng.random() < 0.5:
                new_org = self.sampler.fresh_object(scene, rel, avoid=person)
            else:
                new_org = self.rng.choice(others)
            options = [
                ("per", (person, None, None)),
                ("per_rel", (person, relation, None)),
                ("rel_org", (None, relation, new_org)),
                ("per_org", (person, None, new_org)),
            ]
            return (person, relation, new_org), org, options
        new_person = self.sampler.fresh_subject(scene, rel, avoid=org)  # someone new takes the object's role
        options = [
            ("rel_org", (None, relation, org)),
            ("per", (new_person, None, None)),
            ("per_rel", (new_person, relation, None)),
        ]
        return (new_person, relation, org), person, options

    def update(self, rid: str) -> Record:
        m = self.sampler.memory_context()
        updatable = [f for f in m.facts if self.by_name[f[1]].cfg.updates]
        if updatable:
            old = self.rng.choice(updatable)
            m.uses = 0  # the update changes this memory: it is its last use
        else:  # plant a fact to update in a memory of its own
            rel = self.sampler.pick_rel([r for r in self.rels if r.cfg.updates])
            scene = Scene()
            org = self.sampler.fresh_object(scene, rel)
            group = Group(rel, org, [self.sampler.fresh_subject(scene, rel, avoid=org)])
            scene.add(group)
            self.sampler.fill(scene, self.sampler.n_facts())
            self.sampler.shuffle_in(scene, group)
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
        answer, names = self.phrasing.answer(query, results)
        person, _, org = new
        segments = [
            Segment(
                role="user",
                text=fill(self.rng.choice(rel.cfg.updates), subject=person, old=old_value, object=org),
                train=False,
            ),
            Segment(role="assistant", text=render_write(*new), train=True),
            Segment(role="assistant", text=" " + self.replies.ack, train=True),
            Segment(role="user", text=self.phrasing.question(shape, query, rel), train=False),
            *read_segments(query, results, answer),
        ]
        return self.record(rid, "update", segments, shape=shape, gold_triplets=[new], gold_names=names, memory=m.facts)

    def two_hop(self, rid: str) -> Record:
        for _ in range(4):
            m = self.sampler.memory_context()
            chains = [c for c in self.sampler.chains(m.facts) if (c[0][0], c[1].name, None) not in m.asked]
            if chains:
                break
            self.sampler.retire()
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
        answer, names = self.phrasing.answer(q2, hop2)
        segments = [
            Segment(role="user", text=self.phrasing.two_hop_question(first, second, person), train=False),
            Segment(role="assistant", text=render_read(*q1), train=True),
            Segment(role="memory", text=render_results(hop1), train=False),
            *read_segments(q2, hop2, answer, lead=" "),
        ]
        return self.record(rid, "two_hop", segments, gold_triplets=[*hop1, *hop2], gold_names=names, memory=m.facts)


def build_records(
    config: DataConfig,
    pool: Pool,
    oracle: MemoryOracle,
    functional: dict[str, str | None],
    n: int,
    *,
    progress: Advance | None = None,
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
