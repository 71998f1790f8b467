"""Weight-only int8 (`generation.weights: int8`): the rounded weights, both kernel paths, the whole
model through the engine, and the settings it refuses."""

from __future__ import annotations

import pytest
import torch

from memory_runtime.generation.runtime import Generation
from memory_runtime.models.hardware import model_bytes
from memory_runtime.models.loading import load_model
from memory_runtime.models.quantize import PREFILL_ROWS, Int8Linear, check_int8, quantize_int8


def _linear(rows: int = 48, cols: int = 64, bias: bool = True) -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(cols, rows, bias=bias).to(torch.bfloat16)


def test_weights_are_rounded_per_output_channel():
    linear = _linear()
    q = Int8Linear(linear)
    assert q.weight_int8.dtype == torch.int8 and q.scales.shape == (48,)
    assert (q.weight_int8.abs().amax(dim=1) == 127).all()  # each row's largest weight maps to 127
    restored = q.weight_int8.float() * q.scales.float()[:, None]
    step = q.scales.float()[:, None]
    assert ((restored - linear.weight.float()).abs() <= step / 2 + 1e-3).all()


@pytest.mark.parametrize("rows", [1, PREFILL_ROWS, PREFILL_ROWS + 1, 40])
def test_the_decode_kernel_and_the_prefill_path_multiply_the_same_weights(rows):
    linear = _linear()
    q = Int8Linear(linear)
    x = torch.randn(2, rows, 64, dtype=torch.bfloat16)
    restored = (q.weight_int8.float() * q.scales.float()[:, None]).T
    expected = x.float() @ restored + linear.bias.float()
    out = q(x)
    assert out.shape == (2, rows, 48) and out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), expected, atol=0.05, rtol=0.02)
    assert torch.allclose(out.float(), linear(x).float(), atol=0.1, rtol=0.05)  # near the full layer


def test_a_model_in_int8_decodes_through_the_engine_and_reads_half_the_bytes(tiny_model_dir, smollm2_tokenizer):
    from memory_runtime.generation.batching import BatchDecoder
    from memory_runtime.generation.turn import TurnRequest, turn_messages
    from memory_runtime.memory.store import TripletStore

    full, _ = load_model(tiny_model_dir, dtype="bfloat16")
    int8, _ = load_model(tiny_model_dir, dtype="bfloat16", weights="int8")
    linears = sum(isinstance(m, torch.nn.Linear) for m in full.modules())
    assert sum(isinstance(m, Int8Linear) for m in int8.modules()) == linears
    assert not any(isinstance(m, torch.nn.Linear) for m in int8.modules())
    # the linear layers' bytes halve; embeddings count one looked-up row (the head no longer shares them)
    linear_bytes = sum(m.weight.numel() * 2 for m in full.modules() if isinstance(m, torch.nn.Linear))
    assert model_bytes(int8) < model_bytes(full) - linear_bytes / 2 + linear_bytes * 0.1
    ids = torch.tensor([smollm2_tokenizer.encode("Dorothea Altemus works for Pfizer.")])
    with torch.inference_mode():
        near = torch.nn.functional.cosine_similarity(full(ids).logits.float(), int8(ids).logits.float(), dim=-1)
    assert (near > 0.99).all()
    with TripletStore() as store:
        result = BatchDecoder(int8, smollm2_tokenizer, max_batch_size=2).run_turn(
            TurnRequest(turn_messages("Hello."), store, max_new_tokens=6)
        )
    assert result.generated_tokens == 6


def test_int8_is_refused_where_it_is_not_the_fast_path(tiny_model_dir):
    with pytest.raises(ValueError, match="CPU path.*set generation.weights=full"):
        check_int8("cuda:0", "bfloat16")
    with pytest.raises(ValueError, match="computes in float32.*generation.weights=full"):
        load_model(tiny_model_dir, dtype="float32", weights="int8")
    with pytest.raises(ValueError, match="weights: int8 is the hf and onnx engines' CPU path"):
        Generation(engine="vllm", weights="int8", write_gate={"signal": "none", "score": False})
    with pytest.raises(ValueError, match="unknown weights 'int4'"):
        load_model(tiny_model_dir, weights="int4")


def test_a_tied_head_gets_its_own_int8_copy():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    quantize_int8(model)
    assert isinstance(model.lm_head, Int8Linear) and model.get_input_embeddings().weight.dtype == torch.bfloat16
    assert model.config.tie_word_embeddings is False
