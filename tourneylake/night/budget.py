"""Searches are money: plan a night within the budget, and guard it while fetching. Pure logic, no
HTTP.

:class:`CostModel` knows what each resource costs: a documented prior, corrected by what the
service's ``UserInfo/RemainingSearches`` shows around a call made in isolation.
:func:`plan_night` is :func:`triage` (why a pair costs no search tonight: known locally to fail,
or already done; the rest ordered never fetched first, then stalest, then priority) then
:func:`fit` (as many calls as the budget affords, the rest deferred with why). :class:`Budget`
is the run-time guard shared by concurrent fetchers: a call goes out only once
:meth:`Budget.try_reserve` succeeds, so neither the run cap nor the reserve is crossed, counting
calls in flight; a refusal those calls make ambiguous waits for them rather than defer. It
knows the quota day (when the searches left expire) and, for a drain, stops at the reset; between
calls it gives the run cap back what the service's count shows was not spent
(:meth:`Budget.true_up`), so the harvest spends it on the pairs the plan deferred. Both
bounds are optional: the run cap (what this run may spend) and the reserve (the account never
goes below it: affordable is ``remaining - reserve`` when ``remaining`` is known).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from tourneylake.api import calls
from tourneylake.api.filters import FilterSyntaxError, parse_filter
from tourneylake.errors import ConfigError
from tourneylake.night.quota_day import QuotaDay

__all__ = [
    "COUNTRIES",
    "DEFAULT_COSTS",
    "HAND_ANALYSIS",
    "METADATA",
    "NEWS",
    "NLQ",
    "NOT_FOUND_RETRY",
    "NO_DATA",
    "PLAYER_SUMMARY",
    "Budget",
    "CostModel",
    "Known",
    "Limits",
    "Plan",
    "Reservation",
    "Target",
    "TargetKey",
    "fit",
    "no_data",
    "plan_night",
    "refusal_words",
    "triage",
]

# The resource names and their documented costs are the client's.
PLAYER_SUMMARY = calls.PLAYER_SUMMARY
NLQ = calls.NATURAL_LANGUAGE_FILTER
HAND_ANALYSIS = calls.HAND_ANALYSIS
METADATA = calls.METADATA
COUNTRIES = calls.COUNTRIES
NEWS = calls.WHATS_NEW
DEFAULT_COSTS: Mapping[str, int] = calls.DOCUMENTED_COSTS

#: Cost assumed for a resource nobody has documented or observed: metered until shown otherwise.
UNKNOWN_RESOURCE_COST = 1

#: What a lookup that returns no data (an unknown player) is booked at: a kind of its own in the
#: cost model, ``<resource>:no_data``, whose prior is the resource's and which may be learned to
#: be 0 (the service's documentation does not say whether it charges such a lookup).
NO_DATA = ":no_data"


def no_data(resource: str) -> str:
    """The cost model's kind for a lookup of ``resource`` that returned no data."""
    return resource + NO_DATA


#: (network, player, filter name or None): one harvested snapshot per night.
TargetKey = tuple[str, str, str | None]

#: A pair the service answered "not found" is asked again this many nights later, not every
#: night (a search each time): a player found again then is harvested again from that night on.
NOT_FOUND_RETRY = timedelta(days=7)


# ----------------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One player summary to fetch: a player with one named filter (``None`` = unfiltered).

    ``filter_expression`` is ``None`` for an unfiltered target, and also for a named filter whose
    natural-language question has not been converted yet (the planner budgets the conversion).
    ``priority``: lower is more important.
    """

    network: str
    player: str
    filter_name: str | None
    filter_expression: str | None
    priority: int
    #: the filter sent for the night (``filter_expression`` anchored to it), its window, and
    #: whether the sent filter is anchored (see ``filters.filter_for_night``)
    filter_sent: str | None = None
    window: str = "as_of"
    anchored: bool = False

    @property
    def key(self) -> TargetKey:
        return (self.network, self.player, self.filter_name)

    @property
    def needs_conversion(self) -> bool:
        """A named filter with no expression yet: its question must go through NLQ first."""
        return self.filter_name is not None and self.filter_expression is None

    def __str__(self) -> str:
        suffix = f" [{self.filter_name}]" if self.filter_name else ""
        return f"{self.network}/{self.player}{suffix}"


def _normal_key(key: tuple[str, str, str | None]) -> TargetKey:
    """Unfiltered is ``None`` here; ledgers and lake partitions often write it as ``""``."""
    network, player, filter_name = key
    return (network, player, filter_name or None)


# ----------------------------------------------------------------------------------- costs


class CostModel:
    """What each resource costs, in searches.

    Starts from :data:`DEFAULT_COSTS` (or ``prior``). :meth:`observe` learns from one call's
    ``RemainingSearches`` before and after; only the caller knows whether the difference is
    clean (exactly one metered call of its own in flight), so it decides when to call it. Even
    a clean difference includes what anything else spent on the account meanwhile (a hand
    analysed during a harvest, a person on the website), so a cost is learned by majority: the
    most frequent of the last ``window`` observations, with the documented cost as one more vote
    that wins its ties. One reading, however polluted, never moves a cost; two that agree do.
    ``votes`` are earlier runs' (kept by the session between runs, see :meth:`take_new_votes`):
    a process that makes one call a run still learns a changed price over two runs.
    """

    def __init__(
        self, prior: Mapping[str, int] | None = None, *, window: int = 20, votes: Mapping[str, Iterable[int]] | None = None
    ) -> None:
        self._prior: dict[str, int] = dict(DEFAULT_COSTS if prior is None else prior)
        self._window = window
        self._observed: dict[str, deque[int]] = {
            r: deque((x for x in v if self._plausible(r, x)), maxlen=window) for r, v in (votes or {}).items()
        }
        self._new: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    @property
    def window(self) -> int:
        return self._window

    def take_new_votes(self) -> dict[str, list[int]]:
        """The votes observed since the last call (or since this model was made), then forgets them."""
        with self._lock:
            new, self._new = self._new, {}
        return new

    def observe(self, resource: str, before: int | None, after: int | None) -> bool:
        """Learn from one isolated call; returns whether the reading was taken (a vote; the
        cost moves only when the votes say so, see the class).

        Ignored: an unknown reading, a negative difference (the account was topped up or the
        daily quota reset in between: says nothing about the call) and an implausible one (see
        :meth:`_plausible`).
        """
        if before is None or after is None:
            return False
        return self.vote(resource, before - after)

    def vote(self, resource: str, spent: int) -> bool:
        """One vote that a call of ``resource`` cost ``spent`` (a clean reading's, or a
        reconciliation that leaves no doubt); whether it was plausible and taken."""
        if not self._plausible(resource, spent):
            return False
        with self._lock:
            self._observed.setdefault(resource, deque(maxlen=self._window)).append(spent)
            self._new.setdefault(resource, []).append(spent)
        return True

    def _plausible(self, resource: str, spent: int) -> bool:
        """A metered call's reading can vote between 1 and 10x its documented cost: 0 (a call
        the service let off, say a player not found) would make the resource free (no cap, no
        reserve, and never a vote again), and a huge drop is someone else's spending."""
        prior = self._prior_cost(resource)
        lowest = 0 if resource.endswith(NO_DATA) else 1  # a lookup without data may well be free
        return prior > 0 and type(spent) is int and lowest <= spent <= 10 * prior

    def _prior_cost(self, resource: str) -> int:
        base = resource.removesuffix(NO_DATA)
        return self._prior.get(base, UNKNOWN_RESOURCE_COST)

    def cost(self, resource: str) -> int:
        """The expected searches of one call of ``resource``."""
        prior = self._prior_cost(resource)
        with self._lock:
            seen = self._observed.get(resource)
            if not seen:
                return prior
            votes = Counter(seen)
            votes[prior] += 1  # the documented cost is one vote, and wins a tie
            best = max(votes.values())
            if votes[prior] == best:
                return prior
            return next(value for value in reversed(seen) if votes[value] == best)

    def snapshot(self) -> dict[str, int]:
        """Current cost of every resource known from the prior or observations."""
        with self._lock:
            names = sorted(set(self._prior) | set(self._observed))
        return {name: self.cost(name) for name in names}


# ----------------------------------------------------------------------------------- planning


@dataclass
class Plan:
    """A night's plan: what to fetch, in order, and why the rest is not fetched.

    ``conversions`` are the filter names whose question must be converted (one NLQ call each)
    before their first planned target; ``searches_planned`` includes them.
    """

    calls: list[Target] = field(default_factory=list)
    deferred: list[tuple[Target, str]] = field(default_factory=list)
    skipped: list[tuple[Target, str]] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    searches_planned: int = 0
    affordable: int | None = None


def _reason_for(cap_left: int | None, reserve_left: int | None, cap: int | None, reserve: int, cost: int) -> str:
    if cap_left is not None and (reserve_left is None or cap_left <= reserve_left):
        return f"budget: run cap {cap} reached"
    assert reserve_left is not None
    return refusal_words(reserve_left + reserve, cost, reserve)


def refusal_words(left: int, cost: int, reserve: int, reset: str = "") -> str:
    """Why a call of ``cost`` may not be paid with ``left`` searches and ``reserve`` kept: the
    reserve, when the account could pay it without one, else the quota (``reset``: when it
    resets, `` at HH:MM UTC``)."""
    if left - cost >= 0:
        return f"budget: reserve {reserve} reached"
    return f"quota: {max(left, 0)} search{'es' if left != 1 else ''} left until the reset{reset}"


@dataclass(frozen=True)
class Known:
    """What is known locally, before any search, about tonight's targets.

    ``last_fetched``: the last night each target was harvested; ``harvested_tonight``: the
    targets tonight already holds (in keys, a filter name of ``""`` and ``None`` both mean
    unfiltered); ``run_date``: tonight; ``known_networks``: the searchable networks of metadata
    (``None``: not checked); ``filter_problems``: filters metadata rejects, with why;
    ``skip_filters``: filters not to fetch tonight (a Date after the night, a question not
    converted), with why; ``not_found``: the targets the service answered "not found" on a
    night less than :data:`NOT_FOUND_RETRY` before tonight, with that night."""

    last_fetched: Mapping[TargetKey, date] = field(default_factory=dict)
    harvested_tonight: Set[TargetKey] = frozenset()
    run_date: date | None = None
    known_networks: Set[str] | None = None
    filter_problems: Mapping[str, str] = field(default_factory=dict)
    skip_filters: Mapping[str, str] = field(default_factory=dict)
    not_found: Mapping[TargetKey, date] = field(default_factory=dict)


@dataclass(frozen=True)
class Limits:
    """What tonight may spend: at most ``max_searches_per_run`` (``None``: no cap), never taking
    the account's ``remaining`` searches (``None``: unknown) below ``reserve``."""

    remaining: int | None
    max_searches_per_run: int | None
    reserve: int
    costs: CostModel


def plan_night(targets: Iterable[Target], known: Known, limits: Limits) -> Plan:
    """Tonight's metered calls: the targets worth a search (:func:`triage`), fitted to the
    budget in their order (:func:`fit`)."""
    candidates, skipped = triage(targets, known)
    plan = fit(candidates, limits)
    plan.skipped = skipped
    return plan


def triage(targets: Iterable[Target], known: Known) -> tuple[list[Target], list[tuple[Target, str]]]:
    """The targets worth a search tonight, in the order they are fetched, and the others with
    why they are skipped (costs nothing, known locally): a duplicate of an earlier target, a
    network metadata does not list, a filter metadata rejects or that does not parse, a filter
    not to fetch tonight, a target already harvested tonight (held, or last fetched on or after
    ``run_date``).

    The order: never fetched first, then stalest (oldest last fetch), then priority (lower
    first), then the order given."""
    # Keys from the ledger or lake may spell "unfiltered" as "" rather than None.
    last_fetched = {_normal_key(key): when for key, when in known.last_fetched.items()}
    held = {_normal_key(key) for key in known.harvested_tonight}
    not_found = {_normal_key(key): when for key, when in known.not_found.items()}
    seen: set[TargetKey] = set()
    candidates: list[tuple[int, Target]] = []
    skipped: list[tuple[Target, str]] = []
    for index, target in enumerate(targets):
        if target.filter_name == "":
            target = replace(target, filter_name=None)
        why = _why_skipped(target, known, seen, held, last_fetched.get(target.key)) or _not_found_lately(
            target, not_found, known.run_date
        )
        seen.add(target.key)
        if why is None:
            candidates.append((index, target))
        else:
            skipped.append((target, why))

    def order(item: tuple[int, Target]) -> tuple[int, date, int, int]:
        index, target = item
        last = last_fetched.get(target.key)
        return (0 if last is None else 1, last or date.min, target.priority, index)

    return [target for _, target in sorted(candidates, key=order)], skipped


def _why_skipped(target: Target, known: Known, seen: set[TargetKey], held: set[TargetKey], last: date | None) -> str | None:
    """Why ``target`` costs no search tonight; ``None`` when it is worth one."""
    if target.key in seen:
        return "duplicate target: already listed earlier"
    if known.known_networks is not None and target.network not in known.known_networks:
        hint = {n.casefold(): n for n in known.known_networks}.get(target.network.casefold())
        extra = f"; did you mean {hint!r}?" if hint else ""
        return f"unknown network {target.network!r} (not in metadata{extra})"
    if target.filter_name is not None and target.filter_name in known.skip_filters:
        return known.skip_filters[target.filter_name]
    if target.filter_name is not None and target.filter_name in known.filter_problems:
        return f"invalid filter {target.filter_name!r}: {known.filter_problems[target.filter_name]}"
    if target.filter_expression is not None:
        try:
            parse_filter(target.filter_expression)
        except FilterSyntaxError as exc:
            return f"invalid filter {target.filter_name!r}: {exc}"
    run_date = known.run_date
    if target.key in held or (run_date is not None and last is not None and last >= run_date):
        return "already harvested" + (f" for {run_date.isoformat()}" if run_date else " tonight")
    return None


def _not_found_lately(target: Target, not_found: Mapping[TargetKey, date], tonight: date | None) -> str | None:
    """Why a target the service did not find lately costs no search tonight (``None``: ask it:
    never answered "not found", or its weekly retry is due)."""
    when = not_found.get(target.key)
    if when is None or (tonight is not None and when + NOT_FOUND_RETRY <= tonight):
        return None
    return f"not found by the service on {when}: asked again on {when + NOT_FOUND_RETRY} (a search a week, not a night)"


def fit(candidates: Iterable[Target], limits: Limits) -> Plan:
    """The calls planned, in the order given, while they fit within
    ``min(max_searches_per_run, remaining - reserve)``; a call that does not fit is deferred,
    and a cheaper one later may still be planned. A target whose filter still needs its
    question converted also costs one NLQ call, the first time that filter is planned."""
    plan = Plan()
    cap, remaining, reserve = limits.max_searches_per_run, limits.remaining, limits.reserve
    plan.affordable = _min_known(cap, None if remaining is None else max(remaining - reserve, 0))
    summary_cost = limits.costs.cost(PLAYER_SUMMARY)
    nlq_cost = limits.costs.cost(NLQ)
    converting: set[str] = set()
    spent = 0
    for target in candidates:
        needs_nlq = target.needs_conversion and target.filter_name not in converting
        cost = summary_cost + (nlq_cost if needs_nlq else 0)
        cap_left = None if cap is None else cap - spent
        reserve_left = None if remaining is None else remaining - reserve - spent
        if (cap_left is not None and cost > cap_left) or (reserve_left is not None and cost > reserve_left):
            plan.deferred.append((target, _reason_for(cap_left, reserve_left, cap, reserve, cost)))
            continue
        if needs_nlq:
            assert target.filter_name is not None
            converting.add(target.filter_name)
            plan.conversions.append(target.filter_name)
        plan.calls.append(target)
        spent += cost
    plan.searches_planned = spent
    return plan


def _min_known(*bounds: int | None) -> int | None:
    known = [b for b in bounds if b is not None]
    return min(known) if known else None


# ----------------------------------------------------------------------------------- run guard


@dataclass(eq=False)
class Reservation:
    """One metered call's claim on the budget, from :meth:`Budget.reserve_call` to its settle.

    ``reserved_at`` / ``answered_at``: the budget's clock when it was made and when its answer
    arrived (:meth:`Budget.answered`). ``reflected``: a reading taken since already shows its
    charge (see :meth:`Budget.settle`), so the reserve no longer counts it twice."""

    amount: int
    before: int | None
    isolated: bool
    reserved_at: int = 0
    answered_at: int | None = None
    reflected: bool = False


class Budget:
    """The run-time guard for concurrent fetchers.

    Every metered call is bracketed: ``try_reserve(resource)`` before it (``False`` = do not
    make the call), ``settle(resource, remaining_after, charged)`` after it, whatever happened.
    Reservations in flight count against both bounds, so N threads can never overshoot.

    ``remaining`` follows the truth: each response's ``RemainingSearches``. Responses of
    concurrent calls can arrive out of order, so a reading only ever lowers what we believe,
    except after a call that ran alone (nothing else reserved during its life), whose reading is
    exact and also gives :class:`CostModel` a vote on the resource's cost. While ``remaining`` is
    unknown and a reserve is set, only one metered call may be in flight: its answer tells us
    where we stand before anything else is spent.

    A reading can already show the charge of calls still in flight: a call whose answer
    arrived (:meth:`answered`) before another call was reserved was charged before that other
    call's answer was written, so that answer's ``RemainingSearches`` includes it. Such calls
    stop counting against the reserve once the reading is taken (they still count against the
    run cap, which is about our own spending). Without this, answers settled out of order (a
    slot is free as soon as an answer arrives, before its body is saved and read) made the
    budget count a charge twice and refuse a call the account could pay for.

    Free resources (cost 0) are always allowed, even after :meth:`stop`. :meth:`reserve_call`
    returns the call's :class:`Reservation`, which :meth:`answered` and :meth:`settle` take;
    :meth:`try_reserve` keeps none, and its reservations of one resource are settled
    first-in first-out (they differ only if the learned cost changed in between, by at most
    that change, and the oldest one's clock is the conservative one).
    """

    def __init__(
        self,
        *,
        remaining: int | None,
        max_searches_per_run: int | None,
        reserve: int,
        costs: CostModel,
        quota: QuotaDay | None = None,
        stop_at: float | None = None,
    ) -> None:
        if reserve < 0:
            raise ConfigError(f"reserve must be >= 0, not {reserve}")
        if max_searches_per_run is not None and max_searches_per_run < 0:
            raise ConfigError(f"max_searches_per_run must be >= 0, not {max_searches_per_run}")
        self._lock = threading.Lock()
        self._remaining = remaining
        self._first = remaining  # the reading the run began with (see `true_up`)
        self._cap = max_searches_per_run
        self._reserve = reserve
        self._costs = costs
        self._quota = quota
        self._stop_at = stop_at  # time.monotonic() after which no metered call starts (a drain's reset)
        self._spent = 0
        self._uncertain = 0  # calls that may have been charged (no answer arrived): the cap counts them
        self._in_flight = 0
        self._reflected = 0  # of _in_flight: what the current reading already shows as charged
        self._clock = itertools.count(1)
        self._reservations: dict[str, deque[Reservation]] = {}
        self._all_in_flight: list[Reservation] = []
        self._stopped: str | None = None
        self._settles = 0  # settles so far: what a refused caller waits to see move (see `wait_mark`)
        # Once a call was abandoned (timeout, unreadable body) the service may still charge it
        # later, so later readings could include its cost: learning stops for this run.
        self._abandoned = False
        # Whether _remaining is a reading from the service (True) or lowered by an estimate
        # (False): only a reading may serve as the "before" of a cost observation.
        self._is_reading = remaining is not None

    # ------------------------------------------------------------------------- properties

    @property
    def spent(self) -> int:
        """Searches this run has spent (settled, charged calls)."""
        with self._lock:
            return self._spent

    @property
    def remaining(self) -> int | None:
        """The account's searches left, as last read from the service (``None`` = unknown)."""
        with self._lock:
            return self._remaining

    @property
    def in_flight(self) -> int:
        """Searches reserved by calls not yet settled."""
        with self._lock:
            return self._in_flight

    @property
    def stopped_reason(self) -> str | None:
        with self._lock:
            return self._stopped

    @property
    def reserve(self) -> int:
        return self._reserve

    @property
    def quota_day(self) -> QuotaDay | None:
        """The account's quota day as the run began (its next reset), with the searches left now:
        every one expires at the reset (``None``: not told)."""
        if self._quota is None:
            return None
        return replace(self._quota, remaining=self.remaining)

    @property
    def max_searches_per_run(self) -> int | None:
        return self._cap

    # ------------------------------------------------------------------------- guard

    def _refusal(self, cost: int) -> str | None:
        """Why a call of ``cost`` may not start now (lock held)."""
        if cost <= 0:
            return None
        if self._stopped is not None:
            return f"stopped: {self._stopped}"
        if self._stop_at is not None and time.monotonic() >= self._stop_at:
            return self._quota_over()
        if self._cap is not None and self._spent + self._uncertain + self._in_flight + cost > self._cap:
            return f"budget: run cap {self._cap} reached"
        if self._remaining is None:
            if self._reserve > 0 and self._in_flight > 0:
                return "budget: searches left unknown until the first answer"
            return None
        left = self._remaining - (self._in_flight - self._reflected)
        if left - cost < self._reserve:
            return refusal_words(left, cost, self._reserve, self._reset_at())
        return None

    def _reset_at(self) -> str:
        return f" at {self._quota.reset_at:%H:%M} UTC" if self._quota is not None else ""

    def _quota_over(self) -> str:
        return f"budget: the quota day ends{self._reset_at()}; what is left after it is the next quota day's"

    def wait_mark(self, resource: str) -> int | None:
        """When a call of ``resource`` is refused only for want of an exact reading, a mark to
        pass to :meth:`settled_since`; ``None`` when waiting cannot help (it may go now, or the
        refusal stands whatever the calls in flight do).

        Calls in flight make the guard's reading ambiguous: an answer's count may already show
        charges of calls whose answers are not settled yet (they would count twice), and a call in
        flight may end uncharged (its claim on the cap is released). Once they settle, the reading
        is the service's latest count, so the caller waits for them and asks again rather than
        defer a pair while searches are left (they would expire at the quota's reset)."""
        cost = self._costs.cost(resource)
        with self._lock:
            refusal = self._refusal(cost)
            if refusal is None or refusal == self._quota_over() or self._stopped is not None or self._in_flight == 0:
                return None
            return self._settles

    def settled_since(self, mark: int) -> bool:
        """Whether a call settled since :meth:`wait_mark` gave ``mark`` (or metered calls stopped)."""
        with self._lock:
            return self._settles != mark or self._stopped is not None

    def refusal(self, resource: str) -> str | None:
        """The reason :meth:`try_reserve` would refuse ``resource`` now, or ``None``."""
        cost = self._costs.cost(resource)
        with self._lock:
            return self._refusal(cost)

    def try_reserve(self, resource: str) -> bool:
        """Reserve one call of ``resource``; ``False`` when it could cross the cap or the reserve,
        or after :meth:`stop`. Thread-safe. Every ``True`` must be followed by :meth:`settle`."""
        return self.reserve_call(resource) is not None

    def reserve_call(self, resource: str) -> Reservation | None:
        """:meth:`try_reserve`, returning the call's reservation (``None``: refused). A free
        call's is empty (amount 0): nothing to settle."""
        cost = self._costs.cost(resource)
        with self._lock:
            if self._refusal(cost) is not None:
                return None
            if cost <= 0:
                return Reservation(0, None, False)  # free: nothing to reserve or settle
            isolated = self._in_flight == 0
            for other in self._all_in_flight:
                other.isolated = False
            before = self._remaining if self._is_reading else None
            reservation = Reservation(cost, before, isolated, reserved_at=next(self._clock))
            self._reservations.setdefault(resource, deque()).append(reservation)
            self._all_in_flight.append(reservation)
            self._in_flight += cost
            return reservation

    def withdraw(self, reservation: Reservation) -> None:
        """A reserved call that does not go out after all (the budget stopped while its
        write-ahead line was being stored): its claim is given back, nothing read or charged."""
        with self._lock:
            queue = next((q for q in self._reservations.values() if reservation in q), None)
            if not reservation.amount or queue is None:
                return
            queue.remove(reservation)
            self._all_in_flight.remove(reservation)
            self._in_flight -= reservation.amount
            if reservation.reflected:
                self._reflected -= reservation.amount

    def answered(self, reservation: Reservation) -> None:
        """The call's answer has arrived (before its body is saved and read): whatever it was
        charged is in every answer to a call reserved from now on."""
        with self._lock:
            if reservation.amount and reservation.answered_at is None:
                reservation.answered_at = next(self._clock)

    def settle(
        self,
        resource: str,
        remaining_after: int | None,
        charged: bool,
        *,
        uncertain: bool = False,
        reservation: Reservation | None = None,
        kind: str | None = None,
    ) -> None:
        """Record the end of a reserved call: ``remaining_after`` is the response's
        ``RemainingSearches`` (``None`` if there was no readable response), ``charged`` whether
        the service charged for it (a successful metered answer). ``uncertain``: no answer came
        (a timeout after sending): the service may have charged it, so the run's cap counts it
        (a cap is never crossed by calls that timed out and were sent again); its real cost is
        the reconciliation's, and the searches left are the next answer's. ``kind``: what the
        answer is booked at in the cost model when not ``resource`` itself (a lookup that
        returned no data, :func:`no_data`): its cost, and its vote when the call ran alone."""
        with self._lock:
            self._settles += 1
            queue = self._reservations.get(resource)
            # The call's own claim; without one, the oldest (its clock is the earliest, so what
            # its reading shows is judged conservatively); a claim given but no longer held (settled
            # twice) takes the oldest too, but its reading then shows nothing of the others.
            own = reservation is None or (bool(reservation.amount) and queue is not None and reservation in queue)
            if reservation is not None and own:
                assert queue is not None
                queue.remove(reservation)
            else:
                reservation = queue.popleft() if queue else None
            if reservation is None:
                # A free call (never reserved) or a settle without a reservation: just read the truth.
                self._read(remaining_after, exact=False)
                return
            self._all_in_flight.remove(reservation)
            self._in_flight -= reservation.amount
            if reservation.reflected:
                self._reflected -= reservation.amount
            if remaining_after is None:
                self._abandoned = True
            exact = reservation.isolated and reservation.before is not None and not self._abandoned
            booked_as = kind or resource
            charge = reservation.amount if kind is None else self._costs.cost(kind)
            if charged and exact and remaining_after is not None:
                assert reservation.before is not None
                # A vote for the cost model; what the call is charged is what the model now says
                # (a reading that includes someone else's spending is outvoted, not charged here)
                if self._costs.observe(booked_as, reservation.before, remaining_after):
                    charge = self._costs.cost(booked_as)
            if uncertain and not charged:
                self._uncertain += charge
            if charged:
                self._spent += charge
                if remaining_after is None and self._remaining is not None:
                    self._remaining -= charge  # no reading: assume the expected charge
                    self._is_reading = False
            if self._read(remaining_after, exact=reservation.isolated) and own:
                self._reflect(reservation.reserved_at)

    def _read(self, remaining_after: int | None, *, exact: bool) -> bool:
        """Take a reading as the searches left when it is news; whether it was taken."""
        if remaining_after is None:
            return False
        if self._remaining is None or exact or remaining_after < self._remaining:
            self._remaining = remaining_after
            self._is_reading = True
            return True
        return False

    def _reflect(self, reserved_at: int) -> None:
        """The reading just taken answered a call reserved at ``reserved_at``: the calls in
        flight whose answers had arrived by then were charged before it, so it shows them. A
        later reading is lower, so newer, and shows them too (the count only falls in a night)."""
        for other in self._all_in_flight:
            if not other.reflected and other.answered_at is not None and other.answered_at < reserved_at:
                other.reflected = True
                self._reflected += other.amount

    def true_up(self) -> bool:
        """With no call in flight, what this run spent against its cap is at most what the
        service's count fell by since the run began: answers booked at their expected cost that
        the service let off (a lookup that returned no data) give their searches back to the
        cap, so the run spends them on the next pairs. Never lower than the truth: another
        client's spending only makes the fall larger. Whether any came back."""
        with self._lock:
            if self._in_flight or self._abandoned or not self._is_reading or self._first is None or self._remaining is None:
                return False
            fell = max(self._first - self._remaining, 0)
            if fell >= self._spent:
                return False
            self._spent = fell
            return True

    def stop(self, reason: str) -> None:
        """No more metered calls this run (after a quota error); the first reason is kept."""
        with self._lock:
            if self._stopped is None:
                self._stopped = reason
