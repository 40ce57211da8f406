"""The truth a test compares with what the sandbox serves: a player's selected results and the
statistics computed from them, by the very code the summaries are answered with."""

from __future__ import annotations

from datetime import date

from tourneylake.sandbox.filtering import compile_filter
from tourneylake.sandbox.stats import compute_statistics, profit_usd
from tourneylake.sandbox.world import Result, World

__all__ = ["Truth", "player_history", "truth"]


def player_history(world: World, network: str, name: str, filter_text: str = "", today: date | None = None) -> list[Result]:
    """The player's results that ``filter_text`` selects on ``today`` (oldest first).

    Raises ``KeyError`` for an unknown player and ``ValueError`` for a filter the sandbox
    does not understand (the service answers 101012 then).
    """
    player = world.player(network, name)
    if player is None:
        raise KeyError(f"no player {name!r} on {network!r}")
    today = today or world.today
    predicate = compile_filter(filter_text, world, world.day_end(today))
    return predicate.apply(world.history(player, today))


def truth(world: World, network: str, name: str, filter_text: str = "", today: date | None = None) -> Truth:
    """The statistics exactly as the summary serves them (id → value string; ``None`` for a
    statistic served as ``authorized="false"``), with ``.profit_usd`` (unrounded) and
    ``.results`` (the selected results) as attributes."""
    today = today or world.today
    results = player_history(world, network, name, filter_text, today)
    return Truth(compute_statistics(results, world.rate_on, network), profit_usd(results, world.rate_on), results)


class Truth(dict[str, str | None]):
    """Statistic id → served value (a ``dict``), plus the unrounded profit and the results."""

    def __init__(self, statistics: dict[str, str | None], profit_usd: float = 0.0, results: list[Result] | None = None) -> None:
        super().__init__(statistics)
        self.profit_usd = profit_usd
        self.results: list[Result] = results or []
