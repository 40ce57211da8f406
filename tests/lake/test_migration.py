"""A lake of the first layout (``tests/data/legacy-lake``, made by the code before the lake's
tables were Delta tables) converted by ``tourneylake rebuild --all`` with the service gone: no
request, no search, and every table identical to what that code made (``EXCEPT ALL``, both ways),
in the lake and in the warehouse. Until then a harvest is refused with the command to run."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import httpx
import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from tests.helpers import DATA, ledger_rows
from tourneylake.cli import app
from tourneylake.config import Settings
from tourneylake.errors import LakeError
from tourneylake.lake.lake import LAYOUT, Lake
from tourneylake.schemas import TABLES
from tourneylake.tables.rebuild import NothingToRebuild, rebuild

LEGACY = DATA / "legacy-lake"


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(LEGACY / "lake", data / "lake")
    return data


def _differences(con: duckdb.DuckDBPyConnection, left: str, right: str) -> int:
    ((count,),) = con.execute(f"SELECT count(*) FROM (SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right})").fetchall()
    return int(count)


def _the_same(con: duckdb.DuckDBPyConnection, old: str, new: str) -> bool:
    """The same rows in the old table's columns (a column added since, e.g. the ledger's
    ``quota_day``, is left out)."""
    columns = ", ".join(f'"{name}"' for name in con.sql(f"SELECT * FROM {old}").columns)
    new = f"(SELECT {columns} FROM {new})"
    return _differences(con, old, new) == 0 == _differences(con, new, old)


def test_rebuild_all_converts_a_lake_of_the_first_layout_at_no_cost(legacy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first_layout = Lake(legacy).tables.legacy()
    assert set(TABLES) - set(first_layout) == {"coverage_changes"}  # the one table that came after that layout
    ledger_before = ledger_rows(Settings(data_dir=legacy))
    assert ledger_before and sum(row["cost"] for row in ledger_before) == 10
    with pytest.raises(NothingToRebuild, match="rebuild --all"):
        rebuild(Settings(data_dir=legacy), [min(Lake(legacy).raw.nights())])
    # The service is gone: any request would fail the test.
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", lambda *a, **k: pytest.fail("the migration made a request"))
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", lambda *a, **k: pytest.fail("a request"))

    result = CliRunner().invoke(app, ["rebuild", "--all", "--data-dir", str(legacy)])
    assert result.exit_code == 0, result.output

    lake = Lake(legacy)
    assert lake.tables.legacy() == [] and lake._source_document()["layout"] == LAYOUT
    assert ledger_rows(Settings(data_dir=legacy)) == ledger_before  # nothing was paid for
    con = duckdb.connect()
    try:
        for table in first_layout:
            old = f"read_parquet('{LEGACY / 'lake' / table}/*/*.parquet', hive_partitioning = true)"
            con.register("converted", DeltaTable(lake.tables.uri(table)).to_pyarrow_dataset())
            assert _the_same(con, old, "converted"), table
        con.execute(f"ATTACH '{legacy / 'warehouse.duckdb'}' AS new (READ_ONLY)")
        for table in first_layout:
            # The first layout's warehouse kept the latest night of `currencies`; it now keeps every night's rates.
            latest = "WHERE snapshot_date = (SELECT max(snapshot_date) FROM new.currencies)" if table == "currencies" else ""
            assert _the_same(
                con, f"read_parquet('{LEGACY / 'warehouse' / table}.parquet')", f"(SELECT * FROM new.{table} {latest})"
            ), table
    finally:
        con.close()
    assert not list((lake.root / "_tmp").iterdir())  # the first layout's tables are gone once converted


def test_a_harvest_on_a_lake_of_the_first_layout_says_how_to_convert_it(legacy: Path) -> None:
    with pytest.raises(LakeError, match=r"run `tourneylake rebuild --all` once to convert"):
        Lake(legacy).claim(str(Lake(legacy).source))
