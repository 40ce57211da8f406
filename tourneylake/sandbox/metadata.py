"""The sandbox's ``/metadata``: the recorded real metadata plus the serving day's currency rates.

The template is the real recorded ``MetadataResponse`` (``data/metadata_template.json``), so
filter definitions, networks, regions and statistic definitions are the service's own. Each
simulated day adds ``@rate`` (units per 1 USD) to every currency except the ones whose rate is
"unknown today" (:data:`~tourneylake.sandbox.world.UNPUBLISHED_RATE_CURRENCIES`).

``metadataHash`` is the MD5 of the day's payload serialised as JSON, so it changes whenever the
rates refresh (every simulated day) and is identical for the same seed and day. Metadata is the
only place the serving day's rates appear: summaries convert each tournament's money at the rates
of its own start day (:meth:`~tourneylake.sandbox.world.World.rate_on`).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources

from tourneylake.api import tree
from tourneylake.api.filters import FilterCatalog
from tourneylake.sandbox.world import World

__all__ = ["DayMetadata", "MetadataBook", "filter_catalog", "template", "type_categories"]


@lru_cache(maxsize=1)
def _template_node() -> tree.Node:
    raw = resources.files("tourneylake.sandbox.data").joinpath("metadata_template.json").read_bytes()
    node = tree.parse_json(raw).one("MetadataResponse")
    assert node is not None, "metadata template has no MetadataResponse"
    return node


def template() -> tree.Element:
    """A fresh copy of the recorded ``MetadataResponse`` as an :class:`~tourneylake.api.tree.Element`."""
    return _template_node().to_element()


@lru_cache(maxsize=1)
def filter_catalog() -> FilterCatalog:
    """What the metadata's filter definitions allow (names, options, currencies)."""
    return FilterCatalog.from_metadata(_template_node())


@lru_cache(maxsize=1)
def type_categories() -> dict[str, str]:
    """``Type`` option id → its category (Game, Structure, Speed, Format, ...)."""
    out: dict[str, str] = {}
    definitions = _template_node().one("FilterDefinition")
    assert definitions is not None
    for definition in definitions.all("ConstraintDefinition"):
        if definition.attr("id") == "Type":
            for option in definition.all("Option"):
                out[option.attr("id") or ""] = option.attr("type") or ""
    return out


@dataclass(frozen=True)
class DayMetadata:
    """One day's metadata payload, its hash and its serialised forms (built once per day)."""

    day: date
    payload: tree.Element
    hash: str
    json_fragment: bytes  # '"MetadataResponse":{...}' without the outer braces
    xml_fragment: bytes  # '<MetadataResponse ...>...</MetadataResponse>'


class MetadataBook:
    """Day → :class:`DayMetadata`, built lazily and cached (a few days at most are live)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._days: dict[date, DayMetadata] = {}
        self._lock = threading.Lock()

    def for_day(self, day: date | None = None) -> DayMetadata:
        day = day or self.world.today
        found = self._days.get(day)
        if found is None:
            with self._lock:
                found = self._days.get(day)
                if found is None:
                    found = self._build(day)
                    if len(self._days) > 16:
                        self._days.clear()
                    self._days[day] = found
        return found

    def _build(self, day: date) -> DayMetadata:
        payload = template()
        rates = self.world.published_rates(day)
        for child in payload.children:
            if child.name != "Currencies":
                continue
            seen: set[str] = set()
            for currency in child.children:
                iso = currency.attrs.get("iso", "")
                seen.add(iso)
                rate = rates.get(iso)
                currency.attrs.pop("rate", None)
                if rate is not None:
                    currency.attrs["rate"] = rate
            for iso, rate in rates.items():
                if iso not in seen:
                    attrs = {"iso": iso, "symbol": iso}
                    if rate is not None:
                        attrs["rate"] = rate
                    child.add("Currency", attrs)
        full_json = tree.to_json(payload)
        digest = hashlib.md5(full_json, usedforsecurity=False).hexdigest()
        xml = tree.to_xml(payload)
        xml_fragment = xml[xml.index(b"?>") + 2 :].lstrip()
        return DayMetadata(day, payload, digest, full_json[1:-1], xml_fragment)
