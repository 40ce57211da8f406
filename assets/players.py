"""Player summaries: the metered harvest, planned within the night's budget.

With one account (the settings'), ``player_summaries`` fetches and normalises the night in one
step. With several ``accounts:`` in the watchlist, :func:`account_assets` makes
``player_shares`` (the night's player split, computed once) and one ``player_summaries/<account>``
asset per account — its share of the players, its budget, its ledger rows, its own parts of the
night's tables (a shard's commits) and its own pool, so one account's night can be re-run or
backfilled alone and the accounts fetch side by side (`tourneylake run`, or a deployment's
executor) — and ``player_summaries`` makes the night's tables of the shards' parts once all
are in (free).
"""

import os
from collections.abc import Sequence

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)

from tourneylake.assets.backfill import refuse_oversized_backfill
from tourneylake.assets.nights import nightly_partitions
from tourneylake.assets.pools import SERVICE_POOL, account_pool
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.assets.steps import PID_TAG, fails_cleanly, listing, night_of
from tourneylake.config import Settings
from tourneylake.night.accounts import load_share, save_shares, shares_digest
from tourneylake.night.harvest import HarvestOutcome, harvest_account, harvest_players, target_lines
from tourneylake.night.status import record_harvest, record_harvest_start
from tourneylake.runtime.parent import stops_when_parent_dies
from tourneylake.tables.coverage import change_lines, write_coverage_changes
from tourneylake.tables.drift import night_drift
from tourneylake.tables.night_tables import join_shards


def _checks(asset_key: str | AssetKey) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            "budget_respected",
            asset=asset_key,
            description="Searches spent stay within the run cap and above the reserve.",
        ),
        AssetCheckSpec(
            "no_failed_players",
            asset=asset_key,
            description="Every planned (player, filter) pair was harvested or deferred, none failed: a failed one makes "
            "the night partial (`tourneylake run` exits 3); a re-run of the night retries it.",
        ),
        AssetCheckSpec(
            "schema_drift",
            asset=asset_key,
            description="A warning when the night's answers carry attributes or elements the normaliser does not map "
            "into a column (named; the raw answers keep them, and `tourneylake rebuild` reads them again once it does).",
        ),
        AssetCheckSpec(
            "watchlist_valid",
            asset=asset_key,
            description="Every pair of the watchlist could be attempted: none has an invalid filter, an unknown network "
            "or a question the service will not convert (`tourneylake run` exits 4 naming them; the others are harvested).",
        ),
    ]


def drift_check(drift: dict[str, str]) -> AssetCheckResult:
    """The ``schema_drift`` check of the night's answers (a warning; the library logs the fields)."""
    lines = [f"{name} ({kept})" for name, kept in drift.items()]
    return AssetCheckResult(
        check_name="schema_drift",
        passed=not drift,
        severity=AssetCheckSeverity.WARN,
        metadata={"unmapped": len(drift), "fields": listing(lines)},
    )


def _harvest_result(settings: Settings, outcome: HarvestOutcome, drift: AssetCheckResult) -> MaterializeResult:
    """What a harvest did, as metadata and its checks."""
    cap_ok = settings.max_searches_per_run is None or outcome.searches_spent <= settings.max_searches_per_run
    reserve_ok = outcome.remaining_searches is None or outcome.remaining_searches >= settings.reserve_searches
    # Numbers are always numbers (an unknown one is left out), so Dagster plots each across nights.
    numbers = {
        "players_fetched": outcome.fetched,
        "players_reused_from_lake": outcome.reused,
        "searches_spent": outcome.searches_spent,
        "searches_left": outcome.remaining_searches,
        "searches_reconciled": outcome.reconciled,
        "deferred": len(outcome.deferred),
        "skipped": len(outcome.skipped),
        "failed": len(outcome.failed),
        "misconfigured": len(outcome.misconfigured),
        "concurrency_settled": outcome.concurrency,
        # Every search left expires at the service's next quota reset (see tourneylake.night.quota_day).
        "searches_expiring_at_reset": outcome.quota.expiring if outcome.quota else None,
        "rows": sum(outcome.rows.values()),
        **{f"rows_{table}": rows for table, rows in sorted(outcome.rows.items())},
    }
    return MaterializeResult(
        metadata={
            **{name: value for name, value in numbers.items() if value is not None},
            "stopped_reason": outcome.stopped_reason or "none",
            "quota_reset_at": outcome.quota.reset_at.isoformat() if outcome.quota else "unknown",
            "deferred_players": listing(target_lines(outcome.deferred)),
            "skipped_players": listing(target_lines(outcome.skipped)),
            "failed_players": listing(target_lines(outcome.failed)),
            "misconfigured_players": listing(target_lines(outcome.misconfigured)),
            # Every failed or misconfigured pair, for the command line to name each one (they are few).
            "failed_pairs": MetadataValue.json(target_lines(outcome.failed)),
            "misconfigured_pairs": MetadataValue.json(target_lines(outcome.misconfigured)),
            "filters_not_anchored": listing([f"{name}: {why}" for name, why in outcome.not_anchored.items()]),
            # What the service stopped (or started) showing since earlier nights (the coverage_changes table).
            "coverage_changes": listing(outcome.coverage_changes),
        },
        check_results=[
            AssetCheckResult(
                check_name="budget_respected", passed=cap_ok and reserve_ok, metadata={"spent": outcome.searches_spent}
            ),
            AssetCheckResult(
                check_name="no_failed_players",
                passed=not outcome.failed,
                metadata={"failed": listing(target_lines(outcome.failed))},
            ),
            drift,
            AssetCheckResult(
                check_name="watchlist_valid",
                passed=not outcome.misconfigured,
                metadata={"not_attempted": listing(target_lines(outcome.misconfigured))},
            ),
        ],
    )


@asset(
    group_name="players",
    kinds={"python", "parquet"},
    partitions_def=nightly_partitions,
    pool=SERVICE_POOL,
    deps=["metadata"],
    # No retry policy: the harvest already retries each call, and re-running a night is free
    # for what was paid; a wrong password or an exhausted quota must not be hammered again.
    check_specs=_checks("player_summaries"),
    description="Filtered player summaries of the watchlist, anchored to the night → player_* and tournament tables in the lake.",
)
@fails_cleanly
def player_summaries(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
    night = night_of(context)
    session, watchlist = tourneylake.session(night), tourneylake.load_watchlist()
    refuse_oversized_backfill(context, session, watchlist)
    record_harvest_start(session.lake, night, context.run.run_id)
    outcome = harvest_players(session, watchlist)
    record_harvest(session.lake, night, context.run.run_id, None, outcome)
    return _harvest_result(tourneylake.settings(), outcome, drift_check(night_drift(session.lake, night)))


def account_assets(accounts: Sequence[str]) -> list[AssetsDefinition]:
    """One harvest asset per account, and ``player_summaries`` over all of them (see the module
    docstring). Used instead of :func:`player_summaries` when the watchlist lists accounts."""
    harvests = [_account_harvest(name) for name in accounts]

    @asset(
        name="player_shares",
        group_name="players",
        kinds={"python"},
        partitions_def=nightly_partitions,
        description="The watchlist's players split between its accounts (rendezvous hashing), once a night: each "
        "account's harvest reads its own share.",
    )
    @fails_cleanly
    def player_shares(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
        shares = save_shares(tourneylake.lake(), tourneylake.load_watchlist())
        return MaterializeResult(metadata={"players": sum(shares.values()), "per_account": MetadataValue.json(shares)})

    @asset(
        name="player_summaries",
        group_name="players",
        kinds={"python", "parquet"},
        partitions_def=nightly_partitions,
        deps=[harvest.key for harvest in harvests],
        description="The night's player_* and tournament tables, made of every account's parts once all are in "
        "(no search; from the raw answers when an account's are missing).",
    )
    @fails_cleanly
    def player_summaries_of_accounts(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
        unusable: list[str] = []
        watchlist = tourneylake.load_watchlist()
        rows = join_shards(tourneylake.lake(), night_of(context), shares_digest(watchlist), list(accounts), unusable)
        changes = change_lines(write_coverage_changes(tourneylake.lake(), night_of(context)))
        return MaterializeResult(
            metadata={
                "rows": sum(rows.values()),
                "coverage_changes": listing(changes),
                "tables": MetadataValue.json(rows),
                "unusable": len(unusable),
                "unusable_answers": listing(unusable),
            }
        )

    return [player_shares, *harvests, player_summaries_of_accounts]


def _account_harvest(account: str) -> AssetsDefinition:
    key = AssetKey(["player_summaries", account])

    @asset(
        key=key,
        group_name="players",
        kinds={"python", "parquet"},
        partitions_def=nightly_partitions,
        pool=account_pool(account),
        deps=["metadata", "player_shares"],
        check_specs=_checks(key),
        description=f"The players assigned to account `{account}`, fetched within its own budget and pool into the raw "
        "store, the ledger and the account's own parts of the night's tables.",
    )
    @fails_cleanly
    def harvest(context: AssetExecutionContext, tourneylake: TourneylakeResource) -> MaterializeResult:
        night = night_of(context)
        session = tourneylake.account_session(night, account)
        watchlist = tourneylake.load_watchlist()
        refuse_oversized_backfill(context, session, load_share(session.lake, watchlist, account)[0])
        record_harvest_start(session.lake, night, context.run.run_id)
        # In a process of its own (not `tourneylake run`'s): no new search once the run is gone.
        with stops_when_parent_dies(watch=context.run.tags.get(PID_TAG) != str(os.getpid())):
            outcome = harvest_account(session, watchlist)
        record_harvest(session.lake, night, context.run.run_id, account, outcome)
        return _harvest_result(session.settings, outcome, drift_check(night_drift(session.lake, night)))

    return harvest
