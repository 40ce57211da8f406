"""The sandbox's world lives: its players keep playing, every day, deterministically.

Players differ in skill (winners and losers, heavy-tailed results) and volume (days of play,
entries a day); a night's statistics move from the night before; a day's games are the same
whichever day they are asked on; and a one-day summary lists every entry its statistics count,
so statistics computed from the served entries equal the served ones (computed vs served).
"""

from __future__ import annotations

import math
import statistics as stats
from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise

import pytest

from tests.helpers import sandbox_settings
from tourneylake.api import Client
from tourneylake.api.filters import filter_for_night
from tourneylake.sandbox import SandboxServer, World
from tourneylake.sandbox.players import FIXED_PLAYERS, MAX_ENTRIES_PER_DAY
from tourneylake.sandbox.stats import Entries
from tourneylake.sandbox.truth import truth

NIGHT = date(2026, 11, 25)
NOON = 12 * 3600
SEED = 7

SANDBOX = dict(seed=SEED, today=NIGHT, players=300, time_of_day=NOON)


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=SEED, players=300, today=NIGHT)


@pytest.fixture(scope="module")
def client(sandbox: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with Client(sandbox_settings(sandbox, tmp_path_factory.mktemp("world"))) as opened:
        yield opened


def days_of_play(world: World, network: str, name: str) -> Counter[int]:
    """Entries per UTC day (days since 1970) of the player's whole history."""
    return Counter(r.tournament.date // 86_400 for r in truth(world, network, name).results)


# ----------------------------------------------------------------------------------- it lives


def test_the_regulars_play_most_days_and_the_roster_every_day(world: World) -> None:
    week = [NIGHT - timedelta(days=d) for d in range(7)]
    epoch_days = {(day - date(1970, 1, 1)).days for day in week}
    regular_days = [len(epoch_days & set(days_of_play(world, *player))) for player in FIXED_PLAYERS]
    assert stats.mean(regular_days) >= 3, regular_days  # three to six days a week on average
    players_by_day = Counter(d for network, name in world.roster() for d in days_of_play(world, network, name) if d in epoch_days)
    assert set(players_by_day) == epoch_days and min(players_by_day.values()) >= 5  # every day, many players


def test_statistics_move_from_night_to_night(world: World) -> None:
    nights = [NIGHT - timedelta(days=2), NIGHT - timedelta(days=1), NIGHT]
    moved = Counter()
    for network, name in FIXED_PLAYERS:
        served = [truth(world, network, name, today=night) for night in nights]
        counts = [int(s["Count"]) for s in served]
        assert counts == sorted(counts), name  # a history only grows
        moved[name] = sum(a["AvROI"] != b["AvROI"] or a["Count"] != b["Count"] for a, b in pairwise(served))
    assert sum(moved.values()) >= len(FIXED_PLAYERS)  # most regulars move most nights
    assert sum(1 for m in moved.values() if m) >= len(FIXED_PLAYERS) - 2, moved


def test_a_night_is_the_same_whenever_it_is_asked() -> None:
    """Months and years are generated as the clock reaches them; asked in either order, in one
    world or two, a night's history is the same game for game."""
    night, later = date(2026, 12, 20), date(2027, 2, 3)
    forward, backward = World(seed=SEED, players=60), World(seed=SEED, players=60)
    for network, name in forward.roster():
        early = truth(forward, network, name, today=night).results
        truth(forward, network, name, today=later)
        late = truth(backward, network, name, today=later).results
        again = truth(backward, network, name, today=night).results
        key = [(r.tournament.id, r.position, r.prize, r.multientries) for r in early]
        assert key == [(r.tournament.id, r.position, r.prize, r.multientries) for r in again], name
        assert key == [(r.tournament.id, r.position, r.prize, r.multientries) for r in late[: len(early)]], name
        assert all(r.tournament.date >= forward.day_end(night) for r in late[len(early) :])


def test_another_seed_is_another_world() -> None:
    one, other = World(seed=SEED, players=20, today=NIGHT), World(seed=SEED + 1, players=20, today=NIGHT)
    assert [len(truth(one, n, p).results) for n, p in FIXED_PLAYERS] != [
        len(truth(other, n, p).results) for n, p in FIXED_PLAYERS
    ]


# ----------------------------------------------------------------------------------- players differ


def test_players_differ_in_skill_with_heavy_tailed_results(world: World) -> None:
    total_roi, itm, best_entry = [], [], []
    for network, name in world.roster():
        served = truth(world, network, name)
        if len(served.results) >= 100:
            total_roi.append(float(served["TotalROI"]))
            itm.append(float(served["ITM"]))
            rois = [roi for roi in Entries.of(served.results, world.rate_on).roi if roi is not None]
            best_entry.append(max(rois))
    assert len(total_roi) >= 50
    assert sum(r > 10 for r in total_roi) >= 5 and sum(r < -30 for r in total_roi) >= 5  # winners and losers
    assert -45 < stats.median(total_roi) < 0  # the field pays the rake
    assert stats.median(itm) < 35  # most entries cash nothing
    assert max(best_entry) > 2_000 and stats.median(best_entry) > 300  # rare big scores


@pytest.mark.parametrize("seed", [7, 11])
def test_the_watchlists_players_win_and_lose_over_a_month(seed: int) -> None:
    """The fixed players (the demo watchlist) are spread as in the field: over their last month
    (a Date:30D summary) some win and most lose, whatever the seed; over their whole history the
    most skilled win and the least skilled lose."""
    world = World(seed=seed, players=len(FIXED_PLAYERS), today=NIGHT)
    month = [float(truth(world, n, p, "Date:30D")["TotalROI"] or 0) for n, p in FIXED_PLAYERS]
    winners = sum(roi > 0 for roi in month)
    assert 2 <= winners < len(FIXED_PLAYERS) / 2, month
    skills = {(n, p): world.player(n, p).skill for n, p in FIXED_PLAYERS}  # type: ignore[union-attr]
    best, worst = max(skills, key=skills.__getitem__), min(skills, key=skills.__getitem__)
    assert float(truth(world, *best)["TotalROI"] or 0) > 0 > float(truth(world, *worst)["TotalROI"] or 0)


def test_players_differ_in_volume(world: World) -> None:
    per_day, active_weeks = [], []
    for network, name in world.roster():
        days = days_of_play(world, network, name)
        if len(days) >= 10:
            per_day.append(sum(days.values()) / len(days))
            span_weeks = (max(days) - min(days) + 1) / 7
            active_weeks.append(len(days) / span_weeks)
    assert min(per_day) < 1.5 and max(per_day) > 4  # entries per day of play
    assert min(active_weeks) < 0.5 and max(active_weeks) > 3  # days of play per week


def test_a_day_never_holds_more_entries_than_a_summary_lists(world: World, sandbox: SandboxServer) -> None:
    assert sandbox.app.recent_tournaments >= MAX_ENTRIES_PER_DAY
    busiest = max(max(days_of_play(world, n, p).values(), default=0) for n, p in world.roster())
    assert 10 <= busiest <= MAX_ENTRIES_PER_DAY


def test_the_regulars_have_every_breakdown_to_show(world: World) -> None:
    networks, currencies = set(), set()
    for network, name in FIXED_PLAYERS:
        tournaments = [r.tournament for r in truth(world, network, name).results]
        templates = {t.template for t in tournaments}
        assert {tp.game_class for tp in templates} == {"sng", "scheduled"}, name
        assert len({tp.buy_in for tp in templates}) >= 3, name
        assert len({tp.game_type for tp in templates}) >= 2 and len({tp.speed for tp in templates}) >= 2, name
        assert len({t.entrants for t in tournaments}) >= 5, name
        networks.add(network)
        currencies |= {tp.currency for tp in templates}
    assert len(networks) == 10 and {"USD", "EUR", "GBP", "CAD", "CNY"} <= currencies


# ----------------------------------------------------------------------------------- computed vs served


def _one_day(client: Client, network: str, name: str, night: date) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The statistics and recent-tournament entries the sandbox serves for ``night`` alone (the
    filter a ``window: day`` harvest sends)."""
    sent = filter_for_night("", night, window="day").sent
    player = client.player_summary(network, name, filter=sent).payload.find("PlayerView/Player")
    served = {s.attr("id"): s.text for s in player.find("Statistics").all("Statistic")}
    recent = player.find("RecentTournaments")
    entries = []
    for t in recent.all("Tournament") if recent else []:
        entry = t.find("TournamentEntry")
        entries.append({**t.attrs, "prize": entry.attr("prize") or "0", "position": entry.attr("position")})
    return served, entries


def _percent(x: Decimal) -> str:
    return str(x.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def test_one_day_statistics_are_what_the_served_entries_imply(sandbox: SandboxServer, client: Client) -> None:
    """For a night and each player: Count, ITM and TotalROI computed from the entries the summary
    lists, converted at the rates metadata publishes that night, equal the served statistics."""
    rates = {iso: rate for iso, rate in sandbox.world.published_rates(NIGHT).items() if rate is not None}
    checked = 0
    for network, name in sandbox.world.roster(60):
        served, entries = _one_day(client, network, name, NIGHT)
        assert int(served["Count"]) == len(entries), name  # every entry of the day is listed
        if not entries:
            continue
        cashed = sum(1 for e in entries if Decimal(e["prize"]) > 0)
        assert served["ITM"] == _percent(Decimal(cashed * 100) / len(entries)), name
        if any(e["currency"] not in rates for e in entries):
            continue  # a currency metadata does not publish: not convertible from the lake
        usd = [[Decimal(e[k]) / Decimal(rates[e["currency"]]) for k in ("stake", "rake", "prize")] for e in entries]
        cost = sum(s + k for s, k, _ in usd)
        profit = sum(p - s - k for s, k, p in usd)
        if cost:
            roi = float(profit * 100 / cost)
            assert math.isclose(roi, float(served["TotalROI"]), abs_tol=0.05 + 1e-9), (name, roi, served["TotalROI"])
        checked += 1
    assert checked >= 10
