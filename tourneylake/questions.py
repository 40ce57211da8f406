"""Filters between nights: a filter's validity checked for free, a question converted once.

- :func:`check_filter` checks a filter for free (syntax, then metadata: the lake's when current,
  else the service's free Metadata resource);
- :func:`ask` converts a question once (the cache is shared with the harvest); its one search
  goes through the budget guard (run cap, reserve) and into the day's ledger.
"""

from __future__ import annotations

import logging

from tourneylake.api import calls
from tourneylake.api.filters import FilterCatalog, FilterSyntaxError, parse_filter
from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError
from tourneylake.lake.lake import Lake
from tourneylake.night.session import connected, metadata_is_current, today
from tourneylake.tables.reference import InForce

__all__ = ["InvalidConvertedFilter", "ask", "check_filter"]

log = logging.getLogger(__name__)


class InvalidConvertedFilter(TourneylakeError, ValueError):
    """The service converted a question into a filter that metadata rejects."""


def _problems(catalog: FilterCatalog | None, expression: str) -> list[str]:
    try:
        parse_filter(expression)
    except FilterSyntaxError as exc:
        return [f"syntax: {exc}"]
    return [str(problem) for problem in catalog.problems(expression)] if catalog is not None else []


def check_filter(settings: Settings, expression: str) -> list[str]:
    """Every problem with ``expression``; empty when it is fine. Never spends a search.

    Syntax is always checked. Then metadata: the lake's when it is current (the night's or the
    night before's), else the service's, read for free (see ``Session.checked_against``; the
    watchlist's check in ``tourneylake budget`` reads the same), else the lake's older copy, else
    none (a warning says only the syntax was checked)."""
    problems = _problems(None, expression)
    if problems:
        return problems
    lake = Lake.of(settings)
    if metadata_is_current(lake, today()):
        catalog = InForce(lake, today()).filter_catalog
    else:
        with connected(settings, writable=False) as session:
            catalog = session.checked_against()[0].filter_catalog
    if catalog is None:
        log.warning("no metadata could be read: only the filter's syntax was checked")
    return _problems(catalog, expression)


def ask(settings: Settings, question: str, timezone: str | None = None, locale: str | None = None) -> tuple[str, int]:
    """Convert ``question`` into a filter: one search the first time, free after (cached with
    its timezone and locale, shared with the nightly harvest). Returns (filter, searches spent).

    The filter is validated (syntax, and metadata when available); one the service produced but
    metadata rejects raises :class:`InvalidConvertedFilter`, saying what it cost."""
    with connected(settings, writable=True) as session:
        spent = 0
        expression = session.cached_filter(question, timezone, locale)
        if expression is None:
            with session.meter.metered(calls.NATURAL_LANGUAGE_FILTER) as (budget, ledger):
                expression = session.ask_filter(question, timezone, locale, budget, ledger)
            spent = ledger.spent
        catalog = session.checked_against()[0].filter_catalog
    problems = _problems(catalog, expression)
    if problems:
        raise InvalidConvertedFilter(
            f"the service converted the question to {expression!r}, which is not a valid filter: "
            + "; ".join(problems)
            + f" ({spent} search{'es' if spent != 1 else ''} spent)"
        )
    return expression, spent
