"""What a soak measured, and its report: latencies per kind and interval, errors, acknowledged writes,
the server's RSS and the machine's CPU times, each figure against its target. The clients fill a
Recorder as requests finish; the run asks it for the report every interval and at the end."""

from __future__ import annotations

import math
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from memory_runtime.memory.memory_config import MemoryConfig
from memory_runtime.memory.store import TripletStore
from memory_runtime.memory.terms import normalize_term
from memory_runtime.models.hardware import cpu_info
from memory_runtime.serving.soak_settings import KINDS, SoakSettings

# what the soak is held to: 0 errors, 0 lost writes, p99 of a read and of a listing in every interval
# (the bulk import's included), RSS growth after the first rss_baseline seconds
TARGETS = {"errors": 0, "lost_writes": 0, "read_p99_ms": 50.0, "list_p99_ms": 200.0, "rss_growth_pct": 10.0}


def _machine() -> dict[str, Any]:
    info = cpu_info()
    return {"cpu_model": info.model, "cores": info.cores}


@dataclass
class _Series:
    """One interval's latencies per kind (seconds), filled as requests finish."""

    latencies: dict[str, array] = field(default_factory=lambda: {k: array("d") for k in KINDS})
    summary: dict[str, Any] | None = None  # once the interval is over: its figures, and latencies dropped


class Recorder:
    """Everything the clients measure and acknowledge, summarised in `report`."""

    def __init__(self, settings: SoakSettings, memory: MemoryConfig) -> None:
        self.settings = settings
        self.start = time.monotonic()
        self.intervals: list[_Series] = []
        self.all: dict[str, array] = {k: array("d") for k in KINDS}
        self.slots = max(1, math.ceil(settings.seconds / settings.interval))  # requests finishing late: the last
        self.bulk_window: tuple[float, float | None] | None = None  # when the bulk import ran (end None: running)
        self.during: dict[str, array] = {k: array("d") for k in ("read", "list")}  # latencies overlapping it
        self.errors = 0
        self.first_errors: list[dict[str, Any]] = []
        self.provoked = {"sent": 0, "refused_as_expected": 0}
        self.export_checks = {"exports": 0, "writes_looked_for": 0}
        self.acknowledged: dict[str, set[tuple[str, str, str]]] = {}
        self.acked_at: dict[str, list[tuple[float, tuple[str, str, str]]]] = {}  # for the exports' check
        self.n_acknowledged = 0
        self.rss: list[tuple[float, float]] = []
        self.cpu: list[tuple[float, Any]] = []  # (seconds, psutil.cpu_times()) with each RSS sample
        self.bulk: dict[str, Any] | None = None
        self._canonical = TripletStore(":memory:", memory)  # relation names as the server's store keeps them

    def now(self) -> float:
        return time.monotonic() - self.start

    def key(self, subject: str, relation: str, object_: str) -> tuple[str, str, str]:
        """A fact as the store matches it (a model may write an alias of the relation, another case)."""
        relation = self._canonical.canonical_relation(relation)
        return normalize_term(subject), normalize_term(relation), normalize_term(object_)

    def done(self, kind: str, started: float, latency: float) -> None:
        end = started + latency
        slot = min(int(end // self.settings.interval), self.slots - 1)
        while len(self.intervals) <= slot:
            self.intervals.append(_Series())
        self.intervals[slot].latencies[kind].append(latency)
        self.all[kind].append(latency)
        window = self.bulk_window
        if (
            kind in self.during
            and window is not None
            and end > window[0]
            and (window[1] is None or started < window[1])
        ):
            self.during[kind].append(latency)

    def error(self, kind: str, started: float, what: str) -> None:
        self.errors += 1
        if len(self.first_errors) < 10:
            self.first_errors.append({"at_s": round(started, 2), "kind": kind, "error": what[:300]})

    def acknowledge(self, namespace: str, triplets: list, *, at: float | None) -> None:
        """Writes the server acknowledged in `namespace` (`at`: when, for the exports' check)."""
        keys = self.acknowledged.setdefault(namespace, set())
        for s, r, o in triplets:
            key = self.key(s, r, o)
            keys.add(key)
            self.n_acknowledged += 1
            if at is not None:
                self.acked_at.setdefault(namespace, []).append((at, key))

    def close(self) -> None:
        self._canonical.close()

    # ------------------------------------------------------------------ figures

    def _summary(self, slot: int, final: bool) -> dict[str, Any]:
        series = self.intervals[slot]
        if series.summary is not None:
            return series.summary
        step = self.settings.interval
        span = min(step, max(self.now() - slot * step, 1e-9))
        kinds = {}
        for kind, values in series.latencies.items():
            if values:
                ordered = sorted(values)
                kinds[kind] = {
                    "requests": len(ordered),
                    "requests_per_s": round(len(ordered) / span, 2),
                    "p50_ms": _ms(_rank(ordered, 50)),
                    "p99_ms": _ms(_rank(ordered, 99)),
                }
        summary = {
            "interval": slot + 1,
            "from_s": round(slot * step, 1),
            "seconds": round(span, 1),
            "kinds": kinds,
            "cpu": self._cpu_shares(slot * step, (slot + 1) * step),
        }
        if final or (slot < self.slots - 1 and self.now() > (slot + 1) * step):  # over: nothing more finishes in it
            series.summary, series.latencies = summary, {}
        return summary

    def report(self, *, final: bool, checks: dict[str, Any] | None = None, context: dict[str, Any]) -> dict[str, Any]:
        """The soak's figures so far (final: the run is over; `checks`: the lost writes and the memory check)."""
        elapsed = self.now()
        requests = sum(len(v) for v in self.all.values())
        kinds = {}
        for kind, values in self.all.items():
            if values:
                ordered = sorted(values) if final else None
                kinds[kind] = {
                    "requests": len(values),
                    "requests_per_s": round(len(values) / elapsed, 2),
                    **({"p50_ms": _ms(_rank(ordered, 50)), "p99_ms": _ms(_rank(ordered, 99))} if ordered else {}),
                }
        series = [self._summary(slot, final) for slot in range(len(self.intervals))]
        out: dict[str, Any] = {
            **context,
            "complete": final,
            "elapsed_s": round(elapsed, 1),
            "requests": requests,
            "requests_per_s": round(requests / elapsed, 2) if elapsed else None,
            "kinds": kinds,
            "intervals": series,
            "errors": {"count": self.errors, "first": self.first_errors, "provoked": self.provoked},
            "exports_checked": self.export_checks,
            "rss": self._rss_figures(),
            "machine": {**_machine(), "cpu": self._cpu_shares(0.0, math.inf)},
            "bulk_import": self._bulk_figures(),
            "acknowledged_writes": {"acknowledged": self.n_acknowledged, "checked": None, "lost": None},
            "memory_check": None,
        }
        if checks is not None:
            out.update(checks)
        out["targets"] = self._targets(out)
        out["pass"] = all(t["pass"] is not False for t in out["targets"].values()) if final else None
        return out

    def _bulk_figures(self) -> dict[str, Any] | None:
        if self.bulk is None:
            return None
        out = dict(self.bulk)
        for kind, values in self.during.items():  # the requests that overlapped the import
            ordered = sorted(values)
            out[f"{kind}s_during"] = len(ordered)
            out[f"{kind}_p99_ms"] = _ms(_rank(ordered, 99)) if ordered else None
            out[f"{kind}_max_ms"] = _ms(ordered[-1]) if ordered else None
        return out

    def _rss_figures(self) -> dict[str, Any]:
        samples = self.rss
        out: dict[str, Any] = {
            "every_s": self.settings.rss_every,
            "samples": [[round(t, 1), mb] for t, mb in samples],
            "first_mb": samples[0][1] if samples else None,
            "peak_mb": max(mb for _, mb in samples) if samples else None,
            "last_mb": samples[-1][1] if samples else None,
        }
        if len(samples) >= 2:
            last_t = samples[-1][0]
            at = self.settings.rss_baseline if last_t >= 2 * self.settings.rss_baseline else last_t / 2
            base_t, base = min(samples, key=lambda s: abs(s[0] - at))
            out.update(
                baseline_at_s=round(base_t, 1),
                baseline_mb=base,
                growth_pct=round(100 * (samples[-1][1] - base) / base, 2),
            )
        return out

    def _cpu_shares(self, start: float, end: float) -> dict[str, float] | None:
        """The machine's CPU time between two moments of the run, in % of all its cores' time: busy
        (user, system and the rest) and stolen (taken by the hypervisor for other guests: not the server's)."""
        inside = [times for t, times in self.cpu if start - self.settings.rss_every / 2 <= t <= end]
        if len(inside) < 2:
            return None
        first, last = inside[0], inside[-1]
        spent = {name: getattr(last, name) - getattr(first, name) for name in first._fields}
        total = sum(spent.values())
        if total <= 0:
            return None
        idle = spent.get("idle", 0.0) + spent.get("iowait", 0.0)
        steal = spent.get("steal", 0.0)
        return {"busy_pct": round(100 * (total - idle - steal) / total, 1), "steal_pct": round(100 * steal / total, 1)}

    def _targets(self, out: dict[str, Any]) -> dict[str, dict[str, Any]]:
        def worst(kind: str) -> float | None:
            p99s = [s["kinds"][kind]["p99_ms"] for s in out["intervals"] if kind in s["kinds"]]
            bulk = (out["bulk_import"] or {}).get(f"{kind}_p99_ms")
            return max([*p99s, *([bulk] if bulk is not None else [])], default=None)

        lost = out["acknowledged_writes"]["lost"]
        figures = {
            "errors": (out["errors"]["count"], TARGETS["errors"]),
            "lost_writes": (lost, TARGETS["lost_writes"]),
            "read_p99_ms": (worst("read"), TARGETS["read_p99_ms"]),
            "list_p99_ms": (worst("list"), TARGETS["list_p99_ms"]),
            "rss_growth_pct": (out["rss"].get("growth_pct"), TARGETS["rss_growth_pct"]),
        }
        return {
            name: {"value": value, "at_most": limit, "pass": None if value is None else value <= limit}
            for name, (value, limit) in figures.items()
        }


def _rank(ordered: Any, q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
