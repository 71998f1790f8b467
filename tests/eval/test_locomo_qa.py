"""eval/locomo_qa.py: LoCoMo's questions over full context and BM25 chunks, on a tiny random Llama with the
real SmolLM2 tokenizer and chat template; the part in a real `memlm eval` run."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from eval.eval_config import EvalConfig
from eval.locomo import LocomoConversation, LocomoQuestion, LocomoSession, LocomoTurn
from eval.locomo_qa import (
    DEV_FILE,
    ChunkIndex,
    FactIndex,
    dated,
    evaluate_locomo,
    fact_keys,
    full_context,
    load_conversations,
    locomo_section,
    progress_units,
    refused_unasked,
    summarise_locomo,
    turn_line,
)
from eval.locomo_reader import Answerer, answered_as
from eval.systems import System
from memory_runtime.generation.backend import ScriptedBackend
from memory_runtime.generation.batching import OneAtATime
from memory_runtime.memory.conversation import NOT_MENTIONED
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import StreamParser, render_write
from tests.eval.test_locomo_reader import RefusalBiased


def conversation() -> LocomoConversation:
    day = datetime(2023, 5, 8, 13, 56)
    lines = [
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "Yeah, I painted that lake sunrise last year!"),
        ("Caroline", "We adopted a dog named Oscar."),
        ("Melanie", "I am training for a marathon in Boston."),
    ]
    turns = tuple(LocomoTurn(f"D1:{i + 1}", who, text, 1, day, None) for i, (who, text) in enumerate(lines))
    questions = (
        LocomoQuestion("What is the name of the dog they adopted?", "Oscar", 4, ("D1:3",)),
        LocomoQuestion("What is Melanie training for?", "a marathon", 4, ("D1:4",)),
        LocomoQuestion("What did Caroline paint?", "Not mentioned", 5, ()),
    )
    return LocomoConversation("conv-test", ("Caroline", "Melanie"), (LocomoSession(1, day, turns),), questions)


def test_bm25_finds_the_turn_a_question_asks_about_and_keeps_the_order_said():
    index = ChunkIndex(conversation())
    assert index.top("What is the name of the dog they adopted?", 1) == [2]
    assert index.top("marathon training", 1) == [3]
    assert index.top("dog marathon", 2) == [2, 3]  # in the order said, not by score
    assert index.lines[0].startswith("(1:56 PM on 8 May 2023) Caroline: I went")


def test_a_shared_photo_is_shown_without_the_bracket_that_opens_a_memory_call():
    """A writer never trained on photos copied a "[shares a photo: ...]" caption as if it opened a call."""
    day = datetime(2023, 5, 8, 13, 56)
    turn = LocomoTurn("D1:1", "Melanie", "Look what I made!", 1, day, "a photo of a bowl with a flower design")
    assert turn_line(turn) == "Melanie: Look what I made! (shares a photo: a photo of a bowl with a flower design)"
    assert dated(turn) == f"(1:56 PM on 8 May 2023) {turn_line(turn)}"
    assert not StreamParser().feed(turn_line(turn))  # nothing in it reads as the start of a call
    assert "[" not in turn_line(turn)


def test_full_context_keeps_the_newest_turns_within_its_budget(smollm2_tokenizer):
    answerer = Answerer(None, smollm2_tokenizer)
    whole, held = full_context(conversation(), answerer, 10_000)
    assert held == {"D1:1", "D1:2", "D1:3", "D1:4"} and "Session 1 (1:56 PM on 8 May 2023):" in whole
    short, held = full_context(conversation(), answerer, 30)
    assert held == {"D1:3", "D1:4"} and "Oscar" in short and "LGBTQ" not in short  # the newest kept
    assert len(smollm2_tokenizer(short)["input_ids"]) <= 30 + 5


def test_a_cached_context_answers_as_the_whole_prompt_does(tiny_model, smollm2_tokenizer):
    """Prefilled once and cropped back after each question: every answer equals the one from the whole prompt."""
    answerer = Answerer(tiny_model, smollm2_tokenizer, max_new_tokens=6)
    context, _ = full_context(conversation(), answerer, 10_000)
    head, _ = answerer.prompt_parts(context, "")
    cache = answerer.prefill(head)
    for question in conversation().questions:
        whole_head, tail = answerer.prompt_parts(context, question.question)
        assert whole_head == head and answerer.question_ids(question.question) == tail  # the context's part alone
        cached, whole = answerer.answer(tail, cache), answerer.answer(head + tail)
        assert cached.text == whole.text and cached.refusal_p == pytest.approx(whole.refusal_p, abs=1e-3)
        assert cache.get_seq_length() == len(head)


def test_rows_of_a_refusing_reader_read_as_the_run_that_may_not_refuse(tiny_model, smollm2_tokenizer):
    """answered_as(row, 'never') on a greedy run's rows gives the rows of a run with reader_refusal: never."""
    reader = RefusalBiased(tiny_model, smollm2_tokenizer)
    system = System("zero_shot", reader, smollm2_tokenizer)
    runs = {}
    for policy in ("greedy", "never"):
        settings = {"answer_tokens": 4, "top_k": 2, "structures": ["chunks"], "reader_refusal": policy}
        config = EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo=settings)
        runs[policy] = evaluate_locomo(system, [conversation()], config)
    assert all(r["prediction"].startswith(NOT_MENTIONED) and r["unrefused"] for r in runs["greedy"])
    as_never = [answered_as(r, "never") for r in runs["greedy"]]
    assert [r["prediction"] for r in as_never] == [r["prediction"] for r in runs["never"]]
    assert [r["f1"] for r in as_never] == [r["f1"] for r in runs["never"]]
    assert [answered_as(r, "greedy") for r in runs["greedy"]] == runs["greedy"]
    summary = summarise_locomo(runs["greedy"])["chunks"]
    never = summarise_locomo(runs["never"])["chunks"]
    assert summary["answerable_refused_pct"] == 100.0 and summary["adversarial_refused_pct"] == 100.0
    assert summary["overall_f1_unrefused"] == never["overall_f1"]
    assert summary["adversarial_refused_pct_unrefused"] == never["adversarial_refused_pct"] == 0.0
    lines = locomo_section({"zero_shot": {"locomo": {"chunks": summary}}}, {})
    assert any("100.0% of the answerable questions answered 'Not mentioned.'" in line for line in lines)


def test_every_question_is_answered_under_each_structure(tiny_model, smollm2_tokenizer):
    config = EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={"answer_tokens": 4, "top_k": 2})
    system = System("zero_shot", tiny_model, smollm2_tokenizer)
    ticks = []
    rows = evaluate_locomo(system, [conversation()], config, ticks.append)
    # the base (no memory) runs the structures without one; the memory structures are the model under test's
    assert [r["structure"] for r in rows] == ["full_context"] * 3 + ["chunks"] * 3
    assert sum(ticks) == progress_units([conversation()], config, uses_memory=False) == 6  # a tick a question
    chunks = [r for r in rows if r["structure"] == "chunks"]
    assert chunks[0]["evidence_recall"] == 1.0 and chunks[2]["evidence_recall"] is None
    summary = summarise_locomo(rows)
    assert set(summary) == {"full_context", "chunks"}
    for figures in summary.values():
        assert figures["questions"] == 3 and figures["categories"][4]["questions"] == 2
        assert figures["tokens_per_question"] > 0 and figures["questions_per_s"] > 0
    assert summary["full_context"]["evidence_recall_pct"] == 100.0
    lines = locomo_section({"zero_shot": {"locomo": summary}}, {})
    assert lines[0] == "## LoCoMo" and any("| zero_shot | chunks |" in line for line in lines)


def test_limit_takes_each_conversations_first_questions():
    config = EvalConfig(generation={"model": "x"}, limit=2)
    conversations = load_conversations(config)
    assert [c.sample_id for c in conversations] == ["conv-26", "conv-30"]
    assert all(len(c.questions) == 2 for c in conversations)
    with pytest.raises(FileNotFoundError, match="locomo.file"):
        load_conversations(EvalConfig(generation={"model": "x"}, locomo={"file": "/nonexistent.json"}))


def test_the_part_runs_in_memlm_eval(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from memlm.cli import app

    out = tmp_path / "eval"
    args = ["eval", "--model", str(tiny_model_dir), "--parts", "locomo", "--systems", "zero_shot", "--limit", "1"]
    args += ["--out", str(out), "generation.engine=hf", "locomo.answer_tokens=4", "locomo.window=1024"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    metrics = json.loads((out / "metrics.json").read_text())
    figures = metrics["systems"]["zero_shot"]["locomo"]
    assert figures["full_context"]["questions"] == figures["chunks"]["questions"] == 2  # 2 conversations x 1
    assert figures["full_context"]["tokens_per_question"] <= 1024
    assert "## LoCoMo" in (out / "report.md").read_text() and DEV_FILE.is_file()


WRITES = [
    render_write("Caroline", "went to", "LGBTQ support group yesterday") + " Noted.",
    "Nothing to store.",
    render_write("Caroline", "adopted", "dog named Oscar") + " Noted.",
    render_write("Melanie", "is training for", "marathon in Boston") + " Noted.",
]


def scripted_memlm(model, tokenizer, writes=WRITES) -> tuple[System, ScriptedBackend]:
    """memlm whose writer says `writes`, turn by turn, and whose model (`reader=model`) answers."""
    backend = ScriptedBackend(writes)
    decoder = OneAtATime(lambda request: backend)
    return System("memlm", model, tokenizer, decoder=decoder, reader=(None, None)), backend


def test_the_model_under_test_writes_a_dated_memory_that_each_memory_structure_reads(tiny_model, smollm2_tokenizer):
    """Turn by turn, each the speaker's message dated with its session; facts dated, "yesterday" resolved, each
    kept with its turn's id; then triples, iterative and mixed answer every question from them."""
    backend = ScriptedBackend(WRITES)
    # the scripted writer has no weights: the reader (the base, in memlm eval) answers every question
    system = System(
        "memlm", None, None, decoder=OneAtATime(lambda request: backend), reader=(tiny_model, smollm2_tokenizer)
    )
    config = EvalConfig(
        generation={"model": "x"}, parts=["locomo"], locomo={"answer_tokens": 4, "top_k": 2, "rounds": 2}
    )
    memory = MemoryConfig(open_relations=True)
    ticks = []
    rows = evaluate_locomo(system, [conversation()], config, ticks.append, memory, batch=1)
    assert sum(ticks) == progress_units([conversation()], config, uses_memory=True) == 4 + 3 * 3  # turns, answers
    assert [m[-1]["content"] for m in backend.seen][:2] == [
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
        "Melanie: Yeah, I painted that lake sunrise last year!",
    ]
    assert [r["structure"] for r in rows] == ["triples"] * 3 + ["iterative"] * 3 + ["mixed"] * 3
    ingestion = rows[0]["ingestion"]
    assert ingestion["turns"] == 4 and ingestion["facts"] == {"conv-test": 3}
    written = rows[0]["written"]  # what was written, from which turn: a run's diagnostics need no second ingestion
    assert [(w["subject"], w["relation"], w["source"]) for w in written] == [
        ("Caroline", "went to", "D1:1"),
        ("Caroline", "adopted", "D1:3"),
        ("Melanie", "is training for", "D1:4"),
    ]
    assert all(w["conversation"] == "conv-test" and w["line"].startswith("(") for w in written)
    triples = [r for r in rows if r["structure"] == "triples"]
    assert triples[0]["evidence_recall"] == 1.0 and triples[1]["evidence_recall"] == 1.0  # the dog, the marathon
    summary = summarise_locomo(rows)
    assert summary["triples"]["ingestion"]["facts"] == {"conv-test": 3}
    assert summary["triples"]["tokens_per_question"] < summary["mixed"]["tokens_per_question"]


def test_a_model_trained_to_read_answers_every_structure_itself(tiny_model, smollm2_tokenizer):
    """locomo.reader: model: the system answers with its own model, and runs chunks beside its memory so
    that its structures are compared with the same reader."""
    system, backend = scripted_memlm(tiny_model, smollm2_tokenizer)
    config = EvalConfig(
        generation={"model": "x"},
        parts=["locomo"],
        locomo={"answer_tokens": 4, "top_k": 2, "reader": "model", "structures": ["chunks", "triples"]},
    )
    rows = evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
    assert [r["structure"] for r in rows] == ["chunks"] * 3 + ["triples"] * 3
    summary = summarise_locomo(rows)
    lines = locomo_section({"memlm": {"locomo": summary}}, {"locomo": {"reader": "model"}})
    assert any("its own model" in line for line in lines) and any("| memlm | chunks |" in line for line in lines)


def test_a_named_reader_reads_the_memory_another_model_wrote(tiny_model, smollm2_tokenizer):
    """locomo.reader: a model's name: the memory written by the model under test (here scripted, no weights) and
    its chunks are read by that one (System.reader, opened beside it by memlm eval): writer and reader apart."""
    backend = ScriptedBackend(WRITES)
    config = EvalConfig(
        generation={"model": "x"},
        parts=["locomo"],
        locomo={"answer_tokens": 4, "top_k": 2, "reader": "runs/reader", "structures": ["chunks", "triples"]},
    )
    unopened = System("memlm", None, None, decoder=OneAtATime(lambda request: backend))
    with pytest.raises(ValueError, match="locomo.reader: runs/reader was not opened"):
        evaluate_locomo(unopened, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
    system = System(
        "memlm", None, None, decoder=OneAtATime(lambda request: backend), reader=(tiny_model, smollm2_tokenizer)
    )
    rows = evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
    assert [r["structure"] for r in rows] == ["chunks"] * 3 + ["triples"] * 3
    lines = locomo_section({"memlm": {"locomo": summarise_locomo(rows)}}, {"locomo": {"reader": "runs/reader"}})
    assert any("answered by runs/reader (locomo.reader)" in line for line in lines)


def test_facts_k_sets_the_facts_read_apart_from_the_turns_chunks_read(tiny_model, smollm2_tokenizer):
    """A fact line is a third of a turn's tokens: locomo.facts_k reads more (or fewer) facts than top_k turns.
    Each memory row says whether the memory wrote anything from the question's evidence turns (the marathon
    turn is left unwritten here), apart from what the read held."""
    writes = [*WRITES[:3], "Nothing to store."]
    settings = {"answer_tokens": 4, "top_k": 3, "reader": "model", "structures": ["chunks", "triples"]}
    counts = {}
    for facts_k in (None, 1):
        system, _ = scripted_memlm(tiny_model, smollm2_tokenizer, writes)
        config = EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={**settings, "facts_k": facts_k})
        rows = evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
        triples = [r for r in rows if r["structure"] == "triples"]
        counts[facts_k] = [r["facts"] for r in triples]
        assert [r["evidence_written"] for r in triples] == [1.0, 0.0, None]  # the dog, the marathon, no evidence
        assert [r["answer_written"] for r in triples] == [1.0, 0.0, None]  # "Oscar" in the dog's fact
        assert [r["answer_said"] for r in triples] == [1.0, 1.0, None]  # "marathon" in its turn
        summary = summarise_locomo(rows)["triples"]
        assert (summary["evidence_written_pct"], summary["answer_written_pct"], summary["answer_said_pct"]) == (
            50.0,
            50.0,
            100.0,
        )
    lines = locomo_section({"memlm": {"locomo": summarise_locomo(rows)}}, {"locomo": {"reader": "model"}})
    assert any("those facts hold 50.0% of the answers' words" in line for line in lines)
    assert max(counts[None]) > 1 and max(counts[1]) == 1
    with pytest.raises(ValueError, match="facts_k"):
        EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={"facts_k": 0})


def test_hybrid_retrieval_reads_k_facts_where_bm25_matches_fewer(tiny_model, smollm2_tokenizer, monkeypatch):
    """locomo.retrieval: hybrid gives chunks and the memory structures the embedder's ranking beside BM25's:
    "What is Melanie training for?" matches one fact by its words, so BM25 reads that one and hybrid its top_k;
    an embedding model that is not there fails before anything is written."""
    import memory_runtime.models.sentence_embedding as sentence_embedding
    from tests.memory_runtime.models.test_sentence_embedding import Axes

    monkeypatch.setattr(sentence_embedding, "sentence_embedder", lambda name: Axes())
    settings = {"answer_tokens": 4, "top_k": 2, "reader": "model", "structures": ["chunks", "triples"]}
    facts = {}
    for retrieval in ("bm25", "hybrid"):
        system, _ = scripted_memlm(tiny_model, smollm2_tokenizer)
        config = EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={**settings, "retrieval": retrieval})
        rows = evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
        facts[retrieval] = [r["facts"] for r in rows if r["structure"] == "triples"]
    assert facts["bm25"][1] == 1 and facts["hybrid"] == [2, 2, 2]
    monkeypatch.undo()
    system, backend = scripted_memlm(tiny_model, smollm2_tokenizer)
    config = EvalConfig(
        generation={"model": "x"},
        parts=["locomo"],
        locomo={**settings, "retrieval": "hybrid", "embedding_model": "/no/such/model"},
    )
    with pytest.raises(FileNotFoundError, match="/no/such/model"):
        evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)
    assert backend.seen == []  # nothing was written


def test_facts_are_read_with_their_dates_and_found_by_their_words():
    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        day = datetime(2023, 5, 8, 13, 56)
        store.write("Caroline", "went to", "LGBTQ support group on 7 May 2023", at=day, source="D1:1")
        store.write("Melanie", "painted", "lake sunrise in 2022", at=day, source="D1:2")
        store.write("Caroline", "adopted", "dog named Oscar", at=day, source="D1:3")
        index = FactIndex(store.facts())
    assert index.lines[0] == "(8 May 2023) Caroline went to LGBTQ support group on 7 May 2023"
    assert index.top("What did Melanie paint?", 1) == [1]
    assert index.top("adopted dog", 5, without={2}) == []  # only the dog's fact matches, and it is left out
    assert index.top("the a an", 3) == []  # stop words only
    assert FactIndex([]).top("anything", 3) == []


def test_the_subject_check_reads_only_the_facts_of_the_speaker_asked_about():
    """ "What did Caroline paint?" (LoCoMo's adversarial kind: Melanie painted): BM25 finds Melanie's painting;
    with locomo.subject_check only Caroline's facts are read, and none of hers is about painting."""
    from eval.locomo_qa import asked_about

    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        day = datetime(2023, 5, 8, 13, 56)
        store.write("Caroline", "went to", "LGBTQ support group on 7 May 2023", at=day, source="D1:1")
        store.write("Melanie", "painted", "lake sunrise in 2022", at=day, source="D1:2")
        store.write("Caroline's dog", "is named", "Oscar", at=day, source="D1:3")
        index = FactIndex(store.facts())
    speakers = ("Caroline", "Melanie")
    assert asked_about("What did Caroline paint?", speakers) == "Caroline"
    assert asked_about("What did caroline and Melanie do?", speakers) is None  # both: no check
    assert asked_about("What is the name of the dog?", speakers) is None
    assert index.not_about("Caroline") == {1} and index.not_about("Caroline Smith") == {1}
    assert index.top("What did Caroline paint?", 3)[0] == 1  # Melanie's painting first, then Caroline's by name
    assert index.top("What did paint?", 3, without=index.not_about("Caroline")) == []  # as the check asks


def painted_rows(reader: tuple, **locomo) -> list[dict]:
    """The triples rows of the test conversation in which Melanie, not Caroline, painted (LoCoMo's adversarial
    kind: "What did Caroline paint?"), with the locomo settings given."""
    painted = [*WRITES[:1], render_write("Melanie", "painted", "lake sunrise last year") + " Noted.", *WRITES[2:]]
    backend = ScriptedBackend(painted)
    system = System("memlm", None, None, decoder=OneAtATime(lambda request: backend), reader=reader)
    settings = {"structures": ["triples"], "answer_tokens": 4, "top_k": 2, **locomo}
    config = EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo=settings)
    return evaluate_locomo(system, [conversation()], config, None, MemoryConfig(open_relations=True), batch=1)


def test_the_subject_check_leaves_a_question_of_the_wrong_speaker_without_facts(tiny_model, smollm2_tokenizer):
    """With locomo.subject_check, "What did Caroline paint?" reads no fact (Melanie painted); without it,
    Melanie's painting is in the prompt. A question about Melanie reads her facts that match it beyond her name."""
    read: dict[bool, dict[str, int]] = {}
    for check in (False, True):
        rows = painted_rows((tiny_model, smollm2_tokenizer), subject_check=check)
        read[check] = {r["question"]: r["facts"] for r in rows}
    assert read[False]["What did Caroline paint?"] >= 1 and read[True]["What did Caroline paint?"] == 0
    # Melanie's marathon still read; her painting, which matched only by her name, no longer
    assert read[False]["What is Melanie training for?"] == 2 and read[True]["What is Melanie training for?"] == 1


def test_facts_are_found_by_the_words_of_their_turn_with_fact_keys_fact_and_turn():
    """ "How does Caroline feel about the group?": the fact `Caroline went to support group` lacks "feel" and
    "powerful"; its turn has them. With the turn's words as a key the fact is found; the reader sees the fact."""
    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        day = datetime(2023, 5, 8, 13, 56)
        store.write("Caroline", "went to", "support group", at=day, source="D1:1")
        store.write("Melanie", "painted", "lake sunrise", at=day, source="D1:2")
        store.write("Caroline", "wrote", "poem", at=day)  # no source: found by its own words only
        facts = store.facts()
    said = {"D1:1": "The support group felt so powerful.", "D1:2": "Look at my lake sunrise!"}
    assert FactIndex(facts).top("What felt powerful?", 3) == []
    keyed = FactIndex(facts, said)
    assert keyed.top("What felt powerful?", 3) == [0]
    assert keyed.lines == FactIndex(facts).lines  # what the reader sees does not change
    assert keyed.top("poem", 3) == [2]


def test_fact_keys_fact_and_exchange_finds_a_reply_by_the_turn_it_answers():
    """ "How long have you been married?" / "5 years already!": the reply's fact `Melanie>>is>>5 years` lacks
    "married"; keyed by its turn alone it is not found, keyed by the exchange (the turn before too) it is."""
    day = datetime(2023, 5, 8, 13, 56)
    lines = [("Caroline", "How long have you been married?"), ("Melanie", "5 years already!")]
    turns = tuple(LocomoTurn(f"D1:{i + 1}", who, text, 1, day, None) for i, (who, text) in enumerate(lines))
    chat = LocomoConversation("conv-test", ("Caroline", "Melanie"), (LocomoSession(1, day, turns),), ())
    assert fact_keys(chat, "fact") is None
    assert fact_keys(chat, "fact_and_turn") == {"D1:1": "How long have you been married? ", "D1:2": "5 years already! "}
    exchange = fact_keys(chat, "fact_and_exchange")
    assert exchange["D1:1"] == "How long have you been married? "  # the first turn answers nothing
    assert exchange["D1:2"] == "How long have you been married? 5 years already! "
    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        store.write("Melanie", "is", "5 years", at=day, source="D1:2")
        store.write("Caroline", "asked", "question", at=day, source="D1:1")
        facts = [f for f in store.facts() if f.subject == "Melanie"]
    question = "How long has she been married?"
    assert FactIndex(facts, fact_keys(chat, "fact_and_turn")).top(question, 1) == []
    assert FactIndex(facts, exchange).top(question, 1) == [0]


def test_a_question_the_other_speakers_facts_answer_is_not_mentioned_with_other_speaker_margin(
    tiny_model, smollm2_tokenizer
):
    """ "What did Caroline paint?": only Melanie's fact is about painting (margin inf). With
    locomo.other_speaker_margin the answer is "Not mentioned." without the reader (no tokens read); a question
    about Melanie's marathon, which her own fact answers, still goes to the reader; the margin is in each row."""
    with TripletStore(":memory:", MemoryConfig(open_relations=True)) as store:
        day = datetime(2023, 5, 8, 13, 56)
        store.write("Caroline", "went to", "support group", at=day, source="D1:1")
        store.write("Melanie", "painted", "lake sunrise", at=day, source="D1:2")
        store.write("Caroline", "painted", "portrait", at=day, source="D1:3")
        index = FactIndex(store.facts())
    assert index.other_speaker_margin("What did Caroline paint at the lake?", "Caroline") > 1.0
    assert index.other_speaker_margin("What did Melanie paint at the lake?", "Melanie") < 1.0  # hers is best
    assert index.other_speaker_margin("Where did Caroline swim?", "Caroline") == 0.0  # nothing matches
    answers: dict[float | None, dict[str, dict]] = {}
    for margin in (None, 1.5):
        rows = painted_rows((tiny_model, smollm2_tokenizer), other_speaker_margin=margin)
        answers[margin] = {r["question"]: r for r in rows}
    caroline = answers[1.5]["What did Caroline paint?"]
    assert caroline["prediction"] == "Not mentioned." and caroline["context_tokens"] == 0
    assert caroline["f1"] == 1.0 and caroline["other_speaker_margin"] > 1.5
    assert answers[None]["What did Caroline paint?"]["context_tokens"] > 0
    marathon = "What is Melanie training for?"
    assert answers[1.5][marathon]["prediction"] == answers[None][marathon]["prediction"]
    assert answers[1.5][marathon]["context_tokens"] > 0
    with pytest.raises(ValueError, match="other_speaker_margin"):
        EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={"other_speaker_margin": 0.5})
    with pytest.raises(ValueError, match="fact_keys"):
        EvalConfig(generation={"model": "x"}, parts=["locomo"], locomo={"fact_keys": "turn"})


def test_a_row_read_under_a_lower_margin_is_refused_unasked_where_its_margin_exceeds_it():
    row = {"category": 1, "gold": "pottery, not mentioned", "prediction": "pottery", "f1": 0.5}
    answered = {**row, "other_speaker_margin": 1.3, "refusal_p": 0.1, "unrefused": None, "context_tokens": 240}
    assert refused_unasked(answered, 1.3) == answered  # not above it: the reader's answer stays
    refused = refused_unasked(answered, 1.2)
    assert refused["prediction"] == NOT_MENTIONED and refused["context_tokens"] == 0 and refused["refusal_p"] is None
    assert refused["f1"] == pytest.approx(0.5)  # scored as LoCoMo scores "Not mentioned." against the gold
    assert refused_unasked(row, 0.0) == row  # a structure without the margin (chunks, full context)
