"""The filter grammar: parse/format round trips, ranges, dates, errors, metadata validation."""

from __future__ import annotations

import calendar
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tourneylake.filters import (
    Constraint,
    DateSpec,
    Filter,
    FilterCatalog,
    FilterProblem,
    FilterSyntaxError,
    FilterValidationError,
    Range,
    format_filter,
    parse_date,
    parse_filter,
    parse_range,
)
from tourneylake.tree import parse_json, parse_xml

RECORDED = Path(__file__).parent / "data" / "recorded"

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
        ("Class:SNG;", 10, "nothing after the last ';'"),
        ("Class:SNG;;Type:H", 10, "empty constraint"),
        (";Class:SNG", 0, "empty constraint"),
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
    assert error.pointer().splitlines()[1] == " " * position + "^"


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
        ("USD*~5", 0, "bare '*'"),
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
    assert catalog.check(text) == parse_filter(text)


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
                "Limit: malformed high bound 'x': expected a number with an optional upper-case currency prefix (45, 1.50, USD2) or '*'",
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
    with pytest.raises(FilterValidationError) as info:
        catalog.check(text)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert info.value.problems == problems
    assert "'SNGG' is not an option of Class (did you mean 'SNG'?) at position 6" in message
    assert "unknown constraint 'Foo' at position 11" in message
    assert "low bound 5 is above high bound 1 at position 39" in message


def test_check_accepts_a_filter_object(catalog: FilterCatalog) -> None:
    f = Filter((Constraint("Class", False, ("SNG",)), Constraint("Type", True, ("SAT",))))
    assert catalog.check(f) is f
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

from datetime import date, timedelta  # noqa: E402 - this section's own imports

from tourneylake.filters import DATA_START, NightFilterError, filter_for_night  # noqa: E402

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
