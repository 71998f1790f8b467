"""The systems an eval compares, side by side, on the same cases.

    memlm      the model under test (usually a trained adapter) with the memory
    few_shot   the base model with the memory and a prompt that shows the API (no fine-tuning)
    zero_shot  the base model without memory: every fact it may need is in its prompt
               (the RET-LLM paper's comparison with Alpaca)

Every system answers through a decoder (memory_runtime.generation.decoder) and its memory
controller, so calls, replies, tokens and timings are measured the same way; the zero-shot system
gets an empty store, and any call it emits finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eval.eval_config import EVAL_GENERATION
from memory_runtime.generation.batching import BatchDecoder, OneAtATime
from memory_runtime.generation.decoder import Decoder, Session
from memory_runtime.generation.proposals import with_proposals
from memory_runtime.generation.runtime import Generation
from memory_runtime.generation.turn import TurnRequest, TurnResult, turn_messages
from memory_runtime.generation.write_gate import WriteGate
from memory_runtime.memory.store import TripletStore
from memory_runtime.progress import Advance
from memory_runtime.protocol import (
    ACK,
    READ_OPEN,
    READ_QUERY_CLOSE,
    SEPARATOR,
    SYSTEM_PROMPT,
    WRITE_CLOSE,
    WRITE_OPEN,
    render_read,
    render_results,
    render_write,
)

ZERO_SHOT_PROMPT = "Answer the question from the facts given. If they do not say, answer: I don't know."

# The few-shot demonstrations: a write, a read with results, an unanswerable read. Names are
# not from any data_gen pool.
_DEMOS = [
    (
        "Quentin Marlow works for Halvorsen Shipping.",
        render_write("Quentin Marlow", "employed by", "Halvorsen Shipping") + " " + ACK,
    ),
    (
        "Who works for Halvorsen Shipping?",
        render_read(None, "employed by", "Halvorsen Shipping")
        + render_results([("Quentin Marlow", "employed by", "Halvorsen Shipping")])
        + " Quentin Marlow.",
    ),
    (
        "Who founded Brightwater Mills?",
        render_read(None, "founder of", "Brightwater Mills") + render_results([]) + " I don't know.",
    ),
]
FEW_SHOT_PROMPT = (
    SYSTEM_PROMPT
    + f" Save facts with {WRITE_OPEN}subject{SEPARATOR}relation{SEPARATOR}object{WRITE_CLOSE}."
    + f" Look facts up with {READ_OPEN}subject{SEPARATOR}relation{SEPARATOR}object{READ_QUERY_CLOSE}"
    + " leaving unknown fields empty."
    + " Relations: employed by, manager of, investor in, founder of, customer of. Examples:\n"
    + "\n".join(f"User: {u}\nAssistant: {a}" for u, a in _DEMOS)
)


def verbalise(facts: Sequence[Sequence[str]]) -> str:
    """Facts as plain sentences for the zero-shot prompt."""
    return " ".join(f"{s} {r} {o}." for s, r, o in facts)


def greedy(generation: Generation) -> Generation:
    """`generation` decoding greedily, whatever it samples: eval's systems (config seed: case sampling only)."""
    return generation.model_copy(update={"temperature": 0.0, "top_p": 1.0})


@dataclass
class System:
    """One compared system: a model plus how it is prompted and whether it has a memory."""

    name: str
    model: Any
    tokenizer: Any
    # its turns' limits and sampling, and how they decode (copy_fields, one_forward_per_step): the run's section
    generation: Generation = field(default_factory=lambda: Generation(**EVAL_GENERATION))
    system_prompt: str | None = SYSTEM_PROMPT  # memlm's: the one its model was trained with
    write_gate: WriteGate | None = None  # scores the writes it generates, may hold some back
    decoder: Decoder | None = None  # the decoder of all its turns (the vllm engine's, a test's); default: the model's
    # (model, tokenizer) answering where structures are compared (part locomo): the base, beside the model under test
    reader: tuple[Any, Any] | None = None

    @classmethod
    def under_test(cls, runtime: Any) -> System:
        """The model under test ("memlm") as `runtime` (memory_runtime.generation.runtime.open_runtime) opened it:
        its generation section, greedy (eval measures the model's best turn), its trained prompt and write gate;
        on vllm and onnx every turn through its decoder."""
        return cls(
            "memlm",
            runtime.model,
            runtime.tokenizer,
            greedy(runtime.generation),
            system_prompt=runtime.system_prompt,
            write_gate=runtime.write_gate,
            decoder=runtime.decoder if runtime.engine != "hf" else None,
        )

    @property
    def uses_memory(self) -> bool:
        return self.name != "zero_shot"

    def request(
        self,
        user: str,
        store: TripletStore,
        *,
        history: Sequence[dict] = (),
        context: str | None = None,
        namespace: str = "default",
        said_at: datetime | None = None,
        source: str | None = None,
        **sampling: Any,
    ) -> TurnRequest:
        """One user turn as this system asks it. `context` (zero-shot only) is prepended to the
        user's text: the statements or facts the memory would otherwise hold. `said_at` dates the facts
        it writes, `source` is kept with them (a conversation's turn id); `sampling` overrides the
        section's decoding for this turn (temperature, top_p, seed: a proposal run)."""
        if self.name == "zero_shot":
            store = TripletStore(":memory:", store.config)
            user = f"Facts: {context}\n\nQuestion: {user}" if context else user
            prompt: str | None = ZERO_SHOT_PROMPT
        else:
            prompt = FEW_SHOT_PROMPT if self.name == "few_shot" else self.system_prompt
        messages = turn_messages(user, history, prompt)
        return self.generation.request(messages, store, namespace=namespace, said_at=said_at, source=source, **sampling)

    def decoder_for(self, batch_size: int = 1) -> Decoder:
        """The decoder of this system's turns: its own (the vllm engine's), `batch_size` turns at once
        over the model (memory_runtime.generation.batching; the same greedy results), or one at a time
        over a streaming backend (OneAtATime)."""
        if self.decoder is not None:
            return self.decoder
        if batch_size > 1:
            return BatchDecoder.of(
                self.generation, self.model, self.tokenizer, batch_size=batch_size, write_gate=self.write_gate
            )
        return OneAtATime.of(self.generation, self.model, self.tokenizer, write_gate=self.write_gate)

    def run(self, request: TurnRequest) -> TurnResult:
        """One request, alone."""
        return self.decoder_for(1).run_turn(request)

    def turn(
        self,
        user: str,
        store: TripletStore,
        *,
        history: Sequence[dict] = (),
        context: str | None = None,
        namespace: str = "default",
    ) -> TurnResult:
        return self.run(self.request(user, store, history=history, context=context, namespace=namespace))


def run_sessions(
    system: System,
    sessions: Iterable[Session],
    batch_size: int = 1,
    progress: Advance | None = None,
    *,
    proposed: bool = True,
) -> list[Any]:
    """Drive eval sessions (generators that yield the system's requests and get their results) through
    the system's decoder (:meth:`System.decoder_for`): one turn at a time, or `batch_size` at once. With
    generation.propose k > 1 each turn's writes are pooled over k runs, as chat and serve pool them
    (memory_runtime.generation.proposals); `proposed=False`: the sessions run their proposals themselves
    (part real measures the pool)."""
    k = system.generation.propose if proposed and system.uses_memory else 1
    if k > 1:
        sessions = (with_proposals(session, k) for session in sessions)
    return system.decoder_for(batch_size).run_sessions(sessions, progress)
