"""The sandbox's own reading of filters, over real HTTP and in its predicate.

Every form the sandbox accepts is honoured in the statistics it serves: the expected selections
here are computed from the synthetic tournaments directly (durations, start times in a zone,
amounts converted at the tournament's own day's rates), never through the sandbox's filtering.
And its reading is its own: it refuses (101012) what the client's validator lets through, while
every valid filter the client accepts, and the sandbox evaluates, is accepted.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given

from tests.api.test_filter_corpus import BOUNDED, ENTRIES, LATER_CATALOG, valid_filters
from tests.helpers import sandbox_settings
from tourneylake.api import Client, RequestRejected
from tourneylake.api.filters import Constraint, Filter, FilterCatalog, format_filter, parse_filter
from tourneylake.sandbox import DEMO, SandboxServer, World, filtering
from tourneylake.sandbox.filtering import UNSUPPORTED, FilterNotSupported, compile_filter, published_vocabulary
from tourneylake.sandbox.metadata import filter_catalog
from tourneylake.sandbox.truth import player_history
from tourneylake.sandbox.world import Result

TODAY = date(2026, 3, 1)
NOON = 12 * 3600

#: The sandbox's vocabulary as a later edition of the metadata would publish it.
LATER = published_vocabulary().with_constraints(HourOfDay="Range", Position="Range", EndDate="Date")
#: Constraints the sandbox refuses whatever their form (it keeps no saved filters).
NOT_EVALUATED = UNSUPPORTED | {"Saved"}


SANDBOX = dict(seed=7, today=TODAY, players=300, time_of_day=NOON)


@pytest.fixture(scope="module")
def client(sandbox: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with Client(sandbox_settings(sandbox, tmp_path_factory.mktemp("filters"))) as opened:
        yield opened


def served_count(client: Client, network: str, player: str, text: str) -> int:
    """The ``Count`` statistic the summary serves for ``text``."""
    player_node = client.player_summary(network, player, filter=text).payload.find("PlayerView/Player")
    [count] = [s for s in player_node.find("Statistics").all("Statistic") if s.attr("id") == "Count"]
    return int(count.text or 0)


def everything(sandbox: SandboxServer, network: str, player: str) -> list[Result]:
    return player_history(sandbox.world, network, player)


def selected_ids(sandbox: SandboxServer, network: str, player: str, text: str) -> set[int]:
    return {r.tournament.id for r in player_history(sandbox.world, network, player, text)}


def in_currency(world: World, cents: float, own: str, target: str, when: int) -> int:
    """An amount converted at the rates of the tournament's own start day, in cents."""
    return round(cents if own == target else cents * world.rate_on(target, when) / world.rate_on(own, when))


# ----------------------------------------------------------------------------------- Duration

DMITRIJ = ("PokerStars", "Dmitrij Šimek")


@pytest.mark.parametrize(
    ("text", "selects"),
    [
        ("Duration:30m~*", lambda s: s >= 1800),
        ("Duration:1800s~*", lambda s: s >= 1800),
        ("Duration:0.5h~*", lambda s: s >= 1800),
        ("Duration:30~*", lambda s: s >= 1800),  # no unit: minutes
        ("Duration:30s~50m", lambda s: 30 <= s <= 3000),
        ("Duration!:1h~*", lambda s: s < 3600),
        ("Duration:*~45,2h~*", lambda s: s <= 2700 or s >= 7200),
    ],
)
def test_duration_bounds_are_seconds_minutes_or_hours(
    sandbox: SandboxServer, client: Client, text: str, selects: Callable[[int], bool]
) -> None:
    results = everything(sandbox, *DMITRIJ)
    expected = {r.tournament.id for r in results if selects(r.tournament.duration)}
    assert selected_ids(sandbox, *DMITRIJ, text) == expected
    assert served_count(client, *DMITRIJ, text) == len(expected)


def test_duration_really_splits_the_history(sandbox: SandboxServer, client: Client) -> None:
    total = len(everything(sandbox, *DMITRIJ))
    longer, shorter = served_count(client, *DMITRIJ, "Duration:30m~*"), served_count(client, *DMITRIJ, "Duration!:30m~*")
    assert 0 < longer < total and longer + shorter == total
    assert served_count(client, *DMITRIJ, "Duration:30s~*") >= longer >= served_count(client, *DMITRIJ, "Duration:1h~*")


# ----------------------------------------------------------------------------------- time zones

ANA = ("888Poker(ES-PT)", "Ana Łukasz")


def starting_on(results: list[Result], weekday: int, zone: str) -> set[int]:
    where = ZoneInfo(zone)
    return {r.tournament.id for r in results if datetime.fromtimestamp(r.tournament.date, where).weekday() == weekday}


def test_a_time_zone_shifts_which_tournaments_fall_on_a_day(sandbox: SandboxServer, client: Client) -> None:
    results = everything(sandbox, *ANA)
    saturday = 5
    in_utc, in_tokyo = starting_on(results, saturday, "UTC"), starting_on(results, saturday, "Asia/Tokyo")
    assert in_utc != in_tokyo  # the synthetic starts spread over the day, so a zone 9 hours ahead moves some
    assert selected_ids(sandbox, *ANA, "DayOfWeek:Sa") == in_utc == selected_ids(sandbox, *ANA, "DayOfWeek:TZ,UTC,Sa")
    assert selected_ids(sandbox, *ANA, "DayOfWeek:TZ,Asia/Tokyo,Sa") == in_tokyo
    friday_in_utc = starting_on(results, saturday - 1, "UTC")
    assert in_tokyo & friday_in_utc  # a Friday evening in UTC is a Saturday in Tokyo
    for text, expected in (("DayOfWeek:Sa", in_utc), ("DayOfWeek:TZ,Asia/Tokyo,Sa", in_tokyo)):
        assert served_count(client, *ANA, text) == len(expected)
    west = starting_on(results, saturday, "America/Los_Angeles") | starting_on(results, saturday + 1, "America/Los_Angeles")
    assert served_count(client, *ANA, "DayOfWeek:TZ,America/Los_Angeles,Sa,Su") == len(west)
    inverted = served_count(client, *ANA, "DayOfWeek!:TZ,Asia/Tokyo,Sa")
    assert inverted == len(results) - len(in_tokyo)


def test_hour_of_day_position_and_end_date_under_a_later_metadata(sandbox: SandboxServer, client: Client) -> None:
    """The recorded metadata lacks them, so over HTTP they are refused like an unknown constraint;
    under a vocabulary that publishes them, the predicate honours them."""
    world = sandbox.world
    results = everything(sandbox, *ANA)

    def ids(text: str) -> set[int]:
        return {r.tournament.id for r in compile_filter(text, world, world.day_end(), LATER).apply(results)}

    london = ZoneInfo("Europe/London")
    evening = {r.tournament.id for r in results if 18 <= datetime.fromtimestamp(r.tournament.date, london).hour <= 23}
    assert ids("HourOfDay:TZ,Europe/London,18~23") == evening and 0 < len(evening) < len(results)
    late_utc = {r.tournament.id for r in results if datetime.fromtimestamp(r.tournament.date, UTC).hour in (22, 23, 0, 1)}
    assert ids("HourOfDay:22~23,0~1") == late_utc
    final_table = {r.tournament.id for r in results if r.position <= r.tournament.template.players_per_table}
    assert ids("Position:FT") == final_table and ids("Position!:FT") == {r.tournament.id for r in results} - final_table
    assert ids("Position:1~3") == {r.tournament.id for r in results if r.position <= 3}
    last = max(r.tournament.date + r.tournament.duration for r in results)
    assert ids(f"EndDate:{last}~{last}") == {
        r.tournament.id for r in results if r.tournament.date + r.tournament.duration == last
    }
    for text in ("HourOfDay:TZ,Europe/London,18~23", "Position!:FT", "EndDate:30D"):
        with pytest.raises(RequestRejected) as info:
            client.player_summary(*ANA, filter=text)
        assert info.value.code == 101012
        assert filter_catalog().problems(text)  # the client, against the sandbox's metadata, agrees


# ----------------------------------------------------------------------------------- money

MULLER = ("PartyPoker", "mr. Müller")  # GBP and USD tournaments, some with re-entries


def average_buy_in(r: Result) -> float:
    """Stake times (entrants + re-entries) / entrants: each entrant's share of every stake paid."""
    t = r.tournament
    return t.stake * (t.entrants + t.re_entries) / t.entrants


def test_cash_ranges_per_currency_with_rebuys(sandbox: SandboxServer, client: Client) -> None:
    world, results = sandbox.world, everything(sandbox, *MULLER)
    text = "Stake:USD2~10,GBP*~5R"  # the manual's example

    def selects(r: Result) -> bool:
        t = r.tournament
        in_usd = in_currency(world, t.stake, t.currency, "USD", t.date)
        in_gbp = in_currency(world, average_buy_in(r), t.currency, "GBP", t.date)
        return 200 <= in_usd <= 1000 or in_gbp <= 500

    expected = {r.tournament.id for r in results if selects(r)}
    assert 0 < len(expected) < len(results)
    assert selected_ids(sandbox, *MULLER, text) == expected
    assert served_count(client, *MULLER, text) == len(expected)
    assert served_count(client, *MULLER, "Prize!:GBP*~100") == len(
        [r for r in results if in_currency(world, r.prize, r.tournament.currency, "GBP", r.tournament.date) > 10_000]
    )


def test_r_compares_the_average_buy_in_including_rebuys(sandbox: SandboxServer) -> None:
    """Between a re-entry tournament's stake and its average buy-in including rebuys, a bound
    selects it with R and not without."""
    results = everything(sandbox, *MULLER)
    rebought = next(r for r in results if r.tournament.re_entries and r.tournament.stake)
    t = rebought.tournament
    between = Decimal((t.stake + average_buy_in(rebought)) / 2 / 100).quantize(Decimal("0.01"))
    assert t.stake < between * 100 < average_buy_in(rebought)
    with_rebuys = selected_ids(sandbox, *MULLER, f"Stake:{t.currency}{between}~*R")
    without = selected_ids(sandbox, *MULLER, f"Stake:{t.currency}{between}~*")
    assert t.id in with_rebuys and t.id not in without and without <= with_rebuys
    # amounts rebuys do not multiply are the same with R
    assert selected_ids(sandbox, *MULLER, "PrizePool:GBP50~*R") == selected_ids(sandbox, *MULLER, "PrizePool:GBP50~*")


# ----------------------------------------------------------------------------------- Limit


def test_limit_best_worst_and_inverted(sandbox: SandboxServer, client: Client) -> None:
    world, results = sandbox.world, everything(sandbox, *ANA)

    def usd_profit(r: Result) -> float:
        return r.profit / world.rate_on(r.tournament.currency, r.tournament.date)

    best = sorted(results, key=usd_profit, reverse=True)[:5]
    assert selected_ids(sandbox, *ANA, "Limit:Best,1~5") == {r.tournament.id for r in best}
    worst = sorted(results, key=usd_profit)[2:7]
    assert selected_ids(sandbox, *ANA, "Limit:Worst,3~7") == {r.tournament.id for r in worst}
    assert served_count(client, *ANA, "Limit!:Last,1~10") == len(results) - 10
    assert served_count(client, *ANA, "Limit:Best,1~250") == min(250, len(results))


# ----------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("text", ["Saved!:MyFilter", "Class:SNG;Saved!:MyFilter", "Saved:MyFilter"])
def test_saved_is_refused_with_101012_and_costs_nothing(sandbox: SandboxServer, client: Client, text: str) -> None:
    before = sandbox.accounts.remaining(DEMO.username)
    with pytest.raises(RequestRejected) as info:
        client.player_summary(*ANA, filter=text)
    assert info.value.code == 101012
    assert sandbox.accounts.remaining(DEMO.username) == before
    with pytest.raises(FilterNotSupported, match="cannot be inverted" if "!" in text else "keeps no saved filters"):
        compile_filter(text, sandbox.world, sandbox.world.day_end())


def test_the_sandbox_does_not_use_the_clients_validator() -> None:
    """filtering.py takes the client's tokenizer and nothing else from tourneylake.api.filters."""
    tree = ast.parse(inspect.getsource(filtering))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "tourneylake.api.filters"
        for alias in node.names
    }
    assert imported == {"parse_filter", "Constraint", "FilterSyntaxError"}
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    validator = {"FilterCatalog", "filter_catalog", "problems", "parse_range", "parse_duration", "parse_date", "filters"}
    assert not used & validator


INVALID = [entry["filter"] for entry in ENTRIES if entry["verdict"] == "invalid"]


def test_a_client_validator_that_accepts_everything_does_not_fool_the_sandbox(
    sandbox: SandboxServer, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FilterCatalog, "problems", lambda self, f: [])  # the client's checks, broken
    assert filter_catalog().problems("Saved!:MyFilter") == []
    for text in INVALID:
        with pytest.raises(FilterNotSupported):
            compile_filter(text, sandbox.world, sandbox.world.day_end())
    with pytest.raises(RequestRejected) as info:
        client.player_summary(*ANA, filter="Duration:30min")
    assert info.value.code == 101012


@pytest.mark.parametrize(
    "text",
    [
        "Limit:Frist,1~8",  # metadata publishes no contexts, so the client accepts any
        "Stake:USD-5~*",  # a negative amount of money
        "Entrants:+5~*",  # a signed count
        "Limit:Last,1~8;Limit:Best,1~2",  # one Limit at a time
    ],
)
def test_what_the_client_lets_through_the_sandbox_refuses(client: Client, text: str) -> None:
    """Where the service's grammar is silent the client accepts (a refused valid filter could never be
    harvested); the sandbox, a stricter reading, answers 101012 as the service may."""
    assert filter_catalog().problems(text) == []
    with pytest.raises(RequestRejected) as info:
        client.player_summary(*ANA, filter=text)
    assert info.value.code == 101012


# ----------------------------------------------------------------------------------- agreement


def evaluated(text: str) -> bool:
    return not any(constraint.name in NOT_EVALUATED for constraint in parse_filter(text))


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["filter"] for entry in ENTRIES])
def test_the_sandbox_agrees_with_every_corpus_verdict(sandbox: SandboxServer, entry: dict) -> None:
    text, world = entry["filter"], sandbox.world
    for verdict, vocabulary in ((entry["verdict"], published_vocabulary()), (entry.get("later_editions"), LATER)):
        if verdict == "valid" and evaluated(text):
            compile_filter(text, world, world.day_end(), vocabulary).apply(everything(sandbox, *ANA))
        elif verdict == "invalid":
            with pytest.raises(FilterNotSupported):
                compile_filter(text, world, world.day_end(), vocabulary)


WORLD = World(seed=5, players=12, today=TODAY)
HISTORY = player_history(WORLD, *WORLD.roster(3)[2])


def _evaluable(f: Filter) -> Filter:
    """``f`` without the constraints the sandbox never evaluates, and with its first Limit only
    (the sandbox takes one Limit at a time)."""
    kept: list[Constraint] = []
    for constraint in f:
        if constraint.name in NOT_EVALUATED or (constraint.name == "Limit" and any(c.name == "Limit" for c in kept)):
            continue
        kept.append(constraint)
    return Filter(tuple(kept))


@BOUNDED
@given(valid_filters(LATER_CATALOG).map(_evaluable))
def test_every_valid_filter_the_client_accepts_the_sandbox_accepts(f: Filter) -> None:
    """No valid form is refused: what the client's grammar generates, the sandbox reads."""
    text = format_filter(f)
    assert LATER_CATALOG.problems(text) == []
    selected = compile_filter(text, WORLD, WORLD.day_end(), LATER).apply(HISTORY)
    assert HISTORY and len(selected) <= len(HISTORY)
    if text:  # the trailing ';' live clients send changes nothing
        assert compile_filter(text + ";", WORLD, WORLD.day_end(), LATER).apply(HISTORY) == selected
