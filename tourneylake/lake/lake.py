"""The lake under ``<data_dir>/lake``: one object over its raw answers, tables, ledger and state.

Layout: ``_source.json`` (where its data comes from), ``_raw/snapshot_date=D/<resource>/`` (paid
bodies: :mod:`~tourneylake.lake.raw`), ``_ledger/snapshot_date=D/`` (the search ledger:
:mod:`~tourneylake.lake.ledger`), ``_state/`` (small documents and lock files), ``<table>/
snapshot_date=D/part-*.parquet`` (tables: :mod:`~tourneylake.lake.partitions`), ``_tmp/``
(partitions in flight, never read). Opening reads and writes nothing (an absent lake reads as
empty); :meth:`Lake.claim` records the source the first time and then refuses another
(:class:`~tourneylake.errors.LakeSourceMismatch`): synthetic and live data never mix.

``data_dir`` may be an fsspec URL (:mod:`~tourneylake.lake.storage`). A local lake writes then
renames, fsyncs and locks with ``flock``; an object store has atomic PUTs but no rename and no
lock, so its partitions are committed by markers, a settled body is a copy then a delete (a kill
in between leaves both, settled again next run), and one writer per account and night is the
rule (Dagster's pools serialise runs).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError, LakeSourceMismatch
from tourneylake.lake.partitions import (
    COMMIT_FILE,
    PARTITION,
    TMP_DIR,
    PartitionWriter,
    check_name,
    committed_dates,
    damaged_part,
    partition_dates,
    read_commit,
)
from tourneylake.lake.raw import (
    OK,
    RECEIVED,
    STATUS,
    RawResponse,
    as_date,
    key_digest,
    raw_file_bytes,
    raw_stamps,
    read_raw_file,
    rename_settled,
    status_of,
)
from tourneylake.lake.storage import AnyPath, StorePath, atomic_write, fsync_dir, location

if TYPE_CHECKING:
    from tourneylake.config import Settings
    from tourneylake.lake.postgres import SharedState

__all__ = [
    "Lake",
    "LakeError",
    "LakeSourceMismatch",
    "PartitionWriter",
    "RawResponse",
]

log = logging.getLogger(__name__)

RAW_DIR = "_raw"
SOURCE_FILE = "_source.json"
#: Shards' own tables of a night (``_shards/snapshot_date=D/<shard>/<table>/``), made side by
#: side and joined into the night's tables once all are in (``tables.night_tables.join_shards``).
SHARDS_DIR = "_shards"
# Key fields that look like credentials: refused so a secret can never reach the lake.
_CREDENTIAL_KEY = re.compile(r"pass|pwd|user.?name|secret|token|app.?key|api.?key|credential|auth", re.IGNORECASE)


# The lock a harvest of the lake holds: this name for the settings' one account, with
# ``-<account>`` for each of several (``night.metering.harvest_lock_name``). A rebuild holds them all,
# and REBUILD_LOCK while it takes them: a harvest whose lock it could not list yet (an account's
# first) sees that and waits for it (`Lake.lock_for_harvest`).
HARVEST_LOCK = "harvest"
REBUILD_LOCK = "rebuild"


class Lake:
    """The lake under ``<data_dir>/lake``. Opening reads nothing and writes nothing; call
    :meth:`claim` before writing data of a source."""

    def __init__(self, data_dir: str | os.PathLike[str], *, fsync: bool = True, state_url: str | None = None) -> None:
        self.data_dir: AnyPath = location(data_dir)  # a Path, or a StorePath for a URL
        self.root: AnyPath = self.data_dir / "lake"
        #: A local directory (renames, fsync, flock), else an object store (see the docstring).
        self.local = isinstance(self.root, Path)
        #: The state shared in PostgreSQL (``TOURNEYLAKE_STATE_URL``: ledger, locks, documents),
        #: or ``None``: files in the lake (:mod:`tourneylake.lake.postgres`).
        self.shared: SharedState | None = None
        if state_url:
            from tourneylake.lake.postgres import shared_state

            name = os.path.abspath(self.data_dir) if isinstance(self.data_dir, Path) else str(self.data_dir)
            self.shared = shared_state(state_url, name)
        # fsync makes a paid response survive a power loss, not only a crash of this process;
        # it costs ~1 ms per raw file on local SSD, nothing next to a network call.
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"Lake({str(self.data_dir)!r})"

    @classmethod
    def of(cls, settings: Settings) -> Lake:
        """The lake of ``settings``: its data directory, and its shared state when set."""
        url = settings.state_url.get_secret_value() if settings.state_url is not None else None
        return cls(settings.data_dir, state_url=url)

    @property
    def lockable(self) -> bool:
        """Whether :meth:`lock` excludes other processes: a local lake (``flock``) or shared state."""
        return self.local or self.shared is not None

    @property
    def local_root(self) -> Path:
        """The root of a lake on a local disk, for what only a disk has (renames, ``_tmp/``)."""
        if not isinstance(self.root, Path):
            raise LakeError(f"{self!r} is on an object store: it has no local root")
        return self.root

    @property
    def exists(self) -> bool:
        return (self.root / SOURCE_FILE).is_file()

    # ------------------------------------------------------------------ source guard
    @property
    def source(self) -> str | None:
        """The source this lake holds data of, or ``None`` before any was claimed."""
        marker = self.root / SOURCE_FILE
        if not marker.is_file():
            return None
        try:
            return orjson.loads(marker.read_bytes()).get("source")
        except (orjson.JSONDecodeError, AttributeError) as exc:
            raise LakeError(f'{marker} is damaged ({exc}): restore it or write {{"source": ...}} by hand') from None

    def claim(self, source: str) -> Lake:
        """Record ``source`` as this lake's (first time) or check it is the recorded one."""
        if not source:
            raise LakeError("a lake needs a source ('sandbox' or 'live:<host>')")
        recorded = self.source
        if recorded is not None:
            if recorded != source:
                raise LakeSourceMismatch(
                    f"the data directory {self.data_dir} holds data from source {recorded!r}, not "
                    f"{source!r}; synthetic and live data never mix: use another data directory"
                )
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        content = {"source": source, "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
        atomic_write(self.root / SOURCE_FILE, orjson.dumps(content, option=orjson.OPT_INDENT_2), fsync=self.fsync)
        return self

    # ------------------------------------------------------------------ raw responses
    def _raw_folder(self, snapshot_date: date | str, resource: str) -> AnyPath:
        day = as_date(snapshot_date)
        return self.root / RAW_DIR / f"{PARTITION}={day.isoformat()}" / check_name("resource", resource)

    def raw_path(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> AnyPath:
        """Where the accepted answer to this request is (or would be)."""
        return self._raw_folder(snapshot_date, resource) / f"{key_digest(key)}.json.gz"

    def write_raw(
        self,
        snapshot_date: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
    ) -> AnyPath:
        """Store one body, as received, before anything else touches it; returns its path, to
        be :meth:`settle_raw`-d once its envelope has been read."""
        path = self.received_path(snapshot_date, resource, key, fmt)
        self.write_received(path, snapshot_date, resource, key, body, fmt, fetched_at)
        return path

    def received_path(self, snapshot_date: date | str, resource: str, key: Mapping[str, str], fmt: str) -> AnyPath:
        """A new name for a body of this request as received (``<digest>.<token>.received.json.gz``),
        after the checks :meth:`write_raw` makes: the key holds no credential, the format is known."""
        bad = [k for k in key if _CREDENTIAL_KEY.search(str(k))]
        if bad:
            raise LakeError(f"raw response key must not hold credentials (fields {bad}); key by what was asked, not who asked")
        if fmt not in ("json", "xml"):
            raise LakeError(f"unknown format {fmt!r}: expected 'json' or 'xml'")
        return self._raw_folder(snapshot_date, resource) / f"{key_digest(key)}.{uuid.uuid4().hex[:12]}.{RECEIVED}.json.gz"

    def write_received(
        self,
        path: AnyPath,
        snapshot_date: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
    ) -> None:
        """Write a body to the :meth:`received_path` given (the same file whoever writes it:
        :mod:`tourneylake.lake.raw_saver` writes it in another process)."""
        data = raw_file_bytes(resource, key, fmt, *raw_stamps(fetched_at, snapshot_date), body)
        atomic_write(path, data, fsync=self.fsync)

    def settle_raw(self, path: AnyPath, status: str) -> AnyPath:
        """Name a received body by its status (see the module docstring); returns the new path.
        The rename needs no fsync: if it is lost, the body stays ``received`` and is read again.
        A body another process already settled (the same bytes, so the same status) is left as is."""
        target = self.settled_path(path, status)
        if target != path:
            rename_settled(path, target)
        return target

    @staticmethod
    def settled_path(path: AnyPath, status: str) -> AnyPath:
        """The name :meth:`settle_raw` gives a body of ``status``."""
        if status != OK and not STATUS.match(status):
            raise LakeError(f"unknown raw status {status!r}")
        digest, token = path.name.split(".")[:2]
        if token == "json":  # an accepted answer (``<digest>.json.gz``) being demoted
            token = uuid.uuid4().hex[:12]
        return path.with_name(f"{digest}.json.gz" if status == OK else f"{digest}.{token}.{status}.json.gz")

    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        """An exclusive lock on this lake, between processes (``_state/<name>.lock``, ``flock``:
        the kernel drops it when its holder dies). Waits for the holder to finish; with
        ``wait=False`` the block runs at once and is told ``False`` when another holds it. Yields
        whether the lock is held. With shared state it is a PostgreSQL advisory lock (the server
        drops it when its holder's connection dies), on any lake. Otherwise, on an object store
        there is no lock: it does nothing and yields ``False`` (one writer per lake per night,
        see the module docstring)."""
        from tourneylake.lake.storage import lock

        if self.shared is not None:  # PostgreSQL's advisory locks, on any lake
            with self.shared.lock(check_name("lock", name), wait=wait) as held:
                yield held
            return
        with lock(self.root / "_state" / f"{check_name('lock', name)}.lock", wait=wait) as held:
            yield held

    @contextlib.contextmanager
    def lock_for_harvest(self, name: str) -> Iterator[bool]:
        """A harvest's lock ``name`` (:data:`HARVEST_LOCK`, or with ``-<account>``), held for the
        block once no rebuild runs. A rebuild holds :data:`REBUILD_LOCK` and takes every harvest
        lock it lists; one made after its listing (an account's first harvest) would slip past
        it, so the harvest looks for the rebuild once it holds its own lock and, when one runs,
        lets its lock go and waits for the rebuild before it tries again (never holding its own
        while it waits: the rebuild may be waiting for it). Yields what :meth:`lock` yields."""
        while True:
            with self.lock(name) as held:
                with self.lock(REBUILD_LOCK, wait=False) as no_rebuild:
                    pass
                if no_rebuild or not self.lockable:
                    yield held
                    return
            with self.lock(REBUILD_LOCK):
                pass

    @contextlib.contextmanager
    def lock_every(self, prefix: str, *, also: Iterable[str] = (), wait: bool = True) -> Iterator[frozenset[str] | None]:
        """Every lock whose name starts with ``prefix``, and ``also``, taken in name order and
        held for the block; the names are listed again once taken (a process may have made a new
        one meanwhile), until none is new. Yields their names; ``None`` when ``wait=False`` and one
        is held elsewhere, or new ones kept appearing (after three rounds). On an object store,
        where there is no lock, ``None`` with ``wait=False`` and no names otherwise."""
        with contextlib.ExitStack() as held:
            taken: set[str] = set()
            for _ in range(3):
                names = ({*also, *self.lock_names(prefix)} if self.lockable else set()) - taken
                if not names:
                    yield frozenset(taken) if self.lockable or wait else None
                    return
                for name in sorted(names):
                    if not held.enter_context(self.lock(name, wait=wait)) and not wait:
                        yield None
                        return
                    taken.add(name)
            yield None  # new ones kept appearing

    def lock_names(self, prefix: str) -> list[str]:
        """The names of this lake's locks starting with ``prefix`` (any process ever took them)."""
        if self.shared is not None:
            return self.shared.lock_names(prefix)
        folder = self.root / "_state"
        if not self.local or not folder.is_dir():
            return []
        return sorted(p.name.removesuffix(".lock") for p in folder.glob(f"{prefix}*.lock"))

    def request_paths(self, snapshot_date: date | str, resource: str, key: Mapping[str, str], status: str) -> list[AnyPath]:
        """The stored bodies of one request (``key``) with ``status``, as :meth:`raw_paths` lists them."""
        digest = key_digest(key) + "."
        return [path for path in self.raw_paths(snapshot_date, resource, status=status) if path.name.startswith(digest)]

    def has_raw(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> bool:
        """Whether an accepted answer to this request is stored."""
        return self.raw_path(snapshot_date, resource, key).exists()

    def read_raw(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> RawResponse | None:
        """The accepted answer to this request, or ``None``."""
        path = self.raw_path(snapshot_date, resource, key)
        return read_raw_file(path) if path.exists() else None

    def iter_raw(
        self, snapshot_date: date | str, resource: str | None = None, *, status: str | None = OK
    ) -> Iterator[RawResponse]:
        """Stored bodies of a night (one resource or all) with ``status`` (``None``: every
        body), one at a time, in a stable order (resource, then file name)."""
        for path in self.raw_paths(snapshot_date, resource, status=status):
            yield read_raw_file(path)

    def raw_paths(self, snapshot_date: date | str, resource: str | None = None, *, status: str | None = OK) -> list[AnyPath]:
        night = self.root / RAW_DIR / f"{PARTITION}={as_date(snapshot_date).isoformat()}"
        if not night.is_dir():
            return []
        folders = [night / check_name("resource", resource)] if resource else sorted(p for p in night.iterdir() if p.is_dir())
        out: list[AnyPath] = []
        for folder in folders:
            if not folder.is_dir():
                continue
            if isinstance(folder, Path):
                # A night holds thousands of bodies: their names listed, picked and sorted as strings
                # (in one folder the order pathlib's comparison gives), a Path made only for those kept.
                names = (n for n in os.listdir(folder) if n.endswith(".json.gz"))
                out.extend(folder / n for n in sorted(names) if status is None or status_of(n) == status)
            else:
                out.extend(p for p in sorted(folder.glob("*.json.gz")) if status is None or status_of(p.name) == status)
        return out

    def raw_dates(self) -> list[date]:
        return partition_dates(self.root / RAW_DIR)

    # ------------------------------------------------------------------ tables
    def table_dir(self, table: str) -> AnyPath:
        return self.root / check_name("table", table)

    def partition_path(self, table: str, snapshot_date: date | str) -> AnyPath:
        return self.table_dir(table) / f"{PARTITION}={as_date(snapshot_date).isoformat()}"

    def partition_writer(self, table: str, snapshot_date: date | str) -> PartitionWriter:
        return PartitionWriter(self, table, as_date(snapshot_date))

    def shard_dir(self, snapshot_date: date | str, shard: str) -> AnyPath:
        """Where one shard (an account) keeps its tables of the night."""
        return self.root / SHARDS_DIR / f"{PARTITION}={as_date(snapshot_date).isoformat()}" / check_name("shard", shard)

    def shard_writer(self, shard: str, table: str, snapshot_date: date | str) -> PartitionWriter:
        """A writer of one shard's part of a night's ``table``: replaces that shard's alone."""
        night = as_date(snapshot_date)
        return PartitionWriter(self, table, night, folder=self.shard_dir(night, shard) / check_name("table", table))

    def shard_files(self, shard: str, table: str, snapshot_date: date | str) -> list[str]:
        """One shard's committed parts of a night's ``table``."""
        return self._parts_in(self.shard_dir(snapshot_date, shard) / check_name("table", table))

    def drop_shards(self, snapshot_date: date | str) -> None:
        """Forget the shards' tables of a night (its tables were made from every raw answer)."""
        from tourneylake.lake.storage import remove_tree

        folder = self.root / SHARDS_DIR / f"{PARTITION}={as_date(snapshot_date).isoformat()}"
        if folder.is_dir():
            remove_tree(folder)

    def write_table(self, table: str, snapshot_date: date | str, data: pa.Table) -> int:
        """Replace one night's partition of ``table`` with ``data``; returns rows written."""
        with self.partition_writer(table, snapshot_date) as writer:
            writer.write(data)
        return writer.rows

    def drop_partition(self, table: str, snapshot_date: date | str) -> None:
        """Remove one night of ``table`` (a writer that writes nothing does exactly that)."""
        with self.partition_writer(table, snapshot_date):
            pass

    def tables(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))

    def partitions(self, table: str) -> list[date]:
        """The nights ``table`` has a (committed) partition of."""
        if not self.local:
            return committed_dates(self.table_dir(table))
        return partition_dates(self.table_dir(table))

    def all_partition_files(self, table: str) -> list[str]:
        """Every night's parts of ``table``, oldest night first."""
        return [f for day in self.partitions(table) for f in self.partition_files(table, day)]

    def partition_files(self, table: str, snapshot_date: date | str) -> list[str]:
        """The night's parts of ``table`` (full URLs on an object store: the parts its commit
        marker lists, never an uncommitted writer's)."""
        return self._parts_in(self.partition_path(table, snapshot_date))

    def _parts_in(self, folder: AnyPath) -> list[str]:
        if not self.local:
            committed = read_commit(folder / COMMIT_FILE)
            return [str(folder / name) for name in committed] if committed is not None else []
        return [str(p) for p in sorted(folder.glob("part-*.parquet"))] if folder.is_dir() else []

    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem of a lake on an object store (``None`` for a local lake)."""
        return self.root.fs if isinstance(self.root, StorePath) else None

    def _fs_path(self, file: str) -> str:
        """A part's path as pyarrow wants it with :attr:`filesystem` (no protocol)."""
        return str(self.filesystem._strip_protocol(file)) if self.filesystem is not None else file

    def table_glob(self, table: str) -> str:
        """A glob over every night of ``table`` (for DuckDB/pyarrow with hive partitioning).
        Local lakes only: on an object store a glob would see uncommitted parts."""
        if not self.local:
            raise LakeError(
                f"{self!r} is on an object store: read its tables through partition_files (a glob sees uncommitted parts)"
            )
        return str(self.table_dir(table) / f"{PARTITION}=*" / "*.parquet")

    def read_partition(self, table: str, snapshot_date: date | str, columns: list[str] | None = None) -> pa.Table:
        """One night of ``table`` (without ``snapshot_date``). A part that cannot be read is a
        :class:`LakeError` naming the file and the rebuild that makes it again."""
        day = as_date(snapshot_date)
        parts = []
        for path in self.partition_files(table, day):
            try:
                parts.append(pq.read_table(self._fs_path(path), columns=columns, filesystem=self.filesystem))
            except (pa.ArrowException, OSError) as exc:
                raise damaged_part(path, day, exc) from None
        return pa.concat_tables(parts) if parts else pa.table({})

    def read_table(self, table: str, snapshot_date: date | str | None = None) -> pa.Table:
        """A table (one night or all) with ``snapshot_date`` restored: for tests and notebooks."""
        import pyarrow.dataset as ds

        nights = [as_date(snapshot_date)] if snapshot_date is not None else self.partitions(table)
        parts = []
        for day in nights:
            files = self.partition_files(table, day)
            if not files:
                continue
            try:
                t = ds.dataset([self._fs_path(f) for f in files], format="parquet", filesystem=self.filesystem).to_table()
            except (pa.ArrowException, OSError) as exc:
                raise damaged_part(files[0], day, exc) from None
            parts.append(t.append_column(PARTITION, pa.array([day] * t.num_rows, pa.date32())))
        if not parts:
            return pa.table({})
        return pa.concat_tables(parts, promote_options="default")

    # ------------------------------------------------------------------ internals
    def sweep_tmp(self, older_than_s: float = 86_400.0) -> int:
        """Remove what a killed process left in ``_tmp/`` (staged parts never swapped in, a
        replaced partition never deleted) once untouched for ``older_than_s`` (a day: nothing
        writes that long); returns how many. Never raw answers: those are not kept there."""
        if not self.local:
            return 0
        folder = self.local_root / TMP_DIR
        if not folder.is_dir():
            return 0
        cutoff = datetime.now(UTC).timestamp() - older_than_s
        removed = 0
        for entry in folder.iterdir():
            with contextlib.suppress(FileNotFoundError):
                stat = entry.lstat()
                if max(stat.st_mtime, stat.st_ctime) >= cutoff:  # ctime: a rename (a partition set aside) counts
                    continue
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink()
                removed += 1
        if removed:
            log.info("removed %d leftover(s) of killed processes from %s", removed, folder)
        return removed

    def _tmp_dir(self) -> Path:
        folder = self.local_root / TMP_DIR / uuid.uuid4().hex
        folder.mkdir(parents=True)
        return folder

    def _swap_in(self, staged: Path, target: Path) -> None:
        """Replace ``target`` by ``staged``: move the old one aside, move the new one in, then
        delete the old one. At no point is the old data gone before the new data is in place."""
        target.parent.mkdir(parents=True, exist_ok=True)
        aside: Path | None = None
        try:  # both renames inside: an interrupt (Ctrl-C, a worker's SIGTERM) between them restores the old data
            if target.exists():
                aside = self.local_root / TMP_DIR / f"{uuid.uuid4().hex}.old"
                os.replace(target, aside)
            os.replace(staged, target)
        except BaseException:
            if aside is not None and aside.exists() and not target.exists():
                os.replace(aside, target)
            raise
        if self.fsync:
            fsync_dir(target.parent)
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)


# ---------------------------------------------------------------------- file helpers
# (``tourneylake.lake.storage`` holds the operations that differ between a disk and an object store)
