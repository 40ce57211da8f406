"""One tree shape for both wire formats of the service.

The service's JSON is a mechanical mapping of its XML (service-notes §1): attributes become
``"@name"`` keys with string values, the text of an element that has attributes goes under
``"$"``, a text-only element becomes a plain value (sometimes a JSON number), an empty element
becomes ``""``, and a repeatable child is a list when there are several and *usually* a bare
object when there is one.

Both formats are read into that mapping (XML is converted to it), and :class:`Node` is a thin,
read-only view over it that removes every quirk: :meth:`Node.all` always returns a list,
:meth:`Node.attr` and :attr:`Node.text` always return strings or ``None``. Nothing downstream
knows which format came in.

:class:`Element` is the builder used to *write* trees (the sandbox, tests); :func:`to_json` and
:func:`to_xml` serialise it with the real service's quirks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from xml.etree.ElementTree import Element as _XmlElement

import orjson
from defusedxml import DefusedXmlException
from defusedxml import ElementTree as SafeET

from tourneylake.errors import TourneylakeError

__all__ = [
    "Element",
    "MalformedPayload",
    "Node",
    "parse",
    "parse_json",
    "parse_xml",
    "to_json",
    "to_xml",
]

# Children the real JSON keeps as one-element lists (service-notes §1).
DEFAULT_KEEP_LISTS = frozenset({"Data", "Y"})
# Text-only elements the real JSON writes as numbers.
DEFAULT_NUMERIC_TEXT = frozenset({"RemainingSearches", "ExpirationDate", "TrackedGamesCount"})


class MalformedPayload(TourneylakeError, ValueError):
    """A body that is not a well-formed service response in the announced format."""


def _scalar_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Node:
    """A read-only view of one element of a response, whichever format it came in."""

    __slots__ = ("name", "raw")

    def __init__(self, name: str, raw: Any) -> None:
        self.name = name
        self.raw = raw

    def __repr__(self) -> str:
        return f"Node({self.name!r})"

    def attr(self, name: str, default: str | None = None) -> str | None:
        """The attribute's value as a string (the service sends every attribute as one)."""
        raw = self.raw
        if type(raw) is dict:
            value = raw.get("@" + name)
            if value is not None:
                return value if type(value) is str else _scalar_str(value)
        return default

    @property
    def attrs(self) -> dict[str, str]:
        raw = self.raw
        if type(raw) is not dict:
            return {}
        return {k[1:]: _scalar_str(v) for k, v in raw.items() if k[:1] == "@"}

    @property
    def text(self) -> str | None:
        """The element's text; ``None`` for an empty element."""
        raw = self.raw
        if type(raw) is dict:
            value = raw.get("$")
        else:
            value = raw
        if value is None or value == "":
            return None
        return value if type(value) is str else _scalar_str(value)

    def all(self, name: str) -> list[Node]:
        """Every child called ``name``: always a list, however the service wrote it."""
        raw = self.raw
        if type(raw) is not dict:
            return []
        value = raw.get(name)
        if value is None:
            return []
        if type(value) is list:
            return [Node(name, item) for item in value]
        return [Node(name, value)]

    def one(self, name: str) -> Node | None:
        """The first child called ``name``, or ``None``."""
        raw = self.raw
        if type(raw) is not dict:
            return None
        value = raw.get(name)
        if value is None:
            return None
        if type(value) is list:
            return Node(name, value[0]) if value else None
        return Node(name, value)

    def find(self, path: str) -> Node | None:
        """Follow a ``/``-separated path of first children; ``None`` where one is missing."""
        node: Node | None = self
        for part in path.split("/"):
            if node is None:
                return None
            node = node.one(part)
        return node

    def child_text(self, name: str) -> str | None:
        child = self.one(name)
        return None if child is None else child.text

    def children(self) -> Iterator[Node]:
        """Every child element, in document order within each name."""
        raw = self.raw
        if type(raw) is not dict:
            return
        for key, value in raw.items():
            if key[:1] in ("@", "$"):
                continue
            if type(value) is list:
                for item in value:
                    yield Node(key, item)
            else:
                yield Node(key, value)

    def to_element(self) -> Element:
        """The canonical form: equal for the same response read from XML or from JSON."""
        return Element(
            self.name,
            self.attrs,
            self.text,
            [child.to_element() for child in self.children()],
        )


@dataclass(slots=True)
class Element:
    """A tree element to write (or the canonical form of a read one)."""

    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    children: list[Element] = field(default_factory=list)

    def add(self, name: str, attrs: dict[str, str] | None = None, text: str | None = None) -> Element:
        child = Element(name, attrs or {}, text)
        self.children.append(child)
        return child

    def canonical(self) -> tuple:
        """A hashable form in which children are grouped by name (the JSON mapping loses the
        interleaving of differently named siblings, so comparisons must too)."""
        groups: dict[str, list[tuple]] = {}
        for child in self.children:
            groups.setdefault(child.name, []).append(child.canonical())
        return (
            self.name,
            tuple(sorted(self.attrs.items())),
            self.text or None,
            tuple(sorted((name, tuple(items)) for name, items in groups.items())),
        )


# ----------------------------------------------------------------------------------- reading


def parse_json(body: bytes | str) -> Node:
    """Read a JSON response body: ``{"<Root>": {...}}``."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedPayload(f"response is not valid JSON: {exc}") from None
    if type(document) is not dict or len(document) != 1:
        raise MalformedPayload("JSON response must be an object with exactly one root element")
    ((name, raw),) = document.items()
    return Node(name, raw)


def _xml_to_raw(element: _XmlElement) -> Any:
    raw: dict[str, Any] = {"@" + k: v for k, v in element.attrib.items()}
    if len(element):
        groups: dict[str, list[Any]] = {}
        for child in element:
            groups.setdefault(child.tag, []).append(_xml_to_raw(child))
        for name, items in groups.items():
            raw[name] = items[0] if len(items) == 1 else items
    text = element.text
    if text is not None and len(element) and not text.strip():
        text = None  # indentation between child elements
    if not raw:
        return "" if text is None else text
    if text:
        raw["$"] = text
    return raw


def parse_xml(body: bytes | str) -> Node:
    """Read an XML response body safely: no DTDs, no entity expansion, no external entities."""
    try:
        root = SafeET.fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except SafeET.ParseError as exc:
        raise MalformedPayload(f"response is not well-formed XML: {exc}") from None
    except DefusedXmlException as exc:  # DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
        raise MalformedPayload(f"response XML refused for safety: {type(exc).__name__}") from None
    return Node(root.tag, _xml_to_raw(root))


def parse(body: bytes | str, fmt: str) -> Node:
    """Read a response body in ``fmt`` (``json`` or ``xml``) into the one tree shape."""
    if fmt == "json":
        return parse_json(body)
    if fmt == "xml":
        return parse_xml(body)
    raise MalformedPayload(f"unknown format {fmt!r}: expected 'json' or 'xml'")


# ----------------------------------------------------------------------------------- writing


def _to_raw(element: Element, keep_lists: frozenset[str], numeric: frozenset[str]) -> Any:
    if not element.attrs and not element.children:
        text = element.text
        if text is None:
            return ""
        if element.name in numeric:
            try:
                number = int(text)
            except ValueError:
                return text
            return number if str(number) == text else text
        return text
    raw: dict[str, Any] = {"@" + k: v for k, v in element.attrs.items()}
    groups: dict[str, list[Any]] = {}
    for child in element.children:
        groups.setdefault(child.name, []).append(_to_raw(child, keep_lists, numeric))
    for name, items in groups.items():
        raw[name] = items if (len(items) > 1 or name in keep_lists) else items[0]
    if element.text:
        raw["$"] = element.text
    return raw


def to_json(
    element: Element,
    *,
    keep_lists: Iterable[str] = DEFAULT_KEEP_LISTS,
    numeric: Iterable[str] = DEFAULT_NUMERIC_TEXT,
) -> bytes:
    """Serialise as the service's JSON mapping, quirks included (a lone child is a bare object
    unless its name is in ``keep_lists``; text-only elements in ``numeric`` are JSON numbers)."""
    raw = _to_raw(element, frozenset(keep_lists), frozenset(numeric))
    return orjson.dumps({element.name: raw})


def _escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return _escape_text(text).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")


def _write_xml(element: Element, out: list[str]) -> None:
    out.append("<" + element.name)
    for key, value in element.attrs.items():
        out.append(f' {key}="{_escape_attr(value)}"')
    if element.text is None and not element.children:
        out.append("/>")
        return
    out.append(">")
    if element.text:
        out.append(_escape_text(element.text).replace("\r", "&#13;"))
    for child in element.children:
        _write_xml(child, out)
    out.append(f"</{element.name}>")


def to_xml(element: Element) -> bytes:
    """Serialise as the service's XML."""
    out = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n']
    _write_xml(element, out)
    return "".join(out).encode("utf-8")
