"""A harvest's paid bodies saved by a second process while it fetches.

Saving a body in the harvest's own process made every system call (or PUT) give up the GIL and
wait for the event loop; so the harvest hands each body to this saver (``python -m
tourneylake.lake.raw_saver``) through a pipe, and the saver keeps them in segments of its own
(:mod:`~tourneylake.lake.segments`). A call's caller hears of its answer, and its ledger row is
written, only once the saver says the body is kept under its status; a saver that dies, cannot
start or cannot be trusted leaves the harvest to save every body it has not acknowledged, under
the same token; a body it cannot write is written again by the harvest, so the call fails with
the harvest's own error; a harvest killed with bodies in the pipe leaves each whole one
``received``. Its environment holds no service credentials. ``TOURNEYLAKE_RAW_SAVER=thread``
keeps the saves on the harvest's threads. Messages: ``["save", id, token, resource, key, fmt,
fetched_at, snapshot_date, body]``, ``["settle", id, token, digest, resource, status, at]``;
answers ``[id, None]`` or ``[id, "<what failed>"]``; and, on an object store, ``["segment", path,
entries]`` for each segment stored (its index's entries, when they fit an answer's bytes), which the
harvest adds to its index of the night: its later reads of the night (the coverage changes' "not
found" answers) GET no segment it was told of.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tourneylake.lake.outages import KEEP_PAID_S, out_elsewhere, transient_text
from tourneylake.lake.raw import RECEIVED, key_digest, raw_file_bytes, raw_stamps
from tourneylake.lake.raw_answers import check_raw_request, new_token
from tourneylake.lake.segments import Entries, RawRef, SegmentWriter, night_index
from tourneylake.lake.storage import AnyPath, StorePath
from tourneylake.runtime.pipes import LENGTH, frame, receive, split_frames, worker_env
from tourneylake.runtime.threads import submit_to_finish

if TYPE_CHECKING:
    from tourneylake.api import ReceivedBody
    from tourneylake.lake.lake import Lake

__all__ = ["RAW_SAVER_ENV", "RawSaver", "saver_wanted"]

log = logging.getLogger(__name__)

RAW_SAVER_ENV = "TOURNEYLAKE_RAW_SAVER"
# Threads that save at once in the harvest once the saver is gone (each waits for the group
# commit of its body: several wait together).
_THREADS = 4
# A pipe holds 64 KiB unless asked: 16 calls' bodies in flight (~14-28 KB each) fit in 1 MiB,
# so the event loop's write of a body is one system call.
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # Linux's fcntl; elsewhere the pipe keeps its size
# Seconds for the saver to answer what it was sent, and end, once the harvest closes its input.
_CLOSE_TIMEOUT_S = 120.0
# Seconds to wait for a saver to end once it was told to (its input closed, or killed).
_END_TIMEOUT_S = 10.0
# An answer is ``[id, None]`` or ``[id, "<what failed>"]``: a frame said to be longer is not one.
_ANSWER_BYTES = 1 << 16


#: Fewer metered calls than this are saved on the harvest's threads (``auto``): starting the
#: saver's interpreter costs a small night more than the saves it takes off the loop.
SAVER_MIN_CALLS = 16


def saver_wanted(lake: Lake, calls: int | None = None) -> bool:
    """Whether a harvest on ``lake`` making ``calls`` metered calls (``None``: many) saves its
    bodies through the saver process: ``TOURNEYLAKE_RAW_SAVER`` ``process``, ``thread``, or unset
    (``auto``: at least :data:`SAVER_MIN_CALLS` calls), never on a store that lives in this
    process's memory (``memory://``, which another process cannot reach)."""
    mode = os.environ.get(RAW_SAVER_ENV, "auto")
    if not lake.reachable_from_other_processes or mode == "thread":
        return False
    return mode == "process" or calls is None or calls >= SAVER_MIN_CALLS


def _command(lake: Lake, night: date) -> list[str]:
    return [sys.executable, "-m", "tourneylake.lake.raw_saver", str(lake.data_dir), night.isoformat(), "1" if lake.fsync else "0"]


# ------------------------------------------------------------------------------ the harvest's side


class _Reader(asyncio.Protocol):
    def __init__(self, saver: RawSaver) -> None:
        self.saver = saver
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        if self.saver._dead:
            return
        self.buffer += data
        try:
            for message in split_frames(self.buffer, _ANSWER_BYTES):
                self.saver._answered(message)
        except Exception as exc:  # noqa: BLE001 - not the saver's answers (stray output): trusted no more
            log.warning("the raw saver process answered something unreadable (%s): the harvest saves its bodies itself", exc)
            self.buffer.clear()
            self.saver._ended()

    def connection_lost(self, exc: Exception | None) -> None:
        self.saver._ended()


class _Writer(asyncio.BaseProtocol):
    def __init__(self, saver: RawSaver) -> None:
        self.saver = saver

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:  # the saver closed its input: it is gone
            self.saver._ended()


class RawSaver:
    """One harvest's saver process, driven from its event loop (see the module docstring).

    :meth:`save` returns once the body is on disk, with a function that names it by its status
    and returns the future of that rename. The process starts when the saver is made (its
    interpreter starts while the first call is out), its pipes are joined to the event loop on
    the first body, and :meth:`aclose` ends it."""

    def __init__(self, lake: Lake, night: date) -> None:
        self.lake = lake
        self.night = night
        self.pid: int | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._starting: asyncio.Task[None] | None = None
        self._early: list[tuple[int, bytes]] = []  # messages sent while the saver was starting
        self._gone: asyncio.Future[None] | None = None  # done once the saver's output has ended
        self._dead = False
        self._killed: subprocess.Popen[bytes] | None = None  # stopped by the harvest with work unanswered
        self._next_id = 0
        # Each message not yet answered: its future and how the harvest does the same itself.
        self._waiting: dict[int, tuple[asyncio.Future[None], Callable[[], object]]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        try:
            proc = subprocess.Popen(
                _command(self.lake, self.night),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=worker_env(store=not self.lake.local),
                close_fds=True,
            )
        except Exception as exc:  # noqa: BLE001 - whatever it is, the harvest saves its bodies itself
            log.warning("the raw saver process could not start (%s): the harvest saves its bodies itself", exc)
            self._dead = True
            return None
        with contextlib.suppress(OSError):
            import fcntl

            fcntl.fcntl(proc.stdin.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore[union-attr]
        self.pid = proc.pid
        return proc

    async def save(self, received: ReceivedBody) -> Callable[[str], asyncio.Future[None]]:
        call, lake, night = received.call, self.lake, self.night
        check_raw_request(call.resource, call.key, received.format)
        token = new_token()
        fetched_at, night_iso = raw_stamps(received.fetched_at, night)

        def here() -> None:
            lake.raw.write(night, call.resource, call.key, received.body, received.format, received.fetched_at, token=token)

        message = ["save", token, call.resource, dict(call.key), received.format, fetched_at, night_iso, received.body]
        await self._send(message, here)
        ref = RawRef(night, call.resource, key_digest(call.key), token, RECEIVED, lake.raw.root)
        return lambda status: self._settle(ref, status)

    def _settle(self, ref: RawRef, status: str) -> asyncio.Future[None]:
        """Name a body by its status (stamped now: the latest decision wins, whoever writes it
        down first). On an object store its caller does not wait for the status to be stored (a
        PUT shared with the next bodies): the body is kept, and one whose status is lost stays
        ``received``, for the next run to read again."""
        done = asyncio.get_running_loop().create_future()
        if status == ref.status:
            done.set_result(None)
            return done
        at = time.time_ns()
        named = self._send(
            ["settle", ref.token, ref.digest, ref.resource, status, at], lambda: self.lake.raw.settle(ref, status, at=at)
        )
        if self.lake.local:
            return named
        named.add_done_callback(_told_if_failed)
        done.set_result(None)
        return done

    def _send(self, message: list[Any], here: Callable[[], object]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        if self._dead:
            return self._here(here)
        answered: asyncio.Future[None] = loop.create_future()
        self._next_id += 1
        number = self._next_id
        self._waiting[number] = (answered, here)
        message.insert(1, number)
        data = frame(message)
        if self._writer is not None:
            self._writer.write(data)
        else:  # written once the saver has started
            self._early.append((number, data))
            if self._starting is None:
                self._starting = loop.create_task(self._start())
        return answered

    async def _start(self) -> None:
        """The saver's pipes joined to the event loop; its first messages written."""
        loop = asyncio.get_running_loop()
        self._gone = loop.create_future()
        proc, reader = self._proc, None
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            reader, _ = await loop.connect_read_pipe(lambda: _Reader(self), proc.stdout)
            writer, _ = await loop.connect_write_pipe(lambda: _Writer(self), proc.stdin)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the harvest saves its bodies itself
            log.warning("the raw saver's pipes could not be joined (%s): the harvest saves its bodies itself", exc)
            for pipe in (proc.stdin, proc.stdout if reader is None else reader):
                with contextlib.suppress(OSError):
                    pipe.close()  # nothing was written to the saver: it ends at once
            self._ended()
            return
        early, self._early = self._early, []
        for number, data in early:
            if number in self._waiting:
                writer.write(data)
        self._writer = writer

    def _answered(self, message: list[Any]) -> None:
        if message and message[0] == "segment":  # a segment the saver stored: its index, known here
            _, path, entries = message
            root = self.lake.raw.root
            if isinstance(root, StorePath):
                segment = StorePath(root.fs, path)
                night_index(root, self.night).known(segment, [(int(at), int(length), header) for at, length, header in entries])
            return
        number, failed = message
        entry = self._waiting.pop(number, None)
        if entry is None:
            return
        answered, here = entry
        if failed is None:
            if not answered.done():
                answered.set_result(None)
        else:  # done again here, for the harvest's own error (or its success)
            log.warning("the raw saver process could not do its part (%s): the harvest does it itself", failed)
            if transient_text(str(failed)):  # it kept trying for as long as a paid body is: not again here
                out_elsewhere(KEEP_PAID_S)
            self._chain(self._here(here), answered)

    def _ended(self) -> None:
        """The saver is gone (or never came): the harvest does what it left undone, and all the rest."""
        if self._dead:
            return
        self._dead = True
        proc = self._proc
        if self._waiting:
            if proc is not None and proc.poll() is None:
                # Still running (silent, or its answers unreadable): stopped before the harvest
                # saves its work, so that it cannot write a body again once the harvest has
                # saved it and named it by its status (each save here waits for it to end).
                proc.kill()
                self._killed = proc
            log.warning(
                "the raw saver process ended (exit code %s) with %d bodies unanswered: the harvest saves them itself",
                None if proc is None else proc.poll(),
                len(self._waiting),
            )
        waiting, self._waiting = self._waiting, {}
        for answered, here in waiting.values():
            self._chain(self._here(here), answered)
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)

    def _here(self, here: Callable[[], object]) -> asyncio.Future[None]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="tourneylake-body")
        killed = self._killed

        def after_the_saver() -> object:
            if killed is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    killed.wait(_END_TIMEOUT_S)
            return here()

        return asyncio.wrap_future(submit_to_finish(self._pool, after_the_saver))  # type: ignore[arg-type]

    @staticmethod
    def _chain(source: asyncio.Future[None], target: asyncio.Future[None]) -> None:
        def copy(done: asyncio.Future[None]) -> None:
            failed = None if done.cancelled() else done.exception()  # retrieved even if nobody waits
            if target.done():  # its caller was cancelled: the body is saved all the same
                return
            if failed is not None:
                target.set_exception(failed)
            else:
                target.set_result(None)

        source.add_done_callback(copy)

    async def aclose(self) -> None:
        """Close the saver's input and wait for its last answers and its end (bounded), then for
        anything the harvest is saving itself."""
        try:
            if self._starting is not None:
                with contextlib.suppress(Exception):
                    await self._starting
            if self._writer is not None:
                self._writer.close()
            elif self._proc is not None:  # its pipes were never joined (no body came): it ends at once
                for pipe in (self._proc.stdin, self._proc.stdout):
                    with contextlib.suppress(OSError):
                        pipe.close()  # type: ignore[union-attr]
            if self._gone is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(self._gone), _CLOSE_TIMEOUT_S)
                except TimeoutError:
                    log.warning("the raw saver process did not end in %.0f s: stopping it", _CLOSE_TIMEOUT_S)
                    self._ended()
            proc = self._proc
            if proc is not None:
                try:
                    await asyncio.to_thread(proc.wait, _END_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    try:
                        await asyncio.to_thread(proc.wait, _END_TIMEOUT_S)
                    except subprocess.TimeoutExpired:
                        log.warning("the raw saver process (pid %d) did not end once killed", proc.pid)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def _told_if_failed(named: asyncio.Future[None]) -> None:
    failed = None if named.cancelled() else named.exception()
    if failed is not None:
        log.warning("a body's status could not be stored (%s): it stays `received`, read again next run", failed)


# ------------------------------------------------------------------------------ the saver's side


def _raw_root(data_dir: str) -> AnyPath:
    """The lake's raw store, without the settings' checks (the harvest made them)."""
    from tourneylake.lake.storage import is_store_url, store_path

    root = store_path(data_dir) if is_store_url(data_dir) else Path(data_dir)
    return root / "lake" / "_raw"


def _serve(data_dir: str, night: date, fsync: bool) -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    answering = threading.Lock()

    def stored(segment: StorePath, entries: Entries) -> None:
        told = frame(["segment", segment.path, [list(entry) for entry in entries]])
        if len(told) - LENGTH.size <= _ANSWER_BYTES:  # else the harvest reads its index from the store
            with answering, contextlib.suppress(OSError):
                out.write(told)
                out.flush()

    writer = SegmentWriter(_raw_root(data_dir), night, fsync=fsync, on_stored=stored)

    def answer(number: int, done: Future[Any]) -> None:
        exc = done.exception()
        failed = None if exc is None else f"{type(exc).__name__}: {exc}"
        with answering, contextlib.suppress(OSError):  # the harvest is gone: nobody to answer
            out.write(frame([number, failed]))
            out.flush()

    try:
        while (message := receive(inp)) is not None:
            op, number, *args = message
            work: Future[Any]
            if op == "save":
                token, resource, key, fmt, fetched_at, night_iso, body = args
                payload = raw_file_bytes(resource, key, fmt, fetched_at, night_iso, body)
                work = writer.add_body(token, key_digest(key), resource, key, fmt, fetched_at, payload)
            else:
                token, digest, resource, status, at = args
                work = writer.add_status(RawRef(night, resource, digest, token, RECEIVED, writer.folder), status, at=at)
            work.add_done_callback(functools.partial(answer, number))
    finally:
        writer.close()  # every record received is kept (and answered) before the saver ends
    return 0


def main() -> int:
    # A Ctrl-C reaches the whole process group: the harvest decides when the saver ends (its
    # input closed), so every body it was handed is saved first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    data_dir, night, fsync = sys.argv[1:4]
    return _serve(data_dir, date.fromisoformat(night), fsync=fsync != "0")


if __name__ == "__main__":
    sys.exit(main())
