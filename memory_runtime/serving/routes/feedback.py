"""POST /v1/feedback: a rating of the caller's last reply and/or a correction in words, which the
model turns into memory writes (the work is serving/feedback.py's)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memory_runtime.serving.feedback import Correction, Exchange
from memory_runtime.serving.routes.state import ServerState, State, Who
from memory_runtime.serving.scheduler import Overloaded, OwnerBusy
from memory_runtime.serving.schemas import APIError, ErrorResponse, FeedbackRequest

router = APIRouter()


@router.post(
    "/v1/feedback",
    responses={
        501: {"model": ErrorResponse, "description": "This server has no model to make a correction's writes"},
        503: {"model": ErrorResponse, "description": "The server's queue of turns is full: retry later"},
    },
)
async def post_feedback(request: FeedbackRequest, server: State, who: Who) -> dict[str, Any]:
    """Feedback on the caller's last reply (its own, in the namespace it acts in): a rating (good / bad)
    and/or a correction in words, which the model turns into memory writes (superseding the wrong fact,
    kept in history)."""
    namespace = who.namespace
    last = server.last_turn(who)
    # kept: whether trajectories reach feedback_dir/pending/ for review (feedback_dir null: not kept)
    out: dict[str, Any] = {
        "rating": request.rating,
        "repeated_wrong": False,
        "record": None,
        "kept": server.config.feedback_dir is not None,
    }
    if request.rating is not None:
        if last is None:
            raise APIError(400, "no reply to rate yet: rate after a chat completion", param="rating")
        event = server.feedback.rate(namespace, last, good=request.rating == "good")
        out.update(repeated_wrong=bool(event.get("repeated_wrong")), record=event.get("record"))
    if request.correction:
        fix = await correct(server, namespace, request.correction, last)
        out.update(
            writes=fix.writes,
            superseded=fix.superseded,
            ended=fix.ended,
            record=fix.record.id if fix.record else out["record"],
        )
    return out


async def correct(server: ServerState, namespace: str, correction: str, last: Exchange | None) -> Correction:
    """The model turns `correction` into memory writes: a session of greedy turns on the server's turn
    engine (any engine), queued fairly with the caller's other turns (501 where the server has no model)."""
    if not server.has_model:
        raise APIError(501, "this server has no model (memlm ui): corrections need one", code="no_model")
    # greedy, whatever the server samples: a correction's writes are the model's best reading of it
    session = server.feedback.correction(
        namespace,
        correction,
        last,
        server.config.generation,
        system_prompt=server.system_prompt,
        temperature=0.0,
        top_p=1.0,
    )
    try:
        return await server.scheduler.run_session(session, owner=namespace)
    except OwnerBusy:
        raise APIError(
            429,
            "this key has too many turns waiting or running; retry when one is done",
            type="rate_limit_error",
            code="too_many_turns",
        ) from None
    except Overloaded:
        raise APIError(503, "the server is overloaded; retry later", type="server_error", code="overloaded") from None
