"""The lake's first layout, before its tables were Delta tables: hive folders of Parquet parts
(``<table>/snapshot_date=D/part-00000.parquet`` on a disk, ``part-<generation>-00000.parquet``
and ``_commit.json`` markers on an object store) and no Delta log. Found, refused by the
writers, and set aside by ``tourneylake rebuild --all``, which makes them again as Delta tables
from the raw answers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from tourneylake.lake.layout import DELTA_LOG, PARTITION, TMP_DIR
from tourneylake.lake.storage import AnyPath, StorePath, remove_tree

__all__ = ["drop_set_aside", "is_legacy", "legacy_tables", "set_aside", "sweep_tmp"]

log = logging.getLogger(__name__)

_LEGACY_PART = re.compile(r"^(part-([0-9a-f]{12}-)?[0-9]{5}\.parquet|_commit\.json)$")


def is_legacy(folder: AnyPath, *, without_log: bool = False) -> bool:
    """Whether a table's folder holds the first layout. ``without_log``: the caller found no
    Delta log there (a table about to be created): on a store its objects are then listed at
    once (one request for a new table's parts, not a listing per folder)."""
    try:
        if without_log and isinstance(folder, StorePath):
            folder.fs.invalidate_cache(folder.path)
            names = [name[len(folder.path) + 1 :].split("/") for name in folder.fs.find(folder.path)]
        else:
            entries: list[AnyPath] = list(folder.iterdir())  # one listing (a store's answers say what is a folder)
            if any(p.name == DELTA_LOG for p in entries):
                return False
            nights = [p for p in entries if p.name.startswith(PARTITION + "=") and p.is_dir()]
            names = [[night.name, part.name] for night in nights for part in night.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return False
    if any(parts[0] == DELTA_LOG for parts in names):
        return False
    return any(len(p) == 2 and p[0].startswith(PARTITION + "=") and _LEGACY_PART.match(p[1]) for p in names)


def legacy_tables(root: AnyPath) -> list[str]:
    """The tables of the first layout under the lake's ``root`` (on an object store the folders
    looked at side by side)."""
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    except FileNotFoundError:
        return []
    with ThreadPoolExecutor(1 if isinstance(root, Path) else 8, thread_name_prefix="tourneylake-legacy") as pool:
        legacy = list(pool.map(is_legacy, folders))
    return sorted(folder.name for folder, old in zip(folders, legacy, strict=True) if old)


def set_aside(root: AnyPath) -> list[AnyPath]:
    """Move the tables of the first layout out of the way of the Delta tables that replace them
    (a rebuild of every night): on a disk into ``_tmp/`` (deleted by :func:`drop_set_aside` once
    the rebuild is done, or by :func:`sweep_tmp`), on an object store deleted at once (nothing
    moves there: the raw answers remake them). Returns what was set aside."""
    aside: list[AnyPath] = []
    for table in legacy_tables(root):
        folder = root / table
        if isinstance(folder, Path) and isinstance(root, Path):
            target = root / TMP_DIR / f"{uuid.uuid4().hex}.legacy-{table}"
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(folder, target)
            aside.append(target)
        else:
            remove_tree(folder)
        log.info("%s: the first layout's table set aside, to be made again as a Delta table", table)
    return aside


def drop_set_aside(aside: list[AnyPath]) -> None:
    for folder in aside:
        remove_tree(folder)


def sweep_tmp(root: AnyPath, older_than_s: float = 86_400.0) -> int:
    """Remove what a killed process left in ``_tmp/`` of a lake on a disk (tables set aside and
    never dropped, and what earlier versions staged there) once untouched for ``older_than_s``
    (a day: nothing writes that long); returns how many. Never raw answers: those are not kept
    there."""
    if not isinstance(root, Path):
        return 0
    folder = root / TMP_DIR
    if not folder.is_dir():
        return 0
    cutoff = datetime.now(UTC).timestamp() - older_than_s
    removed = 0
    for entry in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):
            stat = entry.lstat()
            if max(stat.st_mtime, stat.st_ctime) >= cutoff:  # ctime: a rename (a table set aside) counts
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
            removed += 1
    if removed:
        log.info("removed %d leftover(s) of killed processes from %s", removed, folder)
    return removed
