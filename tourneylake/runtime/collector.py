"""Python's cyclic garbage collector paused where it only costs time.

Work that allocates objects by the hundred thousand and makes no cycle (parsing a night's stored
answers) sets off the collector's full passes, which walk them all and find nothing.
:func:`paused` turns it off for such a block, and leaves it off if the caller had it off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]


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
