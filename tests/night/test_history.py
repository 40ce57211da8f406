"""History you can trust, end to end: real Dagster runs against the sandbox over real HTTP, real
Parquet and DuckDB.

- a night harvested days later answers for that night (the filter sent is anchored to it);
- `window: day` filters add up, day by day, to the service's truth;
- every table of every night rebuilds from the raw answers alone, identically, without a request;
- error 0 with a logged-out UserInfo never looks like an empty account.
"""

from __future__ import annotations

import calendar
import shutil
from datetime import date, timedelta
from pathlib import Path

import duckdb
import httpx
import pyarrow as pa
import pytest

from tests.helpers import DEMO_ACCOUNT, ledger_rows, player_line
from tourneylake.config import SANDBOX_USERNAME, Settings
from tourneylake.lake.lake import Lake
from tourneylake.pipelines.nightly import run_models, run_night
from tourneylake.sandbox import running_sandbox
from tourneylake.sandbox.truth import truth
from tourneylake.schemas import TABLES
from tourneylake.tables.rebuild import rebuild

pytestmark = [pytest.mark.xdist_group("history"), pytest.mark.slow]

NIGHT = date(2026, 11, 18)
SEED = 11
PLAYERS = [("PokerStars", "Borbas.Geri"), ("GGNetwork", "José María"), ("iPoker", "Zoë O'Brien")]


def end_of(night: date) -> int:
    return calendar.timegm((night + timedelta(days=1)).timetuple()) - 1


def start_of(night: date) -> int:
    return calendar.timegm(night.timetuple())


SANDBOX = dict(seed=SEED, today=NIGHT)


def settings_for(server, tmp_path: Path, name: str, players: list[tuple[str, str]], filters: str, **extra) -> Settings:
    watchlist = tmp_path / f"{name}.yaml"
    lines = ["filters:", filters, "players:", *(player_line(n, p, "[sng_30d, all_sng]") for n, p in players)]
    watchlist.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Settings(
        base_url=server.base_url, **DEMO_ACCOUNT, data_dir=tmp_path / name, watchlist=watchlist, concurrency=4,
        retry_initial_wait_s=0.01, retry_max_wait_s=0.05, **extra,
    )  # fmt: skip


AS_OF = '  sng_30d: "Class:SNG;Date:30D"\n  all_sng: "Class:SNG"'


def rows(settings: Settings, table: str, night: date, drop: tuple[str, ...] = ()) -> list[tuple]:
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        names = [
            c
            for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table]
            ).fetchall()
        ]
        keep = ", ".join(f'"{c}"' for c in names if c not in drop)
        return sorted(con.execute(f'SELECT {keep} FROM "{table}" WHERE snapshot_date = ?', [night]).fetchall(), key=repr)
    finally:
        con.close()


RATE_COLUMNS = ("usd_rate", "stake_usd", "rake_usd", "buy_in_usd", "prize_pool_usd", "guarantee_usd", "overlay_usd")


def test_a_night_harvested_days_later_answers_for_that_night(sandbox, tmp_path: Path) -> None:
    # The whole watchlist on the night itself.
    sandbox.world.set_today(NIGHT)
    on_time = settings_for(sandbox, tmp_path, "on_time", PLAYERS, AS_OF)
    assert run_night(on_time, NIGHT).success

    # The same lake idea, but two players joined the watchlist later: their night N is fetched on
    # day N+3, with the night's own metadata (rates) already in the lake.
    late = settings_for(sandbox, tmp_path, "late", PLAYERS[:1], AS_OF)
    assert run_night(late, NIGHT).success
    sandbox.world.set_today(NIGHT + timedelta(days=3))
    sandbox.app.summary_requests.clear()
    late = settings_for(sandbox, tmp_path, "late", PLAYERS, AS_OF)
    backfill = run_night(late, NIGHT)
    assert backfill.success, backfill.failure
    assert backfill.value("player_summaries", "players_fetched") == 4  # 2 players x 2 filters, on day N+3

    # What the service saw: absolute ranges ending at N's last second, whatever the day.
    seen = {(r.player, r.filter) for r in sandbox.app.summary_requests}
    thirty = f"Date:{end_of(NIGHT) + 1 - 30 * 86400}~{end_of(NIGHT)}"
    assert ("José María", f"Class:SNG;{thirty}") in seen
    assert ("José María", f"Class:SNG;Date:1167609600~{end_of(NIGHT)}") in seen

    for table in ("player_statistics", "tournaments", "tournament_entries"):  # listed_at: when the answer came
        assert rows(late, table, NIGHT, drop=("listed_at",)) == rows(on_time, table, NIGHT, drop=("listed_at",)), table
    snapshots = rows(late, "player_snapshots", NIGHT, drop=("fetched_at", "server_time", "last_activity_at", "metadata_hash"))
    assert snapshots == rows(
        on_time, "player_snapshots", NIGHT, drop=("fetched_at", "server_time", "last_activity_at", "metadata_hash")
    )

    # A lake that never saw the night: the summaries are the same; its USD conversions use the
    # only rates the service can give on day N+3 (kept as the night's metadata, and said so).
    fresh = settings_for(sandbox, tmp_path, "fresh", PLAYERS, AS_OF)
    assert run_night(fresh, NIGHT).success
    assert rows(fresh, "player_statistics", NIGHT) == rows(on_time, "player_statistics", NIGHT)
    fresh_rows = rows(fresh, "tournaments", NIGHT, drop=(*RATE_COLUMNS, "listed_at"))
    assert fresh_rows == rows(on_time, "tournaments", NIGHT, drop=(*RATE_COLUMNS, "listed_at"))
    sandbox.world.set_today(NIGHT)


def test_day_windows_add_up_to_the_truth(sandbox, tmp_path: Path) -> None:
    days = [NIGHT + timedelta(days=i) for i in range(5)]
    daily = '  sng_30d: "Class:SNG;Date:30D"\n  all_sng: {filter: "Class:SNG", window: day}'
    settings = settings_for(sandbox, tmp_path, "daily", PLAYERS, daily)
    for day in days:
        sandbox.world.set_today(day)
        report = run_night(settings, day)
        assert report.success, report.failure
    assert run_models(settings).success
    sandbox.world.set_today(days[-1])
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        for network, player in PLAYERS:
            found = con.execute(
                "SELECT count(*), sum(tournaments), sum(profit_usd), max(cumulative_tournaments), arg_max(cumulative_profit_usd, day) "
                "FROM player_daily_results WHERE network = ? AND player = ? AND filter_name = 'all_sng'",
                [network, player],
            ).fetchone()
            expected = truth(sandbox.world, network, player, f"Class:SNG;Date:{start_of(days[0])}~{end_of(days[-1])}")
            assert found[0] == 5  # one row per day
            assert found[1] == int(expected["Count"]) == found[3]
            assert found[2] == pytest.approx(expected.profit_usd, abs=0.005 * 5)  # each day's Profit is served to the cent
            assert found[4] == pytest.approx(found[2])
        sent = {
            f
            for (f,) in con.execute("SELECT DISTINCT filter_sent FROM player_snapshots WHERE filter_name = 'all_sng'").fetchall()
        }
        assert sent == {f"Class:SNG;Date:{start_of(d)}~{end_of(d)}" for d in days}
    finally:
        con.close()
    sandbox.world.set_today(NIGHT)


def _lake_tables(settings: Settings) -> dict[str, tuple[list[date], pa.Table]]:
    """Every lake table's nights and rows, read through its Delta log (a glob of the files would
    also see the parts a replaced night left until they expire)."""
    lake = Lake(settings.data_dir)
    return {table: (lake.tables.nights(table), lake.tables.read_table(table)) for table in TABLES}


def _differences(con: duckdb.DuckDBPyConnection, left: str, right: str) -> int:
    ((count,),) = con.execute(f"SELECT count(*) FROM (SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right})").fetchall()
    return count


def test_rebuild_all_with_the_service_gone_is_identical_and_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nights = [NIGHT, NIGHT + timedelta(days=1)]
    daily = '  sng_30d: "Class:SNG;Date:30D"\n  all_sng: {filter: "Class:SNG", window: day}'
    with running_sandbox(seed=SEED, today=NIGHT) as server:
        settings = settings_for(server, tmp_path, "data", PLAYERS, daily)
        for night in nights:
            server.world.set_today(night)
            assert run_night(settings, night).success
        before = server.accounts.remaining(SANDBOX_USERNAME)
    # The service is gone; any request would fail loudly.
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", lambda *a, **k: pytest.fail("rebuild made a request"))
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", lambda *a, **k: pytest.fail("rebuild made a request"))
    held = _lake_tables(settings)
    shutil.copy(settings.warehouse_path, tmp_path / "original.duckdb")
    ledger_before = ledger_rows(settings)

    outcome = rebuild(settings)
    assert outcome.nights == nights and outcome.fresh_warehouse

    rebuilt = _lake_tables(settings)
    con = duckdb.connect()
    try:
        for table, (dates, rows) in held.items():
            assert rebuilt[table][0] == dates, table
            if not dates:
                continue
            con.register("old_rows", rows)
            con.register("new_rows", rebuilt[table][1])
            assert _differences(con, "old_rows", "new_rows") == 0 == _differences(con, "new_rows", "old_rows"), table
        con.execute(f"ATTACH '{tmp_path / 'original.duckdb'}' AS old (READ_ONLY)")
        con.execute(f"ATTACH '{settings.warehouse_path}' AS new (READ_ONLY)")
        for table in TABLES:
            assert _differences(con, f"old.{table}", f"new.{table}") == 0 == _differences(con, f"new.{table}", f"old.{table}"), (
                table
            )
    finally:
        con.close()
    assert ledger_rows(settings) == ledger_before
    assert before > 0


def test_internal_errors_with_a_logged_out_userinfo_never_stop_the_night(tmp_path: Path) -> None:
    """Error 0 answers carry a logged-out UserInfo (the anonymous allowance, 5 searches): it must
    never be read as the account's count. Every planned player is fetched; the ledger is the bill."""
    from tourneylake.sandbox import Faults

    with running_sandbox(seed=SEED, today=NIGHT, faults=Faults.parse("internal=0.1")) as server:
        settings = settings_for(server, tmp_path, "faulty", PLAYERS, AS_OF, max_attempts=8, reserve_searches=10)
        before = server.accounts.remaining(SANDBOX_USERNAME)
        report = run_night(settings, NIGHT)
        dropped = before - server.accounts.remaining(SANDBOX_USERNAME)
    assert report.success, report.failure
    assert report.value("player_summaries", "players_fetched") == 6
    assert report.value("player_summaries", "deferred") == 0
    assert report.checks["player_summaries:budget_respected"]
    entries = ledger_rows(settings, NIGHT)
    assert any(e["error_code"] == 0 for e in entries)  # the fault did happen
    assert all(e["remaining_after"] is None or e["remaining_after"] > 10 for e in entries)
    assert sum(int(e["cost"]) for e in entries) == dropped == 6
