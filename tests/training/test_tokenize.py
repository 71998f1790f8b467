"""tokenize_record: labels cover exactly the trained segments and end-of-turn tokens, token-exactly."""

from __future__ import annotations

import pytest

from memory_runtime.models.embedded import EMBEDDED_MODEL
from memory_runtime.models.loading import load_tokenizer
from memory_runtime.protocol import SYSTEM_PROMPT, render_read, render_write
from memory_runtime.records import Record, Segment
from training import tokenize_record
from training.tokenize import IGNORE_INDEX, RecordError, RecordTooLong, record_chunks

LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
GEMMA_TEMPLATE = (  # no system role; assistant is "model"; end of turn is not the EOS token
    "{{ bos_token }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}{{ raise_exception('System role not supported') }}{%- endif %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] + '<end_of_turn>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def llama3_tokenizer():
    tok = load_tokenizer(EMBEDDED_MODEL)  # a fresh copy: the session fixture must not be mutated
    tok.add_special_tokens(
        {"additional_special_tokens": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]}
    )
    tok.bos_token, tok.eos_token, tok.pad_token = "<|begin_of_text|>", "<|eot_id|>", "<|eot_id|>"
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def gemma_tokenizer():
    tok = load_tokenizer(EMBEDDED_MODEL)
    tok.add_special_tokens({"additional_special_tokens": ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"]})
    tok.bos_token, tok.eos_token = "<bos>", "<eos>"
    tok.chat_template = GEMMA_TEMPLATE
    return tok


def _labelled(enc):
    return [t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab != IGNORE_INDEX]


def _decode(tok, ids):
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _expected_trained(record: Record, eot: str) -> str:
    """Trained segments in order, with the end-of-turn token after each trained assistant turn."""
    out, segs = "", record.segments
    for i, seg in enumerate(segs):
        if seg.train:
            out += seg.text
        turn_ends = seg.role != "user" and (i + 1 == len(segs) or segs[i + 1].role == "user")
        if turn_ends:
            last_assistant = next(s for s in reversed(segs[: i + 1]) if s.role == "assistant")
            if last_assistant.train:
                out += eot
    return out


@pytest.mark.parametrize(
    ("which", "eot", "system"),
    [
        ("smollm2_tokenizer", "<|im_end|>", SYSTEM_PROMPT),
        ("llama3_tokenizer", "<|eot_id|>", SYSTEM_PROMPT),
        ("gemma_tokenizer", "<end_of_turn>", None),
        ("gemma3_tokenizer", "<end_of_turn>", SYSTEM_PROMPT),  # the real one: the system prompt joins the user turn
    ],
)
def test_labels_decode_to_exactly_the_trained_segments(which, eot, system, records, request):
    tok = request.getfixturevalue(which)  # only the tokenizers this case needs (gemma3's may skip)
    for record in records:
        enc = tokenize_record(record, tok, system_prompt=system)
        assert len(enc["input_ids"]) == len(enc["labels"]) == len(enc["attention_mask"])
        assert _decode(tok, _labelled(enc)) == _expected_trained(record, eot), record.id
        # labels are the ids themselves where trained
        assert all(lab in (IGNORE_INDEX, tid) for tid, lab in zip(enc["input_ids"], enc["labels"]))


@pytest.mark.parametrize("which", ["smollm2_tokenizer", "gemma3_tokenizer"])
def test_every_chunk_is_tokenised_on_its_own(which, records, request):
    tok = request.getfixturevalue(which)
    for record in records:
        enc = tokenize_record(record, tok, with_spans=True)
        chunks = record_chunks(record, tok)
        assert len(chunks) == len(enc["spans"])
        for chunk, (start, end, kind, train) in zip(chunks, enc["spans"]):
            ids = tok(chunk.text, add_special_tokens=False)["input_ids"]
            assert enc["input_ids"][start:end] == ids, (record.id, kind)
            expected = ids if train else [IGNORE_INDEX] * len(ids)
            assert enc["labels"][start:end] == expected
        # the whole sequence is the chat template's rendering of the conversation
        messages = [{"role": "system", "content": SYSTEM_PROMPT}] + [
            {"role": m_role, "content": m_text} for m_role, m_text in _messages(record)
        ]
        assert _decode(tok, enc["input_ids"]) == tok.apply_chat_template(messages, tokenize=False)


def _messages(record):
    from memory_runtime.records import messages

    return [(m["role"], m["content"]) for m in messages(record)]


@pytest.mark.parametrize("which", ["smollm2_tokenizer", "gemma3_tokenizer"])
def test_prompt_tokens_are_what_the_backend_sends(which, records, request):
    """Up to the first assistant token, training sees exactly HFBackend.start's prompt ids."""
    tok = request.getfixturevalue(which)
    record = records[1]
    enc = tokenize_record(record, tok, with_spans=True)
    start, end, kind, train = enc["spans"][0]
    assert (kind, train) == ("prompt", False)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": record.segments[0].text}]
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert enc["input_ids"][start:end] == tok(prompt, add_special_tokens=False)["input_ids"]


def test_end_of_turn_trained_and_newline_after_it_not(records, smollm2_tokenizer):
    tok = smollm2_tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    enc = tokenize_record(records[0], tok)
    ids, labels = enc["input_ids"], enc["labels"]
    last_end = max(i for i, t in enumerate(ids) if t == im_end)
    assert labels[last_end] == im_end  # the model learns to stop
    assert labels[last_end + 1 :] == [IGNORE_INDEX] * (len(ids) - last_end - 1)  # the "\n" after it is not trained
    # the tokens that close the calls are trained: "}]" for the write
    assert tok.convert_tokens_to_ids("}]") in _labelled(enc)


def test_boundary_where_joint_tokenisation_would_merge(records, smollm2_tokenizer):
    """'}]' (inserted results) + '.' (model text) tokenise as '}', '].' together; training keeps them apart."""
    tok = smollm2_tokenizer
    record = next(r for r in records if r.id == "merge")
    enc = tokenize_record(record, tok)
    close, dot = tok.convert_tokens_to_ids("}]"), tok.convert_tokens_to_ids(".")
    i = next(i for i in range(len(enc["input_ids"]) - 1) if enc["input_ids"][i : i + 2] == [close, dot])
    assert enc["labels"][i] == IGNORE_INDEX and enc["labels"][i + 1] == dot
    joint = tok(record.segments[2].text + record.segments[3].text, add_special_tokens=False)["input_ids"]
    separate = (
        tok(record.segments[2].text, add_special_tokens=False)["input_ids"]
        + tok(record.segments[3].text, add_special_tokens=False)["input_ids"]
    )
    assert joint != separate  # the case is real


def test_untrained_first_turn_is_context_only(records, smollm2_tokenizer):
    tok = smollm2_tokenizer
    record = next(r for r in records if r.id == "two-turns")
    enc = tokenize_record(record, tok)
    assert (
        _decode(tok, _labelled(enc)) == render_write("Ansel Quigg", "employed by", "Tessellate") + " Fixed.<|im_end|>"
    )


def test_no_system_prompt(records, smollm2_tokenizer):
    enc = tokenize_record(records[0], smollm2_tokenizer, system_prompt=None)
    text = _decode(smollm2_tokenizer, enc["input_ids"])
    assert SYSTEM_PROMPT not in text and text.startswith(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM"
    )


def test_a_record_with_its_own_system_message_is_sent_with_it(smollm2_tokenizer):
    """A reader's record (type answer) carries its prompt and context as the system message: it is tokenised
    as the chat eval's reader asks (system, question, answer), the answer alone trained."""
    system = "Answer from these facts.\n\n(8 May 2023) Caroline adopted dog named Oscar"
    record = Record(
        id="reader",
        type="answer",
        system=system,
        segments=[
            Segment(role="user", text="What did Caroline adopt?", train=False),
            Segment(role="assistant", text="dog named Oscar", train=True),
        ],
    )
    enc = tokenize_record(record, smollm2_tokenizer)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "What did Caroline adopt?"}]
    prompt = smollm2_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert _decode(smollm2_tokenizer, enc["input_ids"]).startswith(prompt) and SYSTEM_PROMPT not in prompt
    assert _decode(smollm2_tokenizer, _labelled(enc)) == "dog named Oscar<|im_end|>"


def test_record_without_trained_token_is_rejected(smollm2_tokenizer):
    untrained = Record.model_construct(
        id="nothing",
        type="write",
        segments=[Segment(role="user", text="Hi", train=False), Segment(role="assistant", text="Hello", train=False)],
    )
    with pytest.raises(RecordError, match="record nothing: no trained token"):
        tokenize_record(untrained, smollm2_tokenizer)
    as_dict = {
        "id": "nothing",
        "type": "write",
        "segments": [
            {"role": "user", "text": "Hi", "train": False},
            {"role": "assistant", "text": "Hello", "train": False},
        ],
    }
    with pytest.raises(RecordError, match="record nothing.*no segment is trained"):
        tokenize_record(as_dict, smollm2_tokenizer)


def test_dict_records_and_length_limits(records, smollm2_tokenizer):
    tok = smollm2_tokenizer
    record = records[1]
    assert tokenize_record(record.model_dump(), tok) == tokenize_record(record, tok)
    n = len(tokenize_record(record, tok)["input_ids"])
    with pytest.raises(RecordTooLong, match=f"{n} tokens, more than max_length=10"):
        tokenize_record(record, tok, max_length=10)
    with pytest.raises(RecordError, match="no trained token"):  # truncation keeps only the prompt
        tokenize_record(record, tok, max_length=20, truncate=True)
    cut = tokenize_record(record, tok, max_length=n - 3, truncate=True)
    assert len(cut["input_ids"]) == n - 3


def test_template_without_end_of_turn_is_an_error(smollm2_tokenizer):
    tok = load_tokenizer(EMBEDDED_MODEL)
    tok.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
    rec = Record(
        id="x",
        type="write",
        segments=[
            Segment(role="user", text="Hi", train=False),
            Segment(role="assistant", text=render_write("a", "b", "c"), train=True),
        ],
    )
    with pytest.raises(ValueError, match="no end-of-turn token"):
        tokenize_record(rec, tok)


def test_read_query_closes_a_trained_span(smollm2_tokenizer):
    """The read query's '}:' is the last trained token before the controller's results."""
    tok = smollm2_tokenizer
    rec = Record(
        id="q",
        type="read",
        segments=[
            Segment(role="user", text="Where does Tia work?", train=False),
            Segment(role="assistant", text=render_read("Tia", "employed by", None), train=True),
            Segment(role="memory", text=" NONE]", train=False),
            Segment(role="assistant", text=" I don't know.", train=True),
        ],
    )
    enc = tokenize_record(rec, tok, with_spans=True)
    (s, e, kind, train) = enc["spans"][1]
    assert kind == "assistant" and train and _decode(tok, enc["input_ids"][e - 1 : e]) == "}:"
    assert enc["labels"][e] == IGNORE_INDEX


def test_adjacent_trained_segments_are_one_run(smollm2_tokenizer):
    """data_gen writes calls and ' Noted.' as two assistant segments: one run of generated text."""
    tok = smollm2_tokenizer
    calls = render_write("Tia Batres", "employed by", "Pfizer")
    rec = Record(
        id="w",
        type="write",
        segments=[
            Segment(role="user", text="Tia Batres works for Pfizer.", train=False),
            Segment(role="assistant", text=calls, train=True),
            Segment(role="assistant", text=" Noted.", train=True),
        ],
    )
    enc = tokenize_record(rec, tok, with_spans=True)
    kinds = [k for _, _, k, _ in enc["spans"]]
    assert kinds == ["prompt", "assistant", "end", "template"]
    s, e, _, _ = enc["spans"][1]
    assert enc["input_ids"][s:e] == tok(calls + " Noted.", add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------ the real Gemma 3 tokenizer (embedded:gemma-3-270m)


def test_gemma3_trains_the_model_turn_and_its_end_only(records, gemma3_tokenizer):
    """Gemma turns: BOS, <start_of_turn> headers, the system prompt folded into the user turn and
    the controller's results are context; the calls, the answer and <end_of_turn> are trained."""
    tok = gemma3_tokenizer
    record = records[1]  # a read that finds its fact: call, results, answer
    enc = tokenize_record(record, tok, with_spans=True)
    ids, labels = enc["input_ids"], enc["labels"]
    prompt_end = enc["spans"][0][1]
    assert _decode(tok, ids[:prompt_end]) == (
        f"<bos><start_of_turn>user\n{SYSTEM_PROMPT}\n\n{record.segments[0].text}<end_of_turn>\n<start_of_turn>model\n"
    )
    assert labels[:prompt_end] == [IGNORE_INDEX] * prompt_end
    for start, end, kind, train in enc["spans"]:
        assert train == (kind in ("assistant", "end")), kind
        if kind == "memory":
            assert labels[start:end] == [IGNORE_INDEX] * (end - start)
            assert _decode(tok, ids[start:end]) == record.segments[2].text
    end_of_turn = tok.convert_tokens_to_ids("<end_of_turn>")
    assert ids[-2:] == [end_of_turn, tok.convert_tokens_to_ids("\n")]
    assert labels[-2:] == [end_of_turn, IGNORE_INDEX]  # the model learns to stop; the newline after is template
    assert _decode(tok, _labelled(enc)) == record.segments[1].text + record.segments[3].text + "<end_of_turn>"


def test_gemma3_given_first_turn_is_context_only(records, gemma3_tokenizer):
    tok = gemma3_tokenizer
    record = next(r for r in records if r.id == "two-turns")
    enc = tokenize_record(record, tok)
    text = _decode(tok, enc["input_ids"])
    assert text.count("<start_of_turn>model\n") == 2 and text.count("<end_of_turn>") == 4
    assert (
        _decode(tok, _labelled(enc))
        == render_write("Ansel Quigg", "employed by", "Tessellate") + " Fixed.<end_of_turn>"
    )


def test_gemma3_call_delimiters_end_trained_spans(gemma3_tokenizer):
    """'}:' closes the trained read query (the controller takes over), as with SmolLM2."""
    tok = gemma3_tokenizer
    rec = Record(
        id="q",
        type="read",
        segments=[
            Segment(role="user", text="Where does Tia work?", train=False),
            Segment(role="assistant", text=render_read("Tia", "employed by", None), train=True),
            Segment(role="memory", text=" NONE]", train=False),
            Segment(role="assistant", text=" I don't know.", train=True),
        ],
    )
    enc = tokenize_record(rec, tok, with_spans=True)
    (s, e, kind, train) = enc["spans"][1]
    assert kind == "assistant" and train and _decode(tok, enc["input_ids"][e - 1 : e]) == "}:"
    assert enc["labels"][e] == IGNORE_INDEX
