"""memlm as a package: the wheel `pip wheel .` builds, installed in a fresh virtual environment, runs from a
directory that is not the checkout and finds everything it ships (configs, real text, relation table, phrase
bank, the memory page) through importlib.resources; a shipped file that is missing is named, in one line.

The environment sees, behind its own, the packages of the Python that runs the tests (torch, TRL, the embedded
model; a virtual environment's too) and takes memlm from the wheel alone. The fast tests build, install and
generate (~20 s); the slow one trains, evaluates and serves from the wheel (a few minutes on 2 cores; .ci/run
runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what a wheel is not built from: the checkout's tools, tests, docs, runs and environments
LEFT_OUT = {"tests", "docs", "scripts", "runs", "build", "dist"}


def _source_tree(dest: Path) -> Path:
    """The checkout as setuptools sees it, copied (links kept) so that the build writes nothing into it."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder).resolve() == REPO
        return {
            n
            for n in names
            if n in ("__pycache__", ".pytest_cache")
            or n.endswith(".egg-info")
            or (top and (n in LEFT_OUT or n[0] == "."))
        }

    return Path(shutil.copytree(REPO, dest, symlinks=True, ignore=ignore))


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """(memlm's console script, the environment's python, a working directory outside the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = _source_tree(root / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", root],
        check=True,
        capture_output=True,
    )
    (wheel,) = root.glob("memlm-*.whl")
    subprocess.run([sys.executable, "-m", "venv", root / "venv"], check=True)
    python = root / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "-q", wheel], check=True, capture_output=True)
    _sees_this_python(python)
    work = root / "work"
    work.mkdir()
    return root / "venv" / "bin" / "memlm", python, work


def _sees_this_python(python: Path) -> None:
    """A .pth file in the new environment that adds this interpreter's site directories after its own and runs
    their .pth files, so the wheel's memlm in its own comes first, before the checkout's editable install.
    (--system-site-packages would see the base interpreter's packages, not those of a virtual environment
    the tests run in.) Written after the wheel's install, whose pip must not take memlm as installed."""
    where = [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    own = Path(subprocess.run(where, check=True, capture_output=True, text=True).stdout.strip())
    dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    (own / "memlm-tests-env.pth").write_text("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs))


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMLM_REAL_DIR")}


def run(command: list, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def test_the_wheel_imports_memlm_from_itself_and_lists_its_configs(wheel_env):
    memlm, python, work = wheel_env
    where = run([python, "-c", "import memlm, memory_runtime.shipped as s; print(memlm.__file__, s.shipped())"], work)
    package, shipped = where.stdout.split()
    site = str(python.parents[1])
    assert package.startswith(site) and shipped.startswith(site), where.stdout  # not the checkout
    listed = run([memlm, "config", "list"], work)
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert {"train/cpu-smollm2", "data/tiny", "serve/default", "deepspeed/zero2"} <= set(names)
    copied = run([memlm, "config", "copy", "train/cpu-smollm2"], work)
    assert copied.returncode == 0 and (work / "cpu-smollm2.yaml").is_file(), copied.stderr


def test_every_shipped_file_is_found_inside_the_install(wheel_env):
    _, python, work = wheel_env
    check = """
import json
from importlib import resources
from data_gen.data_config import TINY_CONFIG, DataConfig
from data_gen.real import default_real_dir
from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.shipped import config_names, find_config
from training.train_config import DEEPSPEED_PRESETS_DIR, TrainConfig
config = DataConfig.load(find_config("data/default"))
prompts = TrainConfig.load(find_config("train/grpo-smollm2")).grpo.prompts
files = [TINY_CONFIG, default_real_dir() / "knowledgenet_person_org_dev.jsonl", DEEPSPEED_PRESETS_DIR / "zero3.json",
         *(s.path for s in config.real.sources), *(r.path for r in prompts.real), prompts.data_config,
         resources.files("data_gen") / "passages.yaml", resources.files("data_gen") / "companies.txt",
         resources.files("memory_runtime.serving") / "ui" / "templates" / "memory.html"]
MemoryConfig.load(None)  # the shipped relation table
print(json.dumps({"names": config_names(), "files": [str(f) for f in files], "found": [find_config(n) is not None for n in config_names()]}))
"""
    result = run([python, "-c", check], work)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert len(found["names"]) > 15 and all(found["found"])
    site = str(python.parents[1])
    assert all(f.startswith(site) and Path(f).is_file() for f in found["files"]), found["files"]


def test_the_wheel_knows_its_shipped_demo_key(wheel_env):
    """Serving refuses the public demo key beyond loopback: the wheel must find the configs that hold it."""
    _, python, work = wheel_env
    script = "from memory_runtime.serving.keys import shipped_demo_keys; print(sorted(shipped_demo_keys()))"
    result = run([python, "-c", script], work)
    assert result.returncode == 0 and "memlm-demo-key" in result.stdout, result.stdout + result.stderr


def test_generate_runs_a_shipped_config_named_without_a_path(wheel_env):
    memlm, _, work = wheel_env
    result = run([memlm, "generate", "--config", "tiny", "--out", "data"], work)
    assert result.returncode == 0, result.stderr
    assert (work / "data" / "dataset_dict.json").is_file() and (work / "data" / "config.yaml").is_file()


def test_a_missing_shipped_file_is_named_in_one_line(wheel_env, tmp_path):
    """A broken install (a shipped passage file gone) fails with the file's name, never a stack trace."""
    memlm, python, work = wheel_env
    where = run([python, "-c", "from memory_runtime.shipped import shipped; print(shipped('data'))"], work)
    data = Path(where.stdout.strip())
    gone = data / "real_train" / "knowledgenet_person_org_train.jsonl"
    kept = tmp_path / gone.name
    shutil.move(gone, kept)
    try:
        result = run(
            [memlm, "generate", "--config", "data/default", "--out", tmp_path / "out", "splits.train=20"], work
        )
    finally:
        shutil.move(kept, gone)
    assert result.returncode == 2 and str(gone) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # trains, evaluates and serves the embedded model: minutes on 2 cores
def test_train_eval_and_serve_from_the_wheel(wheel_env):
    import httpx

    memlm, _, work = wheel_env
    if not (work / "data" / "dataset_dict.json").is_file():
        assert run([memlm, "generate", "--config", "tiny", "--out", "data"], work).returncode == 0
    trained = run(
        [memlm, "train", "--config", "cpu-smollm2", "--data", "data", "--out", "run", "--max-steps", "1",
         "optim.per_device_train_batch_size=2", "data.eval_split=null", "output.eval_strategy=no"],
        work,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert (work / "run" / "adapter_model.safetensors").is_file()
    evaluated = run(
        [memlm, "eval", "--model", "run", "--out", "eval", "--limit", "1", "parts=[real]", "systems=[memlm]",
         "generation.max_new_tokens=16"],
        work,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    sources = json.loads((work / "eval" / "metrics.json").read_text())["meta"]["sources"]["real"]
    assert str(memlm.parents[1]) in json.dumps(sources)  # the dev passages the wheel ships
    port = _free_port()
    server = subprocess.Popen(
        [str(memlm), "serve", "--model", "run", "--db", "memory.sqlite", "--port", str(port)],
        cwd=work,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600  # loading, and engine auto's one-off measurement, on 2 shared cores
        ready = False
        while not ready and time.monotonic() < deadline and server.poll() is None:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(0.5)
        assert server.poll() is None, server.stderr.read()
        assert ready, "memlm serve from the wheel did not answer /health within 600 s"
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            headers={"Authorization": "Bearer memlm-demo-key"},  # the shipped serve config's demo key
            json={"model": "memlm", "messages": [{"role": "user", "content": "Who is Ann?"}], "max_tokens": 8},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        page = httpx.get(f"http://127.0.0.1:{port}/ui", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
