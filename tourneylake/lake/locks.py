"""The lake's locks between processes: ``flock`` on ``_state/<name>.lock`` of a lake on a disk, or
PostgreSQL's advisory locks with shared state (on any lake). An object store has no lock: one
writer per account and night is the rule there (Dagster's pools serialise the runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tourneylake.lake.layout import STATE_DIR, check_name
from tourneylake.lake.storage import AnyPath, lock

if TYPE_CHECKING:
    from tourneylake.lake.postgres import SharedState

__all__ = ["HARVEST_LOCK", "REBUILD_LOCK", "LakeLocks"]

# The lock a harvest of the lake holds: this name for the settings' one account, with
# ``-<account>`` for each of several (``night.metering.harvest_lock_name``). A rebuild holds them all,
# and REBUILD_LOCK while it takes them: a harvest whose lock it could not list yet (an account's
# first) sees that and waits for it (`LakeLocks.for_harvest`).
HARVEST_LOCK = "harvest"
REBUILD_LOCK = "rebuild"


class LakeLocks:
    """The locks of the lake under ``root`` (``shared``: its state in PostgreSQL, when set)."""

    def __init__(self, root: AnyPath, shared: SharedState | None) -> None:
        self.root = root
        self.shared = shared

    @property
    def lockable(self) -> bool:
        """Whether :meth:`hold` excludes other processes: a local lake (``flock``) or shared state."""
        return isinstance(self.root, Path) or self.shared is not None

    @contextlib.contextmanager
    def hold(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        """An exclusive lock on this lake, between processes (``_state/<name>.lock``, ``flock``:
        the kernel drops it when its holder dies). Waits for the holder to finish; with
        ``wait=False`` the block runs at once and is told ``False`` when another holds it. Yields
        whether the lock is held. With shared state it is a PostgreSQL advisory lock (the server
        drops it when its holder's connection dies), on any lake. Otherwise, on an object store
        there is no lock: it does nothing and yields ``False``."""
        if self.shared is not None:
            with self.shared.lock(check_name("lock", name), wait=wait) as held:
                yield held
            return
        with lock(self.root / STATE_DIR / f"{check_name('lock', name)}.lock", wait=wait) as held:
            yield held

    @contextlib.contextmanager
    def for_harvest(self, name: str) -> Iterator[bool]:
        """A harvest's lock ``name`` (:data:`HARVEST_LOCK`, or with ``-<account>``), held for the
        block once no rebuild runs. A rebuild holds :data:`REBUILD_LOCK` and takes every harvest
        lock it lists; one made after its listing (an account's first harvest) would slip past
        it, so the harvest looks for the rebuild once it holds its own lock and, when one runs,
        lets its lock go and waits for the rebuild before it tries again (never holding its own
        while it waits: the rebuild may be waiting for it). Yields what :meth:`hold` yields."""
        while True:
            with self.hold(name) as held:
                with self.hold(REBUILD_LOCK, wait=False) as no_rebuild:
                    pass
                if no_rebuild or not self.lockable:
                    yield held
                    return
            with self.hold(REBUILD_LOCK):
                pass

    @contextlib.contextmanager
    def every(self, prefix: str, *, also: Iterable[str] = (), wait: bool = True) -> Iterator[frozenset[str] | None]:
        """Every lock whose name starts with ``prefix``, and ``also``, taken in name order and
        held for the block; the names are listed again once taken (a process may have made a new
        one meanwhile), until none is new. Yields their names; ``None`` when ``wait=False`` and one
        is held elsewhere, or new ones kept appearing (after three rounds). On an object store,
        where there is no lock, ``None`` with ``wait=False`` and no names otherwise."""
        with contextlib.ExitStack() as held:
            taken: set[str] = set()
            for _ in range(3):
                names = ({*also, *self.names(prefix)} if self.lockable else set()) - taken
                if not names:
                    yield frozenset(taken) if self.lockable or wait else None
                    return
                for name in sorted(names):
                    if not held.enter_context(self.hold(name, wait=wait)) and not wait:
                        yield None
                        return
                    taken.add(name)
            yield None  # new ones kept appearing

    def names(self, prefix: str) -> list[str]:
        """The names of this lake's locks starting with ``prefix`` (any process ever took them)."""
        if self.shared is not None:
            return self.shared.lock_names(prefix)
        folder = self.root / STATE_DIR
        if not isinstance(folder, Path) or not folder.is_dir():
            return []
        return sorted(p.name.removesuffix(".lock") for p in folder.glob(f"{prefix}*.lock"))
