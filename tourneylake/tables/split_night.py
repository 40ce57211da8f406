"""One night rebuilt on two cores: this process and a child forked from it.

A rebuild of one night spends most of its time reading, parsing and normalising the night's
summaries, one core's work, and a new process would spend a good part of that on its imports.
:func:`helping` forks a child instead (it has this process's modules), before the night's
reference tables are made, and gives it a share of the night's targets: it reads their answers
meanwhile, then, handed the night's rates and types (:meth:`Helper.start`), normalises them into
a file of Arrow batches while this process normalises the rest into the night's parts. This
process then writes the child's rows too (:meth:`Helper.hand_over`): a tournament or entry that
both kept as the same listing is written once (by the normaliser's dedup hashes: a forked child
hashes as its parent), and a key both kept otherwise sends its table through the night's
one-row-per-key pass, as one process would. The child writes nothing to the lake (the statuses
it finds are settled here); when it fails, this process reads its share itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import date
from itertools import chain, islice
from typing import IO, Any

from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import read_raws
from tourneylake.lake.segments import RawRef
from tourneylake.runtime import collector
from tourneylake.tables.night_tables import (
    StoredSummaries,
    SummarySink,
    player_tables,
    reference_data,
    settle_received,
    stored_summary_refs,
    target_key,
    write_reference_tables,
)
from tourneylake.tables.reference import InForce

__all__ = ["MIN_SUMMARIES", "Helper", "can_fork", "helping", "rebuild_night_on_two_cores"]

log = logging.getLogger(__name__)

#: Fewer stored summaries than this are read in one process: the fork and the hand-over would
#: cost more than the share saves.
MIN_SUMMARIES = 200
#: The child's share of the night's targets: this process also makes the reference tables and
#: writes every part.
CHILD_SHARE = 0.5
#: How long this process waits for the child once its own share is read: this many times what
#: its own share took (the same work), at least :data:`_MIN_PATIENCE_S`; then the child is stuck.
_PATIENCE = 10.0
_MIN_PATIENCE_S = 60.0
#: Summaries the child reads before it is handed the night's rates (while the reference tables are made).
_READ_AHEAD = 500


def rebuild_night_on_two_cores(lake: Lake, night: date, unusable: list[str] | None = None) -> dict[str, int]:
    """:func:`~tourneylake.tables.night_tables.rebuild_night` with a forked helper reading a
    share of the summaries when that can pay (see :func:`helping`); the same rows either way."""
    with helping(lake, night) as helper:
        tables = reference_data(lake, night)
        in_force = InForce(lake, night, own=tables)
        if helper is not None:
            helper.start(in_force)
        # The reference tables committed meanwhile (their commits wait on the disk, not on the
        # interpreter), before the player tables' commits.
        with ThreadPoolExecutor(1, thread_name_prefix="tourneylake-reference") as pool:
            written = pool.submit(write_reference_tables, lake, night, tables)
            read_stored = None if helper is None else helper.read_into
            rows = player_tables(lake, night, unusable, in_force=in_force, read_stored=read_stored, before_commit=written.result)
        rows.update(written.result())
    return rows


def can_fork(lake: Lake) -> bool:
    """Whether this process may fork a helper for ``lake``: Linux (a fork is what the libraries
    there expect), a local lake without shared state (the child reads files, never a
    connection), and no thread of Python's running (none holds a lock the child would need)."""
    return sys.platform == "linux" and lake.local and lake.shared is None and threading.active_count() == 1


@contextlib.contextmanager
def helping(lake: Lake, night: date) -> Iterator[Helper | None]:
    """A helper for the night's summaries (``None`` when forking cannot pay or is not safe: see
    :func:`can_fork`, :data:`MIN_SUMMARIES`); stopped if the block is left before its hand-over."""
    helper = Helper.fork(lake, night) if can_fork(lake) else None
    try:
        yield helper
    finally:
        if helper is not None:
            helper.close()


def _shares(refs: list[RawRef]) -> tuple[list[RawRef], list[RawRef]]:
    """The night's refs as (this process's, the child's): whole targets each (a target's
    answers are read in one process, in the night's order)."""
    targets = list(dict.fromkeys(target_key(ref.key) for ref in refs))
    theirs = set(targets[: round(len(targets) * CHILD_SHARE)])
    return [r for r in refs if target_key(r.key) not in theirs], [r for r in refs if target_key(r.key) in theirs]


class Helper:
    """This process's side of the child reading a share of the night (see the module docstring)."""

    def __init__(self, pid: int, mine: list[RawRef], theirs: list[RawRef], go: int, results: IO[bytes]) -> None:
        self.pid = pid
        self.mine, self.theirs = mine, theirs
        self._go: int | None = go  # the pipe the night's rates are sent on
        self._results = results  # the child's batches and its outcome
        self._status: int | None = None  # the child's exit status, once reaped
        self._stuck = False  # stopped for taking far longer than this process's share
        self._started = time.monotonic()

    @classmethod
    def fork(cls, lake: Lake, night: date) -> Helper | None:
        """The child forked with its share, or ``None`` when the night has too few summaries."""
        settle_received(lake, night)  # every status known before the shares are listed
        refs = stored_summary_refs(lake, night)
        if len(refs) < MIN_SUMMARIES:
            return None
        mine, theirs = _shares(refs)
        results = tempfile.TemporaryFile(prefix="tourneylake-helper-")  # noqa: SIM115 - closed by `close`
        go_read, go_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()  # nothing buffered twice
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's with-blocks
            code = 1
            try:
                os.close(go_write)
                code = _child(lake, night, theirs, go_read, results)
            finally:
                os._exit(code)
        os.close(go_read)
        return cls(pid, mine, theirs, go_write, results)

    def start(self, in_force: InForce) -> None:
        """Hand the child the night's rates and types (the reference tables are in)."""
        assert self._go is not None
        data = memoryview(pickle.dumps(in_force.normaliser_inputs(), protocol=5))
        try:
            while data:
                data = data[os.write(self._go, data) :]
        except OSError:
            pass  # the child is gone: its share is read here (see `hand_over`)
        finally:
            os.close(self._go)
            self._go = None

    def read_into(self, sink: SummarySink) -> StoredSummaries:
        """The night's stored summaries into ``sink``: this process's share read here, then the
        child's handed over (:meth:`hand_over`)."""
        with collector.paused():  # the answers' trees hold no cycles
            stored = sink.add_refs(self.mine, StoredSummaries())
            self.hand_over(sink, stored)
        return stored

    def hand_over(self, sink: SummarySink, stored: StoredSummaries) -> None:
        """The child's share into ``sink`` (which has read this process's share): its rows
        written, its statuses settled, its targets in ``stored``; read here when it failed."""
        if self._wait(max(_MIN_PATIENCE_S, _PATIENCE * (time.monotonic() - self._started))) != 0:
            log.warning("night %s: the rebuild's helper process failed (%s): its share is read here", sink.night, self._why())
            sink.add_refs(self.theirs, stored)
            return
        sink.flush()  # this process's rows kept: the child's are checked against them
        self._results.seek(0)
        while True:
            kind, *payload = pickle.load(self._results)
            if kind == "batch":
                tables, hashes = payload
                for name, table in tables.items():
                    if name in hashes:
                        table = sink.normalizer.without_kept(name, table, *hashes[name])
                    sink.write(name, table)
            elif kind == "done":
                done, unusable, settled, repeating = payload
                for ref, status in settled:
                    sink.settle(ref, status)
                stored.done |= done
                stored.unusable.update(unusable)
                sink.normalizer.repeating |= set(repeating)
                return

    def close(self) -> None:
        """The child stopped if still at work (the block was left early), and reaped."""
        if self._go is not None:
            os.close(self._go)
            self._go = None
        if self._status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._wait()
        self._results.close()

    def _wait(self, timeout: float | None = None) -> int:
        """The child's exit status, once it has ended; one still at work after ``timeout``
        seconds (stuck: it has the same work as this process) is stopped, and failed."""
        if self._status is None and timeout is not None and not _ends_within(self.pid, timeout):
            self._stuck = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self._status is None:
            _, status = os.waitpid(self.pid, 0)
            self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def _why(self) -> str:
        """The child's own word on its failure, else its exit status."""
        if self._stuck:
            return "it did not finish in time and was stopped"
        with contextlib.suppress(Exception):
            self._results.seek(0)
            while True:
                kind, *payload = pickle.load(self._results)
                if kind == "failed":
                    return str(payload[0])
        return f"exit status {self._status}"


class _ChildSink(SummarySink):
    """The child's sink: batches (with their dedup hashes) to the results file, not parts; the
    statuses it finds noted, for the parent to settle."""

    def __init__(self, lake: Lake, night: date, in_force: InForce, stack: ExitStack, results: IO[bytes]) -> None:
        super().__init__(lake, night, in_force, stack)
        self.normalizer.track_hashes()
        self.results = results
        self.settled: list[tuple[RawRef, str]] = []

    def settle(self, ref: RawRef, status: str) -> None:
        self.settled.append((ref, status))

    def flush(self) -> None:
        self.pending = 0
        tables = self.normalizer.flush()
        _send(self.results, ("batch", tables, self.normalizer.flushed_hashes or {}))


def _child(lake: Lake, night: date, refs: list[RawRef], go: int, results: IO[bytes]) -> int:
    """The child's work (see the module docstring); its exit status."""
    try:
        with collector.paused():  # the answers' trees hold no cycles
            bodies = read_raws(refs)
            ahead = list(islice(bodies, _READ_AHEAD))  # read while the reference tables are made
            inputs = _receive(go)
            if inputs is None:
                return 0  # the parent gave up on the night
            stored = StoredSummaries()
            with ExitStack() as stack:
                sink = _ChildSink(lake, night, InForce.with_inputs(lake, night, inputs), stack, results)
                sink.add_raws(chain(ahead, bodies), stored)
                sink.flush()
        _send(results, ("done", stored.done, stored.unusable, sink.settled, sorted(sink.repeating)))
        results.flush()
        return 0
    except BaseException as exc:  # noqa: BLE001 - told to the parent, which reads the share itself
        with contextlib.suppress(Exception):
            _send(results, ("failed", f"{type(exc).__name__}: {exc}"))
            results.flush()
        return 1


def _ends_within(pid: int, timeout: float) -> bool:
    """Whether the child ``pid`` ends within ``timeout`` seconds (not reaped: see ``Helper._wait``)."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (an old kernel): waited for without a limit
        return True
    try:
        return bool(select.select([handle], [], [], timeout)[0])
    finally:
        os.close(handle)


def _send(results: IO[bytes], message: tuple[Any, ...]) -> None:
    pickle.dump(message, results, protocol=5)


def _receive(go: int) -> Any:
    """What the parent sent on ``go`` (up to its end), or ``None`` when it sent nothing."""
    chunks = []
    while chunk := os.read(go, 1 << 16):
        chunks.append(chunk)
    os.close(go)
    return pickle.loads(b"".join(chunks)) if chunks else None
