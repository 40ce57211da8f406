"""Filters between nights: a filter's validity checked for free, a question converted once.

- :func:`check_filter` checks a filter for free (syntax, then metadata from the lake or, with the
  sandbox, from its free Metadata resource);
- :func:`ask` converts a question once (the cache is shared with the harvest); its one search
  goes through the budget guard (run cap, reserve) and into the day's ledger.
"""

from __future__ import annotations

import logging

from tourneylake.api import ApiError, Client, calls
from tourneylake.api.filters import FilterCatalog, FilterSyntaxError, parse_filter
from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError
from tourneylake.lake.lake import Lake
from tourneylake.night.session import connected, today
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


def _service_catalog(settings: Settings, base_url: str) -> FilterCatalog | None:
    """The filter catalogue from the service's Metadata resource (free, no credentials sent)."""
    try:
        with Client(settings, base_url=base_url) as client:
            return FilterCatalog.from_metadata(client.metadata().root)
    except (ApiError, ValueError) as exc:
        log.warning("could not read metadata to validate the filter: %s", exc)
        return None


def _lake_catalog(settings: Settings) -> FilterCatalog | None:
    lake = Lake.of(settings)
    return InForce(lake, today()).filter_catalog if lake.exists else None


def check_filter(settings: Settings, expression: str) -> list[str]:
    """Every problem with ``expression``; empty when it is fine. Never spends a search.

    Syntax is always checked. Then metadata: the lake's (when it holds metadata tables), else
    the sandbox's (the Metadata resource is free), else none (a warning says only the syntax was
    checked)."""
    problems = _problems(None, expression)
    if problems:
        return problems
    catalog = _lake_catalog(settings)
    if catalog is None and settings.is_sandbox:
        with connected(settings, writable=False) as session:
            catalog = _service_catalog(settings, session.base_url)
    if catalog is None:
        log.warning(
            "no metadata in %s yet: only the filter's syntax was checked (run `tourneylake run` first)", settings.data_dir
        )
    return _problems(catalog, expression)


def ask(settings: Settings, question: str, timezone: str | None = None, locale: str | None = None) -> tuple[str, int]:
    """Convert ``question`` into a filter: one search the first time, free after (cached with
    its timezone and locale, shared with the nightly harvest). Returns (filter, searches spent).

    The filter is validated (syntax, and metadata when available); one the service produced but
    metadata rejects raises :class:`InvalidConvertedFilter`, saying what it cost."""
    catalog = _lake_catalog(settings)
    with connected(settings, writable=True) as session:
        spent = 0
        expression = session.cached_filter(question, timezone, locale)
        if expression is None:
            with session.meter.metered(calls.NATURAL_LANGUAGE_FILTER) as (budget, ledger):
                expression = session.ask_filter(question, timezone, locale, budget, ledger)
            spent = ledger.spent
            if catalog is None:
                catalog = _service_catalog(settings, session.base_url)
    problems = _problems(catalog, expression)
    if problems:
        raise InvalidConvertedFilter(
            f"the service converted the question to {expression!r}, which is not a valid filter: "
            + "; ".join(problems)
            + f" ({spent} search{'es' if spent != 1 else ''} spent)"
        )
    return expression, spent
