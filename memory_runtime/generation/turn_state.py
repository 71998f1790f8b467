"""One assistant turn being decoded, apart from the model that decodes it: its tokens, its exact text, the
choice of each next token from the model's logits, the field-copy constraint, taking tokens back, resuming
from rewritten text. HFBackend (hf_backend.py) runs it one turn at a time with its own KV cache,
memory_runtime.generation.batching many at once through one padded cache, vLLM (vllm_decoder.py) with its own
sampler; so every engine decodes a turn the same way.

The assistant text is exact even where the controller inserted text whose tokenization would not decode
back identically: ``segments`` records ``(token index, text)`` anchors and the text after an anchor is
decoded from the tokens after it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from memory_runtime.generation.field_copy import (
    allowed,
    answer_names_copied,
    answer_word_in_progress,
    name_head_dropped,
    open_call,
)

_REPLACEMENT = "\ufffd"  # what decode() shows for an incomplete UTF-8 sequence
_DECODE_CONTEXT = 3  # tokens decoded before an anchor so leading-space rules apply
_COPY_TOP_K = 16  # candidates checked by the field copy constraint at each step
_MAX_BACKTRACKS = 16  # per turn: call-field tokens taken back after a dead end


class Step(NamedTuple):
    """What one next-token choice did to a turn."""

    piece: str  # text to show now (held back inside an open call or an incomplete character)
    done: bool  # the model ended its turn
    backtracked: bool  # a call-field token was taken back instead: the cache must drop it


class TurnState:
    """One assistant turn being decoded: prompt and generated token ids, the turn's exact text, and
    the choice of each next token (greedy or sampled; with ``copy_fields`` the subject and object of
    a memory call are held to word-aligned copies of the conversation, its relation to ``relations``;
    memory_runtime.generation.field_copy). It never runs the model: a backend feeds it logits."""

    def __init__(
        self,
        tokenizer: Any,
        end_token_ids: frozenset[int],
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        copy_fields: bool = True,
        relations: frozenset[str] | None = None,
        common_objects: frozenset[str] = frozenset(),
    ) -> None:
        self.tokenizer = tokenizer
        self.end_token_ids = end_token_ids
        self.temperature = temperature
        self.top_p = top_p
        self.generator = generator
        self.copy_fields = copy_fields
        self.relations = relations
        self.common_objects = common_objects  # relations whose objects may be in small letters (field_copy)
        self.context = ""
        self.started = False
        self.reset([])

    def reset(self, prompt_ids: list[int], context: str = "") -> None:
        """A new turn after these prompt tokens; `context` is the messages' text (what names are copied from)."""
        self.prompt_ids = list(prompt_ids)
        self.ids: list[int] = []
        self.segments: list[tuple[int, str]] = [(0, "")]
        self.finish_reason: str | None = None
        self.banned: dict[int, set[int]] = {}  # assistant position -> tokens backtracked from there
        self.shown = ""  # the text handed out so far
        self.context = context
        self.stats: dict[str, Any] = {
            "prompt_tokens": len(prompt_ids),
            "generated_tokens": 0,
            "forward_seconds": 0.0,
            "forwards": 0,
            "inserted_tokens": 0,
            "resumes": 0,
            "backtracks": 0,
        }

    def start(self, messages: list[dict[str, str]], system_prompt: str | None = None) -> None:
        """Begin a turn after these chat messages, rendered with the tokenizer's chat template
        (add_generation_prompt=True); `system_prompt` goes first unless the messages start with one."""
        messages = [dict(m) for m in messages]
        for m in messages:
            if "role" not in m or "content" not in m:
                raise ValueError(f"chat messages need 'role' and 'content', got {m!r}")
        if system_prompt is not None and (not messages or messages[0]["role"] != "system"):
            messages.insert(0, {"role": "system", "content": system_prompt})
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat template (load it with memory_runtime.models.loading.load_tokenizer)"
            )
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        # the template already contains BOS/role tokens as text
        ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if not ids:
            raise ValueError("the chat template rendered an empty prompt")
        self.reset(ids, "\n".join(str(m["content"]) for m in messages))
        self.started = True

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.ids

    # ------------------------------------------------------------------ choosing tokens

    def step(self, logits: torch.Tensor) -> Step:
        """Choose the next token from the model's `logits` for it, and append it (or end the turn,
        or take back a call-field token that led to a dead end)."""
        if self.copy_fields:
            logits, dead_end = self._copied_fields_only(logits, self.text().rstrip(_REPLACEMENT))
            if dead_end and self._backtrack():
                return Step("", False, True)
        token = self._choose(logits)
        if token in self.end_token_ids:
            self.finish_reason = "stop"
            rest = self.text()  # flush a trailing incomplete sequence: it can no longer complete
            piece = rest[len(self.shown) :] if len(rest) > len(self.shown) else ""
            self.shown = rest
            return Step(piece, True, False)
        self.ids.append(token)
        self.stats["generated_tokens"] += 1
        text = self.text()
        if text.endswith(_REPLACEMENT) or (self.copy_fields and open_call(text) is not None):
            return Step("", False, False)  # held back: an incomplete character, or a call field that may be backtracked
        piece = text[len(self.shown) :] if text.startswith(self.shown) else text[_common_prefix(text, self.shown) :]
        self.shown = text
        return Step(piece, False, False)

    def stop_for_length(self) -> str:
        """End the turn at its token budget; returns the text held back until now."""
        self.finish_reason = "length"
        text = self.assistant_text
        piece = text[len(self.shown) :] if len(text) > len(self.shown) and text.startswith(self.shown) else ""
        self.shown = text
        return piece

    def resume(self, assistant_text: str) -> int:
        """Set the turn's text so far to `assistant_text` (a prefix of what was generated plus
        inserted text). The longest token prefix whose text is a prefix of it is kept; only the rest
        is tokenized. Returns how many tokens of prompt + turn are unchanged (a cache keeps those)."""
        text = str(assistant_text)
        keep = len(self.ids)
        kept_text = ""
        while keep > 0:
            candidate = self.text_of(keep)
            if text.startswith(candidate) and (not candidate.endswith(_REPLACEMENT) or len(candidate) == len(text)):
                kept_text = candidate
                break
            keep -= 1
        rest = text[len(kept_text) :]
        rest_ids = list(self.tokenizer(rest, add_special_tokens=False)["input_ids"]) if rest else []
        self.ids = self.ids[:keep] + rest_ids
        self.segments = [s for s in self.segments if s[0] <= keep]
        if rest:
            self.segments.append((len(self.ids), text))
        self.finish_reason = None
        self.banned = {}
        self.shown = self.assistant_text
        self.stats["resumes"] += 1
        self.stats["inserted_tokens"] += len(rest_ids)
        return len(self.prompt_ids) + keep

    # ------------------------------------------------------------------ the text

    @property
    def assistant_text(self) -> str:
        """The turn's text so far (an incomplete trailing UTF-8 sequence is left out until it
        completes or the turn ends)."""
        if not self.started:
            return ""
        text = self.text()
        if self.finish_reason != "stop":
            text = text.rstrip(_REPLACEMENT)
        return text

    def text(self) -> str:
        return self.text_of(len(self.ids))

    def text_of(self, n: int) -> str:
        """Text of the first ``n`` assistant tokens, anchored at the last segment <= n."""
        k, prefix = 0, ""
        for start, text in self.segments:
            if start <= n:
                k, prefix = start, text
        if n == k:
            return prefix
        if k == 0:
            return prefix + self._decode(self.ids[:n])
        c = max(0, k - _DECODE_CONTEXT)
        head = self._decode(self.ids[c:k])
        whole = self._decode(self.ids[c:n])
        if whole.startswith(head) and not head.endswith(_REPLACEMENT):
            return prefix + whole[len(head) :]
        return prefix + self._decode(self.ids[k:n])

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    # ------------------------------------------------------------------ internals

    def _choose(self, logits: torch.Tensor) -> int:
        if self.temperature == 0:
            return int(torch.argmax(logits))
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            TemperatureLogitsWarper,
            TopPLogitsWarper,
        )

        warpers = LogitsProcessorList([TemperatureLogitsWarper(self.temperature)])
        if self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(self.top_p))
        ids = torch.tensor([self.all_ids], dtype=torch.long)
        scores = warpers(ids, logits.detach().to("cpu", torch.float32)[None, :])
        probs = torch.softmax(scores, dim=-1)
        return int(torch.multinomial(probs, num_samples=1, generator=self.generator)[0, 0])

    def _copied_fields_only(self, logits: torch.Tensor, text: str) -> tuple[torch.Tensor, bool]:
        """Inside a call's subject or object, keep only top candidates that copy from the
        conversation (see memory_runtime.generation.field_copy). Returns the logits (unchanged when the
        best candidate qualifies) and whether none of them does: a dead end. `text` is the
        assistant text so far."""
        banned = self.banned.get(len(self.ids), set())
        top = torch.topk(logits, min(_COPY_TOP_K, logits.shape[-1])).indices.tolist()
        in_call = open_call(text) is not None
        if not in_call and text[-1:] and not text[-1].isspace() and "}:" in text:  # after a read: answer copies
            logits, restored = self._name_heads_restored(logits, text, top)
            if restored:
                top = torch.topk(logits, min(_COPY_TOP_K, logits.shape[-1])).indices.tolist()
        naming = not in_call and bool(answer_word_in_progress(text))  # an answer copying a returned name
        ok = []
        for token in top:
            if token in banned:
                continue
            if token in self.end_token_ids or self._copies(text, token, in_call, naming):
                if token == top[0] and self.temperature == 0:
                    return logits, False  # the model's own choice stands
                ok.append(token)
        if not ok:
            return logits, True
        if ok == top:
            return logits, False
        masked = torch.full_like(logits, float("-inf"))
        masked[ok] = logits[ok]
        return masked, False

    def _name_heads_restored(self, logits: torch.Tensor, text: str, top: list[int]) -> tuple[torch.Tensor, bool]:
        """A candidate that leaves out a returned name's head ("Yes," + "ector" for "Hector", " nuts" for
        "peanuts": field_copy.name_head_dropped) is taken out and its probability given to the token that
        starts the name spelt whole (" H" of " H"+"ector", " peanuts"): the model meant the name, so the name is
        what it writes."""
        restored = False
        for token in top:
            piece = self.tokenizer.decode([token])
            head = name_head_dropped(text, piece)
            if head is None:
                continue
            if not restored:
                logits, restored = logits.clone(), True
            spaced = (" " if text[-1] in ",.;:!?" else "") + head + piece.lstrip()
            ids = self.tokenizer(spaced, add_special_tokens=False)["input_ids"]
            if ids:
                logits[ids[0]] = torch.logaddexp(logits[ids[0]], logits[token])
            logits[token] = float("-inf")
        return logits, restored

    def _copies(self, text: str, token: int, in_call: bool, naming: bool) -> bool:
        if not in_call and not naming:  # free text: only a token with "{" (or a raw byte) can start a field
            piece = str(self.tokenizer.convert_ids_to_tokens(token))
            if "{" not in piece and not piece.startswith("<0x"):
                return True
        self.ids.append(token)
        new = self.text().rstrip(_REPLACEMENT)
        self.ids.pop()
        if not new.startswith(text):
            return True
        piece = new[len(text) :]
        return allowed(self.context, text, piece, self.relations, self.common_objects) and (
            not naming or answer_names_copied(text, piece)
        )

    def _backtrack(self) -> bool:
        """Take back the last generated token of a call field that led to a dead end ("Bre" +
        "t" when the text says "Brett"), so that its runner-up is tried; False when it was
        already shown, inserted by resume(), or the turn's budget of retries is spent."""
        n = len(self.ids)
        if n == 0 or n <= self.segments[-1][0] or self.stats["backtracks"] >= _MAX_BACKTRACKS:
            return False
        before = self.text_of(n - 1)
        if len(before) < len(self.shown) or not before.startswith(self.shown) or open_call(before) is None:
            return False
        self.banned = {k: v for k, v in self.banned.items() if k < n}  # retries past here start over
        self.banned.setdefault(n - 1, set()).add(self.ids.pop())
        self.stats["generated_tokens"] -= 1
        self.stats["backtracks"] += 1
        return True


def prompt_state(tokenizer: Any, end_token_ids: frozenset[int], messages: list[dict[str, str]]) -> TurnState:
    """A turn started from `messages`: their prompt's token ids and text, no constraint on fields (an engine
    that chooses the tokens elsewhere, or counts a prompt)."""
    decoder = TurnState(tokenizer, end_token_ids, copy_fields=False)
    decoder.start(messages)
    return decoder


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        return [int(v) for v in value if v is not None]
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.flatten().tolist()]
    return [int(value)]


def end_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """Token ids that end an assistant turn: tokenizer EOS, generation_config EOS, ChatML <|im_end|>."""
    ids = set(_as_id_list(getattr(tokenizer, "eos_token_id", None)))
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None:
        ids.update(_as_id_list(getattr(generation_config, "eos_token_id", None)))
    template = getattr(tokenizer, "chat_template", None) or ""
    if "<|im_end|>" in str(template):
        tid = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
            ids.add(tid)
    return frozenset(ids)
