"""`memlm eval` part `locomo`: LoCoMo's questions answered by one model over the memory structures of the
design, side by side, so that a memory is measured against what a user would do without one.

    full_context  as much of the conversation as the model's window holds, newest kept (LoCoMo's truncated
                  baseline); prefilled once per conversation, its cache reused by every question
    chunks        the conversation's turns with their dates, retrieved by BM25 (bm25s), the top k in the
                  prompt in the order they were said
    triples       the facts the model under test wrote as it read the conversation turn by turn (each turn its
                  speaker's message, its facts dated with the session, "yesterday" resolved), the top k by
                  BM25 in the prompt, each with its date
    iterative     triples, read in `rounds` rounds: each round's query is the question and the facts the last
                  round returned (the recursive retrieval of the design), the new facts added
    mixed         triples and the turns they were written from

The memory structures (triples, iterative, mixed) run on systems with a memory (memlm: the model under test
writes them), full_context and chunks on the system without one (zero_shot, the base), and every structure
answers with the same reader, the base model (System.reader: `memlm eval` opens the base beside the model
under test for this part): the structures differ in what the prompt holds and nothing else.

Each structure runs on the model of each system the part is given (the base for zero_shot, the model under
test for memlm), with the same answer prompt, greedily (eval/locomo_reader.py: the reader, its refusals). A
row is one question under one structure: its answer, LoCoMo's score (eval/locomo.py), the share of its
evidence turns the context held, the context's tokens and the seconds it took. The conversations come from
`locomo.file` (LoCoMo's own JSON; default the two dev conversations in benchmarks/locomo/, never trained on).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval.locomo import (
    ANSWERED_CATEGORIES,
    CATEGORY_NAMES,
    LocomoConversation,
    LocomoTurn,
    answer_words,
    evidence_recall,
    load_locomo,
    mean_percent,
    refuses,
    score_answer,
    score_gold,
)
from eval.locomo import summarize as summarize_scores
from eval.locomo_reader import Answerer, ReaderAnswer, answered_as, window_of
from eval.parts import Part
from eval.render import markdown_table, num
from memory_runtime.memory.conversation import (
    ANSWER_PROMPT,
    FACTS_HEADER,
    NOT_MENTIONED,
    TURNS_HEADER,
    Embedder,
    LineIndex,
    dated_fact,
    dated_turn,
    said_when,
    turn_message,
)
from memory_runtime.memory.facts import Fact
from memory_runtime.memory.store import TripletStore
from memory_runtime.progress import Advance, quiet

if TYPE_CHECKING:
    from eval.eval_config import EvalConfig
    from eval.systems import System

READERS = {
    "base": "Every structure is answered by the same reader, the base model.",
    "model": "Each system answers with its own model (locomo.reader: model): a system's structures share its reader.",
    "named": "memlm's structures are answered by {reader} (locomo.reader), its memory written by the model under test.",
}
STRUCTURES = ("full_context", "chunks", "triples", "iterative", "mixed")
MEMORY_STRUCTURES = ("triples", "iterative", "mixed")
WRITTEN = ("evidence_written", "answer_written", "answer_said")  # a memory row's figures of what was written
DEV_FILE = Path(__file__).resolve().parents[1] / "benchmarks" / "locomo" / "locomo_dev.json"


def named_reader(reader: str) -> bool:
    """locomo.reader names a model of its own (not `base`, not `model`)."""
    return reader not in ("base", "model")


def readers_line(reader: str) -> str:
    """The report's line on who answered."""
    return READERS["named"].format(reader=reader) if named_reader(reader) else READERS[reader]


def locomo_file(config: EvalConfig) -> Path:
    """The LoCoMo file of the run: `locomo.file`, else the dev conversations of the checkout."""
    path = Path(config.locomo.file) if config.locomo.file else DEV_FILE
    if not path.is_file():
        raise FileNotFoundError(f"locomo.file: {path} is no file (LoCoMo's JSON: benchmarks/locomo/ in a checkout)")
    return path


def load_conversations(config: EvalConfig) -> list[LocomoConversation]:
    """Every conversation of the file, each with at most `limit` questions (its first ones)."""
    conversations = load_locomo(locomo_file(config))
    if config.limit is None:
        return conversations
    return [LocomoConversation(c.sample_id, c.speakers, c.sessions, c.questions[: config.limit]) for c in conversations]


def turn_line(turn: LocomoTurn) -> str:
    """One turn as the model reads it: who said it, and the photo they shared (LoCoMo's caption)."""
    return turn_message(turn.speaker, turn.text, turn.caption)


def dated(turn: LocomoTurn) -> str:
    """A turn with its time, as chunks and mixed hold it (memory_runtime.memory.conversation.dated_turn)."""
    return dated_turn(turn.date, turn.speaker, turn.text, turn.caption)


def full_context(conversation: LocomoConversation, answerer: Answerer, budget: int) -> tuple[str, set[str]]:
    """The conversation, session by session with its date, newest kept within `budget` tokens; and the
    dia_ids it holds."""
    blocks: list[tuple[str, list[str]]] = []
    for session in conversation.sessions:
        blocks.append((f"Session {session.index} ({said_when(session.date)}):", []))
        blocks.extend((turn_line(t), [t.dia_id]) for t in session.turns)
    kept: list[tuple[str, list[str]]] = []
    used = 0
    for line, ids in reversed(blocks):
        cost = len(answerer.ids(line + "\n"))
        if used + cost > budget:
            break
        kept.append((line, ids))
        used += cost
    kept.reverse()
    return "Conversation:\n" + "\n".join(line for line, _ in kept), {i for _, ids in kept for i in ids}


class ChunkIndex(LineIndex):
    """A conversation's turns, each with its date, under BM25 (fused with an embedder's cosine, if given)."""

    def __init__(self, conversation: LocomoConversation, embedder: Embedder | None = None) -> None:
        self.turns = conversation.turns()
        super().__init__([dated(t) for t in self.turns], embedder=embedder)

    def top(self, question: str, k: int) -> list[int]:
        """The positions of the k turns that match `question` best, in the order they were said."""
        if self.vectors is not None:
            return sorted(self.order(question)[:k])
        found, _ = self.retrieve(self.tokens([question]), min(k, len(self.lines)))
        return sorted(int(i) for i in found[0])


class FactIndex(LineIndex):
    """The facts a memory holds for one conversation, each as `dated_fact` writes it, under BM25: found by
    their own words, or (`said`, a turn's text by its id) by those and the words of the turn each was written
    from, which a fact's few words leave out of a question's reach. `lines` is what the reader sees: the facts."""

    def __init__(
        self, facts: Sequence[Fact], said: dict[str, str] | None = None, embedder: Embedder | None = None
    ) -> None:
        self.facts = sorted(facts, key=lambda f: (f.valid_from, f.id))
        lines = [dated_fact(f) for f in self.facts]
        keys = None if said is None else [f"{x} {said.get(f.source or '', '')}" for f, x in zip(self.facts, lines)]
        super().__init__(lines, keys, embedder)

    def top(self, query: str, k: int, without: set[int] = frozenset()) -> list[int]:
        """The positions of the k facts that match `query` best, leaving out those in `without`."""
        if len(self.lines) - len(without) <= 0 or k <= 0:
            return []
        return [i for i in self.order(query) if i not in without][:k]

    def other_speaker_margin(self, question: str, person: str) -> float:
        """How many times better the best fact about someone else matches `question` (the asked name left out)
        than the best fact about `person` (inf when none of theirs matches and another's does; 0 when nothing
        matches): a question about one speaker that the other's facts answer asks what the other said."""
        name = _first_name(person)
        best = {True: 0.0, False: 0.0}
        for i, score in self.ranked(name.sub(" ", question)):
            mine = bool(name.search(self.facts[i].subject))
            best[mine] = max(best[mine], score)
        if best[False] <= 0:
            return 0.0
        return best[False] / best[True] if best[True] > 0 else float("inf")

    def not_about(self, person: str) -> set[int]:
        """The positions of the facts whose subject does not name `person` (by first name, as a word)."""
        name = _first_name(person)
        return {i for i, fact in enumerate(self.facts) if not name.search(fact.subject)}


def fact_keys(conversation: LocomoConversation, keys: str) -> dict[str, str] | None:
    """What BM25 finds a fact by besides its own words, by the id of the turn it was written from (`FactIndex`'s
    `said`): nothing (`fact`); the turn's words and its photo's caption (`fact_and_turn`); those and the turn
    before it (`fact_and_exchange`), which a reply like "5 years already!" answers."""
    if keys == "fact":
        return None
    turns = conversation.turns()
    said = {t.dia_id: f"{t.text} {t.caption or ''}" for t in turns}
    if keys == "fact_and_exchange":
        said |= {turn.dia_id: f"{before.text} {said[turn.dia_id]}" for before, turn in zip(turns, turns[1:])}
    return said


def _first_name(person: str) -> re.Pattern:
    """A person's first name as a word, any case, with a possessive 's."""
    return re.compile(rf"\b{re.escape(person.split()[0])}(?:'s)?\b", re.IGNORECASE)


def asked_about(question: str, speakers: Sequence[str]) -> str | None:
    """The one speaker a question names (by first name, as a word), else None (neither, or both)."""
    named = [s for s in speakers if _first_name(s).search(question)]
    return named[0] if len(named) == 1 else None


@dataclass
class Ingestion:
    """What writing one conversation into a memory took: the facts per namespace, the seconds per turn."""

    store: TripletStore
    turn_seconds: list[float]  # each turn's own wall time (in a batch: shared with the others), one a turn
    seconds: float  # the whole ingestion's wall time

    @property
    def turns(self) -> int:
        return len(self.turn_seconds)


def ingest(
    system: System,
    conversations: list[LocomoConversation],
    memory: Any,
    batch: int,
    progress: Advance | None = None,
) -> Ingestion:
    """Every turn of every conversation fed to `system` as its speaker's message, dated with its session: the
    model writes what it takes from it into one memory, a namespace per conversation (turns in batches; a
    progress(1) a turn)."""
    from eval.systems import run_sessions

    store = TripletStore(":memory:", memory)

    def one_turn(conversation: LocomoConversation, turn: LocomoTurn):
        result = yield system.request(
            turn_line(turn), store, namespace=conversation.sample_id, said_at=turn.date, source=turn.dia_id
        )
        return result.wall_seconds

    turns = [(c, t) for c in conversations for t in c.turns()]
    started = time.perf_counter()
    seconds = run_sessions(system, (one_turn(c, t) for c, t in turns), batch, progress)
    return Ingestion(store, seconds, time.perf_counter() - started)


def structures_for(settings: Any, uses_memory: bool) -> list[str]:
    """The structures a system runs: the memory structures on a system with a memory, the others on one
    without (the base: zero_shot), so that each is run once with the same reader; a system that reads with
    its own model or a named one (locomo.reader: model, or a model's name) runs all of them."""
    own = settings.reader != "base"  # its own model, or a named reader: memlm's structures all share it
    return [s for s in settings.structures if (s in MEMORY_STRUCTURES) == uses_memory or (own and uses_memory)]


def progress_units(conversations: list[LocomoConversation], config: EvalConfig, uses_memory: bool) -> int:
    """The items of a system's progress: a turn read into its memory (if it has memory structures), a question
    answered under each structure."""
    structures = structures_for(config.locomo, uses_memory)
    turns = sum(len(c.turns()) for c in conversations) if set(structures) & set(MEMORY_STRUCTURES) else 0
    return turns + len(structures) * sum(len(c.questions) for c in conversations)


def evaluate_locomo(
    system: System,
    conversations: list[LocomoConversation],
    config: EvalConfig,
    progress: Advance | None = None,
    memory: Any = None,
    batch: int = 1,
) -> list[dict]:
    """Every question of every conversation under each structure of `config.locomo` that applies to `system`
    (the memory structures to systems with a memory, written by its model), answered by the base model, with
    `locomo.reader: model` by the system's own, with a named reader by that one (System.reader, opened beside it)."""
    settings = config.locomo
    own = settings.reader == "model" or (named_reader(settings.reader) and not system.uses_memory)
    if named_reader(settings.reader) and system.uses_memory and system.reader is None:
        raise ValueError(f"locomo.reader: {settings.reader} was not opened beside the model under test")
    reader, reader_tokenizer = (
        (system.model, system.tokenizer) if own else system.reader or (system.model, system.tokenizer)
    )
    if reader is None:
        raise ValueError("locomo: runs on the hf engine (generation.engine=hf)")
    answerer = Answerer(reader, reader_tokenizer, settings.answer_tokens, settings.reader_refusal)
    structures = structures_for(settings, system.uses_memory)
    window = settings.window or window_of(reader, reader_tokenizer)
    advance = progress or quiet
    embedder = None
    if settings.retrieval == "hybrid":
        from memory_runtime.models.sentence_embedding import sentence_embedder

        embedder = sentence_embedder(settings.embedding_model)  # before ingestion: a missing model fails at once
    ingestion = None
    if any(s in MEMORY_STRUCTURES for s in structures):
        ingestion = ingest(system, conversations, memory, batch, advance)
    rows: list[dict] = []
    written: list[dict] = []
    for conversation in conversations:
        if "full_context" in structures:
            rows += _full_context_rows(conversation, answerer, window, advance)
        if "chunks" in structures:
            rows += _chunk_rows(conversation, answerer, settings.top_k, advance, embedder)
        if ingestion is not None:
            said = fact_keys(conversation, settings.fact_keys)
            index = FactIndex(ingestion.store.facts(namespace=conversation.sample_id), said, embedder)
            written += written_facts(conversation, index)
            for structure in (s for s in structures if s in MEMORY_STRUCTURES):
                rows += _memory_rows(structure, conversation, index, answerer, settings, advance)
    if ingestion is not None and rows:
        rows[0]["ingestion"] = {
            "turns": ingestion.turns,
            "batch": batch,
            "seconds_per_turn": round(ingestion.seconds / max(1, ingestion.turns), 3),  # the rate: wall / turns
            "turn_latency_p50": round(sorted(ingestion.turn_seconds)[len(ingestion.turn_seconds) // 2], 3),
            "seconds": round(ingestion.seconds, 1),
            "facts": {c.sample_id: len(ingestion.store.facts(namespace=c.sample_id)) for c in conversations},
        }
        rows[0]["written"] = written
    return rows


def written_facts(conversation: LocomoConversation, index: FactIndex) -> list[dict]:
    """Every fact the model wrote, with its turn (`source`, a dia_id) and its line as a read returns it: kept in
    the first row (cases.jsonl), so that reads can be measured again without writing the conversations again."""
    return [
        {"conversation": conversation.sample_id, "source": f.source, "valid_from": f.valid_from, "line": line}
        | f.triplet._asdict()
        for f, line in zip(index.facts, index.lines)
    ]


def _full_context_rows(
    conversation: LocomoConversation, answerer: Answerer, window: int, advance: Advance
) -> list[dict]:
    reserve = 256  # the prompt's own words, the question and the answer
    context, held = full_context(conversation, answerer, window - reserve - len(answerer.ids(ANSWER_PROMPT)))
    started = time.perf_counter()
    head, _ = answerer.prompt_parts(context, "")
    cache = answerer.prefill(head)
    prefill_s = time.perf_counter() - started
    rows = []
    for question in conversation.questions:
        started = time.perf_counter()
        tail = answerer.question_ids(question.question)
        prediction = answerer.answer(tail, cache)
        seconds = time.perf_counter() - started
        rows.append(_row("full_context", conversation, question, prediction, held, len(head) + len(tail), seconds))
        advance(1)
    if rows:  # the shared prefill counts once, in the conversation's first row
        rows[0]["prefill_s"] = prefill_s
    return rows


def _chunk_rows(
    conversation: LocomoConversation, answerer: Answerer, k: int, advance: Advance, embedder: Embedder | None
) -> list[dict]:
    index = ChunkIndex(conversation, embedder)
    rows = []
    for question in conversation.questions:
        started = time.perf_counter()
        found = index.top(question.question, k)
        context = TURNS_HEADER + "\n" + "\n".join(index.lines[i] for i in found)
        head, tail = answerer.prompt_parts(context, question.question)
        prediction = answerer.answer(head + tail)
        seconds = time.perf_counter() - started
        held = {index.turns[i].dia_id for i in found}
        rows.append(_row("chunks", conversation, question, prediction, held, len(head) + len(tail), seconds))
        advance(1)
    return rows


def _memory_rows(
    structure: str,
    conversation: LocomoConversation,
    index: FactIndex,
    answerer: Answerer,
    settings: Any,
    advance: Advance,
) -> list[dict]:
    """A memory structure's rows: the facts BM25 finds for the question (in `rounds` rounds for iterative),
    with their source turns for mixed."""
    by_id = {t.dia_id: t for t in conversation.turns()}
    written: dict[str, list[str]] = {}  # a turn's id: the facts written from it, dated as a read holds them
    for fact, line in zip(index.facts, index.lines):
        if fact.source:
            written.setdefault(fact.source, []).append(line)
    rows = []
    for question in conversation.questions:
        started = time.perf_counter()
        named = asked_about(question.question, conversation.speakers)
        person = named if settings.subject_check else None
        others = index.not_about(person) if person else set()
        # the asked name matches every fact of theirs: the facts read are those that match the rest
        asked = _first_name(person).sub(" ", question.question) if person else question.question
        found = index.top(asked, settings.facts, without=others)
        rounds = settings.rounds if structure == "iterative" else 1
        last = found
        for _ in range(rounds - 1):
            # what the last round returned, without its dates (every fact of a session shares those)
            query = " ".join([asked, *(f"{index.facts[i].relation} {index.facts[i].object}" for i in last)])
            last = index.top(query, max(1, settings.facts // 2), without=set(found) | others)
            found += last
        found.sort()
        lines = [index.lines[i] for i in found]
        sources = [index.facts[i].source for i in found if index.facts[i].source]
        if structure == "mixed":
            said = [by_id[s] for s in dict.fromkeys(sources) if s in by_id]
            turns = sorted(said, key=lambda t: (t.date, t.dia_id))
            context = "Facts remembered:\n" + "\n".join(lines) + "\n\nWhere they were said:\n"
            context += "\n".join(dated(t) for t in turns)
        else:
            context = FACTS_HEADER + "\n" + "\n".join(lines)
        if not found:
            context = "Facts remembered: none."
        margin = index.other_speaker_margin(question.question, named) if named else 0.0
        if settings.other_speaker_margin is not None and margin > settings.other_speaker_margin:
            prediction, tokens = NOT_MENTIONED, 0  # what the other speaker said: the reader is not asked
        else:
            head, tail = answerer.prompt_parts(context, question.question)
            prediction, tokens = answerer.answer(head + tail), len(head) + len(tail)
        seconds = time.perf_counter() - started
        row = _row(structure, conversation, question, prediction, set(sources), tokens, seconds)
        written_figures = _written(question, written, by_id)
        rows.append({**row, "facts": len(found), "other_speaker_margin": round(margin, 3), **written_figures})
        advance(1)
    return rows


def _written(question: Any, written: dict[str, list[str]], by_id: dict[str, LocomoTurn]) -> dict:
    """What any read could hold: the share of the question's evidence turns the memory wrote a fact from, and
    of its answer's words that those facts hold, beside the share the evidence turns hold as chunks read them."""
    evidence = [e for e in question.evidence if e in by_id]
    answered = question.category in ANSWERED_CATEGORIES and evidence
    return {
        "evidence_written": evidence_recall(question.evidence, written),
        "answer_written": answer_words(question.answer, [f for e in evidence for f in written.get(e, [])])
        if answered
        else None,
        "answer_said": answer_words(question.answer, [dated(by_id[e]) for e in evidence]) if answered else None,
    }


def _row(
    structure: str,
    conversation: LocomoConversation,
    question: Any,
    prediction: str | ReaderAnswer,
    held: set[str],
    tokens: int,
    seconds: float,
) -> dict:
    """A question's row; a reader's answer (not one given without the reader) with how likely its refusal was
    and, where it refused, what it says instead (`answered_as`)."""
    answer = prediction if isinstance(prediction, ReaderAnswer) else ReaderAnswer(prediction, None)
    return {
        "structure": structure,
        "conversation": conversation.sample_id,
        "question": question.question,
        "category": question.category,
        "gold": question.answer,
        "prediction": answer.text,
        "f1": score_answer(question, answer.text),
        "refusal_p": None if answer.refusal_p is None else round(answer.refusal_p, 4),
        "unrefused": answer.unrefused,
        "unrefused_f1": None if answer.unrefused is None else score_answer(question, answer.unrefused),
        "evidence_recall": evidence_recall(question.evidence, held),
        "context_tokens": tokens,
        "seconds": seconds,
    }


def summarise_locomo(rows: list[dict]) -> dict:
    """Per structure: LoCoMo's F1 per category and overall (1-4), adversarial refused, evidence recall,
    tokens a question, questions a second."""
    summary: dict[str, Any] = {}
    ingestion = next((r["ingestion"] for r in rows if r.get("ingestion")), None)
    for structure in dict.fromkeys(r["structure"] for r in rows):
        mine = [r for r in rows if r["structure"] == structure]
        seconds = sum(r["seconds"] for r in mine) + sum(r.get("prefill_s") or 0 for r in mine)
        summary[structure] = {
            **summarize_scores((r["category"], r["f1"]) for r in mine),
            "questions": len(mine),
            "evidence_recall_pct": _mean_pct([r["evidence_recall"] for r in mine]),
            **{f"{key}_pct": _mean_pct([r.get(key) for r in mine]) for key in WRITTEN},
            **refusal_figures(mine),
            "tokens_per_question": round(sum(r["context_tokens"] for r in mine) / len(mine)),
            "questions_per_s": round(len(mine) / seconds, 3) if seconds else None,
            "seconds_per_question_p50": round(sorted(r["seconds"] for r in mine)[len(mine) // 2], 3),
        }
        if structure in MEMORY_STRUCTURES and ingestion is not None:
            summary[structure]["ingestion"] = ingestion
    return summary


def refusal_figures(rows: list[dict]) -> dict:
    """The share of answerable questions (categories 1-4) answered 'Not mentioned.'; and overall F1 and
    adversarial refused had the reader answered every question it refused (`answered_as` 'never';
    other_speaker_margin's refusals stay)."""
    answerable = [r for r in rows if r["category"] in ANSWERED_CATEGORIES]
    unrefused = summarize_scores((r["category"], r["f1"]) for r in (answered_as(r, "never") for r in rows))
    return {
        "answerable_refused_pct": mean_percent([float(refuses(r["prediction"])) for r in answerable]),
        "overall_f1_unrefused": unrefused["overall_f1"],
        "adversarial_refused_pct_unrefused": unrefused["adversarial_refused_pct"],
    }


def refused_unasked(row: dict, margin: float) -> dict:
    """A memory structure's row as a run with `other_speaker_margin` = `margin` gives it: "Not mentioned.",
    the reader not asked, where the question's margin exceeds it. Exact for margins at most the run's (a
    question the run refused unasked stays refused; one the reader answered has its margin in the row)."""
    if row.get("other_speaker_margin") is None or row["other_speaker_margin"] <= margin:
        return row
    score = score_gold(row["category"], row["gold"], NOT_MENTIONED)
    return {**row, "prediction": NOT_MENTIONED, "f1": score, "refusal_p": None, "unrefused": None, "context_tokens": 0}


def _mean_pct(values: list[float | None]) -> float | None:
    return mean_percent([v for v in values if v is not None])


def sample_groups(summary: dict) -> list[tuple[str, int]]:
    return [
        (f"{structure}, {CATEGORY_NAMES[int(c)]}", figures["questions"])
        for structure, s in summary.items()
        for c, figures in s["categories"].items()
    ]


def locomo_section(summary: dict, meta: dict) -> list[str]:
    """report.md: every system's structures, overall and per-category F1 with the questions they rest on."""
    rows = [["system", "structure", "overall F1 (1-4)", *CATEGORY_NAMES.values()] + ["evidence held", "tokens", "q/s"]]
    for system, s in summary.items():
        for structure, f in s.get("locomo", {}).items():
            per = [f["categories"].get(c) or f["categories"].get(str(c)) for c in CATEGORY_NAMES]
            rows.append(
                [system, structure, num(f["overall_f1"], "{:.1f}")]
                + [f"{p['f1']} (n={p['questions']})" if p else "–" for p in per]
                + [num(f["evidence_recall_pct"], "{:.1f}%"), str(f["tokens_per_question"]), num(f["questions_per_s"])]
            )
    if len(rows) == 1:
        return []
    written = []
    for system, s in summary.items():
        memory = next((f for f in s.get("locomo", {}).values() if f.get("ingestion")), None)
        if memory:
            ingestion = memory["ingestion"]
            facts = ", ".join(f"{c} {n}" for c, n in ingestion["facts"].items())
            written.append(
                f"- {system} wrote its memory from {ingestion['turns']} turns: {facts} facts; {ingestion['seconds']} s"
                f" in all, {ingestion['seconds_per_turn']} s a turn ({ingestion['batch']} turns at once; a turn's own"
                f" latency p50 {ingestion['turn_latency_p50']} s). It wrote from"
                f" {num(memory.get('evidence_written_pct'), '{:.1f}%')} of the questions' evidence turns; those facts"
                f" hold {num(memory.get('answer_written_pct'), '{:.1f}%')} of the answers' words (categories 1-4),"
                f" the turns themselves {num(memory.get('answer_said_pct'), '{:.1f}%')}: what any read could find."
            )
    refusals = [
        f"- {system}, {structure}: {num(f.get('answerable_refused_pct'), '{:.1f}%')} of the answerable questions"
        f" answered 'Not mentioned.'; had the reader answered each it refused (locomo.reader_refusal: never),"
        f" overall F1 {num(f.get('overall_f1_unrefused'), '{:.1f}')} and adversarial refused"
        f" {num(f.get('adversarial_refused_pct_unrefused'), '{:.1f}%')}."
        for system, s in summary.items()
        for structure, f in s.get("locomo", {}).items()
        if f.get("answerable_refused_pct")
    ]
    return [
        "## LoCoMo",
        "",
        "LoCoMo's F1 (eval/locomo.py) per category; overall over categories 1-4 as the published tables; for"
        " adversarial questions the share of answers that refuse. Evidence held: the share of each question's"
        " evidence turns in its context (for the memory: the turns its facts were written from). Tokens: the"
        " context's, a question. " + readers_line((meta.get("locomo") or {}).get("reader", "base")),
        "",
        markdown_table(rows),
        "",
        *([*written, ""] if written else []),
        *([*refusals, ""] if refusals else []),
    ]


PART = Part(
    name="locomo",
    systems=("memlm", "zero_shot"),
    load=load_conversations,
    cases_file=locomo_file,
    evaluate=lambda system, cases, config, memory, progress, batch: evaluate_locomo(
        system, cases, config, progress, memory, batch
    ),
    summarise=lambda rows, uses_memory: summarise_locomo(rows),
    sample_groups=sample_groups,
    sections=locomo_section,
    units=progress_units,
)
