"""What each closed run file of a local lake's ledger costs, kept between two ``tourneylake
status``: its bill column reads again only the files it has not seen as they are now, not a
month of run files line by line.

An entry is what the ledger's reading gave for one closed file (its account, its searches per
resource) under the file's path and identity (size, modification and change times, inode): any
change to the file (an append, a rewrite, a restore) and it is read again, damage checks and
all. A reading that failed is never kept, nor one of a file that had not settled (see
:data:`SETTLED_NS`). One JSON document per lake in the user's cache
(:func:`~tourneylake.user_cache.user_cache`), never in the lake: deleting it is harmless, and
one that cannot be read or written is ignored (the files are read instead).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from tourneylake.lake.storage import atomic_write
from tourneylake.user_cache import user_cache

__all__ = ["SETTLED_NS", "CostMemo", "RunCosts"]

log = logging.getLogger(__name__)

#: How long before it is read a file must have last changed for its reading to be kept: longer
#: than a tick of the coarse clock the file system stamps changes with (a jiffy, at most 10 ms),
#: so the next change cannot share the change time the entry holds.
SETTLED_NS = 100_000_000
#: A run's account (as its header names it) and its searches per resource (a name, or ``None``
#: for a resource that is not one).
RunCosts = tuple[Any, list[tuple[str | None, int]]]


def _identity(path: Path) -> list[int]:
    found = os.stat(path)
    return [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino]


def _costs(entry: Any, identity: list[int]) -> RunCosts | None:
    """An entry's costs when it is well formed and for the file as it is now, else ``None``."""
    if not isinstance(entry, dict) or entry.get("file") != identity or not isinstance(entry.get("costs"), list):
        return None
    pairs = entry["costs"]
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str | None) and type(p[1]) is int for p in pairs):
        return None
    return entry.get("account"), [(resource, searches) for resource, searches in pairs]


class CostMemo:
    """The memo of one local lake (:meth:`of`): :meth:`costs` reads through it, :meth:`save`
    keeps what was read."""

    def __init__(self, root: Path, file: Path | None, runs: dict[str, Any]) -> None:
        self.root = root
        self.file = file  # None: no cache folder to keep it in
        self._runs = runs  # path under the lake → {"file": identity, "account": …, "costs": [[resource, searches], …]}
        self._changed = False

    @classmethod
    def of(cls, root: Path) -> CostMemo:
        """The memo kept for the lake at ``root`` (empty when there is none or it is unreadable)."""
        try:
            file = user_cache("ledger", root) / "costs.json"
        except (OSError, RuntimeError):  # no home folder to find the cache in
            return cls(root, None, {})
        try:
            document = orjson.loads(file.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return cls(root, file, {})
        runs = document.get("runs") if isinstance(document, dict) else None
        return cls(root, file, runs if isinstance(runs, dict) else {})

    def costs(self, path: Path, night: date, read: Callable[[Path, date], RunCosts]) -> RunCosts:
        """``read(path, night)`` for a closed run's file, or what it gave when the file was as it
        is now. Kept only when the file had settled and did not change while it was read."""
        if not path.is_relative_to(self.root):
            return read(path, night)
        key = path.relative_to(self.root).as_posix()
        started = time.time_ns()
        before = _identity(path)
        known = _costs(self._runs.get(key), before)
        if known is not None:
            return known
        if self._runs.pop(key, None) is not None:
            self._changed = True
        found = read(path, night)
        with contextlib.suppress(OSError):
            if before[2] < started - SETTLED_NS and _identity(path) == before:
                account, costs = found
                self._runs[key] = {"file": before, "account": account, "costs": [list(pair) for pair in costs]}
                self._changed = True
        return found

    def save(self) -> None:
        """Keep what :meth:`costs` read (atomically; not the entries of files gone since). A
        memo that cannot be written is left as it was."""
        if self.file is None or not self._changed:
            return
        runs = {key: entry for key, entry in self._runs.items() if (self.root / key).is_file()}
        try:
            atomic_write(self.file, orjson.dumps({"lake": str(self.root), "runs": runs}), fsync=False)
        except (OSError, TypeError) as exc:  # TypeError: an account orjson cannot write
            log.debug("the ledger's cost memo %s was not written: %s", self.file, exc)
            return
        self._changed = False
        _forget_lakes_gone(self.file.parent.parent)


def _forget_lakes_gone(cache: Path) -> None:
    """The memos of lakes that are no longer there removed (a test's, a folder deleted)."""
    for other in cache.glob("ledger-*/costs.json"):
        try:
            lake = orjson.loads(other.read_bytes()).get("lake")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            continue
        if isinstance(lake, str) and not Path(lake).is_dir():
            shutil.rmtree(other.parent, ignore_errors=True)
