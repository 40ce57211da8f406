"""Evaluate a filter string against a player's results, as the service would.

**The sandbox reads filters itself.** It shares the client's tokenizer
(:func:`tourneylake.api.filters.parse_filter`) but not its value grammar nor its validator: the
constraint names, types, options and currencies are those of the sandbox's own metadata
(:func:`published_vocabulary`), and every value is read here. So the sandbox is a second,
independent reading of the service's filter grammar (``docs/reference/filters.md``): a filter the client's checks wrongly let through is
refused with error 101012, as the service would. :func:`compile_filter` turns a filter into a
:class:`Predicate`; every form it reads and everything it refuses is listed in
``docs/reference/sandbox.md`` (Filters).
"""

from __future__ import annotations

import calendar
import re
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property, lru_cache, partial

from tourneylake.api.filters import Constraint, FilterSyntaxError, parse_filter
from tourneylake.errors import TourneylakeError
from tourneylake.sandbox.metadata import template, type_categories
from tourneylake.sandbox.world import CURRENCY_BASE_RATES, Result, World

__all__ = ["FilterNotSupported", "Predicate", "Vocabulary", "compile_filter", "published_vocabulary"]

_DAYS = ("Mo", "Tu", "We", "Th", "Fr", "Sa", "Su")
UNSUPPORTED = frozenset({"PlayerClass", "Rakeback", "Rebuys", "Stat", "VersusPlayer", "VersusUser"})
ZONED = frozenset({"DayOfWeek", "HourOfDay"})
LIMIT_CONTEXTS = ("Best", "Worst", "Last", "First")

# ASCII digits only ([0-9], not \d, which also matches other scripts' digits)
_NUMBER_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_CASH_BOUND_RE = re.compile(r"(?P<currency>[A-Z]{3})?(?:(?P<amount>[0-9]+(?:\.[0-9]+)?)|\*)")
_DURATION_BOUND_RE = re.compile(r"(?P<amount>[0-9]+(?:\.[0-9]+)?)(?P<unit>[smh]?)")
_WHOLE_RE = re.compile(r"[0-9]+")
_YEAR_RE = re.compile(r"[0-9]{4}")
_EPOCH_RANGE_RE = re.compile(r"([0-9]+)~([0-9]+)")
_RELATIVE_DATE_RE = re.compile(r"(-?)([0-9]+)([YMWDHS])")
_DATE_UNIT_SECONDS = {"Y": 365 * 86_400, "M": 30 * 86_400, "W": 7 * 86_400, "D": 86_400, "H": 3_600, "S": 1}
_DURATION_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600, "": 60}

Test = Callable[[Result], bool]
Bounds = tuple[Decimal | None, Decimal | None]


class FilterNotSupported(TourneylakeError, ValueError):
    """A filter the sandbox cannot evaluate (malformed, rejected by metadata, or unsupported)."""


# ----------------------------------------------------------------------------------- vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """What the sandbox's metadata publishes for filters: each constraint's ``@type``, each
    Multiselect's option ids, and the currencies. Read from the metadata template, never from
    :class:`tourneylake.api.filters.FilterCatalog`."""

    types: frozenset[tuple[str, str]]
    options: frozenset[tuple[str, frozenset[str]]]
    currencies: frozenset[str]

    @cached_property
    def _type_by_name(self) -> dict[str, str]:
        return dict(self.types)

    @cached_property
    def _options_by_name(self) -> dict[str, frozenset[str]]:
        return dict(self.options)

    def type_of(self, name: str) -> str | None:
        return self._type_by_name.get(name)

    def options_of(self, name: str) -> frozenset[str]:
        return self._options_by_name.get(name, frozenset())

    def with_constraints(self, **types: str) -> Vocabulary:
        """This vocabulary with more constraints (``HourOfDay="Range"``): what a later edition
        of the metadata publishes."""
        merged = dict(self.types) | types
        return Vocabulary(frozenset(merged.items()), self.options, self.currencies)


@lru_cache(maxsize=1)
def published_vocabulary() -> Vocabulary:
    """The vocabulary of the metadata the sandbox serves."""
    types: dict[str, str] = {}
    options: dict[str, frozenset[str]] = {}
    currencies: set[str] = set()
    for group in template().children:
        if group.name == "FilterDefinition":
            for definition in group.children:
                name = definition.attrs.get("id", "")
                types[name] = definition.attrs.get("type", "")
                ids = frozenset(o.attrs["id"] for o in definition.children if o.name == "Option" and o.attrs.get("id"))
                if ids:
                    options[name] = ids
        elif group.name == "Currencies":
            currencies.update(c.attrs["iso"] for c in group.children if c.attrs.get("iso"))
    return Vocabulary(frozenset(types.items()), frozenset(options.items()), frozenset(currencies))


# ----------------------------------------------------------------------------------- predicate


@dataclass(frozen=True)
class _Limit:
    context: str
    first: int
    last: int | None
    negated: bool


class Predicate:
    """A compiled filter: :meth:`apply` keeps the selected results, oldest first."""

    def __init__(self, tests: list[Test], limit: _Limit | None, usd_profit: Callable[[Result], float]) -> None:
        self.tests = tests
        self.limit = limit
        self._usd_profit = usd_profit

    def apply(self, results: Sequence[Result]) -> list[Result]:
        tests = self.tests
        selected = [r for r in results if all(test(r) for test in tests)] if tests else list(results)
        limit = self.limit
        if limit is None:
            return selected
        if limit.context == "Last":
            ranked = selected[::-1]
        elif limit.context == "First":
            ranked = selected
        else:  # Best / Worst: a stable sort, so equal profits keep their order (the older first)
            ranked = sorted(selected, key=self._usd_profit, reverse=limit.context == "Best")
        chosen = {id(r) for r in ranked[limit.first - 1 : limit.last]}
        return [r for r in selected if (id(r) in chosen) != limit.negated]


# ----------------------------------------------------------------------------------- reading values


def _refuse(constraint: Constraint, why: str) -> FilterNotSupported:
    return FilterNotSupported(f"{constraint.name}: {why}")


def _split(constraint: Constraint, value: str) -> tuple[str, str]:
    """``low~high`` → its bounds; a single value → itself twice."""
    if value.count("~") > 1:
        raise _refuse(constraint, f"{value!r} has more than one '~'")
    low, tilde, high = value.partition("~")
    return (low, high) if tilde else (value, value)


def _ordered(constraint: Constraint, value: str, bounds: Bounds) -> Bounds:
    low, high = bounds
    if low is not None and high is not None and low > high:
        raise _refuse(constraint, f"{value!r}: the low bound is above the high bound")
    return bounds


def _number_range(constraint: Constraint, value: str, *, whole: bool = False, lowest: int | None = None) -> Bounds:
    """A range of plain numbers (or whole ones, from ``lowest``)."""
    pattern = _WHOLE_RE if whole else _NUMBER_RE
    read: list[Decimal | None] = []
    for bound in _split(constraint, value):
        if bound == "*":
            read.append(None)
            continue
        if not pattern.fullmatch(bound):
            what = "a whole number" if whole else "a number"
            raise _refuse(constraint, f"{bound!r} in {value!r} is not {what} or '*'")
        number = Decimal(bound)
        if lowest is not None and number < lowest:
            raise _refuse(constraint, f"{bound!r} in {value!r} is below {lowest}")
        read.append(number)
    return _ordered(constraint, value, (read[0], read[1]))


def _duration_range(constraint: Constraint, value: str) -> Bounds:
    """Seconds; a bound without a unit is in minutes."""
    read: list[Decimal | None] = []
    for bound in _split(constraint, value):
        if bound == "*":
            read.append(None)
            continue
        match = _DURATION_BOUND_RE.fullmatch(bound)
        if match is None:
            raise _refuse(constraint, f"{bound!r} in {value!r} is not a duration (90, 30s, 50m, 1h) or '*'")
        read.append(Decimal(match["amount"]) * _DURATION_UNIT_SECONDS[match["unit"]])
    return _ordered(constraint, value, (read[0], read[1]))


def _cash_range(constraint: Constraint, value: str, currencies: frozenset[str]) -> tuple[str, Bounds, bool]:
    """``(currency, bounds in cents, rebuys)``; the currency is USD when the range names none."""
    rebuys = len(value) > 1 and value.endswith("R") and (value[-2].isdigit() or value[-2] == "*")
    body = value[:-1] if rebuys else value
    named: set[str] = set()
    read: list[Decimal | None] = []
    for bound in _split(constraint, body):
        match = _CASH_BOUND_RE.fullmatch(bound)
        if match is None:
            raise _refuse(constraint, f"{bound!r} in {value!r} is not an amount (USD2, 1.50, GBP*, *)")
        if match["currency"]:
            named.add(match["currency"])
        read.append(None if match["amount"] is None else (Decimal(match["amount"]) * 100).quantize(Decimal(1), ROUND_HALF_UP))
    if len(named) > 1:
        raise _refuse(constraint, f"{value!r} names two currencies")
    currency = named.pop() if named else "USD"
    if currency not in currencies or currency not in CURRENCY_BASE_RATES:
        raise _refuse(constraint, f"currency {currency} is unknown")
    return currency, _ordered(constraint, value, (read[0], read[1])), rebuys


def _date_bounds(constraint: Constraint, value: str, now: int) -> tuple[int, int]:
    """The inclusive epoch-second interval a Date value selects at ``now``."""
    relative = _RELATIVE_DATE_RE.fullmatch(value)
    if relative is not None:
        sign, amount, unit = relative.groups()
        span = int(amount) * _DATE_UNIT_SECONDS[unit]
        if span == 0:
            raise _refuse(constraint, f"{value!r} selects nothing")
        return (now, now + span) if sign else (now - span, now)
    if _YEAR_RE.fullmatch(value):
        year = int(value)
        if year <= 2006:
            raise _refuse(constraint, f"{value!r}: a year must be after 2006")
        return calendar.timegm((year, 1, 1, 0, 0, 0)), calendar.timegm((year, 12, 31, 23, 59, 59))
    epochs = _EPOCH_RANGE_RE.fullmatch(value)
    if epochs is not None:
        start, end = int(epochs[1]), int(epochs[2])
        if start > end:
            raise _refuse(constraint, f"{value!r} ends before it starts")
        return start, end
    raise _refuse(constraint, f"{value!r} is not a date (30D, -2D, 2019 or start~end in epoch seconds)")


def _zone_and_values(constraint: Constraint) -> tuple[tzinfo, tuple[str, ...]]:
    """The time zone that opens a ``DayOfWeek`` / ``HourOfDay`` (UTC without) and the values after it."""
    values = constraint.values
    if "TZ" in values[1:] or (values[0] == "TZ" and constraint.name not in ZONED):
        raise _refuse(constraint, "a time zone may only open DayOfWeek or HourOfDay")
    if values[0] != "TZ":
        return UTC, values
    if len(values) < 3:
        raise _refuse(constraint, "TZ needs a zone and at least one value after it")
    try:
        zone: tzinfo = zoneinfo.ZoneInfo(values[1])
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise _refuse(constraint, f"unknown time zone {values[1]!r}") from None
    return zone, values[2:]


# ----------------------------------------------------------------------------------- tests


def _within(bounds: Bounds, amount: Decimal | int | float) -> bool:
    low, high = bounds
    return (low is None or amount >= low) and (high is None or amount <= high)


def _any(tests: list[Test]) -> Test:
    if len(tests) == 1:
        return tests[0]
    return lambda r: any(t(r) for t in tests)


def _buy_in_with_rebuys(per_entry: Callable[[Result], int]) -> Callable[[Result], float]:
    """The average buy-in including rebuys: each entrant's share of every buy-in paid."""

    def amount(r: Result) -> float:
        t = r.tournament
        return per_entry(r) * (t.entrants + t.re_entries) / t.entrants

    return amount


_CASH: dict[str, Callable[[Result], int]] = {
    "Stake": lambda r: r.tournament.template.stake,
    "StakePlusRake": lambda r: r.tournament.template.stake + r.tournament.template.rake,
    "Rake": lambda r: r.tournament.template.rake,
    "Prize": lambda r: r.prize,
    "PrizePool": lambda r: r.tournament.prize_pool,
    "Guarantee": lambda r: r.tournament.template.guarantee,
    "Overlay": lambda r: r.tournament.overlay,
}
#: The money amounts that rebuys multiply (``R``); the others already include them or never do.
_BUY_INS = frozenset({"Stake", "StakePlusRake", "Rake"})

#: What a date constraint compares: ``Date`` the start, ``EndDate`` (later editions) the end.
_MOMENTS: dict[str, Callable[[Result], int]] = {
    "Date": lambda r: r.tournament.date,
    "EndDate": lambda r: r.tournament.date + r.tournament.duration,
}

_PLAIN: dict[str, Callable[[Result], int]] = {
    "Entrants": lambda r: r.tournament.entrants,
    "ReEntries": lambda r: r.tournament.re_entries,
}


def _cash_test(constraint: Constraint, value: str, world: World, vocabulary: Vocabulary) -> Test:
    currency, (low, high), rebuys = _cash_range(constraint, value, vocabulary.currencies)
    amount: Callable[[Result], float] = _CASH[constraint.name]
    if rebuys and constraint.name in _BUY_INS:
        amount = _buy_in_with_rebuys(_CASH[constraint.name])
    rate_on = world.rate_on

    def test(r: Result) -> bool:
        own = r.tournament.template.currency
        cents = amount(r)
        if own != currency:
            when = r.tournament.date
            cents = cents * rate_on(currency, when) / rate_on(own, when)
        return _within((low, high), round(cents))

    return test


def _multiselect_test(constraint: Constraint, zone: tzinfo, values: tuple[str, ...], vocabulary: Vocabulary) -> Test:
    name = constraint.name
    options = vocabulary.options_of(name)
    unknown = [v for v in values if options and v not in options]
    if unknown:
        raise _refuse(constraint, f"{unknown[0]!r} is not an option")
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
    if name == "DayOfWeek":
        days = set(values)
        return lambda r: _DAYS[datetime.fromtimestamp(r.tournament.date, zone).weekday()] in days
    if name == "State":
        return lambda r: False  # every result is Completed
    raise _refuse(constraint, "the sandbox does not evaluate it")


def _range_test(constraint: Constraint, zone: tzinfo, values: tuple[str, ...]) -> Test:
    name = constraint.name
    if name == "HourOfDay":
        hours = [_number_range(constraint, v, whole=True) for v in values]
        if any(bound is not None and bound > 23 for bounds in hours for bound in bounds):
            raise _refuse(constraint, "an hour of the day is 0 to 23")
        return lambda r: any(_within(b, datetime.fromtimestamp(r.tournament.date, zone).hour) for b in hours)
    if name == "Duration":
        spans = [_duration_range(constraint, v) for v in values]
        return lambda r: any(_within(b, r.tournament.duration) for b in spans)
    if name == "Position":
        tests: list[Test] = []
        for value in values:
            if value == "FT":
                tests.append(_at_the_final_table)
            else:
                bounds = _number_range(constraint, value, whole=True, lowest=1)
                tests.append(partial(_position_within, bounds))
        return _any(tests)
    if name in _PLAIN:
        amount = _PLAIN[name]
        ranges = [_number_range(constraint, v) for v in values]
        return lambda r: any(_within(b, amount(r)) for b in ranges)
    raise _refuse(constraint, "the sandbox does not evaluate it")


def _at_the_final_table(r: Result) -> bool:
    return r.position <= r.tournament.template.players_per_table


def _position_within(bounds: Bounds, r: Result) -> bool:
    return _within(bounds, r.position)


def _limit(constraint: Constraint) -> _Limit:
    if len(constraint.values) != 2 or constraint.values[0] not in LIMIT_CONTEXTS:
        raise _refuse(constraint, f"takes one of {', '.join(LIMIT_CONTEXTS)} and a range of positions (Limit:Last,1~8)")
    low, high = _number_range(constraint, constraint.values[1], whole=True, lowest=1)
    return _Limit(
        constraint.values[0], int(low) if low is not None else 1, None if high is None else int(high), constraint.negated
    )


def _constraint_test(constraint: Constraint, world: World, now: int, vocabulary: Vocabulary) -> Test:
    name, kind = constraint.name, vocabulary.type_of(constraint.name)
    zone: tzinfo = UTC
    values = constraint.values
    if kind != "Text":  # a Text may well contain "TZ"; elsewhere it opens a zone or is misplaced
        zone, values = _zone_and_values(constraint)
    if kind == "Multiselect":
        return _multiselect_test(constraint, zone, values, vocabulary)
    if kind == "Date" and name in _MOMENTS:
        if len(values) != 1:
            raise _refuse(constraint, "takes exactly one value")
        start, end = _date_bounds(constraint, values[0], now)
        moment = _MOMENTS[name]
        return lambda r: start <= moment(r) <= end
    if kind == "CashRange" and name in _CASH:
        return _any([_cash_test(constraint, v, world, vocabulary) for v in values])
    if kind in ("Range", "Number", "Integer"):
        return _range_test(constraint, zone, values)
    if kind == "Text" and name == "TournamentName":
        needles = [v.casefold() for v in values]
        return lambda r: any(n in r.tournament.template.name.casefold() for n in needles)
    raise _refuse(constraint, "the sandbox does not evaluate it")


def _not(test: Test, r: Result) -> bool:
    return not test(r)


def _usd_profit(world: World) -> Callable[[Result], float]:
    rate_on = world.rate_on
    return lambda r: r.profit / rate_on(r.tournament.template.currency, r.tournament.date)


@lru_cache(maxsize=4096)
def _compile(text: str, world: World, now: int, vocabulary: Vocabulary) -> Predicate:
    try:
        parsed = parse_filter(text)
    except FilterSyntaxError as exc:
        raise FilterNotSupported(str(exc)) from None
    tests: list[Test] = []
    limit: _Limit | None = None
    for constraint in parsed.constraints:
        name = constraint.name
        if vocabulary.type_of(name) is None:
            raise FilterNotSupported(f"unknown constraint {name!r}")
        if name == "Saved":
            why = "a saved filter cannot be inverted" if constraint.negated else "the sandbox keeps no saved filters"
            raise _refuse(constraint, why)
        if name in UNSUPPORTED:
            raise _refuse(constraint, "the sandbox does not evaluate it")
        if name == "Limit":
            if limit is not None:
                raise _refuse(constraint, "only one Limit constraint is allowed")
            limit = _limit(constraint)
            continue
        test = _constraint_test(constraint, world, now, vocabulary)
        tests.append(partial(_not, test) if constraint.negated else test)
    return Predicate(tests, limit, _usd_profit(world))


def compile_filter(text: str, world: World, now: int, vocabulary: Vocabulary | None = None) -> Predicate:
    """Compile ``text`` for ``world`` on the day whose end is ``now`` (relative Dates end then),
    with the constraints of ``vocabulary`` (the sandbox's metadata by default).

    Raises :class:`FilterNotSupported` (a :class:`~tourneylake.errors.TourneylakeError` and a
    ``ValueError``) for anything the sandbox refuses.
    """
    return _compile(text or "", world, now, vocabulary or published_vocabulary())
