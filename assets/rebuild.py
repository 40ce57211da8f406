"""Rebuild a night from the lake's raw answers (the ``rebuild`` job): no network call, 0 searches.

An op, not an asset: it makes the night's existing assets again (the lake tables and the
warehouse) rather than a new one. Partitioned by night, so a range of nights is a backfill of
this job in the UI.
"""

from dagster import OpExecutionContext, op

from tourneylake.assets.pools import WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly, listing, night_of
from tourneylake.tables.rebuild import rebuild


# The warehouse's pool: a rebuild reloads the DuckDB file, which one writer at a time may hold.
@op(
    pool=WAREHOUSE_POOL,
    description="Re-normalise the night's tables from lake/_raw and reload it into the warehouse (no request).",
)
@fails_cleanly
def rebuild_night(context: OpExecutionContext, tourneylake: TourneylakeResource) -> None:
    night = night_of(context)
    outcome = rebuild(tourneylake.settings(), [night])
    context.add_output_metadata(
        {
            "rows": sum(outcome.rows.values()),
            **{f"rows_{name}": n for name, n in sorted(outcome.rows.items())},
            "answers_still_unusable": listing(outcome.unusable),
        }
    )
