"""What the user asks between nights: the budget, a filter's validity, a question converted.

- :func:`budget_report` reads the searches left through a free authenticated call and plans the
  night exactly as the harvest would, without spending anything (a question filter not yet
  converted is shown as needing its conversion, never converted); it claims nothing, writes
  nothing, and works before the first run;
- :func:`check_filter` checks a filter for free (syntax, then metadata from the lake or, with the
  sandbox, from its free Metadata resource);
- :func:`ask` converts a question once (the cache is shared with the harvest); its one search
  goes through the budget guard (run cap, reserve) and into the day's ledger.

The data comes back as plain values; ``tourneylake.cli`` renders it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date

from tourneylake.accounts import account_settings, share_of
from tourneylake.api import ApiError, Client, calls
from tourneylake.budget import Target
from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError
from tourneylake.filters import FilterCatalog, FilterSyntaxError, parse_filter
from tourneylake.from_raw import stored_targets
from tourneylake.harvest import plan_tonight, resolve_targets
from tourneylake.lake import Lake
from tourneylake.ledger import Ledger
from tourneylake.reference import InForce
from tourneylake.session import Session, connected, left_in_run, today
from tourneylake.watchlist import AccountDef, WatchlistError, load_watchlist

__all__ = [
    "BudgetReport",
    "InvalidConvertedFilter",
    "ask",
    "budget_report",
    "budget_reports",
    "check_filter",
]

log = logging.getLogger(__name__)


class InvalidConvertedFilter(TourneylakeError, ValueError):
    """The service converted a question into a filter that metadata rejects."""


# ------------------------------------------------------------------------------------ budget


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
        remaining = session.read_remaining()
    except TourneylakeError as exc:
        return None, f"could not ask the service: {exc}"
    return remaining, None if remaining is not None else "the service did not report the account's RemainingSearches"


def _report(session: Session, remaining: int | None, remaining_note: str | None) -> BudgetReport:
    settings, night, lake = session.settings, session.night, session.lake
    spent = session.spent_tonight()
    cap_left = left_in_run(settings.max_searches_per_run, session.spent_on_cap(calls.PLAYER_SUMMARY))
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
        costs=session.costs.snapshot(),
        spend_per_night=Ledger(lake).spend_per_night(account=session.account),
        account=session.account,
    )
    in_force = session.in_force()
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
        report.notes.append("no metadata in the lake yet: filters checked for syntax only, networks not checked")
    if watchlist is None:
        known = [
            b for b in (cap_left, None if remaining is None else max(remaining - settings.reserve_searches, 0)) if b is not None
        ]
        report.affordable = min(known) if known else None
        return report
    resolution = resolve_targets(session, watchlist, None, None, convert=False)
    plan = plan_tonight(session, resolution, stored_targets(lake, night), remaining=remaining, cap=cap_left)
    report.planned = list(plan.calls)
    report.conversions = list(plan.conversions)
    report.searches_planned = plan.searches_planned
    report.deferred = list(plan.deferred)
    report.skipped = list(plan.skipped)
    report.unconverted = resolution.unconverted
    report.affordable = plan.affordable
    return report


# ------------------------------------------------------------------------------------ filters


def _problems(catalog: FilterCatalog | None, expression: str) -> list[str]:
    try:
        parse_filter(expression)
    except FilterSyntaxError as exc:
        return [f"syntax: {exc}"]
    return [str(problem) for problem in catalog.problems(expression)] if catalog is not None else []


def _service_catalog(settings: Settings, base_url: str) -> FilterCatalog | None:
    """The filter catalogue from the service's Metadata resource (free, no credentials sent)."""
    try:
        with Client(settings, base_url=base_url) as client:
            return FilterCatalog.from_metadata(client.metadata().root)
    except (ApiError, ValueError) as exc:
        log.warning("could not read metadata to validate the filter: %s", exc)
        return None


def _lake_catalog(settings: Settings) -> FilterCatalog | None:
    lake = Lake(settings.data_dir)
    return InForce(lake, today()).filter_catalog if lake.exists else None


def check_filter(settings: Settings, expression: str) -> list[str]:
    """Every problem with ``expression``; empty when it is fine. Never spends a search.

    Syntax is always checked. Then metadata: the lake's (when it holds metadata tables), else
    the sandbox's (the Metadata resource is free), else none (a warning says only the syntax was
    checked)."""
    problems = _problems(None, expression)
    if problems:
        return problems
    catalog = _lake_catalog(settings)
    if catalog is None and settings.is_sandbox:
        with connected(settings, writable=False) as session:
            catalog = _service_catalog(settings, session.base_url)
    if catalog is None:
        log.warning(
            "no metadata in %s yet: only the filter's syntax was checked (run `tourneylake run` first)", settings.data_dir
        )
    return _problems(catalog, expression)


def ask(settings: Settings, question: str, timezone: str | None = None, locale: str | None = None) -> tuple[str, int]:
    """Convert ``question`` into a filter: one search the first time, free after (cached with
    its timezone and locale, shared with the nightly harvest). Returns (filter, searches spent).

    The filter is validated (syntax, and metadata when available); one the service produced but
    metadata rejects raises :class:`InvalidConvertedFilter`, saying what it cost."""
    catalog = _lake_catalog(settings)
    with connected(settings, writable=True) as session:
        spent = 0
        expression = session.cached_filter(question, timezone, locale)
        if expression is None:
            with session.metered(calls.NATURAL_LANGUAGE_FILTER) as (budget, ledger):
                expression = session.ask_filter(question, timezone, locale, budget, ledger)
            spent = ledger.spent
            if catalog is None:
                catalog = _service_catalog(settings, session.base_url)
    problems = _problems(catalog, expression)
    if problems:
        raise InvalidConvertedFilter(
            f"the service converted the question to {expression!r}, which is not a valid filter: "
            + "; ".join(problems)
            + f" ({spent} search{'es' if spent != 1 else ''} spent)"
        )
    return expression, spent
