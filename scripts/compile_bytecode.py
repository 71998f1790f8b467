"""Bytecode for the installed packages, written once by scripts/install.sh (which installs with
`pip install --no-compile`).

pip compiles every module it installs, ~16,000 files for memlm's dependencies and half the install's
time on 2 cores, most of them modules the main job never loads (transformers' hundreds of model
families). Without bytecode on disk, a process that runs with PYTHONDONTWRITEBYTECODE set compiles
every module it imports, each time it starts: ~20 s more for each of the job's processes on 2 cores.

    python scripts/compile_bytecode.py          # what memlm imports: all its modules and what they load later
    python scripts/compile_bytecode.py --all    # everything installed (the tests import much more)
"""

from __future__ import annotations

import compileall
import importlib
import pkgutil
import sys
import sysconfig
import time
import warnings

PACKAGES = ["memlm", "memory_runtime", "data_gen", "training", "eval", "learning_loop"]
# loaded inside functions (by memlm or by transformers' lazy modules) while the main job runs
LATER = [
    "transformers.models.llama.modeling_llama",  # the embedded default base, SmolLM2
    "transformers.modeling_gguf_pytorch_utils",
    "transformers.integrations.ggml",
    "transformers.trainer",
    "transformers.generation.utils",
    "trl.trainer.sft_trainer",
    "peft.tuners.lora",
    "onnxruntime_genai",
    "onnxruntime_genai.models.builder",
    "matplotlib.pyplot",
    "uvicorn.protocols.http.h11_impl",
    "pyarrow.json",
    "rich.progress",
]


def imported() -> list[str]:
    """Imports memlm's modules and LATER, which writes their bytecode; the names that did not import."""
    failed = []
    names = list(PACKAGES)
    for top in PACKAGES:
        walked = pkgutil.walk_packages(importlib.import_module(top).__path__, top + ".", onerror=failed.append)
        names += [m.name for m in walked if not m.name.endswith(".__main__")]  # memlm.__main__ runs the CLI
    for name in names + LATER:
        try:
            importlib.import_module(name)
        except Exception as e:  # an optional dependency that is not installed (vllm, psycopg): nothing to compile
            failed.append(f"{name} ({type(e).__name__})")
    # Faker's providers of the shipped data config's locales (memlm generate loads them by name)
    from faker import Faker

    from data_gen.data_config import DataConfig
    from memory_runtime.shipped import find_config

    for locale in DataConfig.load(find_config("data/default")).world.locales:
        Faker(locale)
    return failed


def main() -> None:
    sys.dont_write_bytecode = False  # PYTHONDONTWRITEBYTECODE stops the writes this script is for
    start = time.monotonic()
    if sys.argv[1:] == ["--all"]:
        folders = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for folder in folders:  # quiet=2: files that are not Python 3 (a package's own leftovers) as pip does
                compileall.compile_dir(folder, quiet=2, workers=0)
        what = "everything installed"
    elif not sys.argv[1:]:
        failed = imported()
        what = f"{len(sys.modules)} modules memlm imports" + (f"; not installed: {', '.join(failed)}" if failed else "")
    else:
        sys.exit(__doc__)
    print(f"compile_bytecode.py: {what}, {time.monotonic() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
