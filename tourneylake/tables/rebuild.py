"""Rebuild nights from the lake's raw answers alone: no network call, no search.

``tourneylake rebuild --date D | --from D --to D | --all`` (and the Dagster ``rebuild`` job) make
every table of each night again through :mod:`tourneylake.tables.night_tables`, the code the
harvest uses, with the night's own raw answers and rates. Then the warehouse: for ``--all`` a
fresh file, filled while the nights are rebuilt (in night order) and swapped in once every night
is in, with its models built first; otherwise the live file, after the last night. Several
nights are rebuilt side by side, one worker process per core
(:class:`~tourneylake.tables.worker.RebuildWorkers`); this process makes their reference tables
first, in order. This is how a normaliser fix reaches years of history, and how a lake whose
tables are of the first layout (hive folders of Parquet parts) becomes Delta tables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from tourneylake.config import Settings
from tourneylake.errors import TourneylakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.lake.legacy import drop_set_aside, set_aside, sweep_tmp
from tourneylake.lake.locks import HARVEST_LOCK, REBUILD_LOCK
from tourneylake.schemas import TABLES
from tourneylake.tables.coverage import write_coverage_changes
from tourneylake.tables.models import build_models, forget_nights, target_dir
from tourneylake.tables.night_tables import rebuild_night, reference_tables
from tourneylake.tables.split_night import rebuild_night_on_two_cores
from tourneylake.tables.warehouse import LOAD_ORDER, Warehouse
from tourneylake.tables.worker import RebuildWorkers, rebuild_workers

__all__ = ["RebuildOutcome", "nights_in_lake", "rebuild"]

log = logging.getLogger(__name__)


class NothingToRebuild(TourneylakeError):
    """The data directory holds no lake, or none of the nights asked for."""


@dataclass
class RebuildOutcome:
    nights: list[date] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)  # table → rows written over all nights
    warehouse_rows: dict[str, int] = field(default_factory=dict)
    fresh_warehouse: bool = False
    unusable: list[str] = field(default_factory=list)  # answers that still cannot be read, with why
    expired: int = 0  # files of the lake's tables only versions older than the setting's days needed, deleted


def nights_in_lake(lake: Lake) -> list[date]:
    """Every night with raw answers or ledger rows."""
    return sorted(set(lake.raw.nights()) | set(Ledger(lake).nights()))


def rebuild(settings: Settings, nights: Iterable[date] | None = None, *, warehouse: bool = True) -> RebuildOutcome:
    """Rebuild ``nights`` (all the lake holds when ``None``) and reload the warehouse. Holds the
    lake's harvest locks (every account's): a harvest of the same lake waits for it, and it for
    a harvest."""
    lake = Lake.of(settings)
    if not lake.exists:
        raise NothingToRebuild(f"no lake in {settings.data_dir}: nothing to rebuild (run `tourneylake run` first)")
    every = nights is None
    held = nights_in_lake(lake)
    wanted = held if nights is None else sorted(set(nights))
    missing = sorted(set(wanted) - set(held))
    if missing:
        raise NothingToRebuild(f"the lake holds no raw answers for {', '.join(d.isoformat() for d in missing)}")
    if not every and lake.tables.legacy():
        raise NothingToRebuild(
            f"the lake in {settings.data_dir} holds tables of its first layout: run `tourneylake rebuild --all` once to "
            "convert them (no search); a rebuild of some nights would leave the others behind"
        )
    # A harvest of the lake (which writes tonight's answers and tables) and a rebuild take turns:
    # a rebuild that read a night half-harvested could swap its partial tables in last. Every
    # account's harvest: several accounts' harvests make one night's tables together; one that
    # starts after the locks were listed sees REBUILD_LOCK and waits (`LakeLocks.for_harvest`).
    with lake.locks.hold(REBUILD_LOCK), lake.locks.every(HARVEST_LOCK, also=[HARVEST_LOCK]):
        if not every:
            return _rebuild(settings, lake, wanted, every=every, warehouse=warehouse)
        aside = set_aside(lake.root)  # the first layout's tables: made again as Delta tables
        outcome = _rebuild(settings, lake, wanted, every=every, warehouse=warehouse)
        lake.mark_current_layout()
        drop_set_aside(aside)
        return outcome


def _rebuild(settings: Settings, lake: Lake, wanted: list[date], *, every: bool, warehouse: bool) -> RebuildOutcome:
    sweep_tmp(lake.root)
    outcome = RebuildOutcome(nights=wanted, fresh_warehouse=every and warehouse)
    # `--all` fills a fresh file while the nights are rebuilt (queries keep the old one until
    # the swap), its models tested on every night; a rebuild in place loads the live file at the
    # end, holding its lock only then.
    with (
        _warehouse(settings.warehouse_path, fresh=True, variables={**settings.model_vars, "tested_nights": 0})
        if every and warehouse
        else nullcontext() as fresh
    ):
        loads = None if fresh is None else _NightLoads(lake, wanted, fresh)
        in_order = _InOrder(wanted)
        for night, rows, unusable in _rebuild_nights(lake, wanted, settings.rebuild_workers):
            for name, count in rows.items():
                outcome.rows[name] = outcome.rows.get(name, 0) + count
            outcome.unusable += unusable
            log.info("rebuilt night %s", night)
            for ready in in_order.done(night):  # a night's coverage changes read the nights before it
                changes = write_coverage_changes(lake, ready).num_rows
                outcome.rows["coverage_changes"] = outcome.rows.get("coverage_changes", 0) + changes
                if loads is not None:
                    loads.load(ready)
        if loads is not None:
            outcome.warehouse_rows = loads.finish()
    # The lake's old versions expired while the warehouse loads (the expiry waits on the disk,
    # the load on DuckDB; neither touches what the other reads: current parts are never expired).
    with ThreadPoolExecutor(1, thread_name_prefix="tourneylake-expire") as pool:
        expired = pool.submit(lake.tables.expire, settings.table_history_days, strays=True)
        if warehouse and not every:
            with _warehouse(settings.warehouse_path, fresh=False) as db:
                for night in wanted:
                    db.load_night(lake, night)
                forget_nights(db.connection, min(wanted))  # the incremental models make them again at their next build
                outcome.warehouse_rows = db.table_counts()
        outcome.expired = expired.result()
    outcome.unusable.sort(key=lambda line: line[:10])  # night by night (each line starts with its night)
    return outcome


# Loaded once into a fresh file, after every night: a "whole" table (the ledger) reads every
# night's partition, which the workers may be replacing while the nights are rebuilt.
_WHOLE = tuple(t for t in LOAD_ORDER if TABLES[t].load == "whole")
_PER_NIGHT = tuple(t for t in LOAD_ORDER if t not in _WHOLE)


class _InOrder:
    """Nights in night order, each as soon as it and every night before it are done (nights
    finish in any order side by side; what reads earlier nights, the coverage changes and the
    loads, takes them in order, as a night-by-night rebuild would)."""

    def __init__(self, nights: list[date]) -> None:
        self.order = list(nights)
        self.finished: set[date] = set()
        self.next = 0

    def done(self, night: date) -> list[date]:
        """``night`` is done: the nights now ready, in order."""
        self.finished.add(night)
        ready = []
        while self.next < len(self.order) and self.order[self.next] in self.finished:
            ready.append(self.order[self.next])
            self.next += 1
        return ready


class _NightLoads:
    """Rebuilt nights into a warehouse, in night order (see :class:`_InOrder`): the warehouse is
    exactly what a night-by-night rebuild makes, reference tables included."""

    def __init__(self, lake: Lake, nights: list[date], db: Warehouse) -> None:
        self.lake, self.db = lake, db
        self.order = list(nights)

    def load(self, night: date) -> None:
        self.db.load_night(self.lake, night, _PER_NIGHT)

    def finish(self) -> dict[str, int]:
        """The whole tables, once every night is in; the warehouse's row counts."""
        self.db.load_night(self.lake, self.order[-1], _WHOLE)  # every night's partition: the night is a label
        return self.db.table_counts()


def _rebuild_nights(lake: Lake, nights: list[date], workers: int) -> Iterator[tuple[date, dict[str, int], list[str]]]:
    """Each night's rows per table and answers still unusable, as it is done: nights side by
    side in worker processes (a local lake, several nights, more than one worker), else here."""
    count = rebuild_workers(workers, len(nights)) if lake.reachable_from_other_processes else 1
    if count == 1:
        # One night, and a second core allowed: a forked helper reads a share of its summaries.
        one_night = rebuild_night_on_two_cores if len(nights) == 1 and rebuild_workers(workers, 2) > 1 else rebuild_night
        for night in nights:
            unusable: list[str] = []
            yield night, one_night(lake, night, unusable), unusable
        return
    references: dict[date, dict[str, int]] = {}

    def prepared() -> Iterator[date]:
        # Drawn by the workers as they free up; in order (see `reference_tables`), here.
        for night in nights:
            references[night] = reference_tables(lake, night)
            yield night

    with RebuildWorkers(str(lake.data_dir), count, store=not lake.local) as pool:
        for night, rows, unusable in pool.rebuild(prepared()):
            if lake.shared is not None and (published := Ledger(lake).publish(night, when_empty=False)):
                rows["search_ledger"] = published  # the workers read no shared state: its ledger is published here
            yield night, {**references.pop(night), **rows}, unusable


@contextmanager
def _warehouse(path: Path, *, fresh: bool, variables: dict[str, object] | None = None) -> Iterator[Warehouse]:
    """The warehouse the rebuilt nights are loaded into; ``fresh``: a new file that replaces the
    old one once every night is in (a failure leaves the old one as it was)."""
    target = path.with_name(path.name + ".rebuild") if fresh else path
    if fresh:
        for leftover in (target, target.with_name(target.name + ".wal")):
            leftover.unlink(missing_ok=True)
    with Warehouse(target) as db:
        yield db
    if fresh:  # its views (the dbt models) made before it replaces the live file, which had them
        built = build_models(target, artifacts=target_dir(path), variables=variables)
        if built.named("warn", "fail", "error", "skipped"):
            log.warning("models built; dbt tests not passing: %s", ", ".join(built.named("warn", "fail", "error", "skipped")))
        os.replace(target, path)
        Path(str(path) + ".wal").unlink(missing_ok=True)
