"""Dagster's nights: the partitioning every tourneylake asset shares, one partition per UTC night.

The assets declare :data:`nightly_partitions`, every night the service has data for; the
``Definitions`` narrow it to the user's own nights (:func:`user_nights`, from the
``TOURNEYLAKE_FIRST_NIGHT`` setting or the first night the lake holds), so the UI offers the
nights the user keeps rather than thousands of paid ones. Dagster fixes a partitions
definition's start when the code location loads: a ``dagster dev`` running while the lake gains
older nights shows them once the location is reloaded.
"""

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from dagster import AssetsDefinition, AssetSpec, DailyPartitionsDefinition

from tourneylake.api.filters import FIRST_NIGHT
from tourneylake.config import Settings
from tourneylake.lake.lake import Lake


def daily_from(first: date) -> DailyPartitionsDefinition:
    """One partition per UTC night from ``first`` to the last night that has ended: a night is
    harvested once it is over, so its partition means the whole night, whenever it is fetched."""
    return DailyPartitionsDefinition(start_date=first.isoformat(), timezone="UTC", end_offset=0)


# What the assets declare: from the service's first day of data.
nightly_partitions = daily_from(FIRST_NIGHT)


def first_night(settings: Settings) -> date:
    """The user's first night: ``TOURNEYLAKE_FIRST_NIGHT``, else the first night the lake holds
    (its first raw answers), else yesterday (UTC) on an empty lake."""
    if settings.first_night is not None:
        return max(settings.first_night, FIRST_NIGHT)
    held = Lake(settings.data_dir).raw.nights()
    return held[0] if held else datetime.now(UTC).date() - timedelta(days=1)


def user_nights(assets: Sequence[Any], first: date) -> tuple[list[Any], DailyPartitionsDefinition]:
    """``assets`` with :data:`nightly_partitions` narrowed to start on ``first``, and the
    narrowed partitions (for the jobs and the schedule)."""
    partitions = daily_from(first)

    def narrowed(spec: AssetSpec) -> AssetSpec:
        return spec.replace_attributes(partitions_def=partitions) if spec.partitions_def == nightly_partitions else spec

    out = [a.map_asset_specs(narrowed) if isinstance(a, AssetsDefinition) else a for a in assets]
    return out, partitions
