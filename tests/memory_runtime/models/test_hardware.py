"""The dtype `auto` picks: bfloat16 only where the CPU multiplies it natively, float32 elsewhere."""

from __future__ import annotations

import pytest
import torch

from memory_runtime.models import hardware
from memory_runtime.models.hardware import CpuInfo, DtypeChoice, choose_cpu_dtype, resolve_dtype

AVX2_ONLY = CpuInfo(model="AMD EPYC", flags=frozenset({"avx", "avx2", "fma"}), cores=2)
BF16_NATIVE = CpuInfo(
    model="Intel Xeon Platinum 8481C",
    flags=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}),
    cores=2,
)


def _never(*_args):
    raise AssertionError("the probe must not run when the flags rule bfloat16 out")


def test_cpu_without_native_bf16_gets_float32_without_probing():
    choice = choose_cpu_dtype(AVX2_ONLY, probe=_never)
    assert choice.dtype == "float32"
    assert "AMD EPYC" in choice.reason and "avx512_bf16" in choice.reason


def test_cpu_with_native_bf16_gets_bfloat16_when_the_probe_agrees():
    choice = choose_cpu_dtype(BF16_NATIVE, probe=lambda: 1.9)
    assert choice == DtypeChoice("bfloat16", choice.reason)
    assert "avx512_bf16, amx_bf16" in choice.reason and "1.9x" in choice.reason


def test_flags_that_mislead_are_overruled_by_the_probe():
    choice = choose_cpu_dtype(BF16_NATIVE, probe=lambda: 0.5)
    assert choice.dtype == "float32" and "2.0x slower" in choice.reason


def test_amx_alone_counts_as_native():
    amx = CpuInfo(model="Xeon", flags=frozenset({"amx_bf16"}), cores=4)
    assert choose_cpu_dtype(amx, probe=lambda: 2.5).dtype == "bfloat16"


def test_this_machine_reads_its_flags():
    info = hardware.cpu_info()
    assert info.model and info.cores >= 1
    expected = "bfloat16" if set(hardware.NATIVE_BF16_FLAGS) & info.flags else "float32"
    if expected == "float32":  # no probe needed: the choice follows from the flags alone
        assert hardware.choose_dtype("cpu").dtype == "float32"


def test_explicit_dtypes_pass_through_and_unknown_ones_are_named():
    assert resolve_dtype("bfloat16").dtype == "bfloat16"
    assert resolve_dtype(torch.float16).dtype == "float16"
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        resolve_dtype("fp8")


@pytest.mark.parametrize("native", [True, False])
def test_load_model_follows_the_machine_choice(native, tiny_model_dir, monkeypatch):
    from memory_runtime.models.loading import load_model

    cpu = BF16_NATIVE if native else AVX2_ONLY
    monkeypatch.setattr(hardware, "choose_dtype", lambda device="cpu": choose_cpu_dtype(cpu, probe=lambda: 2.0))
    model, _ = load_model(str(tiny_model_dir))  # dtype defaults to auto
    assert model.dtype == (torch.bfloat16 if native else torch.float32)
