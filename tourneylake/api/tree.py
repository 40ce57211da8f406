"""One tree shape for both wire formats of the service.

The service's JSON is a mechanical mapping of its XML (``docs/concepts/service.md``): ``@name`` attributes
with string values, ``$`` for the text beside attributes, plain values for text-only elements,
``""`` for empty ones, and a repeatable child that is a list when there are several and usually
a bare object when there is one. Both formats are read into that mapping, and :class:`Node` is a
read-only view that removes every quirk (:meth:`Node.all` is always a list, :meth:`Node.attr`
and :attr:`Node.text` are strings or ``None``), so nothing downstream knows which format came in.
Hostile or broken bodies fail as :class:`MalformedPayload`, naming the element path and never
quoting the body. :class:`Element` builds trees to write (the sandbox, tests); :func:`to_json`
and :func:`to_xml` serialise them with the service's quirks.
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
    "MAX_CONTAINER_DEPTH",
    "MAX_DEPTH",
    "ContainerWhereValueExpected",
    "Element",
    "MalformedPayload",
    "Node",
    "TooDeeplyNested",
    "check_nesting",
    "check_value",
    "element_path",
    "parse",
    "parse_json",
    "parse_xml",
    "to_json",
    "to_xml",
]

# Children the real JSON keeps as one-element lists (seen in recorded real answers).
DEFAULT_KEEP_LISTS = frozenset({"Data", "Y"})
# Text-only elements the real JSON writes as numbers.
DEFAULT_NUMERIC_TEXT = frozenset({"RemainingSearches", "ExpirationDate", "TrackedGamesCount"})


# The deepest element a response may hold (``Response`` is level 1). The real answers are under
# 15 deep; the margin is for shapes we have not seen, the bound keeps every reader (recursive
# ones included) far from Python's recursion limit.
MAX_DEPTH = 64
# The same bound over raw JSON-mapping containers, where a repeated child adds a list level.
MAX_CONTAINER_DEPTH = 2 * MAX_DEPTH
# How much of one element name an error message quotes (names come from the body).
_NAME_CHARS = 40


class MalformedPayload(TourneylakeError, ValueError):
    """A body that is not a well-formed service response in the announced format."""


class TooDeeplyNested(MalformedPayload):
    """Elements nested deeper than :data:`MAX_DEPTH`: no real answer is, and readers would
    otherwise run out of stack. Refused while an XML body is read; a JSON body is read by orjson
    (which refuses 1,024 levels) and a :class:`Node` refuses to step below :data:`MAX_DEPTH`, so
    the deep part of a JSON body fails only if something reads it (a check of the whole tree up
    front would be a second walk of every body)."""


class ContainerWhereValueExpected(MalformedPayload):
    """An object or a list where the mapping only allows a value (an attribute, ``$``, text)."""


def _short(name: Any) -> str:
    """An element name for a message: names come from the body, so a long one is cut."""
    text = name if isinstance(name, str) else type(name).__name__
    return text if len(text) <= _NAME_CHARS else text[:_NAME_CHARS] + "…"


def element_path(names: Iterable[Any]) -> str:
    """``A/B/C`` for messages, each name cut short; a long path keeps its ends."""
    parts = [_short(n) for n in names]
    if len(parts) > 12:
        parts = [*parts[:6], f"…({len(parts) - 9} more)…", *parts[-3:]]
    return "/".join(parts)


def _not_a_value(value: Any, path: str) -> ContainerWhereValueExpected:
    kind = "an object" if type(value) is dict else "a list"
    return ContainerWhereValueExpected(f"{path}: {kind} where the service sends a value")


def check_value(value: Any, path: str) -> Any:
    """``value`` if it is a value (string, number, boolean or null); an object or a list is
    :class:`ContainerWhereValueExpected` at ``path`` (the message never quotes the value)."""
    if type(value) is dict or type(value) is list:
        raise _not_a_value(value, path)
    return value


def check_nesting(raw: Any, path: str, limit: int = MAX_CONTAINER_DEPTH) -> None:
    """Raise :class:`TooDeeplyNested` if ``raw`` holds containers nested more than ``limit``
    deep. Iterative, so it is safe on any depth; for readers that hand a whole subtree to
    something recursive (``orjson.dumps`` stops at 255 levels with a ``TypeError``)."""
    level = [raw]
    depth = 0
    while level:
        level = [v for v in level if type(v) is dict or type(v) is list]
        if not level:
            return
        depth += 1
        if depth > limit:
            raise TooDeeplyNested(f"{path}: containers nested more than {limit} deep")
        nxt: list[Any] = []
        for container in level:
            nxt.extend(container.values() if type(container) is dict else container)
        level = nxt


def _scalar_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Node:
    """A read-only view of one element of a response, whichever format it came in.

    A node knows its parent (for the element path in error messages) and its depth: stepping
    to a child below :data:`MAX_DEPTH` raises :class:`TooDeeplyNested`."""

    __slots__ = ("depth", "name", "parent", "raw")

    def __init__(self, name: str, raw: Any, parent: Node | None = None) -> None:
        self.name = name
        self.raw = raw
        self.parent = parent
        self.depth: int = 1 if parent is None else parent.depth + 1
        if self.depth > MAX_DEPTH:
            raise TooDeeplyNested(f"{self.path}: elements nested more than {MAX_DEPTH} deep")

    def __repr__(self) -> str:
        return f"Node({self.name!r})"

    @property
    def path(self) -> str:
        """The element path from the root (``Response/PlayerResponse/...``), for messages."""
        names = []
        node: Node | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        return element_path(reversed(names))

    def attr(self, name: str, default: str | None = None) -> str | None:
        """The attribute's value as a string (the service sends every attribute as one)."""
        raw = self.raw
        if type(raw) is dict:
            value = raw.get("@" + name)
            if value is not None:
                if type(value) is str:
                    return value
                if type(value) is dict or type(value) is list:
                    raise _not_a_value(value, f"{self.path}/@{_short(name)}")
                return _scalar_str(value)
        return default

    @property
    def attrs(self) -> dict[str, str]:
        """Every attribute that has a value (a JSON null is none), as strings."""
        raw = self.raw
        if type(raw) is not dict:
            return {}
        out = {}
        for key, value in raw.items():
            if key[:1] == "@" and value is not None:
                if type(value) is dict or type(value) is list:
                    raise _not_a_value(value, f"{self.path}/{_short(key)}")
                out[key[1:]] = _scalar_str(value)
        return out

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
        if type(value) is str:
            return value
        if type(value) is dict or type(value) is list:
            raise _not_a_value(value, f"{self.path}/$" if type(raw) is dict else self.path)
        return _scalar_str(value)

    def all(self, name: str) -> list[Node]:
        """Every child called ``name``: always a list, however the service wrote it."""
        raw = self.raw
        if type(raw) is not dict:
            return []
        value = raw.get(name)
        if value is None:
            return []
        if type(value) is list:
            return [Node(name, item, self) for item in value]
        return [Node(name, value, self)]

    def one(self, name: str) -> Node | None:
        """The first child called ``name``, or ``None``."""
        raw = self.raw
        if type(raw) is not dict:
            return None
        value = raw.get(name)
        if value is None:
            return None
        if type(value) is list:
            return Node(name, value[0], self) if value else None
        return Node(name, value, self)

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
                    yield Node(key, item, self)
            else:
                yield Node(key, value, self)

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


def _check_body(body: Any) -> None:
    if not isinstance(body, bytes | bytearray | memoryview | str):
        raise MalformedPayload(f"a response body is bytes or text, not {type(body).__name__}")


def parse_json(body: bytes | str) -> Node:
    """Read a JSON response body: ``{"<Root>": {...}}``.

    orjson refuses invalid UTF-8, lone surrogates, numbers beyond a double and nesting beyond
    1,024 levels; the returned :class:`Node` refuses to go below :data:`MAX_DEPTH` elements."""
    _check_body(body)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedPayload(f"response is not valid JSON: {exc}") from None
    if type(document) is not dict or len(document) != 1:
        raise MalformedPayload("JSON response must be an object with exactly one root element")
    ((name, raw),) = document.items()
    return Node(name, raw)


def _xml_to_raw(element: _XmlElement, depth: int) -> Any:
    # Recursive, and bounded: no deeper than MAX_DEPTH + 1 frames (see `_too_deep`).
    if depth > MAX_DEPTH:
        raise _TooDeepXml(element)
    raw: dict[str, Any] = {"@" + k: v for k, v in element.attrib.items()}
    if len(element):
        groups: dict[str, list[Any]] = {}
        for child in element:
            groups.setdefault(child.tag, []).append(_xml_to_raw(child, depth + 1))
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


class _TooDeepXml(Exception):
    """Internal: the first element found below MAX_DEPTH (its path is looked up from the root
    only then, so reading a normal body pays nothing for it)."""

    def __init__(self, element: _XmlElement) -> None:
        self.element = element


def _too_deep(root: _XmlElement, deepest: _XmlElement) -> TooDeeplyNested:
    parents = {child: parent for parent in root.iter() for child in parent}
    names = [deepest.tag]
    node = deepest
    while node in parents:
        node = parents[node]
        names.append(node.tag)
    return TooDeeplyNested(f"{element_path(reversed(names))}: elements nested more than {MAX_DEPTH} deep")


def parse_xml(body: bytes | str) -> Node:
    """Read an XML response body safely: no DTDs, no entity expansion, no external entities,
    no elements nested below :data:`MAX_DEPTH`."""
    _check_body(body)
    try:
        root = SafeET.fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except SafeET.ParseError as exc:
        raise MalformedPayload(f"response is not well-formed XML: {exc}") from None
    except DefusedXmlException as exc:  # DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
        raise MalformedPayload(f"response XML refused for safety: {type(exc).__name__}") from None
    except (ValueError, LookupError) as exc:  # text with lone surrogates, an unknown encoding
        raise MalformedPayload(f"response XML cannot be decoded: {type(exc).__name__}") from None
    try:
        return Node(root.tag, _xml_to_raw(root, 1))
    except _TooDeepXml as exc:
        raise _too_deep(root, exc.element) from None


def parse(body: bytes | str, fmt: str) -> Node:
    """Read a response body in ``fmt`` (``json`` or ``xml``) into the one tree shape; anything
    that is not a readable response raises :class:`MalformedPayload` (see the module notes)."""
    if fmt == "json":
        return parse_json(body)
    if fmt == "xml":
        return parse_xml(body)
    raise MalformedPayload(f"unknown format {_short(fmt)!r}: expected 'json' or 'xml'")


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
