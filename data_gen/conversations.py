"""Dated two-person conversations with gold writes per turn: what a conversational memory learns to write.

Two friends (first names of the split's people) talk over several sessions, days or weeks apart. A turn
mixes chit-chat (a greeting, a reaction, a feeling, a question back: nothing to store) with the speaker's
own facts, in the first person:

    events    life events of the phrase bank (data_gen/conversations.yaml) with relations as stated
              ("went to", "painted", "adopted", "is training for", "plans to visit"), most with a relative
              time after the object ("I went to a pottery class last week.")
    closed    facts where a later one supersedes (lives in, works as, married to, has a child named)
    personas  real first-person sentences of the Multi-Session Chat data set (data/real_train/msc_personas.json:
              "I have two dogs.", "I work at a bank."), read as a triplet by `persona_fact` where its shape
              is plain enough; each split reads its own published split (train / valid / test)
    webnlg    (conversations.webnlg_share) real sentences of WebNLG that state 1-4 facts about whom and what
              they name ("Al Anderson plays with the band NRBQ and was once a member of The Wildweeds."),
              every fact written (data_gen/webnlg.py); each split reads its own entries
    photos    (conversations.photos) a photo the turn shares, captioned as LoCoMo's are ("a photo of a beach at
              sunset", the bank's scenes): written as what it shows, `shared a photo of`

A turn is one record: the user message is `memory_runtime.memory.conversation.turn_message` ("Caroline: ..."), the
model writes one call per fact, subject the speaker's name, object copied from the turn with its time
phrase, then the acknowledgement; a turn with no fact is a negative ("Nothing to store."). The memory dates
each fact with the turn's date and resolves the time phrase against it (memory_runtime.generation.controller).

A share of the records (`conversations.questions`) trains the reader instead: after a conversation, questions
about it of LoCoMo's kinds but open-domain inference (single-hop "What did Caroline paint?", temporal "When
did Caroline go to the pottery class?" answered with the resolved time, multi-hop lists, adversarial: asked
of the other speaker, who never said it: "Not mentioned."), each with a context of
dated facts (what the memory returns) or dated turns (what chunks return), the fact among others of the
same conversation; the prompt is memory_runtime.memory.conversation's, the one `memlm eval` part locomo asks.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from data_gen.webnlg import load_facts as load_webnlg
from memory_runtime.memory.conversation import (
    FACTS_HEADER,
    NOT_MENTIONED,
    TURNS_HEADER,
    LineIndex,
    dated_line,
    dated_turn,
    reader_system,
    turn_message,
)
from memory_runtime.memory.dates import find_relative_times, format_day, resolve_relative_times
from memory_runtime.protocol import Triplet, render_write
from memory_runtime.records import Record, Segment

PERSONA_SPLITS = {"train": "train", "validation": "valid", "test": "test"}  # data split -> MSC's published split
PERSONAS_FILE = Path(__file__).resolve().parents[1] / "data" / "real_train" / "msc_personas.json"


@lru_cache(maxsize=4)
def phrase_bank(path: str | None = None) -> dict[str, Any]:
    """The bank (data_gen/conversations.yaml, or a user's file of the same shape)."""
    text = (
        Path(path).read_text(encoding="utf-8")
        if path
        else resources.files("data_gen").joinpath("conversations.yaml").read_text(encoding="utf-8")
    )
    return yaml.safe_load(text)


@lru_cache(maxsize=4)
def persona_pairs(path: str, split: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """MSC's persona sentence pairs of one published split (train / valid / test)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return tuple((tuple(a), tuple(b)) for a, b in data[split])


MAX_FACTS_A_TURN = 4
BANK_SECTIONS = ("events", "closed", "jobs", "pets", "times", "chit_chat")
ASKS = {"what", "when", "all"}  # the questions an entry's `asks` may give (module doc)


def check_sources(settings: Any, person_type: bool) -> None:
    """Raise ValueError naming the field when the conversations cannot be made: a schema without a `person`
    type (the speakers), a phrase bank that cannot be read or lacks a section, a personas file that is not MSC's
    persona pairs by published split. Called when the config loads, before anything is generated."""
    if not person_type:
        raise ValueError("conversations: the schema has no type 'person', whose names the speakers take")
    try:
        bank = phrase_bank(settings.bank)
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"conversations.bank: {settings.bank} cannot be read ({err})") from None
    missing = [k for k in BANK_SECTIONS if not isinstance(bank, dict) or k not in bank]
    if missing:
        raise ValueError(
            f"conversations.bank: {settings.bank} has no {', '.join(missing)} (see data_gen/conversations.yaml)"
        )
    for section in ("events", "closed"):
        for entry in bank[section] or ():
            asks = entry.get("asks") if isinstance(entry, dict) else None
            if asks is not None and (not isinstance(asks, dict) or "what" not in asks or set(asks) - ASKS):
                raise ValueError(
                    f"conversations.bank: {settings.bank}: the asks of {section} entry {entry.get('relation')!r}"
                    " must map what (and optionally when, all) to a question with {name}"
                )
    if settings.personas:
        try:
            for split in PERSONA_SPLITS.values():
                persona_pairs(str(settings.personas), split)
        except OSError as err:
            raise ValueError(f"conversations.personas: {settings.personas} cannot be read ({err.strerror})") from None
        except (ValueError, KeyError, TypeError):
            raise ValueError(
                f"conversations.personas: {settings.personas} is not MSC's persona pairs by split"
                ' ({"train": [[speaker 1\'s sentences], [speaker 2\'s]], "valid": ..., "test": ...})'
            ) from None
    photos = bank.get("photos")
    if settings.photos and not (isinstance(photos, dict) and photos.get("says") and photos.get("scenes")):
        raise ValueError(
            f"conversations.photos: the bank {settings.bank or 'data_gen/conversations.yaml'} has no photos"
            " (says: [...], scenes: [...]; see data_gen/conversations.yaml)"
        )
    if settings.webnlg_share and not settings.webnlg:
        raise ValueError("conversations.webnlg_share: needs conversations.webnlg (data/real_train/webnlg_facts.jsonl)")
    if settings.webnlg:
        try:
            load_webnlg(str(settings.webnlg), "train")
        except OSError as err:
            raise ValueError(f"conversations.webnlg: {settings.webnlg} cannot be read ({err.strerror})") from None
        except ValueError as err:
            raise ValueError(f"conversations.webnlg: {err}") from None


# ------------------------------------------------------------------------------ persona sentences as triplets

_PREPOSITIONS = {"to", "in", "at", "for", "with", "on", "about", "from", "as", "of", "into", "by", "like"}
_PAST = {
    "went", "had", "was", "were", "met", "grew", "got", "made", "took", "saw", "ate", "ran", "won", "lost", "left",
    "moved", "bought", "sold", "taught", "broke", "built", "drove", "flew", "gave", "kept", "read", "wrote",
    "found", "spent", "began", "came", "became", "did", "used",
}  # fmt: skip
_MODALS = {"can", "could", "will", "would", "should", "must", "might", "may"}
_ADVERBS = {"also", "really", "just", "currently", "still", "always", "usually", "often", "recently", "now", "only"}
_CONTRACTIONS = [
    ("i'm ", "I am "),
    ("i've ", "I have "),
    ("i'll ", "I will "),
    ("i'd ", "I would "),
    ("don't ", "do not "),
]
_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_FIRST_PERSON_LEFT = re.compile(r"\b(?:I|me|my|we|our)\b")  # an object still in the first person: not kept


def third_person(verb: str) -> str:
    """The verb as said of someone else: have -> has, go -> goes, try -> tries, like -> likes; past forms stay."""
    low = verb.lower()
    if low in _PAST or low.endswith("ed") or low in _MODALS:
        return low
    irregular = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
    if low in irregular:
        return irregular[low]
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return low + "es"
    if re.search(r"[^aeiou]y$", low):
        return low[:-1] + "ies"
    return low + "s"


def persona_fact(sentence: str) -> tuple[str, str] | None:
    """A first-person persona sentence as (relation, object) about its speaker, or None where its shape is not
    plain: "I have two dogs." -> ("has", "two dogs"); "I work at a bank." -> ("works at", "bank");
    "I am a nurse." -> ("is", "nurse"); "My favorite color is blue." -> ("favorite color is", "blue");
    "I do not drink alcohol." -> ("does not drink", "alcohol"). The object is the sentence's own words."""
    text = sentence.strip().rstrip(".!").strip()
    if not text or "?" in text or "," in text or len(text.split()) > 12:
        return None
    for short, long in _CONTRACTIONS:
        if text.lower().startswith(short):
            text = long + text[len(short) :]
    words = text.split()
    relation: list[str]
    if words[0] == "My" and len(words) >= 4:
        for k in range(2, min(len(words) - 1, 5)):
            if words[k] in ("is", "are"):
                relation, rest = [*[w.lower() for w in words[1:k]], "is"], words[k + 1 :]
                break
        else:
            return None
    elif words[0] == "I" and len(words) >= 3:
        rest = words[1:]
        while rest and rest[0].lower() in _ADVERBS:
            rest = rest[1:]
        if len(rest) < 2:
            return None
        head = rest[0].lower()
        if head == "am":
            relation, rest = ["is"], rest[1:]
            if rest and rest[0].lower() == "not":
                relation, rest = ["is", "not"], rest[1:]
            if rest and rest[0].lower().endswith("ing") and len(rest) >= 2:
                relation, rest = [*relation, rest[0].lower()], rest[1:]
        elif head in ("do", "did") and rest[1].lower() == "not" and len(rest) >= 4:
            relation, rest = [("does" if head == "do" else "did"), "not", rest[2].lower()], rest[3:]
        elif head == "used" and rest[1].lower() == "to" and len(rest) >= 4:
            relation, rest = ["used", "to", rest[2].lower()], rest[3:]
        elif head in _MODALS or head == "have" and rest[1].lower() in ("been", "never", "not"):
            if len(rest) < 4:
                return None
            relation, rest = [third_person(head), rest[1].lower(), rest[2].lower()], rest[3:]
        elif head.isalpha() and head not in ("is", "are", "was", "a", "an", "the"):
            relation, rest = [third_person(head)], rest[1:]
        else:
            return None
        if rest and rest[0].lower() in _PREPOSITIONS and len(rest) >= 2:
            relation, rest = [*relation, rest[0].lower()], rest[1:]
    else:
        return None
    obj = _ARTICLE.sub("", " ".join(rest)).strip()
    if not obj or _FIRST_PERSON_LEFT.search(obj) or not re.search(r"[A-Za-z]", obj):
        return None
    return " ".join(relation), obj


# ------------------------------------------------------------------------------ conversations


PHOTO_RELATION = "shared a photo of"  # what a turn's photo writes: its caption's scene, as LoCoMo captions it


@dataclass(frozen=True)
class ConversationTurn:
    speaker: str
    text: str
    said_at: datetime
    writes: tuple[Triplet, ...]
    photo: str | None = None  # the caption of the photo it shares ("a photo of a dog on a beach")


@dataclass(frozen=True)
class Said:
    """A fact a turn stated, with what a question about it needs: the bank's `asks` (None: a persona fact, not
    asked about) and the object as said without its time phrase."""

    turn: ConversationTurn
    fact: Triplet
    asks: dict | None
    bare: str

    @property
    def stored(self) -> str:
        """The line a memory returns for it: dated, the relative time resolved (as the controller stores it)."""
        obj = resolve_relative_times(self.fact.object, self.turn.said_at)
        return dated_line(self.turn.said_at, self.fact.subject, self.fact.relation, obj)

    @property
    def when(self) -> str:
        """When it happened, as LoCoMo answers: the resolved time phrase, else the day it was said."""
        found = find_relative_times(self.fact.object, self.turn.said_at)
        return found[0].resolved if found else format_day(self.turn.said_at)


@dataclass(frozen=True)
class Question:
    """A reader's question about a conversation: the context it answers from, the gold answer, its kind."""

    context: str
    question: str
    answer: str
    kind: str  # single_hop, temporal, multi_hop, adversarial
    facts: tuple[Triplet, ...]  # what it asks about (adversarial: the fact of the other speaker)


def asked_object(bare: str) -> str:
    """An object as a question names it: "a pottery class" -> "the pottery class", "my cousins" -> "their cousins"."""
    return re.sub(r"\bmy\b", "their", re.sub(r"^(?:a|an)\s+", "the ", bare))


def answered_object(bare: str) -> str:
    """An object as an answer gives it: "a pottery class" -> "pottery class", "my cousins" -> "their cousins"."""
    return re.sub(r"\bmy\b", "their", _ARTICLE.sub("", bare))


class ConversationMaker:
    """Turns of generated conversations and questions about them, one at a time (`next_item`), each
    conversation between two of the split's people with a persona pair of the split's MSC part."""

    def __init__(self, pool_people: tuple[str, ...], places: tuple[str, ...], split: str, rng: random.Random, settings):
        self.bank = phrase_bank(settings.bank)
        self.people = pool_people
        self.places = places or ("Lisbon", "Denver", "Osaka")
        self.rng = rng
        self.settings = settings
        personas = settings.personas and persona_pairs(str(settings.personas), PERSONA_SPLITS[split])
        self.personas = personas or ()
        webnlg = settings.webnlg and settings.webnlg_share and load_webnlg(str(settings.webnlg), split)
        self.webnlg = webnlg or ()
        self.queue: list[ConversationTurn | Question] = []

    def next_item(self) -> ConversationTurn | Question:
        """The next turn of the conversation under way, or after its turns, a question about it."""
        while not self.queue:
            turns, said = self.conversation()
            share = self.settings.questions
            count = round(len(turns) * share / (1 - share))
            self.queue = [*turns, *(q for q in (self.question(turns, said) for _ in range(count)) if q)]
            self.queue.reverse()
        return self.queue.pop()

    def record(self, rid: str, replies) -> Record:
        """The next item as a training record: a turn's writes and the acknowledgement (or nothing to store),
        or a reader's answer to a question about the conversation."""
        turn = self.next_item()
        if isinstance(turn, Question):
            return Record(
                id=rid,
                type="answer",
                segments=[
                    Segment(role="user", text=turn.question, train=False),
                    Segment(role="assistant", text=turn.answer, train=True),
                ],
                gold_triplets=list(turn.facts),
                source="conversation",
                system=reader_system(turn.context),
            )
        user = Segment(role="user", text=turn_message(turn.speaker, turn.text, turn.photo), train=False)
        if turn.writes:
            calls = " ".join(render_write(*t) for t in turn.writes)
            answer = Segment(role="assistant", text=f"{calls} {replies.ack}", train=True)
            kind, names = "write", sorted({t.subject for t in turn.writes} | {t.object for t in turn.writes})
        else:
            answer = Segment(role="assistant", text=replies.nothing, train=True)
            kind, names = "negative", []
        return Record(
            id=rid,
            type=kind,
            segments=[user, answer],
            gold_triplets=list(turn.writes),
            gold_names=names,
            source="conversation",
        )

    # -- one conversation

    def conversation(self) -> tuple[list[ConversationTurn], list[Said]]:
        """One conversation's turns, and the facts they state."""
        rng, s = self.rng, self.settings
        first, second = rng.sample(self.people, 2)
        speakers = (first.split()[0], second.split()[0])
        if speakers[0] == speakers[1]:
            speakers = (first.split()[0], second.split()[-1])
        persona = list(rng.choice(self.personas)) if self.personas else [(), ()]
        facts = [self._persona_facts(persona[i]) for i in range(2)]
        when = datetime(
            rng.randint(2019, 2024),
            rng.randint(1, 12),
            rng.randint(1, 28),
            rng.randint(8, 21),
            rng.choice((0, 15, 30, 45)),
        )
        turns: list[ConversationTurn] = []
        said: list[Said] = []
        for _ in range(rng.randint(s.sessions.min, s.sessions.max)):
            count = rng.randint(s.turns.min, s.turns.max)
            for k in range(count):
                speaker = k % 2
                turn, stated = self._turn(speakers, speaker, when, k == 0, k == count - 1, facts[speaker])
                turns.append(turn)
                said += [Said(turn, *fact) for fact in stated]
            when += timedelta(days=rng.randint(3, 40), hours=rng.randint(-5, 5))
        return turns, said

    # -- questions about it

    def question(self, turns: list[ConversationTurn], said: list[Said]) -> Question | None:
        """A question of one of LoCoMo's kinds (but open-domain inference) about a fact the bank can ask about,
        with its context; None when the conversation stated no such fact."""
        rng = self.rng
        askable = [x for x in said if x.asks]
        if not askable:
            return None
        target = rng.choice(askable)
        name = target.fact.subject
        r, kinds = rng.random(), self.settings.kinds
        if r < kinds.temporal and "when" in target.asks:
            text = target.asks["when"].replace("{object}", asked_object(target.bare))
            return self._asked(turns, said, [target], text.replace("{name}", name), target.when, "temporal")
        if r < kinds.temporal + kinds.multi_hop:
            group = [x for x in askable if x.fact[:2] == target.fact[:2]]
            if len(group) >= 2 and "all" in target.asks:
                answer = ", ".join(dict.fromkeys(answered_object(x.bare) for x in group))
                return self._asked(turns, said, group, target.asks["all"].replace("{name}", name), answer, "multi_hop")
        if r >= 1 - kinds.adversarial:
            adversarial = self._adversarial(turns, said, target)
            if adversarial is not None:
                return adversarial
        answer = answered_object(target.bare)
        return self._asked(turns, said, [target], target.asks["what"].replace("{name}", name), answer, "single_hop")

    def _adversarial(self, turns: list[ConversationTurn], said: list[Said], target: Said) -> Question | None:
        """Asked of the other speaker, who never said it (the fact in the context, under its own speaker's name):
        "Not mentioned." (LoCoMo's adversarial questions); None when the other speaker said the like too.
        Questions whose fact is left out of the context are not made: a reader taught to refuse those
        refused nine in ten of LoCoMo's single-hop questions, whose facts are worded otherwise."""
        other = next((t.speaker for t in turns if t.speaker != target.fact.subject), None)
        if other is None or any(x.fact[:2] == (other, target.fact.relation) for x in said):
            return None
        text = target.asks["what"].replace("{name}", other)
        return self._asked(turns, said, [target], text, NOT_MENTIONED, "adversarial")

    def _asked(
        self, turns: list[ConversationTurn], said: list[Said], needed: list[Said], text: str, answer: str, kind: str
    ) -> Question:
        """The question with a context that holds what it needs among others of the conversation: dated facts
        (a memory's lines) or dated turns (chunks), in the order they were said. The others are drawn at random
        or (`matched_context`, answerable questions only) are those that match the question best, as a read
        returns them; an adversarial question's stay random: matched, they hold the asked speaker's own facts, and
        a reader taught to refuse beside those refused answerable questions (results.md)."""
        rng = self.rng
        size = max(len(needed), rng.randint(max(1, self.settings.context.min), max(1, self.settings.context.max)))
        if rng.random() < 0.5:
            lines = [x.stored for x in said]
            keep = {said.index(x) for x in needed}
            others = [i for i in range(len(said)) if i not in keep]
            header = FACTS_HEADER
        else:
            lines = [dated_turn(t.said_at, t.speaker, t.text, t.photo) for t in turns]
            keep = {turns.index(x.turn) for x in needed}
            others = [i for i in range(len(turns)) if i not in keep]
            header = TURNS_HEADER
        wanted = min(len(others), size - len(keep))
        if kind != "adversarial" and self.settings.matched_context and rng.random() < self.settings.matched_context:
            ranked = [others[i] for i, _ in LineIndex([lines[i] for i in others]).ranked(text)]
            matched = set(ranked)
            unmatched = [i for i in others if i not in matched]  # too few match: the rest at random
            keep |= set(ranked[:wanted]) | set(rng.sample(unmatched, max(0, wanted - len(ranked))))
        else:
            keep |= set(rng.sample(others, wanted))
        context = header + "\n" + "\n".join(lines[i] for i in sorted(keep))
        return Question(context, text, answer, kind, tuple(x.fact for x in needed))

    def _persona_facts(self, sentences: tuple[str, ...]) -> list[tuple[str, str, str]]:
        """(sentence, relation, object) of the persona sentences persona_fact reads."""
        out = []
        for sentence in sentences:
            sentence = " ".join(sentence.split())  # MSC has double spaces: the object is copied word for word
            fact = persona_fact(sentence)
            if fact is not None:
                out.append((sentence, *fact))
        self.rng.shuffle(out)
        return out

    def _turn(
        self, speakers, who: int, when: datetime, opens: bool, closes: bool, persona: list
    ) -> tuple[ConversationTurn, list[tuple[Triplet, dict | None, str]]]:
        """A turn, and each fact it states with what asking about it needs (see `Said`)."""
        rng, chat = self.rng, self.bank["chit_chat"]
        name, other = speakers[who], speakers[1 - who]
        parts: list[str] = []
        stated: dict[Triplet, tuple[Triplet, dict | None, str]] = {}
        if opens:
            parts.append(rng.choice(chat["openers"]))
        elif rng.random() < 0.45:
            parts.append(rng.choice(chat["reactions"]))
        for _ in range(self._fact_count()):
            if self.webnlg and rng.random() < self.settings.webnlg_share:  # no draw at 0: data as before
                sentence, facts = rng.choice(self.webnlg)
                parts.append(sentence)
                for fact in (Triplet(*t) for t in facts):  # about whom it names: not asked about
                    stated.setdefault(fact, (fact, None, fact.object))
                continue
            sentence, fact, asks, bare = self._fact(name, persona)
            parts.append(sentence)
            stated.setdefault(fact, (fact, asks, bare))
            if rng.random() < 0.3:
                parts.append(rng.choice(chat["feelings"]))
        if (not stated and len(parts) < 2) or rng.random() < 0.35:
            parts.append(rng.choice(chat["questions"]))
        if closes and rng.random() < 0.6:
            parts.append(rng.choice(chat["closers"]))
        photo = None
        if self.settings.photos and rng.random() < self.settings.photos:  # no draw at 0: data as before
            photos = self.bank["photos"]
            scene = rng.choice(photos["scenes"])
            photo = f"a photo of {scene}"
            if not stated or rng.random() < 0.5:
                parts.append(rng.choice(photos["says"]))
            fact = Triplet(name, PHOTO_RELATION, _ARTICLE.sub("", scene))
            stated.setdefault(fact, (fact, None, scene))
        text = " ".join(parts).replace("{other}", other)
        return ConversationTurn(name, text, when, tuple(stated), photo), list(stated.values())

    def _fact_count(self) -> int:
        r = self.rng.random()
        count = 0 if r < self.settings.negatives else (1 if r < 0.9 else 2)
        if count and self.settings.more_facts:  # no draw at 0: data made before it stays as it was
            while count < MAX_FACTS_A_TURN and self.rng.random() < self.settings.more_facts:
                count += 1
        return count

    def _fact(self, name: str, persona: list) -> tuple[str, Triplet, dict | None, str]:
        """A sentence stating a fact of `name`, the fact, and the bank's asks and the object without its time."""
        rng = self.rng
        kind = rng.random()
        while not persona and self.personas:  # a long conversation outlasts a persona: the speaker says more
            persona.extend(self._persona_facts(rng.choice(rng.choice(self.personas))))
        if persona and kind < self.settings.persona_share:
            sentence, relation, obj = persona.pop()
            if sentence[0].islower():
                sentence = sentence[0].upper() + sentence[1:]
            return sentence, Triplet(name, relation, obj), None, obj
        if kind < self.settings.persona_share + 0.15:
            return self._closed(name)
        return self._event(name)

    def _fill(self, template: str) -> str:
        rng, bank = self.rng, self.bank
        return (
            template.replace("{pet}", rng.choice(bank["pets"]))
            .replace("{place}", rng.choice(self.places))
            .replace("{friend}", rng.choice(self.people).split()[0])
        )

    def _event(self, name: str) -> tuple[str, Triplet, dict | None, str]:
        rng = self.rng
        event = rng.choice(self.bank["events"])
        obj = self._fill(rng.choice(event["objects"]))
        say = rng.choice(event["says"])
        time = rng.choice(self.bank["times"][event["time"]]) if "time" in event and "{time}" in say else ""
        sentence = (
            " ".join(say.replace("{object}", obj).replace("{time}", time).split()).replace(" .", ".").replace(" !", "!")
        )
        written = _ARTICLE.sub("", obj)
        if time and f"{obj} {time}" in sentence:
            written = f"{written} {time}"
        return sentence, Triplet(name, event["relation"], written), event.get("asks"), obj

    def _closed(self, name: str) -> tuple[str, Triplet, dict | None, str]:
        rng = self.rng
        fact = rng.choice(self.bank["closed"])
        job = rng.choice(self.bank["jobs"])
        values = {
            "{place}": rng.choice(self.places),
            "{job}": job,
            "{friend}": rng.choice(self.people).split()[0],
        }
        sentence = rng.choice(fact["says"])
        for slot, value in values.items():
            sentence = sentence.replace(slot, value)
        obj = fact["object"].replace("{job_bare}", _ARTICLE.sub("", job))
        for slot, value in values.items():
            obj = obj.replace(slot, value)
        return sentence, Triplet(name, fact["relation"], obj), fact.get("asks"), obj
