"""Countries and product news, the two free reference resources.

Shapes (the real ones are not documented; these are the sandbox's):

- ``GET metadata/countries`` → ``CountriesResponse`` with ``Country[] {@code (ISO 3166-1
  alpha-2), @name (English)}``, sorted by code.
- ``GET news/whatsnew`` → ``WhatsNewResponse`` with ``NewsItem[] {@id, @date (epoch s), @title,
  [@url], $ = the text}``, newest first. One item is published every 9 simulated days from
  2018-01-03, so the list grows with the clock; ``limit`` keeps the newest ``limit``.
"""

from __future__ import annotations

from datetime import date, timedelta

from tourneylake.api.tree import Element
from tourneylake.sandbox.hashing import mix
from tourneylake.sandbox.world import day_start

__all__ = ["COUNTRIES", "countries_payload", "news_items", "news_payload"]

COUNTRIES: tuple[tuple[str, str], ...] = tuple(
    sorted(
        [
            ("AR", "Argentina"),
            ("AT", "Austria"),
            ("AU", "Australia"),
            ("BE", "Belgium"),
            ("BR", "Brazil"),
            ("CA", "Canada"),
            ("CH", "Switzerland"),
            ("CI", "Côte d’Ivoire"),
            ("CN", "China"),
            ("CZ", "Czechia"),
            ("DE", "Germany"),
            ("DK", "Denmark"),
            ("ES", "Spain"),
            ("FI", "Finland"),
            ("FR", "France"),
            ("GB", "United Kingdom"),
            ("GE", "Georgia"),
            ("HU", "Hungary"),
            ("IE", "Ireland"),
            ("IN", "India"),
            ("IS", "Iceland"),
            ("IT", "Italy"),
            ("JP", "Japan"),
            ("MX", "Mexico"),
            ("NL", "Netherlands"),
            ("NO", "Norway"),
            ("PL", "Poland"),
            ("PT", "Portugal"),
            ("RE", "Réunion"),
            ("RU", "Russia"),
            ("SE", "Sweden"),
            ("TR", "Türkiye"),
            ("UA", "Ukraine"),
            ("US", "United States"),
            ("VN", "Viet Nam"),
            ("ZA", "South Africa"),
        ]
    )
)
COUNTRY_NAMES = dict(COUNTRIES)

_FIRST_NEWS = date(2018, 1, 3)
_TOPICS = (
    ("New network coverage", "Tournament results from another network are now tracked."),
    ("Faster player summaries", "Summaries are now served from a new statistics engine."),
    ("Natural language filters", "Ask questions in plain English and get a filter back."),
    ("Hand analysis improvements", "The hand analyser now comments on bet sizing."),
    ("Currency rates refreshed daily", "Money statistics now convert each tournament at its own day's exchange rates."),
    ("Achievements update", "Several new achievements can now be unlocked."),
    ("Maintenance window", "A short maintenance window is planned; the API stays available."),
)


def countries_payload() -> Element:
    root = Element("CountriesResponse")
    for code, name in COUNTRIES:
        root.add("Country", {"code": code, "name": name})
    return root


def news_items(today: date, seed: int = 0) -> list[dict[str, str]]:
    """Every news item published up to ``today``, newest first."""
    items: list[dict[str, str]] = []
    day = _FIRST_NEWS
    n = 0
    while day <= today:
        n += 1
        title, text = _TOPICS[mix(seed, 43, n) % len(_TOPICS)]
        item = {"id": str(n), "date": str(day_start(day) + 10 * 3600), "title": f"{title} (#{n})", "text": text}
        if n % 3 == 0:
            item["url"] = f"https://example.com/news/{n}"
        items.append(item)
        day += timedelta(days=9)
    items.reverse()
    return items


def news_payload(today: date, limit: int | None, seed: int = 0) -> Element:
    root = Element("WhatsNewResponse")
    items = news_items(today, seed)
    if limit is not None:
        items = items[: max(limit, 0)]
    for item in items:
        attrs = {k: v for k, v in item.items() if k != "text"}
        root.add("NewsItem", attrs, item["text"])
    return root
