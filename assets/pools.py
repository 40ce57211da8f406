"""The concurrency pools the steps take (``dagster_home/dagster.yaml`` gives each one slot, so
overlapping runs take turns at the service and at the warehouse file)."""

#: Every step that calls the service: one account, bounded sessions.
SERVICE_POOL = "tourneylake_service"
#: The warehouse load and whatever reads the file while it could be written: one DuckDB writer.
WAREHOUSE_POOL = "tourneylake_warehouse"


def account_pool(account: str) -> str:
    """The pool of one account's harvests (several accounts fetch side by side, each alone)."""
    return f"{SERVICE_POOL}_{account}"
