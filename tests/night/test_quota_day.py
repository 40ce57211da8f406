"""The service's quota day: every daily quota resets at 08:00 UTC (its FAQ: 12 midnight PST).

The sandbox resets quotas at the configured instant on its own clock; the budget, a harvest's
outcome and ``tourneylake budget`` name the next reset and the searches that expire at it,
counted on the service's clock (its answers' timestamps), not ours.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.helpers import player_line, sandbox_settings, write_watchlist
from tourneylake.night.forecast import budget_report
from tourneylake.night.harvest import harvest_players, refresh_free_resource
from tourneylake.night.quota_day import next_reset, quota_day_of
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.sandbox import FREE

pytestmark = pytest.mark.xdist_group("quota_day")

DAY = date(2026, 3, 2)
HALF_PAST_SEVEN = 7 * 3600 + 1800
SANDBOX = dict(seed=13, today=DAY, players=30, time_of_day=HALF_PAST_SEVEN)


def at(hour: int, minute: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def test_a_quota_day_runs_from_one_reset_to_the_next() -> None:
    eight = 8 * 3600
    assert quota_day_of(at(7, 59), eight) == date(2026, 3, 1) and quota_day_of(at(8), eight) == DAY
    assert next_reset(at(3), eight) == at(8) and next_reset(at(8), eight) == at(8, day=date(2026, 3, 3))
    assert next_reset(at(23, 30), 0) == at(0, day=date(2026, 3, 3))


def test_the_sandbox_resets_quotas_at_the_reset_on_its_clock(sandbox) -> None:
    accounts, world = sandbox.accounts, sandbox.world
    try:
        accounts.set_remaining(FREE.username, 3)
        world.time_of_day = 8 * 3600 - 1
        assert accounts.remaining(FREE.username) == 3  # 07:59:59: the same quota day
        world.time_of_day = 8 * 3600
        assert accounts.remaining(FREE.username) == 10  # 08:00: a new one, at the daily quota
    finally:
        world.time_of_day = HALF_PAST_SEVEN


def test_a_harvest_and_the_budget_name_the_next_reset_and_what_expires_at_it(sandbox, tmp_path: Path) -> None:
    settings = sandbox_settings(sandbox, tmp_path, username=FREE.username, password=FREE.password)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in sandbox.world.roster(4)) + "\n")
    sandbox.accounts.set_remaining(FREE.username, 9)
    night = date(2026, 3, 1)
    report = budget_report(settings, night)
    assert report.quota is not None and report.quota.reset_at == at(8)  # the service's clock says 07:30
    assert report.quota.expiring == 9 and "in 0 h 30 min" in report.quota.describe()

    session = Session.open(settings, settings.base_url, night)
    refresh_free_resource(session, "countries")
    outcome = harvest_players(session, load_watchlist(settings.watchlist))
    assert outcome.fetched == 4 and outcome.quota is not None
    assert outcome.quota.reset_at == at(8) and outcome.quota.expiring == 5 == sandbox.accounts.remaining(FREE.username)
