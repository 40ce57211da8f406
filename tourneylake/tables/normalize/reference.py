"""Countries and What's New → tables, read by what the payload holds.

Their response shapes are not documented by the service, so nothing here assumes one. The
reader finds the repeated record elements under the payload (``Countries/Country[]``,
``Country[]``, ``News/Item[]``, a lone bare object, ...), takes every attribute and text child of
each record generically (the ``attributes`` map column, plus ``raw_json`` with the record as
served) and fills the known columns (code, name, title, date, ...) from whichever of a few
likely spellings is present. A shape it cannot read is kept raw (one row holding only
``raw_json``) and reported in the returned warnings, never a crash; so is a value out of range
(a date beyond the year 9999 is NULL, with a warning). Structural garbage the mapping cannot
produce (an object as an attribute's value, nesting beyond any real answer) raises
:class:`~tourneylake.api.tree.MalformedPayload` naming the element.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

import pyarrow as pa

from tourneylake.api.tree import MalformedPayload, Node, check_nesting, check_value, element_path
from tourneylake.lake.raw import as_date
from tourneylake.schemas import SCHEMAS
from tourneylake.tables.normalize import _columns as C

__all__ = ["NormalizeResult", "normalize_countries", "normalize_news"]

_ENVELOPE = frozenset({"UserInfo", "ErrorResponse"})


class NormalizeResult(NamedTuple):
    """The table and what the reader could not make sense of (``table, warnings = ...``)."""

    table: pa.Table
    warnings: list[str]


def _payload(response: Node) -> tuple[str, Any]:
    """The element path and raw mapping of the response's data element (the Response child
    that is not the envelope)."""
    raw = response.raw
    if response.name != "Response":
        return response.path, raw
    if type(raw) is not dict:
        return response.path, None
    for key, value in raw.items():
        if key[:1] not in ("@", "$") and key not in _ENVELOPE:
            return element_path([response.name, key]), value
    return response.path, None


def _elements(raw: dict[str, Any]) -> list[str]:
    return [k for k in raw if k[:1] not in ("@", "$")]


def _find_records(raw: Any, depth: int = 0) -> tuple[str, list[Any]] | None:
    """The repeated record elements below ``raw``: the longest list child, else descend
    through pure containers (no attributes, or whose one child is itself repeated)."""
    if type(raw) is not dict or depth > 5:
        return None
    names = _elements(raw)
    lists = [(k, raw[k]) for k in names if type(raw[k]) is list]
    if lists:
        name, records = max(lists, key=lambda kv: len(kv[1]))
        return name, records
    if len(names) != 1:
        return None
    name = names[0]
    value = raw[name]
    if type(value) is dict:
        inner = _elements(value)
        has_attrs = any(k[:1] == "@" for k in value)
        if len(inner) == 1 and (not has_attrs or type(value[inner[0]]) in (list, dict)):
            found = _find_records(value, depth + 1)
            if found is not None:
                return found
        return name, [value]
    if type(value) is str and value != "":
        return name, [value]
    return None


def _flat(record: Any, where: str) -> dict[str, str]:
    """Attributes and scalar (or text-bearing) children of a record, keyed without ``@``."""
    if type(record) is not dict:
        t = C.text(record)
        return {} if t is None else {"text": t}
    out: dict[str, str] = {}
    for key, value in record.items():
        name = "text" if key == "$" else key.lstrip("@")
        if key[:1] == "@" or key == "$":
            check_value(value, f"{where}/{element_path([key])}")
        elif type(value) is dict:
            value = check_value(value.get("$"), f"{where}/{element_path([key])}/$")
        elif type(value) is list:
            continue
        t = C.text(value)
        if t is not None and t != "":
            out.setdefault(name, t)
    return out


def _pick(flat: dict[str, str], names: Sequence[str]) -> str | None:
    lowered = {k.lower(): v for k, v in flat.items()}
    for name in names:
        value = lowered.get(name.lower())
        if value:
            return value
    return None


def _time(value: str | None) -> float | None:
    """Epoch seconds (the service's form for every time), else an ISO date-time. The
    seconds may lie out of range, infinite for "1e400" (the caller checks, to warn)."""
    if value is None:
        return None
    try:
        return int(value)  # exact: a float would round a long one
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if math.isnan(number):
            return None  # no time, like any other text that is none
        return int(number) if math.isfinite(number) else math.inf
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def _table(name: str, cols: dict[str, Any], n: int, night: date) -> pa.Table:
    schema = SCHEMAS[name]
    cols = {"snapshot_date": C.repeat(night, n, pa.date32()), **cols}
    arrays = [c if isinstance(c := cols[f.name], pa.Array) else pa.array(c, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _records(response: Node, what: str, warnings: list[str]) -> tuple[list[Any], Any, str]:
    """The records, the payload when it is kept raw instead, and the records' element path."""
    if response.name == "Response" and str(response.attr("success") or "true").lower() == "false":
        raise MalformedPayload(f"{what}: an error response is not data (normalise only successful calls)")
    where, payload = _payload(response)
    if payload is None or payload == "":
        warnings.append(f"{what}: the response holds no payload; nothing to read")
        return [], None, where
    # Every record is written back whole (raw_json): refuse what no real answer nests, once,
    # before orjson would (it stops at 255 levels with a TypeError).
    check_nesting(payload, where)
    found = _find_records(payload)
    if found is None:
        warnings.append(f"{what}: unrecognised payload shape; kept raw in one row (raw_json)")
        return [], payload, where
    return found[1], None, f"{where}/…/{element_path([found[0]])}"


def normalize_countries(response: Node, night: date | str) -> NormalizeResult:
    """``/metadata/countries`` → ``countries(code, name, attributes, raw_json)``."""
    night = as_date(night)
    warnings: list[str] = []
    records, unread, where = _records(response, "countries", warnings)
    code, name, attrs, raw = [], [], [], []
    for index, record in enumerate(records):
        flat = _flat(record, f"{where}[{index}]")
        c = _pick(flat, ("code", "iso", "isoCode", "iso2", "alpha2", "countryCode", "id"))
        n = _pick(flat, ("name", "countryName", "displayName", "title"))
        text = flat.get("text")
        if text and not (c and n):
            # A text-only record: a short upper-case token is a code, anything else a name.
            if c is None and len(text) <= 3 and text.isupper():
                c = text
            elif n is None:
                n = text
        code.append(c)
        name.append(n)
        attrs.append(flat)
        raw.append(C.dumps(record, where))
    if unread is not None:
        code.append(None)
        name.append(None)
        attrs.append({})
        raw.append(C.dumps(unread, where))
    missing = sum(1 for c in code if c is None) - (unread is not None)
    if missing:
        warnings.append(f"countries: {missing} record(s) without a recognisable code; kept in raw_json")
    cols = {"code": code, "name": name, "attributes": C.map_array(attrs), "raw_json": raw}
    return NormalizeResult(_table("countries", cols, len(code), night), warnings)


def normalize_news(response: Node, night: date | str) -> NormalizeResult:
    """``/news/whatsnew`` → ``news(item_index, news_id, title, published_at, url, body, ...)``."""
    night = as_date(night)
    warnings: list[str] = []
    records, unread, where = _records(response, "news", warnings)
    cols: dict[str, list[Any]] = {
        k: [] for k in ("item_index", "news_id", "title", "published_at", "url", "body", "attributes", "raw_json")
    }
    out_of_range = 0
    for index, record in enumerate(records):
        flat = _flat(record, f"{where}[{index}]")
        cols["item_index"].append(index)
        cols["news_id"].append(_pick(flat, ("id", "guid", "newsId", "key")))
        cols["title"].append(_pick(flat, ("title", "headline", "subject", "name")))
        published = _time(_pick(flat, ("date", "published", "publishDate", "publishedAt", "created", "timestamp", "time")))
        if published is not None and not C.epoch_in_range(published):
            out_of_range += 1
            published = None
        cols["published_at"].append(published)
        cols["url"].append(_pick(flat, ("url", "link", "href", "uri")))
        cols["body"].append(_pick(flat, ("body", "text", "content", "description", "summary", "message")))
        cols["attributes"].append(flat)
        cols["raw_json"].append(C.dumps(record, where))
    if out_of_range:
        warnings.append(f"news: {out_of_range} date(s) outside the years 1-9999; published_at left NULL (kept in raw_json)")
    if unread is not None:
        for key, value in (("item_index", 0), ("raw_json", C.dumps(unread, where)), ("attributes", {})):
            cols[key].append(value)
        for key in ("news_id", "title", "published_at", "url", "body"):
            cols[key].append(None)
    n = len(cols["item_index"])
    arrays: dict[str, Any] = dict(cols)
    arrays["published_at"] = pa.array(cols["published_at"], pa.int64()).cast(SCHEMAS["news"].field("published_at").type)
    arrays["attributes"] = C.map_array(cols["attributes"])
    return NormalizeResult(_table("news", arrays, n, night), warnings)
