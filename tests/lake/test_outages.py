"""An outage of the lake's store is ridden out for one stretch of patience per outage, however many
layers try an operation again: a night waits out the minute once, not once per layer."""

from __future__ import annotations

import pytest

from tourneylake.lake import outages


class Out(Exception):
    """The store not answering."""


def _failing(tries: list[int]):
    def call() -> None:
        tries.append(1)
        raise Out("service unavailable")

    return call


def test_once_the_store_has_been_out_too_long_a_new_try_gives_up_at_its_first_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outages, "PATIENCE_S", 0.3)
    monkeypatch.setattr(outages, "wait_before", lambda attempt: 0.02)
    transient = lambda exc: isinstance(exc, Out)  # noqa: E731
    first: list[int] = []
    with pytest.raises(Out):
        outages.ride_out(_failing(first), transient)  # ridden out for the whole patience ...
    assert len(first) > 3
    again: list[int] = []
    with pytest.raises(Out):
        outages.ride_out(_failing(again), transient)  # ... the caller's next try, once
    assert len(again) == 1

    assert outages.ride_out(lambda: "stored", transient) == "stored"  # the store answers: the outage is over
    after: list[int] = []
    with pytest.raises(Out):
        outages.ride_out(_failing(after), transient)
    assert len(after) > 3
