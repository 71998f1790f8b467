"""The reader of `memlm eval` part locomo: greedy answers from one causal LM to LoCoMo's questions over a
context, with its refusals ('Not mentioned.') as locomo.reader_refusal allows them. Where it refuses, the answer
it would give otherwise is kept beside the refusal, so that one greedy run gives the rows of a reader that may
not refuse (`answered_as`, scripts/locomo_paired.py's `~never`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.locomo import refuses
from memory_runtime.memory.conversation import reader_system

REFUSAL_TRIES = 4  # first tokens tried, likeliest first, for an answer that does not refuse
QUESTION_MARK = "\u2063question\u2063"  # stands for the question where a template is split at its text


@dataclass
class ReaderAnswer:
    """A reader's answer; the probability of the first tokens whose greedy answers refuse (the likeliest
    first, tried until one answers: 0 when the greedy answer does not refuse); and, where it refused, what it
    says instead, from the first token that does not lead to a refusal (None: none of `REFUSAL_TRIES` did)."""

    text: str
    refusal_p: float | None  # None: answered without the reader (other_speaker_margin)
    unrefused: str | None = None


def reader_refuses(policy: str, greedy_refuses: bool, refusal_p: float) -> bool:
    """locomo.reader_refusal: may the reader answer 'Not mentioned.' here (its greedy answer refuses)?"""
    return greedy_refuses and (policy == "greedy" or (policy == "likely" and refusal_p > 0.5))


def answered_as(row: dict, policy: str) -> dict:
    """A row of a run whose reader refused as its greedy answer (reader_refusal: greedy), as it would read had
    the reader answered under `policy`: its refusal replaced by its `unrefused` answer where `policy` does
    not allow it (decoding is greedy, so this is the answer such a run gives)."""
    if row.get("unrefused") is None or reader_refuses(policy, True, row["refusal_p"]):
        return row
    return {**row, "prediction": row["unrefused"], "f1": row["unrefused_f1"], "unrefused": None}


@dataclass
class Answerer:
    """Greedy answers from one causal LM (its hf model and tokenizer) to a chat of a system prompt holding the
    context and a user question; a context shared by many questions is prefilled once (`prefill`). A refusal
    ('Not mentioned.') is the answer where `refusal` (locomo.reader_refusal) allows it; where the reader
    refuses, the answer it would give otherwise is kept beside it."""

    model: Any
    tokenizer: Any
    max_new_tokens: int = 32
    refusal: str = "greedy"

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_parts(self, context: str, question: str) -> tuple[list[int], list[int]]:
        """The chat's token ids split where the question's part begins, so that the second part does not depend
        on the context: after the system message where it ends in a special token (ChatML), else, for a
        template that folds the system prompt into the user's turn (Gemma), just before the question's text."""
        system = [{"role": "system", "content": reader_system(context)}]

        def chat(content: str) -> str:
            return self.tokenizer.apply_chat_template(
                [*system, {"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
            )

        def splits(head: str) -> bool:  # the head holds the context and the whole prompt begins with it
            return whole.startswith(head) and system[0]["content"] in head

        whole, head = chat(question), self.tokenizer.apply_chat_template(system, tokenize=False)
        if not splits(head):
            marked = chat(QUESTION_MARK)
            head = marked[: marked.index(QUESTION_MARK)]
            if not splits(head):
                raise ValueError("the chat template does not put the reader's context before the question")
        return self.ids(head), self.ids(whole[len(head) :])

    def question_ids(self, question: str) -> list[int]:
        """The ids that follow any context's head: the question's turn and the answer's start (the chat
        splits at a special token, so they do not depend on the context, which is not tokenised again)."""
        return self.prompt_parts("", question)[1]

    def prefill(self, ids: Sequence[int]) -> Any:
        """The cache of `ids` (a shared context), to answer several questions after it."""
        import torch

        with torch.inference_mode():
            return self._step(list(ids), None)[1]

    def answer(self, ids: Sequence[int], cache: Any = None) -> ReaderAnswer:
        """The greedy continuation of `ids` (after what `cache` holds, which is cropped back afterwards). Where it
        refuses, the first tokens are tried likeliest first for one whose greedy answer does not; `refusal`
        says which of the two is the answer."""
        import torch

        kept = cache.get_seq_length() if cache is not None else 0
        with torch.inference_mode():
            logits, cache = self._step(list(ids), cache)
            prefix = cache.get_seq_length()
            probs = logits.float().softmax(-1)
            first = int(logits.argmax())
            text = self._decode(self._greedy_from(first, cache))
            refusal_p, unrefused = 0.0, None
            if refuses(text):  # the greedy first token, then the likeliest others (a tie may rank it anywhere)
                others = [t for t in probs.topk(REFUSAL_TRIES + 1).indices.tolist() if t != first]
                for token in [first, *others][:REFUSAL_TRIES]:
                    cache.crop(prefix - cache.get_seq_length())  # back to the answer's start
                    tried = text if token == first else self._decode(self._greedy_from(token, cache))
                    if not refuses(tried):
                        unrefused = tried
                        break
                    refusal_p += float(probs[token])
                if not reader_refuses(self.refusal, True, refusal_p) and unrefused is not None:
                    text, unrefused = unrefused, None
        if kept:
            cache.crop(kept - cache.get_seq_length())  # negative: tokens removed (transformers 4.5x and 5)
        return ReaderAnswer(text, refusal_p, unrefused)

    def _step(self, ids: list[int], cache: Any) -> tuple[Any, Any]:
        """The next token's logits after `ids`, and the cache that holds them (a sliding-window model's too: a
        cache that keeps every position, so that `crop` can go back past the window)."""
        import torch

        from memory_runtime.generation.batch_cache import new_cache

        out = self.model(
            torch.tensor([ids], device=self.model.device),
            past_key_values=new_cache() if cache is None else cache,  # every position kept: crop can go back
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[0, -1], out.past_key_values

    def _greedy_from(self, token: int, cache: Any) -> list[int]:
        """`token` and its greedy continuation, up to `max_new_tokens` in all, to the end of the turn."""
        stop = {self.tokenizer.eos_token_id, *self._end_ids()}
        new: list[int] = []
        while token not in stop:
            new.append(token)
            if len(new) == self.max_new_tokens:
                break
            logits, cache = self._step([token], cache)
            token = int(logits.argmax())
        return new

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def _end_ids(self) -> list[int]:
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        return [end] if isinstance(end, int) and end != self.tokenizer.unk_token_id else []


def window_of(model: Any, tokenizer: Any) -> int:
    """The tokens the model attends over (its config's max_position_embeddings, else the tokenizer's)."""
    return int(getattr(model.config, "max_position_embeddings", None) or tokenizer.model_max_length)
