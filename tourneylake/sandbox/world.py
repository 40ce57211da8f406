"""The sandbox's synthetic poker world: a seed, a clock, daily currency rates, and the lazy caches
of its players' histories.

Everything is a pure function of the seed, so the same seed gives the same world whichever order
it is asked in, and nothing is generated until it is asked for (``players=100000`` is free until
a roster or a history is requested). The tournaments are in :mod:`.tournaments`, the players and
how they play in :mod:`.players`; this module holds them together.

USD amounts are ``amount / rate`` with the rate (units per 1 USD) of **the tournament's own UTC
start day** (:meth:`World.rate_on`), including the currency whose rate metadata does not publish
(the world still knows it): a sandbox decision, a guess about the real service, made so that a
summary of past tournaments (an absolute ``Date:<start>~<end>`` filter) is the same whichever
day it is served on. Only metadata publishes the *serving* day's rates (its hash changes daily).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from tourneylake.sandbox.hashing import unit
from tourneylake.sandbox.players import FIXED_PLAYERS, Player, identity, make_player, play_year
from tourneylake.sandbox.tournaments import (
    DAY,
    EPOCH_DATE,
    NETWORKS,
    NetworkProfile,
    Result,
    Template,
    Tournament,
    day_start,
    make_templates,
    make_tournament,
    money,
    tournament_id,
)

__all__ = [
    "CURRENCY_BASE_RATES",
    "NETWORKS",
    "RATES_CACHE_DAYS",
    "UNPUBLISHED_RATE_CURRENCIES",
    "NetworkProfile",
    "Player",
    "Result",
    "Template",
    "Tournament",
    "World",
    "day_start",
    "money",
]

UNIX_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()

#: Days of rates :class:`World` keeps (an LRU): ~22 years, more than any history spans.
RATES_CACHE_DAYS = 8192
#: Tournament instances :class:`World` keeps before starting its cache afresh.
TOURNAMENT_CACHE = 500_000
#: (player, year) blocks of games :class:`World` keeps (an LRU).
YEAR_CACHE = 100_000

#: Units of each currency per 1 USD around which the daily rates drift.
CURRENCY_BASE_RATES: dict[str, float] = {
    "USD": 1.0,
    "GBP": 0.79,
    "EUR": 0.92,
    "SEK": 10.6,
    "CAD": 1.36,
    "AUD": 1.52,
    "GEL": 2.7,
    "RUB": 91.0,
    "INR": 83.2,
    "IDR": 15600.0,
    "BRL": 5.05,
    "ARS": 870.0,
    "UAH": 39.5,
    "CNY": 7.21,
}
#: Currencies whose rate metadata omits (unknown "today"); the world still converts with its own.
UNPUBLISHED_RATE_CURRENCIES = frozenset({"CNY"})
_NETWORK_BY_NAME = {n.name: n for n in NETWORKS}


class World:
    """A deterministic synthetic world.

    ``seed`` fixes everything; ``players`` is the roster size; ``today`` is the simulated day
    (``None`` = follow the real UTC date); ``time_of_day`` (seconds after midnight), when set,
    pins response timestamps to that time of the simulated day so bodies are byte-identical
    between runs (otherwise timestamps follow the real clock's time of day). ``history_cache``
    is how many (player, day) histories are kept; ``rates_cache`` how many days of rates (an
    LRU; the default holds every day of the world's history many times over).
    """

    def __init__(
        self,
        seed: int = 0,
        players: int = 200,
        today: date | None = None,
        *,
        time_of_day: int | None = None,
        history_cache: int = 8192,
        rates_cache: int = RATES_CACHE_DAYS,
    ) -> None:
        self.seed = int(seed)
        self.players = max(int(players), 0)
        self._today = today
        self.time_of_day = time_of_day
        self._lock = threading.RLock()
        self._templates: dict[int, list[Template]] = {}
        self._tournaments: dict[int, Tournament] = {}
        self._player_cache: dict[int, Player] = {}
        self._years: OrderedDict[tuple[int, int], tuple[int, list[Result]]] = OrderedDict()
        self._histories: OrderedDict[tuple[int, int], list[Result]] = OrderedDict()
        self._history_cache = history_cache
        self._index: dict[tuple[str, str], int] | None = None
        # The rates of a day by its ordinal: an LRU (functools' C implementation: thread-safe, and
        # a hit costs a dict lookup) big enough to hold every day of a multi-year history, so
        # converting each tournament at its own day's rates never thrashes. A rare double
        # computation by two threads is harmless: the rates are a pure function of (seed, day).
        self._day_rates = lru_cache(maxsize=max(int(rates_cache), 1))(self._make_day_rates)
        self._fixed_index = {key: i for i, key in enumerate(FIXED_PLAYERS[: self.players])}

    # ------------------------------------------------------------------------------- clock

    @property
    def today(self) -> date:
        """The simulated day (the real UTC date unless set)."""
        return self._today if self._today is not None else datetime.now(UTC).date()

    def set_today(self, today: date | str | None) -> None:
        """Move the simulated clock (``None`` follows the real date again)."""
        if isinstance(today, str):
            today = date.fromisoformat(today)
        self._today = today

    def advance(self, days: int = 1) -> date:
        """Move the clock ``days`` forward and return the new day."""
        self._today = self.today + timedelta(days=days)
        return self._today

    def day_end(self, today: date | None = None) -> int:
        """Epoch seconds of the midnight that ends ``today``: the reference "now" of relative
        date filters, and the (exclusive) end of the history served that day."""
        return day_start(today or self.today) + DAY

    def timestamp(self) -> int:
        """The response timestamp: the simulated day at the real (or pinned) time of day."""
        if self.time_of_day is not None:
            return day_start(self.today) + int(self.time_of_day)
        if self._today is None:
            return int(time.time())
        return day_start(self._today) + int(time.time()) % DAY

    # ------------------------------------------------------------------------------- rates

    def rates(self, today: date | None = None) -> dict[str, float]:
        """Every currency's rate (units per 1 USD) on a day (the serving day by default),
        including unpublished ones.

        Each rate is rounded to 6 significant digits, so the published string and the number
        the world converts with are the same value. A tournament's money is converted with the
        rates of its own UTC start day, ``rates(<that day>)`` (see :meth:`rate_on`).
        """
        return dict(self._day_rates((today or self.today).toordinal()))

    def rate_on(self, currency: str, when: int) -> float:
        """``currency``'s rate on the UTC day of the epoch second ``when`` — the same number as
        ``rates(<that UTC date>)[currency]``. Every money conversion of a tournament result uses
        it with the tournament's start, so a summary of past tournaments does not change as the
        days (and the published rates) go by."""
        return self._day_rates(UNIX_EPOCH_ORDINAL + when // DAY)[currency]

    def rates_cache_info(self) -> tuple[int, int, int | None, int]:
        """``(hits, misses, maxsize, currsize)`` of the per-day rates cache (an LRU)."""
        return self._day_rates.cache_info()

    def _make_day_rates(self, d: int) -> dict[str, float]:
        """The rates of the day with ordinal ``d`` (cached by :attr:`_day_rates`; never mutate)."""
        out: dict[str, float] = {}
        for i, (iso, base) in enumerate(CURRENCY_BASE_RATES.items()):
            if iso == "USD":
                out[iso] = 1.0
                continue
            wave = 0.03 * math.sin(2 * math.pi * d / (60 + 7 * i) + i)
            noise = 0.006 * (unit(self.seed, 3, i, d) - 0.5)
            out[iso] = float(f"{base * (1 + wave + noise):.6g}")
        return out

    def published_rates(self, today: date | None = None) -> dict[str, str | None]:
        """The ``@rate`` strings metadata publishes on a day (``None`` = omitted)."""
        return {iso: (None if iso in UNPUBLISHED_RATE_CURRENCIES else f"{rate:.6g}") for iso, rate in self.rates(today).items()}

    # ------------------------------------------------------------------------------- networks

    @property
    def network_names(self) -> list[str]:
        return [n.name for n in NETWORKS]

    def templates(self, network: int) -> list[Template]:
        """The recurring tournaments of a network (generated once)."""
        found = self._templates.get(network)
        if found is None:
            with self._lock:
                found = self._templates.get(network)
                if found is None:
                    found = self._templates[network] = make_templates(self.seed, NETWORKS[network])
        return found

    def tournament(self, network: int, day: int, template_index: int, run: int) -> Tournament:
        """The tournament instance (network, day, template, run); ids encode exactly that."""
        tid = tournament_id(network, day, template_index, run)
        found = self._tournaments.get(tid)
        if found is None:
            found = make_tournament(self.seed, network, self.templates(network)[template_index], day, run)
            if len(self._tournaments) >= TOURNAMENT_CACHE:
                self._tournaments.clear()
            self._tournaments[tid] = found
        return found

    # ------------------------------------------------------------------------------- roster

    def roster(self, limit: int | None = None) -> list[tuple[str, str]]:
        """Every player as (network, name), in a stable order (the first ``limit`` if given)."""
        count = self.players if limit is None else min(limit, self.players)
        return [identity(self.seed, i) for i in range(count)]

    def find(self, network: str, name: str) -> int | None:
        """The roster index of a player, or ``None``."""
        key = (network, name)
        if key in self._fixed_index:
            return self._fixed_index[key]
        if network not in _NETWORK_BY_NAME:
            return None
        if self._index is None:
            with self._lock:
                if self._index is None:
                    self._index = {identity(self.seed, i): i for i in range(self.players)}
        return self._index.get(key)

    def player(self, network: str, name: str) -> Player | None:
        """The player's traits, or ``None`` for a name not on that network."""
        index = self.find(network, name)
        return None if index is None else self.player_at(index)

    def player_at(self, index: int) -> Player:
        found = self._player_cache.get(index)
        if found is None:
            network, _ = identity(self.seed, index)
            found = make_player(self.seed, index, self.templates(_NETWORK_BY_NAME[network].index))
            self._player_cache[index] = found
        return found

    # ------------------------------------------------------------------------------- histories

    def _year(self, player: Player, year: int, months: int = 12) -> list[Result]:
        """The player's games in the first ``months`` months of a calendar year (a year's first
        months are generated alone, and again with the next when the clock reaches it)."""
        key = (player.index, year)
        found = self._years.get(key)
        if found is None or found[0] < months:
            templates = self.templates(player.network_index)
            found = self._years[key] = (months, play_year(self.seed, player, year, templates, self.tournament, months))
            if len(self._years) > YEAR_CACHE:
                self._years.popitem(last=False)
        return found[1]

    def history(self, player: Player, today: date | None = None) -> list[Result]:
        """Every result of the player dated up to the end of ``today`` (oldest first)."""
        today = today or self.today
        key = (player.index, today.toordinal())
        found = self._histories.get(key)
        if found is not None:
            self._histories.move_to_end(key)
            return found
        end = self.day_end(today)
        start = EPOCH_DATE + timedelta(days=player.start_day)
        out: list[Result] = []
        for year in range(start.year, today.year + 1):
            if year == today.year:
                block = self._year(player, year, today.month)
                out.extend(r for r in block if r.tournament.date < end)
            else:
                out.extend(self._year(player, year))
        with self._lock:
            self._histories[key] = out
            if len(self._histories) > self._history_cache:
                self._histories.popitem(last=False)
        return out
