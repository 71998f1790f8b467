"""What /metrics reports: aggregates over recent requests and turns, nothing per user."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from memory_runtime.generation.turn import TurnResult
from memory_runtime.stats import percentile


class Metrics:
    """Request counts and latencies per route, and turn timings: aggregates only, nothing per user."""

    def __init__(self, window: int = 2048) -> None:
        self._lock = threading.Lock()
        self._window = window
        self.started = time.time()
        self._routes: dict[str, dict[str, Any]] = {}
        self._turns = {
            "count": 0,
            "generated_tokens": 0,
            "calls": 0,
            "wall_seconds": 0.0,
            "model_seconds": 0.0,
            "store_seconds": 0.0,
            "cancelled": 0,  # turns whose client left before the answer (not in the figures above)
        }
        self._overhead: deque[float] = deque(maxlen=window)

    def record_request(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            stats = self._routes.setdefault(route, {"count": 0, "status": {}, "latency": deque(maxlen=self._window)})
            stats["count"] += 1
            stats["status"][str(status)] = stats["status"].get(str(status), 0) + 1
            stats["latency"].append(seconds)

    def record_cancelled(self) -> None:
        with self._lock:
            self._turns["cancelled"] += 1

    def record_turn(self, turn: TurnResult) -> None:
        with self._lock:
            t = self._turns
            t["count"] += 1
            t["generated_tokens"] += turn.generated_tokens
            t["calls"] += len(turn.calls)
            t["wall_seconds"] += turn.wall_seconds
            t["model_seconds"] += turn.model_seconds
            t["store_seconds"] += turn.store_seconds
            if turn.wall_seconds > 0:
                self._overhead.append(turn.overhead_seconds / turn.wall_seconds)

    def snapshot(self, queued: int) -> dict[str, Any]:
        with self._lock:
            routes = {}
            for route, stats in sorted(self._routes.items()):
                latency = list(stats["latency"])
                routes[route] = {
                    "count": stats["count"],
                    "status": dict(stats["status"]),
                    "p50_ms": round(percentile(latency, 50) * 1000, 3),
                    "p99_ms": round(percentile(latency, 99) * 1000, 3),
                    "mean_ms": round(sum(latency) / len(latency) * 1000, 3),
                }
            turns = dict(self._turns)
            overhead = list(self._overhead)
        turns["overhead_fraction"] = round(sum(overhead) / len(overhead), 4) if overhead else None
        return {
            "uptime_s": round(time.time() - self.started, 3),
            "queued_turns": queued,
            "requests": routes,
            "turns": turns,
        }
