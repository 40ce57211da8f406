"""Seeded generators of hostile and broken response bodies, and the check every reader must pass.

A *case* is one body, JSON or XML (as bytes, sometimes as text), made from a real answer (the
recorded summary, metadata and error, the sandbox's countries and news) by one to four
mutations: a value swapped for another type (a lone object, a list, ``""``, a number, a
boolean, null), a number or epoch out of any range, nesting far beyond a real answer, a
reshaped element (dropped, wrapped in a list, unwrapped, repeated, renamed, moved), damaged
bytes (cut short, flipped, invalid UTF-8, NUL, a BOM), and for XML the classic attacks (entity
bombs, external entities and DTDs reading a secret file, XInclude, odd encodings).

:func:`make_case` draws a case from any :class:`random.Random`: hypothesis's ``st.randoms()``
in ``tests/test_fuzz.py``, a seeded one per case in ``benchmarks/fuzz.py``.
:meth:`Harness.run` feeds it to every entry point (:data:`ENTRY_POINTS`) and returns what went
wrong: an exception other than :class:`~tourneylake.api.tree.MalformedPayload` (any exception at
all from ``SummaryNormalizer.flush`` and ``service_error``), an ``add`` that failed but changed
the batch, a table that cannot be read back, an error message too long to be anything but
the body, or the secret file's content in a tree or a message.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from random import Random
from typing import Any

import orjson
import pyarrow as pa

from tourneylake.api import tree
from tourneylake.api.envelope import read_envelope, service_error
from tourneylake.tables.normalize import (
    SCHEMAS,
    Rates,
    SummaryNormalizer,
    normalize_countries,
    normalize_metadata,
    normalize_news,
    series_types,
    statistic_types,
)

TESTS = Path(__file__).resolve().parent.parent
RECORDED = TESTS / "data" / "recorded"
SEEDS = Path(__file__).resolve().parent / "seeds"
NIGHT = date(2019, 12, 10)

ENTRY_POINTS = (
    "tree.parse",
    "Node.to_element",
    "read_envelope",
    "service_error",
    "SummaryNormalizer.add",
    "SummaryNormalizer.flush",
    "normalize_metadata",
    "statistic_types",
    "series_types",
    "Rates.from_response",
    "normalize_countries",
    "normalize_news",
)
# An error message longer than this quotes more than an element path: probably the body.
MAX_MESSAGE_CHARS = 800


@dataclass(frozen=True, slots=True)
class Case:
    label: str  # the mutations, for reports (never the body)
    fmt: str
    body: bytes | str


@dataclass(frozen=True, slots=True)
class Failure:
    entry: str
    kind: str  # the exception's class, or what was broken
    detail: str
    label: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.kind} [{self.label}]\n{self.detail}"


# ------------------------------------------------------------------------------------ seeds


def _trim(raw: Any, keep: int, whole: frozenset[str] = frozenset()) -> Any:
    """Every list cut to its first ``keep`` items (those named in ``whole`` kept whole), so a
    case costs a fraction of a millisecond to read instead of the whole recorded answer's."""
    if type(raw) is dict:
        return {k: (v if k in whole else _trim(v, keep, whole)) for k, v in raw.items()}
    if type(raw) is list:
        return [_trim(v, keep, whole) for v in raw[:keep]]
    return raw


@cache
def seeds() -> dict[str, bytes]:
    """The real answers cases start from, as compact JSON."""
    summary = orjson.loads((RECORDED / "player-summary.json").read_bytes())
    metadata = orjson.loads((RECORDED / "metadata.json").read_bytes())
    rated = orjson.loads((TESTS / "data" / "metadata-with-rates.json").read_bytes())
    return {
        "summary": orjson.dumps(_trim(summary, 3)),
        "summary-full": orjson.dumps(summary),
        "metadata": orjson.dumps(_trim(metadata, 3)),
        # the currencies whole: the ones with a rate are not the first three
        "metadata-rates": orjson.dumps(_trim(rated, 2, frozenset({"Currency"}))),
        "error": orjson.dumps(orjson.loads((RECORDED / "error.json").read_bytes())),
        "countries": orjson.dumps(orjson.loads((SEEDS / "countries.json").read_bytes())),
        "news": orjson.dumps(orjson.loads((SEEDS / "news.json").read_bytes())),
    }


# How often each seed starts a case: the full recorded summary is ~100x the cost of the others.
SEED_WEIGHTS = {
    "summary": 30,
    "summary-full": 1,
    "metadata": 14,
    "metadata-rates": 8,
    "error": 10,
    "countries": 14,
    "news": 14,
}

# ------------------------------------------------------------------------------- mutations

# Strings that stand for a construct serialisation cannot express (a number beyond 64 bits as a
# JSON literal, nesting beyond orjson's 255 levels): replaced in the serialised body.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_MARK_JSON = re.compile(('"' + _MARK_OPEN + "(DEEP|NUM):([^" + _MARK_CLOSE + "]*)" + _MARK_CLOSE + '"').encode())
_MARK_BARE = re.compile((_MARK_OPEN + "(DEEP|NUM):([^" + _MARK_CLOSE + "]*)" + _MARK_CLOSE).encode())

# Around every limit: ours (64 elements, 128 containers), orjson's (255 to write, 1,024 to read),
# Python's recursion (~1,000 frames). Hypothesis draws the ends of a range more often, so the
# list starts and ends at the limit that matters most, and the costly depths sit in the middle.
DEPTHS = (64, 10, 60, 63, 66, 100, 127, 128, 129, 200, 2000, 20000, 254, 255, 256, 300, 1000, 1023, 1024, 1025, 65)
DEEP_KINDS = ("object", "list", "element-list", "attribute", "text")

# Values that parse as numbers but fit no column, and near misses of a number.
HUGE_TEXTS = (
    "9" * 20,
    "-" + "9" * 20,
    "12345678901234567890",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "2147483648",
    "-2147483649",
    "9007199254740993",
    "253402300799",
    "253402300800",
    "-62135596801",
    "1e400",
    "-1e400",
    "1e308",
    "1.7976931348623157e308",
    "4.9e-324",
    "1e-400",
    "NaN",
    "nan",
    "inf",
    "-Infinity",
    "1" * 5000,
    "0." + "1" * 5000,
    "0x1F",
    "1_000",
    " 42 ",
    "+7",
    "-0",
    "\u0661\u0662\u0663",  # Arabic-Indic digits: Python's int() reads them
    "12abc",
    "",
    " ",
)
# JSON number literals orjson reads as something else (a float) or refuses.
HUGE_LITERALS = (
    "123456789012345678901234567890",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "1e308",
    "1e400",
    "-1e400",
    "1e-400",
    "1" * 400,
)
NAMES = ("@id", "$", "@date", "@timestamp", "@success", "Response", "Statistic", "Y", "Data", "", "a b", "@", "Error")


def _deep(kind: str, depth: int, fmt: str) -> bytes:
    if fmt == "xml":
        if kind == "text":
            return b"<A>" * depth + b"x" + b"</A>" * depth
        return b"<A>" * depth + b"</A>" * depth
    opener, closer = {
        "object": (b'{"A":', b"}"),
        "list": (b"[", b"]"),
        "element-list": (b'{"A":[', b"]}"),
        "attribute": (b'{"@id":', b"}"),
        "text": (b'{"$":', b"}"),
    }[kind]
    return opener * depth + b'""' + closer * depth


def _marker(kind: str, payload: str) -> str:
    return f"{_MARK_OPEN}{kind}:{payload}{_MARK_CLOSE}"


def deep_marker(kind: str, depth: int) -> str:
    """A value that :func:`serialise` writes as ``depth`` nested elements (``kind``: one of
    :data:`DEEP_KINDS`), however deep: orjson could not write it."""
    return _marker("DEEP", f"{kind}:{depth}")


def _pick(rng: Random, options: Any) -> Any:
    return options[rng.randrange(len(options))]


def _replacement(rng: Random) -> Any:
    """Any value the mapping allows somewhere (and some it never does)."""
    kind = rng.randrange(12)
    if kind == 0:
        return _pick(rng, ({}, {"@id": "x"}, {"$": {}}, {"@id": {"@id": "x"}}, {"$": ["1"]}, {"": ""}))
    if kind == 1:
        return _pick(rng, ([], [{}], [[]], [None], ["1", {"@id": "x"}], [[{"@id": "1"}]]))
    if kind == 2:
        return _pick(rng, ("", " ", "x", "false", "true", "USD", "\u00e9\u4e2d\U0001f600", "a" * 10_000))
    if kind == 3:
        return _pick(rng, (0, -1, 1, 1.5, -0.0, 1e308, -1e308, 5e-324, 2**63 - 1, -(2**63), 2**64 - 1))
    if kind == 4:
        return _pick(rng, (True, False, None))
    if kind == 5:
        return _pick(rng, HUGE_TEXTS)
    if kind == 6:
        return _marker("NUM", _pick(rng, HUGE_LITERALS))
    if kind == 7:
        return deep_marker(_pick(rng, DEEP_KINDS), _pick(rng, DEPTHS))
    if kind == 8:
        return {"@id": _pick(rng, HUGE_TEXTS), "$": _pick(rng, HUGE_TEXTS)}
    if kind == 9:
        return [{"@id": str(i), "$": str(i)} for i in range(rng.randrange(0, 60))]
    if kind == 10:
        return {"@id": {"@id": {"@id": "x"}}}
    return _pick(rng, HUGE_TEXTS)


def _keys(container: Any) -> list[Any]:
    return list(container) if type(container) is dict else list(range(len(container)))


def _any_position(rng: Random, doc: dict[str, Any], *, scalar: bool = False) -> tuple[Any, Any]:
    """A (container, key) of the document, found by a random descent from the root (a walk
    of the whole tree per mutation would cost more than reading it): at each level a random
    child, and a container is entered three times in four (always when ``scalar``), so the
    values of a real summary, ~8 levels down, are reached often enough."""
    if not doc:  # an earlier mutation dropped the root
        doc["Response"] = ""
    container: Any = doc
    while True:
        key = _pick(rng, _keys(container))
        value = container[key]
        if type(value) not in (dict, list) or not value or (not scalar and rng.random() < 0.25):
            return container, key
        container = value


def _swap(rng: Random, doc: dict[str, Any]) -> str:
    container, key = _any_position(rng, doc)
    container[key] = _replacement(rng)
    return "swap"


def _number(rng: Random, doc: dict[str, Any]) -> str:
    container, key = _any_position(rng, doc, scalar=True)
    if rng.random() < 0.7:
        container[key] = _pick(rng, HUGE_TEXTS)
    else:
        container[key] = _marker("NUM", _pick(rng, HUGE_LITERALS))
    return "number"


def _deepen(rng: Random, doc: dict[str, Any]) -> str:
    container, key = _any_position(rng, doc)
    container[key] = deep_marker(_pick(rng, DEEP_KINDS), _pick(rng, DEPTHS))
    return "deep"


def _reshape(rng: Random, doc: dict[str, Any]) -> str:
    container, key = _any_position(rng, doc)
    value = container[key]
    kind = rng.randrange(7)
    if kind == 0:
        del container[key]
        return "drop"
    if kind == 1:
        container[key] = [value]
        return "wrap"
    if kind == 2 and type(value) is list:
        container[key] = value[0] if value else ""
        return "unwrap"
    if kind == 3:
        # the same (shared) value many times: cheap to build, long to read; at most ~2 MB of
        # it, or repeats of repeats would make bodies of gigabytes
        count = min(rng.randrange(2, 50), max(2, 2_000_000 // len(orjson.dumps(value))))
        container[key] = [value] * count
        return "repeat"
    if kind == 4 and type(container) is dict:
        del container[key]
        container[_pick(rng, NAMES)] = value
        return "rename"
    if kind == 5:
        # a copy of another subtree here (a copy: sharing could make a cycle)
        other, other_key = _any_position(rng, doc)
        container[key] = orjson.loads(orjson.dumps(other[other_key]))
        return "move"
    container[key] = ""
    return "empty"


_MUTATIONS: tuple[Callable[[Random, dict[str, Any]], str], ...] = (_swap, _swap, _number, _deepen, _reshape, _reshape)

# ------------------------------------------------------------------------------ serialising


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return f"{type(value).__name__} of {len(value)}"  # XML cannot hold it: a string instead


def _element(name: str, raw: Any) -> tree.Element:
    """The XML element for any JSON-mapping value, mapping what XML cannot express to text."""
    if type(raw) is dict:
        element = tree.Element(name, {k[1:]: _text(v) or "" for k, v in raw.items() if k[:1] == "@"}, _text(raw.get("$")))
        for key, value in raw.items():
            if key[:1] in ("@", "$"):
                continue
            for item in value if type(value) is list else [value]:
                element.children.append(_element(key, item))
        return element
    if type(raw) is list:  # a list where an element should be: its items as children
        return tree.Element(name, {}, None, [_element(name, item) for item in raw])
    return tree.Element(name, {}, _text(raw) or None)


def _expand_json(match: re.Match[bytes]) -> bytes:
    kind, payload = match.group(1), match.group(2).decode()
    if kind == b"NUM":
        return payload.encode()
    deep_kind, depth = payload.split(":")
    return _deep(deep_kind, int(depth), "json")


def _expand_xml(match: re.Match[bytes]) -> bytes:
    kind, payload = match.group(1), match.group(2).decode()
    if kind == b"NUM":
        return payload.encode()
    deep_kind, depth = payload.split(":")
    return _deep(deep_kind, int(depth), "xml")


def serialise(doc: dict[str, Any], fmt: str) -> bytes:
    """A document of the JSON mapping as a body in ``fmt``, markers expanded."""
    if fmt == "json":
        return _MARK_JSON.sub(_expand_json, orjson.dumps(doc))
    root = _element(*next(iter(doc.items()))) if len(doc) == 1 else _element("Response", doc)
    return _MARK_BARE.sub(_expand_xml, tree.to_xml(root))


# ------------------------------------------------------------------------------ byte damage


def _damage(rng: Random, body: bytes) -> tuple[bytes, str]:
    kind = rng.randrange(9)
    at = rng.randrange(len(body) + 1)
    if kind == 0:
        return body[:at], "cut"
    if kind == 1:
        data = bytearray(body)
        for _ in range(rng.randrange(1, 8)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "flip"
    if kind == 2:
        bad = _pick(rng, (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"))
        return body[:at] + bad + body[at:], "invalid-utf8"
    if kind == 3:
        return body[:at] + b"\x00" + body[at:], "nul"
    if kind == 4:
        return b"\xef\xbb\xbf" + body, "bom"
    if kind == 5:
        return body[:at] + _pick(rng, (b'"', b"{", b"]", b"<", b"&", b">", b"\\", b"&#0;", b"&lol;")) + body[at:], "insert"
    if kind == 6:
        end = min(len(body), at + rng.randrange(1, 2000))
        return body[:end] + body[at:end] * rng.randrange(1, 5) + body[end:], "duplicate"
    if kind == 7:
        return _pick(rng, (b"", b" ", b"\n", b"null", b"[]", b"{}", b"<a/>", b'{"Response": null}', b"0")), "tiny"
    return body + _pick(rng, (b"}", b"]", b"<Response/>", b"garbage", b"\x00")), "trailing"


# ------------------------------------------------------------------------------ XML attacks


@cache
def xml_attacks(secret: Path) -> list[tuple[str, bytes]]:
    """Whole bodies that try to make the XML reader expand, fetch or read something, or run out
    of stack. (The costly ones sit mid-list: hypothesis draws the ends of a range more often.)"""
    url = secret.as_uri()
    laugh = b'<!ENTITY lol "lol">' + b"".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'.encode() for i in range(1, 10)
    )
    return [
        (
            "billion-laughs",
            b'<?xml version="1.0"?><!DOCTYPE r [' + laugh + b']><Response success="true"><X>&lol9;</X></Response>',
        ),
        (
            "quadratic-blowup",
            b'<!DOCTYPE r [<!ENTITY a "'
            + b"x" * 50_000
            + b'">]><Response success="true"><X>'
            + b"&a;" * 1000
            + b"</X></Response>",
        ),
        (
            "external-entity",
            f'<!DOCTYPE r [<!ENTITY xxe SYSTEM "{url}">]><Response success="true"><X>&xxe;</X></Response>'.encode(),
        ),
        (
            "external-entity-in-attribute",
            f'<!DOCTYPE r [<!ENTITY xxe SYSTEM "{url}">]><Response success="&xxe;" timestamp="1"/>'.encode(),
        ),
        ("external-dtd", f'<!DOCTYPE Response SYSTEM "{url}"><Response success="true"/>'.encode()),
        (
            "parameter-entity",
            f'<!DOCTYPE r [<!ENTITY % p SYSTEM "{url}"> %p;]><Response success="true"/>'.encode(),
        ),
        (
            "xinclude",
            f'<Response xmlns:xi="http://www.w3.org/2001/XInclude" success="true"><xi:include href="{url}" parse="text"/></Response>'.encode(),
        ),
        ("undefined-entity", b'<Response success="true"><X>&nope;</X></Response>'),
        ("deep-100000", b"<A>" * 100_000 + b"</A>" * 100_000),
        ("wide-attributes", b"<Response " + b" ".join(f'a{i}="{i}"'.encode() for i in range(5000)) + b"/>"),
        ("char-ref-nul", b'<Response success="true"><X>&#0;</X></Response>'),
        ("char-ref-surrogate", b'<Response success="true"><X>&#xD800;</X></Response>'),
        ("processing-instruction", b'<?pi data?><Response success="true"><?x y?><!-- c --><X><![CDATA[<&>]]></X></Response>'),
        (
            "latin-1",
            '<?xml version="1.0" encoding="ISO-8859-1"?><Response success="true"><X>\u00e9</X></Response>'.encode("latin-1"),
        ),
        ("utf-16", '<?xml version="1.0" encoding="UTF-16"?><Response success="true"/>'.encode("utf-16")),
        ("bogus-encoding", b'<?xml version="1.0" encoding="x-nope"?><Response success="true"/>'),
        ("duplicate-attribute", b'<Response success="true" success="false"/>'),
        ("namespaced", b'<r:Response xmlns:r="urn:x" r:success="true"><r:X r:id="1"/></r:Response>'),
    ]


# ------------------------------------------------------------------------------ cases


def _weighted(rng: Random, weights: dict[str, int]) -> str:
    roll = rng.random() * sum(weights.values())
    for name, weight in weights.items():
        roll -= weight
        if roll < 0:
            return name
    return name  # rounding: the last one


def make_case(
    rng: Random, *, fmt: str | None = None, secret: Path | None = None, seed_names: Collection[str] | None = None
) -> Case:
    """One case drawn from ``rng``: a mutated seed (any, or one of ``seed_names``), or (XML,
    now and then, given the ``secret`` file) an attack."""
    fmt = fmt or ("json" if rng.random() < 0.5 else "xml")
    if fmt == "xml" and secret is not None and rng.random() < 0.04:
        # all but the 100,000-deep one (0.4 s to read: tests/test_fuzz.py reads it once)
        label, body = _pick(rng, [attack for attack in xml_attacks(secret) if attack[0] != "deep-100000"])
        return Case(f"xml-attack:{label}", fmt, body)
    seed = _weighted(rng, {k: w for k, w in SEED_WEIGHTS.items() if seed_names is None or k in seed_names})
    doc = orjson.loads(seeds()[seed])  # a fresh copy, faster than deepcopy
    labels = [seed]
    for _ in range(1 + int(rng.random() ** 2 * 4)):  # 1 to 4 mutations, mostly 1 or 2
        labels.append(_pick(rng, _MUTATIONS)(rng, doc))
    body = serialise(doc, fmt)
    if rng.random() < 0.2:
        body, label = _damage(rng, body)
        labels.append(label)
    text: bytes | str = body
    if rng.random() < 0.05:
        text = body.decode("utf-8", "surrogateescape")  # parse takes text too; lone surrogates included
        labels.append("text")
    return Case("+".join(labels), fmt, text)


# ------------------------------------------------------------------------------ the check


class Harness:
    """Runs cases through every entry point and says what went wrong (see the module notes).

    Summaries are normalised a batch at a time, as the harvest does: every case's answer is
    added to one normaliser, between a good summary before and one after, and the batch is
    flushed once (a flush costs ~100 Arrow calls whatever the batch). ``add`` must raise nothing but
    ``MalformedPayload``, ``flush`` nothing at all, and the flushed tables must equal those of
    a fresh normaliser fed only the answers whose ``add`` succeeded: a failed ``add`` leaves
    no trace."""

    def __init__(self, secret: Path | None = None) -> None:
        self.secret = secret.read_text() if secret is not None else None
        metadata = tree.parse((TESTS / "data" / "metadata-with-rates.json").read_bytes(), "json")
        self.rates = Rates.from_response(metadata)
        self.statistic_types = statistic_types(metadata)
        self.series_types = series_types(metadata)
        self.good = tree.parse(seeds()["summary"], "json")
        self.calls = dict.fromkeys(ENTRY_POINTS, 0)

    def _normalizer(self) -> SummaryNormalizer:
        return SummaryNormalizer(NIGHT, self.rates, self.statistic_types, self.series_types)

    def run(self, cases: list[Case]) -> list[Failure]:
        """Every entry point on every case; the summaries as one batch."""
        failures: list[Failure] = []
        normalizer = self._normalizer()
        normalizer.add(self.good, network="PokerStars", player="good-before", fetched_at=1575947004)
        added: list[tuple[str, tree.Node]] = []
        for number, case in enumerate(cases):
            root = self._one(case, failures)
            if root is not None:
                player = f"case-{number}"
                ok, _ = self._call(
                    "SummaryNormalizer.add",
                    lambda root=root, player=player: normalizer.add(root, network="PokerStars", player=player, fetched_at=1),
                    case,
                    failures,
                )
                if ok:
                    added.append((player, root))
        normalizer.add(self.good, network="PokerStars", player="good-after", fetched_at=1575947004)
        batch = Case("batch of " + ", ".join(c.label for c in cases[:3]) + (", ..." if len(cases) > 3 else ""), "-", b"")
        flushed, tables = self._call("SummaryNormalizer.flush", normalizer.flush, batch, failures, malformed_ok=False)
        if flushed:
            self._readable("SummaryNormalizer.flush", tables, failures, batch)
            reference = self._normalizer()
            reference.add(self.good, network="PokerStars", player="good-before", fetched_at=1575947004)
            for player, root in added:
                reference.add(root, network="PokerStars", player=player, fetched_at=1)
            reference.add(self.good, network="PokerStars", player="good-after", fetched_at=1575947004)
            expected = reference.flush()
            if any(not tables[name].equals(table) for name, table in expected.items()):
                failures.append(Failure("SummaryNormalizer.add", "not atomic", "a failed add changed the batch", batch.label))
        return failures

    def _call(
        self, entry: str, fn: Callable[[], Any], case: Case, failures: list[Failure], *, malformed_ok: bool = True
    ) -> tuple[bool, Any]:
        self.calls[entry] += 1
        try:
            return True, fn()
        except tree.MalformedPayload as exc:
            message = str(exc)
            if not malformed_ok:
                failures.append(Failure(entry, type(exc).__name__, message[:300], case.label))
            elif len(message) > MAX_MESSAGE_CHARS:
                failures.append(Failure(entry, "message too long", f"{len(message)} characters", case.label))
            elif self.secret and self.secret in message:
                failures.append(Failure(entry, "secret leaked", "in a message", case.label))
            return False, None
        except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
            failures.append(Failure(entry, type(exc).__name__, _where(exc), case.label))
            return False, None

    def _one(self, case: Case, failures: list[Failure]) -> tree.Node | None:
        """Every entry point but the summary's on one case; the parsed root, if it parsed."""
        parsed, root = self._call("tree.parse", lambda: tree.parse(case.body, case.fmt), case, failures)
        if not parsed:
            return None
        if self.secret and case.fmt == "xml" and _holds(root.raw, self.secret):
            failures.append(Failure("tree.parse", "secret leaked", "in the tree", case.label))
        self._call("Node.to_element", root.to_element, case, failures)
        ok, envelope = self._call("read_envelope", lambda: read_envelope(root), case, failures)
        if ok:
            self._call("service_error", lambda: service_error(root, envelope, "fuzz"), case, failures, malformed_ok=False)
        ok, tables = self._call("normalize_metadata", lambda: normalize_metadata(root, NIGHT), case, failures)
        if ok:
            self._readable("normalize_metadata", tables, failures, case)
        self._call("statistic_types", lambda: statistic_types(root), case, failures)
        self._call("series_types", lambda: series_types(root), case, failures)
        self._call("Rates.from_response", lambda: Rates.from_response(root), case, failures)
        for entry, normalize in (("normalize_countries", normalize_countries), ("normalize_news", normalize_news)):
            ok, result = self._call(entry, lambda normalize=normalize: normalize(root, NIGHT), case, failures)
            if ok:
                self._readable(entry, {entry.removeprefix("normalize_"): result.table}, failures, case)
        return root

    @staticmethod
    def _readable(entry: str, tables: dict[str, pa.Table], failures: list[Failure], case: Case) -> None:
        """Every table has its schema, valid data, and times that read back as Python values
        (one out of range would not: ``to_pylist`` raises, and so would every later reader)."""
        for name, table in tables.items():
            try:
                if not table.schema.equals(SCHEMAS[name]):
                    raise TypeError(f"{name}: the schema differs from the catalogue's")
                table.validate(full=True)
                table.select([f.name for f in table.schema if pa.types.is_timestamp(f.type)]).to_pylist()
            except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
                failures.append(Failure(entry, f"unreadable table ({type(exc).__name__})", _where(exc), case.label))


def _holds(raw: Any, text: str) -> bool:
    """Whether ``text`` is in any key or string of the tree (iterative: any depth)."""
    stack = [raw]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            stack.extend(value.keys())
            stack.extend(value.values())
        elif type(value) is list:
            stack.extend(value)
        elif type(value) is str and text in value:
            return True
    return False


def _where(exc: BaseException) -> str:
    """The exception and the innermost frames of ours, for a report (not the body)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tourneylake" in f.filename][-3:]
    where = "; ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames)
    return f"{type(exc).__name__}: {str(exc)[:200]} at {where}"
