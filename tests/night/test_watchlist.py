"""The watchlist: loading, targets, and errors that name the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO
from tourneylake.errors import TourneylakeError
from tourneylake.night.watchlist import (
    DEFAULT_PRIORITY,
    FilterDef,
    WatchedPlayer,
    Watchlist,
    WatchlistError,
    load_watchlist,
    parse_watchlist,
)

SAMPLE = """\
filters:
  sng_30d: "Class:SNG;Date:30D"
  big_mtts: {question: "scheduled tournaments over $50 in the last year", timezone: "UTC", locale: "en-US"}
  plain: Type:O,OHL,T;Type!:SAT;Stake:USD2~*
players:
  - {network: PokerStars, name: "Some Player", filters: [sng_30d, big_mtts], priority: 1}
  - {network: "888Poker(ES-PT)", name: "José María"}
  - network: GGNetwork
    name: 007
    filters: plain
"""


def _error(text: str) -> WatchlistError:
    with pytest.raises(WatchlistError) as info:
        parse_watchlist(textwrap.dedent(text), source="wl.yaml")
    assert isinstance(info.value, ValueError)
    return info.value


def test_sample_loads() -> None:
    watchlist = parse_watchlist(SAMPLE)
    assert watchlist.filters["sng_30d"] == FilterDef("sng_30d", expression="Class:SNG;Date:30D")
    assert watchlist.filters["big_mtts"] == FilterDef(
        "big_mtts",
        question="scheduled tournaments over $50 in the last year",
        timezone="UTC",
        locale="en-US",
    )
    assert watchlist.filters["big_mtts"].is_question
    assert not watchlist.filters["plain"].is_question
    assert watchlist.filters["plain"].expression == "Type:O,OHL,T;Type!:SAT;Stake:USD2~*"
    assert watchlist.players == [
        WatchedPlayer("PokerStars", "Some Player", ("sng_30d", "big_mtts"), 1),
        WatchedPlayer("888Poker(ES-PT)", "José María", (), DEFAULT_PRIORITY),
        WatchedPlayer("GGNetwork", "007", ("plain",), DEFAULT_PRIORITY),  # read as written, not 7
    ]
    assert [p.line for p in watchlist.players] == [6, 7, 8]
    assert watchlist.filters["sng_30d"].line == 2


def test_targets_in_stable_order() -> None:
    watchlist = parse_watchlist(SAMPLE)
    assert [(p.name, f) for p, f in watchlist.targets()] == [
        ("Some Player", "sng_30d"),
        ("Some Player", "big_mtts"),
        ("José María", None),
        ("007", "plain"),
    ]


def test_empty_and_partial_watchlists() -> None:
    assert parse_watchlist("") == Watchlist(source="<watchlist>")
    assert parse_watchlist("# nothing yet\n").targets() == []
    assert parse_watchlist("players:\n").players == []
    only_players = parse_watchlist("players:\n  - {network: WPN, name: x, filters: []}\n")
    assert only_players.targets() == [(WatchedPlayer("WPN", "x"), None)]


def test_filters_may_come_after_players() -> None:
    watchlist = parse_watchlist("players:\n  - {network: WPN, name: x, filters: [f]}\nfilters:\n  f: 'Date:1Y'\n")
    assert watchlist.players[0].filters == ("f",)


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "watchlist.yaml"
    path.write_text(SAMPLE, encoding="utf-8")
    assert load_watchlist(path).players[1].name == "José María"
    missing = tmp_path / "nope.yaml"
    with pytest.raises(WatchlistError, match="not found"):
        load_watchlist(missing)
    path.write_text("players:\n  - {network: WPN}\n", encoding="utf-8")
    with pytest.raises(WatchlistError) as info:
        load_watchlist(path)
    assert str(info.value) == f"{path}:2: player has no 'name'"


def test_loads_of_one_file_share_a_parse_but_not_their_lists(tmp_path: Path) -> None:
    path = tmp_path / "watchlist.yaml"
    path.write_text(SAMPLE, encoding="utf-8")
    first = load_watchlist(path)
    first.players.clear()  # a caller's edits stay its own
    first.filters.pop("plain")
    second = load_watchlist(path)
    assert len(second.players) == 3 and "plain" in second.filters
    assert second.players is not load_watchlist(path).players
    path.write_text(SAMPLE.replace("José María", "Jo"), encoding="utf-8")  # a changed file is parsed again
    assert load_watchlist(path).players[1].name == "Jo"


def test_repo_sample_watchlist_is_valid() -> None:
    watchlist = load_watchlist(REPO / "watchlist.yaml")
    assert len(watchlist.targets()) == 13  # what `make run` harvests (and the README's figures say)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("filter:\n  a: 'Date:1Y'\n", 1, "unknown key 'filter'"),
        ("players:\n  - {network: WPN, name: x, priorty: 1}\n", 2, "unknown key 'priorty'"),
        ("players:\n  - {name: x}\n", 2, "player has no 'network'"),
        ("players:\n  - network: WPN\n    name:\n", 3, "player name is empty"),
        ("players:\n  - network: WPN\n    name: '  '\n", 3, "player name is blank"),
        ("players:\n  - {network: [a], name: x}\n", 2, "player network must be text"),
        ("players:\n  - {network: WPN, name: x, filters: [nope]}\n", 2, "filter 'nope' is not defined"),
        ("filters:\n  f: [1, 2]\n", 2, "must be a filter string"),
        ("filters:\n  f:\n", 2, "must be a filter string"),
        ("filters:\n  f: ''\n", 2, "is empty"),
        ("filters:\n  f: {timezone: UTC}\n", 2, "needs a 'filter' or a 'question'"),
        ("filters:\n  f: {question: x, tz: UTC}\n", 2, "unknown key 'tz'"),
        ("filters:\n  f: {question: }\n", 2, "question is empty"),
        ("filters:\n\n  f: 'Type:O,,T'\n", 3, "not a valid filter: empty value in constraint 'Type'"),
        ("filters:\n  'bad name': 'Date:1Y'\n", 2, "filter name 'bad name'"),
        ("filters:\n  f: 'Date:1Y'\n  f: 'Date:2Y'\n", 3, "defined twice (first on line 2)"),
        ("players:\n  - {network: WPN, name: x, priority: high}\n", 2, "priority must be a whole number"),
        ("players:\n  - {network: WPN, name: x, priority: 1.5}\n", 2, "priority must be a whole number"),
        ("players:\n  - {network: WPN, name: x, priority: true}\n", 2, "priority must be a whole number"),
        ("players:\n  network: WPN\n", 2, "'players' must be a list"),
        ("players:\n  - just a name\n", 2, "a player is a mapping"),
        ("- a\n- b\n", 1, "a watchlist is a mapping"),
        ("players:\n  - {network: WPN, name: x, name: y}\n", 2, "key 'name' repeated"),
        ("players: [\n", 2, "not valid YAML"),
        (
            "filters: {f: 'Date:1Y'}\nplayers:\n  - {network: WPN, name: x, filters: [f, f]}\n",
            3,
            "filter 'f' listed twice",
        ),
        ("players:\n  - {network: WPN, name: x, filters: {a: 1}}\n", 2, "must be a list of filter names"),
    ],
)
def test_errors_name_the_line(text: str, line: int, fragment: str) -> None:
    error = _error(text)
    assert error.line == line
    assert fragment in str(error)
    assert str(error).startswith(f"wl.yaml:{line}: ")


def test_duplicate_players_are_an_error_naming_both_lines() -> None:
    error = _error(
        """\
        players:
          - {network: PokerStars, name: "Some Player", priority: 1}
          - {network: WPN, name: "Some Player"}
          - {network: pokerstars, name: "some player", priority: 5}
        """
    )
    assert error.line == 4
    assert "listed twice (first on line 2)" in str(error)


def test_duplicate_detection_normalises_unicode() -> None:
    composed = "Jos\u00e9"
    decomposed = "Jose\u0301"
    error = _error(f"players:\n  - {{network: WPN, name: {composed}}}\n  - {{network: WPN, name: {decomposed}}}\n")
    assert error.line == 3


def test_every_problem_is_reported() -> None:
    error = _error(
        """\
        filters:
          bad: 'Class SNG'
        players:
          - {network: WPN, name: a, filters: [bad]}
          - {network: WPN, name: b, filters: [missing]}
          - {network: WPN}
        """
    )
    assert [line for line, _ in error.problems] == [2, 5, 6]
    assert error.line == 2
    # The player naming the invalid filter is not blamed a second time.
    assert "'bad' is not defined" not in str(error)


# ------------------------------------------------------------------------ windows and anchors


def test_watchlist_error_is_a_tourneylake_error_and_a_value_error() -> None:
    error = _error("players:\n  - {name: x}\n")
    assert isinstance(error, TourneylakeError)
    assert isinstance(error, ValueError)


def test_the_mapping_form_carries_window_and_anchor() -> None:
    watchlist = parse_watchlist(
        "filters:\n"
        "  plain: 'Class:SNG;Date:30D'\n"
        "  daily: {filter: 'Class:SNG', window: day}\n"
        "  as_written: {filter: 'Date:30D', anchor: none}\n"
        "  explicit: {filter: 'Date:1Y', window: as_of, anchor: night}\n"
        "  asked: {question: 'sit and gos', window: day}\n"
        "  asked_raw: {question: 'sit and gos this month', timezone: UTC, locale: en-US, anchor: none}\n"
        "  daily_night: {filter: 'Class:SNG;Type!:SAT', window: day, anchor: night}\n"
        "  mapped_only: {filter: 'Class:SNG'}\n"
        "  inverted_as_of: {filter: 'Date!:1Y', window: as_of}\n"
    )
    f = watchlist.filters
    assert (f["plain"].window, f["plain"].anchor) == ("as_of", True)
    assert (f["daily"].expression, f["daily"].window, f["daily"].anchor) == ("Class:SNG", "day", True)
    assert (f["as_written"].expression, f["as_written"].window, f["as_written"].anchor) == ("Date:30D", "as_of", False)
    assert (f["explicit"].window, f["explicit"].anchor) == ("as_of", True)
    assert f["asked"].is_question and f["asked"].window == "day" and f["asked"].expression is None
    assert f["asked_raw"] == FilterDef(
        "asked_raw", question="sit and gos this month", timezone="UTC", locale="en-US", anchor=False
    )
    assert (f["daily_night"].window, f["daily_night"].anchor) == ("day", True)
    # The mapping form without options is the string form.
    assert f["mapped_only"] == FilterDef("mapped_only", expression="Class:SNG")
    assert not f["mapped_only"].is_question
    assert f["inverted_as_of"].expression == "Date!:1Y"  # only window: day forbids a Date
    assert [f[n].line for n in ("plain", "daily", "asked_raw")] == [2, 3, 7]


def test_block_style_mapping_and_players_using_it() -> None:
    watchlist = parse_watchlist(
        "filters:\n  daily:\n    filter: 'Class:SNG'\n    window: day\nplayers:\n  - {network: WPN, name: x, filters: [daily]}\n"
    )
    assert watchlist.filters["daily"] == FilterDef("daily", expression="Class:SNG", window="day")
    assert watchlist.filters["daily"].line == 3
    assert watchlist.targets() == [(WatchedPlayer("WPN", "x", ("daily",)), "daily")]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            "filters:\n  f: {filter: 'Class:SNG', window: weekly}\n",
            2,
            "filter 'f': window must be 'as_of' or 'day', not 'weekly'",
        ),
        ("filters:\n  f: {filter: 'Class:SNG', window: Day}\n", 2, "window must be 'as_of' or 'day', not 'Day'"),
        ("filters:\n  f: {filter: 'Class:SNG', window: }\n", 2, "window must be 'as_of' or 'day', not empty"),
        ("filters:\n  f: {filter: 'Class:SNG', window: [day]}\n", 2, "window must be 'as_of' or 'day', not a list"),
        (
            "filters:\n  f: {filter: 'Class:SNG', anchor: never}\n",
            2,
            "filter 'f': anchor must be 'night' or 'none', not 'never'",
        ),
        ("filters:\n  f: {filter: 'Class:SNG', anchor: false}\n", 2, "anchor must be 'night' or 'none', not 'false'"),
        # YAML's null is not the word none: it must not silently mean the default (night).
        ("filters:\n  f: {filter: 'Class:SNG', anchor: null}\n", 2, "anchor must be 'night' or 'none', not empty"),
        ("filters:\n  f: {filter: 'Class:SNG', anchor: ~}\n", 2, "anchor must be 'night' or 'none', not empty"),
        (
            "filters:\n  f: {filter: 'Class:SNG', window: day, anchor: none}\n",
            2,
            "filter 'f': window: day anchors the filter to the night, so anchor: none contradicts it",
        ),
        (
            "filters:\n  f:\n    question: 'sit and gos'\n    window: day\n    anchor: none\n",
            5,
            "anchor: none contradicts it",
        ),
        (
            "filters:\n  f: {filter: 'Class:SNG;Date:30D', window: day}\n",
            2,
            "filter 'f': a per-day window sets the Date itself: remove Date:30D or use window: as_of",
        ),
        ("filters:\n  f: {filter: 'Date!:1Y', window: day}\n", 2, "remove Date!:1Y or use window: as_of"),
        ("filters:\n  f: {filter: 'Date:2020;Date!:30D', window: day}\n", 2, "remove Date:2020, Date!:30D or"),
        ("filters:\n  f:\n    window: day\n    filter: 'Date:1Y'\n", 4, "a per-day window sets the Date itself"),
        ("filters:\n  f: {filter: 'Class:SNG', question: 'x'}\n", 2, "filter 'f' has both 'filter' and 'question': give one"),
        ("filters:\n  f:\n    filter: 'Class:SNG'\n    question: x\n", 4, "has both 'filter' and 'question'"),
        ("filters:\n  f: {window: day}\n", 2, "filter 'f' needs a 'filter' or a 'question'"),
        ("filters:\n  f: {filter: 'Type:O,,T'}\n", 2, "filter 'f' is not a valid filter: empty value in constraint 'Type'"),
        ("filters:\n  f:\n    filter: ''\n", 3, "filter 'f': filter is blank"),
        ("filters:\n  f: {filter: }\n", 2, "filter 'f': filter is empty"),
        ("filters:\n  f: {filter: [a]}\n", 2, "filter 'f': filter must be text, not a list"),
        ("filters:\n  f: {filter: 'Class:SNG', timezone: UTC}\n", 2, "filter 'f': 'timezone' only goes with a 'question'"),
        ("filters:\n  f: {filter: 'Class:SNG', locale: en-US}\n", 2, "'locale' only goes with a 'question'"),
        ("filters:\n  f: {filter: 'Class:SNG', windows: day}\n", 2, "unknown key 'windows'"),
        ("filters:\n  f: {filter: 'Class:SNG', window: day, window: as_of}\n", 2, "key 'window' repeated"),
    ],
)
def test_mapping_errors_name_the_line(text: str, line: int, fragment: str) -> None:
    error = _error(text)
    assert error.line == line
    assert fragment in str(error)
    assert str(error).startswith(f"wl.yaml:{line}: ")
    assert len(error.problems) == 1  # one mistake, one message


def test_every_mapping_problem_is_reported_together() -> None:
    error = _error(
        """\
        filters:
          a: {filter: 'Class:SNG', window: weekly}
          b: {filter: 'Date:1Y', window: day}
          c:
            filter: 'Class:SNG'
            question: 'sit and gos'
            anchor: sometimes
          d: {filter: 'Class:SNG', window: day, anchor: none}
          ok: {filter: 'Class:SNG', window: day}
        players:
          - {network: WPN, name: x, filters: [a, ok, missing]}
        """
    )
    assert error.problems == [
        (2, "filter 'a': window must be 'as_of' or 'day', not 'weekly'"),
        (3, "filter 'b': a per-day window sets the Date itself: remove Date:1Y or use window: as_of"),
        (7, "filter 'c': anchor must be 'night' or 'none', not 'sometimes'"),
        (6, "filter 'c' has both 'filter' and 'question': give one"),
        (
            8,
            "filter 'd': window: day anchors the filter to the night, so anchor: none contradicts it (remove one of them)",
        ),
        (11, "filter 'missing' is not defined under 'filters:' (defined: ok)"),
    ]
    assert error.line == 2
    assert str(error).splitlines()[0] == "wl.yaml:2: filter 'a': window must be 'as_of' or 'day', not 'weekly'"
    # The player naming the invalid filters 'a' is not blamed for them a second time.
    assert "'a' is not defined" not in str(error)
