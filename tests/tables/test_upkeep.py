"""Many nights kept small stay right: the warehouse loaded night by night and its incremental
models built every few nights; nights held in several parts (as a lake written before a night's
table was one part holds them) compacted by delta-rs's optimize on a due night, the parts they
replaced vacuumed; the compacted lake's tables hold what they held, it rebuilds identically, and
every model answers the same from its fresh warehouse (a full build) as the incremental builds did."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake

from tests.helpers import harvest_nights, player_line, sandbox_settings
from tourneylake.lake.lake import Lake
from tourneylake.lake.layout import PARTITION
from tourneylake.sandbox import running_sandbox
from tourneylake.tables.models import build_models, ensure_manifest
from tourneylake.tables.rebuild import rebuild
from tourneylake.tables.warehouse import LOAD_ORDER, Warehouse

pytestmark = [pytest.mark.xdist_group("upkeep"), pytest.mark.slow]

NIGHTS = [date(2026, 10, 1) + timedelta(days=i) for i in range(8)]
PLAYERS = 20
#: The nights written again in several parts, and the tables they are written in.
SPLIT_NIGHTS = NIGHTS[1:7:2]
#: The models' look-back for a statistic's previous harvest (a dbt var), shorter than the players' gap.
LOOKBACK = {"statistics_lookback_nights": 2}
SPLIT_TABLES = ("player_statistics", "player_snapshots", "tournament_entries", "search_ledger", "currencies")


def lake_tables(lake: Lake) -> dict[str, pa.Table]:
    """Every table of the lake, every night, its rows in one order."""
    out = {}
    for name in lake.tables.names():
        table = lake.tables.read_table(name)
        flat = [column for column in table.column_names if not pa.types.is_nested(table.schema.field(column).type)]
        out[name] = table.sort_by([(column, "ascending") for column in flat])
    return out


def answers(warehouse: Path, relations: list[str]) -> dict[str, list[tuple]]:
    """Every row of each relation, in one order; doubles to 9 significant digits (sums may add
    in another order)."""
    out = {}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for relation in relations:
            columns = con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [relation],
            ).fetchall()
            shown = [
                f'CASE WHEN "{c}" = 0 THEN 0 ELSE round("{c}", 9 - ceil(log10(abs("{c}")))::INTEGER) END'
                if t == "DOUBLE"
                else f'"{c}"'
                for c, t in columns
            ]
            out[relation] = con.execute(f"SELECT {', '.join(shown)} FROM {relation} ORDER BY ALL").fetchall()
    return out


def models() -> list[str]:
    import orjson

    manifest = orjson.loads(ensure_manifest().read_bytes())
    return sorted(n["name"] for n in manifest["nodes"].values() if n["resource_type"] == "model")


def split(lake: Lake, table: str, night: date, parts: int = 3, change: Callable[[pa.Table], pa.Table] | None = None) -> int:
    """The night of ``table`` written again in ``parts`` parts (the same rows, or as ``change``
    makes them: one commit replaces the night with the first share, the others add theirs); how
    many parts it holds."""
    rows = lake.tables.read_table(table, night)
    rows = change(rows) if change else rows
    rows = rows.select([c for c in rows.column_names if c != PARTITION]).append_column(PARTITION, rows[PARTITION])
    share = -(-rows.num_rows // parts)
    for i in range(parts):
        write_deltalake(
            lake.tables.uri(table),
            rows.slice(i * share, share),
            mode="overwrite" if i == 0 else "append",
            predicate=f"{PARTITION} = '{night.isoformat()}'" if i == 0 else None,
            partition_by=[PARTITION],
        )
    return len(lake.tables.files(table, night))


@pytest.fixture(scope="module")
def year(tmp_path_factory: pytest.TempPathFactory):
    """8 nights of 20 players harvested from the sandbox's living world and loaded night by
    night, four of them left out of the watchlist for three nights; the models built after the
    first three nights (a full build), the next three and the last two (incremental builds, the
    left-out players' previous harvest older than the models look back); then some nights of
    some tables written again in several parts."""
    data = tmp_path_factory.mktemp("upkeep")
    with running_sandbox(seed=11, today=NIGHTS[0], players=PLAYERS) as server:
        settings = sandbox_settings(server, data, concurrency=4)
        roster = server.world.roster(PLAYERS)
        for first, last, players in ((0, 3, roster), (3, 6, roster[4:]), (6, 8, roster)):
            watchlist = "filters:\n  daily: {filter: 'Class:SNG', window: day}\nplayers:\n" + "\n".join(
                player_line(network, name, "[daily]" if i < 6 else "[]") for i, (network, name) in enumerate(players)
            )
            harvest_nights(server, settings, NIGHTS[first:last], watchlist)
            assert build_models(settings.warehouse_path, variables=LOOKBACK).ok
    lake = Lake(settings.data_dir)
    for night in SPLIT_NIGHTS:
        for table in SPLIT_TABLES:
            assert split(lake, table, night) > 1
    return settings


def test_compaction_and_vacuum_keep_every_row_and_every_answer(year, tmp_path: Path) -> None:
    settings = year
    lake = Lake(settings.data_dir)
    relations = [*LOAD_ORDER, *models()]
    before_tables = lake_tables(lake)
    before_answers = answers(settings.warehouse_path, relations)
    assert all(
        before_answers[name] for name in ("player_entries", "leaderboard", "movers", "player_daily_results", "computed_vs_served")
    )

    # A night that is not due compacts nothing; a due one compacts every earlier night of
    # several parts, and the parts they replace are vacuumed (no past version kept: 0 days).
    last = NIGHTS[-1]
    due = last + timedelta(days=7 - last.toordinal() % 7)
    assert lake.tables.upkeep(due - timedelta(days=1), 0, 7)["compacted"] == 0
    kept = lake.tables.upkeep(due, 0, 7)
    assert kept["compacted"] >= len(SPLIT_NIGHTS) * len(SPLIT_TABLES) * 2 and kept["expired"] >= kept["compacted"]
    for table in SPLIT_TABLES:
        parts = lake.tables.parts(table)
        assert all(len(found) == 1 for found in parts.values()), table
        on_disk = list((settings.data_dir / "lake" / table).glob(f"{PARTITION}=*/*.parquet"))
        assert len(on_disk) == len(parts)  # nothing left behind
    assert lake.tables.upkeep(due, 0, 7)["compacted"] == 0
    assert lake_tables(lake).keys() == before_tables.keys()
    for name, table in lake_tables(lake).items():
        assert table.equals(before_tables[name]), name

    # The warehouse loaded incrementally sees the compacted nights' new parts as a change: loading
    # the last night again reloads what it must and leaves every table as it was.
    with Warehouse(settings.warehouse_path) as db:
        db.load_night(lake, last)
        assert set(SPLIT_NIGHTS) <= set(db.reloaded["search_ledger"])  # the whole table: every night whose parts changed
    assert answers(settings.warehouse_path, list(LOAD_ORDER)) == {t: before_answers[t] for t in LOAD_ORDER}

    # A fresh warehouse loaded night by night from the compacted lake holds the same tables (the
    # models are views and functions of them: the rebuild below builds them again).
    fresh = tmp_path / "fresh.duckdb"
    with Warehouse(fresh) as db:
        for night in NIGHTS:
            db.load_night(lake, night)
    assert answers(fresh, list(LOAD_ORDER)) == {t: before_answers[t] for t in LOAD_ORDER}

    # The compacted lake rebuilds identically: every table from the raw answers, the warehouse
    # and its models made again.
    outcome = rebuild(settings)
    assert outcome.nights == NIGHTS and not outcome.unusable
    for name, table in lake_tables(lake).items():
        assert table.equals(before_tables[name]), name
    assert answers(settings.warehouse_path, relations) == before_answers

    # A night rebuilt in place reaches the incremental model: its rows there are made again at
    # the next build (here they were damaged first, to tell a row made again from one kept).
    with duckdb.connect(str(settings.warehouse_path)) as con:
        con.execute("UPDATE player_statistics_over_time SET change = 12345 WHERE snapshot_date >= ?", [NIGHTS[6]])
    rebuild(settings, [NIGHTS[6]])
    assert build_models(settings.warehouse_path, variables=LOOKBACK).ok
    assert answers(settings.warehouse_path, relations) == before_answers


def test_a_night_loaded_again_is_made_again_from_its_parts_alone(year) -> None:
    """The incremental models make again the nights from the first one whose parts the load read
    anew (the load's record against the one each model kept of its last build) and no earlier
    one: the nights before it are not read (damaged here, they stay so), the nights from it on
    answer as before, and a row such a night no longer gives is gone."""
    settings = year
    lake = Lake(settings.data_dir)
    night, earlier = NIGHTS[4], NIGHTS[2]
    before = answers(settings.warehouse_path, ["player_statistics_over_time"])["player_statistics_over_time"]
    with duckdb.connect(str(settings.warehouse_path)) as con:  # to tell a row made again from one kept; a row no night gives
        con.execute("UPDATE player_statistics_over_time SET change = 12345 WHERE snapshot_date IN ?", [[earlier, night]])
        con.execute(
            "INSERT INTO movers SELECT * REPLACE ('Gone' AS player, $night AS snapshot_date) FROM movers LIMIT 1",
            {"night": night},
        )
    assert build_models(settings.warehouse_path, variables=LOOKBACK).ok  # no night loaded since: nothing made again
    assert damaged_nights(settings.warehouse_path) == [earlier, night]
    assert gone_rows(settings.warehouse_path) == 1

    assert split(lake, "player_statistics", night) > 1  # the same rows in new parts
    with Warehouse(settings.warehouse_path) as db:
        db.load_night(lake, night)
        assert db.reloaded["player_statistics"] == [night]
    assert build_models(settings.warehouse_path, variables=LOOKBACK).ok
    assert damaged_nights(settings.warehouse_path) == [earlier]
    assert gone_rows(settings.warehouse_path) == 0
    after = answers(settings.warehouse_path, ["player_statistics_over_time"])["player_statistics_over_time"]
    assert [row for row in after if row[0] >= night] == [row for row in before if row[0] >= night]


def test_entries_that_changed_make_again_the_windows_they_started_in(year) -> None:
    """`computed_vs_served` makes again the windows of the players whose entries changed (here one
    player's profits of a night, written again in new parts), every night's window that ends on or
    after the first day changed; the entries listed again unchanged (the other players' of that
    night) make nothing again (the windows damaged here stay so)."""
    settings = year
    lake = Lake(settings.data_dir)
    late = NIGHTS[6]
    with duckdb.connect(str(settings.warehouse_path)) as con:
        con.execute("UPDATE computed_vs_served SET computed_entries = -1")
        query = (
            "SELECT player, min(day) FROM player_entries WHERE snapshot_date = ? AND started_at IS NOT NULL GROUP BY 1 ORDER BY 1"
        )
        listed = dict(con.execute(query, [late]).fetchall())
        served = "SELECT DISTINCT player FROM fixed_window_summaries WHERE served AND player = ? AND window_end >= ?"
        player = next(p for p, since in listed.items() if con.execute(served, [p, since]).fetchall())

    def more_profit(rows: pa.Table) -> pa.Table:
        profit = pc.if_else(pc.equal(rows["player"], player), pc.add(rows["profit"], 1), rows["profit"])
        return rows.set_column(rows.column_names.index("profit"), "profit", profit)

    assert split(lake, "tournament_entries", late, change=more_profit) > 1
    with Warehouse(settings.warehouse_path) as db:
        db.load_night(lake, late)
        assert db.reloaded["tournament_entries"] == [late]
    assert build_models(settings.warehouse_path, variables=LOOKBACK).ok
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        made_again = con.execute(
            "SELECT player, snapshot_date, filter_name FROM computed_vs_served WHERE computed_entries <> -1 ORDER BY ALL"
        ).fetchall()
        windows = con.execute(
            "SELECT player, snapshot_date, filter_name FROM fixed_window_summaries WHERE served AND player = ? AND window_end >= ? ORDER BY ALL",
            [player, listed[player]],
        ).fetchall()
    assert len(listed) > 1 and windows and made_again == windows


def damaged_nights(warehouse: Path) -> list[date]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        query = "SELECT DISTINCT snapshot_date FROM player_statistics_over_time WHERE change = 12345 ORDER BY 1"
        return [row[0] for row in con.execute(query).fetchall()]


def gone_rows(warehouse: Path) -> int:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute("SELECT count(*) FROM movers WHERE player = 'Gone'").fetchone()[0]


def test_the_latest_statistics_follow_a_night_loaded_again_without_some(year) -> None:
    """A night loaded again without a player's statistics: each takes its latest older row; a
    statistic the night held and no night holds now leaves the model; the model answers as its
    whole query over every night does."""
    settings = year
    lake = Lake(settings.data_dir)
    last = NIGHTS[-1]
    rows = lake.tables.read_table("player_statistics", last)
    player = rows["player"][0].as_py()
    kept = rows.filter(pc.not_equal(rows["player"], player))
    kept = kept.select([c for c in kept.column_names if c != PARTITION]).append_column(PARTITION, kept[PARTITION])
    write_deltalake(
        lake.tables.uri("player_statistics"),
        kept,
        mode="overwrite",
        predicate=f"{PARTITION} = '{last}'",
        partition_by=[PARTITION],
    )
    with duckdb.connect(str(settings.warehouse_path)) as con:  # as if the night had held one more statistic
        con.execute(
            "INSERT INTO latest_player_statistics SELECT * REPLACE ('Gone' AS statistic, $night AS snapshot_date) "
            "FROM latest_player_statistics LIMIT 1",
            {"night": last},
        )
    with Warehouse(settings.warehouse_path) as db:
        db.load_night(lake, last)
    assert build_models(settings.warehouse_path, variables=LOOKBACK).ok

    whole = """
        SELECT * FROM player_statistics
        QUALIFY row_number() OVER (PARTITION BY network, player, filter_name, statistic ORDER BY snapshot_date DESC) = 1
    """
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        held = con.execute("SELECT snapshot_date FROM latest_player_statistics WHERE player = ?", [player]).fetchall()
        assert held and all(night < last for (night,) in held)
        assert con.execute("SELECT count(*) FROM latest_player_statistics WHERE statistic = 'Gone'").fetchone() == (0,)
        for one, other in (("latest_player_statistics", f"({whole})"), (f"({whole})", "latest_player_statistics")):
            assert con.execute(f"SELECT count(*) FROM (FROM {one} EXCEPT ALL FROM {other})").fetchone() == (0,)
