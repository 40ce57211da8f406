"""Harvesting one night from the service: metadata, the free resources, the player summaries.

Each step asks the service only for what the night does not hold yet, then makes the night's
tables from the raw answers through :mod:`tourneylake.tables.night_tables` (the same path a rebuild takes):

- :func:`refresh_metadata`: one metadata call per night, with the hash of the copy in force (the
  service answers "current" without a download when nothing changed, rates included);
- :func:`refresh_free_resource`: countries and news, once per night;
- :func:`harvest_players`: the summaries already paid for tonight are normalised from the lake
  at no cost; the rest of the watchlist is planned within the budget and fetched concurrently,
  then the pairs the plan deferred, in order, while searches come back (lookups the service let
  off); a pair the service did not find lately waits a week (``NOT_FOUND_RETRY``).
  Every filter is sent anchored to the night (:func:`tourneylake.api.filters.filter_for_night`), so
  a night means the same whenever it is harvested.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Protocol

import pyarrow as pa

from tourneylake.api import ApiError, AsyncClient, CredentialsError, NotFoundError, QuotaError, UnusableResponse, calls
from tourneylake.api.client import ApiResponse, warm_async_transport
from tourneylake.api.errors import NOT_FOUND_CODES
from tourneylake.api.filters import FilterSyntaxError, filter_for_night
from tourneylake.api.tree import MalformedPayload
from tourneylake.errors import BudgetRefused, LakeError, RunFailed
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger, LedgerWriter
from tourneylake.lake.raw import UNUSABLE
from tourneylake.night.backlog import record_owed
from tourneylake.night.budget import NOT_FOUND_RETRY, Budget, Known, Limits, Plan, Target, plan_night
from tourneylake.night.metering import left_in_run
from tourneylake.night.progress import Tracker
from tourneylake.night.quota_day import QuotaDay
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist
from tourneylake.tables.coverage import change_lines, write_coverage_changes
from tourneylake.tables.night_tables import (
    FREE_RESOURCES,
    UNREADABLE,
    ShardSink,
    StoredSummaries,
    SummarySink,
    TargetKey,
    free_table,
    keep_one_row_per_key,
    mark_shard,
    metadata_tables,
    not_found_targets,
    settle_received,
    unmark_shard,
)
from tourneylake.tables.reference import InForce
from tourneylake.tables.worker import TablesWorker, worker_wanted

__all__ = [
    "HarvestOutcome",
    "MetadataOutcome",
    "Owed",
    "ReferenceOutcome",
    "Sink",
    "harvest_account",
    "harvest_owed",
    "harvest_players",
    "last_harvested",
    "not_found_lately",
    "refresh_free_resource",
    "refresh_metadata",
    "resolve_targets",
    "target_lines",
]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ reference data


@dataclass(frozen=True)
class MetadataOutcome:
    metadata_hash: str | None
    downloaded: bool  # the night's answer was the full metadata (its hash had changed)
    called: bool  # a call was made tonight (False: the night already had its metadata)
    rows: dict[str, int]
    currencies_without_rate: list[str]


def refresh_metadata(session: Session) -> MetadataOutcome:
    """The night's metadata tables: from the lake when the night has them, else from one call
    (with the hash of the copy in force: "current" means nothing to download)."""
    lake, night = session.lake, session.night
    if night in lake.tables.nights("currencies"):
        in_force = session.in_force()
        return MetadataOutcome(in_force.metadata_hash, False, False, {}, in_force.currencies_without_rate)
    settle_received(lake, night)
    called = False
    if not lake.raw.refs(night, calls.METADATA):
        with session.client() as client:
            client.metadata(hash=session.in_force().metadata_hash)
        called = True
    result = metadata_tables(lake, night)
    if result is None:  # it confirmed a copy the lake no longer holds: download it whole
        with session.client() as client:
            client.metadata()
        called = True
        result = metadata_tables(lake, night)
    if result is None:
        raise LakeError(f"night {night}: the service's metadata answer could not be kept as tables")
    # `currencies` says the night's metadata tables are written (see above): it is written last,
    # so a run killed part-way writes them all again (the others side by side).
    lake.tables.write_night(night, result.tables, last="currencies")
    in_force = session.in_force()
    return MetadataOutcome(
        result.metadata_hash,
        result.downloaded,
        called,
        {name: table.num_rows for name, table in result.tables.items()},
        in_force.currencies_without_rate,
    )


@dataclass(frozen=True)
class ReferenceOutcome:
    table: str
    rows: int
    warnings: list[str]
    remaining_searches: int | None
    called: bool


def refresh_free_resource(session: Session, resource: str) -> ReferenceOutcome:
    """Countries or news (free) for the night: fetched once, kept raw, normalised from the lake."""
    lake, night = session.lake, session.night
    table_name, call = FREE_RESOURCES[resource]
    remaining = None
    called = not lake.raw.has(night, resource, call.key)
    if called:
        with session.client() as client:
            remaining = client.send(call).remaining_searches
    try:
        found = free_table(lake, night, resource)
    except UNREADABLE as exc:
        # Free, and not worth a night: keep it raw (marked), keep the table in force, say why.
        ref = lake.raw.ref(night, resource, call.key)
        if ref is not None:
            lake.raw.settle(ref, UNUSABLE)
        why = f"the {resource} answer cannot be read and is kept raw ({exc}); the last one read stays in force"
        log.warning("night %s: %s", night, why)
        return ReferenceOutcome(table_name, 0, [why], remaining, called)
    if found is None:
        raise LakeError(f"night {night}: the {resource} answer is not in the lake")
    table, warnings = found
    lake.tables.write(table_name, night, table)
    for warning in warnings:
        log.warning("%s: %s", resource, warning)
    return ReferenceOutcome(table_name, table.num_rows, warnings, remaining, called)


# ------------------------------------------------------------------------------ players


@dataclass
class HarvestOutcome:
    night: date
    fetched: int = 0
    reused: int = 0
    searches_spent: int = 0
    remaining_searches: int | None = None
    reconciled: int = 0  # searches booked as charged without an answer (this run, and runs that died)
    deferred: list[tuple[Target, str]] = field(default_factory=list)
    skipped: list[tuple[Target, str]] = field(default_factory=list)
    failed: list[tuple[Target, str]] = field(default_factory=list)
    # Not attempted because the watchlist is wrong (an invalid filter, an unknown network, a
    # question the service will not convert): the user must fix it, so the night says so.
    misconfigured: list[tuple[Target, str]] = field(default_factory=list)
    not_anchored: dict[str, str] = field(default_factory=dict)  # filter name → why
    rows: dict[str, int] = field(default_factory=dict)
    stopped_reason: str | None = None
    concurrency: int | None = None  # requests in flight the client settled at (see AdaptiveLimit)
    quota: QuotaDay | None = None  # the quota day's next reset, and the searches left that expire at it
    coverage_changes: list[str] = field(default_factory=list)  # what the service stopped showing (see tables.coverage)


def target_lines(items: Iterable[tuple[Target, str]]) -> list[str]:
    return [f"{target}: {why}" for target, why in items]


@dataclass
class Resolution:
    """The watchlist's targets for the night, and why some filters cannot be fetched."""

    targets: list[Target]
    problems: dict[str, str]  # filter name → what metadata rejects, or why the service will not convert its question
    skip: dict[str, str]  # filter name → why not tonight (nothing to select, no budget to convert its question)
    unconverted: list[str]  # question filters not converted yet (only with convert=False)
    not_anchored: dict[str, str]
    failing: dict[str, str] = field(default_factory=dict)  # filter name → why its question failed transiently


def resolve_targets(
    session: Session,
    watchlist: Watchlist,
    budget: Budget | None,
    ledger: LedgerWriter | None,
    *,
    convert: bool = True,
    in_force: InForce | None = None,
) -> Resolution:
    """Watchlist → the night's targets, each with the filter to send (anchored to the night).

    Questions are converted once through the Natural Language Filter resource and cached; with
    ``convert=False`` (a plan that must not spend) an uncached one keeps no expression, so the
    planner budgets its conversion. Filters are validated against metadata (``in_force``'s, the
    night's in the lake by default), so an invalid one never costs a search."""
    night = session.night
    catalog = (in_force or session.in_force()).filter_catalog
    out = Resolution([], {}, {}, [], {})
    sent: dict[str, tuple[str, str, bool]] = {}  # name → (as written, as sent, anchored)
    for name, definition in watchlist.filters.items():
        expression: str | None = definition.expression
        if definition.is_question:
            assert definition.question is not None
            expression = session.cached_filter(definition.question, definition.timezone, definition.locale)
            if expression is None and not convert:
                out.unconverted.append(name)
                continue
            if expression is None:
                try:
                    expression = session.ask_filter(definition.question, definition.timezone, definition.locale, budget, ledger)
                except (ApiError, BudgetRefused) as exc:
                    why = f"question not converted: {exc}"
                    if isinstance(exc, BudgetRefused):
                        out.skip[name] = f"filter {name!r}: {why}"
                    elif exc.retryable:
                        out.failing[name] = f"filter {name!r}: {why}"
                    else:
                        out.problems[name] = why
                    continue
        as_written = expression or ""
        if catalog is not None:
            found = catalog.problems(as_written)
            if found:
                out.problems[name] = "; ".join(str(problem) for problem in found)
                continue
        try:
            tonight = filter_for_night(as_written, night, window=definition.window, anchor=definition.anchor)
        except FilterSyntaxError as exc:  # a Date metadata would reject (checked here when no metadata is held)
            out.problems[name] = str(exc)
            continue
        if tonight.selects_nothing:
            out.skip[name] = f"filter {name!r} selects nothing up to {night}: " + "; ".join(tonight.notes)
            continue
        if not tonight.anchored:
            out.not_anchored[name] = "; ".join(tonight.notes)
        sent[name] = (as_written, tonight.sent, tonight.anchored)
    unfiltered = filter_for_night("", night)
    for player, filter_name in watchlist.targets():
        written: str | None
        to_send: str | None
        if filter_name is None:
            written, to_send, anchored, window = None, unfiltered.sent, unfiltered.anchored, "as_of"
        else:
            written, to_send, anchored = sent.get(filter_name, (None, None, False))
            window = watchlist.filters[filter_name].window
        out.targets.append(Target(player.network, player.name, filter_name, written, player.priority, to_send, window, anchored))
    return out


def plan_tonight(
    session: Session,
    resolution: Resolution,
    harvested: set[TargetKey],
    *,
    remaining: int | None,
    cap: int | None,
    reserve: int | None = None,
    in_force: InForce | None = None,
) -> Plan:
    """The night's plan (see :func:`tourneylake.night.budget.plan_night`) for what the lake says was
    harvested before and tonight, within ``remaining`` searches, the run's ``cap`` and ``reserve``
    (the settings' by default), the networks checked against ``in_force``'s metadata (the
    night's in the lake by default)."""
    known = Known(
        last_fetched=last_harvested(session.lake, session.night, (target.key for target in resolution.targets)),
        harvested_tonight=harvested,
        run_date=session.night,
        known_networks=(in_force or session.in_force()).known_networks,
        filter_problems=resolution.problems,
        skip_filters=resolution.skip,
        not_found=not_found_lately(session.lake, session.night),
    )
    reserve = session.settings.reserve_searches if reserve is None else reserve
    limits = Limits(remaining, cap, reserve, session.meter.costs)
    return plan_night(resolution.targets, known, limits)


def last_harvested(
    lake: Lake, night: date, wanted: Iterable[tuple[str, str, str | None]] | None = None
) -> dict[tuple[str, str, str | None], date]:
    """The last night before ``night`` each (network, player, filter) was harvested, from the
    lake's ``player_snapshots`` partitions: its log read once, then the nights' parts newest
    first, the last night alone, then up to eight side by side (a round trip each on an object
    store). With ``wanted``, only those targets are asked for: the reading stops at the night by
    which each was found, so a watchlist harvested lately reads its last nights, not its whole
    history (one never harvested still reads every night)."""
    columns = ["network", "player", "filter_name"]
    nights = sorted(
        ((when, [path for path, _ in parts]) for when, parts in lake.tables.parts("player_snapshots").items() if when < night),
        reverse=True,
    )
    missing = None if wanted is None else {(network, player, filter_name or None) for network, player, filter_name in wanted}

    def night_keys(item: tuple[date, list[str]]) -> pa.Table:
        table = lake.tables.read_parts(item[0], item[1], columns).select(columns)
        return table.append_column("night", pa.array([item[0]] * table.num_rows, pa.date32()))

    seen: dict[tuple[str, str, str | None], date] = {}
    with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-last") as pool:
        start, size = 0, 1
        while start < len(nights):
            batch = pa.concat_tables(pool.map(night_keys, nights[start : start + size]), promote_options="default")
            start, size = start + size, min(size * 2, 8)
            latest = batch.group_by(columns).aggregate([("night", "max")])
            for network, player, filter_name, when in zip(
                *(latest.column(c).to_pylist() for c in [*columns, "night_max"]), strict=True
            ):
                key = (network, player, filter_name or None)  # '' and None: one key, the latest night
                seen[key] = max(when, seen.get(key, when))
            if missing is not None:
                missing.difference_update(seen)
                if not missing:
                    break
    return seen


def not_found_lately(lake: Lake, night: date) -> dict[tuple[str, str, str | None], date]:
    """The targets the service answered "not found" (:data:`~tourneylake.api.errors.NOT_FOUND_CODES`)
    on the nights less than :data:`~tourneylake.night.budget.NOT_FOUND_RETRY` before ``night``,
    with the latest such night: not asked again until a week after it. From the ledger, which
    books every refusal with its code (a few lines a night, where the raw store's index of a
    night reads every body's record)."""
    lately: dict[tuple[str, str, str | None], date] = {}
    ledger = Ledger(lake)
    for earlier in sorted(d for d in ledger.nights() if night - NOT_FOUND_RETRY < d < night):
        for row in ledger.entries(earlier):
            network, player = row.get("network"), row.get("player")
            if row.get("resource") == calls.PLAYER_SUMMARY and row.get("error_code") in NOT_FOUND_CODES and network and player:
                lately[(network, player, row.get("filter_name") or None)] = earlier
    return lately


def harvest_players(session: Session, watchlist: Watchlist, *, batch_size: int = 500) -> HarvestOutcome:
    """Harvest the night's player summaries within the budget (see the module docstring).

    Holds the lake's ``harvest`` lock: two harvests of one lake (overlapping runs without the
    Dagster instance's pools) take turns instead of paying twice for the same targets."""
    with session.lake.locks.for_harvest(session.meter.harvest_lock):
        return _harvest(session, watchlist, batch_size)


def harvest_account(session: Session, watchlist: Watchlist) -> HarvestOutcome:
    """One account's share of a watchlist with several ``accounts:`` (``session.account``, its
    settings from :func:`tourneylake.night.accounts.account_settings`): planned within that
    account's budget, fetched into the raw store and the ledger and made into the account's own
    tables of the night (a shard: :class:`~tourneylake.tables.night_tables.ShardSink`), under
    the account's own lock, so the accounts of a night run side by side. Its players come from
    the night's player split, computed once (:func:`tourneylake.night.accounts.load_share`). The
    night's tables are joined from every shard's once all are in
    (:func:`tourneylake.tables.night_tables.join_shards`). Wrong credentials fail the account's
    pairs instead of raising: one account's bad password or exhausted quota never stops the others."""
    from tourneylake.night.accounts import load_share

    assert session.account is not None, "harvest_account needs a session opened for an account"
    share, shares = load_share(session.lake, watchlist, session.account)
    with session.lake.locks.for_harvest(session.meter.harvest_lock), _one_login(session):
        if session.writable:
            unmark_shard(session.lake, session.night, session.account)
        return _harvest(session, share, batch_size=500, keep_tables=False, shares=shares)


@contextmanager
def _one_login(session: Session) -> Iterator[None]:
    """Two account names with one username spend from one count: their harvests, side by side
    otherwise, take turns, so each plans with what the other has spent."""
    login = session.meter.login
    if login is None:
        yield
        return
    with session.lake.locks.hold(f"login-{login}"):
        yield


@dataclass(frozen=True)
class Owed:
    """A harvest of pairs owed to an earlier night (:mod:`tourneylake.night.drain`): only
    ``targets`` (the lake's keys), at most ``cap`` searches, never taking the account below
    ``reserve``, and no call started after ``stop_at`` (``time.monotonic()``: the quota reset)."""

    targets: frozenset[TargetKey]
    cap: int | None
    reserve: int
    stop_at: float | None = None


def harvest_owed(session: Session, watchlist: Watchlist, owed: Owed) -> HarvestOutcome:
    """:func:`harvest_players` for the pairs ``owed`` to ``session.night``: fetched with that
    night's anchored filters into that night's raw store, tables and ledger, under the harvest
    lock of ``session``'s account, within ``owed``'s limits (not the night's run cap)."""
    with session.lake.locks.for_harvest(session.meter.harvest_lock):
        return _harvest(session, watchlist, 500, owed=owed)


class Sink(Protocol):
    """Where a night's summaries go as they arrive: made into the night's tables in process
    (:class:`~tourneylake.tables.night_tables.SummarySink`), by a second process
    (:class:`~tourneylake.tables.worker.TablesWorker`), or into one account's own tables among
    several (:class:`~tourneylake.tables.night_tables.ShardSink`)."""

    needs_tree: bool  # whether :meth:`take` reads the answer's tree (parsed once by the client)
    rows: dict[str, int]  # rows written per table
    rejected: list[tuple[TargetKey, str]]  # answers refused by a normaliser after the fetching

    @property
    def repeating(self) -> set[str] | None:
        """The deduplicated tables of which a key was kept twice tonight (``None``: not known)."""
        ...

    def add_stored(self) -> StoredSummaries:
        """Take the answers already paid for tonight; say which targets they settled."""
        ...

    def take(self, answer: ApiResponse, key: dict[str, str]) -> None:
        """One fetched answer (raises ``MalformedPayload`` when it cannot be read here)."""
        ...

    def reject(self, key: dict[str, str], reason: str) -> None:
        """Tonight's answer for ``key`` cannot be read: keep it raw, marked unusable."""
        ...

    def expect(self, answers: int) -> None:
        """``answers`` more are planned tonight."""
        ...

    def own(self, requests: list[dict[str, str]]) -> None:
        """Tonight's requests, before :meth:`add_stored` (a shard reads only their answers)."""
        ...

    def flush(self) -> None:
        """The night's last answers written (and, for a worker, committed)."""
        ...


def _harvest(
    session: Session,
    watchlist: Watchlist,
    batch_size: int,
    *,
    keep_tables: bool = True,
    owed: Owed | None = None,
    shares: str | None = None,
) -> HarvestOutcome:
    # The worker and the async client's imports start first: they overlap the searches-left
    # reading and the planning.
    warm_async_transport()
    with ExitStack() as worker_stack:
        worker = None
        if keep_tables and worker_wanted(session.settings, len(watchlist.targets())):
            worker = worker_stack.enter_context(TablesWorker(session.lake, session.night, batch_size))
        try:
            return _harvest_night(session, watchlist, batch_size, keep_tables, worker, owed, shares)
        finally:
            session.meter.save_cost_votes()


def _harvest_night(
    session: Session,
    watchlist: Watchlist,
    batch_size: int,
    keep_tables: bool,
    worker: TablesWorker | None,
    owed: Owed | None = None,
    shares: str | None = None,
) -> HarvestOutcome:
    """The night's harvest (see :func:`harvest_players`); without ``keep_tables``, one
    account's among several: its own tables, made from the player split ``shares``."""
    lake, night, settings = session.lake, session.night, session.settings
    outcome = HarvestOutcome(night)
    try:
        remaining = _settled_reading(session, several=not keep_tables)
    except RunFailed as exc:
        if keep_tables:
            raise
        return _account_failed(session, watchlist, outcome, exc)
    outcome.reconciled += sum(session.meter.reconcile_dead_runs(remaining).values())
    # A re-run of a half-finished night may spend only what the first run left of the cap.
    cap = left_in_run(settings.max_searches_per_run, session.meter.spent_on_cap(calls.PLAYER_SUMMARY))
    if owed is not None:
        cap = owed.cap
    budget = Budget(
        remaining=remaining,
        max_searches_per_run=cap,
        reserve=settings.reserve_searches if owed is None else owed.reserve,
        costs=session.meter.costs,
        quota=session.quota_day(remaining),
        stop_at=None if owed is None else owed.stop_at,
    )
    failure: Exception | None = None  # raised once tonight's work is kept
    with (
        _ledger_published(lake, night, keep_tables) as night_failed,
        session.meter.ledger(remaining) as ledger,
        ExitStack() as stack,
    ):
        sink: Sink = worker or (
            SummarySink(lake, night, session.in_force(), stack, batch_size)
            if keep_tables
            else ShardSink(lake, night, session.in_force(), stack, str(session.account), batch_size)
        )
        plan = _plan(session, watchlist, sink, budget, ledger, cap, outcome, owed)
        try:
            asyncio.run(_fetch(session, plan, budget, sink, outcome, ledger))
        except Exception as exc:  # noqa: BLE001 - re-raised below, once what was normalised is kept
            failure = exc
        failure = _flush_and_reconcile(session, sink, ledger, outcome, failure)
        outcome.rows = dict(sink.rows)
        _report_rejected(sink, plan, outcome)
        outcome.searches_spent = ledger.spent
        outcome.remaining_searches = budget.remaining
        if session.writable:  # what the budget or the quota left unfetched is owed to this night
            record_owed(lake, night, outcome.deferred)
        outcome.quota = budget.quota_day
        outcome.stopped_reason = budget.stopped_reason
        fatal = next((reason for _, reason in outcome.failed if reason.startswith("credentials:")), None)
        night_failed.append(failure is not None or (fatal is not None and keep_tables))
    if keep_tables:  # the night's tables are committed: one row per key, by content
        outcome.rows.update(keep_one_row_per_key(lake, night, sink.repeating))
        if outcome.rows:
            lake.tables.drop_shard_marks(night)  # written whole: no shard's parts are in any more
    elif shares is not None and session.writable:  # the shard's tables are committed: say so, for the join
        mark_shard(lake, night, str(session.account), shares, outcome.rows)
    if keep_tables and failure is None and fatal is None:  # the night's tables are in: what changed since earlier nights
        outcome.coverage_changes = change_lines(write_coverage_changes(lake, night))
    if fatal and keep_tables:  # one account among several fails its pairs only
        raise RunFailed(fatal)
    if isinstance(failure, Interrupted):
        raise KeyboardInterrupt from None  # what was paid for is kept: now the interruption
    if failure is not None:
        raise failure
    return outcome


def _settled_reading(session: Session, *, several: bool) -> int | None:
    """Tonight's bodies left ``received`` settled (one account at a time when several harvest
    side by side), then the searches left (:class:`RunFailed` for refused credentials)."""
    with ExitStack() as settling:
        if several:
            settling.enter_context(session.lake.locks.hold("settle"))
        settle_received(session.lake, session.night)
    return session.read_remaining(recent=True)


def _account_failed(session: Session, watchlist: Watchlist, outcome: HarvestOutcome, exc: RunFailed) -> HarvestOutcome:
    """One account among several whose credentials were refused: its pairs fail, the others'
    harvests go on."""
    for player, name in watchlist.targets():
        outcome.failed.append((Target(player.network, player.name, name, None, player.priority), str(exc)))
    log.error("account %s: %s (its %d pair(s) failed)", session.account, exc, len(outcome.failed))
    return outcome


def _plan(
    session: Session,
    watchlist: Watchlist,
    sink: Sink,
    budget: Budget,
    ledger: LedgerWriter,
    cap: int | None,
    outcome: HarvestOutcome,
    owed: Owed | None = None,
) -> Plan:
    """Tonight's plan, after what the night already holds is in the sink; the outcome gets what
    the plan reuses, defers and skips (a pair paid once tonight is never asked again). With
    ``owed``, only the pairs owed are planned."""
    lake, night = session.lake, session.night
    resolution = resolve_targets(session, watchlist, budget, ledger)
    if owed is not None:
        resolution.targets = [t for t in resolution.targets if (t.network, t.player, t.filter_name or "") in owed.targets]
    sink.own([summary_call(target).key for target in resolution.targets])
    stored = sink.add_stored()
    # This harvest's own pairs held already (with several accounts the night holds the others' too).
    outcome.reused = sum(1 for player, name in watchlist.targets() if (player.network, player.name, name or "") in stored.done)
    not_found = stored.not_found if stored.not_found is not None else not_found_targets(lake, night)
    outcome.not_anchored = resolution.not_anchored
    held = stored.done | not_found | set(stored.unusable)
    plan = plan_tonight(session, resolution, held, remaining=budget.remaining, cap=cap, reserve=budget.reserve)
    sink.expect(len(plan.calls))
    networks = session.in_force().known_networks
    for target, why in plan.skipped:
        key = (target.network, target.player, target.filter_name or "")
        if key in stored.unusable:
            outcome.failed.append((target, f"{UNUSABLE_ANSWER}: {stored.unusable[key]} (paid once tonight, not asked again)"))
        elif key in not_found:
            outcome.skipped.append((target, NOT_FOUND))
        elif key in stored.done:  # counted as reused, not skipped
            continue
        elif networks is not None and target.network not in networks and target.network in _listed_before(session):
            outcome.skipped.append((target, why))  # the service dropped it: a coverage change, not the user's mistake
        elif target.filter_name in resolution.problems or (networks is not None and target.network not in networks):
            outcome.misconfigured.append((target, why))
        elif target.filter_name in resolution.failing:
            outcome.failed.append((target, resolution.failing[target.filter_name]))
        else:
            outcome.skipped.append((target, why))
    outcome.deferred.extend(plan.deferred)  # the fetch takes back those searches that come back pay for
    log.info(
        "night %s: %d to fetch (%d searches planned), %d already harvested tonight, %d deferred, %d skipped",
        night, len(plan.calls), plan.searches_planned, outcome.reused, len(plan.deferred), len(outcome.skipped),
    )  # fmt: skip

    return plan


def _listed_before(session: Session) -> set[str]:
    """The networks the service's metadata listed on the nights before this one (a network
    gone since is a change of coverage, recorded in ``coverage_changes``)."""
    earlier = [night for night in session.lake.tables.nights("networks") if night < session.night]
    return InForce(session.lake, earlier[-1]).known_networks or set() if earlier else set()


def _flush_and_reconcile(
    session: Session, sink: Sink, ledger: LedgerWriter, outcome: HarvestOutcome, failure: Exception | None
) -> Exception | None:
    """The sink's last flush overlapped with the run's reconciliation (one round trip to the
    service). A failure of the reconciliation (or of the fetching before it) must not cost
    tonight's tables: it is returned, to be raised once they are committed. A flush that fails
    raises, keeping the night's previous tables (every raw answer is in the lake)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tourneylake-reconcile") as pool:
        reconciling = pool.submit(session.meter.reconcile_run, ledger)
        try:
            sink.flush()
        except Exception as exc:
            if failure is not None:  # the night's first failure is not lost behind this one
                exc.add_note(f"before it, tonight's harvest had failed: {type(failure).__name__}: {failure}")
            raise
        finally:
            try:
                outcome.reconciled += reconciling.result()
            except Exception as exc:  # noqa: BLE001 - raised after the tables are kept
                failure = failure or exc
    return failure


@contextmanager
def _ledger_published(lake: Lake, night: date, publish: bool) -> Iterator[list[bool]]:
    """Write the night's ``search_ledger`` partition from its ledger when the block ends (the
    ledger closed inside it), also when the night failed: what was spent is in the warehouse
    whatever went wrong. A write failing behind the night's own failure (raised out of the
    block, or told by appending ``True`` to the yielded list) is logged, not raised: the
    night's failure is the one to say."""
    night_failed: list[bool] = []
    try:
        yield night_failed
    except BaseException:
        night_failed.append(True)
        raise
    finally:
        if publish:
            try:
                Ledger(lake).publish(night)
            except Exception as exc:
                if not any(night_failed):
                    raise
                log.warning("tonight's search_ledger partition could not be written (%s): the next run writes it", exc)


def _report_rejected(sink: Sink, plan: Plan, outcome: HarvestOutcome) -> None:
    """The answers a worker's normaliser refused after the fetching: failed pairs, as in process."""
    if not sink.rejected:
        return
    targets = {(t.network, t.player, t.filter_name or ""): t for t in [*plan.calls, *(t for t, _ in plan.deferred)]}
    for key, why in sink.rejected:
        outcome.fetched -= 1
        outcome.failed.append((targets[key], _unusable_why(why)))


def _unusable_why(why: str) -> str:
    return f"{UNUSABLE_ANSWER}: {why} (kept raw; `tourneylake rebuild` reads it again)"


def summary_call(target: Target) -> calls.Call:
    """The call that fetches ``target``'s summary (its key names the raw answer)."""
    return calls.player_summary(
        target.network, target.player, target.filter_sent, target.filter_name,
        written=target.filter_expression or "", window=target.window, anchored=target.anchored,
    )  # fmt: skip


UNUSABLE_ANSWER = "answer unusable"
NOT_FOUND = "not found by the service tonight (paid once, not asked again)"


class _Fetcher:
    """Fetches targets concurrently and sorts every one into the outcome; a target whose calls
    failed transiently (after the client's own retries) is handed back for a later pass."""

    def __init__(
        self,
        session: Session,
        client: AsyncClient,
        budget: Budget,
        sink: Sink,
        outcome: HarvestOutcome,
        ledger: LedgerWriter,
        total: int,
    ) -> None:
        self.session = session
        self.client = client
        self.budget = budget
        self.sink = sink
        self.outcome = outcome
        self.ledger = ledger
        self.progress = Tracker("summaries", total)
        self.crashed: list[Exception] = []
        self.refused: str | None = None  # the budget's last refusal that stood (see `run`)

    def settled(self, targets: int = 1) -> None:
        """``targets`` have their outcome for the night (fetched, failed, deferred or skipped)."""
        self.progress.advance(targets, searches=self.ledger.spent)

    async def run(self, targets: list[Target], spare: Iterable[Target] = ()) -> list[tuple[Target, str]]:
        """Fetch ``targets``, then the ``spare`` ones (the plan deferred them, in its order) while
        the budget affords them: searches that came back (an answer the service let off, a
        count that fell less than planned) are spent on the next pairs, not left to expire. The
        first refusal that stands defers the spare ones left, with its reason. Returns the
        targets that failed transiently, with why."""
        queue: deque[Target] = deque(targets)
        waiting: deque[Target] = deque(spare)
        transient: list[tuple[Target, str]] = []

        def defer_waiting(why: str) -> None:
            self.outcome.deferred.extend((target, why) for target in waiting)
            self.settled(len(waiting))
            waiting.clear()

        async def worker() -> None:
            while queue or waiting:
                target = queue.popleft() if queue else waiting.popleft()
                if self.budget.stopped_reason:
                    self.outcome.deferred.append((target, self.budget.stopped_reason))
                    self.settled()
                    continue
                why = await self.fetch(target)
                if why is None:
                    self.settled()
                else:
                    transient.append((target, why))
                if self.crashed:
                    queue.clear()
                    defer_waiting(self.budget.stopped_reason or "stopped")
                elif self.refused is not None and waiting and not queue:
                    defer_waiting(self.refused)

        # More workers than HTTP slots: while one worker saves, parses and normalises a body,
        # another already holds the freed slot, so the service always has `concurrency` requests
        # in flight (never more: the client's slots bound them). Twice as many on a disk; on an
        # object store a body is kept by a PUT shared with others (a segment's linger and its PUT:
        # tens of milliseconds), so many more.
        per_slot = 2 if self.session.lake.local else 16
        await asyncio.gather(*(worker() for _ in range(per_slot * self.session.settings.concurrency)))
        return transient

    async def fetch(self, target: Target) -> str | None:
        """One target: its answer normalised, or the outcome says why not. Returns why when
        the calls failed transiently (a later pass may succeed)."""
        outcome, budget = self.outcome, self.budget
        call = summary_call(target)
        # A sink that parses the body itself (the tables worker) needs only its envelope read here.
        try:
            response = await self._send(call)
        except BudgetRefused as exc:
            self.refused = str(exc)
            outcome.deferred.append((target, str(exc)))
            return None
        except CredentialsError as exc:
            budget.stop(f"credentials refused: {exc}")
            outcome.failed.append((target, f"credentials: {exc}"))
            return None
        except QuotaError as exc:
            budget.stop(f"quota: {exc}")
            outcome.deferred.append((target, f"quota: {exc}"))
            return None
        except NotFoundError:
            outcome.skipped.append((target, NOT_FOUND))
            return None
        except UnusableResponse as exc:
            outcome.failed.append((target, f"{UNUSABLE_ANSWER}: {exc} (paid once tonight, not asked again; kept raw)"))
            return None
        except ApiError as exc:
            if exc.retryable:
                return str(exc)
            outcome.failed.append((target, str(exc)))
            return None
        except Exception as exc:  # noqa: BLE001 - ours (a body or ledger write): re-raised once in-flight calls settle
            self._stop_night(exc, "while fetching")
            return None
        try:
            self.sink.take(response, call.key)
        except MalformedPayload as exc:
            # The service's answer, not our code: this player fails, the night goes on.
            self.sink.reject(call.key, str(exc))
            outcome.failed.append((target, _unusable_why(str(exc))))
            return None
        except Exception as exc:  # noqa: BLE001 - re-raised once in-flight calls settle
            self._stop_night(exc, "while normalising")
            return None
        outcome.fetched += 1
        return None

    async def _send(self, call: calls.Call) -> ApiResponse:
        """The call's answer. A refusal that the calls in flight make ambiguous (see
        ``Budget.wait_mark``) waits for one of them to settle and asks again; one that stands
        is raised (:class:`BudgetRefused`)."""
        while True:
            try:
                return await self.client.send(call, tree=self.sink.needs_tree)
            except BudgetRefused:
                mark = self.budget.wait_mark(call.resource)
                if mark is None and self.budget.true_up():
                    continue  # searches came back: ask again
                if mark is None or not await _settled(self.budget, mark, self.session.settings.timeout_s + 1):
                    raise

    def _stop_night(self, exc: Exception, where: str) -> None:
        """A failure on our side: no new search starts, and the calls the service is already
        charging for finish (their bodies saved, their rows written); `_fetch` raises it then."""
        if not self.crashed:
            self.crashed.append(exc)
            self.budget.stop(f"stopped: {type(exc).__name__} {where}")


async def _settled(budget: Budget, mark: int, within_s: float) -> bool:
    """Wait until a call settles after ``mark`` (see ``Budget.wait_mark``), at most ``within_s``
    seconds (a call in flight ends within its timeout); whether one did."""
    deadline = time.monotonic() + within_s
    while not budget.settled_since(mark):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.002)
    return True


async def _fetch(
    session: Session,
    plan: Plan,
    budget: Budget,
    sink: Sink,
    outcome: HarvestOutcome,
    ledger: LedgerWriter,
) -> None:
    """Fetch the plan, then what it deferred while searches come back (see :meth:`_Fetcher.run`).
    What failed transiently gets one more pass at the end of the harvest,
    after a pause (a service in trouble for a minute must not cost a player), within the run's
    retry window; what fails again is reported failed, with why."""
    settings = session.settings
    retry_until = time.monotonic() + settings.retry_window_s
    async with session.async_client(
        calls=len(plan.calls), retry_until=retry_until, **session.meter.hooks(budget, ledger)
    ) as client:
        spare = [target for target, _ in plan.deferred if not target.needs_conversion]
        taken = set(spare)  # deferred by the fetcher again, with the reason that holds then, unless fetched
        outcome.deferred[:] = [item for item in outcome.deferred if item[0] not in taken]
        fetcher = _Fetcher(session, client, budget, sink, outcome, ledger, len(plan.calls) + len(spare))
        with _interrupt_stops_new_calls(budget) as interrupted:
            failing = await fetcher.run(list(plan.calls), spare)
        last_pass = (
            bool(failing)
            and not fetcher.crashed
            and not budget.stopped_reason
            and time.monotonic() + settings.retry_pass_wait_s < retry_until
        )
        if last_pass:
            log.warning(
                "%d call(s) failed transiently; one more pass in %g s (first: %s)",
                len(failing), settings.retry_pass_wait_s, failing[0][0],
            )  # fmt: skip
            await asyncio.sleep(settings.retry_pass_wait_s)
            failing = await fetcher.run([target for target, _ in failing])
        after = f" (failed again on the last pass, {settings.retry_pass_wait_s:g} s later)" if last_pass else ""
        outcome.failed.extend((target, why + after) for target, why in failing)
        if failing:
            fetcher.settled(len(failing))
        outcome.concurrency = client.concurrency
    if fetcher.crashed:
        raise fetcher.crashed[0]
    if interrupted:
        raise Interrupted("interrupted (Ctrl-C)")


class Interrupted(Exception):
    """Ctrl-C stopped the fetch, once the calls in flight were answered: raised by
    :func:`_harvest_night` as :class:`KeyboardInterrupt` once what was paid for is kept."""


@contextmanager
def _interrupt_stops_new_calls(budget: Budget) -> Iterator[list[bool]]:
    """While fetching in the main thread, the first Ctrl-C (SIGINT) stops new searches and lets
    the calls in flight finish — the service charges them: their answers are saved and their
    rows written — and a second one stops at once (the handler before ours is back). The
    yielded list holds ``True`` once interrupted."""
    interrupted: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    loop = asyncio.get_running_loop()
    before = signal.getsignal(signal.SIGINT)

    def give_back() -> None:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, before)

    def first_interrupt() -> None:
        interrupted.append(True)
        budget.stop("interrupted (Ctrl-C)")
        log.warning("interrupted: no new search starts; the calls in flight finish (Ctrl-C again to stop at once)")
        give_back()

    loop.add_signal_handler(signal.SIGINT, first_interrupt)
    try:
        yield interrupted
    finally:
        if not interrupted:
            give_back()
