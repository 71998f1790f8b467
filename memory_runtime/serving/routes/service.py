"""The server itself: liveness and metrics (no key: nothing per user), and the model it serves."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memory_runtime.serving.routes.state import Namespace, State

router = APIRouter()


@router.get("/health")
async def health(server: State) -> dict[str, Any]:
    """Liveness, no key needed."""
    return {"status": "ok", "model": server.model_name}


@router.get("/metrics")
async def get_metrics(server: State) -> dict[str, Any]:
    """Request counts and latency per route, turn timings (no key needed: nothing per user)."""
    return server.metrics.snapshot(server.scheduler.queued)


@router.get("/v1/models")
async def models(server: State, _: Namespace) -> dict[str, Any]:
    model = {"id": server.model_name, "object": "model", "created": int(server.metrics.started), "owned_by": "memlm"}
    return {"object": "list", "data": [model]}
