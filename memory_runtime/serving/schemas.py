"""What requests carry (OpenAI's chat fields memlm uses, the memory routes' queries and bodies)
and the errors they get back, in OpenAI's JSON shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_runtime.generation.turn import SEED_RANGE, turn_messages, unencodable
from memory_runtime.memory.store import MAX_ROW_NUMBER

DATE_YEARS = (1900, 2200)  # a turn's date: what a conversation can be dated, well inside what timestamps hold


class MemlmOptions(BaseModel):
    """The `memlm` field of a chat request (the openai client sends it through extra_body)."""

    model_config = ConfigDict(extra="forbid")

    trace: bool = False
    date: datetime | None = Field(
        None,
        description="when the user said it (ISO 8601: 2023-05-08 or 2023-05-08T13:56:00); default: when it arrives."
        " The facts it writes are dated so, and 'yesterday' in them is resolved against it",
    )

    @field_validator("date")
    @classmethod
    def _a_date_of_people(cls, value: datetime | None) -> datetime | None:
        if value is not None and not DATE_YEARS[0] <= value.year <= DATE_YEARS[1]:
            raise ValueError(f"must be a date from the years {DATE_YEARS[0]} to {DATE_YEARS[1]}")
        return value


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """The OpenAI chat request fields memlm uses; other OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None  # any name is accepted; responses report the served model
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=SEED_RANGE[0], le=SEED_RANGE[1])  # a signed 64-bit integer, as OpenAI's
    n: int = 1
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    tools: list[Any] | None = None
    memlm: MemlmOptions = MemlmOptions()


class ErrorDetail(BaseModel):
    message: str  # a sentence a person can act on
    type: str  # invalid_request_error, permission_error, rate_limit_error, server_error, ...
    param: str | None = None  # the field at fault, where one is
    code: str | None = None  # a stable name of the error, where it has one


class ErrorResponse(BaseModel):
    """Every error the server answers (4xx and 5xx), in OpenAI's JSON shape."""

    error: ErrorDetail


class APIError(Exception):
    """An error answered in OpenAI's JSON shape: {"error": {message, type, param, code}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = {**({"WWW-Authenticate": "Bearer"} if status == 401 else {}), **(headers or {})}

    def response(self) -> JSONResponse:
        body = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return JSONResponse({"error": body}, status_code=self.status, headers=self.headers or None)


def _text_of(message: ChatMessage, index: int) -> str:
    if message.content is None or isinstance(message.content, str):
        text = message.content or ""
    else:
        parts = []
        for part in message.content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(400, "only text content parts are supported", param=f"messages.{index}.content")
            parts.append(part["text"])
        text = "".join(parts)
    unreadable = None if text.isascii() else unencodable(text)
    if unreadable is not None:
        raise APIError(400, f"messages.{index}.content {unreadable}", param=f"messages.{index}.content")
    return text


def turn_messages_of(messages: list[ChatMessage], system_prompt: str | None) -> list[dict[str, str]]:
    """A request's messages as the turn's chat messages (memory_runtime.generation.turn.turn_messages):
    `system_prompt`, the earlier user/assistant turns, the user's text. The client's system messages
    are dropped: the model was trained with memlm's own system prompt."""
    roles = [m.role for m in messages]
    for i, role in enumerate(roles):
        if role in ("tool", "function"):
            raise APIError(400, "tool messages are not supported", param=f"messages.{i}.role")
    if roles[-1] != "user":
        raise APIError(400, "the last message must be the user's", param=f"messages.{len(roles) - 1}.role")
    history = [
        {"role": m.role, "content": _text_of(m, i)}
        for i, m in enumerate(messages[:-1])
        if m.role in ("user", "assistant")
    ]
    return turn_messages(_text_of(messages[-1], len(messages) - 1), history, system_prompt)


class FactQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str | None = None
    relation: str | None = None
    object: str | None = None


class SearchQuery(FactQuery):
    as_of: float | None = Field(None, allow_inf_nan=False)  # unix time: the facts valid then (superseded included)


class ForgetQuery(FactQuery):
    purge: bool = False  # erase every version for good instead of ending the current ones


class FactTriplet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str
    relation: str
    object: str


class WriteFactRequest(FactTriplet):
    """One fact written by a person (the memory page): added, or correcting `replaces`, which is
    ended and kept in history (memory_runtime.serving.feedback.store_correction, as the model's corrections)."""

    replaces: FactTriplet | None = None


class RestoreRequest(BaseModel):
    """Undo a forget: the id of the forgotten fact (memory_runtime.memory.store.TripletStore.restore)."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1, le=MAX_ROW_NUMBER)


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Literal["good", "bad"] | None = None
    correction: str | None = Field(None, min_length=1, max_length=2000)  # "No, Dorothea works for BMW now."

    @model_validator(mode="after")
    def _something(self) -> FeedbackRequest:
        if self.rating is None and not self.correction:
            raise ValueError("give a rating (good / bad) and/or a correction")
        return self
