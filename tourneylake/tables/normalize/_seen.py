"""The night's dedup keys, kept compactly (64-bit hashes in a sorted array).

A night's tournaments and entries must not repeat a key across the parts written at each flush,
so :class:`~tourneylake.tables.normalize.summary.SummaryNormalizer` remembers every key it has kept.
As tuples of strings that cost ~250 bytes per key and grew with the watchlist (the one thing in
a harvest that did); here a key costs 8 bytes: the keys of the current batch are a small Python
set of hashes, merged at each flush into one sorted ``int64`` array for the night.

The hash is Python's own ``hash`` of the key tuple: 64 bits, SipHash-1-3 of each string with a
per-process random key, combined by CPython's tuple hash. The set lives in one normaliser, in
one process, for one night, so a hash that differs between processes is no concern. Collision
risk: two different keys with the same hash would make the second one count as already seen
(its row dropped from the night; its raw answer is kept, and a rebuild hashes with another
process key). For n keys of one kind the chance of any collision is about n² / 2⁶⁵: for a
20,000-player night (~600,000 entries) about 1 in 100 million per night, ~1 in 30,000 over a
decade of nights. Tournaments and entries are kept apart, which keeps n (and the risk) down.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["SeenKeys"]

_EMPTY = np.empty(0, dtype=np.int64)


class SeenKeys:
    """Hashes of the keys kept tonight: :meth:`new` tells which of a summary's keys are new
    against what earlier batches kept; the caller checks its own batch with :attr:`batch`
    (a set), adds with :meth:`add`, and :meth:`commit` at flush."""

    __slots__ = ("_night", "batch")

    def __init__(self) -> None:
        self._night: np.ndarray = _EMPTY
        self.batch: set[int] = set()

    def __len__(self) -> int:
        return len(self._night) + len(self.batch)

    @property
    def nbytes(self) -> int:
        """Memory of the night's committed hashes (not counting the batch's set)."""
        return int(self._night.nbytes)

    def unseen_before(self, hashes: list[int]) -> list[bool]:
        """Per hash: whether no earlier batch kept it (the current batch is not looked at)."""
        night = self._night
        if not len(night) or not hashes:
            return [True] * len(hashes)
        h = np.array(hashes, dtype=np.int64)
        pos = np.searchsorted(night, h)
        pos[pos == len(night)] = 0  # beyond the last: compare against any other value
        return (night[pos] != h).tolist()

    def add(self, hashes: Iterable[int]) -> None:
        self.batch.update(hashes)

    def commit(self) -> None:
        """Merge the batch's hashes into the night's sorted array (a linear merge: the two
        parts are each sorted, and numpy's stable sort merges runs)."""
        if not self.batch:
            return
        new = np.fromiter(self.batch, dtype=np.int64, count=len(self.batch))
        new.sort()
        merged = np.concatenate((self._night, new))
        merged.sort(kind="stable")
        self._night = merged
        self.batch = set()
