"""The nightly partitioning every tourneylake asset shares: one partition per UTC night."""

from dagster import DailyPartitionsDefinition

from tourneylake.api.filters import FIRST_NIGHT

# From the service's first day of data to the last night that has ended (UTC): a night is
# harvested once it is over, so its partition means the whole night, whenever it is fetched.
nightly_partitions = DailyPartitionsDefinition(start_date=FIRST_NIGHT.isoformat(), timezone="UTC", end_offset=0)

# Every step that calls the service takes a slot of this pool: one account, bounded sessions
# (dagster_home/dagster.yaml gives each pool one slot, so overlapping runs take turns).
SERVICE_POOL = "tourneylake_service"
# The warehouse load: one DuckDB file, one writer at a time.
WAREHOUSE_POOL = "tourneylake_warehouse"


def account_pool(account: str) -> str:
    """The pool of one account's harvests (several accounts fetch side by side, each alone)."""
    return f"{SERVICE_POOL}_{account}"
