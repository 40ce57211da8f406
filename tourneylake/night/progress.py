"""Progress of a long stage (the night's summaries), for a person to follow.

The library knows nothing of terminals: a stage is a :class:`Tracker`, which

- tells every registered listener on each step (the command line draws a ``rich`` progress bar
  on a terminal with one: :func:`listening`), and
- logs a plain line on ``tourneylake.night.progress`` every few seconds and at the end (done/total,
  rate, time left, searches spent), which is what a log file, a pipe or Dagster's run log shows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["ProgressSnapshot", "Tracker", "listening"]

log = logging.getLogger("tourneylake.night.progress")

Listener = Callable[["ProgressSnapshot"], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    stage: str
    done: int
    total: int
    searches: int | None
    elapsed_s: float

    @property
    def rate(self) -> float:
        """Steps per second so far."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (``None`` before the first step)."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self) -> str:
        left = f", about {_duration(self.eta_s)} left" if self.eta_s is not None and self.done < self.total else ""
        spent = f", {self.searches:,} searches spent" if self.searches is not None else ""
        return f"{self.stage}: {self.done:,}/{self.total:,} ({self.rate:,.1f}/s{left}){spent}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell ``listener`` every step of every stage while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


class Tracker:
    """One stage: ``total`` steps, advanced as they are done (thread-safe)."""

    def __init__(self, stage: str, total: int, *, log_every_s: float = 5.0) -> None:
        self.stage = stage
        self.total = total
        self.done = 0
        self.searches: int | None = None
        self.log_every_s = log_every_s
        self._started = self._logged = time.monotonic()
        self._lock = threading.Lock()

    def snapshot(self) -> ProgressSnapshot:
        return ProgressSnapshot(self.stage, self.done, self.total, self.searches, time.monotonic() - self._started)

    def advance(self, steps: int = 1, *, searches: int | None = None) -> None:
        with self._lock:
            self.done += steps
            if searches is not None:
                self.searches = searches
            snapshot = self.snapshot()
            due = snapshot.done >= self.total or time.monotonic() - self._logged >= self.log_every_s
            if due:
                self._logged = time.monotonic()
        for listener in list(_listeners):
            listener(snapshot)
        if due:
            log.info("%s", snapshot.line())
