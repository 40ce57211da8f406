"""Use it or lose it: spend the searches that would expire at the quota reset on the backlog.

Every daily quota resets at ``TOURNEYLAKE_QUOTA_RESET_UTC`` (:mod:`~tourneylake.night.quota_day`),
and what is left then is lost; a subscriber pays for it either way. :func:`drain` spends only
what would expire: the searches left, less what the next scheduled night needs before the reset
(its plan from the watchlist, within the run cap: ``TOURNEYLAKE_SCHEDULE_CRON``'s next tick, when
it comes before the reset), less the reserve. It spends in the drain window only, the last
``TOURNEYLAKE_DRAIN_LEAD_MIN`` minutes before the reset (its schedule fires as it opens), unless
told to spend now (``anytime``); it says what it kept and why. It harvests the pairs owed
(:mod:`~tourneylake.night.backlog`) in the night's priority order across every night owed —
never fetched first, then the stalest, then priority — each into the night it is owed to, with
that night's anchored filter, raw answers, tables and ledger rows (:func:`harvest_owed`): a pair
is never fetched twice, and its searches are booked to the night whose data they bought, on the
quota day that paid (``search_ledger.quota_day``). No call starts within a minute of the reset.
A drain is no night: its free reading of the searches left is kept nowhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime

from tourneylake.api import calls
from tourneylake.config import Settings
from tourneylake.night.accounts import account_settings, share_of
from tourneylake.night.backlog import forget, owed
from tourneylake.night.budget import NLQ, PLAYER_SUMMARY, Known, Target, triage
from tourneylake.night.harvest import (
    HarvestOutcome,
    Owed,
    harvest_owed,
    last_harvested,
    plan_tonight,
    resolve_targets,
)
from tourneylake.night.metering import left_in_run
from tourneylake.night.quota_day import DAY, QuotaDay, next_scheduled, service_now
from tourneylake.night.session import Session
from tourneylake.night.watchlist import Watchlist
from tourneylake.tables.night_tables import TargetKey, stored_targets, unusable_targets

__all__ = [
    "DRAIN_MARGIN_S",
    "WINDOW_SLACK_S",
    "DrainOutcome",
    "DrainPlan",
    "drain",
    "drain_cron",
    "drain_plan",
    "load_drained",
]

log = logging.getLogger(__name__)

#: No search starts this close to the reset (seconds): a call in flight across it might be counted
#: on the next quota day, which the nightly run needs.
DRAIN_MARGIN_S = 60
#: The drain window opens this much earlier than ``TOURNEYLAKE_DRAIN_LEAD_MIN`` says (seconds):
#: the schedule's tick is ours, the reset is on the service's clock, and the two may differ.
WINDOW_SLACK_S = 300
#: Passes over the backlog: a pass that spent less than it planned (a lookup let off, a failure)
#: leaves searches that a next pass spends.
PASSES = 3


@dataclass
class DrainPlan:
    """What a drain would spend now: the quota day; what it keeps for the next scheduled night
    (``kept_for_night`` searches for ``next_night``, whose run at ``next_run_at`` comes before the
    reset); what may be spent (the rest above the reserve; nothing when ``held_back`` says why);
    and the backlog in the order it is fetched."""

    quota: QuotaDay
    spendable: int
    order: list[tuple[date, Target]] = field(default_factory=list)
    dropped: dict[date, dict[TargetKey, str]] = field(default_factory=dict)  # owed, never to be asked: why
    kept_for_night: int = 0
    next_night: date | None = None
    next_run_at: datetime | None = None
    held_back: str | None = None

    def kept(self) -> str:
        """What the drain keeps and why, in words."""
        reserve = f"the reserve ({self.quota.reserve})"
        if self.next_night is None or self.next_run_at is None:
            return f"kept: {reserve}; the next scheduled night runs after the reset"
        return (
            f"kept: {reserve} and {self.kept_for_night} for the night of {self.next_night} (its plan; "
            f"its scheduled run at {self.next_run_at:%H:%M} UTC comes before the reset)"
        )

    @property
    def owed(self) -> int:
        return len(self.order)

    def chosen(self, cost: int) -> dict[date, list[Target]]:
        """The first pairs of :attr:`order` that :attr:`spendable` pays for, by night."""
        picked: dict[date, list[Target]] = {}
        for night, target in self.order[: self.spendable // cost if cost > 0 else len(self.order)]:
            picked.setdefault(night, []).append(target)
        return picked


@dataclass
class DrainOutcome:
    plan: DrainPlan
    nights: dict[date, HarvestOutcome] = field(default_factory=dict)
    still_owed: int = 0
    account: str | None = None  # the watchlist account drained (None: the settings' one)

    @property
    def fetched(self) -> int:
        return sum(outcome.fetched for outcome in self.nights.values())

    @property
    def searches_spent(self) -> int:
        return sum(outcome.searches_spent for outcome in self.nights.values())

    @property
    def failed(self) -> list[tuple[Target, str]]:
        return [item for outcome in self.nights.values() for item in outcome.failed]


def drain_plan(session: Session, watchlist: Watchlist, remaining: int | None, *, anytime: bool = False) -> DrainPlan:
    """What a drain of ``session``'s account would spend now, with ``remaining`` searches left
    (``None``: unknown, so nothing): in the drain window (or ``anytime``), what would expire at
    the reset (see the module docstring). Free: it reads the lake and the clock only."""
    settings = session.settings
    quota = session.quota_day(remaining)
    plan = DrainPlan(quota, 0)
    tick = next_scheduled(settings.schedule_cron, quota.now)
    if tick < quota.reset_at:  # the nightly run of the night that ends before the tick spends first
        plan.next_night, plan.next_run_at = (tick - DAY).date(), tick
        plan.kept_for_night = _night_needs(session, watchlist, plan.next_night)
    window_s = settings.drain_lead_min * 60 + WINDOW_SLACK_S
    if quota.remaining is None:
        plan.held_back = "the searches left are unknown"
    elif quota.seconds_left <= DRAIN_MARGIN_S:
        plan.held_back = f"the reset is less than {DRAIN_MARGIN_S} s away: a call across it would spend the next quota day's"
    elif quota.seconds_left > window_s and not anytime:
        plan.held_back = (
            f"outside the drain window (the last {settings.drain_lead_min} min before the reset, "
            "TOURNEYLAKE_DRAIN_LEAD_MIN): `tourneylake drain --now` spends now what the next night leaves"
        )
    else:
        plan.spendable = max(quota.remaining - quota.reserve - plan.kept_for_night, 0)
    ranked: list[tuple[tuple[int, date, int, date, int], date, Target]] = []
    for night, keys in owed(session.lake).items():
        candidates, dropped, last = _owed_targets(session, watchlist, night, keys)
        if dropped:
            plan.dropped[night] = dropped
        for index, target in enumerate(candidates):
            before = last.get((target.network, target.player, target.filter_name))
            ranked.append(((0 if before is None else 1, before or date.min, target.priority, night, index), night, target))
    plan.order = [(night, target) for _, night, target in sorted(ranked, key=lambda item: item[0])]
    return plan


def _night_needs(session: Session, watchlist: Watchlist, night: date) -> int:
    """The searches the nightly run of ``night`` would plan (the watchlist's pairs it does not
    hold yet, with their questions' conversions, within what the run cap leaves of it)."""
    then = Session(session.settings, session.base_url, night, session.lake, writable=False, account=session.account)
    resolution = resolve_targets(then, watchlist, None, None, convert=False)
    cap = left_in_run(session.settings.max_searches_per_run, then.meter.spent_on_cap(calls.PLAYER_SUMMARY))
    plan = plan_tonight(then, resolution, stored_targets(session.lake, night), remaining=None, cap=cap)
    return plan.searches_planned


def _owed_targets(
    session: Session, watchlist: Watchlist, night: date, keys: dict[TargetKey, str]
) -> tuple[list[Target], dict[TargetKey, str], Mapping[tuple[str, str, str | None], date]]:
    """The pairs owed to ``night`` that can be asked, in that night's order, the others with why
    (no longer watched, or a check before any search refuses them now), and the night each
    watched pair was last harvested before ``night``."""
    then = Session(session.settings, session.base_url, night, session.lake, writable=False, account=session.account)
    resolution = resolve_targets(then, watchlist, None, None, convert=False)
    watched = [t for t in resolution.targets if (t.network, t.player, t.filter_name or "") in keys]
    known = Known(
        last_fetched=last_harvested(session.lake, night, (target.key for target in watched)),
        harvested_tonight=stored_targets(session.lake, night) | unusable_targets(session.lake, night),
        run_date=night,
        known_networks=session.in_force().known_networks,  # today's metadata: a network gone is asked no more
        filter_problems=resolution.problems,
        skip_filters=resolution.skip,
    )
    candidates, skipped = triage(watched, known)
    dropped = dict.fromkeys(set(keys) - {(t.network, t.player, t.filter_name or "") for t in watched}, "no longer watched")
    dropped.update({(t.network, t.player, t.filter_name or ""): why for t, why in skipped})
    return candidates, dropped, known.last_fetched


def drain(settings: Settings, watchlist: Watchlist, base_url: str, *, anytime: bool = False) -> list[DrainOutcome]:
    """Spend what expires at the next reset on the backlog: one outcome per account (the
    settings' one, or each of the watchlist's ``accounts:`` with its share of the players).
    Outside the drain window nothing is spent unless ``anytime``. The session that reads the
    searches left writes nothing: a drain records no night of its own."""
    today = service_now(base_url).date()
    if not watchlist.accounts:
        return [_drain(Session.open(settings, base_url, today, writable=False), watchlist, anytime)]
    outcomes = []
    for account in watchlist.accounts:
        session = Session.open(account_settings(settings, account), base_url, today, writable=False, account=account.name)
        outcomes.append(_drain(session, share_of(watchlist, account.name), anytime))
    return outcomes


def _drain(session: Session, watchlist: Watchlist, anytime: bool) -> DrainOutcome:
    """Passes over the backlog while one spends less than it planned without failing (a
    lookup let off, another client's spending: a fresh reading plans again)."""
    outcome: DrainOutcome | None = None
    for _ in range(PASSES):
        plan = drain_plan(session, watchlist, session.read_remaining(), anytime=anytime)
        if outcome is None:
            outcome = DrainOutcome(plan, account=session.account)
            forget(session.lake, plan.dropped)
        cost = session.meter.costs.cost(PLAYER_SUMMARY)
        chosen = plan.chosen(cost)
        planned = cost * sum(map(len, chosen.values()))
        if not chosen:
            break
        log.info(
            "drain: %d of %d pair(s) owed, %d search(es) to spend before the reset",
            planned // max(cost, 1),
            plan.owed,
            plan.spendable,
        )
        spent, failed = _harvest_chosen(session, watchlist, plan, chosen, cost, outcome)
        if failed or spent == 0 or spent >= planned:
            break
    assert outcome is not None
    outcome.still_owed = sum(len(keys) for keys in owed(session.lake).values())
    return outcome


def _harvest_chosen(
    session: Session, watchlist: Watchlist, plan: DrainPlan, chosen: dict[date, list[Target]], cost: int, outcome: DrainOutcome
) -> tuple[int, bool]:
    """Harvest the chosen pairs night by night (oldest first), each night capped at its pairs'
    cost; returns the searches spent and whether any pair failed."""
    stop_at = time.monotonic() + plan.quota.seconds_left - DRAIN_MARGIN_S
    reserve = plan.quota.reserve
    spent, failed = 0, False
    for night, targets in sorted(chosen.items()):
        conversions = {t.filter_name for t in targets if t.needs_conversion}
        cap = cost * len(targets) + session.meter.costs.cost(NLQ) * len(conversions)
        owed_now = Owed(frozenset((t.network, t.player, t.filter_name or "") for t in targets), cap, reserve, stop_at)
        log.info("drain: %d pair(s) owed to %s", len(targets), night)
        then = Session.open(session.settings, session.base_url, night, account=session.account)
        result = harvest_owed(then, watchlist, owed_now)
        outcome.nights[night] = _merged(outcome.nights.get(night), result)
        spent += result.searches_spent
        failed = failed or bool(result.failed)
        if result.stopped_reason:
            break
    return spent, failed


def _merged(before: HarvestOutcome | None, after: HarvestOutcome) -> HarvestOutcome:
    """One night's outcome over several passes."""
    if before is None:
        return after
    before.fetched += after.fetched
    before.searches_spent += after.searches_spent
    before.failed += after.failed
    before.deferred = after.deferred
    before.remaining_searches = after.remaining_searches
    before.quota = after.quota
    return before


def load_drained(settings: Settings, outcomes: list[DrainOutcome]) -> list[date]:
    """Load the nights a drain wrote into the warehouse (their tables were made again whole);
    returns them."""
    from tourneylake.lake.lake import Lake
    from tourneylake.tables.warehouse import Warehouse

    nights = sorted({night for outcome in outcomes for night, done in outcome.nights.items() if done.fetched})
    if nights:
        lake = Lake.of(settings)
        with Warehouse(settings.warehouse_path) as db:
            for night in nights:
                db.load_night(lake, night)
    return nights


def drain_cron(settings: Settings) -> str:
    """The drain schedule's daily cron (UTC): ``TOURNEYLAKE_DRAIN_LEAD_MIN`` before the reset."""
    minutes = (settings.quota_reset_s // 60 - settings.drain_lead_min) % (24 * 60)
    return f"{minutes % 60} {minutes // 60} * * *"
