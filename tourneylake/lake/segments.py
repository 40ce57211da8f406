"""Raw answers in segments: many bodies to a file (or object), appended and sealed by size or time.

A writer (one per process, lake and night: :func:`writer_for`) appends records to segments of its
own, ``_raw/snapshot_date=D/w-<writer>/<seq>.seg``: a body as received, and later the status it
was found to have (a body's status changes by a new record, never in place). A record is a frame:
``TLr1``, the lengths of its header and payload, its header (JSON: the body's token, request key,
digest, resource, status), its payload (a body's file of the first layout: one gzip member, a JSON
line then the body, so ``zcat`` reads one cut out). Whoever waits for a record hears of it once it
is kept: on a disk, appended with the records that came meanwhile and fsynced together (a group
commit; a status record once written, as a rename was), the segment sealed at 64 MiB or after ten
minutes; on an object store, one PUT of what came in the last few milliseconds (an index frame
first, so a reader needs one ranged GET per segment). A killed writer leaves every whole record;
a torn last frame is skipped. :class:`NightIndex` replays a night's segments and first-layout
files (``<resource>/<digest>[.<token>.<status>].json.gz``): every body with its latest status.
Kept to the standard library, orjson and the lake's storage: the raw saver imports it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import struct
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from tourneylake.errors import LakeError, one_line
from tourneylake.lake import outages
from tourneylake.lake.storage import AnyPath, StorePath, fsync_dir

__all__ = ["NightIndex", "RawRef", "SegmentWriter", "night_index", "writer_for"]

log = logging.getLogger(__name__)

MAGIC = b"TLr1"
_LENGTHS = struct.Struct("<II")
_FRAME_HEAD = len(MAGIC) + _LENGTHS.size
SUFFIX = ".seg"
WRITER_PREFIX = "w-"
OK = "ok"
RECEIVED = "received"
#: A segment on a disk is sealed (a new one begun) past this size or age.
SEAL_BYTES = 64 << 20
SEAL_AGE_S = 600.0
#: On an object store a writer starts at most one PUT in this long (the records that come meanwhile
#: share the next one), unless this many bytes are waiting already; a record that finds it idle
#: for longer goes at once. Longer than the ledger's: a call waits for its body's PUT off its HTTP
#: slot, so a longer wait costs no throughput, and fewer PUTs cost the store and the saver less.
LINGER_S = 0.05
BATCH_BYTES = 8 << 20
#: The linger of a writer in the harvest's own process (:func:`writer_for`: the free answers, a
#: small night, the bodies a saver left): none. Its callers wait for each record, a status before
#: the step reads its answer back, and a record that comes while a PUT is out joins the next one.
IN_PROCESS_LINGER_S = 0.0
#: Tries of one segment's PUT before the records waiting for it are told it failed (a failure
#: the store may get over: until it has been out for ``outages.KEEP_PAID_S``).
_PUT_TRIES = 5
#: What a reader fetches first of an object-store segment: its index frame, most often the
#: whole segment (a store's segment is what came in 50 ms): then kept for :func:`take_whole`.
_INDEX_PEEK = 1 << 18
#: Bytes of whole segments an index's peeks keep for the reads that follow (each taken once).
_WHOLE_BYTES = 32 << 20
#: Segments whose index a reader asks for at once.
_PEEKS_AT_ONCE = 64


@dataclass(frozen=True, slots=True)
class RawRef:
    """Where one stored body is, and what it answers: a record of a segment (``offset`` and
    ``length`` of its frame) or a file of the first layout (``offset`` None)."""

    night: date
    resource: str
    digest: str
    token: str
    status: str
    location: AnyPath
    offset: int | None = None
    length: int | None = None
    key: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    fetched_at: str = ""

    @property
    def name(self) -> str:
        """The body's name in the first layout (what orders a night's bodies: resource, then name)."""
        return f"{self.digest}.json.gz" if self.status == OK else f"{self.digest}.{self.token}.{self.status}.json.gz"


def frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    head = orjson.dumps(header)
    return MAGIC + _LENGTHS.pack(len(head), len(payload)) + head + payload


def frames(data: bytes | memoryview, start: int = 0) -> tuple[list[tuple[int, int, dict[str, Any]]], int]:
    """The whole frames of ``data`` from ``start``: (offset, length, header) each, and where the
    first torn or unreadable frame (or the end) is."""
    view = memoryview(data)
    out, at = [], start
    while len(view) - at >= _FRAME_HEAD:
        if bytes(view[at : at + 4]) != MAGIC:
            break
        head, payload = _LENGTHS.unpack_from(view, at + 4)
        end = at + _FRAME_HEAD + head + payload
        if end > len(view):
            break
        try:
            header = orjson.loads(view[at + _FRAME_HEAD : at + _FRAME_HEAD + head])
        except orjson.JSONDecodeError:
            break
        out.append((at, end - at, header))
        at = end
    return out, at


def payload_of(record: bytes | memoryview) -> bytes:
    """A frame's payload (a body's first-layout file)."""
    head, payload = _LENGTHS.unpack_from(record, 4)
    start = _FRAME_HEAD + head
    return bytes(record[start : start + payload])


# ---------------------------------------------------------------------- writing
class _Pending:
    __slots__ = ("data", "done", "header", "is_body")

    def __init__(self, header: dict[str, Any], data: bytes, done: Future[Any], is_body: bool) -> None:
        self.header, self.data, self.done, self.is_body = header, data, done, is_body


#: What an object-store segment holds, as its index says: (offset, length, header) per record.
Entries = list[tuple[int, int, dict[str, Any]]]


class SegmentWriter:
    """One process's segments for one night of one lake (see the module docstring). Thread-safe:
    :meth:`add_body` and :meth:`add_status` queue a record and return a future, done once it is
    kept; one thread of the writer's own writes them, in order. ``on_stored``: told of each
    object-store segment once it is stored, with its index's entries (the raw saver tells the
    harvest, whose reads of the night then need no GET of it); ``linger``: on a store, the least
    time between two PUTs (see :data:`LINGER_S`)."""

    def __init__(
        self,
        raw_root: AnyPath,
        night: date,
        *,
        fsync: bool,
        writer_id: str | None = None,
        on_stored: Callable[[StorePath, Entries], None] | None = None,
        linger: float = LINGER_S,
    ) -> None:
        self.night = night
        self.on_stored = on_stored
        self.linger = linger
        self.folder = raw_root / f"snapshot_date={night.isoformat()}" / f"{WRITER_PREFIX}{writer_id or uuid.uuid4().hex[:16]}"
        self.remote = isinstance(self.folder, StorePath)
        self.fsync = fsync
        self._cv = threading.Condition()
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._last_put = 0.0  # when the last PUT started (time.monotonic())
        self._thread: threading.Thread | None = None
        self._closing = False
        self._seq = 0
        self._fd: int | None = None  # a disk's open segment
        self._size = 0
        self._opened_at = 0.0
        self._failed: BaseException | None = None  # a disk's write that failed: the next one begins a new segment

    # ------------------------------------------------------------------ queueing
    def add_body(
        self,
        token: str,
        digest: str,
        resource: str,
        key: dict[str, str],
        fmt: str,
        fetched_at: str,
        payload: bytes,
        status: str = RECEIVED,
    ) -> Future[RawRef]:
        """A body's record (``payload``: its first-layout file); the future's result is its reference."""
        header: dict[str, Any] = {"k": "body", "token": token, "digest": digest, "resource": resource, "status": status}
        header.update(key=key, format=fmt, fetched_at=fetched_at, at=time.time_ns())
        return self._queue(header, payload, is_body=True)

    def add_status(self, ref: RawRef, status: str, *, at: int | None = None) -> Future[None]:
        """A body named by its status (``at``: when it was decided, nanoseconds since the epoch;
        the latest decision is the body's status)."""
        header: dict[str, Any] = {"k": "status", "token": ref.token, "digest": ref.digest, "resource": ref.resource}
        header.update(status=status, at=at or time.time_ns())
        return self._queue(header, b"", is_body=False)

    def _queue(self, header: dict[str, Any], payload: bytes, *, is_body: bool) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_running_or_notify_cancel()  # kept whether or not its waiter is still there
        item = _Pending(header, frame(header, payload), done, is_body)
        with self._cv:
            if self._closing:
                raise LakeError(f"the raw segment writer of {self.folder} is closed")
            self._pending.append(item)
            self._pending_bytes += len(item.data)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tourneylake-segments", daemon=True)
                self._thread.start()
            self._cv.notify()
        return done

    def close(self) -> None:
        """Write what is queued, then seal the segment; later records are refused."""
        with self._cv:
            self._closing = True
            self._cv.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        self._seal()

    # ------------------------------------------------------------------ the writer's thread
    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if not self._pending:
                    return
                if self.remote:  # at most one PUT a LINGER_S: the records that come meanwhile join the next
                    while not self._closing and self._pending_bytes < BATCH_BYTES:
                        left = self._last_put + self.linger - time.monotonic()
                        if left <= 0:
                            break
                        self._cv.wait(left)
                    self._last_put = time.monotonic()
                batch, self._pending, self._pending_bytes = self._pending, [], 0
            try:
                refs = self._put(batch) if self.remote else self._append(batch)
            except BaseException as exc:  # noqa: BLE001 - every waiter hears of it
                for item in batch:
                    if not item.done.done():
                        item.done.set_exception(exc)
                continue
            for item, ref in zip(batch, refs, strict=True):
                if not item.done.done():
                    item.done.set_result(ref if item.is_body else None)
            _remember(self, batch, refs)

    def _refs(self, location: AnyPath, batch: list[_Pending], start: int) -> list[RawRef | None]:
        out: list[RawRef | None] = []
        at = start
        for item in batch:
            out.append(_ref(self.night, location, at, len(item.data), item.header) if item.is_body else None)
            at += len(item.data)
        return out

    def _append(self, batch: list[_Pending]) -> list[RawRef | None]:
        """A disk: the batch appended to the open segment; the status records are done once
        written, the bodies once fsynced."""
        assert isinstance(self.folder, Path)
        new = self._open_segment()
        start = self._size
        data = b"".join(item.data for item in batch)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]  # type: ignore[arg-type]
        except BaseException:
            self._broken(start)
            raise
        self._size += len(data)
        refs = self._refs(self._path(), batch, start)
        for item in batch:
            if not item.is_body and not item.done.done():
                item.done.set_result(None)
        if self.fsync and any(item.is_body for item in batch):
            try:
                os.fdatasync(self._fd)  # type: ignore[arg-type]
            except BaseException:
                self._broken(start)
                raise
            if new:
                fsync_dir(self.folder)
                fsync_dir(self.folder.parent)
        return refs

    def _open_segment(self) -> bool:
        """The disk's segment to append to: the open one, or a new one (the first, or past its
        size or age); whether it is new."""
        assert isinstance(self.folder, Path)
        if self._fd is not None and self._size < SEAL_BYTES and time.monotonic() - self._opened_at < SEAL_AGE_S:
            return False
        self._seal()
        while True:
            path = self._path()
            assert isinstance(path, Path)
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o666)
                break
            except FileNotFoundError:
                self.folder.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                self._seq += 1
        self._size, self._opened_at = 0, time.monotonic()
        return True

    def _broken(self, good: int) -> None:
        """A write that failed (a full disk): the segment cut back to its last whole record and
        sealed; the next batch begins a new one."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, good)
        self._seal()

    def _seal(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
            self._seq += 1

    def _path(self) -> AnyPath:
        return self.folder / f"{self._seq:08d}{SUFFIX}"

    def _put(self, batch: list[_Pending]) -> list[RawRef | None]:
        """An object store: the batch as one new segment, its index frame first (one PUT, whole or
        absent; tried again on a failure, under the same name). Paid bodies: a store that is out
        is tried until :data:`~tourneylake.lake.outages.KEEP_PAID_S` (each PUT rides out the
        first minute itself), while the night, whose other requests give up, stops paying."""
        records = b"".join(item.data for item in batch)
        entries, at = [], 0
        for item in batch:  # offsets from the end of the index frame
            entries.append([at, len(item.data), item.header])
            at += len(item.data)
        index = frame({"k": "index", "records": entries})
        path = self._path()
        first_failure = 0.0
        for attempt in itertools.count():
            try:
                path.write_bytes(index + records)
                break
            except (LakeError, OSError) as exc:
                first_failure = first_failure or time.monotonic()
                store_out = outages.transient_text(str(exc))
                keep_trying = store_out and not outages.out_too_long(first_failure, outages.KEEP_PAID_S)
                if attempt + 1 >= _PUT_TRIES and not keep_trying:
                    raise LakeError(f"a raw segment could not be stored at {path}: {one_line(exc)}") from None
                time.sleep(outages.wait_before(attempt + 3) if store_out else 0.05 * 2 ** min(attempt, 6))
        self._seq += 1
        assert isinstance(path, StorePath)
        stored: Entries = []
        at = len(index)
        for item in batch:
            stored.append((at, len(item.data), item.header))
            at += len(item.data)
        night_index(self.folder.parent.parent, self.night).known(path, stored)
        if self.on_stored is not None:
            self.on_stored(path, stored)
        return self._refs(path, batch, len(index))


def _ref(night: date, location: AnyPath, offset: int, length: int, header: dict[str, Any]) -> RawRef:
    return RawRef(
        night=night,
        resource=header["resource"],
        digest=header["digest"],
        token=header["token"],
        status=header.get("status", RECEIVED),
        location=location,
        offset=offset,
        length=length,
        key=header.get("key") or {},
        fetched_at=header.get("fetched_at", ""),
    )


# ---------------------------------------------------------------------- one writer per process and night
_WRITERS: dict[tuple[str, date], SegmentWriter] = {}
_WRITERS_LOCK = threading.Lock()


def writer_for(raw_root: AnyPath, night: date, *, fsync: bool) -> SegmentWriter:
    """This process's writer of ``night`` under ``raw_root`` (made on first use)."""
    key = (str(raw_root), night)
    with _WRITERS_LOCK:
        writer = _WRITERS.get(key)
        if writer is None or writer._closing:
            writer = _WRITERS[key] = SegmentWriter(raw_root, night, fsync=fsync, linger=IN_PROCESS_LINGER_S)
        return writer


# ---------------------------------------------------------------------- reading
@dataclass
class _Body:
    ref: RawRef
    at: int


class NightIndex:
    """Every body of one night and its latest status, from the night's segments and first-layout
    files; :meth:`refresh` reads only what was written since (a segment on a disk may grow; on an
    object store a segment is read once, by its index frame)."""

    def __init__(self, raw_root: AnyPath, night: date) -> None:
        self.folder = raw_root / f"snapshot_date={night.isoformat()}"
        self.night = night
        self._lock = threading.RLock()
        self._bodies: dict[tuple[str, str], _Body] = {}  # (digest, token) -> body (its first record wins)
        self._statuses: dict[tuple[str, str], tuple[int, str]] = {}  # (digest, token) -> (when, status): the latest wins
        self._current: dict[tuple[str, str], RawRef] = {}  # (digest, token) -> its ref with its status, once asked for
        self._read: dict[str, int] = {}  # segment -> bytes read (whole frames)

    def known(self, segment: StorePath, entries: Entries) -> None:
        """An object-store segment's records, from its index as its writer stored it: the segment
        is not read again (a segment on a store is stored whole, once)."""
        with self._lock:
            self.add(segment, entries)
            self._read[segment.path] = 1

    def add(self, location: AnyPath, entries: Entries) -> None:
        with self._lock:
            for offset, length, header in entries:
                kind = header.get("k")
                token = (str(header.get("digest")), str(header.get("token")))
                at = int(header.get("at") or 0)
                if kind == "body" and token not in self._bodies:
                    self._bodies[token] = _Body(_ref(self.night, location, offset, length, header), at)
                held = self._statuses.get(token)
                # A body's own status stands until a status record says otherwise; the latest record wins.
                if (kind == "body" and held is None) or (kind == "status" and (held is None or at >= held[0])):
                    self._statuses[token] = (at, str(header.get("status", RECEIVED)))
                    self._current.pop(token, None)

    def refresh(self) -> NightIndex:
        with self._lock:
            if isinstance(self.folder, StorePath):
                self._refresh_store()
            else:
                self._refresh_disk()
        return self

    def _refresh_disk(self) -> None:
        assert isinstance(self.folder, Path)
        try:
            entries = os.listdir(self.folder)
        except FileNotFoundError:
            return
        for entry in sorted(entries):
            folder = self.folder / entry
            if entry.startswith(WRITER_PREFIX):
                for name in sorted(os.listdir(folder)):
                    if name.endswith(SUFFIX):
                        self._read_disk_segment(folder / name)
            elif folder.is_dir():
                for name in sorted(os.listdir(folder)):
                    if name.endswith(".json.gz"):
                        self._add_legacy(folder / name, entry, name)

    def _read_disk_segment(self, path: Path) -> None:
        start = self._read.get(str(path), 0)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return
        if size <= start:
            return
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read()
        found, end = frames(data)
        self.add(path, [(start + offset, length, header) for offset, length, header in found if header.get("k") != "index"])
        self._read[str(path)] = start + end

    def _refresh_store(self) -> None:
        """One listing of the night (a page per thousand objects), then each new segment's index."""
        assert isinstance(self.folder, StorePath)
        fs = self.folder.fs
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.invalidate_cache(self.folder.path)
        try:
            found = fs.find(self.folder.path)
        except FileNotFoundError:
            return
        new = []
        for name in sorted(found):
            relative = name[len(self.folder.path) + 1 :]
            parts = relative.split("/")
            if len(parts) != 2:
                continue
            if parts[0].startswith(WRITER_PREFIX) and parts[1].endswith(SUFFIX):
                if name not in self._read:
                    new.append(StorePath(fs, name))
            elif parts[1].endswith(".json.gz"):
                self._add_legacy(StorePath(fs, name), parts[0], parts[1])
        for start in range(0, len(new), _PEEKS_AT_ONCE):  # side by side: a round trip each
            batch = new[start : start + _PEEKS_AT_ONCE]
            heads = fs.cat_ranges([p.path for p in batch], [0] * len(batch), [_INDEX_PEEK] * len(batch), on_error="return")
            for path, head in zip(batch, heads, strict=True):
                if isinstance(head, FileNotFoundError):
                    continue
                if isinstance(head, BaseException):
                    raise head
                if len(head) < _INDEX_PEEK:  # shorter than asked: the whole segment
                    _WHOLE.keep(path.path, bytes(head))
                self._read_store_segment(path, bytes(head))

    def _read_store_segment(self, path: StorePath, head: bytes) -> None:
        """A segment's index from its first bytes (``head``), read further when it is longer."""
        with contextlib.suppress(FileNotFoundError):
            if len(head) >= _FRAME_HEAD and head[:4] == MAGIC:
                size = _FRAME_HEAD + sum(_LENGTHS.unpack_from(head, 4))
                if size > len(head):
                    head = bytes(path.fs.cat_file(path.path, start=0, end=size))
            found, _ = frames(head)
            if found and found[0][2].get("k") == "index":
                records, start = found[0][2].get("records") or [], found[0][1]
                self.add(path, [(start + int(o), int(n), h) for o, n, h in records])
            else:  # no index frame (not ours, or damaged): the whole object is read
                data = path.read_bytes()
                self.add(path, [f for f in frames(data)[0] if f[2].get("k") != "index"])
            self._read[path.path] = 1

    def _add_legacy(self, path: AnyPath, resource: str, name: str) -> None:
        """A body's file of the first layout (its status in its name; a status record may follow)."""
        parts = name[: -len(".json.gz")].split(".")
        status = OK if len(parts) == 1 else parts[-1]
        token = parts[1] if len(parts) == 3 else "first"  # an accepted answer's file had no token (one a request)
        with self._lock:
            if (parts[0], token) not in self._bodies:
                ref = RawRef(night=self.night, resource=resource, digest=parts[0], token=token, status=status, location=path)
                self._bodies[parts[0], token] = _Body(ref, 0)
                self._statuses.setdefault((parts[0], token), (0, status))

    # ------------------------------------------------------------------ queries
    def _current_ref(self, token: tuple[str, str], body: _Body) -> RawRef:
        """A body's ref with its latest status (made once per status: a night's queries list
        the same bodies again and again)."""
        ref = self._current.get(token)
        if ref is None:
            ref = self._current[token] = replace(body.ref, status=self._statuses.get(token, (0, body.ref.status))[1])
        return ref

    def refs(self, resource: str | None = None, status: str | None = OK, digest: str | None = None) -> list[RawRef]:
        """The night's bodies (of one resource, one request's ``digest``) with ``status``
        (``None``: every body), in the night's order: resource, then name. A request answered
        more than once has one accepted answer, its latest; the others are not listed."""
        with self._lock:
            current = [
                (self._current_ref(token, body), body.at)
                for token, body in self._bodies.items()
                if (resource is None or body.ref.resource == resource) and (digest is None or body.ref.digest == digest)
            ]
        accepted: dict[tuple[str, str], tuple[RawRef, int]] = {}
        for ref, at in current:  # the latest fetched (the latest kept, when fetched at the same moment)
            if ref.status == OK:
                held = accepted.get((ref.resource, ref.digest))
                if held is None or (ref.fetched_at, at) >= (held[0].fetched_at, held[1]):
                    accepted[(ref.resource, ref.digest)] = (ref, at)
        listed = [ref for ref, _ in accepted.values()] if status in (OK, None) else []
        if status != OK:
            listed += [ref for ref, _ in current if ref.status != OK and (status is None or ref.status == status)]
        return sorted(listed, key=lambda ref: (ref.resource, ref.name))


_INDEXES: dict[tuple[str, date], NightIndex] = {}
_INDEXES_LOCK = threading.Lock()


def night_index(raw_root: AnyPath, night: date) -> NightIndex:
    """This process's index of ``night`` (made on first use; :meth:`NightIndex.refresh` it to
    see what other processes wrote since)."""
    key = (str(raw_root), night)
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
        if index is None:
            index = _INDEXES[key] = NightIndex(raw_root, night)
        return index


def forget_indexes() -> None:
    """Drop this process's indexes (a segment was changed by hand: read every one again)."""
    with _INDEXES_LOCK:
        _INDEXES.clear()
        _WHOLE.clear()


class _WholeSegments:
    """Object-store segments an index's peek fetched whole (a segment on a store is stored once
    and never changes), so that reading their bodies next needs no second GET: each taken once,
    at most ``total_bytes`` of them kept (the oldest dropped first)."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self._kept: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def keep(self, path: str, data: bytes) -> None:
        with self._lock:
            self._size += len(data) - len(self._kept.pop(path, b""))
            self._kept[path] = data
            while self._size > self.total_bytes:
                self._size -= len(self._kept.popitem(last=False)[1])

    def take(self, path: str) -> bytes | None:
        """The bytes kept for ``path``, then forgotten here."""
        with self._lock:
            data = self._kept.pop(path, None)
            self._size -= len(data or b"")
            return data

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._size = 0


_WHOLE = _WholeSegments(total_bytes=_WHOLE_BYTES)


def take_whole(path: str) -> bytes | None:
    """A segment's bytes that an index's peek fetched whole (then forgotten here), or ``None``."""
    return _WHOLE.take(path)


def _remember(writer: SegmentWriter, batch: list[_Pending], refs: list[RawRef | None]) -> None:
    """What this process wrote, in its own index at once (no listing needed to read it back; a
    store's segment is in it already, whole: see :meth:`NightIndex.known`)."""
    if writer.remote:
        return
    raw_root = writer.folder.parent.parent
    index = night_index(raw_root, writer.night)
    entries = []
    for item, ref in zip(batch, refs, strict=True):
        if ref is not None:
            entries.append((int(ref.offset or 0), int(ref.length or 0), item.header))
    if entries:
        location = next(ref.location for ref in refs if ref is not None)
        index.add(location, entries)
    statuses = [(0, 0, item.header) for item in batch if not item.is_body]
    if statuses:
        index.add(writer.folder, statuses)
