"""The lake's tables are open: after two harvested nights, one of them then replaced, every table
read by Delta's own Python reader (``deltalake``), by Polars and by DuckDB (over Arrow: its delta
extension downloads itself, which this machine cannot) gives the same rows, and the warehouse's
rows as the warehouse keeps them (every night; the latest snapshot of a reference table; one row
a key, the latest, of a deduplicated one). The replaced night's old parts are still on disk (time
travel) and a reader that globs the files would count them twice; none of the three does."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

from tests.helpers import harvest_nights, sandbox_settings
from tourneylake.config import Settings
from tourneylake.lake.lake import Lake
from tourneylake.sandbox import running_sandbox
from tourneylake.schemas import TABLES
from tourneylake.tables.rebuild import rebuild
from tourneylake.tables.warehouse import Warehouse

pytestmark = pytest.mark.slow

NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Two nights harvested and loaded; the first then rebuilt in place (a night replaced)."""
    data = tmp_path_factory.mktemp("open")
    with running_sandbox(seed=4, today=NIGHTS[0]) as server:
        settings = sandbox_settings(server, data)
        harvest_nights(server, settings, NIGHTS)
    rebuild(settings, [NIGHTS[0]])
    return settings


def _canonical(value: Any) -> Any:
    """A value as every reader agrees on it (a map is a list of pairs, whoever read it)."""
    if isinstance(value, dict):
        if set(value) == {"key", "value"}:
            return (_canonical(value["key"]), _canonical(value["value"]))
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _rows(records: list[dict[str, Any]]) -> Counter[Any]:
    return Counter(_canonical(record) for record in records)


def _as_kept(table: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lake's rows as the warehouse keeps them."""
    spec = TABLES[table]
    if spec.load == "reference" and records:
        latest = max(r["snapshot_date"] for r in records)
        return [r for r in records if r["snapshot_date"] == latest]
    if spec.load == "dedup":
        kept: dict[tuple[Any, ...], dict[str, Any]] = {}
        for record in sorted(records, key=lambda r: r["snapshot_date"]):
            kept[tuple(record[k] for k in spec.key)] = record
        return list(kept.values())
    return records


def test_every_reader_sees_the_warehouses_rows_and_no_stale_ones(harvested: Settings) -> None:
    lake = Lake(harvested.data_dir)
    replaced = 0
    with Warehouse(harvested.warehouse_path, read_only=True) as db, duckdb.connect() as con:
        tables = lake.tables.names()
        assert set(TABLES) - set(tables) == {
            "news",
            "coverage_changes",
        }  # every table the nights made (no news asked for, no coverage changed)
        for table in tables:
            uri = lake.tables.uri(table)
            delta = DeltaTable(uri)
            by_delta = delta.to_pyarrow_dataset().to_table().to_pylist()
            by_polars = pl.read_delta(uri).to_arrow().to_pylist()
            dataset = delta.to_pyarrow_dataset()
            con.register("dataset", dataset)
            by_duckdb = con.sql("SELECT * FROM dataset").to_arrow_table().to_pylist()
            assert _rows(by_polars) == _rows(by_delta) == _rows(by_duckdb), table
            warehouse = db.query(f'SELECT * FROM "{table}"').to_pylist()
            assert _rows(_as_kept(table, by_delta)) == _rows(warehouse), table
            on_disk = list(Path(uri, f"snapshot_date={NIGHTS[0]}").glob("*.parquet"))
            replaced += len(on_disk) - len(lake.tables.files(table, NIGHTS[0]))
    assert replaced > 0  # the replaced night's old parts are there: a glob would have counted them twice
