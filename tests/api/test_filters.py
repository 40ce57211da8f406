"""The filter grammar: parse/format round trips, ranges, dates, errors, metadata validation."""

from __future__ import annotations

import calendar
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import DATA
from tourneylake.api.filters import (
    Constraint,
    DateSpec,
    Filter,
    FilterCatalog,
    FilterProblem,
    FilterSyntaxError,
    Range,
    format_filter,
    parse_date,
    parse_filter,
    parse_range,
)
from tourneylake.api.tree import parse_json, parse_xml

RECORDED = DATA / "recorded"

DOC_EXAMPLES = [
    "Type:O,OHL,T;Type!:SAT;Stake:USD2~*",
    "StakePlusRake:USD1.50",
    "Limit:Last,1~100",
    "Class:SNG;Type:H,NL,N;Type!:R;StakePlusRake:USD1;Entrants:45",
    "Date:1Y",
    "Date:30D",
    "Date:-2D",
    "Date:2019",
    "Date:1274109174~1274195574",
]


@pytest.fixture(scope="module")
def catalog() -> FilterCatalog:
    return FilterCatalog.from_metadata(parse_json((RECORDED / "metadata.json").read_bytes()))


# ----------------------------------------------------------------------------------- syntax


def test_empty_filter() -> None:
    assert parse_filter("") == Filter(())
    assert format_filter(Filter(())) == ""
    assert str(Filter(())) == ""
    assert not parse_filter("")


@pytest.mark.parametrize("text", DOC_EXAMPLES)
def test_documented_examples_round_trip(text: str) -> None:
    parsed = parse_filter(text)
    assert format_filter(parsed) == text
    assert str(parsed) == text
    assert parse_filter(format_filter(parsed)) == parsed


def test_structure_of_documented_example() -> None:
    parsed = parse_filter("Type:O,OHL,T;Type!:SAT;Stake:USD2~*")
    assert parsed.constraints == (
        Constraint("Type", False, ("O", "OHL", "T")),
        Constraint("Type", True, ("SAT",)),
        Constraint("Stake", False, ("USD2~*",)),
    )
    assert [c.negated for c in parsed.get("Type")] == [False, True]
    assert parsed.get("Date") == []


def test_values_are_kept_as_written() -> None:
    parsed = parse_filter("TournamentName:Sunday Million!;StakePlusRake:USD1.50;Limit:Last,1~100")
    assert parsed.constraints[0].values == ("Sunday Million!",)
    assert parsed.constraints[1].values == ("USD1.50",)
    assert parsed.constraints[2].values == ("Last", "1~100")


def test_constraint_accepts_a_list_and_stays_hashable() -> None:
    constraint = Constraint("Type", False, ["H", "NL"])  # type: ignore[arg-type]
    assert constraint.values == ("H", "NL")
    assert hash(Filter([constraint]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("Type:O,,T", 7, "empty value in constraint 'Type'"),
        ("Type:O,", 7, "empty value in constraint 'Type'"),
        ("Type:", 5, "'Type' has no value after ':'"),
        ("Type", 4, "'Type' has no ':'"),
        ("Class:SNG;;", 10, "empty constraint (two ';' in a row)"),  # only one trailing ';' is dropped
        ("Class:SNG;;Type:H", 10, "empty constraint"),
        (";Class:SNG", 0, "empty constraint before the first ';'"),
        (";", 0, "empty constraint before the first ';'"),  # not a trailing ';' after a constraint
        ("Class SNG", 5, "after constraint name 'Class'"),
        ("Class:SNG; Type:H", 10, "must start with a letter"),
        ("9Class:SNG", 0, "must start with a letter"),
        (":SNG", 0, "missing constraint name"),
        ("Type!x:SAT", 5, "expected ':'"),
        ("Type!!:SAT", 5, "expected ':'"),
        ("Class:S\tNG", 7, "control character"),
    ],
)
def test_syntax_errors_say_what_and_where(text: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(text)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.position == position
    assert fragment in str(error)
    assert f"at position {position}" in str(error)


def test_syntax_error_names_the_constraint() -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("Class:SNG;Type:H,,NL")
    assert info.value.constraint == "Type"
    assert info.value.text == "Class:SNG;Type:H,,NL"


@pytest.mark.parametrize(
    "constraint",
    [
        Constraint("Type", False, ()),
        Constraint("Type", False, ("",)),
        Constraint("Type", False, ("a,b",)),
        Constraint("Type", False, ("a;b",)),
        Constraint("Type", False, ("a\nb",)),
        Constraint("Bad Name", False, ("x",)),
        Constraint("", False, ("x",)),
    ],
)
def test_format_refuses_what_could_not_be_read_back(constraint: Constraint) -> None:
    with pytest.raises(ValueError, match="cannot write"):
        format_filter(Filter((constraint,)))


# ----------------------------------------------------------------------------------- property

_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,11}", fullmatch=True)
_values = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters=",;"),
    min_size=1,
    max_size=12,
)
_constraints = st.builds(Constraint, _names, st.booleans(), st.lists(_values, min_size=1, max_size=4).map(tuple))
_filters = st.lists(_constraints, max_size=6).map(lambda cs: Filter(tuple(cs)))


@settings(max_examples=300, deadline=None)
@given(_filters)
def test_parse_format_round_trip(f: Filter) -> None:
    text = format_filter(f)
    assert parse_filter(text) == f
    assert format_filter(parse_filter(text)) == text


_bounds = st.one_of(
    st.just("*"),
    st.builds(
        lambda cur, n: f"{cur}{n}",
        st.sampled_from(["", "USD", "EUR"]),
        st.decimals(min_value=0, max_value=10_000, places=2).map(str),
    ),
)


@settings(max_examples=200, deadline=None)
@given(_bounds, _bounds)
def test_generated_ranges_parse_or_fail_cleanly(low: str, high: str) -> None:
    text = f"{low}~{high}"
    try:
        parsed = parse_range(text)
    except FilterSyntaxError as exc:
        assert 0 <= exc.position <= len(text)  # noqa: PT017 - either outcome is a valid one here
        return
    if low != "*":
        assert parsed.low == Decimal(low.removeprefix("USD").removeprefix("EUR"))
    else:
        assert parsed.low is None
    if high == "*":
        assert parsed.high is None


# ----------------------------------------------------------------------------------- ranges


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("USD2~*", Range(Decimal(2), None, "USD")),
        ("USD1.50", Range(Decimal("1.50"), Decimal("1.50"), "USD")),
        ("*~EUR10", Range(None, Decimal(10), "EUR")),
        ("1~100", Range(Decimal(1), Decimal(100), None)),
        ("USD1~USD5", Range(Decimal(1), Decimal(5), "USD")),
        ("1~EUR5", Range(Decimal(1), Decimal(5), "EUR")),
        ("45", Range(Decimal(45), Decimal(45), None)),
        ("-20~*", Range(Decimal(-20), None, None)),
        ("*", Range(None, None, None)),
        ("*~*", Range(None, None, None)),
        # a currency may prefix an open bound, and a cash range may end in R
        ("GBP*~5R", Range(None, Decimal(5), "GBP", rebuys=True)),
        ("USD*~5", Range(None, Decimal(5), "USD")),
        ("USD2~10", Range(Decimal(2), Decimal(10), "USD")),
        ("USD2~*R", Range(Decimal(2), None, "USD", rebuys=True)),
        ("USD20R", Range(Decimal(20), Decimal(20), "USD", rebuys=True)),
        ("GBP*", Range(None, None, "GBP")),
    ],
)
def test_parse_range(text: str, expected: Range) -> None:
    assert parse_range(text) == expected


def test_range_contains() -> None:
    assert Decimal("2.5") in parse_range("USD2~*")
    assert 1 not in parse_range("USD2~*")
    assert 100 in parse_range("1~100")


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "empty range"),
        ("~5", 0, "empty low bound"),
        ("5~", 2, "empty high bound"),
        ("USD1~EUR2", 5, "disagrees"),
        ("5~1", 0, "above high bound"),
        ("1~2~3", 3, "more than one '~'"),
        ("USD1~EUR2R", 5, "disagrees"),
        ("5~EUR", 2, "malformed high bound 'EUR'"),  # a currency's last letter is not the R suffix
        ("R", 0, "malformed single bound"),
        ("USD5RR", 0, "malformed single bound"),
        ("usd5", 0, "malformed single bound"),
        ("$5~10", 0, "malformed low bound"),
        ("1.~5", 0, "malformed low bound"),
    ],
)
def test_range_errors(text: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_range(text)
    assert info.value.position == position
    assert fragment in str(info.value)


# ----------------------------------------------------------------------------------- dates

NOW = 1_700_000_000
DAY = 86_400


@pytest.mark.parametrize(
    ("text", "spec", "bounds"),
    [
        ("1Y", DateSpec("relative", amount=1, unit="Y"), (NOW - 365 * DAY, NOW)),
        ("6M", DateSpec("relative", amount=6, unit="M"), (NOW - 180 * DAY, NOW)),
        ("2W", DateSpec("relative", amount=2, unit="W"), (NOW - 14 * DAY, NOW)),
        ("30D", DateSpec("relative", amount=30, unit="D"), (NOW - 30 * DAY, NOW)),
        ("12H", DateSpec("relative", amount=12, unit="H"), (NOW - 12 * 3600, NOW)),
        ("90S", DateSpec("relative", amount=90, unit="S"), (NOW - 90, NOW)),
        ("-2D", DateSpec("relative", amount=-2, unit="D"), (NOW, NOW + 2 * DAY)),
        (
            "2019",
            DateSpec("year", year=2019),
            (calendar.timegm((2019, 1, 1, 0, 0, 0)), calendar.timegm((2020, 1, 1, 0, 0, 0)) - 1),
        ),
        (
            "1274109174~1274195574",
            DateSpec("range", start=1274109174, end=1274195574),
            (1274109174, 1274195574),
        ),
    ],
)
def test_parse_date_and_bounds(text: str, spec: DateSpec, bounds: tuple[int, int]) -> None:
    parsed = parse_date(text)
    assert parsed == spec
    assert parsed.bounds(NOW) == bounds
    assert str(parsed) == text


def test_year_bounds_are_the_utc_calendar_year() -> None:
    start, end = parse_date("2020").bounds(NOW)  # a leap year
    assert start == 1577836800  # 2020-01-01T00:00:00Z
    assert end - start + 1 == 366 * DAY


@pytest.mark.parametrize(
    ("text", "fragment", "position"),
    [
        ("2006", "year after 2006", 0),
        ("1999", "year after 2006", 0),
        ("1274109174", "year after 2006", 0),
        ("0D", "zero", 0),
        ("30d", "malformed date", 0),
        ("30", "year after 2006", 0),
        ("D", "malformed date", 0),
        ("1274195574~1274109174", "after it ends", 0),
        ("x~5", "start 'x'", 0),
        ("5~*", "end '*'", 2),
        ("", "malformed date", 0),
    ],
)
def test_date_errors(text: str, fragment: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_date(text)
    assert fragment in str(info.value)
    assert info.value.position == position


# ----------------------------------------------------------------------------------- metadata


def test_catalog_reads_recorded_metadata(catalog: FilterCatalog) -> None:
    assert len(catalog.constraints) == 24
    assert catalog.constraints["Class"].type == "Multiselect"
    assert catalog.constraints["Class"].options == ("SNG", "SCHEDULED", "LIVE")
    assert catalog.constraints["Limit"].kinds == ("Context", "Range")
    assert catalog.constraints["Stake"].type == "CashRange"
    assert {"USD", "EUR", "GBP"} <= catalog.currencies


def test_catalog_accepts_the_response_root_or_the_payload(catalog: FilterCatalog) -> None:
    root = parse_json((RECORDED / "metadata.json").read_bytes())
    payload = root.one("MetadataResponse")
    assert payload is not None
    assert FilterCatalog.from_metadata(payload) == catalog
    with pytest.raises(ValueError, match="metadata response"):
        FilterCatalog.from_metadata(parse_xml(b"<Response><Other/></Response>"))


@pytest.mark.parametrize("text", [*DOC_EXAMPLES, ""])
def test_documented_examples_pass_recorded_metadata(catalog: FilterCatalog, text: str) -> None:
    assert catalog.problems(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "DayOfWeek:Sa,Su;State:RUNNING",
        "TournamentName:Sunday Million",
        "Saved:anything at all",
        "VersusPlayer:Some Player;VersusUser:true",
        "Stat:AvROI,10~*",
        "PlayerClass:Fish",
        "Rakeback:10~*;ReEntries:0~2;Rebuys:1",
        "Prize:GBP100~*;Overlay:*~EUR10;Guarantee:1000~*;Rake:USD0~USD1",
        "Date!:2D;Type:OMAHA",
    ],
)
def test_lenient_and_valid_filters_pass(catalog: FilterCatalog, text: str) -> None:
    assert catalog.problems(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Typ:H", FilterProblem("Typ", 0, "unknown constraint 'Typ' (did you mean 'Type'?)")),
        ("class:SNG", FilterProblem("class", 0, "unknown constraint 'class' (did you mean 'Class'?)")),
        ("Class:SNG,sng", FilterProblem("Class", 10, "'sng' is not an option of Class (did you mean 'SNG'?)")),
        ("Type!:XYZ", FilterProblem("Type", 6, "'XYZ' is not an option of Type")),
        ("Stake:XYZ5~*", FilterProblem("Stake", 6, "currency XYZ is not one metadata lists")),
        ("Stake:1~XYZ5", FilterProblem("Stake", 8, "currency XYZ is not one metadata lists")),
        ("Entrants:USD4", FilterProblem("Entrants", 9, "Entrants is not an amount of money: remove the currency USD")),
        ("Entrants:10~5", FilterProblem("Entrants", 9, "Entrants: low bound 10 is above high bound 5")),
        ("Stake:USD2~", FilterProblem("Stake", 11, "Stake: empty high bound (write '*' for an open end)")),
        ("Date:1Y,2D", FilterProblem("Date", 8, "Date takes exactly one value")),
        (
            "Class:SNG;Date:2005",
            FilterProblem("Date", 15, "Date: a bare number must be a year after 2006 (for epoch seconds write 'start~end')"),
        ),
        (
            "Limit:Last,1~x",
            FilterProblem(
                "Limit",
                13,
                "Limit: malformed high bound 'x': expected a number with an optional upper-case currency prefix "
                "(45, 1.50, USD2) or '*' for an open end (GBP*)",
            ),
        ),
        ("Class:SNG;;", FilterProblem("", 10, "empty constraint (two ';' in a row)")),
        ("Class:SNG;Type:", FilterProblem("Type", 15, "constraint 'Type' has no value after ':'")),
    ],
)
def test_problems_name_what_and_where(catalog: FilterCatalog, text: str, expected: FilterProblem) -> None:
    assert catalog.problems(text) == [expected]


def test_every_problem_is_listed(catalog: FilterCatalog) -> None:
    text = "Class:SNGG;Foo:1;Stake:USD2~*;Rakeback:5~1"
    problems = catalog.problems(text)
    assert [(p.constraint, p.position) for p in problems] == [("Class", 6), ("Foo", 11), ("Rakeback", 39)]
    message = "; ".join(map(str, problems))
    assert "'SNGG' is not an option of Class (did you mean 'SNG'?) at position 6" in message
    assert "unknown constraint 'Foo' at position 11" in message
    assert "low bound 5 is above high bound 1 at position 39" in message


def test_problems_of_a_filter_object(catalog: FilterCatalog) -> None:
    f = Filter((Constraint("Class", False, ("SNG",)), Constraint("Type", True, ("SAT",))))
    assert catalog.problems(f) == []
    bad = Filter((Constraint("Class", False, ("Nope",)),))
    assert catalog.problems(bad) == [FilterProblem("Class", 6, "'Nope' is not an option of Class")]
    unwritable = Filter((Constraint("Class", False, ("a,b",)),))
    [problem] = catalog.problems(unwritable)
    assert "cannot write" in problem.message


def test_check_with_metadata_without_currencies_or_options() -> None:
    metadata = parse_xml(
        b"<Response><MetadataResponse><FilterDefinition>"
        b'<ConstraintDefinition id="Stake" type="CashRange"/>'
        b'<ConstraintDefinition id="Class" type="Multiselect"/>'
        b'<ConstraintDefinition id="Future" type="SomethingNew"/>'
        b"</FilterDefinition></MetadataResponse></Response>"
    )
    catalog = FilterCatalog.from_metadata(metadata)
    assert catalog.problems("Stake:XYZ1~*;Class:Whatever;Future:x~y") == []
    assert catalog.problems("Stake:1~x")[0].position == 8


# ------------------------------------------------------------------------ filters for a night

from datetime import UTC, date, datetime, timedelta  # noqa: E402 - this section's own imports

from tourneylake.api import filters  # noqa: E402
from tourneylake.api.filters import DATA_START, FIRST_NIGHT, NightFilter, NightFilterError, filter_for_night  # noqa: E402
from tourneylake.errors import TourneylakeError  # noqa: E402

NIGHT = date(2026, 11, 18)
END = calendar.timegm((2026, 11, 19, 0, 0, 0)) - 1  # the night's last second, UTC
START = calendar.timegm((2026, 11, 18, 0, 0, 0))


def _at(*ymd: int) -> int:
    return calendar.timegm((*ymd, 0, 0, 0))


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("", f"Date:{DATA_START}~{END}"),  # unfiltered: everything up to the end of the night
        ("Class:SNG", f"Class:SNG;Date:{DATA_START}~{END}"),
        ("Class:SNG;Date:30D", f"Class:SNG;Date:{END + 1 - 30 * 86400}~{END}"),
        ("Date:30D;Class:SNG", f"Date:{END + 1 - 30 * 86400}~{END};Class:SNG"),  # in place, order kept
        ("Date:2W", f"Date:{END + 1 - 14 * 86400}~{END}"),
        ("Date:6H", f"Date:{END + 1 - 6 * 3600}~{END}"),
        ("Date:90S", f"Date:{END + 1 - 90}~{END}"),
        ("Date:1M", f"Date:{_at(2026, 10, 19)}~{END}"),  # by the calendar
        ("Date:1Y", f"Date:{_at(2025, 11, 19)}~{END}"),
        ("Date:2019;Type:H", f"Date:{_at(2019, 1, 1)}~{_at(2020, 1, 1) - 1};Type:H"),
        ("Date:2026", f"Date:{_at(2026, 1, 1)}~{END}"),  # the night's own year, clipped
        ("Date:1274109174~1274195574", "Date:1274109174~1274195574"),
        (f"Date:1274109174~{END + 99999}", f"Date:1274109174~{END}"),  # clipped to the night
        ("Type:O,OHL,T;Type!:SAT;Stake:USD2~*", f"Type:O,OHL,T;Type!:SAT;Stake:USD2~*;Date:{DATA_START}~{END}"),
    ],
)
def test_a_filter_is_anchored_to_the_night(written: str, sent: str) -> None:
    result = filter_for_night(written, NIGHT)
    assert result.sent == sent and result.written == written
    assert result.anchored and not result.selects_nothing
    assert format_filter(parse_filter(result.sent)) == result.sent


@pytest.mark.parametrize(
    ("night", "written", "start"),
    [
        (date(2026, 3, 30), "Date:1M", _at(2026, 2, 28)),  # 31 March back a month: clamped to February's end
        (date(2024, 3, 30), "Date:1M", _at(2024, 2, 29)),  # a leap year
        (date(2024, 2, 28), "Date:1Y", _at(2023, 2, 28)),  # 29 Feb 2024 back a year: 28 Feb 2023
        (date(2026, 1, 15), "Date:2M", _at(2025, 11, 16)),  # across a year
    ],
)
def test_months_and_years_go_by_the_calendar(night: date, written: str, start: int) -> None:
    end = calendar.timegm((night + timedelta(days=1)).timetuple()) - 1
    assert filter_for_night(written, night).sent == f"Date:{start}~{end}"


@pytest.mark.parametrize("written", ["Date:2027", "Class:SNG;Date:2030", f"Date:{END + 1}~{END + 500}"])
def test_a_date_after_the_night_selects_nothing(written: str) -> None:
    result = filter_for_night(written, NIGHT)
    assert result.selects_nothing and "selects nothing up to 2026-11-18" in result.notes[0]


@pytest.mark.parametrize(
    ("written", "sent", "why"),
    [
        ("Date!:1Y", f"Date!:1Y;Date:{DATA_START}~{END}", "is inverted"),  # still capped at the night
        ("Class:SNG;Date:30D;Date!:1W", f"Class:SNG;Date:{END + 1 - 30 * 86400}~{END};Date!:1W", "is inverted"),
        ("Date:-2D", "Date:-2D", "selects upcoming tournaments"),
    ],
)
def test_what_cannot_be_anchored_is_sent_as_written_and_said(written: str, sent: str, why: str) -> None:
    result = filter_for_night(written, NIGHT)
    assert result.sent == sent and not result.anchored and why in " ".join(result.notes)


def test_anchor_none_sends_the_filter_as_written() -> None:
    result = filter_for_night("Class:SNG;Date:30D", NIGHT, anchor=False)
    assert result.sent == "Class:SNG;Date:30D" and not result.anchored and result.notes


def test_a_day_window_replaces_every_date() -> None:
    assert filter_for_night("Class:SNG", NIGHT, window="day").sent == f"Class:SNG;Date:{START}~{END}"
    replaced = filter_for_night("Date:30D;Class:SNG;Date!:1Y", NIGHT, window="day")
    assert replaced.sent == f"Class:SNG;Date:{START}~{END}" and replaced.anchored
    assert "replaces Date:30D, Date!:1Y" in replaced.notes[0]
    with pytest.raises(NightFilterError, match="cannot be sent as written"):
        filter_for_night("Class:SNG", NIGHT, window="day", anchor=False)
    with pytest.raises(NightFilterError, match="unknown window"):
        filter_for_night("Class:SNG", NIGHT, window="week")  # type: ignore[arg-type]
    with pytest.raises(FilterSyntaxError):
        filter_for_night("Type:O,,T", NIGHT)


_relative = st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 400), st.sampled_from("YMWDHS"))
_plain = st.lists(
    st.sampled_from(["Class:SNG", "Type:H,NL", "Type!:SAT", "Stake:USD2~*", "Entrants:5~*", "TournamentName:Sunday Million"]),
    max_size=3,
    unique=True,
)


@given(_plain, st.one_of(st.none(), _relative), st.dates(date(2008, 1, 1), date(2040, 12, 31)), st.sampled_from(["as_of", "day"]))
@settings(max_examples=300, deadline=None)
def test_properties_of_a_nights_filter(others: list[str], relative: str | None, night: date, window: str) -> None:
    written = ";".join([*others, *([f"Date:{relative}"] if relative else [])])
    result = filter_for_night(written, night, window=window)  # type: ignore[arg-type]
    assert result == filter_for_night(written, night, window=window)  # a pure function: same night, same filter
    parsed = parse_filter(result.sent)
    assert format_filter(parsed) == result.sent
    end = calendar.timegm((night + timedelta(days=1)).timetuple()) - 1
    (date_constraint,) = parsed.get("Date")
    start, stop = (int(x) for x in date_constraint.values[0].split("~"))
    assert stop == end and start <= stop and result.anchored
    assert [str(c) for c in parsed if c.name != "Date"] == others  # the rest kept as written, in order


# --------------------------------------------------------------------- filters for a night: more


def _end_of(night: date) -> int:
    """The night's last second, computed independently of the module (time tuples, not ordinals)."""
    return calendar.timegm((night + timedelta(days=1)).timetuple()) - 1


def test_errors_are_tourneylake_errors_and_value_errors() -> None:
    for error in (FilterSyntaxError, NightFilterError):
        assert issubclass(error, TourneylakeError) and issubclass(error, ValueError)
    with pytest.raises(TourneylakeError):
        parse_filter("Type:")
    assert {"NightFilter", "NightFilterError", "filter_for_night", "DATA_START", "FIRST_NIGHT", "Window"} <= set(filters.__all__)
    assert all(hasattr(filters, name) for name in filters.__all__)
    assert "filter_for_night" in (filters.__doc__ or "")


def test_data_start_is_2007() -> None:
    assert DATA_START == 1167609600 and FIRST_NIGHT.isoformat() == "2007-01-01"


@pytest.mark.parametrize(
    ("night", "written", "start"),
    [
        # months: the day after the night, n months back, its day clamped to the month landed in
        (date(2026, 3, 27), "Date:1M", _at(2026, 2, 28)),  # 28 March → 28 February: no clamp needed
        (date(2026, 3, 28), "Date:1M", _at(2026, 2, 28)),  # 29 March → clamped
        (date(2026, 3, 29), "Date:1M", _at(2026, 2, 28)),  # 30 March → clamped
        (date(2026, 3, 31), "Date:1M", _at(2026, 3, 1)),  # the day after is 1 April
        (date(2026, 5, 30), "Date:1M", _at(2026, 4, 30)),  # 31 May → 30 April (clamped)
        (date(2026, 1, 31), "Date:1M", _at(2026, 1, 1)),  # the day after is 1 February
        (date(2026, 12, 31), "Date:1M", _at(2026, 12, 1)),  # the day after is next year's 1 January
        (date(2026, 12, 30), "Date:1M", _at(2026, 11, 30)),  # 31 December → 30 November
        (date(2026, 8, 30), "Date:6M", _at(2026, 2, 28)),  # 31 August → 28 February
        (date(2026, 11, 18), "Date:13M", _at(2025, 10, 19)),
        (date(2026, 11, 18), "Date:24M", _at(2024, 11, 19)),
        # leap years
        (date(2028, 3, 30), "Date:1M", _at(2028, 2, 29)),  # 2028 is a leap year
        (date(2100, 3, 30), "Date:1M", _at(2100, 2, 28)),  # 2100 is not (a century)
        (date(2400, 3, 30), "Date:1M", _at(2400, 2, 29)),  # 2400 is (400 years)
        (date(2024, 2, 29), "Date:1Y", _at(2023, 3, 1)),  # leap day itself: the day after is 1 March
        (date(2024, 2, 28), "Date:4Y", _at(2020, 2, 29)),  # leap day to leap day: no clamp
        (date(2024, 2, 28), "Date:12M", _at(2023, 2, 28)),  # 12M is 1Y
        (date(2025, 2, 28), "Date:1Y", _at(2024, 3, 1)),  # the day after is 1 March 2025
        (date(2024, 1, 28), "Date:1M", _at(2023, 12, 29)),  # across a year, a leap year's January
        # weeks, days, hours, seconds: exact seconds before the day after the night
        (date(2024, 3, 1), "Date:1W", _at(2024, 2, 24)),  # across the leap day
        (date(2024, 3, 1), "Date:2D", _at(2024, 2, 29)),
        (date(2024, 3, 1), "Date:24H", _at(2024, 3, 1)),
        (date(2024, 3, 1), "Date:86400S", _at(2024, 3, 1)),
    ],
)
def test_relative_dates_end_with_the_night(night: date, written: str, start: int) -> None:
    result = filter_for_night(written, night)
    assert result.sent == f"Date:{start}~{_end_of(night)}"
    assert result.anchored and not result.selects_nothing
    assert parse_date(result.sent.removeprefix("Date:")).kind == "range"  # the service would accept it


def test_the_month_rule_is_clamping_not_overflow() -> None:
    """31 March one month back is 28 February, not 3 March: nights in a row never start later
    than the night after them, and some share a start."""
    starts = [filter_for_night("Date:1M", date(2026, 3, day)).sent.split("~")[0] for day in range(25, 32)]
    assert starts == [f"Date:{_at(2026, 2, d)}" for d in (26, 27, 28, 28, 28, 28)] + [f"Date:{_at(2026, 3, 1)}"]


def test_a_relative_date_reaching_before_1970_starts_at_0() -> None:
    for written in ("Date:100Y", "Date:99999999999Y", "Date:99999999999M", "Date:99999999999D", "Date:99999999999999S"):
        assert filter_for_night(written, NIGHT).sent == f"Date:0~{END}"
    assert filter_for_night("Date:56Y", NIGHT).sent == f"Date:{_at(1970, 11, 19)}~{END}"  # still after it


@pytest.mark.parametrize(
    ("night", "written", "sent", "note"),
    [
        (NIGHT, "Date:2019", f"Date:{_at(2019, 1, 1)}~{_at(2020, 1, 1) - 1}", "the UTC year 2019"),
        (NIGHT, "Date:2026", f"Date:{_at(2026, 1, 1)}~{END}", "the UTC year 2026, clipped to the end of 2026-11-18"),
        (date(2026, 12, 31), "Date:2026", f"Date:{_at(2026, 1, 1)}~{_at(2027, 1, 1) - 1}", "the UTC year 2026"),
        (date(2007, 1, 1), "Date:2007", f"Date:{DATA_START}~{DATA_START + 86399}", "clipped to the end of 2007-01-01"),
        (NIGHT, f"Date:{START}~{END + 86400}", f"Date:{START}~{END}", "the range, clipped to the end of 2026-11-18"),
        (NIGHT, f"Date:{START - 5}~{START + 5}", f"Date:{START - 5}~{START + 5}", None),  # inside the night: kept
        (NIGHT, f"Date:{END}~{END + 1}", f"Date:{END}~{END}", "clipped"),  # straddling by one second
        (NIGHT, f"Date:{END - 1}~{END}", f"Date:{END - 1}~{END}", None),  # ends on the night's last second
        (NIGHT, "Date:1~2", "Date:1~2", None),  # long before: kept
    ],
)
def test_years_and_ranges_are_clipped_to_the_night(night: date, written: str, sent: str, note: str | None) -> None:
    result = filter_for_night(written, night)
    assert result.sent == sent and result.anchored and not result.selects_nothing
    if note is None:
        assert result.notes == ()  # nothing changed, nothing said
    else:
        assert f"{written} sent as {sent}" in result.notes[0] and note in result.notes[0]


@pytest.mark.parametrize(
    ("night", "written", "sent"),
    [
        (NIGHT, "Date:2027", f"Date:{_at(2027, 1, 1)}~{END}"),
        (date(2026, 12, 31), "Date:2027", f"Date:{_at(2027, 1, 1)}~{_at(2027, 1, 1) - 1}"),  # the very next second
        (NIGHT, "Date:9999", f"Date:{_at(9999, 1, 1)}~{END}"),
        (NIGHT, f"Date:{END + 1}~{END + 1}", f"Date:{END + 1}~{END}"),
        (NIGHT, f"Class:SNG;Date:{END + 10}~{END + 99};Type:H", f"Class:SNG;Date:{END + 10}~{END};Type:H"),
    ],
)
def test_a_date_after_the_night_is_sent_as_an_empty_range_that_nothing_accepts(night: date, written: str, sent: str) -> None:
    result = filter_for_night(written, night)
    assert result.sent == sent and result.selects_nothing and result.anchored
    assert format_filter(parse_filter(result.sent)) == result.sent
    (value,) = parse_filter(result.sent).get("Date")[0].values
    with pytest.raises(FilterSyntaxError, match=r"starts \(\d+\) after it ends"):
        parse_date(value)  # so the catalog refuses it and it cannot be paid for by mistake
    assert f"selects nothing up to {night.isoformat()}" in " ".join(result.notes)


def test_one_date_after_the_night_is_enough_to_select_nothing() -> None:
    result = filter_for_night("Date:30D;Date:2030", NIGHT)
    assert result.selects_nothing and result.sent == f"Date:{END + 1 - 30 * 86400}~{END};Date:{_at(2030, 1, 1)}~{END}"


def test_an_inverted_date_is_sent_as_written_and_the_rest_is_still_processed() -> None:
    result = filter_for_night("Date!:2019;Class:SNG;Date:1W;Type!:SAT", NIGHT)
    assert result.sent == f"Date!:2019;Class:SNG;Date:{END + 1 - 7 * 86400}~{END};Type!:SAT"
    assert not result.anchored and not result.selects_nothing
    assert result.notes[0].startswith("Date!:2019 is inverted") and "Date:1W sent as" in result.notes[1]
    only_inverted = filter_for_night("Type:H;Date!:1274109174~1274195574", NIGHT)  # no positive Date: capped
    assert only_inverted.sent == f"Type:H;Date!:1274109174~1274195574;Date:{DATA_START}~{END}"
    assert not only_inverted.anchored
    future = filter_for_night("Date!:2030", NIGHT)  # an inverted Date never selects nothing by itself
    assert not future.selects_nothing and future.sent == f"Date!:2030;Date:{DATA_START}~{END}"


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("Class:SNG;Date:-2D", "Class:SNG;Date:-2D"),  # a positive Date: nothing appended
        ("Date:-1H;Type:H", "Date:-1H;Type:H"),
        ("Date:-2D;Date:30D", f"Date:-2D;Date:{END + 1 - 30 * 86400}~{END}"),
        ("Date!:-2D", f"Date!:-2D;Date:{DATA_START}~{END}"),  # inverted: capped as well
    ],
)
def test_an_upcoming_date_cannot_be_anchored(written: str, sent: str) -> None:
    result = filter_for_night(written, NIGHT)
    assert result.sent == sent and not result.anchored and not result.selects_nothing
    assert any("sent as written" in note for note in result.notes)


def test_no_date_gets_everything_up_to_the_end_of_the_night() -> None:
    for written in ("", "Class:SNG", "Type:O,OHL,T;Type!:SAT;Stake:USD2~*", "TournamentName:Date:1Y"):
        result = filter_for_night(written, NIGHT)
        expected = f"{written};Date:{DATA_START}~{END}" if written else f"Date:{DATA_START}~{END}"
        assert result.sent == expected and result.anchored and not result.selects_nothing
        assert result.notes == (
            f"no Date: Date:{DATA_START}~{END} appended (every tournament started up to the end of 2026-11-18, UTC)",
        )
    first = filter_for_night("", FIRST_NIGHT)
    assert first.sent == f"Date:{DATA_START}~{DATA_START + 86399}" and not first.selects_nothing


def test_constraints_other_than_date_are_kept_byte_for_byte() -> None:
    written = (
        "TournamentName:Sunday Million ;Date:30D;date:1Y;Stake:USD2~*,GBP*~5R;Limit:Last,1~100;HourOfDay:TZ,Europe/London,18~23"
    )
    result = filter_for_night(written, NIGHT)
    # ``date`` is not ``Date`` (names are case-sensitive): kept as written, like any other constraint
    assert result.sent == written.replace("Date:30D", f"Date:{END + 1 - 30 * 86400}~{END}")


def test_anchor_none_sends_exactly_what_is_written() -> None:
    for written in ("", "Class:SNG", "Date:30D", "Date:2030", "Date!:1Y;Date:-2D", "Stake:USD2~*;Date:1274109174~9999999999"):
        result = filter_for_night(written, NIGHT, anchor=False)
        assert result == NightFilter(written, written, False, False, result.notes)
        assert result.notes == ("sent as written (anchor: none): what it selects moves with the day it is fetched on",)
    with pytest.raises(FilterSyntaxError):
        filter_for_night("Date:soon", NIGHT, anchor=False)  # malformed stays malformed


@pytest.mark.parametrize(
    ("written", "sent", "note"),
    [
        ("", f"Date:{START}~{END}", f"the per-day window Date:{START}~{END} (2026-11-18, UTC) appended"),
        ("Class:SNG;Type!:SAT", f"Class:SNG;Type!:SAT;Date:{START}~{END}", "appended"),
        ("Date:-2D;Class:SNG", f"Class:SNG;Date:{START}~{END}", "replaces Date:-2D"),
        ("Date:2030", f"Date:{START}~{END}", "replaces Date:2030"),  # the window decides, not the Date
        (
            "Date!:2019;Type:H;Date:1274109174~1274195574",
            f"Type:H;Date:{START}~{END}",
            "replaces Date!:2019, Date:1274109174~1274195574",
        ),
    ],
)
def test_a_day_window_is_the_nights_own_day(written: str, sent: str, note: str) -> None:
    result = filter_for_night(written, NIGHT, window="day")
    assert result.sent == sent and result.anchored and not result.selects_nothing
    assert len(result.notes) == 1 and note in result.notes[0]


def test_a_day_window_on_a_leap_day_and_at_the_ends_of_time() -> None:
    assert filter_for_night("", date(2024, 2, 29), window="day").sent == f"Date:{_at(2024, 2, 29)}~{_at(2024, 3, 1) - 1}"
    last = calendar.timegm((9999, 12, 31, 23, 59, 59))
    assert filter_for_night("", date.max, window="day").sent == f"Date:{last - 86399}~{last}"
    assert filter_for_night("Date:1M", date.max).sent == f"Date:{_at(9999, 12, 1)}~{last}"
    assert filter_for_night("Date:9999", date.max).sent == f"Date:{_at(9999, 1, 1)}~{last}"
    assert filter_for_night("", date.max).sent == f"Date:{DATA_START}~{last}"


def test_arguments_that_cannot_be() -> None:
    with pytest.raises(NightFilterError, match="cannot be sent as written") as info:
        filter_for_night("Class:SNG", NIGHT, window="day", anchor=False)
    assert isinstance(info.value, TourneylakeError) and isinstance(info.value, ValueError)
    with pytest.raises(NightFilterError, match="cannot be sent as written"):
        filter_for_night("", NIGHT, window="day", anchor=False)  # even with nothing to anchor
    with pytest.raises(NightFilterError, match="before the service's data, which starts on 2007-01-01"):
        filter_for_night("Class:SNG", date(2006, 12, 31))
    with pytest.raises(TypeError, match="a night is a date"):
        filter_for_night("Class:SNG", datetime(2026, 11, 18, 12, 0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a night is a date"):
        filter_for_night("Class:SNG", "2026-11-18")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("written", "position", "fragment"),
    [
        ("Type:O,,T", 7, "empty value"),
        ("Class:SNG;;", 10, "two ';' in a row"),
        ("Class:SNG;Date:yesterday", 15, "Date: malformed date"),
        ("Date:0D", 5, "zero units"),
        ("Class:SNG;Date:2006", 15, "a year after 2006"),
        ("Date:5~3", 5, "starts (5) after it ends (3)"),
        ("Date:1~x", 7, "not epoch seconds"),
        ("Date:30D,2019", 9, "Date takes exactly one value"),
        ("Type:H;Date!:1Y,2Y", 16, "Date takes exactly one value"),
        ("Date!:soon", 6, "malformed date"),
    ],
)
@pytest.mark.parametrize(("window", "anchor"), [("as_of", True), ("day", True), ("as_of", False)])
def test_malformed_filters_are_refused_in_every_mode(
    written: str, position: int, fragment: str, window: str, anchor: bool
) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        filter_for_night(written, NIGHT, window=window, anchor=anchor)  # type: ignore[arg-type]
    assert fragment in info.value.reason and info.value.position == position and info.value.text == written


def test_the_sent_filter_passes_the_metadata_check(catalog: FilterCatalog) -> None:
    for written in ("", "Class:SNG;Date:30D", "Date:2019", "Date:1M", "Type:H;Date!:1Y", "Date:1274109174~1274195574"):
        for window in ("as_of", "day"):
            assert catalog.problems(filter_for_night(written, NIGHT, window=window).sent) == []  # type: ignore[arg-type]
    nothing = filter_for_night("Class:SNG;Date:2030", NIGHT)
    assert nothing.selects_nothing and "after it ends" in catalog.problems(nothing.sent)[0].message  # never paid for


def test_the_night_not_the_fetch_day_decides() -> None:
    """Nothing reads the clock: the same arguments give the same filter, and a later night
    gives a later end."""
    first = filter_for_night("Class:SNG;Date:30D", NIGHT)
    assert first == filter_for_night("Class:SNG;Date:30D", date(2026, 11, 18)) and hash(first) == hash(
        filter_for_night("Class:SNG;Date:30D", NIGHT)
    )
    later = filter_for_night("Class:SNG;Date:30D", NIGHT + timedelta(days=1))
    assert later.sent == f"Class:SNG;Date:{END + 1 - 29 * 86400}~{END + 86400}"


# ------------------------------------------------------------------- night properties (hypothesis)

_nights = st.dates(FIRST_NIGHT, date.max)
_plain_constraints = _constraints.filter(lambda c: c.name != "Date")
_relative_dates = st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 10**6), st.sampled_from("YMWDHS"))
_upcoming_dates = st.builds(lambda n, unit: f"-{n}{unit}", st.integers(1, 10**6), st.sampled_from("YMWDHS"))
_year_dates = st.integers(2007, 9999).map(str)
_range_dates = st.tuples(st.integers(0, 2 * 10**11), st.integers(0, 2 * 10**11)).map(lambda ab: f"{min(ab)}~{max(ab)}")
_any_dates = st.one_of(_relative_dates, _upcoming_dates, _year_dates, _range_dates)
_date_constraints = st.builds(lambda negated, value: Constraint("Date", negated, (value,)), st.booleans(), _any_dates)


def _range_of(constraint: Constraint) -> tuple[int, int]:
    low, high = constraint.values[0].split("~")
    return int(low), int(high)


@given(st.lists(_plain_constraints, max_size=5), st.one_of(st.none(), _relative_dates), st.integers(0, 5), _nights)
@settings(max_examples=400, deadline=None)
def test_a_relative_date_or_none_is_anchored_at_the_end_of_the_night(
    others: list[Constraint], relative: str | None, where: int, night: date
) -> None:
    constraints = list(others)
    if relative is not None:
        constraints.insert(min(where, len(constraints)), Constraint("Date", False, (relative,)))
    written = format_filter(Filter(tuple(constraints)))
    result = filter_for_night(written, night)
    assert result == filter_for_night(written, night)  # deterministic
    assert result.written == written and result.anchored and not result.selects_nothing
    parsed = parse_filter(result.sent)
    assert format_filter(parsed) == result.sent
    assert [c for c in parsed if c.name != "Date"] == others  # kept, in order
    (dated,) = parsed.get("Date")
    start, end = _range_of(dated)
    assert end == _end_of(night) and 0 <= start <= end
    assert parse_date(dated.values[0]) == DateSpec("range", start=start, end=end)
    if relative is None:
        assert parsed.constraints[-1] == dated and start == DATA_START
    else:
        assert parsed.constraints.index(dated) == min(where, len(others))  # rewritten in place
        amount, unit = int(relative[:-1]), relative[-1]
        if unit in "WDHS":
            assert start == max(0, end + 1 - amount * {"W": 604800, "D": 86400, "H": 3600, "S": 1}[unit])
        else:
            _check_calendar_start(start, night, amount * (12 if unit == "Y" else 1))


def _check_calendar_start(start: int, night: date, months: int) -> None:
    """``start`` is midnight of the day ``months`` before the day after ``night``, clamped; or 0."""
    if (night.month, night.day) == (12, 31):  # 9999-12-31 has no date after it
        after = (night.year + 1, 1, 1)
    else:
        following = night + timedelta(days=1)
        after = (following.year, following.month, following.day)
    back = after[0] * 12 + after[1] - 1 - months
    if back < 1970 * 12:
        assert start == 0
        return
    landed = datetime.fromtimestamp(start, UTC)
    assert (landed.hour, landed.minute, landed.second) == (0, 0, 0)
    assert landed.year * 12 + landed.month - 1 == back
    assert landed.day == min(after[2], calendar.monthrange(landed.year, landed.month)[1])


@given(st.sampled_from(["1M", "2M", "1Y", "6M", "13M"]), st.dates(FIRST_NIGHT, date(9999, 12, 30)))
@settings(max_examples=300, deadline=None)
def test_a_later_night_never_starts_a_calendar_window_earlier(relative: str, night: date) -> None:
    def start(of: date) -> int:
        return _range_of(parse_filter(filter_for_night(f"Date:{relative}", of).sent).constraints[0])[0]

    assert start(night) <= start(night + timedelta(days=1))


@given(st.lists(st.one_of(_plain_constraints, _date_constraints), max_size=6), _nights)
@settings(max_examples=500, deadline=None)
def test_every_filter_is_sent_capped_at_the_night(constraints: list[Constraint], night: date) -> None:
    written = format_filter(Filter(tuple(constraints)))
    end = _end_of(night)
    result = filter_for_night(written, night)
    assert result == filter_for_night(written, night)
    parsed = parse_filter(result.sent)
    assert format_filter(parsed) == result.sent
    written_dates = [c for c in constraints if c.name == "Date"]
    inverted = [c for c in written_dates if c.negated]
    upcoming = [c for c in written_dates if not c.negated and c.values[0].startswith("-")]
    positive = [c for c in written_dates if not c.negated]
    # everything but the positive Dates is kept as written, in order
    assert [c for c in parsed if c.name != "Date" or c.negated] == [c for c in constraints if c.name != "Date" or c.negated]
    assert result.anchored == (not inverted and not upcoming)
    sent_positive = [c for c in parsed if c.name == "Date" and not c.negated]
    assert len(sent_positive) == (len(positive) or 1)
    empty = False
    for sent, was in zip(sent_positive, positive or [None], strict=True):
        if was is not None and was in upcoming:
            assert sent == was
            continue
        start, stop = _range_of(sent)
        assert stop <= end
        if was is None or parse_date(was.values[0]).kind == "relative":
            assert stop == end
        if start > stop:
            empty = True
        else:
            assert parse_date(sent.values[0]).kind == "range"
    assert result.selects_nothing == empty
    day = filter_for_night(written, night, window="day")
    assert parse_filter(day.sent).get("Date") == [Constraint("Date", False, (f"{end - 86399}~{end}",))]
    assert day.anchored and [c for c in parse_filter(day.sent) if c.name != "Date"] == [
        c for c in constraints if c.name != "Date"
    ]
    as_written = filter_for_night(written, night, anchor=False)
    assert as_written.sent == written and not as_written.anchored


# ------------------------------------------------------------------------- the trailing ';'

from tourneylake.api.filters import ConstraintDefinition, canonical_filter, parse_duration  # noqa: E402


@pytest.mark.parametrize(
    "text",
    ["Class:SCHEDULED,SNG;", "Type:H,NL;Class:SCHEDULED,SNG;", "TournamentName:Date:1Y;", "Date:30D;"],
)
def test_a_trailing_semicolon_is_accepted_and_dropped(catalog: FilterCatalog, text: str) -> None:
    """Live clients send one: an empty last constraint is absent. It is dropped on format, so
    the filter sent and keyed is the same as without it."""
    without = text.removesuffix(";")
    assert parse_filter(text) == parse_filter(without)
    assert format_filter(parse_filter(text)) == without == canonical_filter(text) == canonical_filter(without)
    assert catalog.problems(text) == []


@pytest.mark.parametrize(("window", "anchor"), [("as_of", True), ("day", True), ("as_of", False)])
def test_a_trailing_semicolon_is_never_sent(window: str, anchor: bool) -> None:
    with_it = filter_for_night("Class:SNG;Date:30D;", NIGHT, window=window, anchor=anchor)  # type: ignore[arg-type]
    without = filter_for_night("Class:SNG;Date:30D", NIGHT, window=window, anchor=anchor)  # type: ignore[arg-type]
    assert with_it.sent == without.sent and not with_it.sent.endswith(";")
    assert with_it.written == "Class:SNG;Date:30D;"  # as written is kept as written
    assert with_it.notes == (*without.notes, "the trailing ';' (an empty last constraint) is dropped")
    assert format_filter(parse_filter(with_it.sent)) == with_it.sent


# ---------------------------------------------------------------- the value grammar by type


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s~50m", (30, 3000)),
        ("1h~*", (3600, None)),
        ("45", (2700, 2700)),  # no unit: minutes
        ("1.5h", (5400, 5400)),
        ("*~90s", (None, 90)),
        ("59m~1h", (3540, 3600)),
    ],
)
def test_parse_duration_in_seconds(text: str, seconds: tuple[int | None, int | None]) -> None:
    parsed = parse_duration(text)
    assert (parsed.low, parsed.high) == tuple(None if s is None else Decimal(s) for s in seconds)
    assert parsed.currency is None


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("1h~30m", 0, "low bound 1h is above high bound 30m"),
        ("30x", 0, "malformed single duration '30x'"),
        ("30M", 0, "malformed single duration"),  # units are lower-case, as documented
        ("USD5", 0, "malformed single duration"),
        ("5~", 2, "empty high bound"),
        ("-5", 0, "malformed single duration"),
    ],
)
def test_duration_errors(text: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_duration(text)
    assert fragment in info.value.reason and info.value.position == position


@pytest.mark.parametrize(
    "text",
    [
        # the forms the service's manual gives, and those users reported
        "Stake:USD2~10,GBP*~5R",
        "Guarantee:USD10~100,GBP*~500",
        "Prize!:GBP*~100",
        "Stake:USD20",
        "Duration:30s~50m",
        "Duration!:1h~*",
        "Entrants:5~*",
        "Entrants!:*~4",
        "DayOfWeek:TZ,Europe/London,Mo,Tu",
        "DayOfWeek!:TZ,America/New_York,Sa,Su",
        "Limit:Best,1~250",
        "Limit:Worst,251~500",
        "Limit:Last,1~8",
        "PlayerClass:Fish,3~4;PlayerClass:Shark,0~0",
        "Rebuys:2.5",
        "Rakeback:25",
        "ReEntries:2",
        "TournamentName:Holdem",
        "TournamentName:Step 3: Final",
        "VersusPlayer:Tom,Tim",
        "Saved:MyFilter",
        # what the documentation is silent on is accepted (module docstring)
        "Stake:USD2~*R;Rake:*~GBP1R;Overlay:USD1R",
        "Entrants:2~6,45~180",
        "Limit:First,1~8",
        "Limit!:Last,1~8",
    ],
)
def test_documented_forms_pass_recorded_metadata(catalog: FilterCatalog, text: str) -> None:
    assert catalog.problems(text) == []
    assert format_filter(parse_filter(text)) == text


@pytest.fixture(scope="module")
def later_catalog(catalog: FilterCatalog) -> FilterCatalog:
    """The recorded metadata plus the constraints later editions publish."""
    later = {
        "HourOfDay": ConstraintDefinition("HourOfDay", "Range"),
        "Position": ConstraintDefinition("Position", "Range"),
        "EndDate": ConstraintDefinition("EndDate", "Date"),
    }
    return FilterCatalog({**catalog.constraints, **later}, catalog.currencies)


@pytest.mark.parametrize(
    "text",
    [
        "HourOfDay:TZ,Europe/London,18~23",
        "HourOfDay:22~23,0~2",
        "HourOfDay:0~*",
        "Position!:FT",
        "Position:1~3",
        "Position:FT,10~*",
        "EndDate:30D",
    ],
)
def test_later_editions_constraints_pass_when_metadata_publishes_them(
    catalog: FilterCatalog, later_catalog: FilterCatalog, text: str
) -> None:
    assert later_catalog.problems(text) == []
    [problem] = catalog.problems(text)  # the recorded (2019) metadata does not publish them
    assert "which this metadata does not publish" in problem.message and problem.position == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Saved!:MyFilter", FilterProblem("Saved", 5, "Saved cannot be inverted: remove the '!' after Saved")),
        ("Class:SNG;Saved!:A", FilterProblem("Saved", 15, "Saved cannot be inverted: remove the '!' after Saved")),
        ("Entrants:5m", FilterProblem("Entrants", 9, "Entrants: only Duration takes a unit (s, m, h): '5m'")),
        (
            "Entrants:5R",
            FilterProblem("Entrants", 10, "Entrants: 'R' (average buy-in including rebuys) only ends a cash range"),
        ),
        ("Rebuys:2R", FilterProblem("Rebuys", 8, "Rebuys: 'R' (average buy-in including rebuys) only ends a cash range")),
        ("Duration:1h~30m", FilterProblem("Duration", 9, "Duration: low bound 1h is above high bound 30m")),
        (
            "Duration:USD5",
            FilterProblem(
                "Duration",
                9,
                "Duration: malformed single duration 'USD5': expected a number of "
                "minutes, or of seconds, minutes or hours with the unit s, m or h "
                "(90, 30s, 50m, 1.5h), or '*'",
            ),
        ),
        ("Stake:USD2~10,XYZ*~5R", FilterProblem("Stake", 14, "currency XYZ is not one metadata lists")),
        (
            "Prize!:GBP*~EUR100",
            FilterProblem("Prize", 12, "Prize: currency EUR of the high bound disagrees with GBP of the low bound"),
        ),
        (
            "DayOfWeek:TZ,Europe/Londres,Mo",
            FilterProblem("DayOfWeek", 13, "DayOfWeek: unknown time zone 'Europe/Londres' (did you mean 'Europe/London'?)"),
        ),
        (
            "DayOfWeek:TZ,Mars/Olympus,Mo",
            FilterProblem("DayOfWeek", 13, "DayOfWeek: unknown time zone 'Mars/Olympus' (an IANA name such as Europe/London)"),
        ),
        ("DayOfWeek:TZ,Europe/London", FilterProblem("DayOfWeek", 26, "DayOfWeek has no value after its time zone")),
        ("DayOfWeek:TZ", FilterProblem("DayOfWeek", 12, "DayOfWeek: TZ needs a time zone after it (TZ,Europe/London,...)")),
        ("DayOfWeek:Mo,TZ,UTC", FilterProblem("DayOfWeek", 13, "DayOfWeek: the time zone (TZ,<zone>) must come first")),
        ("Class:TZ,Europe/London,SNG", FilterProblem("Class", 6, "Class takes no time zone (only DayOfWeek and HourOfDay do)")),
        ("DayOfWeek:Monday", FilterProblem("DayOfWeek", 10, "'Monday' is not an option of DayOfWeek")),
        ("Limit:Last,0~8", FilterProblem("Limit", 11, "Limit: 0 is not a position counted from 1")),
        ("Limit:Best,1~2.5", FilterProblem("Limit", 13, "Limit: 2.5 is not a position counted from 1")),
        ("Limit:1~100", FilterProblem("Limit", 6, "Limit: first the context (e.g. Limit:Last,1~8), then the range")),
        ("Limit:Last", FilterProblem("Limit", 10, "Limit: a range of positions must follow the context (Limit:Last,1~8)")),
        ("Limit:Last,1~8,9~10", FilterProblem("Limit", 15, "Limit takes a context and one range")),
        ("Stat:10~*", FilterProblem("Stat", 5, "Stat: first the statistic (e.g. Stat:AvROI,10~*), then the range")),
        (
            "PlayerClass:Fish,USD3~4",
            FilterProblem("PlayerClass", 17, "PlayerClass is not an amount of money: remove the currency USD"),
        ),
    ],
)
def test_forms_the_documentation_rules_out_say_what_and_where(catalog: FilterCatalog, text: str, expected: FilterProblem) -> None:
    assert catalog.problems(text) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HourOfDay:24", FilterProblem("HourOfDay", 10, "HourOfDay: 24 is not an hour of the day (0–23)")),
        ("HourOfDay:TZ,UTC,18~24", FilterProblem("HourOfDay", 20, "HourOfDay: 24 is not an hour of the day (0–23)")),
        ("HourOfDay:23~22", FilterProblem("HourOfDay", 10, "HourOfDay: low bound 23 is above high bound 22")),  # no wrap
        ("Position:0~3", FilterProblem("Position", 9, "Position: 0 is not a position (from 1) or FT")),
        ("Position:1~FT", FilterProblem("Position", 9, "Position: FT is a value of its own (Position:FT), not a bound")),
        ("Position:GBP1", FilterProblem("Position", 9, "Position is not an amount of money: remove the currency GBP")),
        ("EndDate:1Y,2D", FilterProblem("EndDate", 11, "EndDate takes exactly one value")),
    ],
)
def test_later_editions_forms_say_what_and_where(later_catalog: FilterCatalog, text: str, expected: FilterProblem) -> None:
    assert later_catalog.problems(text) == [expected]


def test_integer_constraints_take_whole_numbers() -> None:
    catalog = FilterCatalog({"Seats": ConstraintDefinition("Seats", "Integer")})
    assert catalog.problems("Seats:2~9") == []
    assert catalog.problems("Seats:2.5") == [FilterProblem("Seats", 6, "Seats: 2.5 is not a whole number")]


def test_str_of_a_problem_names_position_and_constraint(catalog: FilterCatalog) -> None:
    [problem] = catalog.problems("Class:SNG;Saved!:Mine")
    assert str(problem) == "Saved cannot be inverted: remove the '!' after Saved at position 15 (constraint 'Saved')"
