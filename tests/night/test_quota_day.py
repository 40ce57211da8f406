"""The service's quota day: every daily quota resets at 08:00 UTC (its FAQ: 12 midnight PST).

The sandbox resets quotas at the configured instant on its own clock; the budget, a harvest's
outcome and ``tourneylake budget`` name the next reset and the searches that expire at it,
counted on the service's clock (its answers' timestamps), not ours.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.helpers import ledger_rows, player_line, sandbox_settings, write_watchlist
from tourneylake.api.filters import filter_for_night
from tourneylake.config import Settings
from tourneylake.lake.lake import Lake
from tourneylake.night.drain import drain
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


# ------------------------------------------------------------------------------ use it or lose it

DRAINER = ("drainer@example.com", "drain-password")


def test_searches_that_expire_at_the_reset_are_spent_on_the_backlog_each_pair_in_its_night(make_sandbox, tmp_path: Path) -> None:
    """03:00: the nightly run for the night before fetches 20 of 100 pairs (its run cap) and owes
    80. 07:30: 50 searches above the reserve expire at 08:00; the drain spends them on the
    backlog's first 50 by priority and keeps the reserve. 08:30, after the reset: the next drain
    harvests the last 30. Every pair is asked once, lands in the night it was owed to, and the
    ledger is the service's count, per night and per quota day."""
    server = make_sandbox(seed=17, today=DAY, players=110, time_of_day=3 * 3600, latency_ms=1)
    server.accounts.add_user(*DRAINER, "subscriber", 200)
    night = date(2026, 3, 1)
    roster = server.world.roster(100)
    priorities = [(i * 37) % 100 + 1 for i in range(100)]  # every rank once, not in file order
    settings = sandbox_settings(
        server, tmp_path, username=DRAINER[0], password=DRAINER[1], reserve_searches=10, max_searches_per_run=20, concurrency=3
    )
    rank = dict(zip(roster, priorities, strict=True))
    lines = [player_line(n, p).replace("filters: []}", f"filters: [], priority: {rank[n, p]}}}") for n, p in roster]
    write_watchlist(settings, "players:\n" + "\n".join(lines) + "\n")
    watchlist = load_watchlist(settings.watchlist)

    session = Session.open(settings, settings.base_url, night)
    refresh_free_resource(session, "countries")
    nightly = harvest_players(session, watchlist)
    assert nightly.fetched == 20 and len(nightly.deferred) == 80

    server.world.time_of_day = HALF_PAST_SEVEN
    server.accounts.set_remaining(DRAINER[0], 60)
    [first] = drain(settings, watchlist, settings.base_url)
    assert first.plan.quota.reset_at == at(8) and first.plan.spendable == 50
    assert first.searches_spent == 50 and server.accounts.remaining(DRAINER[0]) == 10  # the reserve is kept
    fetched = {(r.network, r.player) for r in server.app.summary_requests}
    assert sorted(rank[key] for key in fetched) == list(range(1, 71))  # the nightly's 20, then the backlog's first 50
    assert first.still_owed == 30

    server.world.time_of_day = 8 * 3600 + 1800  # the quota has reset: 200 searches, 190 above the reserve
    [held] = drain(settings, watchlist, settings.base_url)  # 23.5 hours before the next reset: not now
    assert held.searches_spent == 0 and held.plan.held_back and "--now" in held.plan.held_back
    [second] = drain(settings, watchlist, settings.base_url, anytime=True)
    # the 03:00 run of the night of 03-02 comes before the next reset: its plan (20, the run cap) is kept
    assert (second.plan.next_night, second.plan.kept_for_night) == (DAY, 20)
    assert second.plan.spendable == 170 and second.searches_spent == 30 and second.still_owed == 0
    assert server.accounts.remaining(DRAINER[0]) == 170

    requests = [(r.network, r.player, r.filter) for r in server.app.summary_requests]
    assert len(requests) == len(set(requests)) == 100  # nothing asked twice, all with the owed night's filter
    assert {sent for *_, sent in requests} == {filter_for_night("", night).sent}
    lake = Lake(settings.data_dir)
    assert lake.tables.nights("player_snapshots") == [night]
    assert lake.tables.read("player_snapshots", night).num_rows == 100
    rows = ledger_rows(settings)
    user = server.accounts.users[DRAINER[0]]
    assert sum(int(row["cost"]) for row in rows) == user.charged == 100
    per_day = Counter()
    for row in rows:
        per_day[row["quota_day"]] += int(row["cost"])
    assert per_day == {"2026-03-01": 70, "2026-03-02": 30}  # what each quota day paid
    assert rows == ledger_rows(settings, night)  # all booked to the night whose data they bought


def test_tourneylake_drain_and_budget_say_what_is_owed_and_what_was_fetched(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tourneylake.cli import app
    from tourneylake.night.session import connected

    settings = Settings(data_dir=tmp_path, watchlist=tmp_path / "watchlist.yaml", max_searches_per_run=1)  # the built-in sandbox
    write_watchlist(
        settings, "players:\n" + player_line("PokerStars", "Borbas.Geri") + "\n" + player_line("WPN", "Søren K") + "\n"
    )
    night = date(2026, 3, 1)
    with connected(settings, night, writable=True) as session:
        assert len(harvest_players(session, load_watchlist(settings.watchlist)).deferred) == 1
    flags = ["--sandbox", "--data-dir", str(tmp_path), "--watchlist", str(settings.watchlist)]
    budget = CliRunner().invoke(app, ["budget", *flags, "--date", "2026-03-02"])
    assert budget.exit_code == 0 and "Next quota reset" in budget.output and "Backlog: 1 pair(s) owed" in budget.output
    drained = CliRunner().invoke(app, ["drain", *flags, "--now"])  # the built-in sandbox's clock is ours: any hour
    assert drained.exit_code == 0, drained.output
    assert "kept: the reserve (0)" in drained.output
    assert "fetched 1 with 1 search(es) (2026-03-01: 1); still owed: 0" in drained.output
    assert "warehouse: loaded 2026-03-01" in drained.output


def test_a_drain_keeps_the_next_nights_share_records_no_night_and_status_counts_its_searches(
    make_sandbox, tmp_path: Path
) -> None:
    """12 searches a day, a run cap of 5, a reserve of 2, 15 pairs. The 03:00 run of 03-01 fetches
    5 and owes 10. At 10:00 (a new quota day) a drain outside its window spends nothing and says
    why; told to drain now, it keeps the reserve and the 5 the 03:00 run of 03-02 needs before the
    next reset, and spends the other 5 on the backlog: that run then has its 5. The drains write
    no night of their own (no raw folder of 03-02 before its run), and `status` counts every
    search of 03-01 from the ledger, the drain's too, and what it still owes."""
    from tourneylake.night.status import lake_status, record_harvest, record_load
    from tourneylake.tables.warehouse import Warehouse

    user = ("keeper@example.com", "keep-password")
    server = make_sandbox(seed=23, today=DAY, players=20, time_of_day=3 * 3600)
    server.accounts.add_user(*user, "subscriber", 12)
    settings = sandbox_settings(server, tmp_path, username=user[0], password=user[1], reserve_searches=2, max_searches_per_run=5)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in server.world.roster(15)) + "\n")
    watchlist = load_watchlist(settings.watchlist)
    first, second = date(2026, 3, 1), DAY

    def nightly(night: date) -> None:  # a night as its run's steps make and record it
        session = Session.open(settings, settings.base_url, night)
        refresh_free_resource(session, "countries")
        outcome = harvest_players(session, watchlist)
        record_harvest(session.lake, night, f"run-{night}", None, outcome)
        with Warehouse(settings.warehouse_path) as db:
            record_load(session.lake, night, f"run-{night}", db.load_night(session.lake, night))
        assert outcome.searches_spent == 5

    nightly(first)
    server.world.time_of_day = 10 * 3600  # 03-02 10:00: 12 new searches, 22 hours before the next reset
    [held] = drain(settings, watchlist, settings.base_url)
    assert held.searches_spent == 0 and server.accounts.remaining(user[0]) == 12
    [drained] = drain(settings, watchlist, settings.base_url, anytime=True)
    assert (drained.plan.next_night, drained.plan.kept_for_night, drained.plan.spendable) == (second, 5, 5)
    assert drained.searches_spent == 5 and drained.still_owed == 5
    assert server.accounts.remaining(user[0]) == 7  # the night's 5 and the reserve's 2
    lake = Lake(settings.data_dir)
    assert lake.raw.nights() == [first]  # the drains' readings made no night of 03-02
    [night_one] = lake_status(settings).nights
    assert (night_one.night, night_one.night_searches, night_one.deferred, night_one.outcome) == (first, 10, 5, "deferred")

    server.world.time_of_day = 3 * 3600 + DAY_S  # 03-03 03:00, the same quota day: the night of 03-02 runs
    nightly(second)
    assert server.accounts.remaining(user[0]) == 2
    assert [n.night for n in lake_status(settings).nights] == [first, second]


DAY_S = 24 * 3600
