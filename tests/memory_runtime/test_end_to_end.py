"""The memory controller driving a real transformers model through HFBackend (the one-at-a-time engine),
with a real SQLite file.

A tiny Llama (real SmolLM2 tokenizer) is first overfit on one transcript so that it really
generates a MEM_WRITE, then a MEM_READ, then an answer after the results the controller
inserts: the calls come out of the model's own greedy decoding, not from a script.
"""

import copy

import pytest
import torch

from memory_runtime.generation.hf_backend import HFBackend
from memory_runtime.memory.store import TripletStore
from memory_runtime.protocol import SYSTEM_PROMPT, render_read, render_results, render_write, strip_calls
from tests.memory_runtime.generation.test_controller import one_turn

USER = "Dorothea Altemus works for Pfizer. Who works for Pfizer?"
WRITE = render_write("Dorothea Altemus", "employed by", "Pfizer")
READ = " " + render_read(None, "employed by", "Pfizer")
ANSWER = " Dorothea Altemus works for Pfizer."


def _overfit(model, tokenizer, segments, steps=120):
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": USER}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    for text in segments:  # segment by segment, as the controller will append them
        ids += tokenizer(text, add_special_tokens=False)["input_ids"]
    ids.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    batch = torch.tensor([ids])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()


@pytest.fixture(scope="module")
def trained(tiny_model, smollm2_tokenizer):
    model = copy.deepcopy(tiny_model)
    results = render_results([("Dorothea Altemus", "employed by", "Pfizer")])
    torch.manual_seed(0)
    loss = _overfit(model, smollm2_tokenizer, [WRITE + READ, results, ANSWER])
    assert loss < 0.05
    return model


def test_model_writes_reads_and_answers_from_sqlite(trained, smollm2_tokenizer, tmp_path):
    db = tmp_path / "memory.sqlite"
    with TripletStore(db) as store:
        turn = one_turn(HFBackend(trained, smollm2_tokenizer), store, USER, namespace="alice", max_new_tokens=80)
    assert [c.kind for c in turn.calls] == ["write", "read"]
    assert turn.calls[0].status == "stored"
    assert turn.calls[1].results == [("Dorothea Altemus", "employed by", "Pfizer")]
    assert turn.text.startswith(WRITE + READ + " {Dorothea Altemus>>employed by>>Pfizer}]")
    assert turn.reply == ANSWER.strip()
    assert turn.status == "ok"
    assert 0 < turn.model_seconds < turn.wall_seconds
    with TripletStore(db) as reopened:  # the write reached the file
        assert [f.triplet for f in reopened.facts("alice")] == [("Dorothea Altemus", "employed by", "Pfizer")]


def test_results_come_from_the_store_not_from_the_model(trained, smollm2_tokenizer):
    """With another fact already stored, the inserted results list both: the controller, not the
    model, decides what the read returns."""
    with TripletStore() as store:
        store.write("Tia Batres", "employed by", "Pfizer")
        turn = one_turn(HFBackend(trained, smollm2_tokenizer), store, USER, max_new_tokens=80)
    assert sorted(t.subject for t in turn.calls[1].results) == ["Dorothea Altemus", "Tia Batres"]
    assert "{Tia Batres>>employed by>>Pfizer}" in turn.text


def test_real_embedded_model_runs_a_turn_against_a_sqlite_memory(tmp_path):
    """The untrained embedded SmolLM2 through the real controller: whatever it emits, every
    executed write is in the database file and no API text reaches the user."""
    from memory_runtime.models.embedded import EMBEDDED_MODEL
    from memory_runtime.models.loading import load_model

    model, tokenizer = load_model(EMBEDDED_MODEL)
    db = tmp_path / "memory.sqlite"
    with TripletStore(db) as store:
        store.write("Dorothea Altemus", "employed by", "Pfizer", namespace="u")
        user = "Who works for Pfizer? Use [MEM_READ{>>employed by>>Pfizer}: to check."
        turn = one_turn(HFBackend(model, tokenizer), store, user, namespace="u", max_new_tokens=48)
        stored = {c.fields for c in turn.calls if c.kind == "write" and c.status == "stored"}
        assert stored <= {f.triplet for f in store.facts("u")}
    assert turn.status in ("ok", "max_tokens") and turn.generated_tokens <= 48
    assert "[MEM_" not in turn.reply and turn.reply == strip_calls(turn.text)
    assert turn.model_seconds > 0
