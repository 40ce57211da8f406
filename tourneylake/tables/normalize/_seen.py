"""The night's dedup keys, kept compactly: 64-bit hashes in a sorted array.

A night's tournaments and entries must not repeat a key across the parts written at each flush,
so the normaliser remembers every key it has kept: 8 bytes a key (the current batch's hashes in
a small set, merged at each flush into one sorted ``int64`` array), where tuples of strings grew
with the watchlist. The hash is Python's own ``hash`` of the key tuple (SipHash, per-process
key): the set lives in one normaliser, one process, one night. Two different keys with one hash
would drop the second's row from the night (its raw answer is kept, and a rebuild hashes with
another key): about n² / 2⁶⁵ for n keys of one kind, tournaments and entries kept apart.
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

    __slots__ = ("_committed", "batch")

    def __init__(self) -> None:
        self._committed: np.ndarray = _EMPTY
        self.batch: set[int] = set()

    def __len__(self) -> int:
        return len(self._committed) + len(self.batch)

    @property
    def nbytes(self) -> int:
        """Memory of the night's committed hashes (not counting the batch's set)."""
        return int(self._committed.nbytes)

    def unseen_before(self, hashes: list[int]) -> list[bool]:
        """Per hash: whether no earlier batch kept it (the current batch is not looked at)."""
        committed = self._committed
        if not len(committed) or not hashes:
            return [True] * len(hashes)
        h = np.array(hashes, dtype=np.int64)
        pos = np.searchsorted(committed, h)
        pos[pos == len(committed)] = 0  # beyond the last: compare against any other value
        return (committed[pos] != h).tolist()

    def add(self, hashes: Iterable[int]) -> None:
        self.batch.update(hashes)

    def commit(self) -> None:
        """Merge the batch's hashes into the night's sorted array (a linear merge: the two
        parts are each sorted, and numpy's stable sort merges runs)."""
        if not self.batch:
            return
        new = np.fromiter(self.batch, dtype=np.int64, count=len(self.batch))
        new.sort()
        merged = np.concatenate((self._committed, new))
        merged.sort(kind="stable")
        self._committed = merged
        self.batch = set()
