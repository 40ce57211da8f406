"""The Hand Analysis resource: a deterministic textual assessment of one hand history.

The real resource is an AI assessment of a hand history whose format is not documented. The
sandbox reads the common PokerStars-style text (a ``Hand #`` header, ``Seat n: name (chips)``,
``Dealt to hero [Ah Kd]``, action lines, ``*** FLOP ***`` markers) and writes a short assessment
from the hero's hole cards, pre-flop action and how far the hand went. A body without a ``Dealt to``
line with two cards is not a hand history (error 101012, free).
"""

from __future__ import annotations

import re

from tourneylake.errors import TourneylakeError

__all__ = ["HandParseError", "analyse"]

_DEALT = re.compile(r"^Dealt to (?P<hero>.+?) \[(?P<c1>[2-9TJQKA][cdhs]) (?P<c2>[2-9TJQKA][cdhs])\]", re.M)
_RANKS = "23456789TJQKA"


class HandParseError(TourneylakeError, ValueError):
    """The body is not a hand history the sandbox can read (the app answers 101012)."""


def _describe(c1: str, c2: str) -> tuple[str, int]:
    r1, r2 = sorted((_RANKS.index(c1[0]), _RANKS.index(c2[0])), reverse=True)
    suited = c1[1] == c2[1]
    name = f"{_RANKS[r1]}{_RANKS[r2]}{'' if r1 == r2 else 's' if suited else 'o'}"
    strength = r1 + r2 + (12 if r1 == r2 else 0) + (2 if suited else 0) - (r1 - r2 if r1 - r2 > 4 else 0)
    return name, strength


def analyse(text: str, lang: str = "en") -> str:
    """An English assessment of the hand (``lang`` is accepted; the sandbox writes English)."""
    del lang
    if not text or not text.strip():
        raise HandParseError("empty hand history")
    dealt = _DEALT.search(text)
    if dealt is None:
        raise HandParseError("no 'Dealt to <hero> [c1 c2]' line")
    hero = dealt.group("hero")
    hand, strength = _describe(dealt.group("c1"), dealt.group("c2"))
    seats = len(re.findall(r"^Seat \d+: ", text, re.M)) or 0
    before_flop = text.split("*** FLOP ***")[0]
    hero_lines = [line for line in before_flop.splitlines() if line.startswith(f"{hero}:")]
    said = " ".join(hero_lines)
    action = (
        "folded"
        if "folds" in said
        else "raised"
        if "raises" in said or "bets" in said
        else "called"
        if "calls" in said
        else "checked"
    )
    streets = [s for s in ("FLOP", "TURN", "RIVER") if f"*** {s} ***" in text]
    won = bool(re.search(rf"^{re.escape(hero)} (?:collected|wins)", text, re.M))
    tier = "premium" if strength >= 30 else "strong" if strength >= 22 else "playable" if strength >= 15 else "weak"
    lines = [f"Hero ({hero}) was dealt {hand}, a {tier} starting hand" + (f" at a {seats}-handed table." if seats >= 2 else ".")]
    if tier in ("premium", "strong") and action in ("folded", "checked"):
        lines.append(f"Pre-flop the hero {action}: with a {tier} hand, raising for value is usually better.")
    elif tier == "weak" and action in ("raised", "called"):
        lines.append(f"Pre-flop the hero {action} with a weak hand; folding is the disciplined default.")
    else:
        lines.append(f"Pre-flop the hero {action}, which is a reasonable line with this holding.")
    if streets:
        lines.append(f"The hand reached the {streets[-1].lower()}; review the bet sizing on each street.")
    else:
        lines.append("The hand ended before the flop.")
    lines.append("The hero won the pot." if won else "The hero did not win the pot.")
    return " ".join(lines)
