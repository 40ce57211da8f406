"""The lake's state at a glance (``tourneylake status``), and the nights' records it reads.

A run records what it did in the night's record (:class:`tourneylake.lake.nightlog.NightLog`):
the harvest its searches, counts and the pairs it deferred, failed or could not attempt, the
warehouse load its rows per table, a failure or an interruption its reason (the steps of a
Dagster run, and ``tourneylake run`` for what Dagster cannot tell it). A run's record keeps what
the night held before it (the last run that loaded it, ``held``), so a re-run that fails or is
interrupted shows beside what the night holds, not instead of it. :func:`lake_status` reads
those records, the lake's listings and the ledger (every search of every run of a night, a
drain's into it too), never a night's tables in full nor the service: a pair still outstanding
is one the record lists that the night's ``player_snapshots`` does not hold since. Whether the
nightly schedule is on is Dagster's to say: the caller passes it in (:class:`ScheduleState`).
The data comes back as plain dataclasses; ``tourneylake.cli`` renders them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from tourneylake.api import calls
from tourneylake.config import Settings
from tourneylake.lake.cost_memo import CostMemo
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.lake.nightlog import NightLog
from tourneylake.night.budget import Target
from tourneylake.night.quota_day import next_scheduled

__all__ = [
    "HOW_TO_SCHEDULE",
    "LakeStatus",
    "NightStatus",
    "ScheduleState",
    "lake_status",
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


def _update(lake: Lake, night: date, run_id: str, change: Any) -> None:
    NightLog(lake).update(night, run_id, change, carry=_held)


def _held(earlier: dict[str, Any]) -> dict[str, Any]:
    """What a new run's record keeps of the one before: what the night holds, the last run that
    loaded it (its rows, counts, pairs and outcome, whole), for as long as no later run loads it."""
    held = earlier if earlier.get("state") == "loaded" else earlier.get("held")
    return {"held": {key: value for key, value in held.items() if key != "held"}} if held else {}


def record_harvest_start(lake: Lake, night: date, run_id: str) -> None:
    """A harvest of ``night`` begins in run ``run_id`` (a run killed from here shows as running)."""
    _update(lake, night, run_id, lambda record: record.setdefault("state", "harvesting"))


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

    _update(lake, night, run_id, change)


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
            record.pop("held", None)  # this run's is what the night holds now

    _update(lake, night, run_id, change)


def record_end(lake: Lake, night: date, run_id: str, state: str, reason: str) -> None:
    """Run ``run_id`` ended ``failed`` or ``interrupted``, for ``reason`` (one line, said in
    words when it is only an exception's name)."""

    def change(record: dict[str, Any]) -> None:
        record["state"], record["reason"] = state, in_words(state, reason)

    _update(lake, night, run_id, change)


#: A reason that is only an exception's name (``KeyboardInterrupt``), which says nothing to people.
_BARE_NAME = re.compile(r"(?:\w+\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Interrupted|Exit)")


def in_words(state: str, reason: str) -> str:
    """A run's end as people read it: an interruption or a failure that only named its exception
    says what happened and what was kept."""
    reason = " ".join(reason.split())
    if reason and not _BARE_NAME.fullmatch(reason):
        return reason
    if state == "interrupted":
        return "interrupted (Ctrl-C or a stop signal) before the night was done: every answer paid for is kept; run it again"
    named = f" ({reason}, without a message)" if reason else ""
    return f"the run failed{named}: its log in Dagster has the details; every answer paid for is kept"


# ------------------------------------------------------------------------------ reading


@dataclass
class NightStatus:
    """One night held: what it holds (the last run that completed it) and how its last run ended."""

    night: date
    #: what the night holds: ok, deferred (ok, pairs left for later nights), partial (pairs
    #: failed), watchlist (pairs not attempted); or, when no run completed it, its last run's:
    #: failed, interrupted, running (or its process died); unrecorded (a night harvested before
    #: runs kept a record, or only rebuilt)
    outcome: str
    loaded: bool  # in the warehouse
    reason: str | None = None  # why the last run failed or was interrupted, in words
    run_id: str | None = None
    ended_at: str | None = None
    #: the last run's end when it is not what the night holds (a re-run that failed, was
    #: interrupted, or is still running beside a night loaded earlier); ``None`` otherwise
    last_attempt: str | None = None
    searches_spent: int = 0  # by the run whose counts are shown
    night_searches: int = 0  # by every run of the night, the drains' into it too: its ledger (its bill)
    fetched: int = 0
    deferred: int = 0  # still owed: deferred and not harvested since (a drain, a re-run)
    failed: int = 0
    misconfigured: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    #: pairs deferred, failed or not attempted that the night's tables still do not hold:
    #: ``network/player [filter]: kind: why``
    outstanding: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScheduleState:
    """Whether Dagster's nightly schedule is on (``None``: not known here), and where that was read."""

    on: bool | None
    source: str


#: How the nightly schedule is turned on (Dagster's default for it is off).
HOW_TO_SCHEDULE = (
    "turn `nightly_schedule` on in the Dagster UI (`dagster dev`, Automation) or with "
    "`dagster schedule start nightly_schedule -l tourneylake`, DAGSTER_HOME set; it ticks while Dagster's "
    "daemon runs (`dagster dev` or `dagster-daemon run`)"
)


@dataclass
class LakeStatus:
    """``tourneylake status``: the nights held and the lake around them."""

    data_dir: str
    source: str | None
    #: the nights described: the latest ones asked for, or every night held
    nights: list[NightStatus]
    #: how many nights the lake holds (described or not)
    nights_held: int
    #: each account's searches left as the last run read them (the settings' account under its
    #: user name), and when
    searches_left: dict[str, int | None]
    searches_left_at: str | None
    lake_bytes: int
    warehouse: str
    warehouse_bytes: int | None
    #: whether the nightly schedule is on, and its next run (only when it is on)
    schedule_on: bool | None
    schedule_source: str
    next_run: datetime | None
    schedule_cron: str
    how_to_schedule: str = HOW_TO_SCHEDULE

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def with_schedule(self, schedule: ScheduleState, cron: str, now: datetime | None = None) -> LakeStatus:
        """The status with the schedule's state as Dagster's instance says, and its next run."""
        self.schedule_on, self.schedule_source = schedule.on, schedule.source
        self.next_run = next_scheduled(cron, now or datetime.now(UTC)) if schedule.on else None
        return self


def lake_status(
    settings: Settings,
    *,
    latest: int | None = None,
    night: date | None = None,
    now: datetime | None = None,
    schedule: ScheduleState | None = None,
) -> LakeStatus:
    """The lake's state (see the module docstring): reads what the lake keeps, calls nothing.
    ``latest``: only the latest nights are described (each night's bill reads its ledger, so a
    year's status would read a year's), ``night``: only that one; neither: every night held.
    ``schedule``: whether the nightly schedule is on, as Dagster's instance says (the library
    does not read it: ``pipelines`` does)."""
    lake = Lake.of(settings)
    records = NightLog(lake).all()
    tables = set(lake.tables.nights("player_snapshots"))
    held = sorted(tables | set(records) | {night for night in lake.raw.nights() if _raw_night(lake, night, tables, records)})
    shown = [n for n in held if n == night] if night else held[max(len(held) - latest, 0) :] if latest is not None else held
    bills = _bills(lake, shown)
    nights = [_night_status(lake, one, records.get(one, {}), bills.get(one, 0)) for one in shown]
    left, left_at = _searches_left(settings, records)
    warehouse = _warehouse(settings)
    schedule = schedule or ScheduleState(None, "Dagster's instance not read")
    return LakeStatus(
        data_dir=str(settings.data_dir),
        source=lake.source,
        nights=nights,
        nights_held=len(held),
        searches_left=left,
        searches_left_at=left_at,
        lake_bytes=_lake_bytes(lake, held, records),
        warehouse=str(warehouse) if warehouse else "",
        warehouse_bytes=warehouse.stat().st_size if warehouse and warehouse.is_file() else None,
        schedule_on=None,
        schedule_source="",
        next_run=None,
        schedule_cron=settings.schedule_cron,
    ).with_schedule(schedule, settings.schedule_cron, now)


def _raw_night(lake: Lake, night: date, tables: set[date], records: dict[date, Any]) -> bool:
    """Whether raw answers alone make ``night`` a night: it holds a night's answers (summaries or
    metadata: a run that died before its tables and record), not only a free reading's or a
    question's, which a night's own run did not make."""
    if night in tables or night in records:
        return True
    return any(lake.raw.refs(night, resource, status=None) for resource in (calls.PLAYER_SUMMARY, calls.METADATA))


def _bills(lake: Lake, nights: list[date]) -> dict[date, int]:
    """Each night's searches as its ledger books them: every run's, drains' included (a local
    lake's closed runs as its :class:`CostMemo` kept them, when they did not change since)."""
    ledger = Ledger(lake)
    if isinstance(lake.root, Path) and lake.shared is None:
        memo = CostMemo.of(lake.root)
        try:
            return {night: ledger.spent(night, memo=memo) for night in nights}
        finally:
            memo.save()
    with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-bills") as pool:  # a round trip per night
        return dict(zip(nights, pool.map(ledger.spent, nights), strict=True))


def _night_status(lake: Lake, night: date, record: dict[str, Any], bill: int) -> NightStatus:
    if not record:
        return NightStatus(night, "unrecorded", loaded=False, night_searches=bill)
    held = record.get("held")
    shown = held if held and record.get("state") != "loaded" else record
    total = _totals(shown)
    pairs = [pair for part in (shown.get("harvests") or {}).values() for pair in part.get("pairs") or []]
    outstanding, settled = _outstanding(lake, night, pairs) if pairs else ([], 0)
    deferred = max(total("deferred") - settled, 0)
    status = NightStatus(
        night,
        _outcome(shown.get("state"), total, deferred),
        loaded=shown.get("state") == "loaded",
        reason=record.get("reason"),
        run_id=record.get("run_id"),
        ended_at=record.get("updated_at"),
        searches_spent=total("searches_spent"),
        night_searches=bill,
        fetched=total("fetched"),
        deferred=deferred,
        failed=total("failed"),
        misconfigured=total("misconfigured"),
        rows={str(k): int(v) for k, v in (shown.get("rows") or {}).items()},
        outstanding=outstanding,
    )
    if shown is not record:
        state, last = record.get("state"), _totals(record)
        status.last_attempt = _outcome(state, last, last("deferred")) + (", not loaded" if state == "harvested" else "")
    return status


def _totals(record: dict[str, Any]) -> Callable[[str], int]:
    """A count of the record's harvests (every account's part), by name."""
    parts = list((record.get("harvests") or {}).values())
    return lambda key: sum(int(part.get(key) or 0) for part in parts)


def _outcome(state: str | None, total: Any, deferred: int) -> str:
    if state in ("failed", "interrupted"):
        return state
    if total("misconfigured"):
        return "watchlist"
    if total("failed"):
        return "partial"
    if state == "harvesting":
        return "running"
    return "deferred" if deferred else "ok"


def _outstanding(lake: Lake, night: date, pairs: Iterable[list[str]]) -> tuple[list[str], int]:
    """The record's pairs the night's ``player_snapshots`` still does not hold, and how many of
    its deferred pairs it holds since (a drain or a re-run fetched them)."""
    holds = set()
    if night in lake.tables.nights("player_snapshots"):
        table = lake.tables.read("player_snapshots", night, columns=["network", "player", "filter_name"])
        holds = set(zip(*(table.column(c).to_pylist() for c in ("network", "player", "filter_name")), strict=True))
    out, settled = [], 0
    for network, player, filter_name, kind, why in pairs:
        if (network, player, filter_name or "") not in holds and (network, player, filter_name or None) not in holds:
            out.append(f"{Target(network, player, filter_name or None, None, 0)}: {kind}: {why}")
        elif kind == "deferred":
            settled += 1
    return out, settled


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
    per_night = sum(int(_bytes_of(records.get(night, {})) or night_bytes(lake, night)) for night in nights)
    return per_night + _bytes(lake.root, nights_too=False)


def _bytes_of(record: dict[str, Any]) -> int:
    """The night's bytes as its record, or what it held, says (0: not said)."""
    return int(record.get("bytes") or (record.get("held") or {}).get("bytes") or 0)


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
