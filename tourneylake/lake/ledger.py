"""The search ledger: every metered call, when, what, cost, searches left, outcome.

One writer (:class:`LedgerWriter`), one reader (:class:`Ledger`), one schema (the catalogue's
``search_ledger``). The durable record is a JSON-lines file per run under
``_ledger/snapshot_date=D/``, each line flushed as written, so a killed process keeps its
record of what it paid for; the ``search_ledger`` partition is its export for the warehouse.
Lines: ``run`` (the header: searches left before the run, the account's name, a digest of the
login), ``sent`` (before a metered attempt goes out: write-ahead), ``withdrawn`` (announced, then
not sent after all), ``entry`` (a row: an attempt's outcome or a reconciliation), ``closed``. A run is ``run-<id>.open.jsonl`` while it
writes (``flock``-ed) and ``run-<id>.jsonl`` once closed; one that ends with calls announced but
never answered stays ``.open``, for the next run to reconcile (:meth:`Ledger.dead_runs`,
:func:`unexplained_charges`). On an object store a run is a folder of one-PUT segments instead.
With shared state (``TOURNEYLAKE_STATE_URL``) the same lines are rows of the state database, a
run held by its writer's connection (:mod:`tourneylake.lake.postgres`); the reader gives the
same rows either way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import orjson
import pyarrow as pa

from tourneylake.errors import TourneylakeError
from tourneylake.lake.cost_memo import CostMemo, RunCosts
from tourneylake.lake.lake import Lake
from tourneylake.lake.layout import PARTITION
from tourneylake.lake.outages import KEEP_PAID_S, wait_before
from tourneylake.lake.postgres import LeaseLost, RunLease
from tourneylake.lake.storage import AnyPath, StorePath, atomic_write, remove_tree
from tourneylake.schemas import TABLES

__all__ = [
    "COLUMNS",
    "LEDGER_DIR",
    "NOT_CHARGED",
    "Ledger",
    "LedgerError",
    "LedgerWriter",
    "RunLog",
    "login_digest",
    "unexplained_charges",
]

log = logging.getLogger(__name__)

#: ``Ledger.spent_since``'s default: every account's runs.
EVERY_ACCOUNT = object()

LEDGER_DIR = "_ledger"
_SPEC = TABLES["search_ledger"]
#: The table's columns as the JSON lines hold them (``snapshot_date`` is the folder).
SCHEMA = pa.schema([f for f in _SPEC.schema if f.name != PARTITION])
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
#: What a reader of one run (:func:`_read_run_if_there`) gives back.
_Read = TypeVar("_Read")
_REQUIRED = frozenset(f.name for f in SCHEMA if f.name in ("called_at", "run_id", "resource", "cost", "outcome"))
#: The outcome after which the service may have charged a call we did not book (no answer read).
UNCERTAIN = "transport_error"
RECONCILED = "reconciled"
#: What the rows booked that the service did not count (lookups without data it let off): a
#: negative cost, so the night's bill is what the service charged.
NOT_CHARGED = "not_charged"
RECONCILED_AFTER_CRASH = "reconciled_after_crash"
#: A drop in the searches left that this run's calls cannot explain (another client spent them):
#: recorded with cost 0, so it is never charged to the run or its night's cap.
EXTERNAL_SPENDING = "external_spending"


class LedgerError(TourneylakeError, ValueError):
    """A ledger row that does not fit the schema, or a ledger file that cannot be read."""


#: Object store: the runs this process is writing (its stand-in for the local ``flock``).
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()
OPEN_SUFFIX = ".open"  # object store: ``run-<id>.open/`` holds an open run's segments
#: Object store: the writer starts at most one PUT in this long (a write-ahead line does not hold
#: its call's HTTP slot while it waits, see ``AsyncClient.send``).
LINGER_S = 0.025
#: Object store or shared state: how long the rows of a run's paid calls are tried again, from
#: their first failed write, before the run is left open for the next run to reconcile (each
#: write already rides out the store's outage for a minute: see ``outages``).
KEEP_ROWS_S = KEEP_PAID_S


def _night_dir(lake: Lake, night: date) -> AnyPath:
    return lake.root / LEDGER_DIR / f"{PARTITION}={night.isoformat()}"


def _dumps(line: Mapping[str, Any]) -> bytes:
    return orjson.dumps(line, option=orjson.OPT_NAIVE_UTC) + b"\n"


class LedgerWriter:
    """Append-only log of one run for one night. Thread-safe. Use as a context manager (or call
    :meth:`close`): the file is created on the first line, with the run header.

    :meth:`sent` and :meth:`record` return once their line is in the file; :meth:`sent_soon`
    and :meth:`record_soon` return a future for it, which the asynchronous client waits for
    (the call goes out, or its caller hears of the answer, only once the line is written).

    On a local disk the caller writes the line itself, under the writer's lock (so in the
    order asked for), and the future is done when it returns: a line is one ``write`` to the
    page cache, cheaper than a hand-off to a thread. A run whose file is created is locked
    before it is visible (created under a temporary name, then renamed), and the kernel drops
    the lock when the process dies; a run that ends (normally, on an exception, a Ctrl-C) with
    calls announced but never answered is not closed but left ``.open``, like a killed one.

    On an object store nothing can be appended to, renamed atomically or locked: the lines are
    written by one thread of the writer's own, in order, even if whoever waits for one is
    cancelled, as a group commit: every line that came while the previous write was under way
    goes in the next one, one small object ``run-<id>.open/<seq>.jsonl`` (one PUT, whole or
    absent; the header with the first), and each waiter hears of its line once that object is
    stored; closing writes the whole run as ``run-<id>.jsonl`` and deletes the folder. Such a run is held while a writer of this
    process has it open or the process its header names is alive on this host: the one-writer
    rule (one writer per account and night) makes an open run of another host a dead one.

    A write that fails (once the store's outage has been ridden out for a minute) fails the
    write-ahead lines it held, and every new one while the ledger cannot be written: their calls
    do not go out, so a night whose ledger cannot be written stops paying. Its rows (the calls
    already paid for) are not given up: each is tried again, in order, until it is written, for
    up to :data:`KEEP_ROWS_S` after its first failure, and a later row is never refused because an
    earlier write failed. Only rows still unwritten then (or on a local disk, any line that
    failed) leave the run open, for the next run to book what the service charged beyond its
    rows: a lump reconciliation is the last resort."""

    def __init__(
        self,
        lake: Lake,
        night: date,
        run_id: str,
        *,
        remaining_before: int | None,
        account: str | None = None,
        login: str | None = None,
    ) -> None:
        self.directory = _night_dir(lake, night)
        self.night = night
        self.run_id = run_id
        self.remaining_before = remaining_before
        self.account = account  # the account's name (never its secret), or None
        self.login = login  # a digest of the username the service counts against (see `login_digest`)
        self._remote = not lake.local
        self._shared = lake.shared  # the state database, when set: lines are its rows
        self._lease: RunLease | None = None  # shared state: the run's connection, holding it
        self._segments = 0  # object store: segments written
        self._done = False  # object store: closed (or left open for the next run)
        self._written: list[bytes] = []  # object store: the run's lines, for the closed object
        self.started_at = datetime.now(UTC)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: AnyPath | None = None
        self.spent = 0
        self.attempts = 0
        self.lowest_remaining: int | None = None  # the fewest searches left any answer of the run reported
        self._unanswered: dict[tuple[str | None, Any], str] = {}  # (call, attempt) → resource, while in flight
        self._transport_failures: Counter[str] = Counter()  # resources of attempts with no answer read
        self._writer: threading.Thread | None = None  # object store: the thread that writes the lines
        self._batch: list[tuple[Mapping[str, Any], Future[None]]] = []  # object store: lines queued for it
        self._wake = threading.Condition(self._lock)
        # The writer thread's pause between writes: an object store's PUTs are spaced (lines that
        # come meanwhile share one); a database's transactions are not (each takes what came).
        self._linger = LINGER_S if self._shared is None else 0.0
        self._failed: BaseException | None = None  # rows given up (a local disk: a line): the run stays open
        self._failing: BaseException | None = None  # the last write failed: no write-ahead line is taken
        self._failing_since = 0.0  # time.monotonic() of the first failure of the rows being tried again
        self._failed_writes = 0  # writes failed in a row
        self._closing = False  # close() has begun: no line is taken after it

    @property
    def path(self) -> AnyPath | None:
        return self._path

    @property
    def remote(self) -> bool:
        """Whether the run is on an object store (its lines are PUT in groups by a thread)."""
        return self._remote

    @property
    def uncertain(self) -> Counter[str]:
        """Resources of the calls the service may have charged that no row books."""
        return _uncertain(self._unanswered.values(), self._transport_failures)

    def _header(self) -> dict[str, Any]:
        header = {
            "kind": "run",
            "run_id": self.run_id,
            "started_at": self.started_at,
            "remaining_before": self.remaining_before,
            "pid": os.getpid(),
        }
        if self.account is not None:
            header["account"] = self.account
        if self.login is not None:
            header["login"] = self.login
        if self._remote and self._shared is None:  # no flock there: the host and pid tell a live writer from a dead one
            header["host"] = socket.gethostname()
        return header

    def _write_segment(self, lines: list[Mapping[str, Any]]) -> None:
        """Object store: one object for the lines written together (see the class docstring); a
        segment whose write failed is written again under the same name (the header with the
        first one that lands)."""
        data = b"".join(_dumps(line) for line in lines)
        if self._path is None:
            self._path = self.directory / f"run-{self.run_id}{OPEN_SUFFIX}"
            with _LIVE_LOCK:
                _LIVE.add(str(self._path))
        if self._segments == 0:
            data = _dumps(self._header()) + data
        atomic_write(self._path / f"{self._segments:08d}.jsonl", data, fsync=True)
        self._segments += 1
        self._written.append(data)

    def _write_lines(self, lines: list[Mapping[str, Any]]) -> None:
        """The writer thread's group of lines: one object on a store, one transaction of the
        shared state database (its run held by the lease's connection)."""
        if self._shared is None:
            self._write_segment(lines)
            return
        if self._lease is None:
            self._lease = RunLease(self._shared, self.run_id, self.night, self._header())
        self._lease.append(lines)

    def _write(self, line: Mapping[str, Any]) -> None:
        if self._file is None:
            directory = self.directory
            assert isinstance(directory, Path)  # a local ledger (an object store's writes segments)
            directory.mkdir(parents=True, exist_ok=True)
            # Locked before it is visible: a reconciler never mistakes a starting run for a dead one.
            staging = directory / f".run-{self.run_id}.{uuid.uuid4().hex}.starting"
            handle = open(staging, "ab")  # noqa: SIM115 - kept open for the run, closed in close()
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            opened = directory / f"run-{self.run_id}.open.jsonl"
            os.replace(staging, opened)
            self._path = opened
            self._file = handle
            handle.write(_dumps(self._header()))
        self._file.write(_dumps(line))
        self._file.flush()

    def _refusal(self) -> LedgerError:
        why = self._failing or self._failed
        return LedgerError(f"the ledger could not be written ({why}); no call is paid for without it")

    def _queue(self, line: Mapping[str, Any]) -> Future[None]:
        """Write ``line`` here (a local file) or hand it to the writer thread (an object store);
        called under the lock, so the file's order is the order of the calls. A queued line is
        written even if whoever waits for it is cancelled."""
        if self._failed is not None or (self._failing is not None and line["kind"] == "sent"):
            raise self._refusal()
        if self._closing:
            raise LedgerError(f"run {self.run_id}: its ledger is closed; no line is written after it")
        if not self._remote and self._shared is None:
            return self._write_here(line)
        written: Future[None] = Future()
        written.set_running_or_notify_cancel()  # written whether or not its waiter is still there
        self._batch.append((line, written))
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_batches, name="tourneylake-ledger", daemon=True)
            self._writer.start()
        self._wake.notify()
        return written

    def _write_here(self, line: Mapping[str, Any]) -> Future[None]:
        """``line`` written by the caller: a done future, with the write's error if it failed.
        An interrupt (Ctrl-C) is the caller's own, and raised: the file has the line whole or
        not at all (one buffered write), so later lines are still written."""
        written: Future[None] = Future()
        written.set_running_or_notify_cancel()
        try:
            self._write(line)
        except Exception as exc:  # noqa: BLE001 - the waiter's, as the writer thread would give it
            self._failed = exc
            written.set_exception(exc)
        else:
            written.set_result(None)
        return written

    def _write_batches(self) -> None:
        """Object store or shared state: the writer's thread, writing what is queued as one object
        (one transaction) at a time, at most one a :data:`LINGER_S` (the lines that come meanwhile
        share the next write); the rows of a failed write are tried again first."""
        last = 0.0
        while True:
            with self._lock:
                while not self._batch and not self._closing:
                    self._wake.wait()
                if not self._batch:
                    return
                while not self._closing and (left := last + self._linger - time.monotonic()) > 0:
                    self._wake.wait(left)
                last = time.monotonic()
                batch, self._batch = self._batch, []
            again = self._write_batch(batch)
            if again:
                with self._lock:
                    self._batch[:0] = again
                time.sleep(wait_before(self._failed_writes))  # a pause before the rows are tried again

    def _write_batch(self, batch: list[tuple[Mapping[str, Any], Future[None]]]) -> list[tuple[Mapping[str, Any], Future[None]]]:
        """Write ``batch``; returns the lines to try again (the rows of a failed write)."""
        lines = []
        for line, written in batch:
            if self._failing is not None and line["kind"] == "sent":
                # Queued while the ledger cannot be written: its call does not go out (nor counts
                # as unanswered). A row is still tried: it books a call that was paid for.
                with self._lock:
                    self._unanswered.pop((line["call"], line["attempt"]), None)
                written.set_exception(self._refusal())
            else:
                lines.append((line, written))
        if not lines:
            return []
        try:
            self._write_lines([line for line, _ in lines])
        except BaseException as exc:  # noqa: BLE001 - the write-ahead lines' waiters hear of it; the rows are tried again
            return self._failed_write(lines, exc)
        self._failing, self._failed_writes = None, 0
        for _, written in lines:
            written.set_result(None)
        return []

    def _failed_write(
        self, lines: list[tuple[Mapping[str, Any], Future[None]]], exc: BaseException
    ) -> list[tuple[Mapping[str, Any], Future[None]]]:
        """A write failed: its write-ahead lines fail (their calls do not go out), its rows are
        tried again, until :data:`KEEP_ROWS_S` after the first failure (then the run stays open)."""
        now = time.monotonic()
        if self._failing is None:
            self._failing_since = now
        self._failing = exc
        self._failed_writes += 1
        again = []
        for line, written in lines:
            if line["kind"] == "sent":
                with self._lock:  # the call whose write-ahead line is lost does not go out
                    self._unanswered.pop((line["call"], line["attempt"]), None)
                written.set_exception(exc)
            else:
                again.append((line, written))
        if not again:
            return []
        if now - self._failing_since < KEEP_ROWS_S and not isinstance(exc, LeaseLost):
            log.warning("run %s: %d ledger line(s) not written yet (%s): trying again", self.run_id, len(again), exc)
            return again
        self._failed = exc
        log.error("run %s: %d ledger row(s) could not be written for %.0f s (%s)", self.run_id, len(again), KEEP_ROWS_S, exc)
        for _, written in again:
            written.set_exception(exc)
        return []

    def sent_soon(self, resource: str, call_key: str, attempt: int) -> Future[None]:
        """A metered attempt is about to go out (write-ahead, see the module docstring): it may
        go once the returned future is done."""
        with self._lock:
            written = self._queue({"kind": "sent", "resource": resource, "call": call_key, "attempt": attempt})
            self._unanswered[(call_key, attempt)] = resource
            return written

    def withdrawn(self, resource: str, call_key: str, attempt: int) -> None:
        """A call announced by :meth:`sent_soon` does not go out after all (the budget stopped
        while its line was stored): it is no longer in flight. Not waited for: if the line is
        lost, the call only looks unanswered, and a reconciliation books no more than the
        service's count says was spent."""
        with self._lock:
            if self._failed is None and not self._closing and self._unanswered.pop((call_key, attempt), None) is not None:
                self._queue({"kind": "withdrawn", "resource": resource, "call": call_key, "attempt": attempt})

    def sent(self, resource: str, call_key: str, attempt: int) -> None:
        """:meth:`sent_soon`, returning once the line is written."""
        self.sent_soon(resource, call_key, attempt).result()

    def record(self, call_key: str | None = None, **row: Any) -> None:
        """One row of the table; ``row`` holds its columns (missing ones are NULL). Returns once
        the line is written."""
        self.record_soon(call_key, **row).result()

    def record_soon(self, call_key: str | None = None, **row: Any) -> Future[None]:
        """:meth:`record`, returning a future for the line's write instead of waiting for it."""
        unknown = set(row) - set(COLUMNS)
        missing = {name for name in _REQUIRED if row.get(name) is None}
        if unknown or missing:
            raise LedgerError(f"ledger row: unknown columns {sorted(unknown)}, missing {sorted(missing)}")
        line = {"kind": "entry", "call": call_key, **{name: row.get(name) for name in COLUMNS}}
        if line.get("account") is None:
            line["account"] = self.account
        with self._lock:
            written = self._queue(line)
            self._unanswered.pop((call_key, row.get("attempt")), None)
            self.spent += int(row["cost"])
            self.attempts += 1
            if row["outcome"] == UNCERTAIN:
                self._transport_failures[row["resource"]] += 1
            reported = row.get("remaining_after")
            if reported is not None and (self.lowest_remaining is None or reported < self.lowest_remaining):
                self.lowest_remaining = reported
            return written

    def close(self) -> None:
        """Mark the run closed and release the file (its name loses ``.open``) — unless calls
        are still unanswered: then the file stays ``.open`` for the next run to reconcile. A line
        submitted once closing has begun is refused (:class:`LedgerError`): a write-ahead line
        so refused keeps its call from going out."""
        with self._lock:
            self._closing = True
            self._wake.notify()
        if self._writer is not None:
            self._writer.join()  # every line asked for is written first
            self._writer = None
        with self._lock:
            if self._failed is not None:
                self._keep_open()
                return
            if self._shared is not None:
                self._close_shared()
                return
            if self._remote:
                self._close_segments()
                return
            if self._file is None:
                return
            if self._unanswered:
                log.warning(
                    "run %s ends with %d call(s) sent and never answered: the next run reconciles them",
                    self.run_id,
                    len(self._unanswered),
                )
                self._file.close()  # releases the flock; the file keeps its .open name
                self._file = None
                return
            self._file.write(_dumps({"kind": "closed", "at": datetime.now(UTC), "spent": self.spent}))
            self._file.flush()
            assert isinstance(self._path, Path)
            closed = self._path.with_name(f"run-{self.run_id}.jsonl")
            os.replace(self._path, closed)
            self._path = closed
            self._file.close()  # releases the flock
            self._file = None

    def _keep_open(self) -> None:
        """After a failed write: the run is released but not closed, so the next run reconciles
        it with the service's count (a row this run could not write is not lost)."""
        log.warning(
            "run %s: a ledger line could not be written (%s): the run stays open for the next run to reconcile",
            self.run_id,
            self._failed,
        )
        if self._lease is not None:
            self._lease.release()
        elif self._remote:
            self._done = True
            with _LIVE_LOCK:
                _LIVE.discard(str(self._path))
        elif self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()  # releases the flock; the file keeps its .open name
            self._file = None

    def _warn_unanswered(self) -> None:
        log.warning(
            "run %s ends with %d call(s) sent and never answered: the next run reconciles them",
            self.run_id,
            len(self._unanswered),
        )

    def _close_shared(self) -> None:
        """Shared state: the closing line, and the run marked closed, in its database."""
        lease, self._lease = self._lease, None
        if lease is None:
            return  # nothing written
        try:
            if self._unanswered:
                self._warn_unanswered()
                return
            lease.append([{"kind": "closed", "at": datetime.now(UTC), "spent": self.spent}], closing=True)
        finally:
            lease.release()

    def _close_segments(self) -> None:
        if not isinstance(self._path, StorePath) or self._done:
            return  # nothing written, or already closed
        self._done = True
        with _LIVE_LOCK:
            _LIVE.discard(str(self._path))
        if self._unanswered:
            self._warn_unanswered()
            return
        self._write_segment([{"kind": "closed", "at": datetime.now(UTC), "spent": self.spent}])
        self._path = _compact(self._path, b"".join(self._written))

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RunLog:
    """One run's lines, as read back."""

    path: AnyPath | None  # None: a run of the shared state database
    night: date
    run_id: str
    started_at: datetime | None = None
    remaining_before: int | None = None
    account: str | None = None
    login: str | None = None
    pid: int | None = None
    host: str | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[dict[str, Any]] = field(default_factory=list)  # ``sent`` with no entry after
    closed: bool = False

    @property
    def spent(self) -> int:
        return sum(int(e.get("cost") or 0) for e in self.entries)

    def same_credentials(self, account: str | object | None, login: str | None) -> bool:
        """Whether this run spent from the count of ``login`` (when both runs name their login)
        or else of the account named ``account`` (``EVERY_ACCOUNT``: any)."""
        if login is not None and self.login is not None:
            return self.login == login
        return account is EVERY_ACCOUNT or self.account == account

    @property
    def uncertain(self) -> Counter[str]:
        """Resources of the calls the service may have charged that no row books."""
        failures = Counter(str(e.get("resource")) for e in self.entries if e.get("outcome") == UNCERTAIN)
        return _uncertain((str(line.get("resource")) for line in self.unanswered), failures)


def _segments(folder: StorePath) -> list[StorePath]:
    return [p for p in folder.glob("*.jsonl") if p.name[: -len(".jsonl")].isdigit()]


def _compact(folder: StorePath, data: bytes) -> StorePath:
    """Object store: a closed run's lines as one object ``run-<id>.jsonl``; its folder goes."""
    closed = folder.with_name(folder.name.removesuffix(OPEN_SUFFIX) + ".jsonl")
    atomic_write(closed, data, fsync=True)
    remove_tree(folder)
    return closed


def _run_bytes(path: AnyPath) -> IO[bytes]:
    """A run's lines: its file, or (object store, open run) its segments in order. An open run's
    folder whose segments went while they were read (its writer closed it: one object now) is
    :class:`FileNotFoundError`, as a local file renamed meanwhile."""
    if isinstance(path, StorePath):
        if path.name.endswith(OPEN_SUFFIX):
            listed = _segments(path)
            found = path.cat_many(listed)
            if not listed or len(found) < len(listed):
                raise FileNotFoundError(str(path))
            return io.BytesIO(b"".join(found[p] for p in sorted(found)))
        return io.BytesIO(path.read_bytes())
    return open(path, "rb")


def _run_id(path: AnyPath) -> str:
    return path.name.removeprefix("run-").split(".")[0]


def _closed_path(path: AnyPath) -> AnyPath | None:
    """Where an open run's lines are once its writer has closed it (``None``: it is closed)."""
    if path.name.endswith(".open.jsonl") or path.name.endswith(OPEN_SUFFIX):
        return path.with_name(f"run-{_run_id(path)}.jsonl")
    return None


def _one_path_per_run(paths: Iterable[AnyPath]) -> list[AnyPath]:
    """One path per run (its closed file when a listing caught it under both names, as a
    listing taken while its writer renamed it may)."""
    by_run: dict[str, AnyPath] = {}
    for path in paths:
        kept = by_run.get(_run_id(path))
        if kept is None or _closed_path(kept) is not None:
            by_run[_run_id(path)] = path
    return sorted(by_run.values())


def _read_runs(paths: Iterable[AnyPath]) -> list[RunLog]:
    """The runs of a listing, each read once, as they are now (see :func:`_read_run_if_there`)."""
    return [run for path in _one_path_per_run(paths) if (run := _read_run_if_there(path, _read_run)) is not None]


def _read_run_if_there(path: AnyPath, read: Callable[[AnyPath, date], _Read]) -> _Read | None:
    """A run as listed under ``path``, read by ``read`` (:func:`_read_run`, :func:`_run_costs`)
    under its closed name when its writer closed it since the listing (a concurrent close renames
    it); ``None`` when it is not there any more."""
    night = date.fromisoformat(path.parent.name.split("=", 1)[1])
    try:
        return read(path, night)
    except FileNotFoundError:
        closed = _closed_path(path)
        if closed is None:
            return None
        try:
            return read(closed, night)
        except FileNotFoundError:
            return None


def _read_run(path: AnyPath, night: date) -> RunLog:
    log = RunLog(path, night, _run_id(path))
    pending: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for line in _run_lines(path):
        _take_line(log, line, pending)
    log.unanswered = [dict(line) for line in pending.values()]
    return log


def _run_lines(path: AnyPath) -> Iterator[Mapping[str, Any]]:
    """A run's lines, parsed, in file order; once they are all read, :class:`LedgerError` if one
    is damaged (a line a killed process cut short is torn, not damaged: the rest still counts)."""
    damaged: list[tuple[int, str]] = []
    torn: set[int] = set()
    with _run_bytes(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if not raw.endswith(b"\n"):
                    torn.add(number)  # the last line, still being written or cut by a kill
                else:
                    damaged.append((number, str(exc)))
                continue
            yield line
            if line.get("kind") == "closed" and isinstance(line.get("torn_line"), int):
                torn.add(line["torn_line"])
    real = [(number, why) for number, why in damaged if number not in torn]
    if real:
        number, why = real[0]
        raise LedgerError(
            f"ledger file {path} line {number} is damaged ({why}): restore the file from a backup, or delete "
            "that line if you accept that the ledger misses one row (the raw answers are untouched)"
        )


def _run_costs(path: AnyPath, night: date) -> RunCosts:
    """A run's account and its searches per resource only: what :meth:`Ledger.spent` adds up,
    without building every entry's row, and what a :class:`CostMemo` keeps of a closed run. A resource that is not a name counts under
    ``None`` (no ``only=`` picks it, no ``excluding=`` leaves it out, as before)."""
    account, costs = None, Counter[str | None]()
    for line in _run_lines(path):
        kind = line.get("kind")
        if kind == "run":
            account = line.get("account")
        elif kind == "entry":
            resource = line.get("resource")
            costs[resource if isinstance(resource, str) else None] += int(line.get("cost") or 0)
    return account, list(costs.items())


def _take_line(log: RunLog, line: Mapping[str, Any], pending: dict[tuple[Any, Any], Mapping[str, Any]]) -> None:
    """One line of a run, read into ``log`` (``pending``: the ``sent`` lines not answered yet)."""
    kind = line.get("kind")
    if kind == "run":
        log.started_at = _time(line.get("started_at"))
        log.remaining_before = line.get("remaining_before")
        log.account = line.get("account")
        log.login = line.get("login") if isinstance(line.get("login"), str) else None
        log.pid = line.get("pid") if isinstance(line.get("pid"), int) else None
        log.host = line.get("host")
    elif kind == "sent":
        pending[(line.get("call"), line.get("attempt"))] = line
    elif kind == "withdrawn":  # announced, then not sent after all
        pending.pop((line.get("call"), line.get("attempt")), None)
    elif kind == "entry":
        pending.pop((line.get("call"), line.get("attempt")), None)
        entry = {name: line.get(name) for name in COLUMNS}
        if entry.get("account") is None:
            entry["account"] = log.account
        log.entries.append(entry)
    elif kind == "closed":
        log.closed = True


def _shared_run(run_id: str, night: date, header: Mapping[str, Any], lines: Iterable[Mapping[str, Any]]) -> RunLog:
    """A run of the shared state database, read as a file's (its header, then its lines)."""
    log = RunLog(None, night, run_id)
    pending: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for line in (header, *lines):
        _take_line(log, line, pending)
    log.unanswered = [dict(line) for line in pending.values()]
    return log


def _uncertain(unanswered: Iterable[str], transport_failures: Counter[str]) -> Counter[str]:
    """The calls the service may have charged that no row books: sent but never answered (in
    flight when the run died), or answered by a transport failure (a timeout after sending)."""
    return Counter(unanswered) + transport_failures


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value).astimezone(UTC) if isinstance(value, str) else None


def _held_remotely(run: RunLog) -> bool:
    """Object store: a writer of this process has the run open, or its writer is another
    process of this host that is still alive. A run of another host counts as dead (the
    one-writer rule, see the module docstring)."""
    with _LIVE_LOCK:
        if str(run.path) in _LIVE:
            return True
    if run.host != socket.gethostname() or run.pid is None or run.pid == os.getpid():
        return False
    try:
        os.kill(run.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _held(path: AnyPath) -> bool:
    """Whether a live process holds the run's file (its writer has the flock)."""
    assert isinstance(path, Path)  # a local run's file: an object store has no lock
    try:
        with open(path, "rb") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return False
    except FileNotFoundError:
        return False  # closed (renamed) meanwhile


class Ledger:
    """Reads the ledger of a lake (every run, every night). ``account=`` (a name) narrows a
    reading to that account's runs; ``None`` counts every account. With ``login=`` (a
    :func:`login_digest`), runs under two account names with one username are known to share a
    count (:meth:`RunLog.same_credentials`, used by the reconciliations)."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.base = lake.root / LEDGER_DIR
        self.shared = lake.shared

    def nights(self) -> list[date]:
        if self.shared is not None:
            return self.shared.nights()
        if not self.base.is_dir():
            return []
        prefix = PARTITION + "="
        return sorted(date.fromisoformat(p.name[len(prefix) :]) for p in self.base.glob(prefix + "*") if p.is_dir())

    def _run_paths(self, directory: AnyPath) -> list[AnyPath]:
        """A night's runs: its ``run-*.jsonl`` files and (object store) its open runs' folders."""
        if not isinstance(directory, StorePath):
            return sorted(directory.glob("run-*.jsonl")) if directory.is_dir() else []
        entries = [p for p in directory.iterdir() if p.name.startswith("run-")]
        closed = {p.name.removesuffix(".jsonl") for p in entries if p.is_file() and p.name.endswith(".jsonl")}
        folders = [
            p for p in entries if p.is_dir() and p.name.endswith(OPEN_SUFFIX) and p.name.removesuffix(OPEN_SUFFIX) not in closed
        ]
        return sorted([p for p in entries if p.is_file() and p.name.endswith(".jsonl")] + folders)

    def _all_remote_runs(self) -> list[StorePath]:
        """Object store: every night's runs from one recursive listing (not one per night)."""
        assert isinstance(self.base, StorePath)
        fs = self.base.fs
        with contextlib.suppress(FileNotFoundError):
            fs.invalidate_cache(self.base.path)
        try:
            found = fs.find(self.base.path, detail=True)
        except FileNotFoundError:
            return []
        closed: dict[str, StorePath] = {}
        folders: dict[str, StorePath] = {}
        for name, info in found.items():
            parts = name.rsplit("/", 3)
            if len(parts) == 4 and parts[1].startswith(PARTITION + "=") and parts[2].endswith(OPEN_SUFFIX):
                folder = f"{parts[0]}/{parts[1]}/{parts[2]}"
                folders.setdefault(folder, StorePath(fs, folder, {"type": "directory"}))
            elif parts[-1].startswith("run-") and parts[-1].endswith(".jsonl") and parts[-2].startswith(PARTITION + "="):
                closed[name.removesuffix(".jsonl")] = StorePath(fs, name, info)
        live = [p for key, p in folders.items() if key.removesuffix(OPEN_SUFFIX) not in closed]
        return sorted([*closed.values(), *live])

    def runs(self, night: date, *, account: str | None = None) -> list[RunLog]:
        if self.shared is not None:
            found = self.shared.run_lines(night=night)
            runs = [_shared_run(run_id, night, header, lines) for run_id, _, header, _, lines in found]
        else:
            runs = _read_runs(self._run_paths(_night_dir(self.lake, night)))
        return [run for run in runs if account is None or run.account == account]

    def entries(self, night: date, *, account: str | None = None) -> Iterator[dict[str, Any]]:
        """Every row of one night, all runs (or one account's), in file order."""
        for run in self.runs(night, account=account):
            yield from run.entries

    def spent(
        self,
        night: date,
        *,
        only: str | None = None,
        excluding: str | None = None,
        account: str | None = None,
        memo: CostMemo | None = None,
    ) -> int:
        """Searches the ledger records for a night (of one resource, or all but one; of the runs
        of one account). ``memo``: a local lake's closed runs are read through it (status's bills)."""
        if self.shared is not None:
            rows: Iterable[tuple[Any, Any]] = (
                (row.get("resource"), row.get("cost")) for row in self.entries(night, account=account)
            )
        else:

            def read(path: AnyPath, of: date) -> RunCosts:  # a run still open is always read
                if memo is None or not isinstance(path, Path) or _closed_path(path) is not None:
                    return _run_costs(path, of)
                return memo.costs(path, of, _run_costs)

            paths = _one_path_per_run(self._run_paths(_night_dir(self.lake, night)))
            runs = (_read_run_if_there(path, read) for path in paths)
            rows = (row for run in runs if run is not None and account in (None, run[0]) for row in run[1])
        return sum(
            int(cost or 0)
            for resource, cost in rows
            if (only is None or resource == only) and (excluding is None or resource != excluding)
        )

    def spend_per_night(self, *, account: str | None = None) -> dict[date, tuple[int, int]]:
        """(searches, rows) per night."""
        out = {}
        for night in self.nights():
            rows = list(self.entries(night, account=account))
            if rows or account is None:
                out[night] = (sum(int(row.get("cost") or 0) for row in rows), len(rows))
        return out

    def table(self, night: date) -> pa.Table:
        """The night's rows as the ``search_ledger`` partition (the warehouse export)."""
        rows = list(self.entries(night))
        columns = {name: [row.get(name) for row in rows] for name in COLUMNS}
        columns["called_at"] = [_time(v) for v in columns["called_at"]]
        columns["quota_day"] = [date.fromisoformat(v) if isinstance(v, str) else v for v in columns["quota_day"]]
        try:
            return pa.table(columns, schema=SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise LedgerError(f"the ledger of {night} holds a row that does not fit the schema: {exc}") from None

    def publish(self, night: date, *, when_empty: bool = True) -> int:
        """Write the night's ``search_ledger`` partition from its ledger (``when_empty=False``:
        only when it has rows), reading and writing under the lake's lock for that night's
        export: two runs publishing one night (a harvest, a reconciler of an earlier night, a
        question) never swap a stale copy in after a newer one. Returns the rows written."""
        with self.lake.locks.hold(f"ledger-export-{night.isoformat()}"):
            table = self.table(night)
            if not table.num_rows and not when_empty:
                return 0
            return self.lake.tables.write("search_ledger", night, table)

    def _open_paths(self) -> list[AnyPath]:
        if not isinstance(self.base, StorePath):
            return sorted(self.base.glob(f"{PARTITION}=*/run-*.open.jsonl"))
        return [p for p in self._all_remote_runs() if p.name.endswith(OPEN_SUFFIX)]

    def dead_runs(self, *, account: str | None = None) -> list[RunLog]:
        """Runs whose file is still open but held by no process: they died mid-run (shared
        state: open runs whose writer's connection no longer holds them)."""
        if self.shared is not None:
            shared = self.shared
            open_runs = [
                _shared_run(run_id, night, header, lines)
                for run_id, night, header, _, lines in shared.run_lines(open_only=True)
                if not shared.is_held(run_id)
            ]
            return [run for run in open_runs if account is None or run.account == account]
        if not self.base.is_dir():
            return []
        dead = []
        for path in self._open_paths():
            if isinstance(path, StorePath) or not _held(path):
                run = _read_run_if_there(path, _read_run)
                if run is None or run.closed:  # closed by its writer meanwhile
                    continue
                if isinstance(path, StorePath) and _held_remotely(run):
                    continue
                if account is None or run.account == account:
                    dead.append(run)
        return dead

    def spent_since(
        self, moment: datetime, *, except_run: str, account: str | object | None = EVERY_ACCOUNT, login: str | None = None
    ) -> int:
        """Searches other runs of ``account`` recorded after ``moment`` (files untouched since are
        skipped). Here ``account=None`` is the runs without an account name only (the default
        credentials'): another account's spending comes off another account's count. With
        ``login``, a run that names its login counts when the login is the same, whatever its
        account's name (two names for one username spend from one count)."""
        if self.shared is not None:
            total = 0
            for header, line in self.shared.entries_since(moment, except_run):
                run = RunLog(None, moment.date(), str(header.get("run_id")), account=header.get("account"))
                run.login = header.get("login") if isinstance(header.get("login"), str) else None
                if run.same_credentials(account, login):
                    total += int(line.get("cost") or 0)
            return total
        if not self.base.is_dir():
            return 0
        total = 0
        paths: list[AnyPath] = (
            list(self._all_remote_runs())
            if isinstance(self.base, StorePath)
            else list(self.base.glob(f"{PARTITION}=*/run-*.jsonl"))
        )
        for path in _one_path_per_run(paths):
            if path.name.startswith(f"run-{except_run}."):
                continue
            with contextlib.suppress(FileNotFoundError):  # closed meanwhile (renamed): read as it is now
                if _untouched_since(path, moment):
                    continue
            found = _read_run_if_there(path, _read_run)
            if found is None or not found.same_credentials(account, login):
                continue
            for row in found.entries:
                called = _time(row.get("called_at"))
                if called is not None and called >= moment:
                    total += int(row.get("cost") or 0)
        return total

    def still_open(self, run: RunLog) -> bool:
        """Whether a run read as dead is still open (not closed by another reconciler since)."""
        if self.shared is not None:
            return self.shared.is_open(run.run_id)
        return run.path is not None and run.path.exists()

    def close_dead_run(self, run: RunLog, row: Mapping[str, Any] | None) -> bool:
        """Append the reconciliation ``row`` (if any) to a dead run's file and close it. Returns
        whether it was closed here (shared state: ``False`` when its writer holds it again, or
        another reconciler closed it first)."""
        entry = None
        if row is not None:
            entry = {"kind": "entry", "call": None, **{name: row.get(name) for name in COLUMNS}}
            if entry.get("account") is None:
                entry["account"] = run.account
        if self.shared is not None:
            closing = {"kind": "closed", "at": datetime.now(UTC), "reconciled": True, "torn_line": None}
            return self.shared.close_dead(run.run_id, [*([entry] if entry is not None else []), closing])
        assert run.path is not None  # a run read from a file
        if isinstance(run.path, StorePath):  # segments: never torn; one more, then the closed object
            with _run_bytes(run.path) as handle:
                data = handle.read()
            tail = (_dumps(entry) if entry is not None else b"") + _dumps(
                {"kind": "closed", "at": datetime.now(UTC), "reconciled": True, "torn_line": None}
            )
            atomic_write(run.path / f"{len(_segments(run.path)):08d}.jsonl", tail, fsync=True)
            _compact(run.path, data + tail)
            return True
        with open(run.path, "rb") as existing:
            lines = existing.read().splitlines(keepends=True)
        torn = len(lines) if lines and not lines[-1].endswith(b"\n") else None
        with open(run.path, "ab") as handle:
            if torn is not None:  # end the line the kill cut, and say which it was
                handle.write(b"\n")
            if entry is not None:
                handle.write(_dumps(entry))
            handle.write(_dumps({"kind": "closed", "at": datetime.now(UTC), "reconciled": True, "torn_line": torn}))
        os.replace(run.path, run.path.with_name(f"run-{run.run_id}.jsonl"))
        return True


def _untouched_since(path: AnyPath, moment: datetime) -> bool:
    """Whether a run's file was last written before ``moment`` (an open object-store run's
    folder is always read: it has no one date)."""
    if isinstance(path, StorePath):
        if path.name.endswith(OPEN_SUFFIX):
            return False
        when = path.modified()
        return when is not None and when < moment
    return path.stat().st_mtime < moment.timestamp()


def login_digest(username: str | None) -> str | None:
    """What a run's header says of the username it spent from: a digest (the ledger never holds
    a credential), so runs under two account names with one username are known to share a count."""
    if not username:
        return None
    return hashlib.sha256(b"tourneylake-login\x1f" + username.encode()).hexdigest()[:16]


def unexplained_charges(
    *, before: int | None, after: int | None, recorded: int, others: int, uncertain_cost: int, refundable: int = 0
) -> int:
    """Searches the service counted that the ledger's rows do not explain (negative: rows it did
    not count).

    ``before``/``after``: the account's searches left around the run (logged-in readings);
    ``recorded``: what the run's rows already count; ``others``: what other runs recorded in
    between; ``uncertain_cost``: the most the unexplained calls could cost (calls with no readable
    answer, each at its resource's cost); ``refundable``: the most the rows may have booked that
    the service let off. The difference is clamped to ``[-refundable, uncertain_cost]``: another
    client draining the account, or a quota reset, can never be booked against us.
    """
    if before is None or after is None or (uncertain_cost <= 0 and refundable <= 0):
        return 0
    return max(-refundable, min(uncertain_cost, (before - after) - recorded - others))
