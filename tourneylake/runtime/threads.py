"""Work handed to a thread that its waiter cannot call off.

``asyncio.wrap_future`` (and so ``loop.run_in_executor``) passes a waiter's cancellation on to
the ``concurrent.futures.Future`` it wraps, and an executor drops a cancelled item still in its
queue. For a harvest that would be a paid body never saved, or a ledger line never written,
whenever the task waiting for it is cancelled (a sibling's failure, Ctrl-C): the work has to
happen whoever still waits for it. Kept to the standard library: the raw saver imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["submit_to_finish"]

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
