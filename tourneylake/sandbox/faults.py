"""Switchable, seed-reproducible faults of the sandbox (latency, 5xx, drops, truncation...).

A fault spec is a comma-separated list of ``key=value``
(``5xx=0.1,drop=0.05,truncate=0.05,slow=0.02,internal=0.02,parallel=4,jitter=5,slow_s=30``;
every key is in ``docs/reference/sandbox.md``). The shares are exclusive bands of one uniform draw per
request, drawn from ``random.Random(seed)`` in request-arrival order, so a sequential client sees
the same faults on the same requests every run. 5xx, drops and internal errors happen before any
search is charged; truncated and slow answers after.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, fields
from typing import Literal

from tourneylake.errors import TourneylakeError

__all__ = ["FaultDraw", "FaultPlan", "FaultSpecError", "Faults"]

FaultKind = Literal["5xx", "drop", "truncate", "slow", "internal"]
_KEYS = {
    "5xx": "error_5xx",
    "drop": "drop",
    "truncate": "truncate",
    "slow": "slow",
    "internal": "internal",
    "parallel": "parallel",
    "jitter": "jitter_ms",
    "slow_s": "slow_seconds",
    "outage": "outage",
}


class FaultSpecError(TourneylakeError, ValueError):
    """A fault spec (or :class:`Faults` field) that is malformed or out of range."""


@dataclass(frozen=True)
class Faults:
    """What goes wrong, and how often (each field is a key of the spec: docs/reference/sandbox.md, Faults)."""

    error_5xx: float = 0.0
    drop: float = 0.0
    truncate: float = 0.0
    slow: float = 0.0
    internal: float = 0.0
    parallel: int | None = None
    jitter_ms: float = 0.0
    slow_seconds: float = 30.0
    outage: int = 0

    def __post_init__(self) -> None:
        shares = (self.error_5xx, self.drop, self.truncate, self.slow, self.internal)
        if any(s < 0 or s > 1 for s in shares) or sum(shares) > 1 + 1e-9:
            raise FaultSpecError("fault shares must each be in [0, 1] and sum to at most 1")
        if self.parallel is not None and self.parallel < 1:
            raise FaultSpecError("parallel must be at least 1")
        if self.jitter_ms < 0 or self.slow_seconds < 0 or self.outage < 0:
            raise FaultSpecError("jitter, slow_s and outage must not be negative")

    @classmethod
    def parse(cls, spec: str | None) -> Faults:
        """Read ``"5xx=0.1,drop=0.05,...,parallel=4,jitter=5"`` (empty or ``none`` = no faults).

        Raises :class:`FaultSpecError` (a ``ValueError``) for a malformed spec."""
        if spec is None or spec.strip().lower() in ("", "none", "off"):
            return cls()
        values: dict[str, float | int] = {}
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in _KEYS:
                known = ", ".join(_KEYS)
                raise FaultSpecError(f"bad fault {part!r}: expected key=value with key one of {known}")
            try:
                number: float | int = int(raw) if key in ("parallel", "outage") else float(raw)
            except ValueError:
                raise FaultSpecError(f"bad fault value in {part!r}: not a number") from None
            values[_KEYS[key]] = number
        return cls(**values)  # type: ignore[arg-type]

    def __str__(self) -> str:
        inverse = {v: k for k, v in _KEYS.items()}
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                parts.append(f"{inverse[f.name]}={value:g}" if isinstance(value, float) else f"{inverse[f.name]}={value}")
        return ",".join(parts) or "none"

    @property
    def any(self) -> bool:
        return self != Faults()


@dataclass(frozen=True)
class FaultDraw:
    """What happens to one request."""

    kind: FaultKind | None
    delay_s: float
    status: int


class FaultPlan:
    """The per-server stream of fault decisions (one fixed-size draw per request)."""

    def __init__(self, faults: Faults, seed: int, latency_ms: float) -> None:
        self.faults = faults
        self.latency_ms = float(latency_ms)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self._outage_left = faults.outage

    def in_outage(self) -> bool:
        """Whether this player-summary request falls in the outage (the first ``outage`` ones)."""
        with self._lock:
            if self._outage_left <= 0:
                return False
            self._outage_left -= 1
            self.counts["outage"] = self.counts.get("outage", 0) + 1
            return True

    def draw(self) -> FaultDraw:
        f = self.faults
        with self._lock:
            u, j, s = self._rng.random(), self._rng.random(), self._rng.random()
        kind: FaultKind | None = None
        edge = 0.0
        for name, share in (
            ("5xx", f.error_5xx),
            ("drop", f.drop),
            ("truncate", f.truncate),
            ("slow", f.slow),
            ("internal", f.internal),
        ):
            edge += share
            if share and u < edge:
                kind = name  # type: ignore[assignment]
                break
        if kind is not None:
            with self._lock:
                self.counts[kind] = self.counts.get(kind, 0) + 1
        delay = (self.latency_ms + j * f.jitter_ms) / 1000.0
        status = (500, 502, 503)[int(s * 3)]
        return FaultDraw(kind, delay, status)
