"""Serving at scale on GPUs through vLLM (`pip install 'memlm[vllm]'`): the memory controller
around vLLM's continuous batching, paged KV cache and prefix caching.

Each turn is a vLLM request that stops at a read query's ``}:``. The controller's TurnCalls sees
the text as vLLM streams it (writes are stored as they complete); at a read it appends the results
and submits the turn again as a new request whose prompt is the token ids so far (the prompt and
every generated token kept, only the results tokenized), so vLLM's prefix cache finds everything
but the results already computed. A trained adapter is applied per request (a LoRARequest: one
engine serves the base and any adapter). Names in calls are held to copies of the conversation
and relations to the memory's table by a regular expression per request (field_copy.calls_regex,
vLLM's structured outputs), the rule HFBackend applies token by token.

:class:`VLLMDecoder` has the interface of memory_runtime.generation.batching's decoders (add, step, busy,
room, run, run_sessions), so eval and serve drive it the same way. The engine is anything with
vLLM's ``LLMEngine`` methods ``add_request``, ``abort_request`` and ``step``: the tests use a fake.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_runtime.generation.batching import TurnRequest, _Decoder
from memory_runtime.generation.controller import TurnCalls, TurnResult
from memory_runtime.generation.field_copy import calls_regex
from memory_runtime.generation.hf_backend import TurnDecoder
from memory_runtime.protocol import READ_QUERY_CLOSE


@dataclass
class _VTurn:
    request: TurnRequest
    decoder: TurnDecoder  # the turn's token ids and exact text (no model: vLLM chooses the tokens)
    calls: TurnCalls
    engine_id: str = ""
    base: int = 0  # assistant tokens before the current vLLM request's output
    fed: str = ""  # assistant text handed to the calls so far
    started: float = field(default_factory=time.perf_counter)
    generated: int = 0


def vllm_params(request: TurnRequest, max_tokens: int, regex: str | None) -> Any:
    """vLLM SamplingParams of one submission of a turn: stop after a read query, constrained calls."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    return SamplingParams(
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        max_tokens=max_tokens,
        stop=[READ_QUERY_CLOSE],
        include_stop_str_in_output=True,
        structured_outputs=StructuredOutputsParams(regex=regex) if regex else None,
    )


_LORA_IDS: dict[str, int] = {}  # adapter directory -> its id in this process's engines


def lora_request(adapter_dir: str | None) -> Any:
    """The LoRARequest that applies a trained adapter to a request (None: the base model); vLLM tells
    adapters apart by id, so each directory keeps one."""
    if adapter_dir is None:
        return None
    from vllm.lora.request import LoRARequest

    path = str(Path(adapter_dir).resolve())
    lora_id = _LORA_IDS.setdefault(path, len(_LORA_IDS) + 1)
    return LoRARequest(f"memlm-{lora_id}", lora_id, path)


class VLLMDecoder(_Decoder):
    """Turns through a vLLM engine (see the module docstring)."""

    def __init__(
        self,
        engine: Any,
        tokenizer: Any,
        *,
        adapter: str | None = None,
        copy_fields: bool = True,
        max_batch_size: int = 256,
        params=vllm_params,
        lora=lora_request,
    ) -> None:
        super().__init__()
        from memory_runtime.generation.hf_backend import end_token_ids

        self.engine = engine
        self.tokenizer = tokenizer
        self.copy_fields = copy_fields
        self.max_batch_size = max_batch_size
        self.end_token_ids = end_token_ids(engine, tokenizer)
        self._params, self._make_lora, self._lora = params, lora, lora(adapter)
        self.active: dict[str, _VTurn] = {}  # engine request id -> its turn
        self.merged_adapter: str | None = None  # set when the engine's weights are an adapter merged into its base
        self._ids = itertools.count()

    def with_adapter(self, adapter: str | None) -> VLLMDecoder:
        """Another decoder over the same engine with another adapter (None: the base model): one engine
        serves them all. Step one at a time: each ignores the outputs of the other's requests."""
        if self.merged_adapter is not None:
            raise ValueError(
                f"the engine serves {self.merged_adapter} merged into its base, so it has no other adapter "
                "or base model (load_vllm_decoder(..., merge_adapter=False) applies it per request)"
            )
        twin = VLLMDecoder(
            self.engine,
            self.tokenizer,
            adapter=adapter,
            copy_fields=self.copy_fields,
            max_batch_size=self.max_batch_size,
            params=self._params,
            lora=self._make_lora,
        )
        twin._ids = self._ids  # one engine, one sequence of request ids
        twin.context = self.context
        return twin

    def step(self) -> list[tuple[TurnRequest, TurnResult]]:
        while self.waiting and len(self.active) < self.max_batch_size:
            self._admit(self.waiting.popleft())
        finished = []
        for output in self.engine.step():
            turn = self.active.get(output.request_id)
            if turn is None:  # an aborted submission's last words
                continue
            result = self._advance(turn, output)
            if result is not None:
                finished.append((turn.request, result))
        return finished

    def close(self) -> None:
        """Shut the engine's processes down (vLLM's engine core and its workers), for this decoder and
        its twins: they outlive a parent that ends without running its exit handlers."""
        shutdown = getattr(getattr(self.engine, "engine_core", None), "shutdown", None)
        if shutdown is not None:
            shutdown()

    # ------------------------------------------------------------------ a turn

    def _admit(self, request: TurnRequest) -> None:
        decoder = self._prompt_decoder(request)  # the engine holds names to copies itself
        calls = TurnCalls(
            request.store,
            request.namespace,
            request.max_calls,
            request.on_text,
            request.messages,
            request.cancel.is_set,
            source=request.source,
        )
        self._submit(_VTurn(request, decoder, calls))

    def _submit(self, turn: _VTurn) -> None:
        """(Re)submit the turn from its token ids so far: the prefix cache holds all but the new ones."""
        turn.engine_id = f"memlm-{next(self._ids)}"
        turn.base = len(turn.decoder.ids)
        regex = None
        if self.copy_fields:
            context = turn.decoder.context + "\n" + turn.calls.text
            regex = calls_regex(context, turn.request.store.config.relation_names)
        params = self._params(turn.request, turn.request.max_new_tokens - turn.generated, regex)
        self.engine.add_request(
            turn.engine_id, {"prompt_token_ids": turn.decoder.all_ids}, params, lora_request=self._lora
        )
        self.active[turn.engine_id] = turn

    def _advance(self, turn: _VTurn, output: Any) -> TurnResult | None:
        completion = output.outputs[0]
        new_ids = list(completion.token_ids)
        while new_ids and new_ids[-1] in self.end_token_ids:  # vLLM keeps the end token; the turn's text does not
            new_ids.pop()
        turn.decoder.ids = turn.decoder.ids[: turn.base] + new_ids
        generated = turn.generated + len(new_ids)
        text = turn.decoder.assistant_text
        action = "continue"
        if text.startswith(turn.fed) and len(text) > len(turn.fed):
            action = turn.calls.feed(text[len(turn.fed) :])
            turn.fed = text
        if action == "pause":  # a read was answered: go on from its results, in a new submission
            if not output.finished:
                self.engine.abort_request(turn.engine_id)
            del self.active[turn.engine_id]
            turn.generated = generated
            turn.decoder.resume(turn.calls.text)
            turn.fed = turn.decoder.assistant_text
            if generated >= turn.request.max_new_tokens:
                turn.calls.status = "max_tokens"
                return self._finish(turn)
            self._submit(turn)
            return None
        if action == "stop" and not output.finished:
            self.engine.abort_request(turn.engine_id)
        if action == "stop" or output.finished:
            del self.active[turn.engine_id]
            turn.generated = generated
            if action != "stop" and completion.finish_reason == "stop" and completion.stop_reason == READ_QUERY_CLOSE:
                # "}:" that closed no read (inside text or a malformed call): the turn goes on
                if generated < turn.request.max_new_tokens:
                    self._submit(turn)
                    return None
            return self._finish(turn)
        return None

    def _finish(self, turn: _VTurn) -> TurnResult:
        return turn.calls.result(
            generated_tokens=turn.generated,
            max_new_tokens=turn.request.max_new_tokens,
            started=turn.started,
            model_seconds=0.0,
            prompt_tokens=len(turn.decoder.prompt_ids) + turn.decoder.stats["inserted_tokens"],
        )


def load_vllm_decoder(
    model: str,
    *,
    max_batch_size: int = 256,
    copy_fields: bool = True,
    dtype: str = "auto",
    gpu_memory_utilization: float | None = None,
    max_lora_rank: int = 64,
    merge_adapter: bool | None = None,
) -> VLLMDecoder:
    """A VLLMDecoder for `model` (a base model, or a `memlm train` adapter on its base) on this GPU, or
    on the CPU with vLLM's CPU build: prefix caching on, the adapter applied per request, up to
    `max_batch_size` turns at once. `gpu_memory_utilization` is the share of the GPU's memory, or on the
    CPU of the machine's, kept for the model and its KV cache (default 0.85 on a GPU, 0.2 on the CPU).
    `merge_adapter` serves an adapter folded into its base (models.merged_model_dir) instead of applying
    it per request; default: merged on the CPU, where vLLM's LoRA kernels are plain torch ops that
    took 63% of a decoding step, per request on a GPU."""
    try:
        from vllm import EngineArgs, LLMEngine
    except ImportError:
        raise ValueError(
            "generation.engine=vllm needs vLLM: pip install 'memlm[vllm]' on a CUDA machine, "
            "bash scripts/vllm_cpu_env.sh on a CPU (docs/serving.md)"
        ) from None
    from memory_runtime.models.hardware import resolve_device, resolve_dtype
    from memory_runtime.models.loading import is_adapter_dir, load_tokenizer, merged_model_dir, resolve_base

    device = resolve_device("auto")
    if gpu_memory_utilization is None:
        gpu_memory_utilization = 0.85 if device.startswith("cuda") else 0.2
    # the prefix cache keeps whole blocks: vLLM's CPU default of 128 tokens is longer than most of
    # our prompts, so a turn resumed after a read would find nothing cached; 32 is the CPU kernels' unit
    block_size = None if device.startswith("cuda") else 32

    adapter = model if is_adapter_dir(model) else None
    weights = resolve_base(model)
    if merge_adapter is None:
        merge_adapter = not device.startswith("cuda")
    merged = adapter if adapter is not None and merge_adapter else None
    if merged is not None:
        weights, adapter = str(merged_model_dir(merged)), None
    args = EngineArgs(
        model=weights,
        enable_prefix_caching=True,
        max_num_seqs=max_batch_size,
        enable_lora=adapter is not None,
        max_lora_rank=max_lora_rank,
        dtype=resolve_dtype(dtype, device).dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        block_size=block_size,
    )
    engine = LLMEngine.from_engine_args(args)
    decoder = VLLMDecoder(
        engine, load_tokenizer(model), adapter=adapter, copy_fields=copy_fields, max_batch_size=max_batch_size
    )
    decoder.merged_adapter = merged
    decoder.context = engine.model_config.max_model_len
    return decoder
