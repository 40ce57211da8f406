"""Charges as the service counts them: the ledger follows ``RemainingSearches`` whichever way the
service charges lookups that return no data (an unknown player, a player who opted out), so
``sum(cost)`` is what the service counted, and nothing is paid twice.

Against the sandbox over real HTTP, under both of its charging policies (``Costs.no_data``).
"""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.helpers import ledger_rows, player_line, sandbox_settings, write_watchlist
from tourneylake.api.errors import NOT_FOUND_CODES
from tourneylake.night.harvest import harvest_players, refresh_free_resource
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.sandbox import DEMO, Costs

pytestmark = pytest.mark.xdist_group("charges")

NIGHT = date(2026, 6, 10)
UNKNOWN = [("PokerStars", "Nobody At All"), ("PokerStars", "Nemo Quidam"), ("888Poker", "Ghost Player")]


@pytest.mark.parametrize("no_data", [1, 0], ids=["charged", "let off"])
def test_the_ledger_is_the_services_count_under_either_policy(make_sandbox, tmp_path: Path, no_data: int) -> None:
    sandbox = make_sandbox(seed=11, today=NIGHT, players=20, latency_ms=2, costs=Costs(no_data=no_data))
    known = sandbox.world.roster(8)
    settings = sandbox_settings(sandbox, tmp_path, concurrency=3)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in [*known, *UNKNOWN]) + "\n")
    watchlist = load_watchlist(settings.watchlist)
    user = sandbox.accounts.users[DEMO.username]

    for nights_run in range(2):
        night = NIGHT + timedelta(days=7 * nights_run)  # a week later: the unknown players are asked again
        sandbox.world.set_today(night)
        if nights_run:
            sandbox.app.opted_out.add(known[0])  # an answer without data that no row can tell
        charged, sandbox.app.summary_requests = user.charged, type(sandbox.app.summary_requests)()
        session = Session.open(settings, settings.base_url, night)
        refresh_free_resource(session, "countries")  # the night's first step (its count is the reading)
        outcome = harvest_players(session, watchlist)
        assert outcome.fetched == len(known) and len(outcome.skipped) == len(UNKNOWN) and not outcome.failed
        rows = ledger_rows(settings, night)
        assert sum(int(row["cost"]) for row in rows) == user.charged - charged  # the bill is the service's count
        asked = Counter((r.network, r.player) for r in sandbox.app.summary_requests)
        assert set(asked.values()) == {1}  # each pair asked once

        if nights_run:  # what the first night's count taught: an unknown player costs `no_data`
            assert [int(row["cost"]) for row in rows if row["error_code"] in NOT_FOUND_CODES] == [no_data] * len(UNKNOWN)
        again = harvest_players(Session.open(settings, settings.base_url, night), watchlist)
        assert again.searches_spent == 0 and user.charged == charged + sum(int(row["cost"]) for row in rows)

    # Every row is booked to the quota day it was paid from, and each day adds up as well.
    per_day = Counter()
    for row in ledger_rows(settings):
        per_day[row["quota_day"]] += int(row["cost"])
    assert sum(per_day.values()) == user.charged and set(per_day) == {NIGHT.isoformat(), night.isoformat()}
