"""How figures are written for people, by kind: money with 2 decimals (``$1,234.50``), percentages
with 1 (``12.3 %``), counts as whole numbers (``1,234``), a minus sign for a negative and a dash
for a value that is not there; column names in words (``total_roi_pct`` → ``total ROI (%)``).

One place for the report, the notebooks and the command line, so a figure reads the same in all
three. A column's kind comes from its name, as the models name them: ``…_usd`` is money,
``…_pct`` a percentage, a count of entries, days, searches… a count.
"""

from __future__ import annotations

import math
from typing import Any, Literal

__all__ = ["Kind", "count", "figure", "kind_of", "money", "number", "percent", "words"]

Kind = Literal["money", "percent", "count", "number", "text"]

MISSING = "—"
MINUS = "−"
#: Words that name a count when a column's name holds one.
_COUNTED = frozenset(
    {
        "entries", "tournaments", "searches", "attempts", "retries", "days", "nights", "players", "pairs", "wins", "cashes",
        "rank", "position", "entrants", "finishes", "tables", "statistics", "rows", "won", "out", "cashed", "size",
    }
)  # fmt: skip
#: Abbreviations written as coaches write them.
_WORDS = {
    "roi": "ROI",
    "itm": "ITM",
    "abi": "ABI",
    "avg": "average",
    "ci": "interval",
    "usd": "USD",
    "pct": "%",
    "se": "SE",
    "sd": "sd",
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _signed(text: str, value: float) -> str:
    return (MINUS + text) if value < 0 and text.strip("0.,$ %") else text


def money(value: float | None) -> str:
    """USD with 2 decimals: ``$1,234.50``, ``−$3.20``."""
    if _missing(value):
        return MISSING
    assert value is not None
    return _signed(f"${abs(value):,.2f}", value)


def percent(value: float | None) -> str:
    """A percentage with 1 decimal: ``12.3 %``, ``−4.0 %``."""
    if _missing(value):
        return MISSING
    assert value is not None
    return _signed(f"{abs(value):,.1f} %", value)


def count(value: float | None) -> str:
    """A count: a whole number, ``1,234`` (a ratio of counts keeps 1 decimal: ``2.3``)."""
    if _missing(value):
        return MISSING
    assert value is not None
    text = f"{abs(value):,.0f}" if float(value).is_integer() else f"{abs(value):,.1f}"
    return _signed(text, value)


def number(value: float | None) -> str:
    """Any other number: a whole number as such, else 2 decimals."""
    if _missing(value):
        return MISSING
    assert value is not None
    text = f"{abs(value):,.0f}" if float(value).is_integer() else f"{abs(value):,.2f}"
    return _signed(text, value)


def kind_of(column: str, value: Any = None) -> Kind:
    """The kind of a column's figures, from its name (and, for a name that says nothing, its value)."""
    parts = column.lower().split("_")
    if "usd" in parts:
        return "money"
    if "pct" in parts:
        return "percent"
    if _COUNTED & set(parts) or "count" in parts:
        return "count"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "text"
    return "count" if isinstance(value, int) else "number"


_FORMAT = {"money": money, "percent": percent, "count": count, "number": number}


def figure(column: str, value: Any) -> str:
    """``value`` of ``column`` written by its kind (text as it is, a truth as yes or no; nothing is
    a dash)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    kind = kind_of(column, value)
    if kind == "text" or isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
        return MISSING if value is None else str(value)
    return _FORMAT[kind](value)


def words(column: str) -> str:
    """A column's name in words: ``total_roi_pct`` → ``total ROI (%)``, ``profit_usd`` →
    ``profit (USD)``, ``top_10pct`` → ``top 10 %``, ``finish_final_table`` → ``finish final table``."""
    parts = column.split("_")
    unit = ""
    if parts[-1] in ("usd", "pct") and len(parts) > 1:
        unit = f" ({_WORDS[parts.pop()]})"
    out = []
    for part in parts:
        if part.endswith("pct") and part[:-3].isdigit():
            out.append(f"{part[:-3]} %")
        else:
            out.append(_WORDS.get(part, part))
    return " ".join(out) + unit
