"""The write verifier: a small classifier that reads a passage and one candidate fact and scores whether the
passage states it (issue 57: propose, then verify).

The writer decides to write token by token and never looks back at the text with the whole triplet in view;
its own probabilities (the gate's `call`, `call_min`) and its own yes/no answer (`verify`) barely separate
right from wrong writes on real text. The verifier is a separate model trained for that one judgement: the
base with a LoRA adapter and a one-logit classification head (transformers' ``*ForSequenceClassification``),
trained by ``memlm train`` with ``objective: verifier`` (training/objectives/verifier.py) on (text, candidate)
→ holds / does not hold. Its score is ``sigmoid(logit)``.

A verifier directory is a PEFT adapter whose saved modules include the head, plus :data:`CARD_FILE`: the base
and relation table it was trained with and the threshold chosen on held-out training text (never dev).
:func:`read_card` checks a directory before anything loads; :class:`Verifier` loads it and scores candidates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memory_runtime.protocol import Triplet

CARD_FILE = "verifier.json"
EXAMPLES_FILE = "verifier.jsonl"  # its training examples in a `memlm sample` directory (VerifierExample lines)
HEAD_MODULE = "score"  # the classification head's name in transformers' *ForSequenceClassification
MAX_LENGTH = 384  # tokens of passage + fact; a longer passage is cut at its end, the fact always kept
SHAPE_STEP = 64  # scored batches are padded to a multiple of it (the head reads the last real token)


def verifier_input(text: str, triplet: Sequence[str]) -> tuple[str, str]:
    """The verifier's two parts: the passage, and the candidate fact it is asked about (read last)."""
    subject, relation, object_ = triplet
    return text, f"\n\nFact: {subject} | {relation} | {object_}"


def encode(tokenizer: Any, text: str, triplet: Sequence[str], max_length: int = MAX_LENGTH) -> list[int]:
    """Token ids of one (passage, candidate): the passage cut to fit, the fact whole. What training and
    scoring both feed the model; the head reads the last token, the fact's (no end-of-text token: it may be
    the pad token, which the head skips)."""
    passage, fact = verifier_input(text, triplet)
    fact_ids = tokenizer(fact, add_special_tokens=False)["input_ids"]
    room = max(max_length - len(fact_ids), 0)
    passage_ids = tokenizer(passage, add_special_tokens=False)["input_ids"][:room]
    return [*passage_ids, *fact_ids]


@dataclass(frozen=True)
class VerifierCard:
    """What a verifier was trained with: a writer must share its base and relation table."""

    base: str  # the base model's name as the run recorded it (embedded:..., a hub id, a path)
    relations: list[str]  # the canonical relations of the memory it was trained for ([]: free relations)
    threshold: float  # chosen on held-out training passages: the default operating point
    trained_on: str = ""  # the data directory or file

    def save(self, directory: str | Path) -> None:
        (Path(directory) / CARD_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")


def read_card(directory: str | Path) -> VerifierCard:
    """The card of a verifier directory, checked without loading a model: one-line errors for a missing
    directory, a missing card, an adapter without its classification head."""
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise ValueError(f"write_gate.verifier: {directory} is not a directory (a `memlm train` verifier run)")
    card_path = path / CARD_FILE
    if not card_path.is_file():
        raise ValueError(
            f"write_gate.verifier: {directory} has no {CARD_FILE}: not a verifier run "
            "(train one with `memlm train --config configs/train/cpu-smollm2-verifier.yaml`)"
        )
    try:
        raw = json.loads(card_path.read_text())
        card = VerifierCard(**raw)
    except (ValueError, TypeError) as err:
        raise ValueError(f"write_gate.verifier: {card_path} is not a verifier card ({err})") from None
    if not 0 <= card.threshold <= 1:
        raise ValueError(f"write_gate.verifier: {card_path}: threshold {card.threshold} is outside [0, 1]")
    if not _has_head(path):
        raise ValueError(
            f"write_gate.verifier: {directory} is missing its classification head (no '{HEAD_MODULE}' weights "
            "in adapter_model.safetensors): the run did not finish, or is not a verifier"
        )
    return card


def _has_head(path: Path) -> bool:
    weights = path / "adapter_model.safetensors"
    if not (path / "adapter_config.json").is_file() or not weights.is_file():
        return False
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:
            return any(f".{HEAD_MODULE}." in f".{key}" for key in f.keys())
    except Exception:  # a damaged file: no head to load
        return False


def check_pairing(card: VerifierCard, writer_base: str | None, relations: Sequence[str]) -> None:
    """A verifier judges the writes of a writer of its own base and relation table: else a one-line error."""
    if writer_base is not None and writer_base != card.base:
        raise ValueError(
            f"write_gate.verifier: trained on base {card.base}, the writer's base is {writer_base}: train a verifier "
            "on the writer's base (model.name)"
        )
    if sorted(card.relations) != sorted(relations):
        missing = sorted(set(relations) - set(card.relations))
        extra = sorted(set(card.relations) - set(relations))
        raise ValueError(
            "write_gate.verifier: trained for another relation table than the writer's "
            f"(the writer's has {', '.join(missing) or 'none'} it lacks; it has {', '.join(extra) or 'none'} the "
            "writer's lacks): train it on data of the writer's schema"
        )


class Verifier:
    """A loaded verifier: ``score(text, triplets)`` → P(the text states each), batched."""

    def __init__(self, model: Any, tokenizer: Any, card: VerifierCard, device: str = "cpu") -> None:
        self.model, self.tokenizer, self.card, self.device = model, tokenizer, card, device

    @classmethod
    def load(cls, directory: str | Path, *, device: str = "cpu", dtype: str = "auto") -> Verifier:
        """Base + adapter + head, merged for speed (a verifier is only ever scored)."""
        import torch
        from peft import PeftModel
        from transformers import AutoModelForSequenceClassification

        from memory_runtime.models.hardware import resolve_dtype
        from memory_runtime.models.loading import load_tokenizer, resolve_base

        card = read_card(directory)
        tokenizer = load_tokenizer(str(directory))
        choice = resolve_dtype(dtype, device)
        with quiet_transformers():  # its load report says the head is missing: the adapter brings it
            base = AutoModelForSequenceClassification.from_pretrained(
                resolve_base(card.base), num_labels=1, dtype=choice.torch_dtype, local_files_only=True
            )
        base.config.pad_token_id = pad_id(tokenizer)
        model = PeftModel.from_pretrained(base, str(Path(directory).expanduser())).merge_and_unload()
        model.to(device).eval()
        torch.set_grad_enabled(False)
        return cls(model, tokenizer, card, device)

    def score(self, text: str, triplets: Sequence[Triplet | Sequence[str]], batch_size: int = 16) -> list[float]:
        import torch

        scores: list[float] = []
        pad = pad_id(self.tokenizer)
        for start in range(0, len(triplets), batch_size):
            rows = [encode(self.tokenizer, text, t) for t in triplets[start : start + batch_size]]
            # widths in steps of SHAPE_STEP: a CPU's bfloat16 kernels are built once per new shape (a write
            # scored at a width never seen took ~2.5 s more on the 2-core VM; six widths cover 384 tokens)
            width = -(-max(len(r) for r in rows) // SHAPE_STEP) * SHAPE_STEP
            ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self.device)
            with torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, 0].float()
            scores += torch.sigmoid(logits).tolist()
        return scores


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings off for a load whose report is expected (a classification head made new)."""
    from transformers.utils import logging

    before = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(before)


def pad_id(tokenizer: Any) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
