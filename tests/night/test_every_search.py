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


# ------------------------------------------------------------------ searches that come back

UNKNOWN = [("PokerStars", "Nobody At All"), ("WPN", "Nemo Quidam"), ("888Poker", "Ghost Player")]


def _free_lookups_first(sandbox, settings, known: int) -> None:
    """The unknown players first (priority 1), then ``known`` of the roster: the plan's first ten
    hold the three lookups the service lets off."""
    lines = [player_line(n, p).replace("filters: []}", "filters: [], priority: 1}") for n, p in UNKNOWN]
    write_watchlist(
        settings, "players:\n" + "\n".join([*lines, *(player_line(n, p) for n, p in sandbox.world.roster(known))]) + "\n"
    )


@pytest.mark.parametrize("bound", ["quota", "cap"])
def test_searches_the_service_let_off_are_spent_on_the_next_pairs(make_sandbox, tmp_path: Path, bound: str) -> None:
    """Ten searches, three lookups among the ten planned that the service does not charge (not
    found): the night spends all ten, on the next pairs in order, and defers the rest with the
    reason that holds then — the quota (ten a day) or the run cap (ten a run)."""
    from tourneylake.sandbox import Costs

    server = make_sandbox(seed=5, today=FIRST, players=20, latency_ms=2, faults="jitter=2", costs=Costs(no_data=0))
    quota = 10 if bound == "quota" else 1000
    server.accounts.add_user("refill@example.com", "refill", "subscriber", quota)
    cap = None if bound == "quota" else 10
    settings = sandbox_settings(
        server, tmp_path, username="refill@example.com", password="refill", concurrency=3, max_searches_per_run=cap
    )
    _free_lookups_first(server, settings, 15)
    outcome = harvest_players(Session.open(settings, settings.base_url, FIRST), load_watchlist(settings.watchlist))
    user = server.accounts.users["refill@example.com"]
    assert user.charged == 10 == sum(int(row["cost"]) for row in ledger_rows(settings, FIRST))
    assert outcome.fetched == 10 and len(outcome.skipped) == 3 and not outcome.failed
    asked = [(r.network, r.player) for r in server.app.summary_requests]
    assert len(asked) == 13 == len(set(asked))  # the ten planned, then three more: nothing twice
    why = "quota: 0 searches left until the reset at 08:00 UTC" if bound == "quota" else "budget: run cap 10 reached"
    assert [reason for _, reason in outcome.deferred] == [why] * 5
