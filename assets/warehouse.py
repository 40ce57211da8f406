"""The DuckDB warehouse: tonight's lake partitions loaded idempotently, checked, queryable.

One step materialises the warehouse file and, as assets of their own (generated from the table
catalogue and ``sql/views.sql``), each of its tables and views: row counts and column schemas in
the catalog, lineage from the lake asset that fills each table, and the checks on the tables
they are about. The file's materialisation summarises the load in one table.
"""

import re

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    multi_asset,
)

from assets.partitions import WAREHOUSE_POOL, nightly_partitions
from assets.report import fails_cleanly, night_of
from assets.resource import TourneylakeResource
from tourneylake.lake.lake import Lake
from tourneylake.lake.partitions import expire_versions
from tourneylake.schemas import TABLES, duckdb_type
from tourneylake.tables.normalize.summary import SUMMARY_TABLES
from tourneylake.tables.warehouse import LOAD_ORDER, sql_dir

FILE = AssetKey("warehouse")
LAKE_ASSETS = ["metadata", "countries", "news", "player_summaries"]


def table_key(name: str) -> AssetKey:
    return AssetKey(["warehouse", name])


def _lake_asset(table: str) -> str:
    """The lake asset whose step writes ``table`` (the ledger is written by the harvest)."""
    if table in SUMMARY_TABLES or table == "search_ledger":
        return "player_summaries"
    return table if table in ("countries", "news") else "metadata"


def _views() -> dict[str, list[str]]:
    """Each view of ``sql/views.sql`` and the warehouse tables (or views) it reads."""
    text = (sql_dir() / "views.sql").read_text()
    bodies = re.split(r"(?im)^CREATE OR REPLACE VIEW\s+", text)[1:]
    views: dict[str, list[str]] = {}
    for body in bodies:
        name = body.split()[0]
        read = set(re.findall(r"(?i)\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_]*)", body))
        views[name] = sorted(read & (set(LOAD_ORDER) | set(views)))
    return views


VIEWS = _views()

# Checks on the tables they are about: (table, what it promises).
TABLE_CHECKS = {
    "tournaments_unique": ("tournaments", "One row per (network, tournament_id)."),
    "entries_unique": ("tournament_entries", "One row per (network, tournament_id, player)."),
    "stake_currencies_converted": ("tournaments", "Every stake has a USD amount or is flagged as lacking a rate."),
}
# The night's rows in DuckDB equal the lake's: check name → table.
ROW_COUNTS = {"night_snapshot_rows": "player_snapshots", "night_statistic_rows": "player_statistics"}

SUMMARY_SCHEMA = TableSchema(
    columns=[
        TableColumn("table", "string", description="warehouse table"),
        TableColumn("loaded", "int", description="rows read from the lake for this night"),
        TableColumn("rows", "int", description="rows in the warehouse after the load"),
    ]
)


def _table_spec(name: str) -> AssetSpec:
    spec = TABLES[name]
    columns = [TableColumn(column, duckdb_type(dtype), description=text) for column, dtype, text in spec.columns]
    return AssetSpec(
        table_key(name),
        deps=[_lake_asset(name)],
        group_name="warehouse",
        kinds={"duckdb"},
        description=f"{spec.doc} (one row: {spec.grain}).",
        metadata={"dagster/column_schema": TableSchema(columns=columns), "load": spec.load},
        skippable=True,
    )


def _view_spec(name: str, reads: list[str]) -> AssetSpec:
    return AssetSpec(
        table_key(name),
        deps=[table_key(read) for read in reads],
        group_name="warehouse",
        kinds={"duckdb", "sql"},
        description=f"View over {', '.join(reads)} (sql/views.sql).",
        skippable=True,
    )


@multi_asset(
    specs=[
        AssetSpec(
            FILE,
            deps=LAKE_ASSETS,
            group_name="warehouse",
            kinds={"duckdb"},
            description="The night loaded into the DuckDB warehouse (delete-then-insert per night, deduplicated tables merged).",
        ),
        *(_table_spec(name) for name in LOAD_ORDER),
        *(_view_spec(name, reads) for name, reads in VIEWS.items()),
    ],
    check_specs=[AssetCheckSpec(name, asset=table_key(table), description=text) for name, (table, text) in TABLE_CHECKS.items()]
    + [
        AssetCheckSpec(name, asset=table_key(table), description=f"The night's {table} rows in DuckDB equal the lake's.")
        for name, table in ROW_COUNTS.items()
    ],
    partitions_def=nightly_partitions,
    pool=WAREHOUSE_POOL,
    name="warehouse",
)
@fails_cleanly
def warehouse(context: AssetExecutionContext, tourneylake: TourneylakeResource):
    night = night_of(context)
    lake = Lake(tourneylake.settings().data_dir)
    with tourneylake.open_warehouse() as db:
        loaded = db.load_night(lake, night)
        counts = db.table_counts()
        views = {name: db.describe(name) for name in VIEWS}
        violations = {name: db.check(name) for name in TABLE_CHECKS}
        in_warehouse = {name: db.check(name, {"night": night}) for name in ROW_COUNTS}
    yield MaterializeResult(
        asset_key=FILE,
        metadata={
            "rows_loaded": sum(loaded.values()),
            # the lake tables' versions older than the setting's days, their files deleted once the night is loaded
            "lake_files_expired": expire_versions(lake, tourneylake.settings().table_history_days),
            "tables": MetadataValue.table(
                [TableRecord({"table": t, "loaded": loaded.get(t, 0), "rows": counts[t]}) for t in LOAD_ORDER], SUMMARY_SCHEMA
            ),
        },
    )
    for name in LOAD_ORDER:
        yield MaterializeResult(
            asset_key=table_key(name), metadata={"dagster/row_count": counts[name], "loaded_tonight": loaded.get(name, 0)}
        )
    for name, (rows, columns) in views.items():
        schema = TableSchema(columns=[TableColumn(column, kind) for column, kind in columns])
        yield MaterializeResult(asset_key=table_key(name), metadata={"dagster/row_count": rows, "dagster/column_schema": schema})
    for name, found in violations.items():
        yield AssetCheckResult(
            asset_key=table_key(TABLE_CHECKS[name][0]), check_name=name, passed=found == 0, metadata={"violations": found}
        )
    for name, table in ROW_COUNTS.items():
        yield AssetCheckResult(
            asset_key=table_key(table),
            check_name=name,
            passed=in_warehouse[name] == loaded.get(table, 0),
            metadata={"warehouse": in_warehouse[name], "lake": loaded.get(table, 0)},
        )
