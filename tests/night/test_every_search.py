"""Every search used: a quota of N with N pairs owed spends exactly N, every time.

With calls in flight, an answer's ``RemainingSearches`` may already show the charge of calls
whose own answers are not settled yet; a guard that subtracted them again refused the last
searches ("reserve reached") and let them expire at the quota's reset. The guard waits for those
calls and reads again rather than defer. Against the sandbox over real HTTP, with latency and
jitter so that calls overlap.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.helpers import ledger_rows, player_line, sandbox_settings, write_watchlist
from tourneylake.night.harvest import harvest_players
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist

pytestmark = pytest.mark.xdist_group("every_search")

FIRST = date(2026, 5, 1)
USER = ("ten@example.com", "ten-searches", "subscriber", 10)
SANDBOX = dict(seed=5, today=FIRST, players=12, latency_ms=4, faults="jitter=4")
SANDBOX_USERS = [USER]


def test_a_quota_of_ten_with_ten_pairs_owed_spends_ten_every_time(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TOURNEYLAKE_RAW_SAVER", "thread")  # twenty harvests: no saver process each
    settings = sandbox_settings(sandbox, tmp_path, username=USER[0], password=USER[1], concurrency=4)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in sandbox.world.roster(10)) + "\n")
    watchlist = load_watchlist(settings.watchlist)
    spent = []
    for run in range(20):
        night = FIRST + timedelta(days=run)
        sandbox.world.set_today(night)
        sandbox.accounts.set_remaining(USER[0], 10)
        outcome = harvest_players(Session.open(settings, settings.base_url, night), watchlist)
        spent.append(outcome.searches_spent)
        assert outcome.fetched == 10, (run, outcome.deferred)
        assert sandbox.accounts.remaining(USER[0]) == 0
        assert sum(int(row["cost"]) for row in ledger_rows(settings, night)) == 10
    assert spent == [10] * 20
