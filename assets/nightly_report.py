"""The nightly report (``tourneylake.report``) as an asset: the HTML page of the latest night,
written after the models it reads, its path and a preview shown in the UI."""

from typing import Any

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from tourneylake.assets.pools import WAREHOUSE_POOL
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import fails_cleanly
from tourneylake.assets.warehouse import table_key
from tourneylake.report import Report, write_report

#: The models the report reads (its upstream assets).
READS = ("leaderboard", "movers", "bill_nightly", "bill_monthly", "player_results_by_period", "player_entries")


@asset(
    group_name="reports",
    kinds={"html"},
    deps=[table_key(model) for model in READS],
    pool=WAREHOUSE_POOL,  # reads the file: never while a night's load writes it
    description="The latest night's HTML report beside the warehouse (`reports/<night>.html`): leaderboard, movers, "
    "the bill and a page per player.",
)
@fails_cleanly
def nightly_report(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    settings = tourneylake.settings()
    written = write_report(settings.warehouse_path, watchlist=settings.watchlist)
    context.log.info("report of the night of %s: %s", written.night, written.path)
    return MaterializeResult(metadata=report_metadata(written))


def report_metadata(written: Report) -> dict[str, Any]:
    """The report's metadata in Dagster: its page, night, counts and a preview."""
    return {
        "path": MetadataValue.path(str(written.path)),
        "night": written.night.isoformat(),
        "player_pages": written.player_pages,
        "movers": written.counts["movers"],
        "ranked_this_month": written.counts["ranked"],
        "preview": MetadataValue.md(written.preview),
    }
