"""Threads of the process: work handed to one that its waiter cannot call off, and pools the
whole process shares.

``asyncio.wrap_future`` (and so ``loop.run_in_executor``) passes a waiter's cancellation on to
the ``concurrent.futures.Future`` it wraps, and an executor drops a cancelled item still in its
queue. For a harvest that would be a paid body never saved, or a ledger line never written,
whenever the task waiting for it is cancelled (a sibling's failure, Ctrl-C): the work has to
happen whoever still waits for it.

:class:`ProcessThreads` is a pool the whole process shares (the lake's part writes, the S3
client's side-by-side reads): made on first use, made anew in a forked child (a fork keeps no
thread), and stopped with every other by :func:`stop_process_threads` once a command is done,
for its idle threads would keep ``tourneylake.cli.launch`` from ending the process at once.
Kept to the standard library: the raw saver imports it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

__all__ = ["ProcessThreads", "stop_process_threads", "submit_to_finish"]

T = TypeVar("T")


def submit_to_finish(executor: Executor, fn: Callable[..., T], /, *args: Any) -> Future[T]:
    """``executor.submit(fn, *args)``, returning a future that cannot be cancelled: it is
    running from the start (``Future.cancel`` refuses a running future), so a cancelled waiter
    stops waiting and the work is still done."""
    done: Future[T] = Future()
    done.set_running_or_notify_cancel()

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - the waiter's, as executor.submit would give it
            done.set_exception(exc)
        else:
            done.set_result(result)

    executor.submit(run)
    return done


class ProcessThreads:
    """A pool of ``threads`` threads named ``name``, shared by the process (see the module docstring)."""

    every: ClassVar[list[ProcessThreads]] = []

    def __init__(self, threads: int, name: str) -> None:
        self.threads, self.name = threads, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        ProcessThreads.every.append(self)
        os.register_at_fork(after_in_child=self._forget)

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
            return self._pool

    def stop(self) -> None:
        """Wait for the work handed to it, then stop its threads (made again on the next use)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()


def stop_process_threads() -> None:
    """Stop every :class:`ProcessThreads` pool once its work is done."""
    for pool in ProcessThreads.every:
        pool.stop()
