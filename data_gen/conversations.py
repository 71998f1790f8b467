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

A turn is one record: the user message is `memory_runtime.memory.conversation.turn_message` ("Caroline: ..."), the
model writes one call per fact, subject the speaker's name, object copied from the turn with its time
phrase, then the acknowledgement; a turn with no fact is a negative ("Nothing to store."). The memory dates
each fact with the turn's date and resolves the time phrase against it (memory_runtime.generation.controller).
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

from memory_runtime.memory.conversation import turn_message
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


BANK_SECTIONS = ("events", "closed", "jobs", "pets", "times", "chit_chat")


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


@dataclass(frozen=True)
class ConversationTurn:
    speaker: str
    text: str
    said_at: datetime
    writes: tuple[Triplet, ...]


class ConversationMaker:
    """Turns of generated conversations, one at a time (`next_turn`), each conversation between two of the
    split's people with a persona pair of the split's MSC part."""

    def __init__(self, pool_people: tuple[str, ...], places: tuple[str, ...], split: str, rng: random.Random, settings):
        self.bank = phrase_bank(settings.bank)
        self.people = pool_people
        self.places = places or ("Lisbon", "Denver", "Osaka")
        self.rng = rng
        self.settings = settings
        personas = settings.personas and persona_pairs(str(settings.personas), PERSONA_SPLITS[split])
        self.personas = personas or ()
        self.queue: list[ConversationTurn] = []

    def next_turn(self) -> ConversationTurn:
        if not self.queue:
            self.queue = self.conversation()
            self.queue.reverse()
        return self.queue.pop()

    def record(self, rid: str, replies) -> Record:
        """The next turn as a training record: its writes and the acknowledgement, or nothing to store."""
        turn = self.next_turn()
        user = Segment(role="user", text=turn_message(turn.speaker, turn.text), train=False)
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

    def conversation(self) -> list[ConversationTurn]:
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
        for _ in range(rng.randint(s.sessions.min, s.sessions.max)):
            count = rng.randint(s.turns.min, s.turns.max)
            for k in range(count):
                speaker = k % 2
                turns.append(self._turn(speakers, speaker, when, k == 0, k == count - 1, facts[speaker]))
            when += timedelta(days=rng.randint(3, 40), hours=rng.randint(-5, 5))
        return turns

    def _persona_facts(self, sentences: tuple[str, ...]) -> list[tuple[str, str, str]]:
        """(sentence, relation, object) of the persona sentences persona_fact reads."""
        out = []
        for sentence in sentences:
            fact = persona_fact(sentence)
            if fact is not None:
                out.append((sentence.strip(), *fact))
        self.rng.shuffle(out)
        return out

    def _turn(self, speakers, who: int, when: datetime, opens: bool, closes: bool, persona: list) -> ConversationTurn:
        rng, chat = self.rng, self.bank["chit_chat"]
        name, other = speakers[who], speakers[1 - who]
        parts: list[str] = []
        writes: list[Triplet] = []
        if opens:
            parts.append(rng.choice(chat["openers"]))
        elif rng.random() < 0.45:
            parts.append(rng.choice(chat["reactions"]))
        for _ in range(self._fact_count()):
            sentence, fact = self._fact(name, persona)
            parts.append(sentence)
            writes.append(fact)
            if rng.random() < 0.3:
                parts.append(rng.choice(chat["feelings"]))
        if (not writes and len(parts) < 2) or rng.random() < 0.35:
            parts.append(rng.choice(chat["questions"]))
        if closes and rng.random() < 0.6:
            parts.append(rng.choice(chat["closers"]))
        text = " ".join(parts).replace("{other}", other)
        return ConversationTurn(name, text, when, tuple(dict.fromkeys(writes)))

    def _fact_count(self) -> int:
        r = self.rng.random()
        return 0 if r < self.settings.negatives else (1 if r < 0.9 else 2)

    def _fact(self, name: str, persona: list) -> tuple[str, Triplet]:
        rng = self.rng
        kind = rng.random()
        while not persona and self.personas:  # a long conversation outlasts a persona: the speaker says more
            persona.extend(self._persona_facts(rng.choice(rng.choice(self.personas))))
        if persona and kind < self.settings.persona_share:
            sentence, relation, obj = persona.pop()
            if sentence[0].islower():
                sentence = sentence[0].upper() + sentence[1:]
            return sentence, Triplet(name, relation, obj)
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

    def _event(self, name: str) -> tuple[str, Triplet]:
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
        return sentence, Triplet(name, event["relation"], written)

    def _closed(self, name: str) -> tuple[str, Triplet]:
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
        return sentence, Triplet(name, fact["relation"], obj)
