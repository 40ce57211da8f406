"""The DuckDB warehouse: tonight's lake partitions loaded idempotently, checked, queryable.

One step materialises the warehouse file and, as assets of their own (generated from the table
catalogue), each of its tables: row counts and column schemas in the catalog, lineage from the
lake asset that fills each table, and the load's checks (the night's rows in DuckDB equal the
lake's). The file's materialisation summarises the load in one table. The views over the tables
are the dbt models (``tourneylake.assets.models``), downstream of these assets; the tables' own data tests
(keys, conversions) are dbt tests too.
"""

from concurrent.futures import ThreadPoolExecutor

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

from tourneylake.assets.nights import nightly_partitions
from tourneylake.assets.pools import WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly, night_of
from tourneylake.night.status import night_bytes, record_load
from tourneylake.schemas import TABLES, duckdb_type
from tourneylake.tables.normalize.summary import SUMMARY_TABLES
from tourneylake.tables.warehouse import LOAD_ORDER

FILE = AssetKey("warehouse")
LAKE_ASSETS = ["metadata", "countries", "news", "player_summaries"]


def table_key(name: str) -> AssetKey:
    return AssetKey(["warehouse", name])


def _lake_asset(table: str) -> str:
    """The lake asset whose step writes ``table`` (the ledger is written by the harvest)."""
    if table in SUMMARY_TABLES or table == "search_ledger":
        return "player_summaries"
    return table if table in ("countries", "news") else "metadata"


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
    ],
    check_specs=[
        AssetCheckSpec(name, asset=table_key(table), description=f"The night's {table} rows in DuckDB equal the lake's.")
        for name, table in ROW_COUNTS.items()
    ],
    partitions_def=nightly_partitions,
    pool=WAREHOUSE_POOL,
    name="warehouse",
)
@fails_cleanly
def warehouse(context: AssetExecutionContext, tourneylake: TourneylakeResource):
    night, lake = night_of(context), tourneylake.lake()
    # Beside the load, which reads only the tables' current versions: the night's bytes, then the
    # tables' upkeep (compaction when due, the expiry of the versions older than the setting's
    # days: it never touches a current part).
    settings = tourneylake.settings()
    with ThreadPoolExecutor(1, thread_name_prefix="tourneylake-upkeep") as upkeep:
        size = upkeep.submit(night_bytes, lake, night)
        kept = upkeep.submit(lake.tables.upkeep, night, settings.table_history_days, settings.compaction_days)
        with tourneylake.open_warehouse() as db:
            loaded = db.load_night(lake, night)
            counts = db.table_counts()
            in_warehouse = {name: db.night_rows(table, night) for name, table in ROW_COUNTS.items()}
        record_load(lake, night, context.run.run_id, loaded, size=size.result())
    yield MaterializeResult(
        asset_key=FILE,
        metadata={
            "rows_loaded": sum(loaded.values()),
            "lake_parts_compacted": kept.result()["compacted"],
            "lake_files_expired": kept.result()["expired"],
            "tables": MetadataValue.table(
                [TableRecord({"table": t, "loaded": loaded.get(t, 0), "rows": counts[t]}) for t in LOAD_ORDER], SUMMARY_SCHEMA
            ),
        },
    )
    for name in LOAD_ORDER:
        yield MaterializeResult(
            asset_key=table_key(name), metadata={"dagster/row_count": counts[name], "loaded_tonight": loaded.get(name, 0)}
        )
    for name, table in ROW_COUNTS.items():
        yield AssetCheckResult(
            asset_key=table_key(table),
            check_name=name,
            passed=in_warehouse[name] == loaded.get(table, 0),
            metadata={"warehouse": in_warehouse[name], "lake": loaded.get(table, 0)},
        )
