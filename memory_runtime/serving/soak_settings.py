"""What `memlm bench soak` is asked for: how long, how many clients and namespaces, what mix of
requests; the CLI parses its --mix and --client-cpus here, and the load, the figures and the run all
read it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

KINDS = ("chat", "read", "write", "list", "export", "import")
DEFAULT_MIX = {"chat": 25, "read": 30, "write": 15, "list": 15, "export": 8, "import": 7}


@dataclass
class SoakSettings:
    """How long, how many, what mix: `memlm bench soak`'s options."""

    seconds: float = 1800.0
    clients: int = 64
    namespaces: int = 1000
    think_ms: float = 1000.0  # a client's mean pause between its requests (exponential; 0: none)
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    bulk_facts: int = 60_000  # 0: no bulk import
    bulk_at: float | None = None  # seconds into the run (None: min(120, a third of the run))
    interval: float = 60.0  # the time series' step; --out is rewritten at each
    rss_every: float = 5.0
    rss_baseline: float = 300.0  # growth is measured from here (from half the run when it is shorter)
    small_import_facts: int = 10
    max_tokens: int = 64
    request_timeout: float = 60.0
    seed: int = 0
    client_cpus: list[int] | None = None  # the clients' process on these CPUs (the server keeps the rest)

    def bulk_start(self) -> float | None:
        if self.bulk_facts <= 0:
            return None
        at = min(120.0, self.seconds / 3) if self.bulk_at is None else self.bulk_at
        return at if at < self.seconds else None


def parse_cpus(text: str) -> list[int]:
    """`12-15` or `0,2,4-5` -> those CPU numbers, each one this process may run on; ValueError otherwise."""
    cpus: set[int] = set()
    try:
        for item in filter(None, (p.strip() for p in text.split(","))):
            first, _, last = item.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        raise ValueError(f"--client-cpus {text!r}: give CPU numbers and ranges, e.g. 12-15 or 0,2,4-5") from None
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed or cpus == allowed:
        raise ValueError(
            f"--client-cpus {text!r}: give some of the CPUs this process may use ({_ranges(allowed)}), not all of them"
        )
    return sorted(cpus)


def _ranges(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def parse_mix(text: str) -> dict[str, float]:
    """`chat=25,read=30,...` -> weights; kinds not named get 0. ValueError saying what is wrong."""
    mix = dict.fromkeys(KINDS, 0.0)
    for item in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, weight = item.partition("=")
        kind = kind.strip()
        if not sep or kind not in KINDS:
            raise ValueError(f"--mix: {item!r} is not KIND=WEIGHT with KIND one of {', '.join(KINDS)}")
        try:
            mix[kind] = float(weight)
        except ValueError:
            raise ValueError(f"--mix: the weight of {kind} is {weight.strip()!r}, not a number") from None
        if not (math.isfinite(mix[kind]) and mix[kind] >= 0):
            raise ValueError(f"--mix: the weight of {kind} must be a number >= 0, got {weight.strip()}")
    if not any(mix.values()):
        raise ValueError("--mix: at least one kind needs a weight above 0")
    return mix
