"""The sandbox's synthetic poker world: networks, players, tournaments, results and rates.

Everything is a pure function of the seed, so the same seed gives the same world whichever order
it is asked in, and nothing is generated until it is asked for (``players=100000`` is free until
a roster or a history is requested).

How a history is made (and why):

- Each network runs a fixed catalogue of recurring **templates** (a "$3.50 NL Hold'em
  [18 Players, Turbo]" sit'n'go that starts several times a day, a nightly scheduled
  tournament...), like real sites. A tournament instance is (network, day, template, run); its id
  encodes exactly that, and its attributes are derived from the id by hashing. So players who
  pick the same template on the same day often meet in the *same* tournament: tournaments are
  shared, as the warehouse expects (it dedups on (network, id)).
- A player's games are generated a year at a time (one ``random.Random`` per player and year),
  choosing days, templates they like (by stake tier and sit'n'go/scheduled taste) and runs.
  Years never change once generated, and the history served on a day is every game dated up
  to the end of that day: the history grows with :attr:`World.today`, deterministically.
- Finishing positions come from the player's skill; prizes from the tournament's payout table.
  Two players may occasionally share a position in one tournament (the sandbox does not solve
  seat assignment); it does not affect any per-player number.

Money is kept in integer cents of the tournament's currency. A player's profit in a tournament is
``prize - stake - rake`` (multi-entries are reported but not charged again). USD amounts are
``amount / rate`` with the rate (units per 1 USD) of **the tournament's own UTC start day**
(:meth:`World.rate_on`, the same numbers as ``World.rates(<that day>)``), including the currency
whose rate metadata does not publish (the world still knows it). This is a sandbox decision — a
guess about the real service — made so that history does not move: a summary of past
tournaments (an as-of request with an absolute ``Date:<start>~<end>`` filter) is the same
whichever day it is served on. Only metadata publishes the *serving* day's rates (its hash
changes daily).
"""

from __future__ import annotations

import bisect
import calendar
import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from tourneylake.sandbox.hashing import mix, unit

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

DAY = 86_400
#: Day 0 of the world; tournament ids count days from here.
EPOCH_DATE = date(2018, 1, 1)
UNIX_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
EPOCH = calendar.timegm(EPOCH_DATE.timetuple())
#: Players start playing between these dates (inclusive start, exclusive end).
FIRST_START = date(2019, 1, 1)
LAST_START = date(2025, 7, 1)

#: Days of rates :class:`World` keeps (an LRU): ~22 years, more than any history spans.
RATES_CACHE_DAYS = 8192

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
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CAD": "C$", "CNY": "¥"}

# Total buy-ins (stake + rake) in currency units, the stake tiers of the world.
BUY_INS = (0.0, 0.5, 1.0, 1.5, 3.5, 5.5, 7.5, 11.0, 22.0, 33.0, 55.0, 109.0, 215.0)


@dataclass(frozen=True, slots=True)
class NetworkProfile:
    """A network of the world: its metadata name, currencies and share of the roster."""

    name: str
    index: int
    currencies: tuple[tuple[str, float], ...]
    weight: float
    country_pool: tuple[str, ...]


NETWORKS: tuple[NetworkProfile, ...] = tuple(
    NetworkProfile(name, i, cur, w, countries)
    for i, (name, cur, w, countries) in enumerate(
        [
            ("PokerStars", (("USD", 0.85), ("EUR", 0.15)), 3.0, ("HU", "DE", "GB", "BR", "CA", "SE")),
            ("GGNetwork", (("USD", 0.8), ("CNY", 0.2)), 2.0, ("CN", "RU", "UA", "DE", "PL")),
            ("888Poker", (("USD", 1.0),), 1.0, ("GB", "DE", "CA", "AR")),
            ("888Poker(ES-PT)", (("EUR", 1.0),), 1.0, ("ES", "PT")),
            ("iPoker", (("EUR", 0.6), ("GBP", 0.4)), 1.0, ("GB", "IE", "NL", "PL")),
            ("PartyPoker", (("USD", 0.7), ("GBP", 0.3)), 1.0, ("GB", "DE", "AT")),
            ("WPN", (("USD", 1.0),), 1.0, ("US", "CA", "MX")),
            ("Winamax.fr", (("EUR", 1.0),), 1.0, ("FR", "BE")),
            ("Gioco Online Italia", (("EUR", 1.0),), 0.5, ("IT",)),
            ("Global Poker", (("USD", 0.5), ("CAD", 0.5)), 0.5, ("CA", "US")),
        ]
    )
)
_NETWORK_BY_NAME = {n.name: n for n in NETWORKS}

#: Fixed, readable players at the head of every roster (names with spaces, dots, non-ASCII).
FIXED_PLAYERS: tuple[tuple[str, str], ...] = (
    ("PokerStars", "Borbas.Geri"),
    ("GGNetwork", "José María"),
    ("888Poker(ES-PT)", "Ana Łukasz"),
    ("iPoker", "Zoë O'Brien"),
    ("PokerStars", "Dmitrij Šimek"),
    ("Winamax.fr", "Élodie.R"),
    ("PartyPoker", "mr. Müller"),
    ("WPN", "Søren K"),
    ("Gioco Online Italia", "Luca Bianchi"),
    ("Global Poker", "Chloé Dupont"),
    ("888Poker", "big.fish (2)"),
    ("GGNetwork", "王小明"),
)

_FIRST = (
    "José",
    "Ana",
    "Zoë",
    "Luca",
    "Chloé",
    "Søren",
    "Élodie",
    "Dmitrij",
    "Mária",
    "Björn",
    "Ines",
    "Jürgen",
    "Paweł",
    "Noémi",
    "Tomás",
    "Aurélie",
    "Mikkel",
    "Giulia",
    "Henrik",
    "Lucía",
    "Ondřej",
    "Kai",
    "Fatima",
    "Ólafur",
    "Renée",
    "Marek",
    "Sofía",
    "Yuki",
    "Ærin",
    "Grzegorz",
)
_LAST = (
    "García",
    "Łukasz",
    "Müller",
    "Dupont",
    "Novák",
    "Smith",
    "Rossi",
    "Şahin",
    "Nørgaard",
    "Kovács",
    "Silva",
    "O'Neil",
    "Horváth",
    "Lindqvist",
    "Fernández",
    "Dubois",
    "Schröder",
    "Nakamura",
    "Byrne",
    "Petrović",
    "Costa",
    "Jansen",
    "Ivanov",
    "Ferreira",
    "Wójcik",
    "Mäkinen",
    "Ortega",
    "Blažek",
    "Hughes",
    "Zieliński",
)
_STYLES = ("{f} {l}", "{f}.{l}", "{l}.{f}", "{f}_{l}", "{f} {l}.", "{f}{l}")


def day_start(d: date) -> int:
    """Epoch seconds of 00:00 UTC on ``d``."""
    return calendar.timegm(d.timetuple())


def money(cents: int) -> str:
    """Cents as the service writes money: ``"1.32"``, ``"-0.05"``."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


@dataclass(frozen=True, slots=True)
class Template:
    """A recurring tournament of one network (what its instances share)."""

    network: int
    index: int
    name: str
    currency: str
    stake: int  # cents
    rake: int  # cents
    tier: int
    game: str  # Type option of category Game: H, O, OHL
    structure: str  # NL, PL, FL
    game_class: str  # "sng" | "scheduled"
    speed: str  # N, T, ST
    formats: tuple[str, ...]  # B, K, SAT, R, SO, ME, HU, 6MX
    players_per_table: int
    entrants: int  # exact for a sit'n'go, typical for a scheduled tournament
    runs: int  # instances a day
    second_of_day: int
    guarantee: int  # cents, 0 for none
    re_entry: bool

    @property
    def buy_in(self) -> int:
        """stake + rake, in cents."""
        return self.stake + self.rake

    @property
    def game_type(self) -> str:
        """The ByGameType key, e.g. ``H/NL``."""
        return f"{self.game}/{self.structure}"


@dataclass(slots=True)
class Tournament:
    """One tournament instance, identical for every player who played it."""

    network: str
    id: int
    day: int
    template: Template
    date: int
    duration: int
    entrants: int
    re_entries: int
    prize_pool: int  # cents
    overlay: int  # cents
    paid: int
    difficulty: str  # Easy, Neutral, Hard
    deal_made: bool
    flags: str
    type_ids: frozenset[str]

    @property
    def currency(self) -> str:
        return self.template.currency

    @property
    def stake(self) -> int:
        return self.template.stake

    @property
    def rake(self) -> int:
        return self.template.rake

    def prize_for(self, position: int) -> int:
        """The prize in cents for a finishing position (0 when out of the money)."""
        if position > self.paid:
            return 0
        if "SAT" in self.template.formats:
            return self.prize_pool // self.paid
        return round(self.prize_pool * _payout_weight(position) / _payout_total(self.paid))


_PAYOUT_TOTALS: list[float] = [0.0]
_SPEED_FACTOR = {"N": 1.0, "T": 0.65, "ST": 0.4}
_SNG_DURATION = {2: 900, 6: 1800, 9: 2700, 18: 3900, 45: 5400, 180: 9000}
_FLAG_CACHE: dict[tuple[str, str, str, tuple[str, ...], str, bool], tuple[str, frozenset[str]]] = {}


def _flags(t: Template, difficulty: str, deal_made: bool) -> tuple[str, frozenset[str]]:
    """The ``@flags`` string and the ``Type`` ids of an instance (cached per template)."""
    key = (t.game, t.structure, t.speed, t.formats, difficulty, deal_made)
    found = _FLAG_CACHE.get(key)
    if found is None:
        flag_list = [f for f in t.formats if f in ("B", "K", "SAT")]
        if t.speed != "N":
            flag_list.append(t.speed)
        flag_list += [f for f in t.formats if f in ("R", "SO", "ME", "HU", "6MX")]
        if deal_made:
            flag_list.append("DM")
        ids = frozenset([t.game, t.structure, t.speed, difficulty, *t.formats] + (["DM"] if deal_made else []))
        found = _FLAG_CACHE[key] = (",".join(flag_list), ids)
    return found


def _payout_weight(position: int) -> float:
    return 1.0 / position**1.15


def _payout_total(paid: int) -> float:
    totals = _PAYOUT_TOTALS
    while len(totals) <= paid:
        totals.append(totals[-1] + _payout_weight(len(totals)))
    return totals[paid]


@dataclass(slots=True)
class Result:
    """One player's result in one tournament."""

    tournament: Tournament
    player: str
    position: int
    prize: int  # cents, 0 when not in the money
    multientries: int  # the player's own re-entries (0 for none)

    @property
    def date(self) -> int:
        return self.tournament.date

    @property
    def profit(self) -> int:
        """prize - stake - rake, in cents of the tournament currency."""
        t = self.tournament.template
        return self.prize - t.stake - t.rake


@dataclass(slots=True)
class Player:
    """A player's fixed traits (everything else is derived from them and the seed)."""

    index: int
    network: str
    name: str
    country: str
    skill: float
    start_day: int
    games_per_month: float
    template_ids: list[int]
    template_cum: list[float]


_INV53 = 1.0 / (1 << 53)


def _days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


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
        self._months: OrderedDict[tuple[int, int], list[Result]] = OrderedDict()
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
                    found = self._make_templates(NETWORKS[network])
                    self._templates[network] = found
        return found

    def _make_templates(self, net: NetworkProfile) -> list[Template]:
        rng = random.Random(mix(self.seed, 5, net.index))
        currencies = [c for c, _ in net.currencies]
        cweights = [w for _, w in net.currencies]
        out: list[Template] = []
        for index in range(28):
            currency = rng.choices(currencies, cweights)[0]
            sng = index < 18
            tier = rng.choice(range(1, 9) if sng else range(len(BUY_INS)))
            if not sng and tier == 0 and rng.random() < 0.5:
                tier = 2
            buy_in = round(BUY_INS[tier] * 100)
            rake = round(buy_in * (0.09 if buy_in < 1000 else 0.08))
            stake = buy_in - rake
            g = rng.random()
            game, structure = ("H", "NL") if g < 0.8 else ("O", "PL") if g < 0.93 else ("OHL", "PL") if g < 0.97 else ("H", "FL")
            s = rng.random()
            speed = "N" if s < 0.5 else "T" if s < 0.85 else "ST"
            formats: list[str] = []
            if sng:
                entrants = rng.choice((2, 6, 9, 9, 9, 18, 18, 45, 180))
                players_per_table = 2 if entrants == 2 else 6 if entrants == 6 else 9
                if entrants == 2:
                    formats.append("HU")
                elif entrants == 6:
                    formats.append("6MX")
                runs = rng.randint(1, 3)
                guarantee = 0
                re_entry = False
            else:
                entrants = int(math.exp(rng.uniform(math.log(40), math.log(4000))))
                players_per_table = 6 if rng.random() < 0.2 else 9
                if players_per_table == 6:
                    formats.append("6MX")
                runs = 1
                guarantee = 0
                if rng.random() < 0.6 and buy_in:
                    guarantee = int(entrants * stake * rng.uniform(0.6, 1.1)) // 10000 * 10000
                re_entry = rng.random() < 0.35
                if re_entry:
                    formats.append("ME")
                if rng.random() < 0.2:
                    formats.append("R")
                if rng.random() < 0.1:
                    formats.append("SAT")
            if rng.random() < 0.2:
                formats.append("B" if rng.random() < 0.5 else "K")
            if rng.random() < 0.05:
                formats.append("SO")
            second_of_day = rng.randrange(0, DAY // 3600) * 3600
            out.append(
                Template(
                    network=net.index,
                    index=index,
                    name=self._template_name(currency, buy_in, game, structure, speed, sng, entrants, guarantee, formats, rng),
                    currency=currency,
                    stake=stake,
                    rake=rake,
                    tier=tier,
                    game=game,
                    structure=structure,
                    game_class="sng" if sng else "scheduled",
                    speed=speed,
                    formats=tuple(formats),
                    players_per_table=players_per_table,
                    entrants=entrants,
                    runs=runs,
                    second_of_day=second_of_day,
                    guarantee=guarantee,
                    re_entry=re_entry,
                )
            )
        return out

    @staticmethod
    def _template_name(
        currency: str,
        buy_in: int,
        game: str,
        structure: str,
        speed: str,
        sng: bool,
        entrants: int,
        guarantee: int,
        formats: list[str],
        rng: random.Random,
    ) -> str:
        symbol = SYMBOLS.get(currency, currency + " ")
        price = "Freeroll" if buy_in == 0 else f"{symbol}{money(buy_in)}"
        game_name = {"H": "Hold'em", "O": "Omaha", "OHL": "Omaha Hi/Lo"}[game]
        label = f"{price} {structure} {game_name}"
        if sng:
            extras = [f"{entrants} Players"] if entrants > 9 else []
            if speed == "T":
                extras.append("Turbo")
            elif speed == "ST":
                extras.append("Hyper")
            return f"{label} [{', '.join(extras)}]" if extras else label
        title = rng.choice(("Nightly", "Sunday Special", "Big", "Daily Main", "Bounty Builder", "Hot", "Mini"))
        name = f"{label} {title}"
        if "K" in formats or "B" in formats:
            name += " [Progressive KO]" if "K" in formats else " [Bounty]"
        if guarantee:
            amount = guarantee // 100
            shown = f"{amount // 1000}K" if amount >= 1000 and amount % 1000 == 0 else str(amount)
            name += f", {symbol}{shown} Gtd"
        return name

    def tournament(self, network: int, day: int, template_index: int, run: int) -> Tournament:
        """The tournament instance (network, day, template, run); ids encode exactly that."""
        tid = (network + 1) * 1_000_000_000 + (day * 32 + template_index) * 16 + run
        found = self._tournaments.get(tid)
        if found is not None:
            return found
        t = self.templates(network)[template_index]
        h = mix(self.seed, 17, tid)
        h1, h2, h3, h4 = (h & 0x3FF) / 1024, ((h >> 10) & 0x3FF) / 1024, ((h >> 20) & 0x3FF) / 1024, ((h >> 30) & 0x3FF) / 1024
        d, dm = ((h >> 40) & 0x3FF) / 1024, ((h >> 50) & 0x3FF) / 1024
        start = EPOCH + day * DAY
        offset = (t.second_of_day + run * (DAY // t.runs) + int(h1 * 600)) % DAY
        speed_factor = _SPEED_FACTOR[t.speed]
        if t.game_class == "sng":
            entrants = t.entrants
            base = _SNG_DURATION.get(entrants, 2700)
            re_entries = 0
        else:
            entrants = max(2, int(t.entrants * (0.6 + 0.8 * h2)))
            base = 10_800 + int(entrants**0.5 * 300)
            re_entries = int(entrants * 0.25 * h3) if t.re_entry else 0
        duration = int(base * speed_factor * (0.8 + 0.4 * h4))
        pool = (entrants + re_entries) * t.stake
        overlay = 0
        if t.guarantee and t.guarantee > pool:
            overlay = t.guarantee - pool
            pool = t.guarantee
        if entrants <= 2:
            paid = 1
        elif entrants <= 6:
            paid = 2
        elif entrants <= 18:
            paid = 3
        else:
            paid = max(1, round(entrants * 0.15))
        difficulty = "Easy" if d < 0.3 else "Neutral" if d < 0.75 else "Hard"
        deal_made = t.game_class == "scheduled" and dm < 0.05
        flags, type_ids = _flags(t, difficulty, deal_made)
        tournament = Tournament(
            network=NETWORKS[network].name,
            id=tid,
            day=day,
            template=t,
            date=start + offset,
            duration=duration,
            entrants=entrants,
            re_entries=re_entries,
            prize_pool=pool,
            overlay=overlay,
            paid=paid,
            difficulty=difficulty,
            deal_made=deal_made,
            flags=flags,
            type_ids=type_ids,
        )
        if len(self._tournaments) > 500_000:
            self._tournaments.clear()
        self._tournaments[tid] = tournament
        return tournament

    # ------------------------------------------------------------------------------- roster

    def _identity(self, index: int) -> tuple[str, str]:
        if index < len(FIXED_PLAYERS):
            return FIXED_PLAYERS[index]
        j = index - len(FIXED_PLAYERS)
        size = len(_FIRST) * len(_LAST) * len(_STYLES)
        block, k = divmod(j, size)
        perm = (k * 7919 + mix(self.seed, 29) % size) % size  # 7919 is prime, coprime with size
        f, rest = divmod(perm, len(_LAST) * len(_STYLES))
        last, s = divmod(rest, len(_STYLES))
        name = _STYLES[s].format(f=_FIRST[f], l=_LAST[last])
        if block:
            name += str(block + 1)
        weights = [n.weight for n in NETWORKS]
        r = unit(self.seed, 31, index) * sum(weights)
        acc = 0.0
        network = NETWORKS[-1].name
        for n in NETWORKS:
            acc += n.weight
            if r < acc:
                network = n.name
                break
        if (network, name) in _FIXED_SET:
            name += "_"
        return network, name

    def roster(self, limit: int | None = None) -> list[tuple[str, str]]:
        """Every player as (network, name), in a stable order (the first ``limit`` if given)."""
        count = self.players if limit is None else min(limit, self.players)
        return [self._identity(i) for i in range(count)]

    def iter_roster(self) -> Iterator[tuple[str, str]]:
        for i in range(self.players):
            yield self._identity(i)

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
                    self._index = {self._identity(i): i for i in range(self.players)}
        return self._index.get(key)

    def player(self, network: str, name: str) -> Player | None:
        """The player's traits, or ``None`` for a name not on that network."""
        index = self.find(network, name)
        return None if index is None else self.player_at(index)

    def player_at(self, index: int) -> Player:
        found = self._player_cache.get(index)
        if found is not None:
            return found
        network, name = self._identity(index)
        net = _NETWORK_BY_NAME[network]
        rng = random.Random(mix(self.seed, 7, index))
        span = (LAST_START - FIRST_START).days
        start = FIRST_START + timedelta(days=rng.randrange(span))
        if index < len(FIXED_PLAYERS):
            start = FIRST_START + timedelta(days=rng.randrange(365))
        templates = self.templates(net.index)
        centre = rng.uniform(1.5, 8.5)
        sng_taste = rng.random()
        # Popular templates (low index) draw most players, so players meet in the same tournaments.
        weights = [
            math.exp(-abs(t.tier - centre)) * (sng_taste if t.game_class == "sng" else 1 - sng_taste) / (1 + t.index % 9) ** 1.5
            + 1e-6
            for t in templates
        ]
        chosen: list[int] = []
        pool = list(range(len(templates)))
        for _ in range(rng.randint(3, 7)):
            pick = rng.choices(pool, [weights[i] for i in pool])[0]
            pool.remove(pick)
            chosen.append(pick)
        cum: list[float] = []
        total = 0.0
        for i in chosen:
            total += weights[i] * rng.uniform(0.5, 1.5)
            cum.append(total)
        player = Player(
            index=index,
            network=network,
            name=name,
            country=rng.choice(net.country_pool),
            skill=rng.uniform(-0.35, 0.6),
            start_day=(start - EPOCH_DATE).days,
            games_per_month=rng.uniform(0.6, 3.2),
            template_ids=chosen,
            template_cum=[c / total for c in cum],
        )
        self._player_cache[index] = player
        return player

    # ------------------------------------------------------------------------------- histories

    def _year(self, player: Player, year: int) -> list[Result]:
        """Every game of the player in a calendar year (generated once, whatever the day)."""
        key = (player.index, year)
        found = self._months.get(key)
        if found is not None:
            return found
        net = _NETWORK_BY_NAME[player.network].index
        rng = random.Random(mix(self.seed, 11, player.index, year))
        randrange = rng.randrange
        rand = rng.random
        lam = player.games_per_month
        lo, hi = int(lam * 0.4), int(lam * 1.6) + 1
        seen: set[tuple[int, int, int]] = set()
        results: list[Result] = []
        templates = self.templates(net)
        cum = player.template_cum
        last = len(cum) - 1
        ids = player.template_ids
        seed, pindex, name, skill = self.seed, player.index, player.name, 1.0 + player.skill
        for month in range(1, 13):
            first_day = (date(year, month, 1) - EPOCH_DATE).days
            days = _days_in_month(year, month)
            for _ in range(rng.randint(lo, hi)):
                day = first_day + randrange(days)
                ti = ids[min(bisect.bisect_right(cum, rand()), last)]
                run = randrange(templates[ti].runs)
                if day < player.start_day or (day, ti, run) in seen:
                    continue
                seen.add((day, ti, run))
                t = self.tournament(net, day, ti, run)
                h = mix(seed, 13, t.id, pindex)
                position = min(t.entrants, 1 + int(((h >> 11) * _INV53) ** skill * t.entrants))
                multientries = 0
                if t.template.re_entry and (h & 0xFF) < 51:
                    multientries = 1 + (h >> 8) % 3
                results.append(Result(t, name, position, t.prize_for(position), multientries))
        results.sort(key=lambda r: (r.tournament.date, r.tournament.id))
        self._months[key] = results
        if len(self._months) > 100_000:
            self._months.popitem(last=False)
        return results

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
            block = self._year(player, year)
            if year == today.year:
                out.extend(r for r in block if r.tournament.date < end)
            else:
                out.extend(block)
        with self._lock:
            self._histories[key] = out
            if len(self._histories) > self._history_cache:
                self._histories.popitem(last=False)
        return out


_FIXED_SET = frozenset(FIXED_PLAYERS)
