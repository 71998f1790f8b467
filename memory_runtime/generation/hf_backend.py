"""Token-by-token generation with pause/resume for the memory controller.

The controller streams an assistant turn, stops iterating when the model has written a
memory read such as ``[MEM_READ{>>employed by>>B}:``, looks the query up, and calls
:meth:`HFBackend.resume` with the text so far plus the results.  ``generate()`` cannot
pause on such a text condition and keep its cache, so this module runs its own decode
loop over ``model(...)`` with a :class:`~transformers.DynamicCache`, and on resume keeps
the cache for every token that is still valid. The turn itself (its tokens, its exact text,
the choice of each next token) is a :class:`~memory_runtime.generation.turn_state.TurnState`,
which the batched engines decode with too.

Invariant (``P`` = prompt tokens, ``A`` = assistant tokens): the KV cache holds the first
``_cached`` tokens of ``P + A``; tokens after that are fed at the next forward (a freshly
sampled token is only fed when the next one is needed, so a resume that drops it costs nothing).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from memory_runtime.generation.turn import check_sampling
from memory_runtime.generation.turn_state import TurnState, end_token_ids


class HFBackend:
    """Pausable chat generation over a Hugging Face causal LM (plain or PEFT-wrapped), one turn at a time.

    With ``copy_fields`` (the default) the subject and object of a memory call are decoded as
    word-aligned copies of the conversation when one of the model's top candidates allows it
    (memory_runtime.generation.field_copy): small models respell names they must copy. ``relations`` (the
    memory's relation names) holds the relation of a call to one of them the same way (with
    ``copy_fields`` only).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        system_prompt: str | None = None,
        copy_fields: bool = True,
        relations: Iterable[str] | None = None,
        common_objects: Iterable[str] = (),
    ) -> None:
        check_sampling(temperature, top_p)
        self.model = model
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        # Sampling happens on CPU: the same seed gives the same draws on any device.
        generator: torch.Generator | None = None
        if seed is not None:
            generator = torch.Generator(device="cpu")
            generator.manual_seed(int(seed))
        self._device = input_device(model)
        self.end_token_ids: frozenset[int] = end_token_ids(model, tokenizer)
        self.turn = TurnState(
            tokenizer,
            self.end_token_ids,
            temperature=float(temperature),
            top_p=float(top_p),
            generator=generator,
            copy_fields=copy_fields,
            relations=frozenset(relations) if relations is not None else None,
            common_objects=frozenset(common_objects),
        )
        self._reset_cache()

    @classmethod
    def for_request(cls, model: Any, tokenizer: Any, request: Any, copy_fields: bool = True) -> HFBackend:
        """A backend over `model` for one turn: the request's sampling, and its memory's relations."""
        return cls(
            model,
            tokenizer,
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            copy_fields=copy_fields,
            relations=request.store.config.relation_names,
            common_objects=request.store.config.common_objects,
        )

    # ------------------------------------------------------------------ public API

    @property
    def stats(self) -> dict[str, Any]:
        return self.turn.stats

    def start(self, messages: list[dict[str, str]]) -> None:
        """Begin a new assistant turn after these chat messages (roles system/user/assistant),
        rendered with the tokenizer's chat template and add_generation_prompt=True.

        ``system_prompt`` (from the constructor) is put first unless the messages already
        start with a system message.  To prefill the start of the assistant turn, call
        :meth:`resume` with that text right after ``start``.
        """
        self.turn.start(messages, self.system_prompt)
        self._reset_cache()

    def stream(self, max_new_tokens: int) -> Iterator[str]:
        """Yield decoded text pieces of the assistant turn as tokens are generated.

        Greedy when ``temperature == 0``, else sampling with temperature/top_p via
        transformers' logits warpers (seeded).  Stops at end-of-turn (tokenizer EOS,
        ChatML ``<|im_end|>``, generation_config EOS ids; the end token is not yielded)
        or after ``max_new_tokens`` tokens.  Text ending in an incomplete UTF-8 sequence
        is held back until it completes.  The caller may stop iterating at any moment;
        every yielded piece is already part of :attr:`assistant_text`.
        """
        self._require_started()
        if self.turn.finish_reason == "stop":  # the turn is over until resume() reopens it
            return
        self.turn.finish_reason = None
        self.turn.shown = self.turn.assistant_text
        produced = 0
        while produced < max_new_tokens:
            step = self.turn.step(self._next_logits())
            if step.backtracked:
                self._crop(len(self.turn.all_ids))
                produced -= 1
                continue
            if step.done:
                if step.piece:
                    yield step.piece
                return
            produced += 1
            if step.piece:
                yield step.piece
        piece = self.turn.stop_for_length()
        if piece:
            yield piece

    def resume(self, assistant_text: str) -> None:
        """Set the assistant turn's text so far to ``assistant_text``.

        Typically a prefix of what was generated plus controller-inserted text.  The
        longest token prefix whose decoded text is a prefix of ``assistant_text`` is
        kept (with its KV cache, cropped); only the remainder is tokenized
        (``add_special_tokens=False``), so the next :meth:`stream` continues from there.
        A token that straddles the cut point is dropped and its kept part re-tokenized.
        """
        self._require_started()
        self._crop(self.turn.resume(assistant_text))
        if self._logits_at != len(self.turn.all_ids):
            self._logits = None

    @property
    def assistant_text(self) -> str:
        """The assistant turn's text so far (an incomplete trailing UTF-8 sequence is
        left out until it completes or the turn ends)."""
        return self.turn.assistant_text

    def next_token_logits(self) -> torch.Tensor:
        """Float32 logits for the next assistant token (runs the pending forward; for
        scoring and for checking that the reused cache is right)."""
        self._require_started()
        return self._next_logits().clone()

    @property
    def finish_reason(self) -> str | None:
        """Why the last stream() ended: "stop" (end of turn), "length" (max_new_tokens) or None."""
        return self.turn.finish_reason

    @property
    def prompt_token_ids(self) -> list[int]:
        """Token ids of the rendered prompt (chat template with generation prompt)."""
        return list(self.turn.prompt_ids)

    @property
    def assistant_token_ids(self) -> list[int]:
        """Token ids of the assistant turn so far, as the model sees them."""
        return list(self.turn.ids)

    # ------------------------------------------------------------------ the cache

    def _reset_cache(self) -> None:
        self._cache: Any = None
        self._cached = 0
        self._logits: torch.Tensor | None = None
        self._logits_at = -1

    def _require_started(self) -> None:
        if not self.turn.started:
            raise RuntimeError("call start(messages) before stream()/resume()")

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)  # sliding-window layers where the model has them

    def _crop(self, keep: int) -> None:
        """Drop cached positions >= ``keep`` (recompute from scratch if the cache cannot crop)."""
        if keep >= self._cached:
            return
        if self._cache is not None:
            try:
                self._cache.crop(-(self._cached - keep))  # negative = number of positions to remove
            except Exception:  # e.g. sliding-window layers past their window
                self._cache = None
                keep = 0
        self._cached = keep
        self._logits = None
        self._logits_at = -1

    def _next_logits(self) -> torch.Tensor:
        """Logits for the token after ``P + A``, feeding whatever the cache lacks."""
        all_ids = self.turn.all_ids
        n = len(all_ids)
        if self._logits is not None and self._logits_at == n and self._cached == n:
            return self._logits
        if self._cached >= n:  # everything cached but no logits kept: re-feed the last token
            self._crop(n - 1)
        if self._cache is None:
            self._cache = self._new_cache()
            self._cached = 0
        new = torch.tensor([all_ids[self._cached :]], dtype=torch.long, device=self._device)
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                out = self._forward(new)
        except BaseException:
            # some layers may already hold the new positions: start the cache over next time
            self._reset_cache()
            raise
        self.stats["forward_seconds"] += time.perf_counter() - t0
        self.stats["forwards"] += 1
        # the model extended self._cache in place (output.past_key_values is the same object; reading
        # it warns from transformers 5.24 on, where it is named output.cache)
        self._cached = n
        self._logits = out.logits[0, -1].detach().float()
        self._logits_at = n
        return self._logits

    def _forward(self, input_ids: torch.Tensor) -> Any:
        return self.model(input_ids=input_ids, past_key_values=self._cache, use_cache=True, logits_to_keep=1)


def input_device(model: Any) -> torch.device:
    """Device for input ids: that of the input embeddings (works with device maps and PEFT)."""
    try:
        emb = model.get_input_embeddings()
        return emb.weight.device
    except (AttributeError, NotImplementedError):
        pass
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")
