"""What each night's last run did, kept beside the lake: ``lake/_state/nights/<night>.json``.

One small JSON document per night, so a year of nights is read in a few milliseconds by
``tourneylake status`` (and by anyone reading the lake) without the Dagster instance, which
is not there for a run made without ``DAGSTER_HOME`` nor on another machine. A run's steps each
merge their part (:meth:`NightLog.update`) under the lake's lock for it; the first update of
another run starts the night's record afresh, so the record is always one run's, but for the
searches the earlier runs spent on the night (``earlier_searches``: the night's bill is every
run's; a caller may say what else is carried, see :meth:`NightLog.update`). The record's fields
are the caller's (``tourneylake.night.status`` writes and reads them). Written without
fsync: it is a summary of what the raw answers, the ledger and the tables hold, and a record
lost to a power cut is written again by the night's next run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import orjson

from tourneylake.lake.lake import Lake
from tourneylake.lake.storage import AnyPath, atomic_write

NIGHTS_DIR = "nights"  # under the lake's _state/


class NightLog:
    """The nights' records of one lake."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.folder: AnyPath = lake.root / "_state" / NIGHTS_DIR

    def _path(self, night: date) -> AnyPath:
        return self.folder / f"{night.isoformat()}.json"

    def read(self, night: date) -> dict[str, Any]:
        """The night's record (``{}`` when none, or when it cannot be read: it is a summary)."""
        with contextlib.suppress(FileNotFoundError, orjson.JSONDecodeError):
            record = orjson.loads(self._path(night).read_bytes())
            return record if isinstance(record, dict) else {}
        return {}

    def all(self) -> dict[date, dict[str, Any]]:
        """Every night's record, by night."""
        if not self.folder.is_dir():
            return {}
        out: dict[date, dict[str, Any]] = {}
        for path in self.folder.iterdir():
            if path.name.endswith(".json") and not path.name.startswith("."):
                with contextlib.suppress(ValueError):
                    night = date.fromisoformat(path.name.removesuffix(".json"))
                    out[night] = self.read(night)
        return dict(sorted(out.items()))

    def update(
        self,
        night: date,
        run_id: str,
        change: Callable[[dict[str, Any]], None],
        *,
        carry: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Apply ``change`` to the night's record as run ``run_id`` sees it (a record of another
        run is started afresh, with what ``carry`` keeps of the one before, and the earlier
        runs' searches), under the lake's lock; returns the record written."""
        with self.lake.locks.hold(f"night-log-{night.isoformat()}"):
            record = self.read(night)
            now = datetime.now(UTC).isoformat(timespec="seconds")
            if record.get("run_id") != run_id:
                kept = carry(record) if carry is not None and record else {}
                record = {"night": night.isoformat(), "run_id": run_id, "started_at": now, **_carried(record), **kept}
            change(record)
            record["updated_at"] = now
            atomic_write(self._path(night), orjson.dumps(record, option=orjson.OPT_SORT_KEYS), fsync=False)
            return record


def _carried(earlier: dict[str, Any]) -> dict[str, Any]:
    """What a run's record keeps of the night's earlier runs: the searches they spent."""
    harvests = (earlier.get("harvests") or {}).values()
    spent = int(earlier.get("earlier_searches") or 0) + sum(int(part.get("searches_spent") or 0) for part in harvests)
    return {"earlier_searches": spent} if spent else {}
