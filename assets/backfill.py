"""A backfill too large to pay for is refused by its first paying step, before any search.

Dagster launches a backfill's runs itself (one per night, from the daemon), so the check sits
where every one of them passes before it spends: the harvest step. The backfill's nights are
read from the instance (a job backfill lists them; an asset backfill targets a subset per
asset); when :func:`tourneylake.night.forecast.backfill_refusal` refuses, the backfill is
cancelled, so its other runs are not launched, and the step fails with that one line.
"""

from __future__ import annotations

from datetime import date

from dagster import AssetExecutionContext, Failure

# Not exported by Dagster's top level: the backfill record the UI's cancel button updates.
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

from tourneylake.night.forecast import backfill_refusal
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist

BACKFILL_TAG = "dagster/backfill"  # set by Dagster on every run a backfill launches


def refuse_oversized_backfill(context: AssetExecutionContext, session: Session, watchlist: Watchlist) -> None:
    """Fail this step (and cancel the backfill) when the run belongs to a backfill of more
    nights, or searches, than the settings allow."""
    backfill_id = context.run.tags.get(BACKFILL_TAG)
    backfill = context.instance.get_backfill(backfill_id) if backfill_id else None
    if backfill is None:
        return
    why = backfill_refusal(session, watchlist, _nights(context, backfill))
    if why is None:
        return
    context.instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELING))
    raise Failure(description=why, allow_retries=False)


def _nights(context: AssetExecutionContext, backfill: PartitionBackfill) -> list[date]:
    """The nights the backfill harvests: a job backfill's partitions, or the partitions an
    asset backfill targets for this step's asset."""
    if backfill.partition_names is not None:
        names = set(backfill.partition_names)
    else:
        data = backfill.asset_backfill_data or backfill.get_asset_backfill_data(context.repository_def.asset_graph)
        subsets = data.target_subset.partitions_subsets_by_asset_key
        chosen = [subsets[context.asset_key]] if context.asset_key in subsets else list(subsets.values())
        names = {name for subset in chosen for name in subset.get_partition_keys()}
    return sorted(date.fromisoformat(name) for name in names)
