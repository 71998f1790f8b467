"""Writes a user can trust: every generated write gets a score, and one below the operating point
is held back (not stored; the trace says so and why).

A small model that has learned to write from templates writes something for most real passages,
right or not. Three signals, each a probability in [0, 1] from the model that wrote the call:

    call     the model's own probability of the call it wrote: the geometric mean, over the call's
             tokens, of p(token | conversation, assistant text before the call), teacher-forced on
             the call as generated (the decoder may have held the names to copies; this is what the
             model itself preferred)
    call_min the same, its least likely token (where the model hesitated: whether to write at all,
             which name, which relation), not averaged with the tokens it was sure of
    verify   a second question to the same model: the user's text, then "Does the text above state
             this fact: S | R | O?" -> P(Yes) / (P(Yes) + P(No)) at the answer's first token.
             data_gen trains the question (`verify` records), so an adapter knows how to answer it.

and a fourth from a model of its own:

    verifier a classifier trained for this one judgement (memory_runtime.generation.verifier): the user's
             text and the candidate fact -> P(the text states it). It does not need the writer's model in
             this process, so it gates the onnx and vLLM engines' writes too; its threshold defaults to
             the one chosen when it was trained (on held-out training text, never dev).

:class:`WriteGateConfig` is the operating point (which signal, which threshold); the same field
is read by `memlm chat`, `memlm serve` (generation.write_gate) and `memlm eval` (write_gate). With
``score: true`` every write is scored with every signal whether or not it is gated: eval does
that to draw the precision–recall curve of each signal (docs/results.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from memory_runtime.generation.verifier import Verifier, VerifierCard
from memory_runtime.protocol import SYSTEM_PROMPT, Triplet
from memory_runtime.yaml_config import Strict

Signal = Literal["call", "call_min", "verify", "verifier"]
SIGNALS: tuple[Signal, ...] = ("call", "call_min", "verify", "verifier")
WRITER_SIGNALS = ("call", "call_min", "verify")  # scored by the writer's own model (engine hf)
DEFAULT_THRESHOLD = 0.5
VERIFY_YES, VERIFY_NO = "Yes", "No"
HELD_BACK = "held back"  # how the status of a write the gate did not store begins


def verification_question(text: str, triplet: Triplet) -> str:
    """The user message of the verification pass (and of data_gen's `verify` records)."""
    subject, relation, object_ = triplet
    return (
        f"{text}\n\nDoes the text above state this fact: {subject} | {relation} | {object_}? Answer {VERIFY_YES} "
        f"or {VERIFY_NO}."
    )


def verification_messages(text: str, triplet: Triplet, system_prompt: str | None = SYSTEM_PROMPT) -> list[dict]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": verification_question(text, triplet)}]


class WriteGateConfig(Strict):
    """The operating point of writes: which signal gates them and from which score a write is stored."""

    signal: Literal["none", "call", "call_min", "verify", "verifier"] = Field(
        "none",
        description="none: every write is stored; call, call_min, verify (the writer's own model), verifier (a "
        "trained verifier, `verifier`): the signal a write must pass",
    )
    threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="a write scoring below it is held back (not stored); null: the verifier's own (chosen on "
        "held-out training text) for signal verifier, else 0.5",
    )
    score: bool = Field(False, description="score every write with every signal (the trace shows them; eval's curve)")
    verifier: str | None = Field(
        None, description="a verifier run directory (`memlm train` objective verifier): signal verifier needs one"
    )

    @model_validator(mode="after")
    def _verifier_named(self) -> WriteGateConfig:
        if self.signal == "verifier" and self.verifier is None:
            raise ValueError("write_gate.signal verifier needs write_gate.verifier: a verifier run directory")
        return self

    @property
    def active(self) -> bool:
        return self.signal != "none" or self.score

    @property
    def needs_writer_model(self) -> bool:
        """Whether a signal this gate computes is the writer's own (then the model must be in this process)."""
        return self.signal in WRITER_SIGNALS or self.score

    def operating_threshold(self, verifier_card: VerifierCard | None = None) -> float:
        if self.threshold is not None:
            return self.threshold
        if self.signal == "verifier" and verifier_card is not None:
            return verifier_card.threshold
        return DEFAULT_THRESHOLD

    def relative_to(self, folder: Path) -> None:
        if self.verifier is not None and not Path(self.verifier).expanduser().is_absolute():
            self.verifier = str(folder / self.verifier)


@dataclass
class GateDecision:
    held: bool
    scores: dict[str, float] = field(default_factory=dict)
    reason: str = ""


class WriteScorer:
    """Both signals of a write, from a causal LM (a PEFT adapter included) and its tokenizer."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        from memory_runtime.generation.hf_backend import input_device

        self.model = model
        self.tokenizer = tokenizer
        self.device = input_device(model)
        yes = tokenizer(VERIFY_YES, add_special_tokens=False)["input_ids"]
        no = tokenizer(VERIFY_NO, add_special_tokens=False)["input_ids"]
        if not yes or not no or yes[0] == no[0]:
            raise ValueError(f"the tokenizer cannot tell {VERIFY_YES!r} from {VERIFY_NO!r} by their first token")
        self.yes, self.no = yes[0], no[0]

    def _prompt(self, messages: Sequence[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _logits(self, ids: list[int], keep: int):
        """The last `keep` positions' logits, the output head applied in float32: bfloat16 logits of
        magnitude 20-60 are rounded to steps of 0.125-0.25, which turned P(Yes) into a handful of
        values (sigmoid of -1, -0.5, 0, 0.5...) and blunted every threshold."""
        import torch

        head = self.model.get_output_embeddings()
        hidden: list = []
        hook = head.register_forward_hook(lambda _module, args, _out: hidden.append(args[0]))
        try:
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([ids], device=self.device), logits_to_keep=keep)
        finally:
            hook.remove()
        # a head PEFT wrapped (lm_head as a LoRA target) is not a plain Linear: its own logits then
        if out.logits.dtype == torch.float32 or type(head) is not torch.nn.Linear or len(hidden) != 1:
            return out.logits[0].float()
        with torch.inference_mode():
            logits = torch.nn.functional.linear(
                hidden[0][0, -keep:].float(), head.weight.float(), None if head.bias is None else head.bias.float()
            )
        if cap := getattr(self.model.config, "final_logit_softcapping", None):
            logits = torch.tanh(logits / cap) * cap
        return logits

    def call(self, messages: Sequence[dict[str, str]], prefix: str, call_text: str) -> tuple[float, float]:
        """The geometric-mean and the least probability of `call_text`'s tokens after the prompt and `prefix`."""
        import torch

        prompt = self._prompt(messages) + prefix
        context, full = self._ids(prompt), self._ids(prompt + call_text)
        start = next((i for i, (a, b) in enumerate(zip(context, full)) if a != b), min(len(context), len(full)))
        start = max(start, 1)
        targets = full[start:]
        if not targets:
            return 0.0, 0.0
        logits = self._logits(full, len(targets) + 1)[:-1]  # the positions that predict each target
        logp = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(targets, device=logits.device)[:, None])
        return float(math.exp(logp.mean().item())), float(math.exp(logp.min().item()))

    def verify(self, text: str, triplet: Triplet) -> float:
        """P(Yes) against P(No) as the first answer token of the verification question."""
        import torch

        logits = self._logits(self._ids(self._prompt(verification_messages(text, triplet))), 1)[-1]
        pair = torch.softmax(logits[[self.yes, self.no]], dim=-1)
        return float(pair[0].item())


class WriteGate:
    """Decides whether a generated write is stored: `scorer` (the writer's model) for the writer's own
    signals, `verifier` for the verifier's, each needed once the config asks for it."""

    def __init__(
        self, config: WriteGateConfig, scorer: WriteScorer | None = None, verifier: Verifier | None = None
    ) -> None:
        if config.active and config.needs_writer_model and scorer is None:
            raise ValueError(f"write gate {config.signal!r} (score={config.score}) needs a model to score writes")
        if config.verifier is not None and verifier is None:
            raise ValueError(f"write gate: the verifier {config.verifier} is not loaded")
        self.config = config
        self.scorer = scorer
        self.verifier = verifier
        self.threshold = config.operating_threshold(verifier.card if verifier is not None else None)

    def check(self, messages: Sequence[dict[str, str]], prefix: str, call_text: str, triplet: Triplet) -> GateDecision:
        """Score the write `call_text` (generated after `prefix` in the turn after `messages`)."""
        config = self.config
        if not config.active:
            return GateDecision(False)
        scores = {}
        user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        if self.scorer is not None and (config.score or config.signal in ("call", "call_min")):
            scores["call"], scores["call_min"] = self.scorer.call(messages, prefix, call_text)
        if self.scorer is not None and (config.score or config.signal == "verify"):
            scores["verify"] = self.scorer.verify(user, triplet)
        if self.verifier is not None and (config.score or config.signal == "verifier"):
            scores["verifier"] = self.verifier.score(user, [triplet])[0]
        if config.signal == "none" or scores[config.signal] >= self.threshold:
            return GateDecision(False, scores)
        reason = f"{HELD_BACK}: {config.signal} score {scores[config.signal]:.2f} < threshold {self.threshold:.2f}"
        return GateDecision(True, scores, reason)


def write_gate(
    config: WriteGateConfig | None, model: Any = None, tokenizer: Any = None, *, device: str = "cpu"
) -> WriteGate | None:
    """The gate of `config` over this model (None when nothing is gated or scored); the writer's model is
    needed for its own signals only, a verifier is loaded from `config.verifier`."""
    if config is None or not config.active:
        return None
    if config.needs_writer_model and (model is None or tokenizer is None):
        raise ValueError(f"write gate {config.signal!r} needs the model in this process (the hf engine)")
    scorer = WriteScorer(model, tokenizer) if model is not None and config.needs_writer_model else None
    verifier = Verifier.load(config.verifier, device=device) if config.verifier is not None else None
    return WriteGate(config, scorer, verifier)
