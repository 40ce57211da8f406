"""A shard whose run died stops paying: a step run in a process of its own (an account's harvest
in the multiprocess executor's child, a Celery worker's pool process) watches the process that
started it, and when that one is gone (``kill -9`` of ``tourneylake run``, a lost worker) nobody
waits for its answers any more: it stops starting searches within seconds.

It stops the way Ctrl-C stops a harvest: a SIGINT to itself, which the fetching takes as "no new
search; the calls in flight finish, and their answers and rows are kept"
(:mod:`tourneylake.night.harvest`). The parent's pid is watched (every :data:`WATCH_EVERY_S`):
Linux's ``PR_SET_PDEATHSIG`` would follow the parent *thread* that started the process, which an
executor's thread pool may end long before the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator

__all__ = ["WATCH_EVERY_S", "stops_when_parent_dies"]

log = logging.getLogger(__name__)

#: How often the parent's pid is looked at (seconds): the delay before a shard stops, at most.
WATCH_EVERY_S = 0.5


@contextlib.contextmanager
def stops_when_parent_dies(*, watch: bool = True) -> Iterator[None]:
    """For the block, a SIGINT to this process once the process that started it is gone
    (``watch=False``: none, for a step run in the run's own process, whose parent is a shell or a
    scheduler that may well end first, as under ``nohup``)."""
    parent = os.getppid()
    if not watch or parent <= 1:  # adopted already (a container's first process, a daemon): nothing to watch
        yield
        return
    over = threading.Event()

    def watching() -> None:
        while not over.wait(WATCH_EVERY_S):
            if os.getppid() != parent:
                log.warning(
                    "the process that started this one (pid %d) is gone: no new search starts; the calls in flight finish",
                    parent,
                )
                os.kill(os.getpid(), signal.SIGINT)
                return

    watcher = threading.Thread(target=watching, name="tourneylake-parent", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        over.set()
        watcher.join()
