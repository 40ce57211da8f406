"""The lake's layout under its root: its folders, the names it accepts, its nights' folders.

``_source.json`` (where its data comes from), ``_raw/snapshot_date=D/`` (paid bodies),
``_ledger/snapshot_date=D/`` (the search ledger), ``_state/`` (small documents and lock files),
``_shards/snapshot_date=D/`` (which shards' parts of a night are in), ``<table>/`` (a Delta
table partitioned by ``snapshot_date``), ``_tmp/`` (the first layout's tables set aside).
"""

from __future__ import annotations

import re
from datetime import date

from tourneylake.errors import LakeError
from tourneylake.lake.raw import as_date
from tourneylake.lake.storage import AnyPath

__all__ = [
    "DELTA_LOG",
    "PARTITION",
    "RAW_DIR",
    "SHARDS_DIR",
    "SOURCE_FILE",
    "STATE_DIR",
    "TMP_DIR",
    "check_name",
    "folder_nights",
    "night_folder",
]

#: The column (and folder name) a night's rows are kept under, in every table and store.
PARTITION = "snapshot_date"
RAW_DIR = "_raw"
SOURCE_FILE = "_source.json"
STATE_DIR = "_state"
#: Which shards' parts of a night are in (``_shards/snapshot_date=D/<shard>.json``), for the step
#: that makes the night's tables once all are in (``tables.night_tables.join_shards``).
SHARDS_DIR = "_shards"
TMP_DIR = "_tmp"
DELTA_LOG = "_delta_log"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_name(kind: str, name: str) -> str:
    """``name`` when it is safe as a file's or folder's name in the lake; else a one-line error."""
    if not _NAME.match(name):
        raise LakeError(f"invalid {kind} name {name!r}: letters, digits, '_', '.', '-' only")
    return name


def night_folder(night: date | str) -> str:
    """The name of a night's folder: ``snapshot_date=YYYY-MM-DD``."""
    return f"{PARTITION}={as_date(night).isoformat()}"


def folder_nights(folder: AnyPath) -> list[date]:
    """The nights of a folder of ``snapshot_date=D`` folders (the raw store's, the ledger's); one
    listing (no question first whether the folder is there: on a store, a HEAD and a listing)."""
    try:
        entries: list[AnyPath] = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    prefix = PARTITION + "="
    for p in entries:
        if p.is_dir() and p.name.startswith(prefix):
            try:
                out.append(date.fromisoformat(p.name[len(prefix) :]))
            except ValueError:
                continue
    return sorted(out)
