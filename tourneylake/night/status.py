"""The lake's state at a glance (``tourneylake status``), and the nights' records it reads.

A run records what it did in the night's record (:class:`tourneylake.lake.nightlog.NightLog`):
the harvest its searches, counts and the pairs it deferred, failed or could not attempt, the
warehouse load its rows per table, a failure or an interruption its reason (the steps of a
Dagster run, and ``tourneylake run`` for what Dagster cannot tell it). :func:`lake_status`
reads those records, the lake's listings and the latest ledger partition, never a night's
tables in full nor the service: a pair still outstanding is one the record lists that the
night's ``player_snapshots`` does not hold since. The data comes back as plain dataclasses;
``tourneylake.cli`` renders them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from tourneylake.config import Settings
from tourneylake.lake.lake import Lake
from tourneylake.lake.nightlog import NightLog
from tourneylake.night.budget import Target

__all__ = [
    "LakeStatus",
    "NightStatus",
    "lake_status",
    "next_scheduled",
    "record_end",
    "record_harvest",
    "record_harvest_start",
    "record_load",
]

#: Pairs kept in a night's record per kind (the counts are whole).
PAIRS_KEPT = 1000
#: The key of the settings' own account in a record (several accounts use their names).
OWN_ACCOUNT = ""


# ------------------------------------------------------------------------------ recording


def record_harvest_start(lake: Lake, night: date, run_id: str) -> None:
    """A harvest of ``night`` begins in run ``run_id`` (a run killed from here shows as running)."""
    NightLog(lake).update(night, run_id, lambda record: record.setdefault("state", "harvesting"))


def record_harvest(lake: Lake, night: date, run_id: str, account: str | None, outcome: Any) -> None:
    """What a harvest did (a :class:`~tourneylake.night.harvest.HarvestOutcome`), as one
    account's part of the night's record."""
    pairs = [
        [target.network, target.player, target.filter_name or "", kind, why]
        for kind, listed in (("deferred", outcome.deferred), ("failed", outcome.failed), ("misconfigured", outcome.misconfigured))
        for target, why in listed[:PAIRS_KEPT]
    ]
    part = {
        "searches_spent": outcome.searches_spent,
        "searches_left": outcome.remaining_searches,
        "fetched": outcome.fetched,
        "reused": outcome.reused,
        "deferred": len(outcome.deferred),
        "failed": len(outcome.failed),
        "misconfigured": len(outcome.misconfigured),
        "pairs": pairs,
    }

    def change(record: dict[str, Any]) -> None:
        record.setdefault("harvests", {})[account or OWN_ACCOUNT] = part
        if record.get("state") in (None, "harvesting"):
            record["state"] = "harvested"

    NightLog(lake).update(night, run_id, change)


def record_load(lake: Lake, night: date, run_id: str, rows: dict[str, int], *, size: int | None = None) -> None:
    """The night is in the warehouse, with ``rows`` per table (and the bytes the lake holds for
    it, so a year's status sums them instead of walking every file; ``size``: those bytes,
    counted already)."""
    size = night_bytes(lake, night) if size is None else size

    def change(record: dict[str, Any]) -> None:
        record["rows"] = dict(rows)
        record["bytes"] = size
        if record.get("state") not in ("failed", "interrupted"):
            record["state"] = "loaded"

    NightLog(lake).update(night, run_id, change)


def record_end(lake: Lake, night: date, run_id: str, state: str, reason: str) -> None:
    """Run ``run_id`` ended ``failed`` or ``interrupted``, for ``reason`` (one line)."""

    def change(record: dict[str, Any]) -> None:
        record["state"], record["reason"] = state, reason

    NightLog(lake).update(night, run_id, change)


# ------------------------------------------------------------------------------ reading


@dataclass
class NightStatus:
    """One night held: how its last run ended and what it left."""

    night: date
    #: ok, deferred (ok, pairs left for later nights), partial (pairs failed), watchlist (pairs
    #: not attempted), failed, interrupted, running (or its process died), unrecorded (a night
    #: harvested before runs kept a record, or only rebuilt)
    outcome: str
    loaded: bool  # in the warehouse
    reason: str | None = None
    run_id: str | None = None
    ended_at: str | None = None
    searches_spent: int = 0  # by the last run
    night_searches: int = 0  # by every run of the night the records kept (its bill)
    fetched: int = 0
    deferred: int = 0
    failed: int = 0
    misconfigured: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    #: pairs deferred, failed or not attempted that the night's tables still do not hold:
    #: ``network/player [filter]: kind: why``
    outstanding: list[str] = field(default_factory=list)


@dataclass
class LakeStatus:
    """``tourneylake status``: the nights held and the lake around them."""

    data_dir: str
    source: str | None
    nights: list[NightStatus]
    #: each account's searches left as the last run read them (the settings' account under its
    #: user name), and when
    searches_left: dict[str, int | None]
    searches_left_at: str | None
    lake_bytes: int
    warehouse: str
    warehouse_bytes: int | None
    next_run: datetime
    schedule_cron: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def lake_status(settings: Settings, *, now: datetime | None = None) -> LakeStatus:
    """The lake's state (see the module docstring): reads what the lake keeps, calls nothing."""
    lake = Lake.of(settings)
    records = NightLog(lake).all()
    held = sorted(set(lake.raw.nights()) | set(lake.tables.nights("player_snapshots")) | set(records))
    nights = [_night_status(lake, night, records.get(night, {})) for night in held]
    left, left_at = _searches_left(settings, records)
    warehouse = _warehouse(settings)
    return LakeStatus(
        data_dir=str(settings.data_dir),
        source=lake.source,
        nights=nights,
        searches_left=left,
        searches_left_at=left_at,
        lake_bytes=_lake_bytes(lake, held, records),
        warehouse=str(warehouse) if warehouse else "",
        warehouse_bytes=warehouse.stat().st_size if warehouse and warehouse.is_file() else None,
        next_run=next_scheduled(settings.schedule_cron, now or datetime.now(UTC)),
        schedule_cron=settings.schedule_cron,
    )


def _night_status(lake: Lake, night: date, record: dict[str, Any]) -> NightStatus:
    if not record:
        return NightStatus(night, "unrecorded", loaded=False)
    harvests = list((record.get("harvests") or {}).values())

    def total(key: str) -> int:
        return sum(int(part.get(key) or 0) for part in harvests)

    status = NightStatus(
        night,
        _outcome(record.get("state"), total),
        loaded=record.get("state") == "loaded",
        reason=record.get("reason"),
        run_id=record.get("run_id"),
        ended_at=record.get("updated_at"),
        searches_spent=total("searches_spent"),
        night_searches=int(record.get("earlier_searches") or 0) + total("searches_spent"),
        fetched=total("fetched"),
        deferred=total("deferred"),
        failed=total("failed"),
        misconfigured=total("misconfigured"),
        rows={str(k): int(v) for k, v in (record.get("rows") or {}).items()},
    )
    pairs = [pair for part in harvests for pair in part.get("pairs") or []]
    if pairs:
        status.outstanding = _outstanding(lake, night, pairs)
    return status


def _outcome(state: str | None, total: Any) -> str:
    if state in ("failed", "interrupted"):
        return state
    if total("misconfigured"):
        return "watchlist"
    if total("failed"):
        return "partial"
    if state == "harvesting":
        return "running"
    return "deferred" if total("deferred") else "ok"


def _outstanding(lake: Lake, night: date, pairs: Iterable[list[str]]) -> list[str]:
    """The record's pairs the night's ``player_snapshots`` still does not hold."""
    holds = set()
    if night in lake.tables.nights("player_snapshots"):
        table = lake.tables.read("player_snapshots", night, columns=["network", "player", "filter_name"])
        holds = set(zip(*(table.column(c).to_pylist() for c in ("network", "player", "filter_name")), strict=True))
    out = []
    for network, player, filter_name, kind, why in pairs:
        if (network, player, filter_name or "") not in holds and (network, player, filter_name or None) not in holds:
            out.append(f"{Target(network, player, filter_name or None, None, 0)}: {kind}: {why}")
    return out


def _searches_left(settings: Settings, records: dict[date, dict[str, Any]]) -> tuple[dict[str, int | None], str | None]:
    """Each account's searches left as the latest record that read them says."""
    left: dict[str, int | None] = {}
    at = None
    for record in reversed(records.values()):
        for account, part in (record.get("harvests") or {}).items():
            name = account or settings.username
            if name not in left and part.get("searches_left") is not None:
                left[name] = int(part["searches_left"])
                at = at or record.get("updated_at")
    return left, at


def _warehouse(settings: Settings) -> Path | None:
    try:
        return settings.warehouse_path
    except Exception:  # noqa: BLE001 - a lake at a URL without TOURNEYLAKE_WAREHOUSE: no warehouse to size
        return None


def night_bytes(lake: Lake, night: date) -> int:
    """The bytes the lake holds for ``night``: its raw answers, ledger and table partitions (on
    an object store each folder's night listed side by side: a round trip each, not a glob's two)."""
    name = f"snapshot_date={night.isoformat()}"
    if isinstance(lake.root, Path):
        return sum(_bytes(folder) for folder in lake.root.glob(f"*/{name}"))
    from concurrent.futures import ThreadPoolExecutor

    nights = [folder / name for folder in lake.root.iterdir() if folder.is_dir()]
    with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-sizes") as pool:
        return sum(pool.map(_bytes, nights))


def _lake_bytes(lake: Lake, nights: list[date], records: dict[date, dict[str, Any]]) -> int:
    """The lake's bytes: each night's as its record says (walked when it does not), and what
    lies outside the nights' folders (state, markers)."""
    if not isinstance(lake.root, Path):  # an object store sizes its prefix in one listing
        return _bytes(lake.root)
    per_night = sum(int(records.get(night, {}).get("bytes") or night_bytes(lake, night)) for night in nights)
    return per_night + _bytes(lake.root, nights_too=False)


def _bytes(folder: Any, *, nights_too: bool = True) -> int:
    """A folder's bytes on disk (or in its store), every file below it (``nights_too=False``:
    not below a night's ``snapshot_date=`` folder)."""
    if not isinstance(folder, Path):
        try:
            return int(folder.fs.du(folder.path, total=True))
        except FileNotFoundError:
            return 0
    total, folders = 0, [str(folder)]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except FileNotFoundError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if nights_too or not entry.name.startswith("snapshot_date="):
                        folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


def next_scheduled(cron: str, now: datetime) -> datetime:
    """The next tick of a daily ``M H * * *`` schedule (UTC) after ``now``."""
    minute, hour = (int(part) for part in cron.split()[:2])
    tick = now.astimezone(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return tick if tick > now else tick + timedelta(days=1)
