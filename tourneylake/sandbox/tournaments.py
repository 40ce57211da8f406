"""The sandbox's tournaments: each network's recurring templates, their daily instances, results.

Each network runs a fixed catalogue of recurring **templates** (a "$3.50 NL Hold'em [18 Players,
Turbo]" sit'n'go that starts every hour or two, a nightly scheduled tournament...), as real sites
do. An instance is (network, day, template, run): its id encodes exactly that and its attributes
(start, field, prize pool...) are hashed from the id, so every player who plays it sees the same
tournament and players meet in shared tournaments, as the warehouse expects.

Money is in integer cents of the tournament's currency; a player's result is
``prize - stake - rake`` (re-entries are reported, not charged again). Everything here is a pure
function of the seed and its arguments.
"""

from __future__ import annotations

import calendar
import math
import random
from dataclasses import dataclass
from datetime import date

from tourneylake.sandbox.hashing import mix

__all__ = [
    "BUY_INS",
    "DAY",
    "EPOCH",
    "EPOCH_DATE",
    "NETWORKS",
    "NetworkProfile",
    "Result",
    "Template",
    "Tournament",
    "day_start",
    "make_templates",
    "make_tournament",
    "money",
]

DAY = 86_400
#: Day 0 of the world; tournament ids count days from here.
EPOCH_DATE = date(2018, 1, 1)
EPOCH = calendar.timegm(EPOCH_DATE.timetuple())

#: Total buy-ins (stake + rake) in currency units: the stake tiers of the world.
BUY_INS = (0.0, 0.5, 1.0, 1.5, 3.5, 5.5, 7.5, 11.0, 22.0, 33.0, 55.0, 109.0, 215.0)
#: Templates per network: sit'n'gos first, then scheduled tournaments (ids allow 32).
TEMPLATES_PER_NETWORK = 30
SIT_AND_GOS = 19
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CAD": "C$", "CNY": "¥"}


def day_start(d: date) -> int:
    """Epoch seconds of 00:00 UTC on ``d``."""
    return calendar.timegm(d.timetuple())


def money(cents: int) -> str:
    """Cents as the service writes money: ``"1.32"``, ``"-0.05"``."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


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


# ----------------------------------------------------------------------------------- templates


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a template's class decides: field, tables, runs a day, guarantee and formats."""

    entrants: int
    players_per_table: int
    runs: int
    guarantee: int
    re_entry: bool
    formats: tuple[str, ...]


def make_templates(seed: int, net: NetworkProfile) -> list[Template]:
    """The recurring tournaments of a network: :data:`SIT_AND_GOS` sit'n'gos, then scheduled ones."""
    rng = random.Random(mix(seed, 5, net.index))
    return [_template(net, index, index < SIT_AND_GOS, rng) for index in range(TEMPLATES_PER_NETWORK)]


def _template(net: NetworkProfile, index: int, sng: bool, rng: random.Random) -> Template:
    currency = rng.choices([c for c, _ in net.currencies], [w for _, w in net.currencies])[0]
    tier = rng.choice(range(1, 10) if sng else range(len(BUY_INS)))
    if not sng and tier == 0 and rng.random() < 0.5:
        tier = 2
    buy_in = round(BUY_INS[tier] * 100)
    rake = round(buy_in * (0.09 if buy_in < 1000 else 0.08))
    g = rng.random()
    game, structure = ("H", "NL") if g < 0.78 else ("O", "PL") if g < 0.92 else ("OHL", "PL") if g < 0.97 else ("H", "FL")
    s = rng.random()
    speed = "N" if s < 0.45 else "T" if s < 0.8 else "ST"
    shape = _sng_shape(rng) if sng else _scheduled_shape(rng, buy_in - rake)
    formats = list(shape.formats)
    if rng.random() < 0.2:
        formats.append("B" if rng.random() < 0.5 else "K")
    if rng.random() < 0.05:
        formats.append("SO")
    return Template(
        network=net.index,
        index=index,
        name=_template_name(currency, buy_in, game, structure, speed, sng, shape, formats, rng),
        currency=currency,
        stake=buy_in - rake,
        rake=rake,
        tier=tier,
        game=game,
        structure=structure,
        game_class="sng" if sng else "scheduled",
        speed=speed,
        formats=tuple(formats),
        players_per_table=shape.players_per_table,
        entrants=shape.entrants,
        runs=shape.runs,
        second_of_day=rng.randrange(0, DAY // 3600) * 3600,
        guarantee=shape.guarantee,
        re_entry=shape.re_entry,
    )


def _sng_shape(rng: random.Random) -> _Shape:
    """A sit'n'go: a fixed field, started many times a day (up to 15 runs: ids hold 16)."""
    entrants = rng.choice((2, 6, 9, 9, 9, 18, 18, 45, 180))
    formats = ("HU",) if entrants == 2 else ("6MX",) if entrants == 6 else ()
    players_per_table = 2 if entrants == 2 else 6 if entrants == 6 else 9
    runs = rng.choice((2, 4, 6, 8, 12, 15)) if entrants <= 45 else rng.choice((1, 2, 3))
    return _Shape(entrants, players_per_table, runs, 0, False, formats)


def _scheduled_shape(rng: random.Random, stake: int) -> _Shape:
    """A scheduled tournament: a typical field of 40 to 4,000, once a day (some a few times),
    sometimes guaranteed, re-entry, rebuy or satellite."""
    entrants = int(math.exp(rng.uniform(math.log(40), math.log(4000))))
    formats: list[str] = []
    players_per_table = 6 if rng.random() < 0.2 else 9
    if players_per_table == 6:
        formats.append("6MX")
    runs = rng.choice((1, 1, 1, 1, 2, 3))
    guarantee = 0
    if rng.random() < 0.6 and stake:
        guarantee = int(entrants * stake * rng.uniform(0.6, 1.1)) // 10000 * 10000
    re_entry = rng.random() < 0.35
    if re_entry:
        formats.append("ME")
    if rng.random() < 0.2:
        formats.append("R")
    if rng.random() < 0.1:
        formats.append("SAT")
    return _Shape(entrants, players_per_table, runs, guarantee, re_entry, tuple(formats))


def _template_name(
    currency: str,
    buy_in: int,
    game: str,
    structure: str,
    speed: str,
    sng: bool,
    shape: _Shape,
    formats: list[str],
    rng: random.Random,
) -> str:
    symbol = SYMBOLS.get(currency, currency + " ")
    price = "Freeroll" if buy_in == 0 else f"{symbol}{money(buy_in)}"
    game_name = {"H": "Hold'em", "O": "Omaha", "OHL": "Omaha Hi/Lo"}[game]
    label = f"{price} {structure} {game_name}"
    if sng:
        extras = [f"{shape.entrants} Players"] if shape.entrants > 9 else []
        if speed == "T":
            extras.append("Turbo")
        elif speed == "ST":
            extras.append("Hyper")
        return f"{label} [{', '.join(extras)}]" if extras else label
    title = rng.choice(("Nightly", "Sunday Special", "Big", "Daily Main", "Bounty Builder", "Hot", "Mini"))
    name = f"{label} {title}"
    if "K" in formats or "B" in formats:
        name += " [Progressive KO]" if "K" in formats else " [Bounty]"
    if shape.guarantee:
        amount = shape.guarantee // 100
        shown = f"{amount // 1000}K" if amount >= 1000 and amount % 1000 == 0 else str(amount)
        name += f", {symbol}{shown} Gtd"
    return name


# ----------------------------------------------------------------------------------- instances

_SPEED_FACTOR = {"N": 1.0, "T": 0.65, "ST": 0.4}
_SNG_DURATION = {2: 900, 6: 1800, 9: 2700, 18: 3900, 45: 5400, 180: 9000}
_FLAG_CACHE: dict[tuple[str, str, str, tuple[str, ...], str, bool], tuple[str, frozenset[str]]] = {}
_PAYOUT_TOTALS: list[float] = [0.0]


def tournament_id(network: int, day: int, template_index: int, run: int) -> int:
    """The id of an instance: it encodes (network, day, template, run) and nothing else."""
    return (network + 1) * 1_000_000_000 + (day * 32 + template_index) * 16 + run


def make_tournament(seed: int, network: int, template: Template, day: int, run: int) -> Tournament:
    """The instance of ``template`` started by its ``run``-th run on ``day`` (days since the epoch)."""
    tid = tournament_id(network, day, template.index, run)
    h = mix(seed, 17, tid)
    t = template
    offset = (t.second_of_day + run * (DAY // t.runs) + int((h & 0x3FF) * 600 / 1024)) % DAY
    if t.game_class == "sng":
        entrants, re_entries, base = t.entrants, 0, _SNG_DURATION.get(t.entrants, 2700)
    else:
        entrants = max(2, int(t.entrants * (0.6 + 0.8 * ((h >> 10) & 0x3FF) / 1024)))
        re_entries = int(entrants * 0.25 * ((h >> 20) & 0x3FF) / 1024) if t.re_entry else 0
        base = 10_800 + int(entrants**0.5 * 300)
    pool = (entrants + re_entries) * t.stake
    overlay = max(0, t.guarantee - pool)
    difficulty = _DIFFICULTY[((h >> 40) & 0x3FF) * 20 // 1024]
    deal_made = t.game_class == "scheduled" and (h >> 50) & 0x3FF < 51
    flags, type_ids = _flags(t, difficulty, deal_made)
    return Tournament(
        network=NETWORKS[network].name,
        id=tid,
        day=day,
        template=t,
        date=EPOCH + day * DAY + offset,
        duration=int(base * _SPEED_FACTOR[t.speed] * (0.8 + 0.4 * ((h >> 30) & 0x3FF) / 1024)),
        entrants=entrants,
        re_entries=re_entries,
        prize_pool=pool + overlay,
        overlay=overlay,
        paid=_paid_places(entrants),
        difficulty=difficulty,
        deal_made=deal_made,
        flags=flags,
        type_ids=type_ids,
    )


#: A tournament's difficulty by twentieths of a draw: 30 % Easy, 45 % Neutral, 25 % Hard.
_DIFFICULTY = ("Easy",) * 6 + ("Neutral",) * 9 + ("Hard",) * 5


def _paid_places(entrants: int) -> int:
    if entrants <= 2:
        return 1
    if entrants <= 6:
        return 2
    if entrants <= 18:
        return 3
    return max(1, round(entrants * 0.15))


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
