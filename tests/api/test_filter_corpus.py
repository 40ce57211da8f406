"""Real-world filters and generated ones, held against the real recorded metadata.

The corpus (``data/filters/corpus.json``) holds filter strings from the live service's own
answers (the favourite-games filters of the recorded player summary), from its manual, from
live clients and from the recorded metadata, each with its verdict and
why. The property tests generate valid filters from the metadata's constraint definitions, by
type, and check that the catalog accepts them and that they survive parse → format unchanged.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import DATA
from tourneylake.api.filters import (
    DURATION_UNIT_SECONDS,
    Constraint,
    ConstraintDefinition,
    Filter,
    FilterCatalog,
    canonical_filter,
    format_filter,
    parse_duration,
    parse_filter,
    parse_range,
)
from tourneylake.api.tree import parse_json

CORPUS: dict[str, Any] = json.loads((DATA / "filters" / "corpus.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = CORPUS["filters"]

#: Bounded, repeatable and quick: the same examples on every run, the file in a few seconds.
BOUNDED = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _later(catalog: FilterCatalog) -> FilterCatalog:
    """The recorded metadata plus the constraints later editions of the service publish."""
    added = {name: ConstraintDefinition(name, kind) for name, kind in CORPUS["later_editions"].items()}
    return FilterCatalog({**catalog.constraints, **added}, catalog.currencies)


RECORDED_CATALOG = FilterCatalog.from_metadata(parse_json((DATA / "recorded" / "metadata.json").read_bytes()))
LATER_CATALOG = _later(RECORDED_CATALOG)


# ----------------------------------------------------------------------------------- the corpus


def test_the_corpus_is_real_and_large_enough() -> None:
    verdicts = Counter(entry["verdict"] for entry in ENTRIES)
    assert len(ENTRIES) >= 40 and verdicts["valid"] >= 20 and verdicts["invalid"] >= 15
    assert len({entry["filter"] for entry in ENTRIES}) == len(ENTRIES)  # no duplicates
    assert all(entry["why"] and entry["source"] for entry in ENTRIES)


def test_the_recorded_filters_are_the_ones_the_service_served() -> None:
    """Every favourite-games filter of the recorded player summary is in the corpus, verbatim."""
    summary = parse_json((DATA / "recorded" / "player-summary.json").read_bytes())
    statistics = summary.find("PlayerResponse/PlayerView/Player/Statistics")
    assert statistics is not None
    [favourites] = [s for s in statistics.all("StatisticalDataSet") if s.attr("id") == "FavouriteGames"]
    served = {data.attr("x") for data in favourites.all("Data")}
    recorded = {entry["filter"] for entry in ENTRIES if entry["source"] == "recorded player-summary.json"}
    assert served == recorded and len(recorded) == 34


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["filter"] for entry in ENTRIES])
def test_corpus_verdicts_against_the_recorded_metadata(entry: dict[str, Any]) -> None:
    text, catalog = entry["filter"], RECORDED_CATALOG
    problems = catalog.problems(text)
    if entry["verdict"] == "valid":
        assert problems == [], entry["why"]
        assert format_filter(parse_filter(text)) == text.removesuffix(";")  # the one rewrite: a trailing ';'
    else:
        assert problems, f"accepted, though {entry['why']}"
        first = problems[0]
        assert (first.position, entry["says"] in first.message) == (entry["position"], True), (str(first), entry["why"])
        assert 0 <= first.position <= len(text)


@pytest.mark.parametrize(
    "entry", [e for e in ENTRIES if "later_editions" in e], ids=[e["filter"] for e in ENTRIES if "later_editions" in e]
)
def test_corpus_verdicts_with_later_editions(entry: dict[str, Any]) -> None:
    assert (LATER_CATALOG.problems(entry["filter"]) == []) == (entry["later_editions"] == "valid"), entry["why"]


# ----------------------------------------------------------------------- generated valid filters

_ZONES = ("Europe/London", "America/New_York", "Asia/Tokyo", "UTC", "Australia/Adelaide", "Etc/GMT+5", "Asia/Kolkata")
_time_zone = st.sampled_from(_ZONES).map(lambda zone: ("TZ", zone))

# Amounts as the service writes them: whole (45) or with decimals (1.50)
_amount = st.one_of(
    st.integers(0, 100_000).map(str),
    st.integers(0, 10_000_000).map(lambda cents: f"{cents // 100}.{cents % 100:02d}"),
)


def _ordered(low: str, high: str) -> tuple[str, str]:
    return (low, high) if Decimal(low) <= Decimal(high) else (high, low)


@st.composite
def _number_range(draw: st.DrawFn, bound: st.SearchStrategy[str] = _amount, key: Any = Decimal) -> str:
    """A single value or ``low~high`` with open ends, bounds ordered by ``key``."""
    low, high = sorted((draw(bound), draw(bound)), key=key)
    form = draw(st.sampled_from(["single", "closed", "open-low", "open-high", "open"]))
    return {"single": low, "closed": f"{low}~{high}", "open-low": f"*~{high}", "open-high": f"{low}~*", "open": "*~*"}[form]


@st.composite
def _cash_range(draw: st.DrawFn, currencies: tuple[str, ...]) -> str:
    """``[CUR]low~[CUR]high[R]``: a currency on no bound, one or both, open bounds too (``GBP*``)."""
    currency = draw(st.sampled_from(currencies))
    low, high = _ordered(draw(_amount), draw(_amount))
    low = draw(st.sampled_from([low, "*"]))
    high = draw(st.sampled_from([high, "*"]))
    on = draw(st.sampled_from(["none", "low", "high", "both"]))
    low_text = (currency if on in ("low", "both") else "") + low
    high_text = (currency if on in ("high", "both") else "") + high
    single = draw(st.booleans()) and low != "*"
    rebuys = "R" if draw(st.booleans()) else ""
    return (low_text if single else f"{low_text}~{high_text}") + rebuys


def _duration_seconds(bound: str) -> Decimal:
    number, unit = (bound[:-1], bound[-1]) if bound[-1] in DURATION_UNIT_SECONDS else (bound, "m")
    return Decimal(number) * DURATION_UNIT_SECONDS[unit]


_duration_bound = st.builds(lambda amount, unit: amount + unit, _amount, st.sampled_from(["", "s", "m", "h"]))
_duration = _number_range(_duration_bound, key=_duration_seconds)
_hours = _number_range(st.integers(0, 23).map(str))
_positions = st.one_of(st.just("FT"), _number_range(st.integers(1, 10_000).map(str)))
_dates = st.one_of(
    st.builds(lambda n, unit: f"{n}{unit}", st.integers(-400, 400).filter(bool), st.sampled_from("YMWDHS")),
    st.integers(2007, 2100).map(str),
    st.tuples(st.integers(0, 4 * 10**9), st.integers(0, 4 * 10**9)).map(lambda ab: f"{min(ab)}~{max(ab)}"),
)
_free_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=",;"), min_size=1, max_size=12
)
_word = st.from_regex(r"[A-Z][a-z]{1,9}", fullmatch=True)


def _values(definition: ConstraintDefinition, currencies: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    """Valid values of one constraint, from its type as metadata declares it (``docs/reference/filters.md``)."""
    name, kind = definition.id, definition.type

    def some(value: st.SearchStrategy[str], most: int = 3) -> st.SearchStrategy[tuple[str, ...]]:
        return st.lists(value, min_size=1, max_size=most).map(tuple)

    def zoned(values: st.SearchStrategy[tuple[str, ...]]) -> st.SearchStrategy[tuple[str, ...]]:
        return st.tuples(st.one_of(st.just(()), _time_zone), values).map(lambda parts: parts[0] + parts[1])

    if kind == "Multiselect":
        options = some(st.sampled_from(definition.options), 4) if definition.options else some(_word)
        return zoned(options) if name == "DayOfWeek" else options
    if kind == "Date":
        return _dates.map(lambda value: (value,))
    if kind == "Range":
        if name == "Duration":
            return some(_duration)
        if name == "HourOfDay":
            return zoned(some(_hours))
        if name == "Position":
            return some(_positions)
        return some(_number_range())
    if kind == "CashRange":
        return some(_cash_range(currencies))
    if kind in ("Number", "Percentage"):
        return some(_number_range())
    if kind == "Context,Range":
        contexts = st.sampled_from(["Best", "Worst", "Last"])
        return st.tuples(contexts, _number_range(st.integers(1, 10_000).map(str)))
    if kind in ("PlayerClass,Range", "Statistic,Range"):
        return st.one_of(st.tuples(_word), st.tuples(_word, _number_range()))
    if kind == "Flag":
        return st.sampled_from([("true",), ("false",)])
    return some(_free_text)  # Text, PlayerList, Special


def valid_filters(catalog: FilterCatalog) -> st.SearchStrategy[Filter]:
    currencies = tuple(sorted(catalog.currencies))
    by_name = {
        name: _values(definition, currencies).map(lambda values, n=name: (n, values))
        for name, definition in sorted(catalog.constraints.items())
    }

    @st.composite
    def constraint(draw: st.DrawFn) -> Constraint:
        name, values = draw(st.one_of(*by_name.values()))
        negated = name != "Saved" and draw(st.booleans())  # Saved can never be inverted
        return Constraint(name, negated, values)

    return st.lists(constraint(), max_size=6).map(lambda constraints: Filter(tuple(constraints)))


@BOUNDED
@given(valid_filters(RECORDED_CATALOG))
def test_generated_valid_filters_pass_and_round_trip(f: Filter) -> None:
    text = format_filter(f)
    assert RECORDED_CATALOG.problems(text) == [], text
    assert parse_filter(text) == f
    assert format_filter(parse_filter(text)) == text
    if text:  # the trailing ';' live clients send changes nothing
        assert parse_filter(text + ";") == f and canonical_filter(text + ";") == text
        assert RECORDED_CATALOG.problems(text + ";") == []


@BOUNDED
@given(valid_filters(LATER_CATALOG))
def test_generated_filters_of_later_editions_pass(f: Filter) -> None:
    text = format_filter(f)
    assert LATER_CATALOG.problems(text) == [], text
    assert format_filter(parse_filter(text)) == text


@BOUNDED
@given(valid_filters(RECORDED_CATALOG).filter(lambda f: any(not c.negated for c in f)))
def test_inverting_saved_is_always_refused(f: Filter) -> None:
    """Whatever surrounds it, ``Saved!:`` is a problem, at the ``!``."""
    saved = Constraint("Saved", True, ("MyFilter",))
    text = format_filter(Filter((*f.constraints, saved)))
    problems = RECORDED_CATALOG.problems(text)
    assert problems and problems[-1].constraint == "Saved" and problems[-1].position == len(text) - len("!:MyFilter")


@BOUNDED
@given(_duration_bound, _duration_bound)
def test_duration_bounds_are_read_in_seconds(low: str, high: str) -> None:
    low, high = sorted((low, high), key=_duration_seconds)
    parsed = parse_duration(f"{low}~{high}")
    assert (parsed.low, parsed.high) == (_duration_seconds(low), _duration_seconds(high))


@BOUNDED
@given(_cash_range(tuple(sorted(RECORDED_CATALOG.currencies))))
def test_cash_ranges_keep_currency_and_rebuys(value: str) -> None:
    parsed = parse_range(value)
    assert parsed.rebuys == value.endswith("R")
    assert parsed.currency is None or parsed.currency in value
    assert parsed.low is None or parsed.high is None or parsed.low <= parsed.high
