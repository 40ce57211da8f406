"""The DuckDB warehouse: tonight's lake partitions loaded idempotently, checked, queryable."""

from dagster import AssetCheckResult, AssetCheckSpec, AssetExecutionContext, MaterializeResult, asset

from assets.partitions import WAREHOUSE_POOL, nightly_partitions
from assets.report import fails_cleanly, night_of
from assets.resource import TourneylakeResource
from tourneylake.lake import Lake

ROW_COUNTS = {
    "night_snapshot_rows": "player_snapshots",
    "night_statistic_rows": "player_statistics",
}
CHECKS = {
    "tournaments_unique": "One row per (network, tournament_id).",
    "entries_unique": "One row per (network, tournament_id, player).",
    "stake_currencies_converted": "Every stake has a USD amount or is flagged as lacking a rate.",
}


@asset(
    group_name="warehouse",
    kinds={"duckdb", "sql"},
    partitions_def=nightly_partitions,
    pool=WAREHOUSE_POOL,
    deps=["metadata", "countries", "news", "player_summaries"],
    check_specs=[AssetCheckSpec(name, asset="warehouse", description=text) for name, text in CHECKS.items()]
    + [
        AssetCheckSpec(name, asset="warehouse", description=f"The night's {table} rows in DuckDB equal the lake's.")
        for name, table in ROW_COUNTS.items()
    ],
    description="Loads the night into $TOURNEYLAKE_DATA_DIR/warehouse.duckdb (delete-then-insert per night, tournaments merged).",
)
@fails_cleanly
def warehouse(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    night = night_of(context)
    lake = Lake(tourneylake.settings().data_dir)
    with tourneylake.open_warehouse() as db:
        loaded = db.load_night(lake, night)
        counts = db.table_counts()
        violations = {name: db.check(name) for name in CHECKS}
        in_warehouse = {name: db.check(name, {"night": night}) for name in ROW_COUNTS}
    results = [
        AssetCheckResult(check_name=name, passed=found == 0, metadata={"violations": found}) for name, found in violations.items()
    ] + [
        AssetCheckResult(
            check_name=name,
            passed=in_warehouse[name] == loaded.get(table, 0),
            metadata={"warehouse": in_warehouse[name], "lake": loaded.get(table, 0)},
        )
        for name, table in ROW_COUNTS.items()
    ]
    return MaterializeResult(
        metadata={
            "rows_loaded": sum(loaded.values()),
            **{f"loaded_{table}": rows for table, rows in sorted(loaded.items())},
            **{f"total_{table}": rows for table, rows in sorted(counts.items())},
        },
        check_results=results,
    )
