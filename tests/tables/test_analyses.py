"""The analyses coaches use, against values computed by hand on a small fixed warehouse: a few
tournaments and entries written row by row into a real DuckDB file, one real ``dbt build``.

The rows (USD unless said; buy-in = stake + rake, profit = prize − buy-in):

    tournament  start (UTC)        buy-in         entrants  seats  flags
    T1          Mon 2026-03-02     10 + 1 = 11    100       9      T (Turbo)
    T2          Tue 2026-03-03 23:30  20 + 2 = 22  50        9      -
    T3          Tue 2026-03-10     5 + 0.5 = 5.5  10        6      ST (Super Turbo)
    T4          Wed 2026-04-01     0 (freeroll)   200       9      -
    T5          Thu 2026-03-05     3 XXX (no USD rate)  20  9      -

    T6          Tue 2026-03-10     EUR 100 + 10   200       9      -     (EUR per USD: 0.8 on 10 March, 0.9 on 11 March)
    T7          Thu 2026-03-05     EUR 30 + 3     6         6      -     (before the first night: 10 March's rates)
    T8          Wed 2026-03-11 01:00  2 + 0.2     6         6      6MX   (one table: no final table)

    alice: T1 1st (prize 300), T2 30th, T3 2nd (prize 15), T4 150th, T5 5th (prize 10 XXX)
    bob:   T1 8th (prize 20), T2 5th (prize 44)
    carol: T1 50th
    erin:  T6 3rd (prize EUR 400, listed again by the night of 11 March at its rates), T7 6th, T8 5th
    dave:  the service withholds his results (not authorised): no entries, every statistic NULL

The models build with the time zone Asia/Tokyo (UTC+9, no summer time) for the hour of the week.
"""

from __future__ import annotations

import math
import statistics
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tourneylake.tables.models import ModelsBuild, build_models
from tourneylake.tables.warehouse import Warehouse

pytestmark = pytest.mark.xdist_group("models")

NET = "TestNet"
NIGHT1, NIGHT2 = date(2026, 3, 10), date(2026, 3, 11)
TOURNAMENTS = {  # id: (start, currency, stake, rake, usd_rate, entrants, seats, flags, class, structure)
    "T1": (datetime(2026, 3, 2, 10, tzinfo=UTC), "USD", 10.0, 1.0, 1.0, 100, 9, ["T"], "sng", "NL"),
    "T2": (datetime(2026, 3, 3, 23, 30, tzinfo=UTC), "USD", 20.0, 2.0, 1.0, 50, 9, [], "scheduled", "PL"),
    "T3": (datetime(2026, 3, 10, 12, tzinfo=UTC), "USD", 5.0, 0.5, 1.0, 10, 6, ["ST"], "sng", "NL"),
    "T4": (datetime(2026, 4, 1, 18, tzinfo=UTC), "USD", 0.0, 0.0, 1.0, 200, 9, [], "scheduled", "NL"),
    "T5": (datetime(2026, 3, 5, 9, tzinfo=UTC), "XXX", 3.0, 0.0, None, 20, 9, [], "sng", "NL"),
    "T6": (datetime(2026, 3, 10, 20, tzinfo=UTC), "EUR", 100.0, 10.0, 0.9, 200, 9, [], "scheduled", "NL"),
    "T7": (datetime(2026, 3, 5, 12, tzinfo=UTC), "EUR", 30.0, 3.0, 0.9, 6, 6, [], "sng", "NL"),
    "T8": (datetime(2026, 3, 11, 1, tzinfo=UTC), "USD", 2.0, 0.2, 1.0, 6, 6, ["6MX"], "sng", "NL"),
}
#: The metadata rates of each night (units per USD): the warehouse keeps every night's.
RATES = {NIGHT1: {"USD": 1.0, "EUR": 0.8}, NIGHT2: {"USD": 1.0, "EUR": 0.9}}
ENTRIES = [  # (player, tournament, position, prize or None)
    ("alice", "T1", 1, 300.0),
    ("alice", "T2", 30, None),
    ("alice", "T3", 2, 15.0),
    ("alice", "T4", 150, None),
    ("alice", "T5", 5, 10.0),
    ("bob", "T1", 8, 20.0),
    ("bob", "T2", 5, 44.0),
    ("carol", "T1", 50, None),
    ("erin", "T6", 3, 400.0),
    ("erin", "T7", 6, None),
    ("erin", "T8", 5, None),
]
#: Entries listed again by the second night (their rows carry that night's rates, as the lake's do).
LISTED_AGAIN = {("erin", "T6"), ("erin", "T7")}
MIN_ENTRIES = 2  # the leaderboard's minimum, passed as a dbt var (the default is 10)
TIME_ZONE = "Asia/Tokyo"


def _usd(amount: float | None, rate: float | None) -> float | None:
    return None if amount is None or rate is None else amount / rate


def _tournament_rows() -> list[dict]:
    rows = []
    for tid, (start, currency, stake, rake, rate, entrants, seats, flags, klass, structure) in TOURNAMENTS.items():
        rows.append(
            dict(snapshot_date=NIGHT1, network=NET, tournament_id=tid, name=f"Tournament {tid}", started_at=start,
                 currency=currency, stake=stake, rake=rake, buy_in=stake + rake, stake_usd=_usd(stake, rate),
                 rake_usd=_usd(rake, rate), buy_in_usd=_usd(stake + rake, rate), total_entrants=entrants,
                 players_per_table=seats, flags=flags, game="H", game_class=klass, structure=structure,
                 usd_rate=rate, usd_rate_missing=rate is None)
        )  # fmt: skip
    return rows


def _entry_rows() -> list[dict]:
    rows = []
    for player, tid, position, prize in ENTRIES:
        _, currency, stake, rake, rate, *_ = TOURNAMENTS[tid]
        profit = (prize or 0.0) - stake - rake
        night = NIGHT2 if (player, tid) in LISTED_AGAIN else NIGHT1
        rows.append(
            dict(snapshot_date=night, network=NET, tournament_id=tid, player=player, position=position,
                 cashed=bool(prize), prize=prize, prize_usd=_usd(prize, rate), currency=currency, stake=stake,
                 rake=rake, profit=profit, profit_usd=_usd(profit, rate), usd_rate=rate, usd_rate_missing=rate is None)
        )  # fmt: skip
    return rows


def _currency_rows() -> list[dict]:
    return [
        dict(snapshot_date=night, iso=iso, rate=rate, rate_known=True)
        for night, rates in RATES.items()
        for iso, rate in rates.items()
    ]


def _epoch(day: date, end: bool = False) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) + (86399 if end else 0)


def _snapshot_rows() -> list[dict]:
    """Summaries: alice and bob on two nights (for movers); day windows for computed-vs-served."""
    rows = [
        dict(snapshot_date=night, network=NET, player=player, filter_name="", filter_window="as_of", anchored=True,
             filter_sent=f"Date:1167609600~{_epoch(night, end=True)}", found=True, tournament_count=30)
        for night in (NIGHT1, NIGHT2) for player in ("alice", "bob")
    ]  # fmt: skip
    for player, day, listed in (("alice", date(2026, 3, 3), 1), ("bob", date(2026, 3, 3), 1), ("carol", date(2026, 3, 2), 2)):
        sent = f"Date:{_epoch(day)}~{_epoch(day, end=True)}"
        rows.append(dict(snapshot_date=NIGHT1, network=NET, player=player, filter_name="daily", filter_window="day",
                         anchored=True, filter_sent=sent, found=True, tournament_count=listed))  # fmt: skip
    rows.append(dict(snapshot_date=NIGHT2, network=NET, player="alice", filter_name="daily", filter_window="day", anchored=True,
                     filter_sent=f"Date:{_epoch(NIGHT2)}~{_epoch(NIGHT2, end=True)}", found=True, tournament_count=3))  # fmt: skip
    for night in (NIGHT1, NIGHT2):  # dave: found, every statistic withheld
        rows.append(dict(snapshot_date=night, network=NET, player="dave", filter_name="daily", filter_window="day", anchored=True,
                         filter_sent=f"Date:{_epoch(night)}~{_epoch(night, end=True)}", found=True, tournament_count=0))  # fmt: skip
    rows.append(dict(snapshot_date=NIGHT1, network=NET, player="alice", filter_name="sng", filter_window="day",
                     anchored=True, filter_sent=f"Class:SNG;Date:{_epoch(date(2026, 3, 2))}~{_epoch(date(2026, 3, 2), end=True)}",
                     found=True, tournament_count=1))  # fmt: skip
    return rows


def _statistic_rows() -> list[dict]:
    values = {  # (night, player, filter): {statistic: value}
        (NIGHT1, "alice", ""): {"AvROI": 10.0, "Count": 100.0, "Profit": 0.0, "ITM": 20.0},
        (NIGHT2, "alice", ""): {"AvROI": 15.0, "Count": 101.0, "Profit": 5.0, "ITM": 20.0},
        (NIGHT1, "alice", "daily"): {
            "Count": 1.0,
            "TotalROI": -100.0,
            "AvROI": -100.0,
            "ITM": 0.0,
            "Profit": -22.0,
            "Stake": 20.0,
            "Rake": 2.0,
        },
        (NIGHT2, "alice", "daily"): {"Count": 3.0, "Profit": 30.0, "Stake": 15.0, "Rake": 1.5},
        (NIGHT1, "bob", "daily"): {"Count": 1.0, "TotalROI": 100.0, "AvROI": 100.0, "ITM": 100.0},
        (NIGHT1, "carol", "daily"): {"Count": 2.0, "TotalROI": -100.0, "AvROI": -100.0, "ITM": 0.0},  # one entry in the lake
        (NIGHT1, "alice", "sng"): {"Count": 7.0, "TotalROI": 1.0, "AvROI": 1.0, "ITM": 1.0},  # Class: not comparable
    }
    withheld = [
        dict(snapshot_date=night, network=NET, player="dave", filter_name="daily", statistic=statistic, authorized=False)
        for night in (NIGHT1, NIGHT2) for statistic in ("Count", "Profit", "Stake", "Rake", "AvROI")
    ]  # fmt: skip
    return [
        dict(snapshot_date=night, network=NET, player=player, filter_name=name, statistic=statistic,
             value=str(value), value_number=value, authorized=True,
             value_usd=value if statistic in ("Profit", "Stake", "Rake") else None)
        for (night, player, name), stats in values.items() for statistic, value in stats.items()
    ] + withheld  # fmt: skip


LEDGER = [  # (night, account, resource, player, filter, attempt, cost, outcome)
    (NIGHT1, None, "player_summary", "alice", "", 1, 1, "ok"),
    (NIGHT1, None, "player_summary", "bob", "", 1, 0, "transport_error"),
    (NIGHT1, None, "player_summary", "bob", "", 2, 1, "ok"),
    (NIGHT1, None, "nlq", None, "", 1, 1, "ok"),
    (NIGHT1, None, "unattributed", None, "", 0, 2, "reconciled"),
    (NIGHT2, "main", "player_summary", "alice", "", 1, 1, "ok"),
]


def _ledger_rows() -> list[dict]:
    return [
        dict(snapshot_date=night, called_at=datetime(night.year, night.month, night.day, 3, i, tzinfo=UTC), run_id=f"r{night.day}",
             resource=resource, network=NET if player else None, player=player, filter_name=name, attempt=attempt,
             cost=cost, outcome=outcome, account=account)
        for i, (night, account, resource, player, name, attempt, cost, outcome) in enumerate(LEDGER)
    ]  # fmt: skip


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    types = dict(
        con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()
    )
    batch = pa.Table.from_pylist(rows)  # noqa: F841 (read by DuckDB by name)
    casts = ", ".join(f'CAST("{name}" AS {types[name]}) AS "{name}"' for name in rows[0])
    con.execute(f"INSERT INTO {table} BY NAME SELECT {casts} FROM batch")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelsBuild]:
    path = tmp_path_factory.mktemp("analyses") / "warehouse.duckdb"
    with Warehouse(path) as db:
        con = db.connection
        _insert(con, "currencies", _currency_rows())
        _insert(con, "tournaments", _tournament_rows())
        _insert(con, "tournament_entries", _entry_rows())
        _insert(con, "player_snapshots", _snapshot_rows())
        _insert(con, "player_statistics", _statistic_rows())
        _insert(con, "search_ledger", _ledger_rows())
        speeds = [("T", "Turbo"), ("ST", "Super Turbo"), ("N", "Normal"), ("D", "Deep Stack")]
        _insert(
            con,
            "filter_options",
            [dict(snapshot_date=NIGHT1, constraint_id="Type", option_id=o, name=n, type="Speed") for o, n in speeds],
        )
    return path, build_models(path, variables={"leaderboard_min_entries": MIN_ENTRIES, "time_zone": TIME_ZONE})


@pytest.fixture
def con(built) -> duckdb.DuckDBPyConnection:
    """A reader in another time zone: the models' days, weeks and months are UTC whatever the session's."""
    path, _ = built
    with duckdb.connect(str(path), read_only=True) as connection:
        connection.execute("SET TimeZone = 'America/Los_Angeles'")
        yield connection


def _one(con: duckdb.DuckDBPyConnection, sql: str, *params: object) -> dict:
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    assert len(rows) == 1, rows
    return dict(zip(names, rows[0], strict=True))


#: alice's ROI per paid entry (T1, T2, T3, T5; T4 a freeroll): T5's, in XXX, needs no USD rate.
ALICE_ROI = [289 / 11 * 100, -100.0, 9.5 / 5.5 * 100, 7 / 3 * 100]


def test_the_build_passes_and_warns_where_the_lake_lacks_an_entry(built) -> None:
    _, result = built
    assert result.named("error", "fail", "skipped") == [], result.statuses
    assert result.named("warn") == ["computed_matches_served"]  # carol's day: served 2 entries, the lake holds 1


def test_entries_buy_ins_abi_profit_and_both_rois(con) -> None:
    alice = _one(con, "SELECT * FROM player_results_by_period WHERE player = 'alice' AND period = 'all'")
    assert alice["period_start"] is None
    assert (alice["entries"], alice["entries_in_usd"], alice["entries_without_rate"]) == (5, 4, 1)
    assert alice["buy_ins_usd"] == pytest.approx(11 + 22 + 5.5 + 0)
    assert alice["abi_usd"] == pytest.approx(38.5 / 4)
    assert alice["profit_usd"] == pytest.approx(289 - 22 + 9.5 + 0)
    assert alice["total_roi_pct"] == pytest.approx(276.5 / 38.5 * 100)  # the ROI of the totals: 718.2
    assert alice["paid_entries"] == 4
    assert alice["avg_roi_pct"] == pytest.approx(733.3333)  # the mean of the entries' ROIs: (2627.3 − 100 + 172.7 + 233.3) / 4
    assert alice["avg_roi_pct"] != pytest.approx(alice["total_roi_pct"])


def test_the_roi_interval_and_the_small_sample_flag(con) -> None:
    alice = _one(con, "SELECT * FROM player_results_by_period WHERE player = 'alice' AND period = 'all'")
    sd = statistics.stdev(ALICE_ROI)  # the sample sd (n − 1)
    se = sd / math.sqrt(4)
    assert alice["roi_sd_pct"] == pytest.approx(sd) and alice["roi_se_pct"] == pytest.approx(se)
    assert alice["roi_ci_low_pct"] == pytest.approx(statistics.mean(ALICE_ROI) - 1.96 * se)
    assert alice["roi_ci_high_pct"] == pytest.approx(statistics.mean(ALICE_ROI) + 1.96 * se)
    assert alice["roi_sample_too_small"] is True  # 4 paid entries < 30
    carol = _one(con, "SELECT * FROM player_results_by_period WHERE player = 'carol' AND period = 'all'")
    assert carol["avg_roi_pct"] == pytest.approx(-100.0) and carol["roi_sd_pct"] is None and carol["roi_ci_low_pct"] is None


def test_itm_wins_and_the_finish_distribution(con) -> None:
    alice = _one(con, "SELECT * FROM player_results_by_period WHERE player = 'alice' AND period = 'all'")
    assert alice["cashes"] == 3 and alice["itm_pct"] == pytest.approx(60.0)  # T1, T3, T5 (prize > 0) of 5
    assert alice["wins"] == 1
    assert alice["final_tables"] == 3  # T1 1st of 9 seats, T3 2nd of 6, T5 5th of 9
    assert alice["top_10pct_finishes"] == 1  # T1 only (T3: ⌈10 × 0.1⌉ = 1 place)
    distribution = [alice[f"finish_{k}"] for k in ("won", "final_table", "top_10pct", "cashed", "out")]
    assert distribution == [1, 2, 0, 0, 2] and sum(distribution) == alice["entries"]
    beaten = [99 / 99, 20 / 49, 8 / 9, 50 / 199, 15 / 19]
    assert alice["field_beaten_pct"] == pytest.approx(100 * sum(beaten) / 5)
    assert alice["active_days"] == 5 and alice["avg_field_size"] == pytest.approx((100 + 50 + 10 + 200 + 20) / 5)


def test_periods_are_utc_days_iso_weeks_and_months(con) -> None:
    day = _one(con, "SELECT day, week, month FROM player_entries WHERE player = 'alice' AND tournament_id = 'T2'")
    assert day == {"day": date(2026, 3, 3), "week": date(2026, 3, 2), "month": date(2026, 3, 1)}  # 23:30 UTC, read from LA
    rows = con.execute(
        "SELECT period, period_start, entries FROM player_results_by_period WHERE player = 'alice' AND period <> 'day' ORDER BY ALL"
    ).fetchall()
    assert rows == [
        ("all", None, 5),
        # rolling windows end at the latest night held (11 March): T4 (1 April) is after it
        ("last_30_days", date(2026, 2, 10), 4),
        ("last_365_days", date(2025, 3, 12), 4),
        ("last_7_days", date(2026, 3, 5), 2),  # T5 (5 March) and T3 (10 March)
        ("last_90_days", date(2025, 12, 12), 4),
        ("month", date(2026, 3, 1), 4),
        ("month", date(2026, 4, 1), 1),
        ("week", date(2026, 3, 2), 3),  # T1 Mon, T2 Tue, T5 Thu
        ("week", date(2026, 3, 9), 1),
        ("week", date(2026, 3, 30), 1),  # Wednesday 1 April: its ISO week starts on Monday 30 March
        ("year", date(2026, 1, 1), 5),
    ]


def test_the_leaderboard_ranks_only_players_with_the_minimum_entries(con) -> None:
    rows = con.execute(
        "SELECT player, entries, qualified, min_entries, rank_by_profit, rank_by_entries FROM leaderboard "
        "WHERE period = 'all' ORDER BY player"
    ).fetchall()
    assert rows == [
        ("alice", 5, True, MIN_ENTRIES, 2, 1),  # $276.50
        ("bob", 2, True, MIN_ENTRIES, 3, 3),  # $31
        ("carol", 1, False, MIN_ENTRIES, None, None),
        ("dave", None, False, MIN_ENTRIES, None, None),  # withheld: NULL, never ranked as a zero
        ("erin", 3, True, MIN_ENTRIES, 1, 2),  # $319.05
    ]
    march = con.execute(
        "SELECT player, rank_by_roi FROM leaderboard WHERE period = 'month' AND period_start = '2026-03-01' AND qualified ORDER BY player"
    ).fetchall()
    # alice in March: (289 − 22 + 9.5) / 38.5 = 718 %; erin: 319.05 / 181.45 = 176 %; bob: 31 / 33 = 94 %
    assert march == [("alice", 1), ("bob", 3), ("erin", 2)]


def test_two_players_side_by_side(con) -> None:
    pair = _one(con, "SELECT * FROM player_comparison WHERE player_a = 'alice' AND player_b = 'bob' AND period = 'all'")
    bob = [9 / 11 * 100, 22 / 22 * 100]
    assert (pair["entries_a"], pair["entries_b"]) == (5, 2)
    assert pair["avg_roi_pct_b"] == pytest.approx(statistics.mean(bob))
    se = math.sqrt((statistics.stdev(ALICE_ROI) / math.sqrt(4)) ** 2 + (statistics.stdev(bob) / math.sqrt(2)) ** 2)
    difference = statistics.mean(ALICE_ROI) - statistics.mean(bob)
    assert pair["avg_roi_difference_pct"] == pytest.approx(difference)
    assert pair["avg_roi_difference_ci_low_pct"] == pytest.approx(difference - 1.96 * se)
    assert pair["difference_is_clear"] is (difference - 1.96 * se > 0)


def test_breakdowns_by_stake_speed_class_and_network(con) -> None:
    def bucket(dimension: str, name: str, scope: str = "watchlist", player: str | None = None) -> dict:
        where = "player IS NULL" if player is None else f"player = '{player}'"
        return _one(
            con,
            f"SELECT * FROM player_breakdowns WHERE scope = ? AND dimension = ? AND bucket = ? AND {where}",
            scope,
            dimension,
            name,
        )

    stake = bucket("stake_bucket", "$11–30")  # T1 (11, three entries) and T2 (22, two)
    assert stake["entries"] == 5 and stake["profit_usd"] == pytest.approx(289 + 9 - 11 - 22 + 22)
    assert stake["total_roi_pct"] == pytest.approx(100 * 287 / (3 * 11 + 2 * 22))
    assert bucket("stake_bucket", "freeroll")["entries"] == 1 and bucket("stake_bucket", "no USD rate")["entries"] == 1
    assert bucket("speed", "Turbo")["entries"] == 3 and bucket("speed", "Super Turbo")["entries"] == 1
    assert bucket("speed", "Normal")["entries"] == 7  # alice's T2, T4, T5, bob's T2, erin's three
    assert bucket("game_class", "sng", "player", "alice")["entries"] == 3
    assert bucket("network", NET)["entries"] == len(ENTRIES)


def test_movers_rank_what_moved_most_since_the_previous_night(con) -> None:
    rows = con.execute(
        "SELECT statistic, previous_value_number, change, change_pct, nights_apart, mover_rank FROM movers "
        "WHERE player = 'alice' AND filter_name = '' AND snapshot_date = ? ORDER BY mover_rank",
        [NIGHT2],
    ).fetchall()
    assert rows == [
        ("AvROI", 10.0, 5.0, pytest.approx(50.0), 1, 1),
        ("Count", 100.0, 1.0, pytest.approx(1.0), 1, 2),
        ("Profit", 0.0, 5.0, None, 1, 3),  # from 0: no relative change, ranked after those that have one
    ]  # ITM did not move: not a mover


def test_the_bill_adds_up_to_the_ledger(con) -> None:
    ledger = {night: sum(r[6] for r in LEDGER if r[0] == night) for night in (NIGHT1, NIGHT2)}
    nightly = dict(con.execute("SELECT night, sum(searches)::INTEGER FROM bill_nightly GROUP BY night").fetchall())
    assert nightly == ledger == {NIGHT1: 5, NIGHT2: 1}
    summary = _one(con, "SELECT * FROM bill_nightly WHERE night = ? AND resource = 'player_summary'", NIGHT1)
    assert (summary["attempts"], summary["retries"], summary["failed_attempts"], summary["searches"]) == (3, 1, 1, 2)
    assert summary["pairs_harvested_that_night"] == 7  # alice, bob unfiltered; four daily windows; alice's sng
    reconciled = _one(con, "SELECT searches, searches_reconciled FROM bill_nightly WHERE resource = 'unattributed'")
    assert reconciled == {"searches": 2, "searches_reconciled": 2}
    by_player = con.execute("SELECT night, account, player, searches FROM bill_by_player ORDER BY ALL").fetchall()
    assert by_player == [(NIGHT1, "", "alice", 1), (NIGHT1, "", "bob", 1), (NIGHT2, "main", "alice", 1)]
    monthly = con.execute(
        "SELECT account, searches, player_searches, players, searches_per_player_month FROM bill_monthly ORDER BY account"
    ).fetchall()
    assert monthly == [("", 5, 2, 2, 1.0), ("main", 1, 1, 1, 1.0)]
    assert sum(m[1] for m in monthly) == sum(r[6] for r in LEDGER)


def test_computed_beside_served_for_day_windows(con) -> None:
    rows = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT player, served_entries, computed_entries, listed_all, computed_total_roi_pct, served_total_roi_pct, "
            "computed_itm_pct, usd_at_own_rates FROM computed_vs_served WHERE filter_name = 'daily' AND snapshot_date = ?",
            [NIGHT1],
        ).fetchall()
    }
    assert rows["alice"] == (1, 1, True, pytest.approx(-100.0), -100.0, 0.0, True)
    assert rows["bob"] == (1, 1, True, pytest.approx(100.0), 100.0, 100.0, True)
    assert rows["carol"][:3] == (2, 1, True)  # the lake lacks one of carol's entries: the test warns
    assert con.execute("SELECT count(*) FROM computed_vs_served WHERE filter_name = 'sng'").fetchone()[0] == 0
    alltime = _one(
        con,
        "SELECT listed_all, computed_entries, usd_at_own_rates FROM computed_vs_served "
        "WHERE player = 'alice' AND filter_name = '' AND snapshot_date = ?",
        NIGHT1,
    )
    # T4 starts after the night; Count 100 > 30 listed; T5 has no USD rate, so its total ROI is not compared
    assert alltime == {"listed_all": False, "computed_entries": 4, "usd_at_own_rates": False}


def test_a_day_filters_served_results_add_up_per_period(con) -> None:
    week = _one(
        con, "SELECT * FROM filter_results_by_period WHERE player = 'alice' AND filter_name = 'daily' AND period = 'week'"
    )
    # nights 10 and 11 March (a Tuesday and a Wednesday): one ISO week
    assert (week["period_start"], week["days_harvested"], week["entries"]) == (date(2026, 3, 9), 2, 4)
    assert week["buy_ins_usd"] == pytest.approx(22 + 16.5) and week["profit_usd"] == pytest.approx(-22 + 30)
    assert week["abi_usd"] == pytest.approx(38.5 / 4) and week["total_roi_pct"] == pytest.approx(100 * 8 / 38.5)


def test_usd_is_at_the_rates_of_the_night_the_tournament_started(con) -> None:
    """erin's T6 started on 10 March and was listed again by the night of 11 March, whose row
    carries that night's rate: the models convert at 10 March's (EUR 0.8 per USD), whichever
    night listed it. T7 started before the first night held: the first night's rates, flagged."""
    rows = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT tournament_id, snapshot_date, usd_rate, usd_rate_night, usd_rate_of_another_night, buy_in_usd, prize_usd, "
            "profit_usd FROM player_results_usd WHERE player = 'erin'"
        ).fetchall()
    }
    assert rows["T6"] == (
        NIGHT2,
        0.8,
        NIGHT1,
        False,
        pytest.approx(110 / 0.8),
        pytest.approx(400 / 0.8),
        pytest.approx(290 / 0.8),
    )
    assert rows["T7"] == (NIGHT2, 0.8, NIGHT1, True, pytest.approx(33 / 0.8), None, pytest.approx(-33 / 0.8))
    assert rows["T8"] == (NIGHT1, 1.0, NIGHT2, False, pytest.approx(2.2), None, pytest.approx(-2.2))  # USD: rate 1
    erin = _one(con, "SELECT profit_usd, buy_ins_usd FROM player_results_by_period WHERE player = 'erin' AND period = 'all'")
    assert erin["profit_usd"] == pytest.approx(290 / 0.8 - 33 / 0.8 - 2.2)
    t5 = _one(con, "SELECT usd_rate, usd_rate_missing, profit_usd FROM player_results_usd WHERE tournament_id = 'T5'")
    assert t5 == {"usd_rate": None, "usd_rate_missing": True, "profit_usd": None}  # no rate for XXX, never guessed


def test_withheld_results_are_null_with_their_reason_and_counted(con) -> None:
    days = con.execute(
        "SELECT day, tournaments, profit_usd, buy_ins_usd, withheld, withheld_reason, cumulative_days_withheld "
        "FROM player_daily_results WHERE player = 'dave' ORDER BY day"
    ).fetchall()
    assert days == [(NIGHT1, None, None, None, True, "not_authorized", 1), (NIGHT2, None, None, None, True, "not_authorized", 2)]
    alice = _one(
        con,
        "SELECT tournaments, withheld, withheld_reason FROM player_daily_results WHERE player = 'alice' AND filter_name = 'daily' AND day = ?",
        NIGHT1,
    )
    assert alice == {"tournaments": 1, "withheld": False, "withheld_reason": None}
    week = _one(
        con,
        "SELECT days_harvested, days_withheld, entries, profit_usd FROM filter_results_by_period WHERE player = 'dave' AND period = 'week'",
    )
    assert week == {"days_harvested": 2, "days_withheld": 2, "entries": None, "profit_usd": None}  # not 0 tournaments, not $0
    board = _one(
        con,
        "SELECT entries, profit_usd, nights_withheld, withheld_reason, players_withheld FROM leaderboard WHERE player = 'dave' AND period = 'all'",
    )
    assert board == {
        "entries": None,
        "profit_usd": None,
        "nights_withheld": 2,
        "withheld_reason": "not_authorized",
        "players_withheld": 1,
    }
    withheld = con.execute("SELECT snapshot_date, statistics_withheld FROM player_summaries_withheld ORDER BY ALL").fetchall()
    assert withheld == [(night, ["AvROI", "Count", "Profit", "Rake", "Stake"]) for night in (NIGHT1, NIGHT2)]


def test_days_won_and_lost_and_the_longest_run_of_each(con) -> None:
    days = con.execute(
        "SELECT day, profit_usd, day_result, run_days FROM player_days WHERE player = 'alice' ORDER BY day"
    ).fetchall()
    assert days == [
        (date(2026, 3, 2), pytest.approx(289.0), "won", 1),
        (date(2026, 3, 3), pytest.approx(-22.0), "lost", 1),
        (date(2026, 3, 5), None, None, None),  # T5 only, no USD rate: no result
        (date(2026, 3, 10), pytest.approx(9.5), "won", 1),
        (date(2026, 4, 1), 0.0, "even", 1),  # a freeroll out of the money
    ]
    alice = _one(con, "SELECT * FROM player_results_by_period WHERE player = 'alice' AND period = 'all'")
    assert (alice["winning_days"], alice["losing_days"], alice["break_even_days"]) == (2, 1, 1)
    assert (alice["longest_winning_run_days"], alice["longest_losing_run_days"]) == (1, 1)
    erin = con.execute("SELECT day, day_result, run_days FROM player_days WHERE player = 'erin' ORDER BY day").fetchall()
    assert erin == [(date(2026, 3, 5), "lost", 1), (date(2026, 3, 10), "won", 1), (date(2026, 3, 11), "lost", 1)]
    bob = _one(
        con, "SELECT winning_days, longest_winning_run_days FROM player_results_by_period WHERE player = 'bob' AND period = 'all'"
    )
    assert bob == {"winning_days": 2, "longest_winning_run_days": 2}  # 2 and 3 March, both won: a run of two
    bob_days = con.execute(
        "SELECT day, run_days, run_started_on FROM player_days WHERE player = 'bob' AND day_result = 'won' ORDER BY day"
    ).fetchall()
    assert bob_days == [(date(2026, 3, 2), 1, date(2026, 3, 2)), (date(2026, 3, 3), 2, date(2026, 3, 2))]
    by_day = con.execute(
        "SELECT period_start, longest_winning_run_days FROM player_results_by_period "
        "WHERE player = 'bob' AND period = 'day' AND winning_days > 0 ORDER BY period_start"
    ).fetchall()
    assert by_day == [(date(2026, 3, 2), 1), (date(2026, 3, 3), 1)]  # the run cut at each day's bounds


def test_a_final_table_needs_a_field_larger_than_one_table(con) -> None:
    finishes = dict(con.execute("SELECT tournament_id, finish FROM player_entries WHERE player = 'erin'").fetchall())
    assert finishes == {"T6": "final_table", "T7": "out", "T8": "out"}  # 5th and 6th of a 6-max sit'n'go: out, not final table
    assert con.execute(
        "SELECT bool_or(final_table) FROM player_entries WHERE total_entrants <= players_per_table"
    ).fetchone() == (False,)
    t3 = _one(con, "SELECT finish, final_table, field_beaten_pct FROM player_entries WHERE tournament_id = 'T3'")
    assert t3 == {
        "finish": "final_table",
        "final_table": True,
        "field_beaten_pct": pytest.approx(800 / 9),
    }  # 2nd of 10 at 6 seats


def test_breakdowns_by_field_size_hour_of_the_week_and_month(con) -> None:
    def buckets(dimension: str) -> dict:
        return dict(
            con.execute(
                "SELECT bucket, entries FROM player_breakdowns WHERE scope = 'player' AND player = 'alice' AND dimension = ?",
                [dimension],
            ).fetchall()
        )

    assert buckets("field_size") == {"46–100": 2, "19–45": 1, "10–18": 1, "181–500": 1}  # 100, 50; 20; 10; 200
    # Asia/Tokyo (UTC+9): T1 Mon 10:00 UTC is Mon 19:00; T2 Tue 23:30 UTC is Wed 08:30
    hours = buckets("hour_of_week")
    assert hours["Mon 19:00"] == 1 and hours["Wed 08:00"] == 1
    hour = _one(con, "SELECT hour_of_week FROM player_entries WHERE player = 'alice' AND tournament_id = 'T2'")
    assert hour == {"hour_of_week": 2 * 24 + 8}
    assert buckets("month") == {"2026-03": 4, "2026-04": 1}


def test_every_table_is_counted_per_night(built) -> None:
    """`rows_per_night` reads every warehouse table: each table's tests run (and show) with the models."""
    from tourneylake.schemas import TABLES
    from tourneylake.tables.models import manifest_document

    (node,) = [n for n in manifest_document()["nodes"].values() if n["name"] == "rows_per_night"]
    assert {uid.rsplit(".", 1)[-1] for uid in node["depends_on"]["nodes"]} == set(TABLES)
