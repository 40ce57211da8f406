"""Python's cyclic garbage collector where it only costs time.

A command's start-up (``tourneylake run`` imports Dagster, its instance's storage, pyarrow)
allocates objects by the hundred thousand that live until the process ends; the collector's
full passes, set off by those very allocations, walk them all again and find nothing, a good
part of a one-player night. :func:`start_up` pauses the collector while such imports run and
then freezes what they left (``gc.freeze``: later passes skip it). :func:`paused` only pauses it,
for work that allocates much and makes no cycle (parsing a night's stored answers). Both leave
the collector off if the caller had it off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused", "start_up"]


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block; cycles made meanwhile are collected once it is back on."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def start_up() -> Iterator[None]:
    """The collector off for the block, then every object alive frozen out of its passes: for
    imports and one-off set-up whose objects the process keeps to its end."""
    with paused():
        try:
            yield
        finally:
            gc.freeze()
