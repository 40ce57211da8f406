"""The sandbox's players: who they are, how they play, and the tournaments they play each day.

A player's traits are drawn once from the seed and their roster index: network, country, start,
**skill** (their odds of finishing ahead of a field player), **volume** (the share of days they
play, entries on a day of play, months off) and **taste** (templates by stake tier and class).
The fixed players heading every roster (the demo watchlist) are regulars who play most days and
every side of their network, with skills spread as in the field (:data:`FIXED_SKILLS`: a few
winners, most losing); the rest of the roster is mostly recreational, most of it losing.

Play is generated a calendar year at a time (the current year up to the clock's month) from one
``random.Random`` per (player, year), so a day's games are the same whichever day they are asked
on and a history grows, deterministically, as the days go by. A day holds at most
:data:`MAX_ENTRIES_PER_DAY` entries, fewer than a summary lists, so a one-day summary shows every
entry it counts. Positions are drawn per player: two players may share one in a tournament.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from tourneylake.sandbox.hashing import mix, unit
from tourneylake.sandbox.tournaments import EPOCH_DATE, NETWORKS, Result, Template, Tournament

__all__ = ["FIXED_PLAYERS", "FIXED_SKILLS", "MAX_ENTRIES_PER_DAY", "Player", "identity", "make_player", "play_year"]

#: The most entries a player plays in one UTC day (a summary lists its 30 most recent).
MAX_ENTRIES_PER_DAY = 24
#: Players of the roster start between these dates (inclusive start, exclusive end); the fixed
#: players within the first year from FIXED_START.
FIRST_START = date(2021, 1, 1)
LAST_START = date(2025, 7, 1)
FIXED_START = date(2024, 1, 1)

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
_FIXED_SET = frozenset(FIXED_PLAYERS)
#: The fixed players' skills, dealt to them in an order drawn from the seed: as in the field, a few
#: winners (an expected ROI of about +15 % to +75 %) and most losing to the rake and the field
#: (−15 % to −60 %), so that over a month a few of them win, most lose, whatever the seed.
FIXED_SKILLS = (2.2, 1.7, 1.3, 0.9, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4)

_FIRST = (
    "José", "Ana", "Zoë", "Luca", "Chloé", "Søren", "Élodie", "Dmitrij", "Mária", "Björn",
    "Ines", "Jürgen", "Paweł", "Noémi", "Tomás", "Aurélie", "Mikkel", "Giulia", "Henrik", "Lucía",
    "Ondřej", "Kai", "Fatima", "Ólafur", "Renée", "Marek", "Sofía", "Yuki", "Ærin", "Grzegorz",
)  # fmt: skip
_LAST = (
    "García", "Łukasz", "Müller", "Dupont", "Novák", "Smith", "Rossi", "Şahin", "Nørgaard", "Kovács",
    "Silva", "O'Neil", "Horváth", "Lindqvist", "Fernández", "Dubois", "Schröder", "Nakamura", "Byrne", "Petrović",
    "Costa", "Jansen", "Ivanov", "Ferreira", "Wójcik", "Mäkinen", "Ortega", "Blažek", "Hughes", "Zieliński",
)  # fmt: skip
_STYLES = ("{f} {l}", "{f}.{l}", "{l}.{f}", "{f}_{l}", "{f} {l}.", "{f}{l}")


@dataclass(slots=True)
class Player:
    """A player's fixed traits (everything else is derived from them and the seed)."""

    index: int
    network: str
    name: str
    country: str
    #: odds of finishing ahead of a field player: 1 is the field's average, above 1 wins
    skill: float
    start_day: int
    #: the chance of playing on a day of a month without a break
    active_share: float
    #: mean entries on a day of play (at least 1)
    entries_per_day: float
    #: the chance a month is a break from play
    break_chance: float
    template_ids: list[int]
    template_cum: list[float]

    @property
    def network_index(self) -> int:
        return _NETWORK_INDEX[self.network]


_NETWORK_INDEX = {n.name: n.index for n in NETWORKS}


def identity(seed: int, index: int) -> tuple[str, str]:
    """(network, name) of the roster's ``index``-th player: the fixed players first, then names
    made of first names, last names and styles (unique within a roster, never a fixed name)."""
    if index < len(FIXED_PLAYERS):
        return FIXED_PLAYERS[index]
    j = index - len(FIXED_PLAYERS)
    size = len(_FIRST) * len(_LAST) * len(_STYLES)
    block, k = divmod(j, size)
    perm = (k * 7919 + mix(seed, 29) % size) % size  # 7919 is prime, coprime with size
    f, rest = divmod(perm, len(_LAST) * len(_STYLES))
    last, s = divmod(rest, len(_STYLES))
    name = _STYLES[s].format(f=_FIRST[f], l=_LAST[last])
    if block:
        name += str(block + 1)
    weights = [n.weight for n in NETWORKS]
    r = unit(seed, 31, index) * sum(weights)
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


def make_player(seed: int, index: int, templates: list[Template]) -> Player:
    """The traits of the roster's ``index``-th player (``templates``: their network's)."""
    network, name = identity(seed, index)
    rng = random.Random(mix(seed, 7, index))
    fixed = index < len(FIXED_PLAYERS)
    first, span = (FIXED_START, 365) if fixed else (FIRST_START, (LAST_START - FIRST_START).days)
    start = first + timedelta(days=rng.randrange(span))
    country = rng.choice(NETWORKS[_NETWORK_INDEX[network]].country_pool)
    skill = min(2.5, max(0.35, math.exp(rng.gauss(-0.12, 0.3))))  # drawn for every player: the rest of the draws stay put
    if fixed:
        skill = _fixed_skill(seed, index)
    active_share, entries_per_day, break_chance = _regular_volume(rng) if fixed else _roster_volume(rng)
    template_ids, template_cum = _taste(templates, rng, broad=fixed)
    return Player(
        index=index,
        network=network,
        name=name,
        country=country,
        skill=skill,
        start_day=(start - EPOCH_DATE).days,
        active_share=active_share,
        entries_per_day=entries_per_day,
        break_chance=break_chance,
        template_ids=template_ids,
        template_cum=template_cum,
    )


def _fixed_skill(seed: int, index: int) -> float:
    """The ``index``-th fixed player's skill: :data:`FIXED_SKILLS` dealt in an order drawn from the seed."""
    order = list(range(len(FIXED_SKILLS)))
    random.Random(mix(seed, 37)).shuffle(order)
    return FIXED_SKILLS[order[index % len(FIXED_SKILLS)]]


def _regular_volume(rng: random.Random) -> tuple[float, float, float]:
    """A regular: plays four to six days a week, a few entries a day, rarely a break."""
    return rng.uniform(0.6, 0.9), rng.uniform(1.5, 4.0), 0.03


def _roster_volume(rng: random.Random) -> tuple[float, float, float]:
    """Most of the roster plays now and then (a day a month to a couple a week), one to a few
    entries on a day of play (a few many more), with months off; busier players take fewer."""
    active_share = math.exp(rng.uniform(math.log(0.01), math.log(0.35)))
    entries_per_day = 1.0 + min(15.0, 0.6 * math.exp(rng.gauss(0.0, 0.9)))
    return active_share, entries_per_day, 0.35 * (1 - active_share)


def _taste(templates: list[Template], rng: random.Random, *, broad: bool) -> tuple[list[int], list[float]]:
    """The templates a player plays and the cumulative weights they pick them by: around a
    favourite stake tier, sit'n'gos or scheduled to their taste, popular templates (low index)
    more often, so players meet in the same tournaments. A ``broad`` taste (the regulars') also
    covers every side of the network (:func:`_sides`), so each breakdown has rows to show."""
    centre = rng.uniform(2.5, 8.0) if broad else rng.uniform(1.5, 9.0)
    spread = rng.uniform(1.5, 2.5) if broad else rng.uniform(0.6, 2.0)
    sng_taste = rng.uniform(0.3, 0.7) if broad else rng.random()
    weights = [
        math.exp(-abs(t.tier - centre) / spread)
        * (sng_taste if t.game_class == "sng" else 1 - sng_taste)
        / (1 + t.index % 9) ** 1.2
        + 1e-6
        for t in templates
    ]
    chosen: list[int] = []
    for side in _sides(templates) if broad else ():
        pool = [t.index for t in templates if side(t) and t.index not in chosen]
        if pool:
            chosen.append(rng.choices(pool, [weights[i] for i in pool])[0])
    pool = [i for i in range(len(templates)) if i not in chosen]
    for _ in range(rng.randint(4, 10)):
        pick = rng.choices(pool, [weights[i] for i in pool])[0]
        pool.remove(pick)
        chosen.append(pick)
    cumulative: list[float] = []
    total = 0.0
    for i in chosen:
        total += weights[i] * rng.uniform(0.5, 1.5)
        cumulative.append(total)
    return chosen, [c / total for c in cumulative]


def _sides(templates: list[Template]) -> list[Callable[[Template], bool]]:
    """What a regular's templates cover: each currency of the network, a small and a large
    sit'n'go, a scheduled tournament with re-entries, a game other than No-Limit Hold'em, a
    turbo or hyper, and a buy-in of $10 or more."""
    currencies = sorted({t.currency for t in templates})
    return [
        *((lambda t, c=c: t.currency == c) for c in currencies),
        lambda t: t.game_class == "sng" and t.entrants <= 9,
        lambda t: t.game_class == "sng" and t.entrants > 9,
        lambda t: t.re_entry and t.stake > 0,
        lambda t: t.game_type != "H/NL",
        lambda t: t.speed != "N",
        lambda t: t.buy_in >= 1000,
    ]


# ----------------------------------------------------------------------------------- play

TournamentOf = Callable[[int, int, int, int], Tournament]


def play_year(
    seed: int, player: Player, year: int, templates: list[Template], tournament_of: TournamentOf, months: int = 12
) -> list[Result]:
    """Every game of ``player`` in the first ``months`` months of a calendar year, oldest first
    (``tournament_of(network, day, template, run)`` gives an instance; the games of fewer months
    are a prefix of those of more). Each month is a break or not; in a month of play the days of
    play are drawn with the player's active share, varied a little month to month."""
    rng = random.Random(mix(seed, 11, player.index, year))
    results: list[Result] = []
    for month in range(1, months + 1):
        first = (date(year, month, 1) - EPOCH_DATE).days
        end = (date(year + month // 12, month % 12 + 1, 1) - EPOCH_DATE).days
        if rng.random() < player.break_chance or end <= player.start_day:
            continue
        share = min(0.95, player.active_share * rng.uniform(0.6, 1.4))
        log_miss = math.log(1.0 - share)
        day = first - 1
        while True:
            day += 1 + int(math.log(1.0 - rng.random()) / log_miss)  # a geometric gap
            if day >= end:
                break
            if day >= player.start_day:
                _play_day(player, day, rng, templates, tournament_of, results)
    results.sort(key=lambda r: (r.tournament.date, r.tournament.id))
    return results


def _play_day(
    player: Player, day: int, rng: random.Random, templates: list[Template], tournament_of: TournamentOf, out: list[Result]
) -> None:
    """A day of play: a few entries (at most :data:`MAX_ENTRIES_PER_DAY`), each a run of a
    template the player likes, never the same instance twice; the finish drawn from the skill."""
    extra = player.entries_per_day - 1.0
    count = min(MAX_ENTRIES_PER_DAY, 1 + int(rng.expovariate(1.0 / extra))) if extra > 0 else 1
    cumulative, ids, last = player.template_cum, player.template_ids, len(player.template_ids) - 1
    network, skill, name = player.network_index, player.skill, player.name
    rand = rng.random
    seen: set[int] = set()
    for _ in range(count):
        template = templates[ids[min(bisect.bisect_right(cumulative, rand()), last)]]
        run = int(rand() * template.runs)
        key = template.index * 16 + run
        if key in seen:
            continue
        seen.add(key)
        t = tournament_of(network, day, template.index, run)
        u = rand()
        position = min(t.entrants, 1 + int(u / (u + (1.0 - u) * skill) * t.entrants))
        multientries = 1 + rng.randrange(3) if template.re_entry and rand() < 0.2 else 0
        out.append(Result(t, name, position, t.prize_for(position), multientries))
