"""The nightly partitioning every tourneylake asset shares: one partition per UTC night."""

from dagster import DailyPartitionsDefinition

# end_offset=1: tonight's partition exists before midnight, so a run can harvest "today".
nightly_partitions = DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC", end_offset=1)

# Every step that calls the service takes a slot of this pool: one account, bounded sessions
# (dagster_home/dagster.yaml gives each pool one slot, so overlapping runs take turns).
SERVICE_POOL = "tourneylake_service"
# The warehouse load: one DuckDB file, one writer at a time.
WAREHOUSE_POOL = "tourneylake_warehouse"
