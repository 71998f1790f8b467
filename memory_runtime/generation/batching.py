"""Batched decoding with the memory controller: many turns advance together through one model.

Decoding a turn of a small model is mostly overhead (a forward pass for one token costs little
more for eight), and a large model on a GPU is idle at batch one. :class:`BatchDecoder` runs up to
``max_batch_size`` turns at once over one padded KV cache (memory_runtime.generation.batch_cache):

- every turn has its own :class:`~memory_runtime.generation.hf_backend.TurnDecoder` (tokens, text, the
  field-copy constraint, sampling) and :class:`~memory_runtime.generation.controller.TurnCalls` (its store,
  namespace and calls), the same two pieces `Controller` + `HFBackend` use one turn at a time;
- a turn that writes ``}:`` pauses alone: its read runs against its own namespace, the results are
  appended to its text only and fed at its next step while the others keep decoding; writes are
  stored as each completes;
- a turn that ends leaves at once and a waiting one joins (continuous batching): its prompt is
  prefilled alone and its cache stacked under the others.

Greedy decoding gives the same turns as one at a time (tested on the real embedded model).
Models whose cache cannot be stacked (sliding-window attention) are run one turn at a time by
:class:`OneAtATime`, which offers the same interface over any streaming backend (the server's
tests drive it with scripted backends).

Callers either submit independent turns (:meth:`BatchDecoder.run`) or sessions: generators that
yield one :class:`TurnRequest` at a time and receive its :class:`TurnResult` (an episode's next
statement waits for the previous one's writes): :meth:`BatchDecoder.run_sessions`.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from memory_runtime.generation.backend import Backend
from memory_runtime.generation.batch_cache import BatchCache, new_cache, supports
from memory_runtime.generation.controller import Controller, TurnCalls, TurnResult
from memory_runtime.generation.hf_backend import HFBackend, TurnDecoder, check_sampling, end_token_ids, input_device
from memory_runtime.generation.write_gate import WriteGate
from memory_runtime.memory.store import TripletStore

Session = Generator["TurnRequest", TurnResult, Any]


@dataclass
class TurnRequest:
    """One turn to decode: the chat messages (system prompt included: controller.turn_messages), the
    memory it runs against, its limits and sampling, and an optional callback for streaming."""

    messages: list[dict[str, str]]
    store: TripletStore
    namespace: str = "default"
    max_new_tokens: int = 256
    max_calls: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    on_text: Callable[[str], None] | None = None  # called with the turn's full text (calls included) as it grows
    tag: Any = None  # the caller's own handle (not used here)
    source: str | None = None  # kept with each fact the turn stores (the server: the completion's id)
    cancel: threading.Event = field(default_factory=threading.Event)  # set: the turn ends at its next token


@dataclass
class _Turn:
    """A turn in the batch."""

    key: int
    request: TurnRequest
    decoder: TurnDecoder
    calls: TurnCalls
    started: float = field(default_factory=time.perf_counter)
    model_seconds: float = 0.0
    result: TurnResult | None = None


class _Decoder:
    """What the batched and the one-at-a-time decoder share: a queue of requests, and the drivers."""

    max_batch_size = 1
    context: int | None = None  # the model's context in tokens, where known
    tokenizer: Any = None  # a decoder that tokenizes its turns itself (batched HF, vLLM)
    end_token_ids: Any = None

    def prompt_tokens(self, request: TurnRequest) -> int | None:
        """How many tokens `request`'s prompt is as the turn is submitted, where this decoder can tell
        (None: it cannot)."""
        return None if self.tokenizer is None else len(self._prompt_decoder(request).prompt_ids)

    def _prompt_decoder(self, request: TurnRequest) -> TurnDecoder:
        """A turn started from `request`'s messages with the prompt's token ids, no constraint on fields."""
        decoder = TurnDecoder(self.tokenizer, self.end_token_ids, copy_fields=False)
        decoder.start(request.messages)
        return decoder

    def close(self) -> None:
        """Release what the decoder holds outside this process (nothing, in this process's model)."""

    def __init__(self) -> None:
        self.waiting: collections.deque[TurnRequest] = collections.deque()
        self.active: dict[Any, Any] = {}  # the turns being decoded, by each decoder's own key

    def add(self, request: TurnRequest) -> None:
        """Queue a turn; it joins the batch when a place is free."""
        check_sampling(request.temperature, request.top_p)
        if request.max_calls < 1 or request.max_new_tokens < 1:
            raise ValueError("max_calls and max_new_tokens must be at least 1")
        self.waiting.append(request)

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.active)

    @property
    def room(self) -> int:
        """How many more turns can be queued without waiting for a place."""
        return max(0, self.max_batch_size - len(self.waiting) - len(self.active))

    def step(self) -> list[tuple[TurnRequest, TurnResult]]:
        raise NotImplementedError

    def run(self, requests: Iterable[TurnRequest]) -> list[TurnResult]:
        """Decode independent turns; results in the order of `requests`."""

        def one(request: TurnRequest) -> Session:
            return (yield request)

        return self.run_sessions(one(r) for r in requests)

    def run_sessions(self, sessions: Iterable[Session], on_done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Drive sessions (generators that yield a TurnRequest and receive its TurnResult, one at a
        time) until each returns; their return values, in order. `on_done(index, value)` is called
        as each session ends."""
        pending = iter(enumerate(sessions))
        values: dict[int, Any] = {}
        owner: dict[int, tuple[int, Session]] = {}  # id(request) -> its session
        exhausted = False

        def advance(index: int, session: Session, result: TurnResult | None) -> None:
            try:
                request = next(session) if result is None else session.send(result)
            except StopIteration as stop:
                values[index] = stop.value
                if on_done:
                    on_done(index, stop.value)
                return
            owner[id(request)] = (index, session)
            self.add(request)

        while True:
            while not exhausted and self.room:
                try:
                    index, session = next(pending)
                except StopIteration:
                    exhausted = True
                    break
                advance(index, session, None)
            if not self.busy:
                if exhausted:
                    break
                continue
            for request, result in self.step():
                index, session = owner.pop(id(request))
                advance(index, session, result)
        return [values[i] for i in sorted(values)]


class OneAtATime(_Decoder):
    """The decoder interface over any streaming backend: one turn per step, through Controller."""

    def __init__(self, backend_factory: Callable[[TurnRequest], Backend], write_gate: WriteGate | None = None) -> None:
        super().__init__()
        self.backend_factory = backend_factory
        self.write_gate = write_gate

    def step(self) -> list[tuple[TurnRequest, TurnResult]]:
        if not self.waiting:
            return []
        request = self.waiting.popleft()
        controller = Controller(
            self.backend_factory(request),
            request.store,
            namespace=request.namespace,
            max_calls=request.max_calls,
            max_new_tokens=request.max_new_tokens,
            write_gate=self.write_gate,
        )
        turn = controller.run_messages(
            request.messages, on_text=request.on_text, cancelled=request.cancel.is_set, source=request.source
        )
        return [(request, turn)]


class BatchDecoder(_Decoder):
    """Decodes many turns at once (see the module docstring). Not thread-safe: one thread steps it."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 8,
        copy_fields: bool = True,
        write_gate: WriteGate | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.copy_fields = copy_fields
        self.write_gate = write_gate  # scores generated writes with this model; may hold some back
        self.stackable = supports(model)
        self.context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.end_token_ids = end_token_ids(model, tokenizer)
        self.device = input_device(model)
        self.cache = BatchCache()
        self._keys = 0
        self.stats = {"steps": 0, "forward_seconds": 0.0, "rows": 0, "prefills": 0, "prefill_seconds": 0.0}
        self._alone = OneAtATime(self.backend_for, write_gate)  # models whose cache cannot be stacked
        if not self.stackable:
            self.waiting = self._alone.waiting

    def backend_for(self, request: TurnRequest) -> HFBackend:
        """A single-turn backend over this model, for `request`'s sampling and memory."""
        return HFBackend(
            self.model,
            self.tokenizer,
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            copy_fields=self.copy_fields,
            relations=request.store.config.relation_names,
        )

    # ------------------------------------------------------------------ one step

    def step(self) -> list[tuple[TurnRequest, TurnResult]]:
        """Admit waiting turns, run one forward pass for the batch, advance every turn by a token
        (or a pause, or its end); returns the turns that finished, with their results."""
        if not self.stackable:
            return self._alone.step()
        finished: list[_Turn] = []
        while self.waiting and len(self.active) < self.max_batch_size:
            turn = self._admit(self.waiting.popleft())
            if turn.result is not None:
                finished.append(turn)
        if self.active:
            turns = [self.active[key] for key in self.cache.ids]
            feeds = []
            for turn in turns:
                ids, cached = turn.decoder.all_ids, self.cache.cached(turn.key)
                if cached >= len(ids):  # everything cached but no logits kept: re-feed the last token
                    self.cache.crop(turn.key, len(ids) - 1)
                feeds.append(ids[self.cache.cached(turn.key) :])
            # several tokens to feed (read results): that row alone; the others share one forward
            logits: dict[int, torch.Tensor] = {}
            t0 = time.perf_counter()
            for turn, feed in zip(turns, feeds):
                if len(feed) > 1:
                    logits[turn.key] = self.cache.extend(self.model, turn.key, feed, self.device)
            extended = time.perf_counter() - t0
            short = [feed if len(feed) == 1 else [] for feed in feeds]
            t0 = time.perf_counter()
            if any(short):
                rows = self.cache.forward(self.model, short, self.device)
                logits.update({turn.key: rows[b] for b, (turn, feed) in enumerate(zip(turns, short)) if feed})
            seconds = time.perf_counter() - t0 + extended
            self.stats["steps"] += 1
            self.stats["rows"] += len(turns)
            self.stats["forward_seconds"] += seconds
            for turn in turns:
                turn.model_seconds += seconds
                turn.decoder.stats["forwards"] += 1
                turn.decoder.stats["forward_seconds"] += seconds
                self._advance(turn, logits[turn.key])
                if turn.result is not None:
                    finished.append(turn)
            self.cache.leave({t.key for t in finished})
            for t in finished:
                self.active.pop(t.key, None)
            if self.active and self.cache.width > 2 * max(len(c) for c in self.cache.cols) + 64:
                self.cache.compact()
        return [(t.request, t.result) for t in finished]  # type: ignore[misc]

    def _admit(self, request: TurnRequest) -> _Turn:
        generator = None
        if request.seed is not None:
            generator = torch.Generator(device="cpu")
            generator.manual_seed(int(request.seed))
        relations = frozenset(request.store.config.relation_names) if self.copy_fields else None
        decoder = TurnDecoder(
            self.tokenizer,
            self.end_token_ids,
            temperature=float(request.temperature),
            top_p=float(request.top_p),
            generator=generator,
            copy_fields=self.copy_fields,
            relations=relations,
        )
        decoder.start(request.messages)
        self._keys += 1
        calls = TurnCalls(
            request.store,
            request.namespace,
            request.max_calls,
            request.on_text,
            request.messages,
            request.cancel.is_set,
            self.write_gate,
            request.source,
        )
        turn = _Turn(self._keys, request, decoder, calls)
        prompt = decoder.prompt_ids
        if len(prompt) < 2:
            raise ValueError("a batched turn needs a prompt of at least two tokens")
        cache = new_cache()  # all of the prompt but its last token, alone; the last is fed with the batch
        t0 = time.perf_counter()
        with torch.inference_mode():
            self.model(
                input_ids=torch.tensor([prompt[:-1]], device=self.device),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        seconds = time.perf_counter() - t0
        turn.model_seconds += seconds
        decoder.stats["forward_seconds"] += seconds
        decoder.stats["forwards"] += 1
        self.stats["prefills"] += 1
        self.stats["prefill_seconds"] += seconds
        self.cache.join(turn.key, cache, len(prompt) - 1)
        self.active[turn.key] = turn
        return turn

    def _advance(self, turn: _Turn, logits: torch.Tensor) -> None:
        """One next-token choice for `turn`, then what its calls make of the text (the loop of
        Controller.run_turn over HFBackend.stream, one step at a time)."""
        decoder, calls, limit = turn.decoder, turn.calls, turn.request.max_new_tokens
        step = decoder.step(logits)
        if step.backtracked:
            self.cache.crop(turn.key, len(decoder.all_ids))
            return
        action = calls.feed(step.piece) if step.piece else "continue"
        if action == "pause":
            kept = decoder.resume(calls.text)
            self.cache.crop(turn.key, kept)
            if decoder.stats["generated_tokens"] >= limit:
                calls.status = "max_tokens"
                self._finish(turn)
            return
        if action == "stop" or step.done:
            self._finish(turn)
            return
        if decoder.stats["generated_tokens"] >= limit:  # the turn's token budget is spent
            piece = decoder.stop_for_length()
            if piece and calls.feed(piece) == "pause":
                self.cache.crop(turn.key, decoder.resume(calls.text))
                calls.status = "max_tokens"
            self._finish(turn)

    def _finish(self, turn: _Turn) -> None:
        stats = turn.decoder.stats
        turn.result = turn.calls.result(
            generated_tokens=stats["generated_tokens"],
            max_new_tokens=turn.request.max_new_tokens,
            started=turn.started,
            model_seconds=turn.model_seconds,
            prompt_tokens=stats["prompt_tokens"] + stats["inserted_tokens"],
        )
