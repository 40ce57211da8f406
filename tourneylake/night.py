"""One night of harvesting, as plain library functions (no Dagster).

The Dagster assets are thin wrappers around these, and notebooks or scripts may call them too.
The order of work inside a night keeps the product's promises:

1. Every HTTP 200 body is written to the lake's raw store by the client's ``on_body`` hook,
   before it is parsed: a paid response is on disk before anything else can fail.
2. Every metered attempt is appended to the ledger (flushed per line) as it completes.
3. Player summaries already harvested tonight (raw on disk, successful envelope) are
   re-normalised from the lake at zero cost; only the rest is planned and fetched.
4. Normalised rows stream into part files every ``batch_size`` responses; the night's
   partitions are swapped in atomically at the end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.api import (
    ApiError,
    AsyncClient,
    Attempt,
    Client,
    CredentialsError,
    QuotaError,
    ReceivedBody,
    calls,
)
from tourneylake.api.envelope import read_envelope
from tourneylake.budget import Budget, CostModel, Plan, Target, plan_night
from tourneylake.config import Settings
from tourneylake.filters import ConstraintDefinition, FilterCatalog
from tourneylake.lake import Lake
from tourneylake.ledger import Ledger, LedgerEntry, ledger_dates, night_entries, night_table
from tourneylake.normalize.metadata import Rates, normalize_metadata, series_types, statistic_types
from tourneylake.normalize.summary import SummaryNormalizer
from tourneylake.tree import MalformedPayload, Node, parse
from tourneylake.watchlist import Watchlist

log = logging.getLogger(__name__)

STATE_DIR = "_state"


class BudgetRefused(Exception):
    """The run's budget does not allow another metered call (cap, reserve, or a quota stop)."""


class RunFailed(Exception):
    """The night cannot go on (wrong credentials, for example); the message is one line."""


# ------------------------------------------------------------------------------ small state


class StateStore:
    """Tiny JSON documents beside the lake (metadata hash, natural-language filter cache)."""

    def __init__(self, lake_root: Path) -> None:
        self.directory = Path(lake_root) / STATE_DIR

    def read(self, name: str) -> dict[str, Any]:
        path = self.directory / f"{name}.json"
        if not path.is_file():
            return {}
        return orjson.loads(path.read_bytes())

    def write(self, name: str, value: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{name}.json"
        tmp = path.with_suffix(f".tmp-{uuid.uuid4().hex}")
        tmp.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(tmp, path)


# ------------------------------------------------------------------------------ the night


@dataclass
class Night:
    """Everything one night's work shares."""

    settings: Settings
    base_url: str
    snapshot_date: date
    run_id: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6])
    costs: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        self.lake = Lake(self.settings.data_dir, self.settings.source)
        self.state = StateStore(self.lake.root)

    # -- hooks shared by every client of the night

    def save_body(self, received: ReceivedBody) -> None:
        self.lake.write_raw(
            self.snapshot_date,
            received.call.resource,
            received.call.key,
            received.body,
            received.format,
            received.fetched_at,
        )

    def client(self, **hooks: Any) -> Client:
        return Client(self.settings, base_url=self.base_url, on_body=self.save_body, **hooks)

    def async_client(self, **hooks: Any) -> AsyncClient:
        return AsyncClient(self.settings, base_url=self.base_url, on_body=self.save_body, **hooks)

    # -- reference data in force tonight

    def latest_partition(self, table: str) -> date | None:
        dates = [d for d in self.lake.partitions(table) if d <= self.snapshot_date]
        if not dates:
            dates = self.lake.partitions(table)  # a backfill before the first metadata: use the oldest
            return dates[0] if dates else None
        return dates[-1]

    def read_reference(self, table: str) -> pa.Table | None:
        when = self.latest_partition(table)
        if when is None:
            return None
        return pq.read_table(self.lake.partition_path(table, when))

    def rates(self) -> Rates:
        table = self.read_reference("currencies")
        return Rates.from_table(table) if table is not None else Rates({})

    def statistic_types(self) -> dict[str, str]:
        table = self.read_reference("statistic_definitions")
        return statistic_types(table) if table is not None else {}

    def series_types(self) -> dict[tuple[str, str], str]:
        table = self.read_reference("dataset_definitions")
        return series_types(table) if table is not None else {}

    def filter_catalog(self) -> FilterCatalog | None:
        constraints = self.read_reference("filter_constraints")
        if constraints is None:
            return None
        options = self.read_reference("filter_options")
        by_constraint: dict[str, list[str]] = {}
        if options is not None:
            for row in options.select(["constraint_id", "option_id"]).to_pylist():
                by_constraint.setdefault(row["constraint_id"], []).append(row["option_id"])
        currencies = self.read_reference("currencies")
        return FilterCatalog(
            constraints={
                row["constraint_id"]: ConstraintDefinition(
                    row["constraint_id"], row["type"] or "", tuple(by_constraint.get(row["constraint_id"], ()))
                )
                for row in constraints.select(["constraint_id", "type"]).to_pylist()
            },
            currencies=frozenset(currencies.column("iso").to_pylist()) if currencies is not None else frozenset(),
        )

    def known_networks(self) -> set[str] | None:
        table = self.read_reference("networks")
        return set(table.column("name").to_pylist()) if table is not None else None


# ------------------------------------------------------------------------------ reference data


@dataclass(frozen=True)
class MetadataOutcome:
    metadata_hash: str | None
    downloaded: bool
    rows: dict[str, int]
    currencies_without_rate: list[str]


def refresh_metadata(night: Night) -> MetadataOutcome:
    """Fetch metadata with our hash: when the service says our copy is current nothing is
    downloaded, parsed or written again; when the hash changed, tonight's tables (and rates)
    are written for this night."""
    known = night.state.read("metadata").get("hash") if night.lake.partitions("currencies") else None
    with night.client() as client:
        response = client.metadata(hash=known)
    if response.metadata_is_current:
        table = night.read_reference("currencies")
        missing = _currencies_without_rate(table)
        return MetadataOutcome(known, False, {}, missing)
    tables = normalize_metadata(response.root, night.snapshot_date)
    for name, table in tables.items():
        night.lake.write_table(name, night.snapshot_date, table)
    night.state.write("metadata", {"hash": response.envelope.metadata_hash, "snapshot_date": night.snapshot_date.isoformat()})
    return MetadataOutcome(
        response.envelope.metadata_hash,
        True,
        {name: table.num_rows for name, table in tables.items()},
        _currencies_without_rate(tables.get("currencies")),
    )


def _currencies_without_rate(table: pa.Table | None) -> list[str]:
    if table is None:
        return []
    return sorted(row["iso"] for row in table.select(["iso", "rate"]).to_pylist() if row["rate"] is None)


@dataclass(frozen=True)
class ReferenceOutcome:
    table: str
    rows: int
    warnings: list[str]
    remaining_searches: int | None


def refresh_free_resource(night: Night, resource: str) -> ReferenceOutcome:
    """Countries or news (free): fetch, keep raw, normalise by what the payload holds."""
    from tourneylake.normalize import reference

    with night.client() as client:
        if resource == "countries":
            response = client.countries()
            table, warnings = reference.normalize_countries(response.root, night.snapshot_date)
        elif resource == "news":
            response = client.whats_new()
            table, warnings = reference.normalize_news(response.root, night.snapshot_date)
        else:  # pragma: no cover - programming error
            raise ValueError(resource)
    night.lake.write_table(resource, night.snapshot_date, table)
    for warning in warnings:
        log.warning("%s: %s", resource, warning)
    return ReferenceOutcome(resource, table.num_rows, list(warnings), response.remaining_searches)


# ------------------------------------------------------------------------------ players


@dataclass
class HarvestOutcome:
    snapshot_date: date
    fetched: int = 0
    reused: int = 0
    searches_spent: int = 0
    remaining_searches: int | None = None
    deferred: list[tuple[Target, str]] = field(default_factory=list)
    skipped: list[tuple[Target, str]] = field(default_factory=list)
    failed: list[tuple[Target, str]] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    stopped_reason: str | None = None

    @property
    def players_done(self) -> int:
        return self.fetched + self.reused


def target_key(network: str, player: str, filter_name: str | None) -> tuple[str, str, str]:
    return (network, player, filter_name or "")


def resolve_targets(
    night: Night,
    watchlist: Watchlist,
    budget: Budget | None,
    ledger: Ledger | None,
    *,
    convert: bool = True,
) -> tuple[list[Target], dict[str, str], list[str]]:
    """Watchlist → planner targets, with the filter problems and the unconverted questions.

    Questions are converted once through the Natural Language Filter resource and cached with
    their timezone and locale; with ``convert=False`` (a plan that must not spend) an uncached
    one keeps no expression, so the planner budgets its conversion. Filters are validated
    against metadata so an invalid one never costs a search."""
    cache = night.state.read("nlq_cache")
    catalog = night.filter_catalog()
    expressions: dict[str, str | None] = {}
    problems: dict[str, str] = {}
    unconverted: list[str] = []
    for name, definition in watchlist.filters.items():
        expression = definition.expression
        if definition.is_question:
            expression = cache.get(_nlq_key(definition.question, definition.timezone, definition.locale))
            if expression is None and not convert:
                unconverted.append(name)
                expressions[name] = None
                continue
            if expression is None:
                try:
                    expression = ask_filter(night, definition.question, definition.timezone, definition.locale, budget, ledger)
                except (ApiError, BudgetRefused) as exc:
                    problems[name] = f"question not converted: {exc}"
                    continue
        if catalog is not None:
            found = catalog.problems(expression or "")
            if found:
                problems[name] = "invalid filter: " + "; ".join(p.message for p in found)
                continue
        expressions[name] = expression or ""
    targets = [
        Target(player.network, player.name, filter_name, expressions.get(filter_name) if filter_name else None, player.priority)
        for player, filter_name in watchlist.targets()
    ]
    return targets, problems, unconverted


def _nlq_key(question: str | None, timezone: str | None, locale: str | None) -> str:
    return "\x1f".join([question or "", timezone or "", locale or ""])


def ask_filter(
    night: Night,
    question: str,
    timezone: str | None = None,
    locale: str | None = None,
    budget: Budget | None = None,
    ledger: Ledger | None = None,
) -> str:
    """Convert a question to a filter (1 search the first time, then from the cache)."""
    cache = night.state.read("nlq_cache")
    key = _nlq_key(question, timezone, locale)
    if key in cache:
        return cache[key]
    hooks = _metering_hooks(night, budget, ledger) if ledger is not None else {}
    with night.client(**hooks) as client:
        response = client.natural_language_filter(question, timezone, locale)
    payload = response.payload
    expression = (payload.text if payload is not None else None) or ""
    if payload is not None and not payload.text:
        inner = payload.one("Filter")
        expression = (inner.text if inner is not None else "") or ""
    cache[key] = expression
    night.state.write("nlq_cache", cache)
    return expression


def last_fetched(night: Night) -> dict[tuple[str, str, str], date]:
    """The last night each (network, player, filter) was harvested successfully, from the ledger."""
    seen: dict[tuple[str, str, str], date] = {}
    for when in ledger_dates(night.lake.root):
        if when >= night.snapshot_date:
            continue
        path = night.lake.partition_path("search_ledger", when)
        if not path.exists():
            continue
        table = pq.read_table(path, columns=["resource", "network", "player", "filter_name", "outcome"])
        for row in table.to_pylist():
            if row["resource"] == calls.PLAYER_SUMMARY and row["outcome"] == "ok":
                seen[target_key(row["network"], row["player"], row["filter_name"])] = when
    return seen


def _charged(attempt: Attempt) -> bool:
    """Whether an attempt cost searches: a successful answer, or a body the service produced
    but that arrived unreadable (it did the work). Refusals and transport failures are free."""
    return attempt.outcome in ("ok", "malformed_response")


def _metering_hooks(night: Night, budget: Budget | None, ledger: Ledger) -> dict[str, Callable[..., None]]:
    def gate(call: calls.Call, number: int) -> None:
        if budget is not None and call.metered and not budget.try_reserve(call.resource):
            raise BudgetRefused(budget.refusal(call.resource) or budget.stopped_reason or "budget: no searches left for this run")

    def record(attempt: Attempt) -> None:
        call = attempt.call
        if not call.metered:
            return
        charged = _charged(attempt)
        if budget is not None:  # settle first: an isolated call teaches the cost model the true cost
            budget.settle(call.resource, attempt.remaining_after, charged)
        cost = night.costs.cost(call.resource) if charged else 0
        ledger.record(
            LedgerEntry(
                called_at=attempt.started_at,
                run_id=night.run_id,
                resource=call.resource,
                network=call.key.get("network"),
                player=call.key.get("player"),
                filter_name=call.key.get("filter_name"),
                filter_expression=call.key.get("filter") or None,
                question=call.key.get("question"),
                attempt=attempt.number,
                cost=cost,
                remaining_after=attempt.remaining_after,
                outcome=attempt.outcome,
                error_code=attempt.error_code,
                error=attempt.error,
                duration_ms=round(attempt.duration_s * 1000, 3),
            )
        )

    return {"before_attempt": gate, "on_attempt": record}


class _TableSink:
    """Normalised rows → part files, a batch at a time (memory stays flat)."""

    def __init__(self, night: Night, stack: ExitStack, batch_size: int) -> None:
        self.night = night
        self.stack = stack
        self.batch_size = batch_size
        self.normalizer = SummaryNormalizer(
            night.snapshot_date, night.rates(), night.statistic_types(), night.series_types()
        )
        self.writers: dict[str, Any] = {}
        self.pending = 0
        self.rows: dict[str, int] = {}

    def add(self, root: Node, target: Target, fetched_at: datetime) -> None:
        self.normalizer.add(
            root,
            network=target.network,
            player=target.player,
            filter_name=target.filter_name,
            filter_expression=target.filter_expression,
            fetched_at=fetched_at,
        )
        self.pending += 1
        if self.pending >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        self.pending = 0
        for name, table in self.normalizer.flush().items():
            if table.num_rows == 0:
                continue
            writer = self.writers.get(name)
            if writer is None:
                writer = self.writers[name] = self.stack.enter_context(
                    self.night.lake.partition_writer(name, self.night.snapshot_date)
                )
            writer.write(table)
            self.rows[name] = self.rows.get(name, 0) + table.num_rows


def harvest_players(night: Night, watchlist: Watchlist, *, batch_size: int = 500) -> HarvestOutcome:
    """Harvest tonight's player summaries within the budget; see the module docstring."""
    outcome = HarvestOutcome(night.snapshot_date)
    settings = night.settings
    with Ledger(night.lake.root, night.snapshot_date, night.run_id) as ledger, ExitStack() as stack:
        sink = _TableSink(night, stack, batch_size)
        harvested = _reuse_tonights_raw(night, sink)
        outcome.reused = len(harvested)

        remaining = _read_remaining(night)
        # A re-run of a half-finished night may spend only what the first run left of the cap.
        cap = _left_in_run(settings.max_searches_per_run, _spent_tonight(night))
        budget = Budget(
            remaining=remaining,
            max_searches_per_run=cap,
            reserve=settings.reserve_searches,
            costs=night.costs,
        )
        targets, filter_problems, _ = resolve_targets(night, watchlist, budget, ledger)
        plan = plan_night(
            targets,
            last_fetched=last_fetched(night),
            harvested_tonight=harvested,
            remaining=budget.remaining,
            max_searches_per_run=cap,
            reserve=settings.reserve_searches,
            costs=night.costs,
            known_networks=night.known_networks(),
            filter_problems=filter_problems,
            run_date=night.snapshot_date,
        )
        outcome.skipped.extend(plan.skipped)
        outcome.deferred.extend(plan.deferred)
        log.info(
            "night %s: %d to fetch (%d searches planned), %d already harvested tonight, %d deferred, %d skipped",
            night.snapshot_date, len(plan.calls), plan.searches_planned, outcome.reused, len(plan.deferred), len(plan.skipped),
        )
        asyncio.run(_fetch(night, plan, budget, ledger, sink, outcome))
        # The reconciliation is one round trip to the service; the last flush is local work:
        # overlap them (the flush does not touch the ledger).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tourneylake-reconcile") as pool:
            reconciled = pool.submit(_reconcile, night, ledger, remaining)
            sink.flush()
            reconciled.result()
        outcome.rows = dict(sink.rows)
        outcome.searches_spent = ledger.spent
        outcome.remaining_searches = budget.remaining
        outcome.stopped_reason = budget.stopped_reason
    night.lake.write_table("search_ledger", night.snapshot_date, night_table(night.lake.root, night.snapshot_date))
    fatal = next((reason for _, reason in outcome.failed if reason.startswith("credentials:")), None)
    if fatal:
        raise RunFailed(fatal)
    return outcome


def _left_in_run(cap: int | None, spent: int) -> int | None:
    return None if cap is None else max(0, cap - spent)


def _reconcile(night: Night, ledger: Ledger, before: int | None) -> None:
    """Make the ledger add up to what the service counted. A call can be charged yet reach us
    as a failure (a body slower than our timeout, say); the difference between the drop in
    RemainingSearches and the ledger's costs is written as one ``unattributed`` row, so that
    spent == sum of ledger costs == drop, whatever went wrong on the wire."""
    if before is None or not ledger.attempts:
        return
    after = _read_remaining(night)
    if after is None:
        return
    difference = (before - after) - ledger.spent
    if difference > 0:
        log.warning("the service counted %d more searches than our ledger; recorded as unattributed", difference)
        ledger.record(
            LedgerEntry(
                called_at=datetime.now(UTC), run_id=night.run_id, resource="unattributed", network=None, player=None,
                filter_name=None, filter_expression=None, question=None, attempt=0, cost=difference,
                remaining_after=after, outcome="reconciliation", error_code=None,
                error="RemainingSearches dropped more than the ledger's costs", duration_ms=0.0,
            )
        )


def _spent_tonight(night: Night) -> int:
    # Hand analyses run in their own opt-in job with their own budget: not the harvest's cap.
    return sum(
        int(row.get("cost") or 0)
        for row in night_entries(night.lake.root, night.snapshot_date)
        if row.get("resource") != calls.HAND_ANALYSIS
    )


def _read_remaining(night: Night) -> int | None:
    """Searches left before we spend any: a free authenticated call reports them."""
    try:
        with night.client() as client:
            response = client.countries()
    except CredentialsError as exc:
        raise RunFailed(f"credentials refused by the service: {exc}") from None
    except ApiError:
        return None
    info = response.envelope.user_info
    if info is not None and not info.logged_in:  # a free call answers bad credentials with loggedIn="false"
        raise RunFailed("credentials refused by the service: it answered loggedIn=false (check user name, password and app key)")
    return response.remaining_searches


def paid_summaries(night: Night) -> Iterator[tuple[Target, Node, datetime]]:
    """Tonight's summaries already paid for and readable in the lake (a body cut short is not)."""
    for raw in night.lake.iter_raw(night.snapshot_date, calls.PLAYER_SUMMARY):
        try:
            root = parse(raw.body, raw.fmt)
            if not read_envelope(root).success:
                continue
        except (MalformedPayload, ApiError):
            continue
        key = raw.key
        yield Target(key["network"], key["player"], key.get("filter_name") or None, key.get("filter") or None, 0), root, raw.fetched_at


def _reuse_tonights_raw(night: Night, sink: _TableSink) -> set[tuple[str, str, str]]:
    """Normalise the summaries already paid for tonight straight from the lake (zero searches)."""
    done: set[tuple[str, str, str]] = set()
    for target, root, fetched_at in paid_summaries(night):
        sink.add(root, target, fetched_at)
        done.add(target_key(target.network, target.player, target.filter_name))
    return done


async def _fetch(night: Night, plan: Plan, budget: Budget, ledger: Ledger, sink: _TableSink, outcome: HarvestOutcome) -> None:
    queue: deque[Target] = deque(plan.calls)
    total = len(plan.calls)
    progress_every = max(1, total // 10)
    hooks = _metering_hooks(night, budget, ledger)
    crashed: list[Exception] = []

    async with night.async_client(**hooks) as client:

        async def worker() -> None:
            while queue:
                target = queue.popleft()
                if budget.stopped_reason:
                    outcome.deferred.append((target, budget.stopped_reason))
                    continue
                call = calls.player_summary(target.network, target.player, target.filter_expression, target.filter_name)
                try:
                    response = await client.send(call)
                except BudgetRefused as exc:
                    outcome.deferred.append((target, str(exc)))
                    continue
                except CredentialsError as exc:
                    budget.stop(f"credentials refused: {exc}")
                    outcome.failed.append((target, f"credentials: {exc}"))
                    continue
                except QuotaError as exc:
                    budget.stop(f"quota: {exc}")
                    outcome.deferred.append((target, f"quota: {exc}"))
                    continue
                except ApiError as exc:
                    outcome.failed.append((target, str(exc)))
                    continue
                try:
                    sink.add(response.root, target, response.fetched_at)
                except Exception as exc:  # noqa: BLE001 - re-raised once in-flight calls settle
                    # A failure on our side must not cancel calls the service is already
                    # charging for: stop starting new ones, let those finish (and be ledgered).
                    if not crashed:
                        crashed.append(exc)
                        budget.stop(f"stopped: {type(exc).__name__} while normalising")
                    queue.clear()
                    continue
                outcome.fetched += 1
                if outcome.fetched % progress_every == 0 or outcome.fetched == total:
                    log.info("fetched %d/%d summaries, %s searches left", outcome.fetched, total, budget.remaining)

        # Twice as many workers as HTTP slots: while one worker saves, parses and normalises a
        # body, another already holds the freed slot, so the service always has `concurrency`
        # requests in flight (never more: the client's slots bound them).
        await asyncio.gather(*(worker() for _ in range(2 * night.settings.concurrency)))
    if crashed:
        raise crashed[0]


def summarize_deferred(items: Iterable[tuple[Target, str]]) -> list[str]:
    return [f"{t.network}/{t.player}" + (f" [{t.filter_name}]" if t.filter_name else "") + f": {why}" for t, why in items]
