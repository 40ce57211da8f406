"""The Natural Language Filter resource: a small, deterministic, rule-based question → filter.

The real resource is a language model; the sandbox only needs something predictable enough to
test a pipeline that converts a question once and caches the filter. Recognised (English, case
insensitive):

- classes: "sit and go", "sit & go", "sit'n'go", "sng" → ``Class:SNG``; "scheduled", "mtt",
  "multi-table" → ``Class:SCHEDULED``
- types (joined into one ``Type:`` constraint): "hyper"/"super turbo" → ST, "turbo" → T,
  "hold'em"/"holdem"/"nlhe" → H, "omaha"/"plo" → O, "no limit" → NL, "pot limit" → PL,
  "bounty"/"knockout" → B, "heads up" → HU, "satellite" → SAT; "no/not/excluding satellites"
  → ``Type!:SAT``
- money: "over/above/more than $50" → ``Stake:USD50~*``, "under/below/less than €10" →
  ``Stake:*~EUR10``, "between $5 and $20" → ``Stake:USD5~USD20`` ($ USD, € EUR, £ GBP, or a code)
- entrants: "more than 100 players" → ``Entrants:100~*``, "fewer than 10 players" →
  ``Entrants:*~10``, "18 players"/"18-player" → ``Entrants:18``
- dates: "today" → ``Date:1D``, "last week" → ``Date:1W``, "last month" → ``Date:1M``,
  "last year" → ``Date:1Y``, "last 30 days|weeks|months|years" → ``Date:30D`` ..., "in 2019" →
  ``Date:2019``

Constraints come out in a fixed order (Class, Type, Type!, Stake, Entrants, Date). ``locale``
selects the decimal separator of amounts ("de", "fr", "es", "it", "pt", "nl" use a comma);
``timezone`` is accepted and ignored (relative dates are whole units). A question in which nothing
is recognised is refused (error 101012) rather than answered with an empty, match-everything
filter.
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
    comma = (locale or "").lower()[:2] in _COMMA_LOCALES
    parts: list[str] = []

    if re.search(r"sit\s*(?:and|&|'n'|n)\s*go|\bsngs?\b", q):
        parts.append("Class:SNG")
    elif re.search(r"\bscheduled\b|\bmtts?\b|multi-?table", q):
        parts.append("Class:SCHEDULED")

    types: list[str] = []
    if re.search(r"hyper|super[\s-]?turbo", q):
        types.append("ST")
    elif re.search(r"\bturbos?\b", q):
        types.append("T")
    if re.search(r"hold'?em|\bnlhe\b", q):
        types.append("H")
    if re.search(r"\bomaha\b|\bplo\b", q):
        types.append("O")
    if re.search(r"no[\s-]limit|\bnlhe\b", q):
        types.append("NL")
    elif re.search(r"pot[\s-]limit|\bplo\b", q):
        types.append("PL")
    if re.search(r"bount|knock-?outs?\b", q):
        types.append("B")
    if re.search(r"heads[\s-]?up", q):
        types.append("HU")
    exclude_sat = bool(re.search(r"(?:no|not|excluding|without|except)\s+(?:\w+\s+)?satellites?", q))
    if not exclude_sat and re.search(r"satellites?", q):
        types.append("SAT")
    if types:
        parts.append("Type:" + ",".join(types))
    if exclude_sat:
        parts.append("Type!:SAT")

    between = re.search(r"between\s+" + _AMOUNT.format(n="a") + r"\s+and\s+" + _AMOUNT.format(n="b"), q)
    over = re.search(r"(?:over|above|more than|at least)\s+" + _AMOUNT.format(n="a"), q)
    under = re.search(r"(?:under|below|less than|at most)\s+" + _AMOUNT.format(n="a"), q)
    if between:
        (c1, lo), (c2, hi) = _amount(between, "a", comma), _amount(between, "b", comma)
        currency = c1 or c2  # one currency for both bounds (the grammar wants them to agree)
        parts.append(f"Stake:{currency}{lo}~{currency}{hi}")
    elif over:
        c, n = _amount(over, "a", comma)
        parts.append(f"Stake:{c}{n}~*")
    elif under:
        c, n = _amount(under, "a", comma)
        parts.append(f"Stake:*~{c}{n}")

    players = r"(?:players|entrants|runners|people)"
    more = re.search(r"(?:more than|over|at least)\s+(\d+)\s+" + players, q)
    fewer = re.search(r"(?:fewer than|less than|under|at most)\s+(\d+)\s+" + players, q)
    exact = re.search(r"\b(\d+)[\s-](?:players?|max|man)\b", q)
    if more:
        parts.append(f"Entrants:{more.group(1)}~*")
    elif fewer:
        parts.append(f"Entrants:*~{fewer.group(1)}")
    elif exact:
        parts.append(f"Entrants:{exact.group(1)}")

    last_n = re.search(r"(?:last|past|previous)\s+(\d+)\s+(hours?|days?|weeks?|months?|years?)", q)
    year = re.search(r"\b(?:in|during|of)\s+(20\d\d)\b", q)
    if last_n:
        parts.append(f"Date:{int(last_n.group(1))}{_UNIT[last_n.group(2)]}")
    elif re.search(r"\btoday\b|last 24 hours", q):
        parts.append("Date:1D")
    elif m := re.search(r"(?:last|past|this)\s+(week|month|year)\b", q):
        parts.append(f"Date:1{_UNIT[m.group(1)]}")
    elif year:
        parts.append(f"Date:{year.group(1)}")

    return ";".join(parts) if parts else None
