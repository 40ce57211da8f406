"""The DuckDB warehouse loaded from a real lake built from the recorded responses."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest

from tests.helpers import DATA
from tourneylake.api import tree
from tourneylake.errors import LakeError
from tourneylake.lake.lake import Lake
from tourneylake.schemas import TABLES
from tourneylake.tables.normalize import SCHEMAS, Rates, SummaryNormalizer, normalize_metadata, series_types, statistic_types
from tourneylake.tables.warehouse import LOAD_ORDER, Warehouse

NIGHT1 = date(2019, 12, 10)
NIGHT2 = date(2019, 12, 11)


def _write_night(lake: Lake, night: date, *, rename: str | None = None, extra_player: bool = False) -> None:
    meta = tree.parse((DATA / "metadata-with-rates.json").read_bytes(), "json")
    for name, table in normalize_metadata(meta, night).items():
        lake.tables.write(name, night, table)
    raw = orjson.loads((DATA / "recorded" / "player-summary.json").read_bytes())
    tours = raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]["Tournament"]
    tours[5]["@currency"] = "SEK"  # no rate in this metadata
    if rename:
        tours[0]["@name"] = rename
    node = tree.parse(orjson.dumps(raw), "json")
    n = SummaryNormalizer(night, Rates.from_response(meta), statistic_types(meta), series_types(meta))
    fetched = datetime.combine(night, datetime.min.time(), UTC)
    n.add(node, network="PokerStars", player="Borbas.Geri", fetched_at=fetched)
    n.add(node, network="PokerStars", player="Borbas.Geri", filter_name="turbo", filter_expression="Type:T", fetched_at=fetched)
    if extra_player:
        n.add(node, network="PokerStars", player="Someone", fetched_at=fetched)
    for name, table in n.flush().items():
        lake.tables.write(name, night, table)
    ledger = pa.table(
        {
            "called_at": pa.array([fetched, fetched], pa.timestamp("s", tz="UTC")),
            "run_id": ["r1", "r1"],
            "attempt": pa.array([1, 1], pa.int32()),
            "resource": ["nlq", "player_summary"],
            "network": [None, "PokerStars"],
            "player": [None, "Borbas.Geri"],
            "filter_name": ["", ""],
            "cost": pa.array([0, 1], pa.int32()),
            "remaining_after": pa.array([150, 149], pa.int64()),
            "outcome": ["ok", "ok"],
        }
    )
    lake.tables.write("search_ledger", night, ledger)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(tmp_path).claim("sandbox")
    _write_night(lake, NIGHT1)
    return lake


@pytest.fixture
def db(tmp_path: Path):
    with Warehouse(tmp_path / "warehouse.duckdb") as warehouse:
        yield warehouse


def _snapshot(db: Warehouse) -> dict[str, list]:
    # every table's full contents, ordered, for equality checks
    out = {}
    for table in LOAD_ORDER:
        result = db.query("SELECT * FROM query_table($t) ORDER BY ALL", {"t": table})
        out[table] = result.to_pylist()
    return out


def _duplicates(db: Warehouse, table: str) -> int:
    """Keys of a deduplicated table held more than once (the models' `unique_key` tests say the same)."""
    key = ", ".join(TABLES[table].key)
    return len(db.query(f"SELECT {key} FROM {table} GROUP BY ALL HAVING count(*) > 1"))


def test_schema_matches_lake_schemas(db: Warehouse) -> None:
    for table, schema in SCHEMAS.items():
        cols = (
            db.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $t ORDER BY ordinal_position", {"t": table}
            )
            .column(0)
            .to_pylist()
        )
        assert cols == schema.names, table


def test_load_is_idempotent(lake: Lake, db: Warehouse) -> None:
    loaded = db.load_night(lake, NIGHT1)
    assert loaded["player_statistics"] == 74 and loaded["tournaments"] == 8 and loaded["search_ledger"] == 2
    counts = db.table_counts()
    assert counts["player_statistics"] == 74
    assert counts["player_snapshots"] == 2
    assert counts["tournaments"] == 8 and counts["tournament_entries"] == 8
    assert counts["currencies"] == 14 and counts["networks"] == 63
    before = _snapshot(db)
    db.load_night(lake, NIGHT1)
    assert db.table_counts() == counts
    assert _snapshot(db) == before


def test_a_load_reads_only_what_the_night_changed_the_ledger_included(lake: Lake, db: Warehouse, monkeypatch) -> None:
    read: list[tuple[str, date]] = []
    load_table = Warehouse._load_table

    def recorded(self: Warehouse, table: str, night: date, files: list[str]) -> int:
        read.append((table, night))
        return load_table(self, table, night, files)

    monkeypatch.setattr(Warehouse, "_load_table", recorded)
    first = db.load_night(lake, NIGHT1)
    held = {t for t in LOAD_ORDER if lake.tables.nights(t)}
    assert {t for t, _ in read} == held and {n for _, n in read} == {NIGHT1}
    # What each table's night was loaded from, recorded in the load's transaction (one row each).
    recorded = db.query("SELECT table_name, snapshot_date FROM tourneylake_meta.lake_loads").to_pylist()
    assert sorted((r["table_name"], r["snapshot_date"]) for r in recorded) == sorted((t, NIGHT1) for t in held)
    read.clear()
    assert db.load_night(lake, NIGHT1) == first and read == []  # nothing changed: nothing read, the same counts
    _write_night(lake, NIGHT2)
    db.load_night(lake, NIGHT2)
    assert {n for _, n in read} == {NIGHT2} and ("search_ledger", NIGHT2) in read  # not the first night's ledger again
    read.clear()
    # A reconciliation books a dead run's charges into the first night's ledger: the next load reads that night only.
    booked = lake.tables.read_table("search_ledger", NIGHT1).drop_columns(["snapshot_date"])
    extra = booked.slice(0, 1).set_column(
        booked.schema.get_field_index("outcome"), "outcome", pa.array(["reconciled_after_crash"])
    )
    lake.tables.write("search_ledger", NIGHT1, pa.concat_tables([booked, extra]))
    db.load_night(lake, NIGHT2)
    assert read == [("search_ledger", NIGHT1)]
    assert db.query("SELECT count(*) AS n FROM search_ledger").to_pylist() == [{"n": 5}]
    read.clear()
    lake.tables.drop("search_ledger", NIGHT1)  # a night gone from the lake is gone from the warehouse
    db.load_night(lake, NIGHT2, ["search_ledger"])
    assert read == [("search_ledger", NIGHT1)] and db.table_counts()["search_ledger"] == 2


def test_types_in_duckdb(lake: Lake, db: Warehouse) -> None:
    db.load_night(lake, NIGHT1)
    row = db.query(
        "SELECT value_time, typeof(value_time) FROM player_statistics WHERE statistic = 'FirstGameDate' AND filter_name = ''"
    ).to_pylist()[0]
    assert row["typeof(value_time)"] == "TIMESTAMP WITH TIME ZONE"
    assert row["value_time"] == datetime(2012, 7, 4, 0, 1, 41, tzinfo=UTC)
    sek = db.query("SELECT stake, stake_usd, usd_rate_missing FROM tournaments WHERE tournament_id = '2752861824'").to_pylist()[0]
    assert sek == {"stake": 3.16, "stake_usd": None, "usd_rate_missing": True}
    assert _duplicates(db, "tournaments") == 0 and _duplicates(db, "tournament_entries") == 0


def test_dedup_across_nights(lake: Lake, db: Warehouse) -> None:
    db.load_night(lake, NIGHT1)
    _write_night(lake, NIGHT2, rename="Renamed tonight", extra_player=True)
    db.load_night(lake, NIGHT2)
    counts = db.table_counts()
    assert counts["tournaments"] == 8
    # a second requested player served the same summary: the entries are Borbas.Geri's (the served
    # @playerName), so they deduplicate too
    assert counts["tournament_entries"] == 8
    assert counts["player_statistics"] == 74 + 111
    first = db.query("SELECT name, snapshot_date FROM tournaments WHERE tournament_id = '2754430738'").to_pylist()
    assert first == [{"name": "Renamed tonight", "snapshot_date": NIGHT2}]
    # reloading the older night never overwrites the newer rows, and is itself idempotent
    before = _snapshot(db)
    db.load_night(lake, NIGHT1)
    assert _snapshot(db) == before
    # reference tables hold the latest snapshot only; currencies every night's rates (the models convert at the night played)
    assert db.query("SELECT DISTINCT snapshot_date FROM networks").column(0).to_pylist() == [NIGHT2]
    assert db.query("SELECT DISTINCT snapshot_date FROM currencies ORDER BY 1").column(0).to_pylist() == [NIGHT1, NIGHT2]


@pytest.mark.parametrize("loaded_before", [False, True], ids=["empty table", "night already loaded"])
def test_a_key_twice_in_a_partition_is_loaded_once_with_a_warning(
    lake: Lake, tmp_path: Path, caplog: pytest.LogCaptureFixture, loaded_before: bool
) -> None:
    """A night's partition holds each key once (one normaliser wrote it); one that does not (a
    lake written by hand, say) still gives one row per key, and says so."""
    with Warehouse(tmp_path / "clean.duckdb") as clean:
        clean.load_night(lake, NIGHT1)
        expected = _snapshot(clean)
    for table in ("tournaments", "tournament_entries"):
        night = lake.tables.read(table, NIGHT1)
        # the second copy differs (same listing time): the row whose values sort first is loaded
        # (USD before XXX), whatever the order of the parts or rows
        other = night.set_column(night.schema.get_field_index("currency"), "currency", pa.array(["XXX"] * night.num_rows))
        lake.tables.write(table, NIGHT1, pa.concat_tables([other, night]))
    with Warehouse(tmp_path / "twice.duckdb") as db:
        caplog.clear()
        with caplog.at_level("WARNING", logger="tourneylake.tables.warehouse"):
            if loaded_before:
                db.load_night(lake, NIGHT1)
            db.load_night(lake, NIGHT1)  # loaded before: unchanged, not read again
        assert _snapshot(db) == expected
        assert _duplicates(db, "tournaments") == 0 and _duplicates(db, "tournament_entries") == 0
    warnings = sorted(r.getMessage() for r in caplog.records)
    assert warnings == [
        f"tournament_entries, night {NIGHT1}: 8 key(s) more than once in the lake's partition; one row of each is loaded, by content",
        f"tournaments, night {NIGHT1}: 8 key(s) more than once in the lake's partition; one row of each is loaded, by content",
    ]


def _load_settings(db: Warehouse) -> tuple[object, ...]:
    query = "SELECT current_setting('memory_limit'), current_setting('preserve_insertion_order')"
    return tuple(db.connection.execute(query).fetchall()[0])


def test_failed_load_rolls_back(lake: Lake, db: Warehouse, tmp_path: Path) -> None:
    defaults = _load_settings(db)
    db.load_night(lake, NIGHT1)
    assert _load_settings(db) == defaults  # the load's memory bound is the load's only
    before = _snapshot(db)
    # corrupt tonight's tournaments part: the whole night's load must roll back
    _write_night(lake, NIGHT2, rename="Never loaded")
    (part,) = lake.tables.files("tournaments", NIGHT2)
    Path(part).write_bytes(b"not parquet")
    named = f"tournaments/{Path(part).name}"
    with pytest.raises(LakeError, match=f"^{named} is damaged .*tourneylake rebuild --date {NIGHT2}"):
        db.load_night(lake, NIGHT2)
    assert _snapshot(db) == before
    assert _load_settings(db) == defaults


# Made in the test: an instance raised keeps its traceback's frames (and a connection) alive.
@pytest.mark.parametrize(
    ("kind", "words"),
    [(KeyboardInterrupt, ()), (duckdb.InterruptException, ("INTERRUPT Error",)), (RuntimeError, ("Query interrupted",))],
)
def test_an_interrupted_load_is_a_keyboard_interrupt_and_changes_nothing(
    lake: Lake, db: Warehouse, monkeypatch, kind, words
) -> None:
    """Ctrl-C while DuckDB runs a load's query: DuckDB ends the transaction itself and says so in
    its own words; the caller sees a KeyboardInterrupt (not a failed ROLLBACK), the warehouse
    as it was."""
    db.load_night(lake, NIGHT1)
    before = _snapshot(db)
    _write_night(lake, NIGHT2, rename="Never loaded")
    load_table = Warehouse._load_table

    def interrupted(self, table, day, files):
        if table == "tournaments":
            self.connection.execute("ROLLBACK")  # what DuckDB does to an interrupted query's transaction
            raise kind(*words)
        return load_table(self, table, day, files)

    monkeypatch.setattr(Warehouse, "_load_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        db.load_night(lake, NIGHT2)
    assert _snapshot(db) == before


def test_missing_partitions_are_fine(tmp_path: Path, db: Warehouse) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    loaded = db.load_night(lake, NIGHT1)
    assert set(loaded.values()) == {0}
    assert set(db.table_counts().values()) == {0}


def test_read_only_and_reopen(lake: Lake, tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as db:
        db.load_night(lake, NIGHT1)
    with Warehouse(path, read_only=True) as db:
        assert db.table_counts()["tournaments"] == 8
        assert db.query("SELECT count(*) AS n FROM tournaments WHERE currency = ?", ["USD"]).to_pylist() == [{"n": 7}]


def test_query_prints_full_precision_right_aligned_and_writes_csv_and_json(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tourneylake.cli import app

    with Warehouse(tmp_path / "warehouse.duckdb"):
        pass  # an empty warehouse: the query below reads literals
    sql = "SELECT * FROM (VALUES ('a', 0.917264::DOUBLE, 1234567, 1.50::DECIMAL(9,2)), ('b', 2.0, 3, NULL)) t(name, rate, n, usd)"

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, ["query", sql, "--data-dir", str(tmp_path), *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "0.917264" in run("--limit", "1") and "… and 1 more rows" in run("--limit", "1")
    table = run()
    assert "1,234,567" in table and re.search(r"│ {4,}3 │", table)  # numbers right-aligned: "        3", not "3        "
    assert run("--csv").splitlines() == ['"name","rate","n","usd"', '"a",0.917264,1234567,1.50', '"b",2,3,']
    assert [orjson.loads(line) for line in run("--json").splitlines()] == [
        {"name": "a", "rate": 0.917264, "n": 1234567, "usd": 1.5},
        {"name": "b", "rate": 2.0, "n": 3, "usd": None},
    ]
