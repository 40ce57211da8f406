"""The Natural Language Filter resource: a small, deterministic, rule-based question -> filter.

The real resource is a language model; the sandbox only needs something predictable enough to
test a pipeline that converts a question once and caches the filter. It reads English (case
insensitive): a class, types, a stake range, a field size and a period, each by a small rule
below, and writes them in a fixed order (Class, Type, Type!, Stake, Entrants, Date). ``locale``
picks the decimal separator of amounts ("de", "fr", "es"... use a comma); ``timezone`` is
accepted and ignored (relative dates are whole units). A question in which nothing is recognised
is refused (error 101012) rather than answered with an empty, match-everything filter.
"""

from __future__ import annotations

import re

__all__ = ["convert"]

_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "usd": "USD", "eur": "EUR", "gbp": "GBP", "cad": "CAD"}
_AMOUNT = r"(?:(?P<{n}sym>[$€£])\s*(?P<{n}num>\d+(?:[.,]\d+)?)|(?P<{n}num2>\d+(?:[.,]\d+)?)\s*(?P<{n}code>usd|eur|gbp|cad|dollars?|euros?))"
_UNIT = {
    "day": "D",
    "days": "D",
    "week": "W",
    "weeks": "W",
    "month": "M",
    "months": "M",
    "year": "Y",
    "years": "Y",
    "hour": "H",
    "hours": "H",
}
_COMMA_LOCALES = ("de", "fr", "es", "it", "pt", "nl", "pl", "ru", "sv", "da")


def _amount(m: re.Match[str], prefix: str, comma: bool) -> tuple[str, str]:
    num = m.group(prefix + "num") or m.group(prefix + "num2")
    code = m.group(prefix + "sym") or m.group(prefix + "code") or "$"
    code = code.lower()
    currency = _CURRENCY.get(code, "USD" if code.startswith("dollar") else "EUR")
    if comma:
        num = num.replace(",", ".")
    else:
        num = num.replace(",", "")
    return currency, num


def convert(question: str, locale: str | None = None, timezone: str | None = None) -> str | None:
    """The filter for ``question``, or ``None`` when nothing in it is recognised."""
    del timezone  # accepted for the interface; relative dates are whole units
    q = " " + question.lower().replace("’", "'") + " "
    comma = locale is not None and locale.lower()[:2] in _COMMA_LOCALES
    parts = [*_game_class(q), *_types(q), *_stake(q, comma), *_entrants(q), *_period(q)]
    return ";".join(parts) if parts else None


def _game_class(q: str) -> list[str]:
    """ "sit and go", "sit & go", "sit'n'go", "sng" -> ``Class:SNG``; "scheduled", "mtt",
    "multi-table" -> ``Class:SCHEDULED``."""
    if re.search(r"sit\s*(?:and|&|'n'|n)\s*go|\bsngs?\b", q):
        return ["Class:SNG"]
    if re.search(r"\bscheduled\b|\bmtts?\b|multi-?table", q):
        return ["Class:SCHEDULED"]
    return []


#: Rows of (pattern, Type option): each row adds at most one option, the first whose pattern matches.
_TYPE_RULES: tuple[tuple[tuple[str, str], ...], ...] = (
    ((r"hyper|super[\s-]?turbo", "ST"), (r"\bturbos?\b", "T")),
    ((r"hold'?em|\bnlhe\b", "H"),),
    ((r"\bomaha\b|\bplo\b", "O"),),
    ((r"no[\s-]limit|\bnlhe\b", "NL"), (r"pot[\s-]limit|\bplo\b", "PL")),
    ((r"bount|knock-?outs?\b", "B"),),
    ((r"heads[\s-]?up", "HU"),),
)


def _types(q: str) -> list[str]:
    """One ``Type:`` of what is named: "hyper"/"super turbo" ST (else "turbo" T), "hold'em"/
    "holdem"/"nlhe" H, "omaha"/"plo" O, "no limit" NL (else "pot limit" PL), "bounty"/"knockout"
    B, "heads up" HU, "satellite" SAT; "no/not/excluding satellites" is ``Type!:SAT`` instead."""
    types = [next(option for pattern, option in row if re.search(pattern, q)) for row in _TYPE_RULES if _any_of(row, q)]
    exclude_sat = bool(re.search(r"(?:no|not|excluding|without|except)\s+(?:\w+\s+)?satellites?", q))
    if not exclude_sat and re.search(r"satellites?", q):
        types.append("SAT")
    return (["Type:" + ",".join(types)] if types else []) + (["Type!:SAT"] if exclude_sat else [])


def _any_of(row: tuple[tuple[str, str], ...], q: str) -> bool:
    return any(re.search(pattern, q) for pattern, _ in row)


def _stake(q: str, comma: bool) -> list[str]:
    """ "between $5 and $20" -> ``Stake:USD5~USD20``, "over/above/more than/at least $50" ->
    ``Stake:USD50~*``, "under/below/less than/at most €10" -> ``Stake:*~EUR10`` ($ USD, € EUR,
    £ GBP, or a code after the amount)."""
    between = re.search(r"between\s+" + _AMOUNT.format(n="a") + r"\s+and\s+" + _AMOUNT.format(n="b"), q)
    if between:
        (c1, lo), (c2, hi) = _amount(between, "a", comma), _amount(between, "b", comma)
        currency = c1 or c2  # one currency for both bounds (the grammar wants them to agree)
        return [f"Stake:{currency}{lo}~{currency}{hi}"]
    if over := re.search(r"(?:over|above|more than|at least)\s+" + _AMOUNT.format(n="a"), q):
        c, n = _amount(over, "a", comma)
        return [f"Stake:{c}{n}~*"]
    if under := re.search(r"(?:under|below|less than|at most)\s+" + _AMOUNT.format(n="a"), q):
        c, n = _amount(under, "a", comma)
        return [f"Stake:*~{c}{n}"]
    return []


def _entrants(q: str) -> list[str]:
    """ "more than 100 players" -> ``Entrants:100~*``, "fewer than 10 players" ->
    ``Entrants:*~10``, "18 players"/"18-player"/"6-max" -> ``Entrants:18``."""
    players = r"(?:players|entrants|runners|people)"
    if more := re.search(r"(?:more than|over|at least)\s+(\d+)\s+" + players, q):
        return [f"Entrants:{more.group(1)}~*"]
    if fewer := re.search(r"(?:fewer than|less than|under|at most)\s+(\d+)\s+" + players, q):
        return [f"Entrants:*~{fewer.group(1)}"]
    if exact := re.search(r"\b(\d+)[\s-](?:players?|max|man)\b", q):
        return [f"Entrants:{exact.group(1)}"]
    return []


def _period(q: str) -> list[str]:
    """ "last 30 days|weeks|months|years|hours" -> ``Date:30D`` ..., "today" -> ``Date:1D``,
    "last week|month|year" -> ``Date:1W`` ..., "in 2019" -> ``Date:2019``."""
    if last_n := re.search(r"(?:last|past|previous)\s+(\d+)\s+(hours?|days?|weeks?|months?|years?)", q):
        return [f"Date:{int(last_n.group(1))}{_UNIT[last_n.group(2)]}"]
    if re.search(r"\btoday\b|last 24 hours", q):
        return ["Date:1D"]
    if m := re.search(r"(?:last|past|this)\s+(week|month|year)\b", q):
        return [f"Date:1{_UNIT[m.group(1)]}"]
    if year := re.search(r"\b(?:in|during|of)\s+(20\d\d)\b", q):
        return [f"Date:{year.group(1)}"]
    return []
