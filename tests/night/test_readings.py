"""The searches-left reading a harvest plans with, taken from a free answer seconds old when the
night has just made one (its countries step), never from before a search; and what another
client spends in between is still seen and never takes the account below its reserve.

Against the sandbox over real HTTP.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.helpers import ledger_rows, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.api.client import recent_reading
from tourneylake.night import session as session_module
from tourneylake.night.harvest import harvest_players, refresh_free_resource, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.sandbox import DEMO

pytestmark = pytest.mark.xdist_group("readings")

NIGHT = date(2026, 11, 20)


SANDBOX = dict(seed=41, today=NIGHT, players=50)


def _night(sandbox, tmp_path: Path, players: int, **overrides):
    settings = sandbox_settings(sandbox, tmp_path, concurrency=1, **overrides)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in sandbox.world.roster(players)) + "\n")
    session = Session.open(settings, settings.base_url, NIGHT)
    refresh_free_resource(session, "countries")  # the night's first step: a free answer with the count
    refresh_metadata(session)
    return settings, session


def test_a_harvest_right_after_the_nights_free_answers_makes_no_reading_of_its_own(sandbox, tmp_path: Path) -> None:
    settings, session = _night(sandbox, tmp_path, 3)
    before = remaining(settings)
    requests = sandbox.app.requests
    outcome = harvest_players(session, load_watchlist(settings.watchlist))
    assert outcome.fetched == 3
    assert sandbox.app.requests - requests == 3  # the three searches, no countries call before them
    # The searches forgot the reading: nothing from before them can stand for a count.
    assert recent_reading(settings, settings.base_url, 60) is None
    assert before - remaining(settings) == 3 == sum(int(r["cost"]) for r in ledger_rows(settings, NIGHT))


def test_an_older_reading_is_taken_again(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(session_module, "RECENT_READING_S", 0.0)
    settings, session = _night(sandbox, tmp_path, 3)
    requests = sandbox.app.requests
    assert harvest_players(session, load_watchlist(settings.watchlist)).fetched == 3
    assert sandbox.app.requests - requests == 4  # a countries call, then the three searches


def test_another_clients_spending_after_the_reading_never_takes_the_account_below_its_reserve(sandbox, tmp_path: Path) -> None:
    original = sandbox.accounts.remaining(DEMO.username)
    try:
        sandbox.accounts.set_remaining(DEMO.username, 1_000)
        settings, session = _night(sandbox, tmp_path, 5, reserve_searches=997)  # 3 searches allowed, as read
        sandbox.accounts.set_remaining(DEMO.username, 999)  # another client spends 1 after the reading
        outcome = harvest_players(session, load_watchlist(settings.watchlist))
        assert sandbox.accounts.remaining(DEMO.username) >= 997  # the reserve holds
        assert outcome.fetched == 2 and len(outcome.deferred) == 3
        rows = ledger_rows(settings, NIGHT)
        assert sum(int(r["cost"]) for r in rows) == 2  # this run's own searches; the other's is not charged
    finally:
        sandbox.accounts.set_remaining(DEMO.username, original)
