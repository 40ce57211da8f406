"""A paid body at rest: its bytes, its name and its status.

A body is first kept as ``received`` and, once its envelope has been read, named by its status:
``ok`` (an accepted answer: one per request, its latest), ``refused-<code>``, ``malformed`` (cut
short) or ``unusable`` (complete, unreadable), so a refusal never hides an accepted answer and a
reader learns a body's status without parsing it. Bodies live in segments (many to a file or
object: :mod:`~tourneylake.lake.segments`); each is kept as the file the first layout held, one
per body: gzipped, a JSON header line (resource, key, format, fetched_at, snapshot_date, sha256,
body_bytes), then the body exactly as received. Files of that layout (``<digest>.json.gz``, and the
earliest, one JSON document with the body inside) still read. The digest is of the sorted key,
which never holds credentials. This module keeps to the standard library, orjson and isal: the
raw saver's process imports it before its first body.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import os
import re
import struct
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson
from isal import isal_zlib

from tourneylake.errors import LakeError
from tourneylake.lake.segments import RawRef, payload_of, take_whole
from tourneylake.lake.storage import StorePath

__all__ = [
    "MALFORMED",
    "OK",
    "RECEIVED",
    "UNUSABLE",
    "RawResponse",
    "as_date",
    "key_digest",
    "raw_file_bytes",
    "raw_stamps",
    "read_raws",
    "status_of",
]

#: A raw body's status: ``ok`` (accepted answer), ``received`` (not yet read), ``refused-<code>``
#: (a service error), ``malformed`` (cut short in transit) or ``unusable`` (complete, unreadable).
OK = "ok"
RECEIVED = "received"
MALFORMED = "malformed"
UNUSABLE = "unusable"
STATUS = re.compile(r"^(received|malformed|unusable|refused-[0-9-]+)$")


@dataclass(frozen=True, slots=True)
class RawResponse:
    """One stored raw response."""

    resource: str
    key: dict[str, str]
    fmt: str
    fetched_at: datetime
    body: bytes
    status: str
    snapshot_date: date
    ref: RawRef


def as_date(value: date | str) -> date:
    """A night as a date, from a date, a datetime or an ISO string."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(value)


def _utc(value: datetime | int | float) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(value, tz=UTC)


def raw_stamps(fetched_at: datetime | int | float, night: date | str) -> tuple[str, str]:
    """A raw file's ``fetched_at`` and ``snapshot_date`` (its night), as its envelope writes them."""
    return _utc(fetched_at).isoformat(), as_date(night).isoformat()


def key_digest(key: Mapping[str, str]) -> str:
    """The raw file name of a key: stable whatever the key's order."""
    canonical = orjson.dumps(sorted((str(k), str(v)) for k, v in key.items()))
    return hashlib.sha256(canonical).hexdigest()[:32]


def status_of(name: str) -> str:
    """``<digest>.json.gz`` is an accepted answer; ``<digest>.<token>.<status>.json.gz`` is not."""
    parts = name[: -len(".json.gz")].split(".")
    return OK if len(parts) == 1 else parts[-1]


def raw_file_bytes(resource: str, key: Mapping[str, str], fmt: str, fetched_at: str, night: str, body: bytes) -> bytes:
    """A raw file's bytes: a JSON header line, then the body exactly as received, gzipped (see the module
    docstring)."""
    header = {
        "resource": resource,
        "key": {str(k): str(v) for k, v in key.items()},
        "format": fmt,
        "fetched_at": fetched_at,
        "snapshot_date": night,
        "sha256": hashlib.sha256(body).hexdigest(),
        "body_bytes": len(body),
    }
    # ISA-L's deflate at level 1: a gzip stream any gzip reads, in a fraction of zlib's time.
    # 31: a gzip header and trailer.
    return isal_zlib.compress(orjson.dumps(header) + b"\n" + body, 1, 31)


def read_raws(refs: list[RawRef]) -> Iterator[RawResponse]:
    """The stored bodies ``refs`` name, in their order. A segment on an object store is fetched
    whole once while its bodies are read (a few recent ones kept: a night's order visits a
    segment many times; the next ones it needs fetched with it, side by side); a damaged body is a
    :class:`LakeError` naming it (nothing is deleted)."""
    held: OrderedDict[str, bytes] = OrderedDict()
    held_bytes = 0
    wanted = list(dict.fromkeys(r.location for r in refs if r.offset is not None and isinstance(r.location, StorePath)))
    at = {path: number for number, path in enumerate(wanted)}
    for ref in refs:
        try:
            if ref.offset is None:  # a file of the first layout
                data = ref.location.read_bytes()
            elif isinstance(ref.location, StorePath):
                whole = held.get(ref.location.path)
                if whole is None:  # this segment and the next ones the night needs, side by side
                    ahead = [p for p in wanted[at[ref.location] : at[ref.location] + _FETCHED_AT_ONCE] if p.path not in held]
                    kept = {p: take_whole(p.path) for p in ahead}  # whole already, from the index's peeks
                    fetched = ref.location.cat_many([p for p, data in kept.items() if data is None])
                    for path, data in [*((p, d) for p, d in kept.items() if d is not None), *fetched.items()]:
                        held[path.path] = data
                        held_bytes += len(data)
                    if ref.location.path not in held:
                        raise FileNotFoundError(f"{ref.location} is missing")
                    whole = held[ref.location.path]
                held.move_to_end(ref.location.path)
                while held_bytes > _HELD_BYTES and len(held) > 1:
                    held_bytes -= len(held.popitem(last=False)[1])
                data = payload_of(memoryview(whole)[ref.offset : ref.offset + int(ref.length or 0)])
            else:
                with open(ref.location, "rb") as handle:
                    data = payload_of(os.pread(handle.fileno(), int(ref.length or 0), ref.offset))
        except (OSError, struct.error) as exc:
            raise _damaged(ref, exc) from None
        yield raw_from_bytes(data, ref)


#: Bytes of object-store segments :func:`read_raws` keeps while it reads (the night's order
#: goes back and forth between them).
_HELD_BYTES = 256 << 20
#: Object-store segments :func:`read_raws` fetches at once (a round trip each, side by side).
_FETCHED_AT_ONCE = 32


def _damaged(ref: RawRef, exc: BaseException) -> LakeError:
    where = str(ref.location) if ref.offset is None else f"{ref.location} (at byte {ref.offset})"
    return LakeError(
        f"raw body {where} is damaged ({type(exc).__name__}: {exc}); it is kept as is: move it aside to fetch that answer again"
    )


def raw_from_bytes(data: bytes, ref: RawRef) -> RawResponse:
    """One stored body from its file's bytes, in either layout (see the module docstring)."""
    try:
        data = _gunzip(data)
        header = _header_line(data)
        if header is None:  # the earliest layout: one JSON document, the body inside it as text
            header = orjson.loads(data)
            text = header["body"]
            body = base64.b64decode(text) if header.get("body_encoding") == "base64" else text.encode("utf-8")
        else:
            body = data[data.index(b"\n") + 1 :]
            if len(body) != header["body_bytes"]:
                raise ValueError(f"{len(body)} body bytes, the header says {header['body_bytes']}")
        return RawResponse(
            resource=header["resource"],
            key=header["key"],
            fmt=header["format"],
            fetched_at=datetime.fromisoformat(header["fetched_at"]),
            body=body,
            status=ref.status,
            snapshot_date=date.fromisoformat(header["snapshot_date"]),
            ref=ref,
        )
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise _damaged(ref, exc) from None


def _header_line(data: bytes) -> dict[str, Any] | None:
    """The header of a raw file of the current layout: a first line that is a JSON object with
    ``body_bytes``. ``None`` for the first layout (orjson never writes a raw newline; a file
    pretty-printed by hand has one, but its first line is no such object)."""
    end = data.find(b"\n")
    if end < 0:
        return None
    try:
        header = orjson.loads(memoryview(data)[:end])
    except orjson.JSONDecodeError:
        return None
    return header if type(header) is dict and "body_bytes" in header else None


def _gunzip(data: bytes) -> bytes:
    """``gzip.decompress``: one member (what the lake writes) by ISA-L's inflate directly, which
    checks its CRC and length faster than zlib; anything
    else (several members, padding, damage) by ``gzip.decompress`` itself, for its result or
    its exception."""
    with contextlib.suppress(isal_zlib.error):  # type: ignore[arg-type]  # isal's stub calls the class an instance
        reader = isal_zlib.decompressobj(31)  # 16 + MAX_WBITS: a gzip header and trailer
        out = reader.decompress(data)
        if reader.eof and not reader.unused_data:
            return out
    return gzip.decompress(data)
