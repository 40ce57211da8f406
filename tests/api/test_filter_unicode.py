"""Unicode in filters: the client's grammar and the sandbox's agree on every string.

Python's ``\\d`` and ``str.isdigit`` match the digits of every script (``٣``, ``३``, ``３``,
``²``), and ``Decimal``/``int`` read many of them: a grammar written with them lets a filter
through that the service refuses, and that search is paid for an error. Hypothesis writes
filters of the constraints both sides evaluate, with values drawn from ASCII and non-ASCII
digits, letters, look-alikes and separators, and checks that the client's checks (syntax and the
sandbox's metadata, before any search) accept exactly what the sandbox's reading accepts.
"""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tourneylake.api.filters import FilterSyntaxError, parse_filter
from tourneylake.sandbox import World
from tourneylake.sandbox.filtering import FilterNotSupported, compile_filter
from tourneylake.sandbox.metadata import filter_catalog

WORLD = World(seed=3, players=4, today=date(2026, 3, 1))
CATALOG = filter_catalog()

ASCII_DIGITS = "0123456789"
#: Digits of other scripts (Arabic-Indic, Devanagari, fullwidth, mathematical bold), and
#: characters ``isdigit`` calls digits that are none (superscript two, a fraction, a roman numeral).
OTHER_DIGITS = "٣३３𝟙²½Ⅻ"
#: Letters: accented, a ligature, a dotted capital whose lower case is longer, and look-alikes of
#: ASCII (fullwidth S, Cyrillic es and o, Greek capital alpha).
LETTERS = "éßİﬁＳСоΑ"
#: Separators and invisible marks: no-break, thin and ideographic spaces, line and paragraph
#: separators, a zero-width space, a combining accent.
SEPARATORS = " \xa0\u2009\u3000\u2028\u2029\u200b\u0301"
UNICODE = OTHER_DIGITS + LETTERS + SEPARATORS

digits = st.text(ASCII_DIGITS + OTHER_DIGITS, min_size=1, max_size=3)
number = st.tuples(digits, st.sampled_from(["", "."]), digits).map(lambda p: p[0] + (p[1] + p[2] if p[1] else ""))
bound = st.one_of(number, st.just("*"))
currency = st.sampled_from(["", "USD", "GBP", "ＵＳＤ", "UЅD"])


def ranged(single: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(single, st.tuples(single, single).map("~".join))


def _cash() -> st.SearchStrategy[str]:
    one = st.tuples(currency, bound).map("".join)
    return st.tuples(ranged(one), st.sampled_from(["", "R", "Ｒ"])).map("".join)


def _duration() -> st.SearchStrategy[str]:
    return ranged(st.one_of(st.tuples(number, st.sampled_from(["", "s", "m", "h", "ｍ"])).map("".join), st.just("*")))


def _date() -> st.SearchStrategy[str]:
    relative = st.tuples(st.sampled_from(["", "-"]), digits, st.sampled_from([*"DWMYHS", "Ｄ"])).map("".join)
    year = st.sampled_from(["2019", "２０１９", "٢٠١٩", "2०19"])
    epochs = st.tuples(st.text(ASCII_DIGITS + OTHER_DIGITS, min_size=9, max_size=10), st.just("~"), st.just("1700000000"))
    return st.one_of(relative, year, epochs.map("".join))


def _option(ids: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from([*ids, "ＳＮＧ", "SNＧ", "Mо", "SCHEDULEDé"])


VALUES: dict[str, st.SearchStrategy[str]] = {
    "Entrants": ranged(bound),
    "ReEntries": ranged(number),
    "Duration": _duration(),
    "Stake": _cash(),
    "Guarantee": _cash(),
    "Date": _date(),
    "Class": _option(["SNG", "SCHEDULED", "LIVE"]),
    "DayOfWeek": _option(["Mo", "Tu", "Su"]),
    "Limit": st.tuples(st.sampled_from(["Best", "Last", "Bеst", "Ｌast"]), st.just(","), ranged(digits)).map("".join),
    "TournamentName": st.text(ASCII_DIGITS + "abc :" + UNICODE, min_size=1, max_size=6),
}


@st.composite
def noisy(draw: st.DrawFn, values: st.SearchStrategy[str]) -> str:
    """A value, sometimes with one character of :data:`UNICODE` slipped in somewhere."""
    value = draw(values)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(value)))
        value = value[:at] + draw(st.sampled_from(UNICODE)) + value[at:]
    return value


@st.composite
def filters(draw: st.DrawFn) -> str:
    parts = []
    for name in draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3, unique=True)):
        negated = "!" if name != "Limit" and draw(st.booleans()) else ""
        parts.append(f"{name}{negated}:{draw(noisy(VALUES[name]))}")
    return ";".join(parts)


def client_accepts(text: str) -> bool:
    """What the harvest checks before a search: the syntax and the metadata's constraints."""
    try:
        parse_filter(text)
    except FilterSyntaxError:
        return False
    return CATALOG.problems(text) == []


def sandbox_accepts(text: str) -> bool:
    try:
        compile_filter(text, WORLD, WORLD.day_end())
    except FilterNotSupported:
        return False
    return True


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(filters())
@example("Stake:USD٣~*")  # a reported example: Python's \d took the Arabic-Indic three
def test_the_clients_grammar_and_the_sandboxs_agree_on_unicode(text: str) -> None:
    assert client_accepts(text) == sandbox_accepts(text), text


@pytest.mark.parametrize(
    "text",
    ["Stake:USD٣~*", "Entrants:５~*", "Date:٣٠D", "Date:２０１９", "Duration:3०m", "Limit:Last,1~９", "Stake:USD2²"],
)
def test_non_ascii_digits_are_refused_before_any_search(text: str) -> None:
    assert not client_accepts(text)
    assert not sandbox_accepts(text)


@pytest.mark.parametrize("text", ["TournamentName:Café Crème", "TournamentName:Hold\u2009em"])
def test_non_ascii_text_values_stay_accepted(text: str) -> None:
    """Names of tournaments and players are written in any script: a Text value keeps them."""
    assert client_accepts(text) and sandbox_accepts(text)
