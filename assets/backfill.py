"""A backfill too large to pay for is refused by its paying steps, before any search.

Dagster launches a backfill's runs itself (one per night, from the daemon, all of them submitted
before the first is dequeued), each tagged with the backfill's id, so the check sits where every
one of them passes before it spends: the harvest step. The backfill's nights are those of its
runs (the instance's run records); when :func:`tourneylake.night.forecast.backfill_refusal`
refuses, the step fails with that one line, and so does each of the backfill's other runs,
none of them spending a search.
"""

from __future__ import annotations

from datetime import date

from dagster import AssetExecutionContext, Failure, RunsFilter

from tourneylake.night.forecast import backfill_refusal
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist

BACKFILL_TAG = "dagster/backfill"  # set by Dagster on every run a backfill launches
PARTITION_TAG = "dagster/partition"


def refuse_oversized_backfill(context: AssetExecutionContext, session: Session, watchlist: Watchlist) -> None:
    """Fail this step when the run belongs to a backfill of more nights, or searches, than the
    settings allow."""
    backfill_id = context.run.tags.get(BACKFILL_TAG)
    if backfill_id is None:
        return
    why = backfill_refusal(session, watchlist, backfill_nights(context, backfill_id))
    if why is not None:
        raise Failure(description=why, allow_retries=False)


def backfill_nights(context: AssetExecutionContext, backfill_id: str) -> list[date]:
    """The nights of the backfill's runs, this run's among them."""
    runs = context.instance.get_run_records(RunsFilter(tags={BACKFILL_TAG: backfill_id}))
    names = {record.dagster_run.tags.get(PARTITION_TAG) for record in runs} | {context.partition_key}
    return sorted(date.fromisoformat(name) for name in names if name)
