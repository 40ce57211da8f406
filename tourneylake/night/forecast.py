"""Tonight's plan without spending: what ``tourneylake budget`` shows.

:func:`budget_report` reads the searches left through a free authenticated call and plans the
night exactly as the harvest would, without spending anything (a question filter not yet
converted is shown as needing its conversion, never converted); it claims nothing, writes
nothing, and works before the first run. The data comes back as plain values;
``tourneylake.cli`` renders it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date

from tourneylake.api import calls
from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError
from tourneylake.lake.ledger import Ledger
from tourneylake.night.accounts import account_settings, share_of
from tourneylake.night.budget import Target
from tourneylake.night.drain import DrainPlan, drain_plan
from tourneylake.night.harvest import plan_tonight, resolve_targets
from tourneylake.night.metering import left_in_run
from tourneylake.night.quota_day import QuotaDay
from tourneylake.night.session import Session, connected
from tourneylake.night.watchlist import AccountDef, Watchlist, WatchlistError, load_watchlist
from tourneylake.tables.night_tables import stored_targets

__all__ = ["BudgetReport", "backfill_refusal", "budget_report", "budget_reports", "session_report"]

log = logging.getLogger(__name__)


@dataclass
class BudgetReport:
    """What ``tourneylake budget`` shows; built by :func:`budget_report` without a search."""

    night: date
    source: str
    remaining: int | None
    remaining_note: str | None
    max_searches_per_run: int | None
    reserve: int
    spent_tonight: int
    cap_left: int | None
    affordable: int | None
    costs: dict[str, int]
    planned: list[Target] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    searches_planned: int = 0
    deferred: list[tuple[Target, str]] = field(default_factory=list)
    skipped: list[tuple[Target, str]] = field(default_factory=list)
    unconverted: list[str] = field(default_factory=list)
    spend_per_night: dict[date, tuple[int, int]] = field(default_factory=dict)  # night → (searches, metered calls)
    notes: list[str] = field(default_factory=list)
    account: str | None = None  # the watchlist account this plan is for (None: the settings' one)
    quota: QuotaDay | None = None  # the next quota reset, and the searches left that expire at it
    drain: DrainPlan | None = None  # the pairs owed to earlier nights, and what a drain would spend now

    def needs_conversion(self, target: Target) -> bool:
        return target.filter_name is not None and target.filter_name in self.unconverted


def budget_report(settings: Settings, night: date) -> BudgetReport:
    """Searches left, the night's plan, the deferred and the skipped with why, and the spend
    per night. Costs nothing: the only call is the free Countries resource."""
    return budget_reports(settings, night)[0]


def budget_reports(settings: Settings, night: date) -> list[BudgetReport]:
    """:func:`budget_report` for the settings' account, or one per account when the watchlist
    lists several (each with its share of the players, its limits and its own ledger)."""
    accounts = _accounts(settings)
    with connected(settings, night, writable=False) as session:
        if not accounts:
            return [_report(session, *_remaining(session))]
        reports = []
        for account in accounts:
            own = Session.open(account_settings(settings, account), session.base_url, night, writable=False, account=account.name)
            reports.append(_report(own, *_remaining(own)))
        return reports


def _accounts(settings: Settings) -> list[AccountDef]:
    try:
        return load_watchlist(settings.watchlist).accounts if settings.watchlist.is_file() else []
    except WatchlistError:
        return []  # the report says why the watchlist cannot be used


def _remaining(session: Session) -> tuple[int | None, str | None]:
    try:
        return session.reading()
    except TourneylakeError as exc:
        return None, str(exc)


def _report(session: Session, remaining: int | None, remaining_note: str | None) -> BudgetReport:
    settings, night, lake = session.settings, session.night, session.lake
    spent = session.meter.spent_tonight()
    cap_left = left_in_run(settings.max_searches_per_run, session.meter.spent_on_cap(calls.PLAYER_SUMMARY))
    report = BudgetReport(
        night=night,
        source=settings.source,
        remaining=remaining,
        remaining_note=remaining_note,
        max_searches_per_run=settings.max_searches_per_run,
        reserve=settings.reserve_searches,
        spent_tonight=spent,
        cap_left=cap_left,
        affordable=None,
        costs=session.meter.costs.snapshot(),
        spend_per_night=Ledger(lake).spend_per_night(account=session.account),
        account=session.account,
        quota=session.quota_day(remaining),
    )
    in_force, against = session.checked_against()  # the watchlist's check: current metadata, free
    watchlist = None
    if not settings.watchlist.is_file():
        report.notes.append(f"no watchlist at {settings.watchlist}: nothing to plan")
    else:
        try:
            watchlist = load_watchlist(settings.watchlist)
            if session.account is not None:
                watchlist = share_of(watchlist, session.account)
        except WatchlistError as exc:
            report.notes.append("watchlist not usable: " + " | ".join(str(exc).splitlines()))
    if in_force.filter_catalog is None:
        report.notes.append(f"filters checked for syntax only, networks not checked: {against}")
    else:
        report.notes.append(f"filters and networks checked against {against}")
    if watchlist is None:
        known = [
            b for b in (cap_left, None if remaining is None else max(remaining - settings.reserve_searches, 0)) if b is not None
        ]
        report.affordable = min(known) if known else None
        return report
    resolution = resolve_targets(session, watchlist, None, None, convert=False, in_force=in_force)
    plan = plan_tonight(session, resolution, stored_targets(lake, night), remaining=remaining, cap=cap_left, in_force=in_force)
    report.planned = list(plan.calls)
    report.conversions = list(plan.conversions)
    report.searches_planned = plan.searches_planned
    report.deferred = list(plan.deferred)
    report.skipped = list(plan.skipped)
    report.unconverted = resolution.unconverted
    report.affordable = plan.affordable
    report.drain = drain_plan(session, watchlist, remaining)
    return report


def backfill_refusal(session: Session, watchlist: Watchlist, nights: list[date]) -> str | None:
    """Why a backfill of ``nights`` must not start (one line saying how to allow it), or
    ``None``: more nights than ``TOURNEYLAKE_MAX_BACKFILL_NIGHTS``, or more searches than the
    account has left above its reserve. Each night the lake does not hold yet may cost every
    pair of ``watchlist`` (within the run cap); a night it holds costs nothing again. Free: the
    only call is the searches-left reading."""
    settings = session.settings
    if len(nights) > settings.max_backfill_nights:
        return (
            f"a backfill of {len(nights)} nights is refused: more than TOURNEYLAKE_MAX_BACKFILL_NIGHTS="
            f"{settings.max_backfill_nights} (backfill fewer nights, or raise the setting to {len(nights)})"
        )
    held = set(session.lake.tables.nights("player_snapshots"))
    per_night = sum(1 for _ in watchlist.targets()) * session.meter.costs.cost(calls.PLAYER_SUMMARY)
    if settings.max_searches_per_run is not None:
        per_night = min(per_night, settings.max_searches_per_run)
    needed = per_night * sum(1 for night in nights if night not in held)
    remaining = session.read_remaining(recent=True)
    if remaining is None or needed <= remaining - settings.reserve_searches:
        return None
    left = max(remaining - settings.reserve_searches, 0)
    return (
        f"a backfill of {len(nights)} nights is refused: it may spend up to {needed:,} searches and the account has "
        f"{left:,} left above its reserve (backfill fewer nights, or wait for the quota to reset)"
    )


def session_report(session: Session, remaining: int | None, remaining_note: str | None = None) -> BudgetReport:
    """:func:`budget_report` on an open session, with the searches left it has read: ``tourneylake
    doctor``'s, which plans against the metadata the service has just sent."""
    return _report(session, remaining, remaining_note)
