"""The dbt models on real warehouses, built by real dbt: the views that were ``sql/views.sql``
and kept their meaning give the same rows as that SQL on a harvested warehouse (``EXCEPT ALL``
both ways), their values on the recorded night, and what the build does (contracts, tests, a file
renamed)."""

from __future__ import annotations

import re
import shutil
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pytest

from tests.helpers import DATA, copy_warehouse, harvest_nights, player_line, sandbox_settings
from tests.tables.test_warehouse import NIGHT1, NIGHT2, _write_night
from tourneylake.lake.lake import Lake
from tourneylake.tables import models
from tourneylake.tables.models import ModelsBuild, build_models
from tourneylake.tables.warehouse import Warehouse

pytestmark = pytest.mark.xdist_group("models")

NIGHT = date(2026, 11, 20)
SANDBOX = dict(seed=5, today=NIGHT)
VIEWS = (
    "latest_player_statistics",
    "player_statistics_over_time",
    "player_results_usd",
    "roi_by_stake_usd",
    "player_daily_results",
)
#: Those whose rows are still the old SQL's. The others changed on purpose: USD at the rates of the
#: night a tournament started in (`player_results_usd`, `roi_by_stake_usd`), withheld results NULL
#: with their reason, never 0 (`player_daily_results`): tests/tables/test_analyses.py.
UNCHANGED = ("latest_player_statistics", "player_statistics_over_time")
WATCHLIST = "\n".join(
    [
        "filters:",
        "  sng_30d: 'Class:SNG;Date:30D'",
        "  daily: {filter: 'Type:H', window: day}",
        "players:",
        player_line("PokerStars", "Borbas.Geri", "[sng_30d, daily]"),
        player_line("GGNetwork", "José María", "[daily]"),
        player_line("888Poker(ES-PT)", "Ana Łukasz"),
        player_line("iPoker", "Zoë O'Brien", "[sng_30d]"),
        player_line("GGNetwork", "王小明", "[daily]"),  # CNY: no USD rate in the sandbox
    ]
)


@pytest.fixture(scope="module")
def harvested(sandbox, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ModelsBuild]:
    """Three nights of the sandbox loaded into a warehouse, and its models built."""
    settings = sandbox_settings(sandbox, tmp_path_factory.mktemp("harvested"))
    harvest_nights(sandbox, settings, [NIGHT - timedelta(days=2), NIGHT - timedelta(days=1), NIGHT], WATCHLIST)
    return settings.warehouse_path, build_models(settings.warehouse_path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded summary on two nights (one tournament in SEK, which has no rate), built."""
    folder = tmp_path_factory.mktemp("recorded")
    lake = Lake(folder).claim("sandbox")
    with Warehouse(folder / "warehouse.duckdb") as db:
        for night in (NIGHT1, NIGHT2):
            _write_night(lake, night)
            db.load_night(lake, night)
    assert build_models(folder / "warehouse.duckdb").ok
    return folder / "warehouse.duckdb"


def _old_views() -> str:
    """The SQL the models replace, each view renamed ``old_<name>`` (and read so)."""
    sql = (DATA / "views-before-dbt.sql").read_text(encoding="utf-8")
    return re.sub(rf"\b({'|'.join(VIEWS)})\b", r"old_\1", sql)


def test_the_build_creates_every_model_and_passes_every_test(harvested) -> None:
    _, built = harvested
    assert built.ok, built.statuses
    assert {"success", "pass"} >= set(built.counts), built.counts
    assert set(VIEWS) <= set(built.named("success"))
    assert {"stake_currencies_converted"} <= set(built.named("pass"))


def test_the_models_give_the_rows_of_the_sql_they_replace(harvested, tmp_path: Path) -> None:
    path, _ = harvested
    copy = tmp_path / "compare.duckdb"
    shutil.copyfile(path, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(_old_views())
        for view in UNCHANGED:
            rows = con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
            assert rows > 0, f"{view} is empty: the comparison would prove nothing"
            for a, b in ((view, f"old_{view}"), (f"old_{view}", view)):
                extra = con.execute(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})").fetchone()[0]
                assert extra == 0, f"{a} has {extra} row(s) {b} lacks"


def test_the_views_name_no_catalog_so_a_renamed_file_still_reads(harvested, tmp_path: Path) -> None:
    path, _ = harvested
    moved = tmp_path / "renamed-elsewhere.duckdb"
    shutil.copyfile(path, moved)
    with Warehouse(moved, read_only=True) as db:
        assert db.query("SELECT count(*) AS n FROM player_results_usd").column("n")[0].as_py() > 0
        sql = db.query("SELECT sql FROM duckdb_views() WHERE view_name = 'player_results_usd'").column(0)[0].as_py()
    assert "tournament_entries AS e" in sql and "warehouse" not in sql


def test_the_recorded_night_through_the_views(recorded: Path) -> None:
    with Warehouse(recorded, read_only=True) as db:
        latest = db.query("SELECT * FROM latest_player_statistics WHERE player = 'Borbas.Geri' AND filter_name = ''")
        assert latest.num_rows == 37 and set(latest.column("snapshot_date").to_pylist()) == {NIGHT2}
        over = db.query(
            "SELECT snapshot_date, value_number, change FROM player_statistics_over_time "
            "WHERE statistic = 'Count' AND filter_name = '' ORDER BY snapshot_date"
        ).to_pylist()
        assert [r["snapshot_date"] for r in over] == [NIGHT1, NIGHT2]
        assert over[0]["change"] is None and over[1]["change"] == 0
        results = db.query("SELECT * FROM player_results_usd ORDER BY started_at").to_pylist()
        assert len(results) == 8
        cashed = {r["tournament_id"]: r for r in results if r["cashed"]}
        assert len(cashed) == 2 and cashed["2753613930"]["profit_usd"] == pytest.approx(1.18 - 0.5)
        sek = [r for r in results if r["currency"] == "SEK"][0]
        assert sek["profit"] == pytest.approx(11.37 - 3.5) and sek["profit_usd"] is None and sek["usd_rate_missing"]
        roi = db.query("SELECT * FROM roi_by_stake_usd ORDER BY bucket_min_usd").to_pylist()
        assert sum(r["entries"] for r in roi) == 7 and all(r["entries_without_rate"] == 1 for r in roi)
        small = [r for r in roi if r["stake_bucket_usd"] == "< $1"][0]
        assert small["entries"] == 4 and small["roi_pct"] == pytest.approx((1.18 - 2.0) / 2.0 * 100)
        assert isinstance(small["bucket_min_usd"], float)  # DOUBLE, not DECIMAL: plain floats in Python
        pandas_frame = db.query("SELECT * FROM roi_by_stake_usd", output="pandas")
        assert len(pandas_frame) == len(roi)


def test_the_key_tests_read_the_nights_loaded_since_they_last_passed(harvested, tmp_path: Path) -> None:
    """A relation's key tests read the nights the warehouse loaded since they last all passed: a
    key held twice on a night loaded before is not read, on a night loaded again it is, and a test
    that failed reads its nights again at the next build. Never passed: the latest `tested_nights`."""
    path, _ = harvested
    copy = tmp_path / "keys.duckdb"
    copy_warehouse(path, copy)
    duplicate = "INSERT INTO player_statistics SELECT * FROM player_statistics WHERE snapshot_date = ? LIMIT 1"
    loaded_again = (
        "UPDATE tourneylake_meta.lake_loads SET loaded_at = now() WHERE table_name = 'player_statistics' AND snapshot_date = ?"
    )
    source_test = "source_unique_key_warehouse_player_statistics_snapshot_date__network__player__filter_name__statistic"

    def failed(**variables: int) -> list[str]:  # the table's tests alone: a build of the whole project each is slow
        built = build_models(copy, select="source:warehouse.player_statistics", variables=variables)
        return [name for name in built.named("fail") if name.startswith(source_test)]

    with duckdb.connect(str(copy)) as con:
        con.execute(duplicate, [NIGHT])
    assert failed() == []  # the night was loaded before the tests last passed
    with duckdb.connect(str(copy)) as con:
        con.execute(loaded_again, [NIGHT])
    assert failed() and failed()  # read, and read again by the next build (no load between)
    with duckdb.connect(str(copy)) as con:  # never passed: the latest `tested_nights` nights
        con.execute(
            "DELETE FROM player_statistics WHERE rowid IN (SELECT max(rowid) FROM player_statistics"
            " GROUP BY snapshot_date, network, player, filter_name, statistic HAVING count(*) > 1)"
        )
        con.execute(duplicate, [NIGHT - timedelta(days=2)])
        con.execute("DELETE FROM tourneylake_meta.relations_tested")
    assert failed(tested_nights=2) == []
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM tourneylake_meta.relations_tested")
    assert failed(tested_nights=3)


def test_a_failing_test_is_reported_and_the_views_stay(recorded: Path, tmp_path: Path) -> None:
    copy = tmp_path / "broken.duckdb"
    copy_warehouse(recorded, copy)
    with duckdb.connect(str(copy)) as con:  # a stake neither converted nor flagged
        con.execute("UPDATE tournaments SET stake_usd = NULL, usd_rate_missing = false WHERE tournament_id = '2753613930'")
    built = build_models(copy)
    assert not built.ok and built.named("fail") == ["stake_currencies_converted"]
    assert built.failures[built.unique_ids["stake_currencies_converted"]] == 1
    with Warehouse(copy, read_only=True) as db:
        assert db.query("SELECT count(*) FROM player_results_usd").column(0)[0].as_py() == 8


def test_an_upgraded_incremental_model_is_made_again_from_every_night(tmp_path: Path, monkeypatch) -> None:
    """A model changed by an upgrade: its older nights follow the new code too, not only the
    nights added after it (dbt's state:modified, the models below it included); an unchanged
    project costs no dbt call; a warehouse whose builds were never recorded is made again whole."""
    project = tmp_path / "sql"
    shutil.copytree(models.PROJECT, project, ignore=shutil.ignore_patterns("target"))
    monkeypatch.setattr(models, "PROJECT", project)
    lake = Lake(tmp_path / "lake").claim("sandbox")
    warehouse = tmp_path / "warehouse.duckdb"
    with Warehouse(warehouse) as db:
        for night in (NIGHT1, NIGHT2):
            _write_night(lake, night)
            db.load_night(lake, night)
    incremental = "+config.materialized:incremental"  # and the models they read
    assert build_models(warehouse, select=incremental).refreshed == []

    over_time = project / "models" / "views" / "player_statistics_over_time.sql"
    old = "    type,\n    value,\n    value_number,\n"
    assert over_time.read_text(encoding="utf-8").count(old) == 1
    over_time.write_text(
        over_time.read_text(encoding="utf-8").replace(old, "    type,\n    '~' || value AS value,\n    value_number,\n")
    )
    upgraded = build_models(warehouse, select=incremental)
    assert upgraded.ok and upgraded.refreshed == ["movers", "player_statistics_over_time"]

    def old_rows() -> list[tuple[object, ...]]:
        with Warehouse(warehouse, read_only=True) as db:
            rows = db.query(
                "SELECT snapshot_date, count(*) FILTER (WHERE value NOT LIKE '~%') AS old, count(*) AS rows "
                "FROM player_statistics_over_time GROUP BY ALL ORDER BY ALL"
            ).to_pylist()
        return [(r["snapshot_date"], r["old"], r["rows"] > 0) for r in rows]

    assert old_rows() == [(NIGHT1, 0, True), (NIGHT2, 0, True)]
    with models.incremental_models_current(warehouse) as refreshed:
        assert refreshed == []

    shutil.rmtree(models.target_dir(warehouse) / "built")  # a warehouse of a version that recorded none
    with models.incremental_models_current(warehouse) as refreshed:
        assert refreshed == models.incremental_models()
    assert old_rows() == [(NIGHT1, 0, True), (NIGHT2, 0, True)]


def test_a_warehouse_that_cannot_be_read_is_one_error_line(tmp_path: Path) -> None:
    not_duckdb = tmp_path / "warehouse.duckdb"
    not_duckdb.write_text("not a database")
    with pytest.raises(models.ModelsError, match=r"^cannot read the warehouse .*warehouse\.duckdb to check its models: "):
        build_models(not_duckdb)
