"""History does not move: an as-of summary is the same whichever day the sandbox serves it.

The sandbox converts each tournament's money at the rates of the tournament's own UTC start day
(a documented guess about the real service), so a summary requested with an absolute
``Date:<start>~<end of night N>`` filter is identical on day N and on day N+3 — except for what
legitimately follows the serving day (the envelope timestamp and metadata hash, ``UserInfo`` and
``@lastActivity``). Also here: what tests can read of what the sandbox saw (the summary requests
it handled, the peak of requests in flight per user) and the per-day rates cache.

Everything goes over real HTTP (``running_sandbox`` + ``httpx``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from tourneylake.sandbox import DEMO, FREE, SandboxServer, World, running_sandbox
from tourneylake.sandbox.app import SummaryRequest
from tourneylake.sandbox.stats import summarise
from tourneylake.sandbox.truth import player_history, truth
from tourneylake.sandbox.world import CURRENCY_BASE_RATES, RATES_CACHE_DAYS, day_start

NIGHT = date(2026, 3, 1)
LATER = NIGHT + timedelta(days=3)
NOON = 12 * 3600
END_OF_NIGHT = day_start(NIGHT) + 86_400 - 1
#: Absolute ranges ending at N's last second, as the harvester sends them.
AS_OF_FILTERS = (
    f"Date:1167609600~{END_OF_NIGHT}",  # the whole history up to the night
    f"Date:{day_start(NIGHT - timedelta(days=365))}~{END_OF_NIGHT}",
    f"Class:SNG;Date:{day_start(NIGHT - timedelta(days=730))}~{END_OF_NIGHT}",
    f"Stake:USD1.48~*;Date:1167609600~{END_OF_NIGHT}",  # a cash range: converted per tournament day
)
#: Players whose histories hold non-USD tournaments (EUR, GBP, CAD, and CNY, whose rate metadata
#: does not publish).
PLAYERS = (
    ("iPoker", "Zoë O'Brien"),
    ("888Poker(ES-PT)", "Ana Łukasz"),
    ("Global Poker", "Chloé Dupont"),
    ("PartyPoker", "mr. Müller"),
    ("GGNetwork", "José María"),
)


SANDBOX = dict(seed=7, today=NIGHT, players=300, time_of_day=NOON)


@pytest.fixture(autouse=True)
def back_to_the_night(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "sandbox" in request.fixturenames:
        request.getfixturevalue("sandbox").world.set_today(NIGHT)


def headers(fmt: str = "json", user: str | None = DEMO.username, password: str | None = DEMO.encoded_password) -> dict[str, str]:
    h = {"Accept": f"application/{fmt}", "User-Agent": "tourneylake-tests/1"}
    if user is not None:
        h["Username"] = user
    if password is not None:
        h["Password"] = password
    return h


def summary_url(server: SandboxServer, network: str, player: str) -> str:
    return f"{server.api_url}/networks/{network}/players/{player}/summary"


def fetch_json(server: SandboxServer, network: str, player: str, filter_text: str) -> dict[str, Any]:
    r = httpx.get(summary_url(server, network, player), params={"filter": filter_text}, headers=headers(), timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()["Response"]
    assert body["@success"] == "true", body
    return body


def without_serving_day(body: dict[str, Any]) -> dict[str, Any]:
    """The response minus what legitimately follows the serving day."""
    kept = {k: v for k, v in body.items() if k not in ("@timestamp", "@metadataHash", "UserInfo")}
    player = kept["PlayerResponse"]["PlayerView"]["Player"]
    kept["PlayerResponse"]["PlayerView"]["Player"] = {k: v for k, v in player.items() if k != "@lastActivity"}
    return kept


def player_response_xml(server: SandboxServer, network: str, player: str, filter_text: str) -> str:
    r = httpx.get(summary_url(server, network, player), params={"filter": filter_text}, headers=headers("xml"), timeout=30)
    assert r.status_code == 200, r.text
    found = re.search(r"<PlayerResponse>.*</PlayerResponse>", r.text, re.S)
    assert found, r.text
    return re.sub(r' lastActivity="\d+"', "", found.group(0))


# ------------------------------------------------------------------------------ as-of summaries


def test_the_chosen_players_have_non_usd_tournaments_in_the_window(sandbox: SandboxServer) -> None:
    currencies = set()
    for network, name in PLAYERS:
        results = player_history(sandbox.world, network, name, AS_OF_FILTERS[0])
        own = {r.tournament.currency for r in results} - {"USD"}
        assert own, name
        currencies |= own
    assert {"EUR", "GBP", "CAD", "CNY"} <= currencies


def test_as_of_summary_is_identical_on_the_night_and_three_days_later(sandbox: SandboxServer) -> None:
    world = sandbox.world
    assert world.rates(NIGHT) != world.rates(LATER)  # the published rates did move
    on_night = {(n, p, f): fetch_json(sandbox, n, p, f) for n, p in PLAYERS for f in AS_OF_FILTERS}
    xml_night = {(n, p): player_response_xml(sandbox, n, p, AS_OF_FILTERS[0]) for n, p in PLAYERS}
    world.set_today(LATER)
    later = {key: fetch_json(sandbox, *key) for key in on_night}
    xml_later = {(n, p): player_response_xml(sandbox, n, p, AS_OF_FILTERS[0]) for n, p in PLAYERS}

    counts = {}
    for key, body in on_night.items():
        assert body["@metadataHash"] != later[key]["@metadataHash"]  # metadata follows the serving day
        assert int(later[key]["@timestamp"]) - int(body["@timestamp"]) == 3 * 86_400
        assert without_serving_day(later[key]) == without_serving_day(body), key
        statistics = {s["@id"]: s.get("$") for s in body["PlayerResponse"]["PlayerView"]["Player"]["Statistics"]["Statistic"]}
        counts[key] = int(statistics["Count"])
    # real summaries, not empty ones (José María plays only stakes below USD 1.48)
    assert sum(1 for c in counts.values() if c > 0) >= len(counts) - 1
    assert xml_later == xml_night


def test_as_of_truth_is_identical_on_both_days(sandbox: SandboxServer) -> None:
    world = sandbox.world
    for network, name in PLAYERS:
        for filter_text in AS_OF_FILTERS:
            night = truth(world, network, name, filter_text, today=NIGHT)
            later = truth(world, network, name, filter_text, today=LATER)
            assert dict(later) == dict(night), (name, filter_text)
            assert later.profit_usd == night.profit_usd
            assert [r.tournament.id for r in later.results] == [r.tournament.id for r in night.results]


def test_converting_at_the_serving_day_would_have_moved_history(sandbox: SandboxServer) -> None:
    """The control: the old rule (the serving day's rates) gives different numbers on N and N+3,
    so the identity above is the per-tournament rule at work, not luck."""
    world = sandbox.world
    moved = 0
    for network, name in PLAYERS:
        results = player_history(world, network, name, AS_OF_FILTERS[0], today=NIGHT)

        def served_on(day: date) -> list[tuple[str, str | None]]:
            rates = world.rates(day)
            return summarise(results, lambda currency, _when: rates[currency], network).statistics  # noqa: B023

        moved += served_on(NIGHT) != served_on(LATER)
        # and the per-tournament rule is exactly World.rates(<the tournament's UTC start day>)
        for r in results[:50]:
            t = r.tournament
            start_day = datetime.fromtimestamp(t.date, UTC).date()
            assert world.rate_on(t.currency, t.date) == world.rates(start_day)[t.currency]
    assert moved == len(PLAYERS)


def test_by_stake_order_is_fixed_by_base_rates(sandbox: SandboxServer) -> None:
    body = fetch_json(sandbox, "iPoker", "Zoë O'Brien", AS_OF_FILTERS[0])
    datasets = body["PlayerResponse"]["PlayerView"]["Player"]["Statistics"]["StatisticalDataSet"]
    by_stake = next(d for d in (datasets if isinstance(datasets, list) else [datasets]) if d["@id"] == "ByStake")
    data = by_stake["Data"] if isinstance(by_stake["Data"], list) else [by_stake["Data"]]
    keys = [d["@x"] for d in data]
    assert len({k[:3] for k in keys}) > 1  # several currencies to order

    def base_usd(key: str) -> tuple[float, str, float]:
        return float(key[3:]) / CURRENCY_BASE_RATES[key[:3]], key[:3], float(key[3:])

    assert keys == sorted(keys, key=base_usd)


# ------------------------------------------------------------------------------ what the sandbox saw


def test_summary_requests_record_every_routed_summary_request(sandbox: SandboxServer) -> None:
    app = sandbox.app
    app.clear_summary_log()
    url = summary_url(sandbox, "iPoker", "Zoë O'Brien")
    as_of = AS_OF_FILTERS[2]
    httpx.get(url, params={"filter": as_of}, headers=headers())
    httpx.get(url, headers=headers())  # no filter at all
    httpx.get(url, params={"filter": ""}, headers=headers())  # an empty one
    httpx.get(url, params={"filter": "Class:SCHEDULED,SNG;"}, headers=headers())  # a live client's trailing ';'
    httpx.get(url, params={"filter": "TournamentName:Hold'em & Co;Stake:EUR1~*"}, headers=headers())  # encoded on the wire
    httpx.get(url, params={"filter": "Bogus:1"}, headers=headers())  # refused: 101012
    httpx.get(url, params={"filter": as_of}, headers=headers(user=None, password=None))  # refused: 101003
    httpx.get(url, params={"filter": as_of}, headers=headers(user=FREE.username, password="wrong"))  # refused: 101002
    httpx.get(url, params={"filter": as_of}, headers={**headers(), "Accept": "text/html"})  # refused: HTTP 404
    httpx.get(summary_url(sandbox, "NoSuchNetwork", "x"), params={"filter": as_of}, headers=headers())  # 101012
    httpx.get(f"{sandbox.api_url}/metadata", headers=headers())  # not a summary: not recorded
    httpx.get(
        url,
        params={"filter": as_of, "Username": DEMO.username, "Password": DEMO.encoded_password},
        headers=headers(user=None, password=None),
    )

    def seen(user: str | None, flt: str, network: str = "iPoker", player: str = "Zoë O'Brien") -> SummaryRequest:
        return SummaryRequest(user, network, player, flt)

    assert (
        app.summary_log_snapshot()
        == list(app.summary_requests)
        == [
            seen(DEMO.username, as_of),
            seen(DEMO.username, ""),
            seen(DEMO.username, ""),
            seen(DEMO.username, "Class:SCHEDULED,SNG;"),
            seen(DEMO.username, "TournamentName:Hold'em & Co;Stake:EUR1~*"),
            seen(DEMO.username, "Bogus:1"),
            seen(None, as_of),
            seen(FREE.username, as_of),
            seen(DEMO.username, as_of),
            seen(DEMO.username, as_of, "NoSuchNetwork", "x"),
            seen(DEMO.username, as_of),
        ]
    )
    record = app.summary_requests[0]
    with pytest.raises(AttributeError):
        record.filter = "changed"  # type: ignore[misc]
    assert app.summary_requests.maxlen is not None  # bounded


def test_peak_in_flight_reaches_the_driven_concurrency_and_never_more() -> None:
    with running_sandbox(seed=7, today=NIGHT, players=300, latency_ms=250) as server:
        accounts, app = server.accounts, server.app
        names = server.world.roster(12)

        async def burst(width: int) -> list[int]:
            async with httpx.AsyncClient(headers=headers(), timeout=30) as client:
                replies = await asyncio.gather(
                    *(client.get(summary_url(server, n, p), params={"filter": AS_OF_FILTERS[1]}) for n, p in names[:width])
                )
            return [r.status_code for r in replies]

        accounts.reset_peak()
        app.clear_summary_log()
        assert asyncio.run(burst(4)) == [200] * 4
        assert accounts.peak_in_flight(DEMO.username) == 4
        assert accounts.users[DEMO.username].peak_in_flight == 4
        assert accounts.peak_in_flight(FREE.username) == 0  # another user's count is its own
        assert len(app.summary_log_snapshot()) == 4
        assert {(r.network, r.player) for r in app.summary_requests} == set(names[:4])

        # one at a time after a reset: the peak is 1; the idle account is back to 0 in flight
        assert accounts.users[DEMO.username].in_flight == 0
        accounts.reset_peak(DEMO.username)
        for _ in range(3):
            assert asyncio.run(burst(1)) == [200]
        assert accounts.peak_in_flight(DEMO.username) == 1

        # waves of 3 never count as more than 3
        accounts.reset_peak(DEMO.username)
        for _ in range(2):
            assert asyncio.run(burst(3)) == [200] * 3
        assert accounts.peak_in_flight(DEMO.username) == 3


# ------------------------------------------------------------------------------ the rates cache


def test_rates_cache_holds_a_multi_year_history_without_thrashing() -> None:
    world = World(seed=7, players=300, today=NIGHT)
    assert world.rates_cache_info()[2] == RATES_CACHE_DAYS >= 4000
    players = [(n, p) for n, p in world.roster(40)]
    for network, name in players:  # every day of play since 2019, and the serving days
        truth(world, network, name)
    hits, misses, _, size = world.rates_cache_info()
    assert size == misses > 365  # several years of days, each computed once
    for network, name in players:
        truth(world, network, name)
    assert world.rates_cache_info()[1] == misses  # the second pass computes nothing
    assert world.rates_cache_info()[0] > hits


def test_rates_are_the_same_after_eviction() -> None:
    tiny = World(seed=7, players=300, today=NIGHT, rates_cache=2)
    roomy = World(seed=7, players=300, today=NIGHT)
    days = [NIGHT - timedelta(days=d) for d in range(0, 2000, 97)]
    first = [tiny.rates(d) for d in days]
    assert tiny.rates_cache_info()[3] == 2
    assert [tiny.rates(d) for d in days] == first == [roomy.rates(d) for d in days]
    assert dict(truth(tiny, "iPoker", "Zoë O'Brien")) == dict(truth(roomy, "iPoker", "Zoë O'Brien"))
    # callers get copies: mutating one does not touch the cache
    first[0]["EUR"] = 99.0
    assert tiny.rates(days[0])["EUR"] != 99.0
