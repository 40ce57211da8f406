"""The lake's raw answers (``_raw/snapshot_date=D/``): every paid body kept as received, then named
by its status (:mod:`~tourneylake.lake.raw`), in segments (:mod:`~tourneylake.lake.segments`)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from datetime import date, datetime

from tourneylake.errors import LakeError
from tourneylake.lake.layout import check_name, folder_nights
from tourneylake.lake.raw import OK, STATUS, RawResponse, as_date, key_digest, raw_file_bytes, raw_stamps, read_raws
from tourneylake.lake.segments import RawRef, SegmentWriter, night_index, writer_for
from tourneylake.lake.storage import AnyPath

__all__ = ["RawAnswers", "check_raw_request", "new_token"]

# Key fields that look like credentials: refused so a secret can never reach the lake.
_CREDENTIAL_KEY = re.compile(r"pass|pwd|user.?name|secret|token|app.?key|api.?key|credential|auth", re.IGNORECASE)


def new_token() -> str:
    """A new stored body's name among the answers to its request."""
    return uuid.uuid4().hex[:12]


def check_raw_request(resource: str, key: Mapping[str, str], fmt: str) -> None:
    """What a body is kept under is checked first: a known format, and a key that holds no
    credential (a secret can never reach the lake)."""
    check_name("resource", resource)
    bad = [k for k in key if _CREDENTIAL_KEY.search(str(k))]
    if bad:
        raise LakeError(f"raw response key must not hold credentials (fields {bad}); key by what was asked, not who asked")
    if fmt not in ("json", "xml"):
        raise LakeError(f"unknown format {fmt!r}: expected 'json' or 'xml'")


class RawAnswers:
    """The raw answers under ``root`` (the lake's ``_raw/``); ``fsync``: a body is kept once on
    the disk, not only written (a paid answer survives a power loss)."""

    def __init__(self, root: AnyPath, *, fsync: bool) -> None:
        self.root = root
        self.fsync = fsync

    def writer(self, night: date | str) -> SegmentWriter:
        """This process's segment writer of the night."""
        return writer_for(self.root, as_date(night), fsync=self.fsync)

    def write(
        self,
        night: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
        *,
        token: str | None = None,
    ) -> RawRef:
        """Keep one body, as received (``received``), before anything else touches it; returns
        once it is kept (fsynced, or stored), with its reference, to be :meth:`settle`-d once its
        envelope has been read. ``token`` names the body (a new one by default)."""
        return self.write_soon(night, resource, key, body, fmt, fetched_at, token=token).result()

    def write_soon(
        self,
        night: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
        *,
        token: str | None = None,
    ) -> Future[RawRef]:
        """:meth:`write`, returning the future of the body's reference."""
        check_raw_request(resource, key, fmt)
        night = as_date(night)
        stamp, night_iso = raw_stamps(fetched_at, night)
        payload = raw_file_bytes(resource, key, fmt, stamp, night_iso, body)
        return self.writer(night).add_body(
            token or new_token(), key_digest(key), resource, {str(k): str(v) for k, v in key.items()}, fmt, stamp, payload
        )

    def settle(self, ref: RawRef, status: str, *, at: int | None = None) -> RawRef:
        """Name a body by its status (``at``: when that was decided, if not now); returns its
        reference so named. A body already of that status is left as is."""
        if status != OK and not STATUS.match(status):
            raise LakeError(f"unknown raw status {status!r}")
        if ref.status != status:
            self.writer(ref.night).add_status(ref, status, at=at).result()
        return dataclasses.replace(ref, status=status)

    def refs(self, night: date | str, resource: str | None = None, *, status: str | None = OK) -> list[RawRef]:
        """The night's stored bodies (one resource or all) with ``status`` (``None``: every body),
        in a stable order (resource, then name); one accepted answer per request, its latest."""
        if resource is not None:
            check_name("resource", resource)
        return night_index(self.root, as_date(night)).refresh().refs(resource, status)

    def request_refs(self, night: date | str, resource: str, key: Mapping[str, str], status: str) -> list[RawRef]:
        """The stored bodies of one request (``key``) with ``status``."""
        index = night_index(self.root, as_date(night)).refresh()
        return index.refs(check_name("resource", resource), status, key_digest(key))

    def ref(self, night: date | str, resource: str, key: Mapping[str, str]) -> RawRef | None:
        """The accepted answer to this request, or ``None``."""
        found = self.request_refs(night, resource, key, OK)
        return found[0] if found else None

    def has(self, night: date | str, resource: str, key: Mapping[str, str]) -> bool:
        """Whether an accepted answer to this request is stored."""
        return self.ref(night, resource, key) is not None

    def read(self, night: date | str, resource: str, key: Mapping[str, str]) -> RawResponse | None:
        """The accepted answer to this request, or ``None``."""
        ref = self.ref(night, resource, key)
        return None if ref is None else next(read_raws([ref]))

    def bodies(self, night: date | str, resource: str | None = None, *, status: str | None = OK) -> Iterator[RawResponse]:
        """Stored bodies of a night (one resource or all) with ``status`` (``None``: every
        body), one at a time, in :meth:`refs`'s order."""
        yield from read_raws(self.refs(night, resource, status=status))

    def nights(self) -> list[date]:
        """The nights with raw answers."""
        return folder_nights(self.root)
