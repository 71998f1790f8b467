"""How records word things: statements, questions and answers, from the schema's phrasings.

Answers list every name of the results with an Oxford comma and nothing else: each fact group
becomes the relation's `fact` sentence ("Dirk Alosa, Ty Baumkirchner, and Vera Bayless are
employed by BMW."). When the question names the subject, facts are grouped per relation
("X is an investor in A and B."); otherwise per (relation, object). An existence check
(per_rel_org) that finds the fact answers "Yes, <fact>". The fixed texts come from `replies`.
"""

from __future__ import annotations

import random

from data_gen.data_config import RepliesConfig
from data_gen.memories import Query, Rel
from data_gen.schema import Schema
from data_gen.text import fill, oxford
from memory_runtime.protocol import Triplet, render_read, render_results
from memory_runtime.records import Segment


def read_segments(query: Query, results: list[Triplet], answer: str, lead: str = "") -> list[Segment]:
    """A read call, the memory's results and the answer (the call and the answer trained)."""
    return [
        Segment(role="assistant", text=lead + render_read(*query), train=True),
        Segment(role="memory", text=render_results(results), train=False),
        Segment(role="assistant", text=" " + answer, train=True),
    ]


class Phrasing:
    """The words of one split's records; a template is drawn with `rng`, the record builder's."""

    def __init__(self, schema: Schema, by_name: dict[str, Rel], replies: RepliesConfig, rng: random.Random) -> None:
        self.schema = schema
        self.by_name = by_name
        self.replies = replies
        self.rng = rng

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

    def statement(self, rel: Rel, obj: str, subjects: list[str]) -> str:
        phr = rel.cfg.statements
        templates = phr.plural if len(subjects) > 1 else phr.singular
        return fill(self.rng.choice(templates), subject=oxford(subjects), object=obj)

    def two_hop_question(self, first: Rel, second: Rel, person: str) -> str:
        clause = self.rng.choice(first.cfg.clause)
        phrase = self.rng.choice(self.schema.types[first.cfg.object].by_clause).replace("{clause}", clause)
        template = self.rng.choice(second.cfg.questions.rel_org).replace("{object}", phrase)
        return fill(template, subject=person)
