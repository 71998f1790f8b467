"""On-policy samples and their rewards: what the model did, what it cost, and which of its runs to prefer.

`memlm sample` runs the supervised model on training prompts several times each, sampled (temperature
> 0) and with the memory controller executing every call against a scratch memory of the prompt's own
(its `memory` facts stored first), scores each run with the one reward (learning_loop.reward), and
writes what preference training reads:

    pairs.jsonl    PreferencePair per prompt whose best and worst run differ by at least `margin`
                   (DPO). When no run is exact and the prompt's gold turn is known, the gold turn is
                   the chosen one: the model's own mistake against what it should have done.
    turns.jsonl    LabelledTurn per distinct run: desirable at value >= `desirable`, undesirable at
                   <= `undesirable`, the rest left out (KTO); a gold turn joins as desirable where no
                   run was.
    samples.jsonl  every run: the prompt's id, source and kind, the text, the reward and its parts.
    verifier.jsonl VerifierExample per distinct (statement passage, fact): its gold facts, swapped ones,
                   and the writes of all its runs the gold can judge (the write verifier's data,
                   learning_loop/verifier_data.py); relations.yaml the writer's relation table.
    README.md      the card: prompts and runs per source, rewards, pairs, labels, the config, timing.
    summary.json   the card's figures.

Prompts (`prompts`): statements and questions drawn from a `memlm generate` directory's train split
(passages, hard negatives, writes and injection attempts; reads, unanswerable and two-hop questions
with their memory), and every passage of the real training files (data/real_train/). A real passage
that contains a dev passage of data/real/ or is contained in one is left out, as `memlm generate`
does: dev text is never sampled, so it never trains (tests/learning_loop/test_sampling.py). Only
single-turn records are prompts; an episode's questions come in as the read records of the same data.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from learning_loop.reward import TurnKind, TurnScore, score_turn
from learning_loop.verifier_data import verifier_examples
from memory_runtime.generation.decoder import Decoder, Session
from memory_runtime.generation.proposals import SAMPLED_RUN
from memory_runtime.generation.runtime import Generation, with_defaults
from memory_runtime.generation.turn import TurnResult, turn_messages
from memory_runtime.generation.verifier import EXAMPLES_FILE
from memory_runtime.jsonl import write_jsonl
from memory_runtime.memory.memory_config import RELATION_TABLE_FILE, MemoryConfig, RelationTable
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.progress import Advance, Tasks
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.records import LabelledTurn, PreferencePair, Record, turn_segments
from memory_runtime.yaml_config import Strict
from training.objectives.grpo_config import Prompts

STATEMENT_TYPES = ("write", "passage", "negative", "injection")
GOLD_ONLY_TYPES = ("write", "passage", "update")  # verifier_statements: records whose first turn states facts
QUESTION_TYPES = ("read", "unanswerable", "two_hop")
CONFIG_FILENAME = "sample_config.yaml"

# the runs of a statement or a question, as eval decodes them; sampled, one scratch memory per run
SAMPLE_GENERATION: dict = {"max_new_tokens": 96, "max_calls": 8, **SAMPLED_RUN}


class SampleConfig(Strict):
    """configs/sample/default.yaml (these defaults)."""

    what = "sampling config"

    seed: int = 0
    samples_per_prompt: int = Field(4, ge=2, description="runs of each prompt")
    margin: float = Field(0.5, gt=0, le=2, description="a pair's chosen run beats its rejected one by at least this")
    desirable: float = Field(0.75, ge=-1, le=1, description="KTO: a run is desirable at this reward or more")
    undesirable: float = Field(0.25, ge=-1, le=1, description="KTO: a run is undesirable at this reward or less")
    gold_when_no_exact_run: bool = Field(
        True, description="the prompt's gold turn is the chosen one (and a desirable turn) where no run was exact"
    )
    prompts: Prompts = Field(default_factory=Prompts)
    verifier_statements: int = Field(
        0,
        ge=0,
        description="generated statements and updates of prompts.data's train split (not prompts, not run) whose"
        " gold facts and their swaps join verifier.jsonl: the verifier sees the schema's relations as its"
        " templates and updates say them (a verifier of real passages alone turned down right episode writes)",
    )
    generation: Generation = Field(
        default_factory=lambda: Generation(**SAMPLE_GENERATION),
        description="the model sampled (model: the supervised run) and how: temperature > 0, batched; "
        "no write gate (the reward judges every write)",
    )

    @model_validator(mode="before")
    @classmethod
    def _sample_generation(cls, data: Any) -> Any:
        return with_defaults(data, **SAMPLE_GENERATION)

    @model_validator(mode="after")
    def _sampled(self) -> SampleConfig:
        if self.generation.temperature <= 0:
            raise ValueError("generation.temperature: on-policy sampling needs a temperature above 0")
        if self.generation.write_gate.active:
            raise ValueError("generation.write_gate: sampling stores every write (the reward judges them)")
        if self.verifier_statements and self.prompts.data is None:
            raise ValueError("verifier_statements: give prompts.data (--data), the generated records they come from")
        if self.undesirable >= self.desirable:
            raise ValueError(f"undesirable ({self.undesirable}) must be below desirable ({self.desirable})")
        return self

    def relative_to(self, folder: Path) -> SampleConfig:
        self.prompts.relative_to(folder)
        self.generation.relative_to(folder)
        return self


# ----------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class Prompt:
    """A training record the model runs from its user text: its gold judges the runs."""

    record: Record
    kind: TurnKind

    @property
    def user_text(self) -> str:
        return self.record.segments[0].text

    @property
    def names(self) -> list[str]:
        """Every name the case knows of: the candidates an answer is checked against."""
        facts = [*self.record.memory, *self.record.gold_triplets]
        return list(dict.fromkeys([*(t[0] for t in facts), *(t[2] for t in facts), *self.record.gold_names]))


def turn_kind(record: Record) -> TurnKind | None:
    """statement / question for a single-turn record whose type has one, else None."""
    if sum(s.role == "user" for s in record.segments) != 1:
        return None
    if record.type in STATEMENT_TYPES:
        return "statement"
    return "question" if record.type in QUESTION_TYPES else None


def train_split(config: SampleConfig) -> Path:
    """prompts.data's train split, the records prompts and `verifier_statements` are drawn from."""
    path = Path(config.prompts.data) / "jsonl" / "train.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"prompts.data: {path} does not exist (a `memlm generate` directory?)")
    return path


def load_prompts(
    config: SampleConfig, dev: list[str] | None = None, memory: MemoryConfig | None = None
) -> tuple[list[Prompt], dict]:
    """The prompts and where they came from ({source: {"prompts", "left_out_dev"}}); real passages that
    overlap dev text are left out (`dev`: normalised dev passages, default data/real/'s). With `memory`
    (the writer's), a real file stating facts in relations its table lacks is refused: another schema's
    text would teach the verifier facts the writer can never write."""
    from data_gen.data_config import DataConfig
    from data_gen.real import load_corpus
    from data_gen.real_records import dev_texts, named_facts_only, overlaps
    from memory_runtime.jsonl import read_models

    rng = random.Random(config.seed)
    prompts: list[Prompt] = []
    sources: dict[str, dict] = {}
    p = config.prompts
    if p.data is not None and (p.statements or p.questions):
        path = train_split(config)
        by_kind: dict[str, list[Record]] = defaultdict(list)
        for record in read_models(path, Record, "a record"):
            kind = turn_kind(record)
            if kind is not None:
                by_kind[kind].append(record)
        for kind, n in (("statement", p.statements), ("question", p.questions)):
            pool = by_kind[kind]
            chosen = rng.sample(pool, min(n, len(pool)))
            prompts += [Prompt(r, kind) for r in chosen]
            sources[f"data {kind}s"] = {"prompts": len(chosen), "left_out_dev": 0}
    dev = dev_texts() if dev is None and p.real else dev or []
    data_config = DataConfig.load(p.data_config) if p.real else None
    for real in p.real:
        # a fact about someone the passage only calls "he" is no write the model can make (names are copied)
        loaded = [named_facts_only(r, data_config) for r in load_corpus(real.path, split="train")]
        records = [r for r in loaded if turn_kind(r) == "statement" and (real.negatives or r.gold_triplets)]
        if memory is not None:
            _check_relations(records, memory, real.path)
        kept = [r for r in records if not overlaps(r.segments[0].text, dev)]
        left_out = len(records) - len(kept)
        if p.real_limit is not None and len(kept) > p.real_limit:
            kept = rng.sample(kept, p.real_limit)
        prompts += [Prompt(r, "statement") for r in kept]
        sources[Path(real.path).name] = {"prompts": len(kept), "left_out_dev": left_out}
    if not prompts:
        raise ValueError("no prompts: give prompts.data (--data) or prompts.real files")
    return prompts, sources


def _check_relations(records: Sequence[Record], memory: MemoryConfig, path: str) -> None:
    """ValueError naming `path` when its gold facts use relations `memory`'s table lacks (open tables take any)."""
    if memory.relation_names is None:
        return
    table = RelationTable(memory)
    known = {normalize_term(name) for name in memory.relation_names}
    relations = {r for record in records for _, r, _ in record.gold_triplets or ()}
    unknown = sorted(r for r in relations if table.terms(r)[1] not in known)
    if unknown:
        listed = ", ".join(unknown[:4]) + (f" and {len(unknown) - 4} more" if len(unknown) > 4 else "")
        raise ValueError(
            f"prompts.real: {path} states facts in relations the writer's table lacks ({listed}): give the real"
            " training text of the writer's schema, e.g. prompts.real=[{path: data/real_train/redocred_train_"
            "<schema>.jsonl, negatives: false}], or none: prompts.real=[]"
        )


def gold_statements(config: SampleConfig, prompts: Sequence[Prompt]) -> list[Record]:
    """`verifier_statements` records of prompts.data's train split that state facts in their first turn (a
    statement, a passage, an update), none of them a prompt: their gold facts and swaps join the verifier's
    examples without a run. Drawn with their own generator, so the prompts stay those of the seed."""
    from memory_runtime.jsonl import read_models

    n = config.verifier_statements
    if not n:
        return []
    chosen = {p.record.id for p in prompts}
    pool = [
        r
        for r in read_models(train_split(config), Record, "a record")
        if r.type in GOLD_ONLY_TYPES and r.gold_triplets and r.id not in chosen and r.segments[0].role == "user"
    ]
    return random.Random(f"{config.seed}-verifier").sample(pool, min(n, len(pool)))


# ----------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One sampled run of a prompt, executed and scored."""

    prompt: Prompt
    index: int
    result: TurnResult
    score: TurnScore

    def record(self) -> Record:
        """The run as a training Record: the prompt's user text, the model's turn (read results untrained)."""
        r = self.prompt.record
        return r.model_copy(
            update={
                "id": f"{r.id}-s{self.index}",
                "segments": turn_segments(self.prompt.user_text, self.result.text),
                "split": "train",
            }
        )


def sample_seed(seed: int, prompt_id: str, index: int) -> int:
    """A run's sampling seed: the same for the same config, prompt and run on any machine."""
    return int(hashlib.sha1(f"{seed}:{prompt_id}:{index}".encode()).hexdigest()[:8], 16)


def run_prompts(
    prompts: Sequence[Prompt],
    decoder: Decoder,
    config: SampleConfig,
    memory: MemoryConfig | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    progress: Advance | None = None,
) -> list[Run]:
    """`samples_per_prompt` runs of every prompt through `decoder` (a decoder's run_sessions),
    each against a scratch memory holding the prompt's `memory`; scored with the reward."""
    runs = [(p, i) for p in prompts for i in range(config.samples_per_prompt)]
    return run_cases(runs, decoder, config.generation, config.seed, memory, system_prompt, progress)


def run_cases(
    cases: Sequence[tuple[Prompt, int]],
    decoder: Decoder,
    generation: Generation,
    seed: int,
    memory: MemoryConfig | None = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    progress: Advance | None = None,
) -> list[Run]:
    """One run per (prompt, run index), in order: sampled as `generation` says (the run's seed from `seed`,
    the prompt and the index), executed against a scratch memory of the prompt's own, scored. What both
    `memlm sample` and GRPO's rollouts run (learning_loop/grpo.py)."""

    def session(prompt: Prompt, index: int) -> Session:
        store = TripletStore.scratch(memory, prompt.record.memory)
        messages = turn_messages(prompt.user_text, (), system_prompt)
        result = yield generation.request(messages, store, seed=sample_seed(seed, prompt.record.id, index))
        score = score_turn(
            prompt.kind,
            result.calls,
            result.reply,
            gold_triplets=prompt.record.gold_triplets,
            gold_names=prompt.record.gold_names,
            user_text=prompt.user_text,
            candidates=prompt.names,
            canonical=store.canonical_relation,
            annotated_relations=prompt.record.annotated_relations,
            status=result.status,
        )
        store.close()
        return Run(prompt, index, result, score)

    return decoder.run_sessions((session(p, i) for p, i in cases), progress)


# ----------------------------------------------------------------------------- pairs and labels


def preferences(runs: Sequence[Run], config: SampleConfig) -> tuple[list[PreferencePair], list[LabelledTurn]]:
    """DPO pairs and KTO turns from the scored runs, prompt by prompt (see the module docstring)."""
    by_prompt: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_prompt[run.prompt.record.id].append(run)
    pairs, turns = [], []
    for prompt_id, group in by_prompt.items():
        distinct: dict[str, Run] = {}
        for run in sorted(group, key=lambda r: (-r.score.value, r.index)):
            if run.result.text.strip():  # an empty turn (the end of turn at once) is no text to train on
                distinct.setdefault(run.result.text, run)  # the best-scored run of each text (ties: the first)
        ranked = list(distinct.values())
        if not ranked:
            continue
        prompt = ranked[0].prompt
        gold = _gold_turn(prompt) if config.gold_when_no_exact_run and not any(r.score.exact for r in ranked) else None
        best_record, best = (gold, 1.0) if gold is not None else (ranked[0].record(), ranked[0].score.value)
        worst = ranked[-1]
        if best - worst.score.value >= config.margin and _turn_text(best_record) != worst.result.text:
            pairs.append(
                PreferencePair(
                    id=prompt_id,
                    chosen=best_record,
                    rejected=worst.record(),
                    chosen_score=best,
                    rejected_score=worst.score.value,
                    source="on_policy" if gold is None else "on_policy+gold",
                )
            )
        for run in ranked:
            if run.score.value >= config.desirable or run.score.value <= config.undesirable:
                desirable = run.score.value >= config.desirable
                turns.append(
                    LabelledTurn(
                        id=run.record().id,
                        record=run.record(),
                        desirable=desirable,
                        score=run.score.value,
                        source="on_policy",
                    )
                )
        if gold is not None and _turn_text(gold) not in distinct:
            turns.append(LabelledTurn(id=gold.id, record=gold, desirable=True, score=1.0, source="gold"))
    return pairs, turns


def _turn_text(record: Record) -> str:
    return "".join(s.text for s in record.segments[1:])


def _gold_turn(prompt: Prompt) -> Record | None:
    """The prompt's own record as its gold turn (its trained segments are the right calls and reply)."""
    if not any(s.train for s in prompt.record.segments[1:]):
        return None
    return prompt.record.model_copy(update={"id": f"{prompt.record.id}-gold", "split": "train"})


# ----------------------------------------------------------------------------- the whole job


def sample_preferences(
    config: SampleConfig,
    out: Path,
    *,
    overwrite: bool = False,
    log: Callable[[str], None] = print,
    progress: Tasks | None = None,
    runtime: Any = None,
) -> dict:
    """Load prompts, run them on `config.generation.model`, score, write pairs, turns, samples and the
    card into `out`; return the summary. `progress` gets a part for the runs; `runtime` an opened
    memory_runtime.generation.runtime.Runtime (default: opened from `config.generation`)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty: choose another --out, or pass --overwrite")
    if config.generation.model is None:
        raise ValueError("generation.model: sample a trained run (--model RUN), the policy to improve")
    prompts, sources = load_prompts(config, memory=config.generation.memory())
    gold_only = gold_statements(config, prompts)  # read before the runs: a bad file fails in seconds, not after them
    counts = ", ".join(f"{name}: {s['prompts']}" for name, s in sources.items())
    log(f"{len(prompts)} prompts ({counts})")
    opened = runtime is None
    if opened:
        from memory_runtime.generation.runtime import open_runtime

        runtime = open_runtime(config.generation)
    try:
        log(f"sampling {config.samples_per_prompt} runs of each on {runtime.describe()}")
        t0 = time.perf_counter()
        total = len(prompts) * config.samples_per_prompt
        runs = run_prompts(
            prompts,
            runtime.decoder,
            config,
            runtime.memory,
            runtime.system_prompt,
            progress("runs", total) if progress else None,
        )
        seconds = time.perf_counter() - t0
    finally:
        if opened:
            runtime.close()
    pairs, turns = preferences(runs, config)
    memory = runtime.memory or MemoryConfig.load()
    examples = verifier_examples_of(runs, memory, config.seed, gold_only)
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / CONFIG_FILENAME)
    write_jsonl(out / "pairs.jsonl", pairs)
    write_jsonl(out / "turns.jsonl", turns)
    write_jsonl(out / "samples.jsonl", (_sample_row(run) for run in runs))
    write_jsonl(out / EXAMPLES_FILE, examples)
    save_relation_table(memory, out)
    summary = summarise(runs, pairs, turns, sources, config, seconds)
    summary["verifier_examples"] = dict(Counter(f"{e.origin} {'holds' if e.holds else 'not'}" for e in examples))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "README.md").write_text(card(summary, config))
    log(f"{len(runs)} runs in {seconds / 60:.1f} min: {len(pairs)} pairs, {len(turns)} labelled turns -> {out}")
    return summary


def proposals(runs: Sequence[Run]) -> list[tuple[Record, list[tuple]]]:
    """Each statement prompt with the writes of all its runs (the union the verifier judges), in order."""
    by_prompt: dict[str, tuple[Record, list[tuple]]] = {}
    for run in runs:
        if run.prompt.kind == "statement":
            entry = by_prompt.setdefault(run.prompt.record.id, (run.prompt.record, []))
            entry[1].extend(tuple(c.fields) for c in run.result.calls if c.kind == "write" and all(c.fields))
    return list(by_prompt.values())


def verifier_examples_of(
    runs: Sequence[Run], memory: MemoryConfig, seed: int, gold_only: Sequence[Record] = ()
) -> list:
    """The write verifier's examples from the statement prompts and their runs' writes, and from `gold_only`
    records' gold facts alone (verifier_data.py)."""
    store = TripletStore.scratch(memory)
    try:
        return verifier_examples(
            [*proposals(runs), *((record, []) for record in gold_only)],
            [spec.name for spec in memory.relations],
            canonical=store.canonical_relation,
            symmetric=memory.symmetric,
            seed=seed,
        )
    finally:
        store.close()


def save_relation_table(memory: MemoryConfig, out: Path) -> None:
    """The writer's relation table beside its samples: a verifier trained on them keeps it (its card)."""
    import yaml

    entries = {"relations": [spec.model_dump(exclude_defaults=True) for spec in memory.relations]}
    if memory.open_relations:
        entries["open_relations"] = True
    (out / RELATION_TABLE_FILE).write_text(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True))


def _sample_row(run: Run) -> dict:
    r = run.prompt.record
    return {
        "prompt_id": r.id,
        "source": r.source,
        "type": r.type,
        "kind": run.prompt.kind,
        "sample": run.index,
        "text": run.result.text,
        "status": run.result.status,
        "reward": run.score.value,
        "exact": run.score.exact,
        "reason": run.score.reason,
        "parts": run.score.parts,
    }


def summarise(
    runs: Sequence[Run],
    pairs: Sequence[PreferencePair],
    turns: Sequence[LabelledTurn],
    sources: dict,
    config: SampleConfig,
    seconds: float,
) -> dict:
    """The card's figures: runs per group (source, kind), their mean reward and exact share, what was kept."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[f"{run.prompt.record.source or 'unknown'} {run.prompt.kind}"].append(run)
        groups["all"].append(run)
    by_group = {
        name: {
            "runs": len(g),
            "prompts": len({r.prompt.record.id for r in g}),
            "mean_reward": round(sum(r.score.value for r in g) / len(g), 4),
            "exact": round(sum(r.score.exact for r in g) / len(g), 4),
            "reasons": dict(Counter(r.score.reason for r in g).most_common()),
        }
        for name, g in sorted(groups.items())
    }
    return {
        "model": config.generation.model,
        "prompts": sources,
        "runs": by_group,
        "pairs": len(pairs),
        "pairs_with_gold_chosen": sum(p.source == "on_policy+gold" for p in pairs),
        "mean_margin": round(sum(p.margin for p in pairs) / len(pairs), 4) if pairs else None,
        "turns": {"desirable": sum(t.desirable for t in turns), "undesirable": sum(not t.desirable for t in turns)},
        "seconds": round(seconds, 1),
        "runs_per_s": round(len(runs) / seconds, 3) if seconds else None,
    }


def card(summary: dict, config: SampleConfig) -> str:
    """README.md of a sample directory: what it holds and how it was made."""
    rows = "\n".join(
        f"| {name} | {g['prompts']} | {g['runs']} | {g['mean_reward']:.3f} | {100 * g['exact']:.1f}% | "
        + ", ".join(f"{k} {v}" for k, v in list(g["reasons"].items())[:4])
        + " |"
        for name, g in summary["runs"].items()
    )
    sources = "\n".join(f"| {name} | {s['prompts']} | {s['left_out_dev']} |" for name, s in summary["prompts"].items())
    turns = summary["turns"]
    pairs = (
        f"{summary['pairs']} PreferencePair (margin >= {config.margin}; {summary['pairs_with_gold_chosen']} with "
        f"the gold turn chosen where no run was exact; mean margin {summary['mean_margin']})"
    )
    labelled = (
        f"{turns['desirable']} desirable (reward >= {config.desirable}) and {turns['undesirable']} "
        f"undesirable (<= {config.undesirable}) LabelledTurn"
    )
    return f"""# On-policy samples of `{summary["model"]}`

Made by `memlm sample` (learning_loop/sampling.py) with `{CONFIG_FILENAME}` beside this card: each prompt run
{config.samples_per_prompt} times (temperature {config.generation.temperature}, top-p {config.generation.top_p}),
every call executed against a scratch memory, every run scored by the reward (learning_loop/reward.py).
{summary["runs"]["all"]["runs"]} runs in {summary["seconds"] / 60:.1f} min ({summary["runs_per_s"]} runs/s).

| file | what | trains |
| --- | --- | --- |
| `pairs.jsonl` | {pairs} | `memlm train --config configs/train/dpo-smollm2.yaml` |
| `turns.jsonl` | {labelled} | `memlm train --config configs/train/kto-smollm2.yaml` |
| `samples.jsonl` | every run with its reward and its parts | |

## Prompts

Dev passages (data/real/) are never prompts: a real passage that contains one or is contained in one is
left out.

| source | prompts | left out (dev text) |
| --- | --- | --- |
{sources}

## Runs

| group | prompts | runs | mean reward | exact | most common outcomes |
| --- | --- | --- | --- | --- | --- |
{rows}
"""
