"""Player statistics computed from a list of results, exactly as the summary serves them.

One pass over the results (oldest first) gives every statistic, data set and timeline event; the
same code produces the served values and :meth:`World.truth`, so tests can compare them exactly.

Conventions (service-notes §2): every value is a string; money in USD (the ``displayCurrency``)
with 2 decimals, converted per tournament at the rate of **the tournament's own UTC start day**
(``rate_on(currency, start)``, i.e. ``World.rates(<start day>)``; a guess about the real service,
chosen so that a summary of past tournaments — an as-of filter with an absolute Date range — is
the same whatever day it is served on: statistics, data sets and the USD thresholds of
achievements alike; timeline prizes stay in the tournament's currency); percentages with 1
decimal; dates in epoch seconds. ``Ability`` is always served ``authorized="false"`` (no value),
and ``PTLBPoints`` is too outside PokerStars (they map to ``None``). With no results only
``Count`` and ``Entries`` are served.

Definitions: profit = prize - stake - rake; ROI of a tournament = profit * 100 / (stake + rake)
(freerolls are left out of averages of ROI); TotalROI = Profit * 100 / (Stake + Rake); Bankroll =
the deepest fall of cumulative profit from its running peak (starting at 0); Best/Worst100Streak
= the best/worst average profit over 100 consecutive games (over all games when fewer); days are
UTC days; a finish's "field beaten" is (entrants - position) / (entrants - 1); Finshes* bucket it
at 10/30/70/90 %; AvGameDuration is whole seconds; Entries = Count + the player's re-entries.
"""

from __future__ import annotations

import bisect
import calendar
import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tourneylake.sandbox.world import CURRENCY_BASE_RATES, Result, money

#: ``rate_on(currency, epoch second)``: units of the currency per USD on that second's UTC day.
RateOn = Callable[[str, int], float]

__all__ = [
    "ACHIEVEMENTS",
    "STATISTIC_IDS",
    "Summary",
    "compute_statistics",
    "profit_usd",
    "summarise",
]

STATISTIC_IDS: tuple[str, ...] = (
    "Count",
    "AvProfit",
    "AvStake",
    "AvROI",
    "Bankroll",
    "Profit",
    "Stake",
    "Cashes",
    "FirstGameDate",
    "LastGameDate",
    "MostGamesInDay",
    "AvGamesPerDay",
    "AvGameDuration",
    "ActiveDayCount",
    "TournamentWins",
    "Best100StreakAvProfit",
    "Worst100StreakAvProfit",
    "Rake",
    "TotalROI",
    "ITM",
    "AvEntrants",
    "TurboRatio",
    "PercentFieldBeaten",
    "FinshesEarly",
    "FinshesEarlyMiddle",
    "FinshesMiddle",
    "FinshesMiddleLate",
    "FinshesLate",
    "PTLBPoints",
    "Ability",
    "MaxWinningStreak",
    "MaxLosingStreak",
    "MaxCashingStreak",
    "WinningDays",
    "LosingDays",
    "BreakEvenDays",
    "AchievementPoints",
    "Entries",
)

#: (code, name, description, points) of the achievements the sandbox awards.
ACHIEVEMENTS: dict[str, tuple[str, str, int]] = {
    "1w": ("Winner", "Won a tournament", 1),
    "2d": ("Every Dollar Counts", "Won $10 in a tournament", 1),
    "2s": ("Pay dirt", "Total cashes of $100", 1),
    "6d": ("Cash flow", "Cashed in 20 tournaments in one month", 8),
    "8d": ("Cash machine", "Cashed in 5 successive scheduled tournaments", 12),
    "ah": ("Broke the bank", "Won $5000 in a tournament", 5),
}


def _m(x: float) -> str:
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


def _p(x: float) -> str:
    s = f"{x:.1f}"
    return "0.0" if s == "-0.0" else s


@dataclass
class Summary:
    """Everything a summary serves that depends on the results."""

    statistics: list[tuple[str, str | None]]
    datasets: list[tuple[str, list[tuple[str, list[tuple[str, str]]]]]] = field(default_factory=list)
    events: list[dict[str, str]] = field(default_factory=list)


class _Group:
    __slots__ = ("count", "profit", "rake", "roi_n", "roi_sum")

    def __init__(self) -> None:
        self.count = 0
        self.profit = 0.0
        self.roi_sum = 0.0
        self.roi_n = 0
        self.rake = 0.0

    def add(self, profit: float, roi: float | None, rake: float) -> None:
        self.count += 1
        self.profit += profit
        self.rake += rake
        if roi is not None:
            self.roi_sum += roi
            self.roi_n += 1

    def av_roi(self) -> str:
        return _p(self.roi_sum / self.roi_n) if self.roi_n else "0.0"


_ENTRANT_BUCKETS = (2, 6, 9, 18, 45, 100, 180, 500, 1000, 5000)


def profit_usd(results: Sequence[Result], rate_on: RateOn) -> float:
    """The unrounded total profit in USD."""
    total = 0.0
    for r in results:
        t = r.tournament.template
        total += (r.prize - t.stake - t.rake) / 100 / rate_on(t.currency, r.tournament.date)
    return total


def summarise(
    results: Sequence[Result],
    rate_on: RateOn,
    network: str,
) -> Summary:
    """Statistics, data sets and timeline events of ``results`` (oldest first)."""
    n = len(results)
    if n == 0:
        return Summary([("Count", "0"), ("Entries", "0")])
    pokerstars = network == "PokerStars"
    profits: list[float] = []
    stake_sum = rake_sum = cash_sum = 0.0
    roi_sum = 0.0
    roi_n = 0
    wins = cashes_n = turbo = 0
    entrants_sum = 0
    duration_sum = 0
    beaten_sum = 0.0
    buckets = [0, 0, 0, 0, 0]
    ptlb = 0.0
    multi = 0
    win_streak = lose_streak = cash_streak = 0
    max_win = max_lose = max_cash = 0
    days: dict[int, list[float]] = {}
    cum = peak = 0.0
    drawdown = 0.0
    by_stake: dict[tuple[str, int], _Group] = {}
    by_month: dict[int, _Group] = {}
    months: dict[int, int] = {}
    by_game: dict[tuple[str, str], _Group] = {}
    by_entrants: dict[int, _Group] = {}
    events: list[dict[str, str]] = []
    achieved: dict[str, int] = {}
    month_cashes: dict[int, int] = {}
    sched_cash_run = 0
    for r in results:
        t = r.tournament
        tp = t.template
        rate = rate_on(tp.currency, t.date)
        stake = tp.stake / 100 / rate
        rake = tp.rake / 100 / rate
        prize = r.prize / 100 / rate
        profit = prize - stake - rake
        profits.append(profit)
        stake_sum += stake
        rake_sum += rake
        cash_sum += prize
        cost = stake + rake
        roi = profit * 100 / cost if cost > 0 else None
        if roi is not None:
            roi_sum += roi
            roi_n += 1
        position = r.position
        entrants = t.entrants
        entrants_sum += entrants
        duration_sum += t.duration
        multi += r.multientries
        if tp.speed != "N":
            turbo += 1
        beaten = (entrants - position) / (entrants - 1) if entrants > 1 else 1.0
        beaten_sum += beaten
        buckets[0 if beaten < 0.1 else 1 if beaten < 0.3 else 2 if beaten < 0.7 else 3 if beaten < 0.9 else 4] += 1
        cashed = r.prize > 0
        if position == 1:
            wins += 1
            win_streak += 1
            max_win = max(max_win, win_streak)
        else:
            win_streak = 0
        if cashed:
            cashes_n += 1
            cash_streak += 1
            max_cash = max(max_cash, cash_streak)
            lose_streak = 0
            if pokerstars and cost > 0:
                ptlb += max(0.0, 10 * math.sqrt(entrants) / math.sqrt(position) * math.log10(cost + 1))
        else:
            cash_streak = 0
            lose_streak += 1
            max_lose = max(max_lose, lose_streak)
        day = t.date // 86_400
        bucket = days.get(day)
        if bucket is None:
            days[day] = [1, profit]
        else:
            bucket[0] += 1
            bucket[1] += profit
        cum += profit
        if cum > peak:
            peak = cum
        elif peak - cum > drawdown:
            drawdown = peak - cum
        skey = (tp.currency, tp.stake + tp.rake)
        group = by_stake.get(skey)
        if group is None:
            group = by_stake[skey] = _Group()
        group.add(profit, roi, rake)
        month = months.get(t.day)
        if month is None:
            month = months[t.day] = _month_start(t.date)
        group = by_month.get(month)
        if group is None:
            group = by_month[month] = _Group()
        group.add(profit, roi, rake)
        gkey = (tp.game, tp.structure)
        group = by_game.get(gkey)
        if group is None:
            group = by_game[gkey] = _Group()
        group.add(profit, roi, rake)
        eb = _ENTRANT_BUCKETS[max(0, bisect.bisect_right(_ENTRANT_BUCKETS, entrants) - 1)]
        group = by_entrants.get(eb)
        if group is None:
            group = by_entrants[eb] = _Group()
        group.add(profit, roi, rake)
        # achievements and prize events
        if cashed:
            month_cashes[month] = month_cashes.get(month, 0) + 1
            if month_cashes[month] >= 20:
                achieved.setdefault("6d", t.date)
            if prize >= 10:
                achieved.setdefault("2d", t.date)
            if prize >= 5000:
                achieved.setdefault("ah", t.date)
            if position == 1:
                achieved.setdefault("1w", t.date)
            if cash_sum >= 100:
                achieved.setdefault("2s", t.date)
            if position == 1 or r.prize >= 10 * (tp.stake + tp.rake):
                events.append(_prize_event(r, network))
        if tp.game_class == "scheduled":
            sched_cash_run = sched_cash_run + 1 if cashed else 0
            if sched_cash_run >= 5:
                achieved.setdefault("8d", t.date)

    window = min(100, n)
    acc = sum(profits[:window])
    best = worst = acc
    for i in range(window, n):
        acc += profits[i] - profits[i - window]
        if acc > best:
            best = acc
        if acc < worst:
            worst = acc
    total_profit = sum(profits)
    win_days = sum(1 for c, p in days.values() if p >= 0.005)
    lose_days = sum(1 for c, p in days.values() if p <= -0.005)
    active = len(days)
    points = sum(ACHIEVEMENTS[code][2] for code in achieved)
    stats = _stat_list(locals(), points)
    for code, when in achieved.items():
        events.append(_achievement_event(code, when, network, results[0].player))
    events.sort(key=lambda e: (int(e["date"]), e["id"]))
    events = events[-40:]
    datasets = [
        (
            "ByStake",
            [
                (
                    f"{cur}{money(cents)}",
                    [("Profit", _m(g.profit)), ("AvROI", g.av_roi()), ("Count", str(g.count)), ("Rake", _m(g.rake))],
                )
                # Bucket order (a sandbox decision): by the buy-in converted at the currencies'
                # fixed *base* rates (CURRENCY_BASE_RATES), ties by (currency, cents). A bucket
                # holds tournaments of many days, each converted at its own day's rates, so no
                # single daily rate could order it; the base rates keep the order close to USD
                # value yet the same on every serving day and for every selection of results.
                for (cur, cents), g in sorted(by_stake.items(), key=_stake_order)
            ],
        ),
        (
            "ByMonth",
            [
                (str(m), [("Count", str(g.count)), ("Profit", _m(g.profit)), ("AvROI", g.av_roi()), ("Rake", _m(g.rake))])
                for m, g in sorted(by_month.items())
            ],
        ),
        (
            "ByGameType",
            [
                (f"{k[0]}/{k[1]}", [("Count", str(g.count)), ("Profit", _m(g.profit)), ("AvROI", g.av_roi())])
                for k, g in sorted(by_game.items(), key=lambda kv: (-kv[1].count, kv[0]))
            ],
        ),
        (
            "ByEntrants",
            [
                (str(k), [("Count", str(g.count)), ("Profit", _m(g.profit)), ("AvROI", g.av_roi())])
                for k, g in sorted(by_entrants.items())
            ],
        ),
    ]
    return Summary(stats, datasets, events)


def _stake_order(item: tuple[tuple[str, int], _Group]) -> tuple[float, str, int]:
    """The ByStake sort key of a ((currency, buy-in cents), group) item (see :func:`summarise`)."""
    (currency, cents), _ = item
    return cents / CURRENCY_BASE_RATES[currency], currency, cents


def _stat_list(v: dict, achievement_points: int) -> list[tuple[str, str | None]]:
    n = len(v["profits"])
    results = v["results"]
    total_profit = v["total_profit"]
    cost = v["stake_sum"] + v["rake_sum"]
    active = v["active"]
    buckets = v["buckets"]
    window = v["window"]
    return [
        ("Count", str(n)),
        ("AvProfit", _m(total_profit / n)),
        ("AvStake", _m(v["stake_sum"] / n)),
        ("AvROI", _p(v["roi_sum"] / v["roi_n"]) if v["roi_n"] else "0.0"),
        ("Bankroll", _m(v["drawdown"])),
        ("Profit", _m(total_profit)),
        ("Stake", _m(v["stake_sum"])),
        ("Cashes", _m(v["cash_sum"])),
        ("FirstGameDate", str(results[0].tournament.date)),
        ("LastGameDate", str(results[-1].tournament.date)),
        ("MostGamesInDay", str(max(c for c, _ in v["days"].values()))),
        ("AvGamesPerDay", _p(n / active)),
        ("AvGameDuration", str(v["duration_sum"] // n)),
        ("ActiveDayCount", str(active)),
        ("TournamentWins", str(v["wins"])),
        ("Best100StreakAvProfit", _m(v["best"] / window)),
        ("Worst100StreakAvProfit", _m(v["worst"] / window)),
        ("Rake", _m(v["rake_sum"])),
        ("TotalROI", _p(total_profit * 100 / cost) if cost > 0 else "0.0"),
        ("ITM", _p(v["cashes_n"] * 100 / n)),
        ("AvEntrants", _p(v["entrants_sum"] / n)),
        ("TurboRatio", _p(v["turbo"] * 100 / n)),
        ("PercentFieldBeaten", _p(v["beaten_sum"] * 100 / n)),
        ("FinshesEarly", _p(buckets[0] * 100 / n)),
        ("FinshesEarlyMiddle", _p(buckets[1] * 100 / n)),
        ("FinshesMiddle", _p(buckets[2] * 100 / n)),
        ("FinshesMiddleLate", _p(buckets[3] * 100 / n)),
        ("FinshesLate", _p(buckets[4] * 100 / n)),
        ("PTLBPoints", str(round(v["ptlb"])) if v["pokerstars"] else None),
        ("Ability", None),
        ("MaxWinningStreak", str(v["max_win"])),
        ("MaxLosingStreak", str(v["max_lose"])),
        ("MaxCashingStreak", str(v["max_cash"])),
        ("WinningDays", str(v["win_days"])),
        ("LosingDays", str(v["lose_days"])),
        ("BreakEvenDays", str(active - v["win_days"] - v["lose_days"])),
        ("AchievementPoints", str(achievement_points)),
        ("Entries", str(n + v["multi"])),
    ]


def compute_statistics(results: Sequence[Result], rate_on: RateOn, network: str) -> dict[str, str | None]:
    """Statistic id → served value (``None`` = served ``authorized="false"``)."""
    return dict(summarise(results, rate_on, network).statistics)


def _month_start(ts: int) -> int:
    tm = time.gmtime(ts)
    return calendar.timegm((tm.tm_year, tm.tm_mon, 1, 0, 0, 0))


def _event_id(*parts: object) -> str:
    return hashlib.md5("|".join(map(str, parts)).encode(), usedforsecurity=False).hexdigest()


def _prize_event(r: Result, network: str) -> dict[str, str]:
    t = r.tournament
    return {
        "currency": t.template.currency,
        "gameID": str(t.id),
        "position": str(r.position),
        "prize": money(r.prize),
        "entrants": str(t.entrants),
        "tournamentName": t.template.name,
        "category": "Prize",
        "id": _event_id("prize", network, t.id, r.player),
        "isNegative": "false",
        "network": network,
        "player": r.player,
        "priority": "1" if r.position == 1 else "4",
        "date": str(t.date),
        "url": f"/poker-statistics/networks/{network}/tournaments/{t.id}",
    }


def _achievement_event(code: str, when: int, network: str, player: str) -> dict[str, str]:
    name, description, points = ACHIEVEMENTS[code]
    return {
        "code": code,
        "description": description,
        "name": name,
        "points": str(points),
        "category": "Achievement",
        "id": _event_id("achievement", network, player, code),
        "isNegative": "false",
        "network": network,
        "player": player,
        "priority": "1",
        "date": str(when),
        "url": f"/poker-statistics/achievements/{code}",
    }
