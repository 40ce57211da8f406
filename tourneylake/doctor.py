"""``tourneylake doctor``: the first contact with an account, at no search.

Everything a night needs, checked before a night pays for anything: the installation, the data
directory, the watchlist; then only free calls to the service — its metadata (the URL answers,
the application is known) and the reading of the searches left (the account and the application
key are accepted) — and tonight's plan as the night would make it, against the metadata the
service has just sent rather than the lake's: every pair checked (networks, filters), the
questions not converted yet and what converting them costs, what would be deferred and what the
reserve keeps. Nothing is written to the lake. Each problem is one line naming what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pyarrow as pa

from tourneylake.api import ApiError, CredentialsError, RequestRejected, ServiceUnreachable, calls
from tourneylake.api.client import redact
from tourneylake.config import ENV_PREFIX, Settings, unwritable
from tourneylake.errors import ConfigError, RunFailed, TourneylakeError
from tourneylake.lake.lake import Lake
from tourneylake.night.accounts import account_settings
from tourneylake.night.endpoint import connect
from tourneylake.night.forecast import BudgetReport, session_report
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist, WatchlistError, load_watchlist
from tourneylake.packaged import check_packaged
from tourneylake.tables.normalize.metadata import normalize_metadata
from tourneylake.tables.reference import InForce

__all__ = ["Diagnosis", "Finding", "diagnose"]

#: Why a pair costs nothing tonight that is the watchlist's mistake (the rest is as it should be).
WATCHLIST_MISTAKES = ("unknown network", "invalid filter")
CREDENTIALS = f"{ENV_PREFIX}USERNAME, {ENV_PREFIX}PASSWORD and {ENV_PREFIX}APPKEY"


@dataclass(frozen=True)
class Finding:
    """One thing checked: ``ok``, or a problem whose ``text`` names what to change."""

    check: str
    ok: bool
    text: str


@dataclass
class Diagnosis:
    """What ``doctor`` found; plain values, rendered by the command line."""

    service: str
    source: str
    night: date
    findings: list[Finding] = field(default_factory=list)
    plans: list[BudgetReport] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [finding for finding in self.findings if not finding.ok]

    def fine(self, check: str, text: str) -> None:
        self.findings.append(Finding(check, True, text))

    def problem(self, check: str, text: str) -> None:
        self.findings.append(Finding(check, False, " ".join(text.split())))

    def as_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "source": self.source,
            "night": self.night.isoformat(),
            "ok": not self.problems,
            "findings": [{"check": f.check, "ok": f.ok, "text": f.text} for f in self.findings],
            "plans": [_plan_json(plan) for plan in self.plans],
        }


@dataclass
class _AsServed(Session):
    """A read-only session whose reference data is the metadata the service has just sent (a
    first contact has none in the lake yet; a later one checks against the service's today)."""

    metadata: dict[str, pa.Table] = field(default_factory=dict)

    def in_force(self) -> InForce:
        return InForce(self.lake, self.night, own=self.metadata)


def diagnose(settings: Settings, night: date) -> Diagnosis:
    """Check what a night of ``night`` needs, calling only free resources (see the module)."""
    found = Diagnosis("sandbox" if settings.is_sandbox else redact(settings.base_url), settings.source, night)
    _installation(found)
    problem = unwritable(settings)
    if problem:
        found.problem("data directory", problem)
    else:
        found.fine("data directory", f"{settings.local_dir} can be written")
    watchlist = _watchlist(found, settings)
    with connect(settings, today=night) as endpoint:
        session = _AsServed(settings, endpoint.base_url, night, Lake.of(settings), writable=False)
        if not _metadata(found, session):
            return found
        if watchlist is None or not watchlist.accounts:
            _account(found, session, watchlist)
            return found
        for account in watchlist.accounts:
            try:
                own = account_settings(settings, account)
            except ConfigError as exc:
                found.problem("account", str(exc))
                continue
            lake = Lake.of(own)
            _account(
                found,
                _AsServed(own, endpoint.base_url, night, lake, False, account=account.name, metadata=session.metadata),
                watchlist,
            )
    return found


def _installation(found: Diagnosis) -> None:
    try:
        check_packaged()
    except ConfigError as exc:
        found.problem("installation", str(exc))
    else:
        found.fine("installation", "the warehouse's tables, the dbt project, the example queries and the notebooks are installed")


def _watchlist(found: Diagnosis, settings: Settings) -> Watchlist | None:
    path = settings.watchlist
    if not path.is_file():
        found.problem(
            "watchlist", f"no watchlist at {path}: write one (`tourneylake init` makes a starter) or set {ENV_PREFIX}WATCHLIST"
        )
        return None
    try:
        listed = load_watchlist(path)
    except WatchlistError as exc:
        for line in str(exc).splitlines():
            found.problem("watchlist", line)
        return None
    accounts = f", {len(listed.accounts)} accounts" if listed.accounts else ""
    found.fine(
        "watchlist",
        f"{path}: {len(listed.players)} players, {len(listed.targets())} pairs, {len(listed.filters)} filters{accounts}",
    )
    return listed


def _metadata(found: Diagnosis, session: _AsServed) -> bool:
    """The free metadata call: the URL answers and the application is known; its tables kept on
    the session for the plan. Whether the service could be asked anything more."""
    settings = session.settings
    try:
        with session.client() as client:
            response = client.metadata()
    except ServiceUnreachable as exc:
        found.problem("service", str(exc).removeprefix("metadata: "))
        return False
    except RequestRejected as exc:  # an application the service does not know (101012, free)
        found.problem("service", f"the service refused the application {settings.appname!r}: {exc}: check {ENV_PREFIX}APPNAME")
        return False
    except CredentialsError as exc:
        found.problem("account", f"the service refused the request's identity: {exc}: check {ENV_PREFIX}APPNAME, {CREDENTIALS}")
        return False
    except ApiError as exc:
        found.problem("service", f"the metadata call failed: {exc}: check {ENV_PREFIX}BASE_URL ({found.service})")
        return False
    session.metadata = normalize_metadata(response.root, session.night)
    networks = session.metadata.get("networks")
    counted = f"{networks.num_rows} networks" if networks is not None else "its metadata"
    found.fine("service", f"{found.service} answers; application {settings.appname!r} known; {counted} listed")
    return True


def _account(found: Diagnosis, session: _AsServed, watchlist: Watchlist | None) -> None:
    """The account's credentials and searches left (the free reading), then tonight's plan."""
    whose = f"account {session.account!r} ({session.settings.username})" if session.account else session.settings.username
    try:
        remaining, why = session.reading()
    except RunFailed:
        names = f"the username and the variable account {session.account!r} names" if session.account else CREDENTIALS
        found.problem("account", f"{whose}: the service refused the credentials: check {names}")
        return
    if remaining is None:
        found.problem("account", f"{whose}: the searches left could not be read ({why}): check {ENV_PREFIX}BASE_URL")
        return
    found.fine("account", f"{whose}: credentials accepted")
    try:
        plan = session_report(session, remaining)
    except TourneylakeError as exc:
        found.problem("plan", f"tonight's plan could not be made: {exc}")
        return
    found.plans.append(plan)
    reset = plan.quota.describe().removeprefix("Next quota reset ") if plan.quota else "unknown"
    found.fine("searches", f"{whose}: {remaining:,} searches left; the next quota reset: {reset}")
    if watchlist is None:
        return
    for target, why in plan.skipped:
        if why.startswith(WATCHLIST_MISTAKES):
            pair = f"{target.network}/{target.player}" + (f" [{target.filter_name}]" if target.filter_name else "")
            found.problem(
                "pairs", f"{session.settings.watchlist}: {pair}: {why}: fix it in the watchlist ({ENV_PREFIX}WATCHLIST)"
            )
    cost = plan.costs.get(calls.NATURAL_LANGUAGE_FILTER, 1)
    for name in plan.unconverted:
        found.fine("questions", f"filter {name!r} is a question not converted yet: converting it costs {cost} search(es), once")
    reserve = f"the reserve keeps {plan.reserve:,}" if plan.reserve else "no reserve kept"
    cap = f"run cap {plan.max_searches_per_run:,}" if plan.max_searches_per_run is not None else "no run cap"
    found.fine(
        "plan",
        f"tonight's plan (night of {plan.night}): {len(plan.planned)} pairs, {plan.searches_planned} searches; "
        f"{len(plan.deferred)} deferred; {len(plan.skipped)} skipped; {cap}; {reserve}",
    )


def _plan_json(plan: BudgetReport) -> dict[str, Any]:
    def pair(target: Any) -> str:
        return f"{target.network}/{target.player}" + (f" [{target.filter_name}]" if target.filter_name else "")

    return {
        "account": plan.account,
        "night": plan.night.isoformat(),
        "searches_left": plan.remaining,
        "quota_reset_at": plan.quota.reset_at.isoformat() if plan.quota else None,
        "max_searches_per_run": plan.max_searches_per_run,
        "reserve": plan.reserve,
        "planned": [pair(t) for t in plan.planned],
        "searches_planned": plan.searches_planned,
        "deferred": [{"pair": pair(t), "why": why} for t, why in plan.deferred],
        "skipped": [{"pair": pair(t), "why": why} for t, why in plan.skipped],
        "unconverted_questions": list(plan.unconverted),
        "costs": dict(plan.costs),
    }
