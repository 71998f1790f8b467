"""A model with its memory, configured once and opened in one place.

:class:`Generation` is the `generation` section every config that runs a model embeds as it is
(serve, chat, eval, self-instruct; the benchmarks take its ``key=value`` overrides): which model,
where and how it runs, a turn's limits and sampling, the memory's relation table and the write
gate. :func:`open_runtime` opens it and returns a :class:`Runtime`, ready to run turns or sessions
through :attr:`Runtime.decoder`, the decoder (memory_runtime.generation.decoder.Decoder):

    engine hf    the model in this process (transformers), many turns at once
                 (memory_runtime.generation.batching.BatchDecoder; one at a time where its cache cannot be
                 stacked); writes can be gated (memory_runtime.generation.write_gate); :meth:`Runtime.backend`
                 also streams plain text from it, one turn at a time (self-instruct's sentences)
    engine vllm  vLLM's engine (memory_runtime.generation.vllm_decoder.VLLMDecoder): continuous batching,
                 prefix caching, the adapter applied per request; on a GPU, or on the CPU with vLLM's CPU build
    engine onnx  the model exported once to ONNX Runtime GenAI (memory_runtime.generation.onnx_backend), int8
                 or float32 weights, on the CPU, one turn at a time, with the hf engine's decoding rules
    engine auto  (the default) vllm where vLLM is installed and the command can run on it, else hf
                 (:func:`choose_engine`): vLLM is the faster engine on the CPU too (docs/results.md)

Every command runs its turns the same way on either engine: :meth:`Runtime.request` (or
:meth:`Generation.request`) makes a turn, the engine's ``run_turn``, ``run`` or ``run_sessions`` decodes it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from memory_runtime.generation.decoder import Decoder
from memory_runtime.generation.turn import TurnRequest, turn_messages
from memory_runtime.generation.write_gate import WriteGate, WriteGateConfig
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.shipped import resolve_path
from memory_runtime.yaml_config import Strict

Engine = Literal["hf", "vllm", "onnx"]
ENGINES: tuple[Engine, ...] = ("hf", "vllm", "onnx")


class Generation(Strict):
    """How a model runs its turns. Commands differ only in a few defaults (:func:`with_defaults`):
    eval and self-instruct decode shorter turns with fewer calls, eval batches by device."""

    what = "generation section"

    model: str | None = Field(
        None,
        description="a `memlm train` run directory (a PEFT adapter, merged into its base on hf), a Hugging Face "
        "model directory or hub id, or embedded:SmolLM2-135M-Instruct; null: that embedded base model "
        "(eval needs one)",
    )
    engine: Literal["auto", "hf", "vllm", "onnx"] = Field(
        "auto",
        description="auto: vllm where vLLM is installed and the command can run on it, else hf; hf: transformers "
        "in this process; vllm: vLLM's engine (pip install 'memlm[vllm]' on a GPU, vLLM's CPU build "
        "on a CPU; no write gate); onnx: ONNX Runtime GenAI on the CPU, one turn at a time (pip install "
        "'memlm[onnx]'; the model exported once with `weights`; no write gate)",
    )
    device: str = Field("auto", description="auto (a CUDA GPU when one is visible, else the CPU), cpu, cuda, cuda:N")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: bfloat16 on GPUs and on CPUs that multiply it natively, else float32"
    )
    weights: Literal["auto", "full", "int8", "int4"] = Field(
        "auto",
        description="auto: int8 on the onnx engine, full elsewhere; full: the weights in `dtype` (onnx: float32); "
        "int8: each linear layer's weights rounded to int8, half the bytes a token reads (hf engine: per output "
        "channel, CPU, bfloat16 only, memory_runtime.models.quantize; onnx engine: per block of 32 inputs); int4: "
        "onnx engine only, a quarter; greedy turns differ from full's: docs/results.md measures by how much",
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads of the model, torch's or ONNX Runtime's (null: one per core, torch's count); 1 "
        "when jobs share the cores",
    )
    max_batch_size: int | None = Field(
        8,
        ge=1,
        description="turns decoded together (memory_runtime.generation.batching; the same greedy results as 1); "
        "null: 64 on a GPU, 8 on the CPU",
    )
    one_forward_per_step: bool | None = Field(
        None,
        description="the hf engine's batches feed a joining prompt and a read's results in the step's one forward "
        "pass, beside the other rows' tokens: packed into one row on the CPU, padded on a GPU while the padding "
        "stays near a teraflop (null: true; false: such a row runs alone; docs/decoding.md)",
    )
    max_new_tokens: int = Field(256, ge=1, description="generated tokens per turn, at most")
    max_calls: int = Field(16, ge=1, description="memory calls per turn, at most (ends a model that loops on calls)")
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature (0: greedy, as the model trained)")
    top_p: float = Field(1.0, gt=0, le=1)
    copy_fields: bool = Field(
        True,
        description="names in calls copied from the conversation and relations taken from the relation table "
        "(memory_runtime.generation.field_copy); false: the model's own spelling, to measure the model alone",
    )
    memory_config: str | None = Field(
        None,
        description="a memory config YAML: relation table, fuzzy settings (null: memlm's; the relation table is "
        "the one the model's run was trained with, else memory_runtime/memory/relations.yaml)",
    )
    write_gate: WriteGateConfig = Field(
        WriteGateConfig(),
        description="which unsure writes are held back (memory_runtime.generation.write_gate; engine hf)",
    )
    propose: int = Field(
        1,
        ge=1,
        description="runs of each turn whose writes are pooled (memory_runtime.generation.proposals): 1, the greedy "
        "run alone; k: and k - 1 sampled runs (temperature 1, top-p 0.95) against empty scratch memories, their "
        "writes judged by the write gate in their run (write_gate.signal verifier) and stored where the greedy "
        "run lacks them; k times the decoding, decoded together on hf and vllm",
    )

    @model_validator(mode="after")
    def _engine_can(self) -> Generation:
        if self.propose > 1 and not self.write_gate.active:
            raise ValueError(
                f"propose: {self.propose} pools the writes of sampled runs, which a write gate must judge: set "
                "write_gate.signal (verifier: a trained verifier), or write_gate.score=true to measure them"
            )
        if self.engine == "vllm" and self.weights not in ("auto", "full"):
            raise ValueError(
                f"weights: {self.weights} is the hf and onnx engines' CPU path; vllm loads the checkpoint's own "
                "weights (set generation.weights=full with engine vllm)"
            )
        if self.engine not in ("onnx", "auto") and self.weights == "int4":
            raise ValueError("weights: int4 is the onnx engine's (set generation.engine=onnx, or weights int8 or full)")
        if self.engine in ("vllm", "onnx") and self.write_gate.active and self.write_gate.needs_writer_model:
            raise ValueError(
                f"write_gate: the {self.engine} engine cannot score writes with the writer's own signals (they need "
                f"the transformers model in this process, engine: hf); with {self.engine} use "
                "write_gate.signal=verifier (a trained verifier) and write_gate.score=false"
            )
        if self.engine in ("vllm", "onnx") and self.one_forward_per_step is not None:
            raise ValueError(
                f"one_forward_per_step: the hf engine's batches feed rows this way; {self.engine} batches its own "
                "way (set generation.one_forward_per_step=null, or engine hf)"
            )
        if self.engine == "onnx" and self.device not in ("auto", "cpu"):
            raise ValueError(
                f"device: the onnx engine runs on the CPU (got {self.device!r}); on a GPU use engine hf or vllm"
            )
        return self

    def on_engine(self, hf_because: str | None = None) -> tuple[Generation, str]:
        """This section on the engine it runs on (a copy; `auto` resolved by :func:`choose_engine`, and
        weights auto by the engine: int8 on onnx, full elsewhere), and why that engine."""
        engine, why = choose_engine(self, hf_because)
        return self.model_copy(update={"engine": engine, "weights": resolved_weights(self.weights, engine)}), why

    def memory(self) -> MemoryConfig:
        """The memory's config (relation table, fuzzy settings): `memory_config`, whose relation table
        is by default the one the model was trained with (a run's relations.yaml, from its schema)."""
        return MemoryConfig.of_model(self.model, self.memory_config)

    def batch_size(self) -> int:
        """Turns decoded together: `max_batch_size`, or what suits the device."""
        from memory_runtime.models.hardware import resolve_device

        if self.max_batch_size is not None:
            return self.max_batch_size
        return 64 if resolve_device(self.device).startswith("cuda") else 8

    def request(
        self, messages: Sequence[dict[str, str]], store: TripletStore, *, namespace: str = "default", **per_turn: Any
    ) -> TurnRequest:
        """The one way every door makes a turn: `messages` (:func:`turn_messages`: the system prompt, the
        history, the user's text) against `namespace` of `store`, with this section's limits and sampling
        (max_new_tokens, max_calls, temperature, top_p). `per_turn` is what a door knows of this turn alone
        (seed, source, said_at, on_text, gate_writes) or a setting it overrides (a client's temperature, a
        probe's greedy decoding, a shorter max_new_tokens)."""
        settings = {
            "max_new_tokens": self.max_new_tokens,
            "max_calls": self.max_calls,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        return TurnRequest(list(messages), store, namespace=namespace, **(settings | per_turn))

    def relative_to(self, folder: Path) -> Generation:
        self.memory_config = resolve_path(self.memory_config, folder)
        self.write_gate.verifier = resolve_path(self.write_gate.verifier, folder)
        return self


def vllm_installed() -> bool:
    """Whether vLLM imports here (a GPU host with memlm[vllm], or .venv-vllm on a CPU)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import vllm  # noqa: F401
    except Exception:  # a broken install (a kernel library that does not load) is no engine
        return False
    return True


def resolved_weights(weights: str, engine: str) -> str:
    """`weights` on `engine`: auto is int8 on onnx (its fast path, greedy turns as good), full elsewhere."""
    if weights != "auto":
        return weights
    return "int8" if engine == "onnx" else "full"


def choose_engine(generation: Generation, hf_because: str | None = None) -> tuple[Engine, str]:
    """The engine `generation` runs on, and why. An explicit engine stays; `auto` is vllm where vLLM
    is installed, unless the model must run in this process: `hf_because` says why a command needs it
    (self-instruct, several eval workers), and the write gate scores writes with the model. Without
    vLLM, turns that run one at a time on the CPU (max_batch_size 1: chat) take onnx where ONNX Runtime
    GenAI is installed, the fastest turn there (docs/decoding.md); batches take hf's batching."""
    from memory_runtime.generation.onnx_backend import onnx_installed
    from memory_runtime.models.hardware import resolve_device

    if generation.engine != "auto":
        return generation.engine, "generation.engine"
    if generation.weights == "int4":
        return "onnx", "auto: weights int4 are the onnx engine's"
    if hf_because:
        return "hf", f"auto: {hf_because}"
    if generation.write_gate.active and generation.write_gate.needs_writer_model:
        return "hf", "auto: the write gate scores writes with the model in this process"
    if vllm_installed():
        return "vllm", "auto: vLLM is installed here"
    if generation.batch_size() == 1 and resolve_device(generation.device) == "cpu" and onnx_installed():
        return "onnx", "auto: one turn at a time on the CPU, and ONNX Runtime GenAI is installed here"
    return "hf", "auto: vLLM is not installed here"


def with_defaults(data: Any, **defaults: Any) -> Any:
    """A config mapping whose `generation` section falls back to a command's own `defaults` (a
    pydantic ``mode="before"`` validator of the config that embeds the section)."""
    if isinstance(data, dict) and isinstance(data.get("generation", {}), dict):
        return {**data, "generation": {**defaults, **data.get("generation", {})}}
    return data


@dataclass
class Runtime:
    """An opened model with its memory: the turns it runs follow `generation`."""

    generation: Generation
    memory: MemoryConfig
    tokenizer: Any
    decoder: Decoder  # the engine every turn runs through: BatchDecoder (hf) or VLLMDecoder (vllm)
    model: Any = None  # the transformers model (engine hf), the exported one (onnx); None on vllm
    device: str = "cpu"
    dtype: str = "float32"
    system_prompt: str | None = SYSTEM_PROMPT  # the one the model was trained with
    write_gate: WriteGate | None = None
    engine_reason: str = "generation.engine"  # why this engine (generation.engine auto: what it found)

    @property
    def name(self) -> str:
        """The model that was opened (a run directory or a base model)."""
        return self.generation.model or _embedded()

    @property
    def engine(self) -> Engine:
        return self.generation.engine  # type: ignore[return-value]  # resolved by open_runtime

    def close(self) -> None:
        """Shut down what runs outside this process (vLLM's engine processes); the runtime is done."""
        self.decoder.close()

    def describe(self) -> str:
        """What was opened, for a command's first line: model, engine and why, device, dtype."""
        return f"{self.name} on {self.engine} ({self.engine_reason}), {self.device}, {self.dtype}"

    def open_store(self, db: str | Path = ":memory:") -> TripletStore:
        """The memory at `db` (an SQLite file, created if missing, or a postgresql:// URL)."""
        return TripletStore(db, self.memory)

    def backend(self, temperature: float | None = None, top_p: float | None = None, seed: int | None = None):
        """A backend that streams one turn at a time over the model (engine hf): plain text without the
        memory (self-instruct's sentences), or the engine for one-at-a-time runs
        (batching.OneAtATime); sampling as configured unless given."""
        from memory_runtime.generation.hf_backend import HFBackend
        from memory_runtime.generation.onnx_backend import OnnxBackend

        if self.model is None:
            raise ValueError("one turn at a time over the model needs generation.engine=hf or onnx")
        return (OnnxBackend if self.engine == "onnx" else HFBackend)(
            self.model,
            self.tokenizer,
            temperature=self.generation.temperature if temperature is None else temperature,
            top_p=self.generation.top_p if top_p is None else top_p,
            seed=seed,
            copy_fields=self.generation.copy_fields,
            relations=self.memory.relation_names,
            common_objects=self.memory.common_objects,
        )

    def request(
        self,
        user_text: str,
        store: TripletStore,
        namespace: str = "default",
        *,
        history: Sequence[dict[str, str]] = (),
        **per_turn: Any,
    ) -> TurnRequest:
        """A turn of `namespace`'s conversation as this runtime runs it (:meth:`Generation.request` with the
        system prompt the model was trained with): ``runtime.decoder.run_turn(runtime.request(...))``."""
        messages = turn_messages(user_text, history, self.system_prompt)
        return self.generation.request(messages, store, namespace=namespace, **per_turn)


def _embedded() -> str:
    from memory_runtime.models.embedded import EMBEDDED_MODEL

    return EMBEDDED_MODEL


def open_runtime(
    generation: Generation, hf_because: str | None = None, *, serving: bool = False, log: Any = None
) -> Runtime:
    """Open `generation`'s model with its memory on its engine (:func:`choose_engine`; `hf_because`:
    why this command needs the model in this process): an adapter is merged into its base (hf) or
    applied per request (vllm); up to `generation.batch_size()` turns decode at once. `serving`: for a
    server, where engine auto on the CPU takes hf's batches or onnx's turns one after another, whichever
    was measured to serve more on this machine (engine_choice.py; `log` says when it measures)."""
    from memory_runtime.models.hardware import resolve_device, resolve_dtype
    from memory_runtime.models.trained_run import trained_system_prompt

    asked = generation
    generation, why = generation.on_engine(hf_because)
    if serving and _either_serves(asked, generation):
        from memory_runtime.generation.engine_choice import measured_server_engine
        from memory_runtime.generation.onnx_backend import ExportError

        try:
            measured = measured_server_engine(asked, resolved_weights(asked.weights, "onnx"), log)
        except ExportError as err:
            why = f"auto: onnx cannot export this model ({err})"
        else:
            engine = measured.engine
            generation = asked.model_copy(update={"engine": engine, "weights": resolved_weights(asked.weights, engine)})
            why = measured.reason

    if generation.threads is not None:
        import torch

        torch.set_num_threads(generation.threads)
    model = generation.model or _embedded()
    memory = generation.memory()
    prompt = trained_system_prompt(model)
    check_verifier(generation.write_gate, model, memory)  # before any model loads
    if generation.engine == "vllm":
        from memory_runtime.generation.vllm_decoder import load_vllm_decoder
        from memory_runtime.generation.write_gate import write_gate

        decoder = load_vllm_decoder(
            model, max_batch_size=generation.batch_size(), copy_fields=generation.copy_fields, dtype=generation.dtype
        )
        decoder.write_gate = gate = write_gate(generation.write_gate)  # a verifier's alone (checked above)
        device = resolve_device(generation.device)
        dtype = resolve_dtype(generation.dtype, device).dtype
        return Runtime(
            generation, memory, decoder.tokenizer, decoder, None, device, dtype, prompt, gate, engine_reason=why
        )
    if generation.engine == "onnx":
        from memory_runtime.generation.onnx_backend import ExportError, load_onnx_model

        try:
            exported, tokenizer = load_onnx_model(model, generation.weights, generation.threads)
        except ExportError as err:
            if asked.engine != "auto" or asked.weights == "int4":
                raise ValueError(f"generation.engine=onnx: {err} (set generation.engine=hf)") from None
            # auto chose onnx and it cannot run this model: the engine auto would take without it, said so
            generation = asked.model_copy(update={"engine": "hf", "weights": resolved_weights(asked.weights, "hf")})
            why = f"auto: onnx cannot export this model ({err})"
        else:
            return _onnx_runtime(generation, memory, exported, tokenizer, prompt, why)

    from memory_runtime.generation.batching import BatchDecoder
    from memory_runtime.generation.write_gate import write_gate
    from memory_runtime.models.loading import load_model

    device = resolve_device(generation.device)
    loaded, tokenizer = load_model(model, dtype=generation.dtype, device=device, merge=True, weights=generation.weights)
    gate = write_gate(generation.write_gate, loaded, tokenizer)
    decoder = BatchDecoder.of(generation, loaded, tokenizer, write_gate=gate)
    dtype = str(loaded.dtype).removeprefix("torch.")
    return Runtime(generation, memory, tokenizer, decoder, loaded, device, dtype, prompt, gate, why)


def _either_serves(asked: Generation, chosen: Generation) -> bool:
    """Whether a server of `asked` (engine auto) could run hf or onnx alike: auto took hf on the CPU for
    batches, ONNX Runtime GenAI is installed, and no write gate needs the model in this process."""
    from memory_runtime.generation.onnx_backend import onnx_installed
    from memory_runtime.models.hardware import resolve_device

    return (
        asked.engine == "auto"
        and chosen.engine == "hf"
        and chosen.batch_size() > 1
        and not asked.write_gate.active
        and resolve_device(asked.device) == "cpu"
        and onnx_installed()
    )


def _onnx_runtime(
    generation: Generation, memory: MemoryConfig, exported: Any, tokenizer: Any, prompt, why: str
) -> Runtime:
    """The onnx engine's runtime: one turn at a time (OneAtATime) over OnnxBackend."""
    from memory_runtime.generation.batching import OneAtATime
    from memory_runtime.generation.onnx_backend import OnnxBackend
    from memory_runtime.generation.write_gate import write_gate

    gate = write_gate(generation.write_gate)  # a verifier's alone (the config refuses the writer's own signals)
    one = OneAtATime.of(generation, exported, tokenizer, OnnxBackend, write_gate=gate)
    return Runtime(generation, memory, tokenizer, one, exported, "cpu", "float32", prompt, gate, engine_reason=why)


def check_verifier(gate: WriteGateConfig, model: str, memory: MemoryConfig) -> None:
    """A verifier must exist, keep its head, and share the writer's base and relation table: one-line errors
    (memory_runtime.generation.verifier) before anything loads."""
    if gate.verifier is None:
        return
    from memory_runtime.generation.verifier import check_pairing, read_card
    from memory_runtime.models.loading import adapter_base, is_adapter_dir

    card = read_card(gate.verifier)
    base = adapter_base(model) if is_adapter_dir(model) else model
    check_pairing(card, base, [spec.name for spec in memory.relations])
