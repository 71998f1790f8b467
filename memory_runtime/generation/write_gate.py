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

:class:`WriteGateConfig` is the operating point (which signal, which threshold); the same field
is read by `memlm chat`, `memlm serve` (generation.write_gate) and `memlm eval` (write_gate). With
``score: true`` every write is scored with every signal whether or not it is gated: eval does
that to draw the precision–recall curve of each signal (docs/results.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from memory_runtime.protocol import SYSTEM_PROMPT, Triplet
from memory_runtime.yaml_config import Strict

Signal = Literal["call", "call_min", "verify"]
SIGNALS: tuple[Signal, ...] = ("call", "call_min", "verify")
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

    signal: Literal["none", "call", "call_min", "verify"] = Field(
        "none", description="none: every write is stored; call, call_min, verify: the signal a write must pass"
    )
    threshold: float = Field(0.5, ge=0, le=1, description="a write scoring below it is held back (not stored)")
    score: bool = Field(False, description="score every write with every signal (the trace shows them; eval's curve)")

    @property
    def active(self) -> bool:
        return self.signal != "none" or self.score


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
    """Decides whether a generated write is stored; `scorer` is needed once the config is active."""

    def __init__(self, config: WriteGateConfig, scorer: WriteScorer | None = None) -> None:
        if config.active and scorer is None:
            raise ValueError(f"write gate {config.signal!r} (score={config.score}) needs a model to score writes")
        self.config = config
        self.scorer = scorer

    def check(self, messages: Sequence[dict[str, str]], prefix: str, call_text: str, triplet: Triplet) -> GateDecision:
        """Score the write `call_text` (generated after `prefix` in the turn after `messages`)."""
        config = self.config
        if not config.active or self.scorer is None:
            return GateDecision(False)
        scores = {}
        if config.score or config.signal in ("call", "call_min"):
            scores["call"], scores["call_min"] = self.scorer.call(messages, prefix, call_text)
        if config.score or config.signal == "verify":
            user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
            scores["verify"] = self.scorer.verify(user, triplet)
        if config.signal == "none" or scores[config.signal] >= config.threshold:
            return GateDecision(False, scores)
        reason = f"{HELD_BACK}: {config.signal} score {scores[config.signal]:.2f} < threshold {config.threshold:.2f}"
        return GateDecision(True, scores, reason)


def write_gate(config: WriteGateConfig | None, model: Any = None, tokenizer: Any = None) -> WriteGate | None:
    """The gate of `config` over this model (None when nothing is gated or scored)."""
    if config is None or not config.active:
        return None
    if model is None or tokenizer is None:
        raise ValueError(f"write gate {config.signal!r} needs the model in this process (the hf engine)")
    return WriteGate(config, WriteScorer(model, tokenizer))
