"""Reading an answer's bytes: its tree and envelope, and whether a body that cannot be read was
cut short (worth another try) or is complete (never worth paying for again).

Free of the HTTP stack (no httpx, no settings), so the tables worker
(:mod:`tourneylake.tables.worker`) and the rebuild import only what reading needs;
:mod:`tourneylake.api.client` re-exports these.
"""

from __future__ import annotations

from typing import Any
from xml.etree.ElementTree import ParseError as XmlParseError

import msgspec
import orjson
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from tourneylake.api.calls import Call
from tourneylake.api.envelope import Envelope, read_envelope
from tourneylake.api.errors import MalformedResponse, UnusableResponse
from tourneylake.api.tree import MalformedPayload, Node, parse

__all__ = ["call_payload", "cut_short", "metadata_is_cached", "read_accepted_envelope", "read_answer"]


def metadata_is_cached(root: Node) -> bool:
    """Whether a metadata answer says "your copy is current" (``cached="true"``, or no content)
    instead of holding the metadata."""
    payload = root.one("MetadataResponse")
    return payload is None or payload.attr("cached") == "true" or next(payload.children(), None) is None


def call_payload(root: Node, call: Call) -> Node | None:
    """The data element of an answer to ``call``: the one its resource names, else the first
    child that is not the envelope's."""
    if call.payload_name:
        return root.one(call.payload_name)
    for child in root.children():
        if child.name not in ("UserInfo", "ErrorResponse"):
            return child
    return None


# expat's errors for a document that simply stops: no element found, unclosed token, partial character.
_XML_END_OF_INPUT = {3, 5, 6}


def cut_short(body: bytes, fmt: str) -> bool:
    """Whether a body that failed to parse stops mid-document (a truncated transfer, worth
    another try) rather than being complete and unreadable (which another try would only pay
    for again). Called only on the failure path, so parsing once more costs nothing that matters."""
    if fmt == "json":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.reason == "unexpected end of data"  # cut inside the last character
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return str(exc).startswith("unexpected end of data")
        return False
    try:
        parser = DefusedXMLParser(forbid_dtd=True, forbid_entities=True, forbid_external=True)
        parser.feed(body)
        parser.close()
    except XmlParseError as exc:
        return getattr(exc, "code", None) in _XML_END_OF_INPUT
    except DefusedXmlException:  # a DTD or an entity: complete, and refused
        return False
    return False


def read_answer(body: bytes, fmt: str, resource: str | None = None) -> tuple[Node, Envelope]:
    """A body's tree and envelope. Raises :class:`MalformedResponse` when the body was cut short
    (retryable) and :class:`UnusableResponse` when it is complete but can never be read."""
    try:
        root = parse(body, fmt)
        return root, read_envelope(root)
    except (MalformedPayload, MalformedResponse) as exc:
        if cut_short(body, fmt):
            raise MalformedResponse(f"the answer was cut short: {exc}", resource=resource) from None
        raise UnusableResponse(f"the answer cannot be read: {exc}", resource=resource) from None


class _Envelope(msgspec.Struct):
    """The envelope's part of a JSON ``Response`` element, each value as its raw JSON (every
    other member is checked for syntax and skipped, never built)."""

    success: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="@success", default=msgspec.UNSET)
    timestamp: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="@timestamp", default=msgspec.UNSET)
    metadata_hash: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="@metadataHash", default=msgspec.UNSET)
    app_version: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="@appVersion", default=msgspec.UNSET)
    user_info: msgspec.Raw | msgspec.UnsetType = msgspec.field(name="UserInfo", default=msgspec.UNSET)


_ENVELOPE_MEMBERS = tuple((field.encode_name, field.name) for field in msgspec.structs.fields(_Envelope))
_read_response = msgspec.json.Decoder(dict[str, _Envelope]).decode


def read_accepted_envelope(body: bytes) -> Envelope | None:
    """The envelope of a JSON answer that plainly succeeded, read without building its tree.

    A summary is ~1,500 JSON values of which the envelope is a dozen: msgspec checks the whole
    document's syntax and builds only the envelope's members, whose values orjson reads, so
    the :class:`Envelope` is exactly :func:`read_answer`'s (the tables worker parses the body
    anyway). ``None`` for anything else — not UTF-8,
    not JSON msgspec takes, not one ``Response`` root, ``success`` not true, an envelope that
    does not read — and the caller reads the body in full, which judges a body cut short or
    unusable exactly as before. What msgspec's syntax check accepts and orjson would not
    (a number beyond a double inside the payload) is found by the normaliser, which refuses
    the answer (``answer unusable``, kept raw)."""
    try:
        if not body.isascii():
            body.decode("utf-8")  # orjson refuses invalid UTF-8 anywhere; msgspec only in what it builds
        document = _read_response(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    response = document.get("Response")
    if response is None or len(document) != 1:
        return None
    raw: dict[str, Any] = {}
    try:
        for member, field in _ENVELOPE_MEMBERS:
            value = getattr(response, field)
            if value is not msgspec.UNSET:
                raw[member] = orjson.loads(memoryview(value))
        envelope = read_envelope(Node("Response", raw))
    except (orjson.JSONDecodeError, MalformedPayload):
        return None
    return envelope if envelope.success else None
