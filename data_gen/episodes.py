"""Episodes: multi-turn sessions for end-to-end evaluation, each run with a fresh memory.

JSONL format (one episode per line; also what the eval's `episodes=FILE.jsonl` reads):

    {"id": "episode-00000",
     "turns": [
       {"user": "Tia Batres and Cyrus Alfred work for Pfizer.", "kind": "statement",
        "writes": [["Tia Batres", "employed by", "Pfizer"], ["Cyrus Alfred", "employed by", "Pfizer"]],
        "answer_names": null,
        "expected_facts": [["Tia Batres", "employed by", "Pfizer"], ["Cyrus Alfred", "employed by", "Pfizer"]]},
       {"user": "Tia Batres has left Pfizer and now works for BMW.", "kind": "update",
        "writes": [["Tia Batres", "employed by", "BMW"]], "answer_names": null,
        "expected_facts": [["Cyrus Alfred", "employed by", "Pfizer"], ["Tia Batres", "employed by", "BMW"]]},
       {"user": "Who works for BMW?", "kind": "question", "writes": [],
        "answer_names": ["Tia Batres"], "expected_facts": [["Tia Batres", "employed by", "BMW"]]}]}

    kind            "statement" (new facts), "update" (a fact changes: the store supersedes the old one)
                    or "question".
    writes          the triplets a correct model writes in this turn (canonical relations); [] for questions.
    answer_names    questions: the names a correct answer lists ([] = the answer is "I don't know");
                    null for statements and updates.
    expected_facts  statements and updates: every current fact of the memory after the turn (what
                    the store holds once the gold writes are made, superseded facts gone);
                    questions: the facts a correct answer rests on, i.e. what correct reads return
                    (two-hop: the first read's fact, then the second read's results; [] when unanswerable).

Questions are only asked about what is current ("before" questions are never asked); an
unanswerable question names a person, organisation or relation never mentioned in the episode.
Every expected value is computed with the runtime's TripletStore.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from data_gen.data_config import READ_SHAPES, DataConfig
from data_gen.examples import Builder
from data_gen.memories import Group, Scene, query_of
from data_gen.oracle import MemoryOracle, Session
from data_gen.text import fill
from data_gen.world import Pool, derive_seed
from memory_runtime.jsonl import read_models
from memory_runtime.progress import Advance
from memory_runtime.protocol import Triplet


class EpisodeTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1)
    kind: Literal["statement", "update", "question"]
    writes: list[Triplet] = []
    answer_names: list[str] | None = None
    expected_facts: list[Triplet] = []

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> EpisodeTurn:
        if self.kind == "question":
            if self.writes:
                raise ValueError("a question turn has no writes")
            if self.answer_names is None:
                raise ValueError("a question turn needs answer_names ([] when unanswerable)")
        elif self.answer_names is not None:
            raise ValueError(f"a {self.kind} turn has answer_names null")
        return self


class Episode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    turns: list[EpisodeTurn] = Field(min_length=1)


def load_episodes(path: str | Path) -> list[Episode]:
    """Read an episodes JSONL file; errors name the line."""
    return read_models(path, Episode, "an episode")


class EpisodeBuilder:
    """Builds episodes over one pool, reusing the record builder's sampling and phrasing."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.rng = builder.rng
        self.cfg = builder.config.episodes

    def episode(self, eid: str) -> Episode:
        b, rng, cfg = self.b, self.rng, self.cfg
        scene, session = Scene(), b.oracle.open()
        turns: list[EpisodeTurn] = []
        for _ in range(rng.randint(cfg.statements.min, cfg.statements.max)):
            group = b.sampler.random_group(scene, b.config.write.max_people)
            scene.add(group)
            writes = [(p, group.rel.name, group.obj) for p in group.subjects]
            session.write_many(writes)
            turns.append(
                EpisodeTurn(
                    user=b.phrasing.statement(group.rel, group.obj, group.subjects),
                    kind="statement",
                    writes=writes,
                    expected_facts=session.facts(),
                )
            )
        events = ["question"] * rng.randint(cfg.questions.min, cfg.questions.max)
        events += ["update"] * rng.randint(cfg.updates.min, cfg.updates.max)
        rng.shuffle(events)
        for event in events:
            if event == "update" and self.update(scene, session, turns):
                continue
            turns.append(self.question(scene, session))
        return Episode(id=eid, turns=turns)

    def update(self, scene: Scene, session: Session, turns: list[EpisodeTurn]) -> bool:
        """An update of a current fact, then a question about the new fact; False if none is possible."""
        b, rng = self.b, self.rng
        current = [f for f in session.facts() if b.by_name[f.relation].cfg.updates and f.subject not in scene.locked]
        if not current:
            return False
        person, relation, org = rng.choice(current)
        rel = b.by_name[relation]
        if rel.one_object:  # the person moves to another organisation
            new_org = b.sampler.fresh_object(scene, rel, avoid=person)
            new, old_value = (person, relation, new_org), org
            options = [
                ("per_rel", (person, relation, None)),
                ("rel_org", (None, relation, new_org)),
                ("per", (person, None, None)),
            ]
        else:  # someone new takes the organisation's role
            new_person = b.sampler.fresh_subject(scene, rel, avoid=org)
            new, old_value = (new_person, relation, org), person
            options = [("rel_org", (None, relation, org)), ("per_rel", (new_person, relation, None))]
        scene.add(Group(rel, new[2], [new[0]]))
        session.write(new)
        text = fill(rng.choice(rel.cfg.updates), subject=new[0], old=old_value, object=new[2])
        turns.append(EpisodeTurn(user=text, kind="update", writes=[new], expected_facts=session.facts()))
        shape, query = rng.choice(options)
        turns.append(self.read_turn(session, shape, query, rel))
        return True

    def read_turn(self, session: Session, shape: str, query, rel) -> EpisodeTurn:
        results = session.read(*query)
        assert results, f"an episode question about a current fact found nothing: {query}"
        _, names = self.b.phrasing.answer(query, results)
        return EpisodeTurn(
            user=self.b.phrasing.question(shape, query, rel),
            kind="question",
            answer_names=names,
            expected_facts=results,
        )

    def question(self, scene: Scene, session: Session) -> EpisodeTurn:
        b, rng, cfg = self.b, self.rng, self.cfg
        weights = [b.shape_weights[s] for s in READ_SHAPES]
        shape = rng.choices(READ_SHAPES, weights=weights)[0]
        roll = rng.random()
        if roll < cfg.unanswerable:
            turn = self.unanswerable(scene, session, shape)
            if turn is not None:
                return turn
        elif roll < cfg.unanswerable + cfg.two_hop:
            turn = self.two_hop(session)
            if turn is not None:
                return turn
        names = {r.name for r in b.question_rels(shape)}
        facts = [f for f in session.facts() if f.relation in names]
        if not facts:  # no relation with existence questions in memory: ask another shape
            shape, facts = "per", session.facts()
        anchor = rng.choice(facts)
        return self.read_turn(session, shape, query_of(shape, anchor), b.by_name[anchor.relation])

    def unanswerable(self, scene: Scene, session: Session, shape: str) -> EpisodeTurn | None:
        b = self.b
        rels = b.question_rels(shape)
        if shape == "rel":
            mentioned = {g.rel.name for g in scene.groups}
            rels = [r for r in rels if r.name not in mentioned]
        if not rels:
            return None
        for _ in range(20):
            rel = b.sampler.pick_rel(rels)
            subject = b.sampler.fresh_subject(scene, rel)
            query = query_of(shape, (subject, rel.name, b.sampler.fresh_object(scene, rel, avoid=subject)))
            if session.read(*query) == []:
                return EpisodeTurn(
                    user=b.phrasing.question(shape, query, rel), kind="question", answer_names=[], expected_facts=[]
                )
        return None

    def two_hop(self, session: Session) -> EpisodeTurn | None:
        b = self.b
        facts = session.facts()
        holders: dict[tuple[str, str], int] = {}
        first_count: dict[tuple[str, str], int] = {}
        for f in facts:
            holders[(f.relation, f.object)] = holders.get((f.relation, f.object), 0) + 1
            first_count[(f.subject, f.relation)] = first_count.get((f.subject, f.relation), 0) + 1
        chains = [
            (f, first, second)
            for f in facts
            for first, second in b.pairs
            if f.relation == first.name
            and first_count[(f.subject, f.relation)] == 1
            and holders.get((second.name, f.object))
            and (f.subject, second.name, f.object) not in facts
        ]
        if not chains:
            return None
        fact, first, second = self.rng.choice(chains)
        hop1 = session.read(fact.subject, first.name, None)
        hop2 = session.read(None, second.name, fact.object)
        _, names = b.phrasing.answer((None, second.name, fact.object), hop2)
        return EpisodeTurn(
            user=b.phrasing.two_hop_question(first, second, fact.subject),
            kind="question",
            answer_names=names,
            expected_facts=[*hop1, *hop2],
        )


def build_episodes(
    config: DataConfig,
    pool: Pool,
    oracle: MemoryOracle,
    functional: dict[str, str | None],
    n: int,
    *,
    progress: Advance | None = None,
) -> list[Episode]:
    rng = random.Random(derive_seed(config.seed, "episodes", pool.split))
    builder = EpisodeBuilder(Builder(config, pool, oracle, functional, rng))
    episodes = []
    for i in range(n):
        episodes.append(builder.episode(f"episode-{i:05d}"))
        if progress is not None:
            progress(1)
    return episodes
