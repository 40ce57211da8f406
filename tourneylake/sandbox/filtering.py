"""Evaluate a filter string against a player's results, as the service would.

The grammar is :mod:`tourneylake.filters`'s; names, options and currencies are checked against
the sandbox's own metadata (:func:`~tourneylake.sandbox.metadata.filter_catalog`). Semantics the
documentation leaves open, decided here:

- constraints separated by ``;`` all apply (AND); the same name may repeat (``Type:H;Type!:R``);
- the values of a ``Multiselect`` are OR-ed *within* an option category and AND-ed *across*
  categories: ``Type:H,NL,T`` is Hold'em AND No-Limit AND Turbo, ``Type:O,OHL`` is either game
  (this is what the real favourite-games filter ``Type:H,NL,N`` needs); several values of any
  other constraint are OR-ed; ``Name!:...`` is the negation of the whole constraint;
- Date: :meth:`~tourneylake.filters.DateSpec.bounds` at "now" = the end of the simulated day
  (so the results do not move during a day); a negative n selects upcoming tournaments, of which
  a completed history has none;
- money ranges (Stake, StakePlusRake, Rake, Prize, PrizePool, Guarantee, Overlay) compare the
  tournament amount converted into the bound's currency (USD when none) at the rates of the
  tournament's own start day (so a past selection never moves), rounded to cents; ``Prize`` is
  the player's own prize;
- Entrants (total entrants), Duration (seconds), ReEntries (the tournament's) are plain ranges;
  DayOfWeek is the UTC weekday of the start; TournamentName matches a case-insensitive
  substring; State selects running/registering tournaments, so only its negation selects
  (every result is Completed); ``Limit:Last,a~b`` / ``Limit:First,a~b`` keeps the a-th to b-th
  most recent (oldest) results after every other constraint;
- constraints the metadata lists but the sandbox cannot evaluate (PlayerClass, Rakeback, Rebuys,
  Saved, Stat, VersusPlayer, VersusUser) are refused like an invalid filter (101012).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

from tourneylake.errors import TourneylakeError
from tourneylake.filters import Constraint, FilterSyntaxError, parse_date, parse_filter, parse_range
from tourneylake.sandbox.metadata import filter_catalog, type_categories
from tourneylake.sandbox.world import CURRENCY_BASE_RATES, Result, World

__all__ = ["FilterNotSupported", "Predicate", "compile_filter"]

_DAYS = ("Mo", "Tu", "We", "Th", "Fr", "Sa", "Su")
UNSUPPORTED = frozenset({"PlayerClass", "Rakeback", "Rebuys", "Saved", "Stat", "VersusPlayer", "VersusUser"})

Test = Callable[[Result], bool]


class FilterNotSupported(TourneylakeError, ValueError):
    """A filter the sandbox cannot evaluate (malformed, rejected by metadata, or unsupported)."""


class Predicate:
    """A compiled filter: :meth:`apply` keeps the selected results, oldest first."""

    def __init__(self, tests: list[Test], limit: tuple[str, int, int | None] | None) -> None:
        self.tests = tests
        self.limit = limit

    def apply(self, results: Sequence[Result]) -> list[Result]:
        tests = self.tests
        if tests:
            selected = [r for r in results if all(test(r) for test in tests)]
        else:
            selected = list(results)
        if self.limit is not None:
            side, first, last = self.limit
            ordered = selected[::-1] if side == "Last" else selected
            chosen = ordered[first - 1 : last]
            selected = chosen[::-1] if side == "Last" else chosen
        return selected


def _cents(value: Decimal) -> int:
    return int((value * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _cash_test(constraint: str, value: str, world: World, amount: Callable[[Result], int]) -> Test:
    rng = parse_range(value)
    currency = rng.currency or "USD"
    if currency not in CURRENCY_BASE_RATES:
        raise FilterNotSupported(f"{constraint}: currency {currency} is unknown")
    low = None if rng.low is None else _cents(rng.low)
    high = None if rng.high is None else _cents(rng.high)
    rate_on = world.rate_on

    def test(r: Result) -> bool:
        cur = r.tournament.template.currency
        cents = amount(r)
        if cur != currency:
            when = r.tournament.date
            cents = round(cents * rate_on(currency, when) / rate_on(cur, when))
        return (low is None or cents >= low) and (high is None or cents <= high)

    return test


def _number_test(value: str, amount: Callable[[Result], int]) -> Test:
    rng = parse_range(value)
    if rng.currency is not None:
        raise FilterNotSupported(f"{value!r} is not a number range")
    low, high = rng.low, rng.high

    def test(r: Result) -> bool:
        x = amount(r)
        return (low is None or x >= low) and (high is None or x <= high)

    return test


_CASH: dict[str, Callable[[Result], int]] = {
    "Stake": lambda r: r.tournament.template.stake,
    "StakePlusRake": lambda r: r.tournament.template.stake + r.tournament.template.rake,
    "Rake": lambda r: r.tournament.template.rake,
    "Prize": lambda r: r.prize,
    "PrizePool": lambda r: r.tournament.prize_pool,
    "Guarantee": lambda r: r.tournament.template.guarantee,
    "Overlay": lambda r: r.tournament.overlay,
}
_NUMBER: dict[str, Callable[[Result], int]] = {
    "Entrants": lambda r: r.tournament.entrants,
    "Duration": lambda r: r.tournament.duration,
    "ReEntries": lambda r: r.tournament.re_entries,
}


def _any(tests: list[Test]) -> Test:
    if len(tests) == 1:
        return tests[0]
    return lambda r: any(t(r) for t in tests)


def _constraint_test(c: Constraint, world: World, now: int) -> Test:
    name, values = c.name, c.values
    if name == "Class":
        wanted = {v.upper() for v in values}
        return lambda r: r.tournament.template.game_class.upper() in wanted
    if name == "Type":
        categories = type_categories()
        groups: dict[str, set[str]] = {}
        for v in values:
            groups.setdefault(categories.get(v, v), set()).add(v)
        sets = list(groups.values())
        return lambda r: all(not s.isdisjoint(r.tournament.type_ids) for s in sets)
    if name == "Date":
        start, end = parse_date(values[0]).bounds(now)
        return lambda r: start <= r.tournament.date <= end
    if name == "DayOfWeek":
        wanted = set(values)
        return lambda r: _DAYS[datetime.fromtimestamp(r.tournament.date, UTC).weekday()] in wanted
    if name == "State":
        return lambda r: False  # every result is Completed
    if name == "TournamentName":
        needles = [v.casefold() for v in values]
        return lambda r: any(n in r.tournament.template.name.casefold() for n in needles)
    if name in _CASH:
        return _any([_cash_test(name, v, world, _CASH[name]) for v in values])
    if name in _NUMBER:
        return _any([_number_test(v, _NUMBER[name]) for v in values])
    raise FilterNotSupported(f"the sandbox does not evaluate constraint {name!r}")


def _limit(c: Constraint) -> tuple[str, int, int | None]:
    if c.negated or len(c.values) != 2 or c.values[0] not in ("Last", "First"):
        raise FilterNotSupported("Limit takes 'Last,a~b' or 'First,a~b'")
    rng = parse_range(c.values[1])
    low = int(rng.low) if rng.low is not None else 1
    high = int(rng.high) if rng.high is not None else None
    if low < 1 or rng.currency is not None:
        raise FilterNotSupported("Limit bounds are positions counted from 1")
    return c.values[0], low, high


@lru_cache(maxsize=4096)
def _compile(text: str, world: World, now: int) -> Predicate:
    try:
        parsed = parse_filter(text)
    except FilterSyntaxError as exc:
        raise FilterNotSupported(str(exc)) from None
    problems = filter_catalog().problems(parsed)
    if problems:
        raise FilterNotSupported("; ".join(str(p) for p in problems))
    tests: list[Test] = []
    limit = None
    for c in parsed.constraints:
        if c.name in UNSUPPORTED:
            raise FilterNotSupported(f"the sandbox does not evaluate constraint {c.name!r}")
        if c.name == "Limit":
            if limit is not None:
                raise FilterNotSupported("only one Limit constraint is allowed")
            limit = _limit(c)
            continue
        try:
            test = _constraint_test(c, world, now)
        except FilterSyntaxError as exc:
            raise FilterNotSupported(str(exc)) from None
        if c.negated:
            tests.append(lambda r, t=test: not t(r))
        else:
            tests.append(test)
    return Predicate(tests, limit)


def compile_filter(text: str, world: World, now: int) -> Predicate:
    """Compile ``text`` for ``world`` on the day whose end is ``now`` (relative Dates end then).

    Raises :class:`FilterNotSupported` (a :class:`~tourneylake.errors.TourneylakeError` and a
    ``ValueError``) for anything the sandbox refuses.
    """
    return _compile(text or "", world, now)
