"""Record -> token ids + labels, masked to the text the model generates, token-exactly.

At inference the model never sees a conversation tokenised in one go.  ``HFBackend.start``
tokenises the prompt (chat template up to and including the assistant header) as one string;
the model then generates its own tokens; when a read query closes the controller appends the
results, which the backend tokenises *on their own*; the model continues from there and ends
its turn with the end-of-turn token.  :func:`tokenize_record` builds exactly that token
stream, chunk by chunk:

    [prompt: template + system + user + assistant header]   one string,    labels -100
    [assistant segment(s)]                                   on its own,    trained
    [memory segment]                                         on its own,    labels -100
    [assistant segment(s)]                                   on its own,    trained
    [end of turn, e.g. "<|im_end|>"]                         on its own,    trained
    [rest of the template, e.g. "\\n" + next user turn ...]  one string,    labels -100

so the boundaries between trained and untrained text are always token boundaries, and every
trained token is one the model has to produce at inference (including the tokens that close a
call, ``}]`` / ``}:``, and the end-of-turn token that hands control back).  Adjacent segments
with the same role and train flag (data_gen's write calls followed by " Noted.") are one run
of generated text at inference and are tokenised together.

The fixed text of the chat template is found once per role sequence by rendering it with
unique sentinels as message contents; contents are then inserted verbatim (a template filter
such as ``| trim`` is not applied to them, which is what the model generates anyway).  The
template must render each content once and in order, and its generation prompt must be a
prefix of the rendered conversation; otherwise a ValueError says so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from memory_runtime.protocol import SYSTEM_PROMPT
from memory_runtime.records import Record, message_groups

IGNORE_INDEX = -100

# Tokens that end an assistant turn in common chat templates (only those in the vocabulary count).
END_OF_TURN_CANDIDATES = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|end_of_text|>",
    "</s>",
    "<|endoftext|>",
)

_SENTINEL = "\u2063MEMLM{}SEG\u2063"  # invisible separator: never in real text, survives `| trim`


class RecordError(ValueError):
    """A record that cannot be tokenised for training (e.g. nothing would be trained)."""


class RecordTooLong(RecordError):
    """A record longer than max_length (and truncation was not asked for)."""


@dataclass(frozen=True)
class Chunk:
    """A piece of the token stream, tokenised on its own."""

    text: str
    train: bool
    kind: str  # prompt | assistant | memory | end | template


@dataclass(frozen=True)
class _Layout:
    """The fixed template text around each message for one sequence of roles."""

    pieces: tuple[str, ...]  # len(messages) + 1: before msg 0, between msgs, after the last
    ends: tuple[tuple[str, str] | None, ...]  # per message: (end of turn, rest) after assistant msgs


_layout_cache: dict[tuple, _Layout] = {}
_layout_lock = threading.Lock()


def end_of_turn_tokens(tokenizer: Any) -> list[str]:
    """Strings that end an assistant turn for this tokenizer: its EOS plus known end tokens in its vocab."""
    vocab = tokenizer.get_vocab()
    out: list[str] = []
    eos = getattr(tokenizer, "eos_token", None)
    for tok in (eos, *END_OF_TURN_CANDIDATES):
        if tok and tok in vocab and tok not in out:
            out.append(tok)
    return out


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    except Exception as err:  # jinja raises TemplateError for unsupported role orders etc.
        roles = [m["role"] for m in messages]
        raise ValueError(f"the chat template cannot render roles {roles}: {err}") from err
    if not isinstance(text, str):
        raise ValueError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, expected str")
    return text


def _layout(tokenizer: Any, roles: tuple[str, ...]) -> _Layout:
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ValueError(
            "the tokenizer has no chat template (load it with memory_runtime.models.loading.load_tokenizer)"
        )
    specials = tuple(sorted((k, str(v)) for k, v in (getattr(tokenizer, "special_tokens_map", {}) or {}).items()))
    key = (template if isinstance(template, str) else repr(template), specials, len(tokenizer), roles)
    with _layout_lock:
        hit = _layout_cache.get(key)
    if hit is not None:
        return hit
    ends_with = tuple(end_of_turn_tokens(tokenizer))  # get_vocab() is slow: only on a cache miss

    sentinels = [_SENTINEL.format(i) for i in range(len(roles))]
    messages = [{"role": r, "content": s} for r, s in zip(roles, sentinels)]
    full = _render(tokenizer, messages, generation_prompt=False)
    pieces: list[str] = []
    starts: list[int] = []
    pos = 0
    for i, s in enumerate(sentinels):
        idx = full.find(s, pos)
        if idx < 0 or full.count(s) != 1:
            raise ValueError(
                f"the chat template does not render the content of message {i} ({roles[i]}) verbatim exactly once; "
                "cannot locate its fixed text"
            )
        pieces.append(full[pos:idx])
        starts.append(idx)
        pos = idx + len(s)
    pieces.append(full[pos:])

    ends: list[tuple[str, str] | None] = []
    for k, role in enumerate(roles):
        if role != "assistant":
            ends.append(None)
            continue
        prompt = _render(tokenizer, messages[:k], generation_prompt=True)
        if prompt != full[: starts[k]]:
            raise ValueError(
                "the chat template's generation prompt is not a prefix of the rendered conversation "
                f"(assistant message {k}): inference would see a different prompt than training; "
                f"prompt ends {prompt[-60:]!r}, conversation has {full[max(0, starts[k] - 60) : starts[k]]!r}"
            )
        after = pieces[k + 1]
        found = [(after.find(t), t) for t in ends_with if t in after]
        if not found:
            raise ValueError(
                f"no end-of-turn token ({', '.join(ends_with) or 'none in the vocabulary'}) after the assistant "
                f"message in the chat template (it renders {after!r}); the model could not learn to stop"
            )
        idx, tok = min(found)
        ends.append((after[: idx + len(tok)], after[idx + len(tok) :]))
    layout = _Layout(tuple(pieces), tuple(ends))
    with _layout_lock:
        _layout_cache[key] = layout
    return layout


def _as_record(record: Record | Mapping[str, Any]) -> Record:
    if isinstance(record, Record):
        return record
    try:
        return Record.model_validate(dict(record))
    except ValidationError as err:
        rid = dict(record).get("id", "?")
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'record'}: {e['msg']}" for e in err.errors())
        raise RecordError(f"record {rid} is not a valid data_gen Record: {problems}") from None


def record_chunks(
    record: Record | Mapping[str, Any], tokenizer: Any, *, system_prompt: str | None = SYSTEM_PROMPT
) -> list[Chunk]:
    """The record as the chunks :func:`tokenize_record` tokenises one by one (see module doc). A record with its
    own system message (a reader's, type "answer") is sent with it instead of `system_prompt`."""
    rec = _as_record(record)
    if rec.system is not None:
        system_prompt = rec.system
    groups = message_groups(rec)  # chat messages: (role, [segments])
    roles = (("system",) if system_prompt is not None else ()) + tuple(r for r, _ in groups)
    layout = _layout(tokenizer, roles)
    offset = 1 if system_prompt is not None else 0

    chunks: list[Chunk] = []
    context = layout.pieces[0]
    if system_prompt is not None:
        context += system_prompt + layout.pieces[1]
    for g, (role, segs) in enumerate(groups):
        k = g + offset
        if role == "user":
            context += "".join(s.text for s in segs) + layout.pieces[k + 1]
            continue
        chunks.append(Chunk(context, False, "prompt"))
        # Consecutive segments with the same role and train flag are one run of text at inference
        # (the controller only inserts text after a read, and does not re-tokenise after a write):
        # they are tokenised together, as the model generates them.
        runs: list[list] = []
        for s in segs:
            if runs and (runs[-1][0].role, runs[-1][0].train) == (s.role, s.train):
                runs[-1].append(s)
            else:
                runs.append([s])
        for run in runs:
            chunks.append(Chunk("".join(s.text for s in run), run[0].train, run[0].role))
        last_assistant = next((s for s in reversed(segs) if s.role == "assistant"), None)
        end, rest = layout.ends[k]  # type: ignore[misc]
        chunks.append(Chunk(end, bool(last_assistant is not None and last_assistant.train), "end"))
        context = rest
    chunks.append(Chunk(context, False, "template"))
    return [c for c in chunks if c.text]


def tokenize_record(
    record: Record | Mapping[str, Any],
    tokenizer: Any,
    *,
    system_prompt: str | None = SYSTEM_PROMPT,
    max_length: int | None = None,
    truncate: bool = False,
    with_spans: bool = False,
) -> dict[str, Any]:
    """Tokenise a data_gen record for training with labels masked to the trained segments.

    Returns ``{"input_ids", "labels", "attention_mask"}`` (lists of ints; labels are -100 on
    untrained tokens) and, with ``with_spans``, ``"spans"``: ``[(start, end, kind, train)]``
    token ranges of each chunk.  ``system_prompt`` (default: the protocol's SYSTEM_PROMPT, the
    one the controller serves with) is sent as the system message; None sends none.

    Longer than ``max_length``: :class:`RecordError`, or with ``truncate`` the start is kept.
    A record with no trained token left raises :class:`RecordError`.
    """
    rec = _as_record(record)
    chunks = record_chunks(rec, tokenizer, system_prompt=system_prompt)
    encoded = tokenizer([c.text for c in chunks], add_special_tokens=False)["input_ids"]
    input_ids: list[int] = []
    labels: list[int] = []
    spans: list[tuple[int, int, str, bool]] = []
    for chunk, ids in zip(chunks, encoded):
        start = len(input_ids)
        input_ids.extend(ids)
        labels.extend(ids if chunk.train else [IGNORE_INDEX] * len(ids))
        spans.append((start, len(input_ids), chunk.kind, chunk.train))
    if max_length is not None and len(input_ids) > max_length:
        if not truncate:
            raise RecordTooLong(f"record {rec.id}: {len(input_ids)} tokens, more than max_length={max_length}")
        input_ids, labels = input_ids[:max_length], labels[:max_length]
        spans = [(s, min(e, max_length), k, t) for s, e, k, t in spans if s < max_length]
    if all(label == IGNORE_INDEX for label in labels):
        raise RecordError(
            f"record {rec.id}: no trained token (every segment is train: false"
            + (f", or truncation to {max_length} tokens cut them off" if max_length is not None else "")
            + "); such a record teaches nothing and would give a 0/0 loss"
        )
    out: dict[str, Any] = {"input_ids": input_ids, "labels": labels, "attention_mask": [1] * len(input_ids)}
    if with_spans:
        out["spans"] = spans
    return out


def trained_text(
    record: Record | Mapping[str, Any], tokenizer: Any, *, system_prompt: str | None = SYSTEM_PROMPT
) -> str:
    """The text the labels should decode to: trained segments and trained end-of-turn tokens, in order."""
    return "".join(c.text for c in record_chunks(record, tokenizer, system_prompt=system_prompt) if c.train)


def format_token_table(
    tokenized: Mapping[str, Any], tokenizer: Any, *, max_tokens: int | None = None
) -> list[tuple[int, str, int, bool]]:
    """(token id, token text, label, trained) rows for display (``memlm inspect``)."""
    rows = []
    for i, (tid, lab) in enumerate(zip(tokenized["input_ids"], tokenized["labels"])):
        if max_tokens is not None and i >= max_tokens:
            break
        text = tokenizer.decode([tid], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        rows.append((tid, text, lab, lab != IGNORE_INDEX))
    return rows
