"""The night's summary tables made in a second process while the harvest fetches.

A harvest is bound by CPU: with a second core, it hands each accepted answer's bytes to this
worker (``python -m tourneylake.tables.worker``), which normalises them with the same
:class:`~tourneylake.tables.night_tables.SummarySink` as the in-process path and writes the same
parts. Nothing about what is kept changes: the body is already in the raw store, the worker
reads the very bytes saved, and the partition is committed only when the harvest says the
fetching is over; a worker whose harvest dies discards its parts (the previous tables stay, the
next run makes them from raw, free). Refused answers, our own bugs and the worker's log lines are
handed back to the harvest. The worker gets no credentials. The same worker makes nights' player
tables for a rebuild, one worker per core (:class:`RebuildWorkers`); within a night the
summaries stay in one process, in order. Framing: :mod:`tourneylake.runtime.pipes`; the harvest
queues at most 512 answers for a feeder thread (backpressure), one thread reads.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import traceback
from collections import deque
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tourneylake.api import calls
from tourneylake.errors import TourneylakeError
from tourneylake.runtime.pipes import frame, receive, send, worker_env
from tourneylake.runtime.without_pandas import refuse_pandas
from tourneylake.tables.night_tables import StoredSummaries

if TYPE_CHECKING:
    from tourneylake.api.client import ApiResponse
    from tourneylake.config import Settings
    from tourneylake.lake.lake import Lake

__all__ = ["RebuildWorkers", "TablesWorker", "TablesWorkerError", "prestart", "rebuild_workers", "worker_wanted"]

log = logging.getLogger(__name__)

# Answers queued for the worker at most (~14 KB each: ~7 MB): two seconds of fetching, more than
# the worker's start-up takes; beyond it the harvest waits for the worker.
_QUEUED_FRAMES = 512
# Answers normalised by the night's last flush at most (when the harvest said how many to expect):
# ~0.1 s of work the night waits for, where a whole batch would be ~0.4 s.
_TAIL = 32
# Seconds the harvest waits for a worker that is alive but takes nothing (its queue full) or does
# not finish the night: far beyond a slow batch, so only a stuck worker (a stalled disk, a stopped
# process) meets it. It is then killed and the night fails, rather than hang with calls in flight.
_STUCK_S = 600.0


class TablesWorkerError(TourneylakeError):
    """The worker that makes the night's tables failed (its message says how); every answer
    is in the raw store: the next run or ``tourneylake rebuild`` makes the tables from them."""


def _spawn(*, store: bool, own_session: bool = False) -> subprocess.Popen[bytes]:
    """A worker process, frames on its standard input and output (``store``: the lake is on an
    object store, whose environment the worker needs)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tourneylake.tables.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=worker_env(store=store),
        close_fds=True,
        start_new_session=own_session,
    )


#: ``tables_worker: auto`` hands the tables to a second process from this many pairs on. Below it
#: the worker's start-up (its imports on the other core, its memory) buys little; from 200 it saves
#: more than it costs (the figures are in benchmarks/RESULTS.md).
WORKER_MIN_PAIRS = 200


def worker_wanted(settings: Settings, pairs: int) -> bool:
    """Whether a harvest of ``pairs`` (player, filter) pairs makes its tables in a worker process."""
    if settings.tables_worker == "off" or str(settings.data_dir).startswith("memory://"):
        return False  # a memory:// store lives in this process alone
    if settings.tables_worker == "on":
        return True
    return (os.cpu_count() or 1) >= 2 and pairs >= WORKER_MIN_PAIRS


_started_ahead: subprocess.Popen[bytes] | None = None
_started_ahead_store = False


def prestart(*, store: bool = False) -> None:
    """Start the next harvest's worker now: its start-up (its imports) then
    overlaps what this process does before the harvest (``tourneylake run`` imports Dagster on
    one core) instead of the harvest's first calls, when both cores are busy. The next
    :class:`TablesWorker` takes it; one never taken is told so at exit (its input closed:
    it ends at once, as when a harvest ends before it starts one)."""
    global _started_ahead, _started_ahead_store
    if _started_ahead is None:
        _started_ahead, _started_ahead_store = _spawn(store=store), store
        atexit.unregister(_dismiss_started_ahead)  # once, however many times a worker is started ahead
        atexit.register(_dismiss_started_ahead)


def _take_started_ahead(*, store: bool = False) -> subprocess.Popen[bytes] | None:
    """The worker started ahead, when there is one whose environment suits the lake."""
    global _started_ahead
    if _started_ahead is not None and _started_ahead_store != store:
        return None
    proc, _started_ahead = _started_ahead, None
    if proc is not None and proc.poll() is not None:  # it died waiting: start another
        _reap(proc)
        return None
    return proc


def _dismiss_started_ahead() -> None:
    proc = _take_started_ahead()
    if proc is not None and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        _reap(proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a worker whose input is closed; one that hangs for a minute is killed."""
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class TablesWorker:
    """The harvest's side of the worker: the interface of the in-process
    :class:`~tourneylake.tables.night_tables.SummarySink` that the harvest uses (``add_stored``, ``rows``,
    and ``flush``, which here is the night's last flush and the commit), plus :meth:`add_answer`,
    which takes the body's bytes rather than its tree, and ``rejected``: the answers the
    normaliser refused, to report as failed pairs once the worker has finished.

    A context manager: leaving it by an exception before :meth:`flush` (or without calling it)
    makes the worker discard its parts."""

    #: A harvest hands the worker each answer's bytes: it parses them itself.
    needs_tree = False

    def __init__(self, lake: Lake, night: date, batch_size: int) -> None:
        self.lake = lake
        self.night = night
        self.rows: dict[str, int] = {}
        #: The deduplicated tables of which the worker's normaliser kept a key twice (``None``
        #: until it is done: see :func:`~tourneylake.tables.night_tables.keep_one_row_per_key`).
        self.repeating: set[str] | None = None
        self.rejected: list[tuple[tuple[str, str, str], str]] = []  # (network, player, filter name), why
        self._start = [str(lake.data_dir), night.isoformat(), batch_size]
        self._logs: deque[tuple[str, int, str]] = deque()
        self._crash: str | None = None
        self._crash_raised = False  # the harvest was told of it (by `add_answer`)
        self._result: str | None = None  # why the worker failed, when it did
        self._stored: Any = None
        self._stored_ready = threading.Event()
        self._ended = threading.Event()  # the worker's output has ended
        self._answered = threading.Event()  # its last word ("done", "failed"), or its output ended
        self._finished = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._feeder: threading.Thread | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_QUEUED_FRAMES)
        self._broken = False  # the worker's input is closed under us
        self._abandoned = False  # left without a commit: what is queued is dropped

    # ------------------------------------------------------------------ life cycle
    def __enter__(self) -> TablesWorker:
        store = not self.lake.local
        self._proc = _take_started_ahead(store=store) or _spawn(store=store)
        self._reader = threading.Thread(target=self._read, name="tourneylake-tables-reader", daemon=True)
        self._reader.start()
        self._feeder = threading.Thread(target=self._feed, name="tourneylake-tables-feeder", daemon=True)
        self._feeder.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # Not finished (an exception, or never flushed): end the input without "finish" (what is
        # still queued is dropped), and the worker discards its parts.
        proc = self._proc
        if proc is None:
            return
        committed = self._finished and self._answered.is_set() and self._result is None
        self._abandoned = not committed
        self._queue.put(None)  # the feeder closes the worker's input
        if committed:
            return  # its interpreter's teardown is no wait of ours (the reader reaps it)
        if self._feeder is not None:
            self._feeder.join(timeout=10)
        _reap(proc)
        if self._reader is not None:
            self._reader.join(timeout=10)
        self._emit_logs()

    # ------------------------------------------------------------------ the sink's interface
    def own(self, requests: list[dict[str, str]]) -> None:
        """Every stored answer of the night is the worker's: nothing to note."""

    def add_stored(self) -> StoredSummaries:
        """Start the worker's night. When the night already holds summaries (a re-run), the
        worker normalises them first and reports (waited for); otherwise nothing is read and
        the harvest goes on at once while the worker is still starting."""
        has_stored = bool(self.lake.raw.refs(self.night, calls.PLAYER_SUMMARY, status=None))
        self._write(["start", *self._start, has_stored])
        if not has_stored:
            return StoredSummaries()
        self._stored_ready.wait()
        self._emit_logs()
        if self._stored is None:
            raise TablesWorkerError(f"the tables worker stopped before it read tonight's stored answers: {self._why()}")
        done, unusable = self._stored
        return StoredSummaries({tuple(t) for t in done}, {(n, p, f): why for n, p, f, why in unusable})

    def add_answer(self, key: dict[str, str], body: bytes, fmt: str, fetched_at: datetime) -> None:
        """Hand one accepted answer (already saved and settled in the raw store) to the worker.
        Raises :class:`TablesWorkerError` once the worker has crashed or died: the harvest then
        stops starting searches, as when the normaliser fails in process."""
        if self._logs:
            self._emit_logs()
        if self._crash is not None or self._ended.is_set():
            self._crash_raised = self._crash is not None
            raise TablesWorkerError(self._crash or f"the tables worker ended early: {self._why()}")
        self._write(["add", body, fmt, key, fetched_at.isoformat()])

    def take(self, answer: ApiResponse, key: dict[str, str]) -> None:
        """A fetched answer, handed over as its bytes (see :meth:`add_answer`)."""
        self.add_answer(key, answer.body, answer.format, answer.fetched_at)

    def reject(self, key: dict[str, str], reason: str) -> None:
        """Never called: :meth:`take` reads nothing; the worker's refusals come back in
        :attr:`rejected` once it has finished."""

    def expect(self, answers: int) -> None:
        """The harvest plans to hand over ``answers`` more: the worker flushes what it holds
        when only the last :data:`_TAIL` are still to come, so the flush at :meth:`flush` (the
        one the night waits for) is a short one."""
        self._write(["expect", answers])

    def flush(self) -> None:
        """The night's last flush: the worker writes what it holds, commits every partition and
        ends. Raises :class:`TablesWorkerError` when it could not (the previous tables stay)."""
        self._finished = True
        self._write(["finish"])
        if not self._answered.wait(_STUCK_S):  # "done" or "failed" (not its exit: its teardown is its own)
            raise self._stuck("did not finish the night")
        self._emit_logs()
        if self._result is not None:
            raise TablesWorkerError(
                f"the tables worker failed ({self._result}): tonight's summary tables were not written; every answer "
                f"is in the raw store, so the next run (or `tourneylake rebuild --date {self.night}`) makes them, free"
            )
        if self._crash is not None and not self._crash_raised:  # on the last answers: no `add_answer` after it
            raise TablesWorkerError(
                f"the tables worker could not normalise an answer ({self._crash}): tonight's tables were written "
                f"without it; it is in the raw store, so `tourneylake rebuild --date {self.night}` makes them whole, free"
            )

    # ------------------------------------------------------------------ plumbing
    def _write(self, message: list[Any]) -> None:
        """Queue one message for the feeder: the harvest never waits on the pipe while the
        worker is starting or a batch behind (the queue's bound is the backpressure)."""
        if self._broken:
            self._ended.wait(timeout=10)
            raise TablesWorkerError(f"the tables worker ended early: {self._why()}")
        try:
            self._queue.put(frame(message), timeout=_STUCK_S)
        except queue.Full:
            raise self._stuck("took no answer") from None

    def _stuck(self, what: str) -> TablesWorkerError:
        """The worker, alive but stuck, killed; the error that ends the night."""
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
        return TablesWorkerError(
            f"the tables worker {what} in {_STUCK_S:.0f} s and was stopped: tonight's summary tables were not "
            f"written; every answer is in the raw store, so the next run (or `tourneylake rebuild --date "
            f"{self.night}`) makes them, free"
        )

    def _feed(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        stdin = self._proc.stdin
        while (frame := self._queue.get()) is not None:
            if self._broken or self._abandoned:
                continue  # drained, so a full queue never blocks the harvest
            try:
                stdin.write(frame)
                if self._queue.empty():
                    stdin.flush()
            except (OSError, ValueError):  # the worker is gone: the reader tells why
                self._broken = True
        with contextlib.suppress(OSError, ValueError):
            stdin.close()

    def _why(self) -> str:
        if self._result is not None:
            return self._result
        code = self._proc.poll() if self._proc is not None else None
        return f"exit status {code}" if code is not None else "no answer"

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while (message := receive(self._proc.stdout)) is not None:
                kind = message[0]
                if kind == "log":
                    self._logs.append((message[1], message[2], message[3]))
                elif kind == "stored":
                    self._stored = (message[1], message[2])
                    self._stored_ready.set()
                elif kind == "rejected":
                    self.rejected.append((tuple(message[1]), message[2]))
                elif kind == "crashed":
                    self._crash = self._crash or message[1]
                elif kind == "done":
                    self.rows = dict(message[1])
                    self.repeating = set(message[2]) if len(message) > 2 else None  # not said: every table is read back
                    self._answered.set()
                elif kind == "failed":
                    self._result = message[1]
                    self._answered.set()
        finally:
            self._proc.stdout.close()
            code = self._proc.wait()
            if self._result is None and (code != 0 or not self._finished):
                self._result = f"exit status {code}"
            self._stored_ready.set()
            self._ended.set()
            self._answered.set()

    def _emit_logs(self) -> None:
        """The worker's log lines, logged here (on the harvest's thread: the run's log)."""
        while self._logs:
            name, level, text = self._logs.popleft()
            logging.getLogger(name).log(level, "%s", text)


# ---------------------------------------------------------------------- nights rebuilt side by side

#: Workers a rebuild starts at most when the setting leaves it to the machine (0): each holds a
#: night's batch of tables (~250 MB at 2,000 summaries), so a big machine is not filled with them.
MAX_AUTO_REBUILD_WORKERS = 8


def rebuild_workers(setting: int, nights: int) -> int:
    """How many processes rebuild ``nights`` nights: ``setting`` (0: one per core this process
    may use, at most :data:`MAX_AUTO_REBUILD_WORKERS`), never more than the nights."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = setting or min(cores, MAX_AUTO_REBUILD_WORKERS)
    return max(1, min(wanted, nights))


class RebuildWorkers:
    """The player tables of a local lake's nights rebuilt from raw by ``count`` worker processes,
    each taking the next night when it has finished one (the caller has made the nights'
    reference tables first: see :func:`tourneylake.tables.night_tables.reference_tables`). :meth:`rebuild`
    yields each night as it is done; the workers' log lines are logged here, as they come.

    A night that fails stops the hand-out: the nights under way finish (each is whole or keeps
    its previous tables, table by table, as in process) and :class:`TablesWorkerError` names
    the night and why (the worker's traceback is logged at debug level). Leaving early (an
    exception, Ctrl-C) stops the workers that have a night under way with one SIGTERM, which
    they turn into an exit through their with-blocks: the partitions they were writing drop
    their staged parts. The workers run in their own session, so a terminal's Ctrl-C reaches
    this process only (two signals would cut that clean-up short). A worker whose parent
    died finishes its night and ends: its input is closed."""

    def __init__(self, data_dir: str | Path, count: int, *, store: bool = False) -> None:
        self.data_dir = data_dir
        self.count = count
        self.store = store  # the lake is on an object store: its workers get that store's environment
        self._procs: list[subprocess.Popen[bytes]] = []
        self._readers: list[threading.Thread] = []
        self._events: queue.Queue[tuple[int, list[Any] | None]] = queue.Queue()
        self._busy: dict[int, date] = {}  # worker index -> the night it is rebuilding
        self._failure: Exception | None = None

    def __enter__(self) -> RebuildWorkers:
        try:
            for index in range(self.count):
                proc = _spawn(store=self.store, own_session=True)
                self._procs.append(proc)
                reader = threading.Thread(target=self._read, args=(index, proc), name=f"tourneylake-rebuild-{index}", daemon=True)
                reader.start()
                self._readers.append(reader)
        except OSError as exc:  # no process for one more worker (memory, file handles)
            self.__exit__(type(exc), exc, None)
            raise TablesWorkerError(f"cannot start the rebuild's worker processes: {exc}") from None
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        for index, proc in enumerate(self._procs):
            self._close(proc)
            if exc_type is not None and index in self._busy:
                proc.terminate()  # its night is cut short: it keeps its previous tables
        for proc in self._procs:
            _reap(proc)
        for reader in self._readers:
            reader.join(timeout=10)

    def rebuild(self, nights: Iterable[date]) -> Iterator[tuple[date, dict[str, int], list[str]]]:
        """Each night's rows written per table and answers still unusable, as it is done.
        ``nights`` is drawn one at a time, when a worker is free for it."""
        todo = iter(nights)
        busy = self._busy
        self._failure = None
        for index, proc in enumerate(self._procs):
            self._next(index, proc, todo)
        while busy:
            index, message = self._events.get()
            if message is not None and message[0] == "log":
                logging.getLogger(message[1]).log(message[2], "%s", message[3])
                continue
            night = busy.pop(index, None)
            if night is None:
                continue  # a worker with no night ended
            done = None
            if message is None:
                self._fail(
                    TablesWorkerError(f"the worker rebuilding night {night} ended (exit status {self._procs[index].wait()})")
                )
            elif message[0] == "rebuilt":
                done = night, dict(message[1]), list(message[2])
            else:  # "night_failed" (why, and the worker's traceback) or "failed" (the worker's own end)
                self._fail(TablesWorkerError(f"night {night} could not be rebuilt: {message[1]}"))
                if len(message) > 2:
                    log.debug("the worker's traceback for night %s:\n%s", night, message[2])
            # The next night first: the caller may take a while with this one (a warehouse load).
            if self._failure is None:
                self._next(index, self._procs[index], todo)
            else:
                self._close(self._procs[index])
            if done is not None:
                yield done
        if self._failure is not None:
            raise self._failure

    def _fail(self, error: Exception) -> None:
        """The first failure is the error :meth:`rebuild` raises once the nights under way are
        done; the others are told."""
        if self._failure is None:
            self._failure = error
        else:
            log.warning("%s", error)

    def _next(self, index: int, proc: subprocess.Popen[bytes], todo: Iterator[date]) -> None:
        """Hand worker ``index`` the next night, or close its input when there is none (or when
        drawing it failed: the caller's step before a night, which then is the error)."""
        try:
            night = next(todo, None) if self._failure is None else None
        except Exception as exc:  # noqa: BLE001 - raised by `rebuild` once the nights under way are done
            self._fail(exc)
            night = None
        if night is None:
            self._close(proc)
            return
        self._busy[index] = night
        assert proc.stdin is not None
        try:
            send(proc.stdin, ["rebuild", str(self.data_dir), night.isoformat()])
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # the worker is gone: its reader reports the end

    @staticmethod
    def _close(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()  # the worker ends once its night is done

    def _read(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            while (message := receive(proc.stdout)) is not None:
                self._events.put((index, message))
        finally:
            proc.stdout.close()
            self._events.put((index, None))


# ---------------------------------------------------------------------- the worker process


class _Forward(logging.Handler):
    """The worker's log records, sent to the harvest as ``log`` messages."""

    def __init__(self, out: IO[bytes]) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        try:
            send(self.out, ["log", record.name, record.levelno, record.getMessage()])
        except Exception:  # noqa: BLE001 - a log line must never fail the work
            self.handleError(record)


def _serve(inp: IO[bytes], out: IO[bytes]) -> int:
    from contextlib import ExitStack

    from tourneylake.api.tree import MalformedPayload, parse
    from tourneylake.lake.lake import Lake
    from tourneylake.tables.night_tables import SummarySink, target_key  # the worker's imports: not the harvest's
    from tourneylake.tables.reference import InForce

    start = receive(inp)
    if start is None:
        return 0  # the harvest ended before it started us
    if start[0] == "rebuild":
        return _serve_rebuilds(start, inp, out)
    _, root, night_iso, batch_size, has_stored = start
    lake, night = Lake(root), date.fromisoformat(night_iso)
    try:
        with ExitStack() as stack:
            sink = SummarySink(lake, night, InForce(lake, night), stack, batch_size)
            if has_stored:
                stored = sink.add_stored()
                send(out, ["stored", [list(t) for t in stored.done], [[*t, why] for t, why in stored.unusable.items()]])
                out.flush()
            added, flush_at = 0, -1  # flush_at: answers added when the tail's flush is due (`expect`)
            while (message := receive(inp)) is not None:
                if message[0] == "finish":
                    sink.flush()
                    break
                if message[0] == "expect":
                    flush_at = added + message[1] - _TAIL
                    continue
                if added == flush_at and sink.pending:
                    sink.flush()  # all but the tail: the flush left for `finish` is a short one
                added += 1
                _, body, fmt, key, fetched_at = message
                try:
                    sink.add(parse(body, fmt), key, datetime.fromisoformat(fetched_at))
                except MalformedPayload as exc:
                    sink.reject(key, str(exc))
                    send(out, ["rejected", list(target_key(key)), str(exc)])
                except Exception as exc:  # noqa: BLE001 - handed back: the harvest stops new searches
                    send(out, ["crashed", f"{type(exc).__name__} while normalising: {exc}"])
                out.flush()
            else:
                # The harvest died or gave up: leaving the block by an exception discards the
                # new parts, so the night's previous tables stay (its raw answers are all kept).
                raise _Abandoned
    except _Abandoned:
        return 0
    send(out, ["done", sink.rows, sorted(sink.repeating)])
    out.flush()
    return 0


class _Abandoned(Exception):
    """Internal: the harvest ended without ``finish``."""


def _serve_rebuilds(first: list[Any], inp: IO[bytes], out: IO[bytes]) -> int:
    """Make the player tables of each night asked for (``["rebuild", data_dir, night]``) until
    the input ends."""
    from tourneylake.lake.lake import Lake
    from tourneylake.tables.night_tables import player_tables  # the worker's imports: not the harvest's

    message: list[Any] | None = first
    while message is not None:
        _, data_dir, night_iso = message
        unusable: list[str] = []
        try:
            rows = player_tables(Lake(data_dir), date.fromisoformat(night_iso), unusable)
        except Exception as exc:  # noqa: BLE001 - handed back: the rebuild stops handing out nights
            send(out, ["night_failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()])
        else:
            send(out, ["rebuilt", rows, unusable])
        out.flush()
        message = receive(inp)
    return 0


def _stop(signum: int, frame: object) -> None:
    # Stopped by the parent (SIGTERM): unwind like an exception, so a partition being written
    # removes its staged parts (the night keeps its previous tables) instead of leaving them.
    raise SystemExit(128 + signum)


def main() -> int:
    refuse_pandas()  # pyarrow would import it (0.4 s, ~35 MB); the worker never makes a frame
    signal.signal(signal.SIGTERM, _stop)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the pipe
    root_logger = logging.getLogger()
    root_logger.handlers[:] = [_Forward(out)]
    root_logger.setLevel(logging.INFO)
    try:
        return _serve(inp, out)
    except KeyboardInterrupt:  # Ctrl-C reaches the harvest's whole process group: the harvest tells the user
        return 130
    except Exception as exc:  # noqa: BLE001 - reported to the harvest, which raises it
        with contextlib.suppress(OSError, ValueError):
            send(out, ["failed", f"{type(exc).__name__}: {exc}"])
            out.flush()
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the work is over: a late SIGTERM just ends the process


if __name__ == "__main__":
    sys.exit(main())
