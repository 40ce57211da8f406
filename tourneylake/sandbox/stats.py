"""Player statistics computed from a list of results, exactly as the summary serves them.

:func:`summarise` reads the results (oldest first) into per-entry columns once (:class:`Entries`:
money in USD at the rates of each tournament's own UTC start day, so a past selection never
moves), then small accumulators each compute one group of statistics: totals, finishes, streaks,
days, swings, breakdowns (the data sets) and the timeline. The same code produces the served
values and :mod:`.truth`, so tests compare them exactly.

Conventions (the service's, docs/concepts/service.md): every value is a string; money in USD with 2 decimals,
percentages with 1, dates in epoch seconds; a tournament's profit is prize - stake - rake (a
player's re-entries are reported, not charged again); freerolls are left out of averages of ROI.
``Ability`` is always served ``authorized="false"``, and ``PTLBPoints`` too outside PokerStars
(both map to ``None``). With no results only ``Count`` and ``Entries`` are served. Sums of money
are :func:`math.fsum` (correctly rounded), so the served strings are the same on every Python.
"""

from __future__ import annotations

import bisect
import calendar
import hashlib
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate, groupby
from typing import Any

from tourneylake.sandbox.world import CURRENCY_BASE_RATES, Result, money

#: ``rate_on(currency, epoch second)``: units of the currency per USD on that second's UTC day.
RateOn = Callable[[str, int], float]
Values = dict[str, str | None]
DataSet = tuple[str, list[tuple[str, list[tuple[str, str]]]]]

__all__ = [
    "ACHIEVEMENTS",
    "STATISTIC_IDS",
    "Entries",
    "RateOn",
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

#: Lower bounds of the ByEntrants buckets (a field's size falls in the last bound it reaches).
_ENTRANT_BUCKETS = (2, 6, 9, 18, 45, 100, 180, 500, 1000, 5000)
#: Share of the field beaten that separates the Finshes* buckets (early ... late).
_FINISH_BOUNDS = (0.1, 0.3, 0.7, 0.9)
#: The timeline keeps the latest events only.
_TIMELINE_EVENTS = 40


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
    datasets: list[DataSet] = field(default_factory=list)
    events: list[dict[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class Entries:
    """The selected results (oldest first) and each one's money in USD, converted at the rates of
    the tournament's own UTC start day: the columns every accumulator reads."""

    results: Sequence[Result]
    stake: list[float]
    rake: list[float]
    prize: list[float]
    profit: list[float]
    #: profit * 100 / (stake + rake); ``None`` for a freeroll
    roi: list[float | None]

    @classmethod
    def of(cls, results: Sequence[Result], rate_on: RateOn) -> Entries:
        stake: list[float] = []
        rake: list[float] = []
        prize: list[float] = []
        for r in results:
            t = r.tournament
            tp = t.template
            rate = rate_on(tp.currency, t.date)
            stake.append(tp.stake / 100 / rate)
            rake.append(tp.rake / 100 / rate)
            prize.append(r.prize / 100 / rate)
        profit = [p - s - k for p, s, k in zip(prize, stake, rake, strict=True)]
        roi = [g * 100 / (s + k) if s + k > 0 else None for g, s, k in zip(profit, stake, rake, strict=True)]
        return cls(results, stake, rake, prize, profit, roi)


def profit_usd(results: Sequence[Result], rate_on: RateOn) -> float:
    """The unrounded total profit in USD (what ``Profit`` rounds)."""
    return math.fsum(Entries.of(results, rate_on).profit)


def summarise(results: Sequence[Result], rate_on: RateOn, network: str) -> Summary:
    """Statistics, data sets and timeline events of ``results`` (oldest first)."""
    if not results:
        return Summary([("Count", "0"), ("Entries", "0")])
    entries = Entries.of(results, rate_on)
    events, points = _timeline(entries, network)
    values: Values = {
        **_totals(entries),
        **_finishes(results),
        **_streaks(results),
        **_days(entries),
        **_swings(entries.profit),
        "PTLBPoints": _ptlb_points(entries) if network == "PokerStars" else None,
        "Ability": None,
        "AchievementPoints": str(points),
    }
    return Summary([(sid, values[sid]) for sid in STATISTIC_IDS], _breakdowns(entries), events)


def compute_statistics(results: Sequence[Result], rate_on: RateOn, network: str) -> dict[str, str | None]:
    """Statistic id → served value (``None`` = served ``authorized="false"``)."""
    return dict(summarise(results, rate_on, network).statistics)


# ----------------------------------------------------------------------------------- accumulators


def _totals(e: Entries) -> Values:
    """Volume, money and rates: TotalROI = Profit * 100 / (Stake + Rake); AvROI is the mean of the
    entries' ROI (freerolls left out); ITM the share of entries with a prize; Entries = Count +
    the player's re-entries; AvGameDuration in whole seconds."""
    results = e.results
    n = len(results)
    stake, rake, profit, cashes = math.fsum(e.stake), math.fsum(e.rake), math.fsum(e.profit), math.fsum(e.prize)
    rois = [roi for roi in e.roi if roi is not None]
    tournaments = [r.tournament for r in results]
    return {
        "Count": str(n),
        "AvProfit": _m(profit / n),
        "AvStake": _m(stake / n),
        "AvROI": _p(math.fsum(rois) / len(rois)) if rois else "0.0",
        "Profit": _m(profit),
        "Stake": _m(stake),
        "Cashes": _m(cashes),
        "FirstGameDate": str(tournaments[0].date),
        "LastGameDate": str(tournaments[-1].date),
        "AvGameDuration": str(sum(t.duration for t in tournaments) // n),
        "TournamentWins": str(sum(1 for r in results if r.position == 1)),
        "Rake": _m(rake),
        "TotalROI": _p(profit * 100 / (stake + rake)) if stake + rake > 0 else "0.0",
        "ITM": _p(sum(1 for r in results if r.prize > 0) * 100 / n),
        "AvEntrants": _p(sum(t.entrants for t in tournaments) / n),
        "TurboRatio": _p(sum(1 for t in tournaments if t.template.speed != "N") * 100 / n),
        "Entries": str(n + sum(r.multientries for r in results)),
    }


def _finishes(results: Sequence[Result]) -> Values:
    """Where the player finished: the share of the field beaten, (entrants - position) /
    (entrants - 1), on average and bucketed at 10/30/70/90 % (early to late)."""
    n = len(results)
    beaten = [
        (r.tournament.entrants - r.position) / (r.tournament.entrants - 1) if r.tournament.entrants > 1 else 1.0 for r in results
    ]
    buckets = [0] * (len(_FINISH_BOUNDS) + 1)
    for share in beaten:
        buckets[bisect.bisect_right(_FINISH_BOUNDS, share)] += 1
    names = ("FinshesEarly", "FinshesEarlyMiddle", "FinshesMiddle", "FinshesMiddleLate", "FinshesLate")
    values: Values = {"PercentFieldBeaten": _p(math.fsum(beaten) * 100 / n)}
    values.update((name, _p(count * 100 / n)) for name, count in zip(names, buckets, strict=True))
    return values


def _longest_run(flags: Sequence[bool], value: bool) -> int:
    return max((sum(1 for _ in run) for flag, run in groupby(flags) if flag is value), default=0)


def _streaks(results: Sequence[Result]) -> Values:
    """The longest runs of wins, of cashes, and of entries without a prize."""
    cashed = [r.prize > 0 for r in results]
    return {
        "MaxWinningStreak": str(_longest_run([r.position == 1 for r in results], True)),
        "MaxLosingStreak": str(_longest_run(cashed, False)),
        "MaxCashingStreak": str(_longest_run(cashed, True)),
    }


def _days(e: Entries) -> Values:
    """Per UTC day of play: how many days, the busiest, and the days won, lost or broken even
    (a day's profit within half a cent of zero)."""
    days: dict[int, list[float]] = {}
    for r, profit in zip(e.results, e.profit, strict=True):
        day = days.setdefault(r.tournament.date // 86_400, [])
        day.append(profit)
    active = len(days)
    totals = [math.fsum(profits) for profits in days.values()]
    won = sum(1 for p in totals if p >= 0.005)
    lost = sum(1 for p in totals if p <= -0.005)
    return {
        "MostGamesInDay": str(max(len(profits) for profits in days.values())),
        "AvGamesPerDay": _p(len(e.results) / active),
        "ActiveDayCount": str(active),
        "WinningDays": str(won),
        "LosingDays": str(lost),
        "BreakEvenDays": str(active - won - lost),
    }


def _swings(profit: list[float]) -> Values:
    """Bankroll: the deepest fall of cumulative profit below its running peak (which starts at 0);
    Best/Worst100Streak: the best/worst average profit over 100 consecutive entries (over all of
    them when fewer)."""
    cumulative = list(accumulate(profit))
    peaks = accumulate(cumulative, max, initial=0.0)
    next(peaks)
    drawdown = max(0.0, max(peak - cum for peak, cum in zip(peaks, cumulative, strict=True)))
    window = min(100, len(profit))
    best = worst = acc = math.fsum(profit[:window])
    for i in range(window, len(profit)):
        acc += profit[i] - profit[i - window]
        best = max(best, acc)
        worst = min(worst, acc)
    return {
        "Bankroll": _m(drawdown),
        "Best100StreakAvProfit": _m(best / window),
        "Worst100StreakAvProfit": _m(worst / window),
    }


def _ptlb_points(e: Entries) -> str:
    """PokerStars leaderboard points (a sandbox formula): per paid buy-in tournament cashed,
    10 * sqrt(entrants / position) * log10(buy-in in USD + 1)."""
    points = [
        10 * math.sqrt(r.tournament.entrants) / math.sqrt(r.position) * math.log10(s + k + 1)
        for r, s, k in zip(e.results, e.stake, e.rake, strict=True)
        if r.prize > 0 and s + k > 0
    ]
    return str(round(math.fsum(points)))


Rows = dict[Any, list[int]]


def _rows_by(keys: Iterable[Any]) -> Rows:
    """The positions of the entries grouped by their key (in order of first appearance)."""
    rows: Rows = {}
    for i, key in enumerate(keys):
        row = rows.get(key)
        if row is None:
            rows[key] = [i]
        else:
            row.append(i)
    return rows


def _merged(rows: Rows, key_of: Callable[[Any], Any]) -> Rows:
    """Rows merged by a coarser key of theirs (a row's order does not matter: sums are fsum)."""
    out: Rows = {}
    for key, positions in rows.items():
        out.setdefault(key_of(key), []).extend(positions)
    return out


def _breakdowns(e: Entries) -> list[DataSet]:
    """The data sets: by buy-in (ordered by its value at the currencies' fixed base rates, so
    the order is the same on every serving day), by month, by game type and by field size.
    Entries are grouped by template, day and field size first, then those rows merged."""
    tournaments = [r.tournament for r in e.results]
    by_template = _rows_by(id(t.template) for t in tournaments)
    template = {key: tournaments[positions[0]].template for key, positions in by_template.items()}
    by_stake = _merged(by_template, lambda key: (template[key].currency, template[key].buy_in))
    by_game = _merged(by_template, lambda key: template[key].game_type)
    by_day = _rows_by(t.day for t in tournaments)
    by_month = _merged(by_day, lambda day: _month_start(tournaments[by_day[day][0]].date // 86_400))
    by_entrants = _merged(_rows_by(t.entrants for t in tournaments), _entrants_bucket)

    def ys(positions: list[int], *ids: str) -> list[tuple[str, str]]:
        rois = [roi for roi in (e.roi[i] for i in positions) if roi is not None]
        value = {
            "Count": lambda: str(len(positions)),
            "Profit": lambda: _m(math.fsum([e.profit[i] for i in positions])),
            "AvROI": lambda: _p(math.fsum(rois) / len(rois)) if rois else "0.0",
            "Rake": lambda: _m(math.fsum([e.rake[i] for i in positions])),
        }
        return [(y, value[y]()) for y in ids]

    return [
        (
            "ByStake",
            [(f"{c}{money(cents)}", ys(rows, "Profit", "AvROI", "Count", "Rake")) for (c, cents), rows in _by_value(by_stake)],
        ),
        ("ByMonth", [(str(m), ys(rows, "Count", "Profit", "AvROI", "Rake")) for m, rows in sorted(by_month.items())]),
        ("ByGameType", [(k, ys(rows, "Count", "Profit", "AvROI")) for k, rows in sorted(by_game.items(), key=_most_played)]),
        ("ByEntrants", [(str(k), ys(rows, "Count", "Profit", "AvROI")) for k, rows in sorted(by_entrants.items())]),
    ]


def _entrants_bucket(entrants: int) -> int:
    return _ENTRANT_BUCKETS[max(0, bisect.bisect_right(_ENTRANT_BUCKETS, entrants) - 1)]


def _by_value(by_stake: Rows) -> list[tuple[tuple[str, int], list[int]]]:
    """ByStake rows ordered by the buy-in at the fixed base rates, ties by (currency, cents): a
    row holds tournaments of many days, so no single day's rate could order it."""
    return sorted(by_stake.items(), key=lambda item: (item[0][1] / CURRENCY_BASE_RATES[item[0][0]], *item[0]))


def _most_played(item: tuple[str, list[int]]) -> tuple[int, str]:
    return -len(item[1]), item[0]


def _timeline(e: Entries, network: str) -> tuple[list[dict[str, str]], int]:
    """Prize events (a win, or a prize of 10 buy-ins or more) and achievements (each the first
    time it is earned), the latest :data:`_TIMELINE_EVENTS`; and the achievement points."""
    achieved: dict[str, int] = {}
    events: list[dict[str, str]] = []
    month_cashes: dict[int, int] = {}
    cashed_usd = 0.0
    scheduled_cash_run = 0
    for r, prize in zip(e.results, e.prize, strict=True):
        t = r.tournament
        tp = t.template
        cashed = r.prize > 0
        if tp.game_class == "scheduled":
            scheduled_cash_run = scheduled_cash_run + 1 if cashed else 0
        if not cashed:
            continue
        cashed_usd += prize
        month = _month_start(t.date // 86_400)
        month_cashes[month] = month_cashes.get(month, 0) + 1
        earned = (
            ("6d", month_cashes[month] >= 20),
            ("2d", prize >= 10),
            ("ah", prize >= 5000),
            ("1w", r.position == 1),
            ("2s", cashed_usd >= 100),
            ("8d", scheduled_cash_run >= 5),
        )
        for code, done in earned:
            if done:
                achieved.setdefault(code, t.date)
        if r.position == 1 or r.prize >= 10 * tp.buy_in:
            events.append(_prize_event(r, network))
    player = e.results[0].player
    events += [_achievement_event(code, when, network, player) for code, when in achieved.items()]
    events.sort(key=lambda event: (int(event["date"]), event["id"]))
    return events[-_TIMELINE_EVENTS:], sum(ACHIEVEMENTS[code][2] for code in achieved)


# ----------------------------------------------------------------------------------- pieces


@lru_cache(maxsize=16_384)
def _month_start(unix_day: int) -> int:
    """Epoch seconds of 00:00 UTC on the first of the month of a day (days since 1970)."""
    tm = time.gmtime(unix_day * 86_400)
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
