"""The search ledger: every metered call, when, what, cost, searches left, outcome.

One writer (:class:`LedgerWriter`), one reader (:class:`Ledger`), one schema: the columns of the
``search_ledger`` table in ``normalize/schemas.py``. The durable record is one JSON-lines file per
run under ``lake/_ledger/snapshot_date=D/``, each line flushed as it is written, so a killed
process keeps its record of what it paid for; the ``search_ledger`` Parquet partition is only
its export for the warehouse (:meth:`Ledger.table`).

Lines have a ``kind``:

- ``run``: the header, with the account's searches left before the run spent anything;
- ``sent``: written before a metered attempt goes out (write-ahead), so a call in flight when the
  process dies is known afterwards;
- ``entry``: a row of the table (an attempt's outcome, or a reconciliation);
- ``closed``: the run ended and reconciled itself.

A run's file is ``run-<id>.open.jsonl`` while it writes (created locked, under a temporary name,
then renamed, so it is never seen unlocked; the ``flock`` is dropped by the kernel when the
process dies) and ``run-<id>.jsonl`` once closed. A run that ends — normally, on an exception, a
Ctrl-C or a SIGTERM — with calls announced but never answered is *not* closed: it stays
``.open``, unlocked, like a run that was killed. :meth:`Ledger.dead_runs` finds those files: runs
whose calls may have been charged unanswered, for the next run to reconcile
(``Session.reconcile_dead_runs``); :func:`unexplained_charges` is the arithmetic both
reconciliations use.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa

from tourneylake.errors import TourneylakeError
from tourneylake.lake import PARTITION, Lake
from tourneylake.normalize.schemas import TABLES

__all__ = [
    "COLUMNS",
    "LEDGER_DIR",
    "Ledger",
    "LedgerError",
    "LedgerWriter",
    "RunLog",
    "unexplained_charges",
]

log = logging.getLogger(__name__)

LEDGER_DIR = "_ledger"
_SPEC = TABLES["search_ledger"]
#: The table's columns as the JSON lines hold them (``snapshot_date`` is the folder).
SCHEMA = pa.schema([f for f in _SPEC.schema if f.name != PARTITION])
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
_REQUIRED = frozenset(f.name for f in SCHEMA if f.name in ("called_at", "run_id", "resource", "cost", "outcome"))
#: The outcome after which the service may have charged a call we did not book (no answer read).
UNCERTAIN = "transport_error"
RECONCILED = "reconciled"
RECONCILED_AFTER_CRASH = "reconciled_after_crash"
#: A drop in the searches left that this run's calls cannot explain (another client spent them):
#: recorded with cost 0, so it is never charged to the run or its night's cap.
EXTERNAL_SPENDING = "external_spending"


class LedgerError(TourneylakeError, ValueError):
    """A ledger row that does not fit the schema, or a ledger file that cannot be read."""


def _night_dir(lake: Lake, night: date) -> Path:
    return Path(lake.root) / LEDGER_DIR / f"{PARTITION}={night.isoformat()}"


def _dumps(line: Mapping[str, Any]) -> bytes:
    return orjson.dumps(line, option=orjson.OPT_NAIVE_UTC) + b"\n"


class LedgerWriter:
    """Append-only log of one run for one night. Thread-safe. Use as a context manager (or call
    :meth:`close`): the file is created on the first line, with the run header."""

    def __init__(self, lake: Lake, night: date, run_id: str, *, remaining_before: int | None) -> None:
        self.directory = _night_dir(lake, night)
        self.night = night
        self.run_id = run_id
        self.remaining_before = remaining_before
        self.started_at = datetime.now(UTC)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self.spent = 0
        self.attempts = 0
        self._unanswered: dict[tuple[str | None, int], str] = {}  # (call, attempt) → resource, while in flight
        self._transport_failures: Counter[str] = Counter()  # resources of attempts with no answer read

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def uncertain(self) -> Counter[str]:
        """Resources of the calls the service may have charged that no row books."""
        return _uncertain(self._unanswered.values(), self._transport_failures)

    def _write(self, line: Mapping[str, Any]) -> None:
        if self._file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Locked before it is visible: a reconciler never mistakes a starting run for a dead one.
            staging = self.directory / f".run-{self.run_id}.{uuid.uuid4().hex}.starting"
            handle = open(staging, "ab")  # noqa: SIM115 - kept open for the run, closed in close()
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            self._path = self.directory / f"run-{self.run_id}.open.jsonl"
            os.replace(staging, self._path)
            self._file = handle
            header = {
                "kind": "run",
                "run_id": self.run_id,
                "started_at": self.started_at,
                "remaining_before": self.remaining_before,
                "pid": os.getpid(),
            }
            handle.write(_dumps(header))
        self._file.write(_dumps(line))
        self._file.flush()

    def sent(self, resource: str, call_key: str, attempt: int) -> None:
        """A metered attempt is about to go out (write-ahead, see the module docstring)."""
        with self._lock:
            self._write({"kind": "sent", "resource": resource, "call": call_key, "attempt": attempt})
            self._unanswered[(call_key, attempt)] = resource

    def record(self, call_key: str | None = None, **row: Any) -> None:
        """One row of the table; ``row`` holds its columns (missing ones are NULL)."""
        unknown = set(row) - set(COLUMNS)
        missing = {name for name in _REQUIRED if row.get(name) is None}
        if unknown or missing:
            raise LedgerError(f"ledger row: unknown columns {sorted(unknown)}, missing {sorted(missing)}")
        line = {"kind": "entry", "call": call_key, **{name: row.get(name) for name in COLUMNS}}
        with self._lock:
            self._write(line)
            self._unanswered.pop((call_key, row.get("attempt")), None)
            self.spent += int(row["cost"])
            self.attempts += 1
            if row["outcome"] == UNCERTAIN:
                self._transport_failures[row["resource"]] += 1

    def close(self) -> None:
        """Mark the run closed and release the file (its name loses ``.open``) — unless calls
        are still unanswered: then the file stays ``.open`` for the next run to reconcile."""
        with self._lock:
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
            assert self._path is not None
            closed = self._path.with_name(f"run-{self.run_id}.jsonl")
            os.replace(self._path, closed)
            self._path = closed
            self._file.close()  # releases the flock
            self._file = None

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RunLog:
    """One run's lines, as read back."""

    path: Path
    night: date
    run_id: str
    started_at: datetime | None = None
    remaining_before: int | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    unanswered: list[dict[str, Any]] = field(default_factory=list)  # ``sent`` with no entry after
    closed: bool = False

    @property
    def spent(self) -> int:
        return sum(int(e.get("cost") or 0) for e in self.entries)

    @property
    def uncertain(self) -> Counter[str]:
        """Resources of the calls the service may have charged that no row books."""
        failures = Counter(str(e.get("resource")) for e in self.entries if e.get("outcome") == UNCERTAIN)
        return _uncertain((str(line.get("resource")) for line in self.unanswered), failures)


def _read_run(path: Path, night: date) -> RunLog:
    run_id = path.name.removeprefix("run-").split(".")[0]
    log = RunLog(path, night, run_id)
    pending: dict[tuple[Any, Any], dict[str, Any]] = {}
    damaged: list[tuple[int, str]] = []
    torn: set[int] = set()  # lines a killed process cut short (the rest still counts)
    with open(path, "rb") as handle:
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
            kind = line.get("kind")
            if kind == "run":
                log.started_at = _time(line.get("started_at"))
                log.remaining_before = line.get("remaining_before")
            elif kind == "sent":
                pending[(line.get("call"), line.get("attempt"))] = line
            elif kind == "entry":
                pending.pop((line.get("call"), line.get("attempt")), None)
                log.entries.append({name: line.get(name) for name in COLUMNS})
            elif kind == "closed":
                log.closed = True
                if isinstance(line.get("torn_line"), int):
                    torn.add(line["torn_line"])
    real = [(number, why) for number, why in damaged if number not in torn]
    if real:
        number, why = real[0]
        raise LedgerError(
            f"ledger file {path} line {number} is damaged ({why}): restore the file from a backup, or delete "
            "that line if you accept that the ledger misses one row (the raw answers are untouched)"
        )
    log.unanswered = list(pending.values())
    return log


def _uncertain(unanswered: Iterable[str], transport_failures: Counter[str]) -> Counter[str]:
    """The calls the service may have charged that no row books: sent but never answered (in
    flight when the run died), or answered by a transport failure (a timeout after sending)."""
    return Counter(unanswered) + transport_failures


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value).astimezone(UTC) if isinstance(value, str) else None


def _held(path: Path) -> bool:
    """Whether a live process holds the run's file (its writer has the flock)."""
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
    """Reads the ledger of a lake (every run, every night)."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.base = Path(lake.root) / LEDGER_DIR

    def nights(self) -> list[date]:
        if not self.base.is_dir():
            return []
        prefix = PARTITION + "="
        return sorted(date.fromisoformat(p.name[len(prefix) :]) for p in self.base.glob(prefix + "*") if p.is_dir())

    def runs(self, night: date) -> list[RunLog]:
        directory = _night_dir(self.lake, night)
        if not directory.is_dir():
            return []
        return [_read_run(path, night) for path in sorted(directory.glob("run-*.jsonl"))]

    def entries(self, night: date) -> Iterator[dict[str, Any]]:
        """Every row of one night, all runs, in file order."""
        for run in self.runs(night):
            yield from run.entries

    def spent(self, night: date, *, only: str | None = None, excluding: str | None = None) -> int:
        """Searches the ledger records for a night (of one resource, or all but one)."""
        return sum(
            int(row.get("cost") or 0)
            for row in self.entries(night)
            if (only is None or row.get("resource") == only) and (excluding is None or row.get("resource") != excluding)
        )

    def spend_per_night(self) -> dict[date, tuple[int, int]]:
        """(searches, rows) per night."""
        out = {}
        for night in self.nights():
            rows = list(self.entries(night))
            out[night] = (sum(int(row.get("cost") or 0) for row in rows), len(rows))
        return out

    def table(self, night: date) -> pa.Table:
        """The night's rows as the ``search_ledger`` partition (the warehouse export)."""
        rows = list(self.entries(night))
        columns = {name: [row.get(name) for row in rows] for name in COLUMNS}
        columns["called_at"] = [_time(v) for v in columns["called_at"]]
        try:
            return pa.table(columns, schema=SCHEMA)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise LedgerError(f"the ledger of {night} holds a row that does not fit the schema: {exc}") from None

    def dead_runs(self) -> list[RunLog]:
        """Runs whose file is still open but held by no process: they died mid-run."""
        if not self.base.is_dir():
            return []
        dead = []
        for path in sorted(self.base.glob(f"{PARTITION}=*/run-*.open.jsonl")):
            if not _held(path):
                night = date.fromisoformat(path.parent.name.split("=", 1)[1])
                dead.append(_read_run(path, night))
        return dead

    def spent_since(self, moment: datetime, *, except_run: str) -> int:
        """Searches other runs recorded after ``moment`` (files untouched since are skipped)."""
        if not self.base.is_dir():
            return 0
        total = 0
        for path in self.base.glob(f"{PARTITION}=*/run-*.jsonl"):
            if path.stat().st_mtime < moment.timestamp() or path.name.startswith(f"run-{except_run}."):
                continue
            night = date.fromisoformat(path.parent.name.split("=", 1)[1])
            for row in _read_run(path, night).entries:
                called = _time(row.get("called_at"))
                if called is not None and called >= moment:
                    total += int(row.get("cost") or 0)
        return total

    def close_dead_run(self, run: RunLog, row: Mapping[str, Any] | None) -> None:
        """Append the reconciliation ``row`` (if any) to a dead run's file and close it."""
        with open(run.path, "rb") as existing:
            lines = existing.read().splitlines(keepends=True)
        torn = len(lines) if lines and not lines[-1].endswith(b"\n") else None
        with open(run.path, "ab") as handle:
            if torn is not None:  # end the line the kill cut, and say which it was
                handle.write(b"\n")
            if row is not None:
                handle.write(_dumps({"kind": "entry", "call": None, **{name: row.get(name) for name in COLUMNS}}))
            handle.write(_dumps({"kind": "closed", "at": datetime.now(UTC), "reconciled": True, "torn_line": torn}))
        os.replace(run.path, run.path.with_name(f"run-{run.run_id}.jsonl"))


def unexplained_charges(*, before: int | None, after: int | None, recorded: int, others: int, uncertain_cost: int) -> int:
    """Searches the service counted that the ledger's rows do not explain.

    ``before``/``after``: the account's searches left around the run (logged-in readings);
    ``recorded``: what the run's rows already count; ``others``: what other runs recorded in
    between; ``uncertain_cost``: the most the unexplained calls could cost (calls with no readable
    answer, each at its resource's cost). The difference is clamped to ``[0, uncertain_cost]``:
    another client draining the account, or a quota reset, can never be booked against us.
    """
    if before is None or after is None or uncertain_cost <= 0:
        return 0
    return max(0, min(uncertain_cost, (before - after) - recorded - others))
