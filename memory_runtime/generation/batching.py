"""Batched decoding with the memory controller: many turns advance together through one model.

Decoding a turn of a small model is mostly overhead (a forward pass for one token costs little
more for eight), and a large model on a GPU is idle at batch one. :class:`BatchDecoder` runs up to
``max_batch_size`` turns at once over one KV cache (rows packed into one on the CPU, stacked elsewhere):

- every turn has its own :class:`~memory_runtime.generation.turn_state.TurnState` (tokens, text, the
  field-copy constraint, sampling) and :class:`~memory_runtime.generation.controller.MemoryController`
  (its store, namespace, calls and limits), the same two pieces `OneAtATime` + `HFBackend` use one
  turn at a time;
- a turn that writes ``}:`` pauses alone: its read runs against its own namespace, the results are
  appended to its text only and fed at its next step while the others keep decoding; writes are
  stored as each completes;
- a turn that ends leaves at once and a waiting one joins (continuous batching);
- a joining prompt and a read's results are fed in the step's one forward pass, beside the others'
  tokens (``one_forward_per_step``, the default). On the CPU the batch is packed into one row
  (memory_runtime.generation.packed_cache): the linear layers see only the fed tokens, and a feed no
  longer costs a pass over every weight of its own (80 turns at batch 8: 35 s against 42 s alone, 2
  cores, float32); a feed longer than PACKED_FEED still runs alone, as attention in a packed pass
  scores it against every sequence's columns. On a GPU the rows are stacked and padded (batch_cache):
  there a forward pass of a small model costs its kernel launches, not its arithmetic; a feed rides
  along only while the padding stays within about a teraflop a step (~57 tokens a row for the 135M
  model at batch 64; a 7B model's run alone). With ``one_forward_per_step`` false such a row runs
  alone (its prompt prefilled alone and stacked under the others).

Greedy decoding gives the same turns as one at a time (tested on the real embedded model).
Models whose cache cannot be stacked (sliding-window attention) are run one turn at a time by
:class:`OneAtATime`, the engine over any streaming backend (the server's tests drive it with
scripted backends). Both are decoders (memory_runtime.generation.decoder): callers submit
independent turns (``run``) or sessions (``run_sessions``) the same way.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from memory_runtime.generation.backend import Backend, BackendFactory
from memory_runtime.generation.batch_cache import BatchCache, new_cache, supports
from memory_runtime.generation.controller import MemoryController
from memory_runtime.generation.decoder import Decoder, Outcome, drop
from memory_runtime.generation.hf_backend import HFBackend, input_device
from memory_runtime.generation.packed_cache import PackedCache
from memory_runtime.generation.queued_decoder import QueuedDecoder
from memory_runtime.generation.turn import TurnRequest, TurnResult
from memory_runtime.generation.turn_state import TurnState, end_token_ids
from memory_runtime.generation.write_gate import WriteGate

# the most tokens a feed packed beside the others' may have: the pass scores each fed token against every
# sequence's columns, so a long prompt (a few-shot prompt, a passage: hundreds of tokens) is prefilled alone
PACKED_FEED = 64


@dataclass
class _Turn:
    """A turn in the batch: its tokens and text, its controller, its rows of the shared cache."""

    key: int
    request: TurnRequest
    decoder: TurnState
    cache: BatchCache
    controller: MemoryController = field(init=False)
    model_seconds: float = 0.0
    result: TurnResult | None = None

    @property
    def generated_tokens(self) -> int:
        return self.decoder.stats["generated_tokens"]

    def resume(self, text: str) -> None:
        """Go on from `text` (a read's results appended): its cached tokens that still hold are kept."""
        self.cache.crop(self.key, self.decoder.resume(text))


class _Streamed:
    """A streaming backend's turn, as the controller drives it."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.resumed = False  # the stream must start over: the backend goes on from another text

    @property
    def generated_tokens(self) -> int:
        return self.backend.stats.get("generated_tokens", 0)

    def resume(self, text: str) -> None:
        self.backend.resume(text)
        self.resumed = True


class OneAtATime(Decoder):
    """The engine over any streaming backend (backend.Backend): one whole turn per step, a backend from
    `backend_factory(request)` for each (the server's tests drive it with scripted backends)."""

    def __init__(self, backend_factory: Callable[[TurnRequest], Backend], write_gate: WriteGate | None = None) -> None:
        self.backend_factory = backend_factory
        self.write_gate = write_gate
        self.waiting: collections.deque[TurnRequest] = collections.deque()

    @classmethod
    def of(cls, generation: Any, model: Any, tokenizer: Any, backend=HFBackend, write_gate=None) -> OneAtATime:
        """Turns one at a time, each on a `backend` (HFBackend, or OnnxBackend over an export) with the turn's
        sampling and its memory's relations, decoding as the `generation` section says, as a row of
        BatchDecoder.of: the onnx engine's decoder (open_runtime, the engine measurement) and eval's turn alone.
        Writes are scored by `write_gate` (a WriteGate), as in BatchDecoder.of."""
        return cls(lambda request: backend.for_request(model, tokenizer, request, generation.copy_fields), write_gate)

    @classmethod
    def over(cls, factory: BackendFactory, write_gate: WriteGate | None = None) -> OneAtATime:
        """Turns one at a time, each on a backend from `factory` with the turn's sampling settings: the
        scripted models of the server's tests, the soak and the serve bench."""
        return cls(lambda r: factory(temperature=r.temperature, top_p=r.top_p, seed=r.seed), write_gate)

    def submit(self, request: TurnRequest) -> None:
        request.check()
        self.waiting.append(request)

    def step(self) -> list[tuple[TurnRequest, Outcome]]:
        if not self.waiting:
            return []
        request = self.waiting.popleft()
        try:
            return [(request, self._decode(request))]
        except Exception as err:  # this turn's own failure: the next one goes on
            return [(request, err)]

    def abort(self, request: TurnRequest) -> bool:
        return drop(self.waiting, request)

    def abort_all(self) -> None:
        self.waiting.clear()

    @property
    def in_flight(self) -> int:
        return len(self.waiting)

    def prompt_tokens(self, request: TurnRequest) -> int | None:
        return None  # a streaming backend does not say

    def close(self) -> None:
        pass

    def _decode(self, request: TurnRequest) -> TurnResult:
        """The turn: the backend streams within the tokens left, the controller takes each piece; after a
        read the backend resumes from the results and streams again."""
        backend = self.backend_factory(request)
        turn = _Streamed(backend)
        controller = MemoryController(request, turn, self.write_gate)
        backend.start(list(request.messages))
        over = False
        while not over:
            turn.resumed = False
            stream = backend.stream(controller.tokens_left)
            for piece in stream:
                over = controller.advance(piece)
                if over or turn.resumed:
                    break
            else:  # the stream ended: the model ended the turn, or its tokens ran out
                over = controller.advance("", ended=True)
            stream.close()
        stats = backend.stats
        return controller.result(
            model_seconds=stats.get("forward_seconds", 0.0),
            prompt_tokens=stats.get("prompt_tokens", 0) + stats.get("inserted_tokens", 0),
        )


class BatchDecoder(QueuedDecoder):
    """Decodes many turns at once (see the module docstring). Not thread-safe: one thread steps it."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 8,
        copy_fields: bool = True,
        write_gate: WriteGate | None = None,
        one_forward_per_step: bool | None = None,
        packed: bool | None = None,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.copy_fields = copy_fields
        self.write_gate = write_gate  # scores generated writes with this model; may hold some back
        self.stackable = supports(model)
        self.context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.end_token_ids = end_token_ids(model, tokenizer)
        self.device = input_device(model)
        # prompts and read results fed with the step (module docstring): packed on the CPU, padded elsewhere
        self.one_forward_per_step = one_forward_per_step is not False
        self.packed = self.one_forward_per_step and self.device.type == "cpu" if packed is None else packed
        params = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
        self.padded_tokens = int(5e11 / max(params, 1))  # a step's tokens at ~1 TFLOP (2 FLOPs a weight a token)
        self.cache: BatchCache | PackedCache = PackedCache() if self.packed else BatchCache()
        self._keys = 0
        self.stats = {"steps": 0, "forward_seconds": 0.0, "rows": 0, "prefills": 0, "prefill_seconds": 0.0}
        self._alone = OneAtATime(self.backend_for, write_gate)  # models whose cache cannot be stacked
        self.waiting: collections.deque[TurnRequest] = self._alone.waiting  # one queue: the alone engine's
        self.active: dict[int, _Turn] = {}  # the turns in the batch, by key

    @classmethod
    def of(
        cls,
        generation: Any,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int | None = None,
        write_gate: WriteGate | None = None,
    ) -> BatchDecoder:
        """The one way every door builds the hf engine's decoder over a loaded model: `batch_size` turns at
        once (default `generation.batch_size()`), decoding as the `generation` section says (copy_fields,
        one_forward_per_step), writes scored by `write_gate`. open_runtime, eval's systems, GRPO's rollouts
        and the engine measurement build theirs here, so a new option of the section is threaded once."""
        return cls(
            model,
            tokenizer,
            max_batch_size=batch_size or generation.batch_size(),
            copy_fields=generation.copy_fields,
            write_gate=write_gate,
            one_forward_per_step=generation.one_forward_per_step,
        )

    def submit(self, request: TurnRequest) -> None:
        request.check()
        self.waiting.append(request)

    def abort(self, request: TurnRequest) -> bool:
        if drop(self.waiting, request):
            return True
        turn = next((t for t in self.active.values() if t.request is request), None)
        if turn is None:
            return False
        self.cache.leave({turn.key})
        del self.active[turn.key]
        return True

    def abort_all(self) -> None:
        self.waiting.clear()
        self.active.clear()
        self.cache.leave(set(self.cache.ids))

    def close(self) -> None:
        pass  # everything it holds is in this process

    def backend_for(self, request: TurnRequest) -> HFBackend:
        """A single-turn backend over this model, for `request`'s sampling and memory."""
        return HFBackend.for_request(self.model, self.tokenizer, request, self.copy_fields)

    def together_block(self) -> int:
        """The most tokens a row may feed in the step's shared forward pass (longer feeds run alone): 1
        without one_forward_per_step; packed, PACKED_FEED; padded, as many as keep the block (every row as
        wide as the longest) near a teraflop of arithmetic."""
        if not self.one_forward_per_step:
            return 1
        return PACKED_FEED if self.packed else max(1, self.padded_tokens // self.max_batch_size)

    # ------------------------------------------------------------------ one step

    def step(self) -> list[tuple[TurnRequest, Outcome]]:
        """Admit waiting turns, run one forward pass for the batch, advance every turn by a token
        (or a pause, or its end); returns the turns that finished, with their results. A turn that
        fails on its own (admitting it, feeding it alone, choosing its token, running its calls) leaves
        with its exception and the others go on; only the shared forward pass fails them all."""
        if not self.stackable:
            return self._alone.step()
        finished: list[_Turn] = []
        failed: list[tuple[TurnRequest, Exception]] = []
        while self.waiting and len(self.active) < self.max_batch_size:
            request = self.waiting.popleft()
            try:
                turn = self._admit(request)
            except Exception as err:
                failed.append((request, err))
                continue
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
            # several tokens to feed (read results): that row alone, unless they ride in the shared forward
            logits: dict[int, torch.Tensor] = {}
            t0 = time.perf_counter()
            ride = self.together_block()
            for turn, feed in zip(turns, feeds):
                if len(feed) > ride:
                    try:
                        logits[turn.key] = self.cache.extend(self.model, turn.key, feed, self.device)
                    except Exception as err:
                        failed.append((turn.request, err))
                        self._drop(turn)
            extended = time.perf_counter() - t0
            kept = [(turn, feed) for turn, feed in zip(turns, feeds) if turn.key in self.active]
            turns = [turn for turn, _ in kept]
            short = [feed if len(feed) <= ride else [] for _, feed in kept]
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
                try:
                    self._advance(turn, logits[turn.key])
                except Exception as err:
                    failed.append((turn.request, err))
                    self._drop(turn)
                    continue
                if turn.result is not None:
                    finished.append(turn)
            self.cache.leave({t.key for t in finished})
            for t in finished:
                self.active.pop(t.key, None)
            if self.active and self.cache.wasteful():
                self.cache.compact()
        return [(t.request, t.result) for t in finished] + failed  # type: ignore[misc]

    def _drop(self, turn: _Turn) -> None:
        """Take a failed turn out of the batch: its rows of the cache, its place."""
        self.active.pop(turn.key, None)
        if turn.key in self.cache.ids:
            self.cache.leave({turn.key})

    def _admit(self, request: TurnRequest) -> _Turn:
        generator = None
        if request.seed is not None:
            generator = torch.Generator(device="cpu")
            generator.manual_seed(int(request.seed))
        names = request.store.config.relation_names  # None: relations are free (an empty table, open relations)
        relations = frozenset(names) if self.copy_fields and names is not None else None
        decoder = TurnState(
            self.tokenizer,
            self.end_token_ids,
            temperature=float(request.temperature),
            top_p=float(request.top_p),
            generator=generator,
            copy_fields=self.copy_fields,
            relations=relations,
            common_objects=request.store.config.common_objects,
        )
        decoder.start(request.messages)
        self._keys += 1
        turn = _Turn(self._keys, request, decoder, self.cache)
        turn.controller = MemoryController(request, turn, self.write_gate)
        prompt = decoder.prompt_ids
        if len(prompt) < 2:
            raise ValueError("a batched turn needs a prompt of at least two tokens")
        if (self.packed or self.cache.ids) and len(prompt) <= self.together_block():  # fed with the next step
            self.cache.join_empty(turn.key)
            self.active[turn.key] = turn
            return turn
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
        """One next-token choice for `turn`, handed to its controller (which may resume it from a read's
        results, or end it); at its token budget the decoding ends with the text held back until then."""
        step = turn.decoder.step(logits)
        if step.backtracked:
            self.cache.crop(turn.key, len(turn.decoder.all_ids))
            return
        over = turn.controller.advance(step.piece, ended=step.done)
        if not over and turn.controller.tokens_left <= 0:
            over = turn.controller.advance(turn.decoder.stop_for_length(), ended=True)
        if over:
            stats = turn.decoder.stats
            turn.result = turn.controller.result(
                model_seconds=turn.model_seconds, prompt_tokens=stats["prompt_tokens"] + stats["inserted_tokens"]
            )
