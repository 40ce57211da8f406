"""The lake under ``<data_dir>/lake``: one object over its raw answers, tables, ledger and state.

Layout: ``_source.json`` (where its data comes from), ``_raw/snapshot_date=D/<resource>/`` (paid
bodies: :mod:`~tourneylake.lake.raw`), ``_ledger/snapshot_date=D/`` (the search ledger:
:mod:`~tourneylake.lake.ledger`), ``_state/`` (small documents and lock files), ``<table>/``
(a Delta table partitioned by ``snapshot_date``: :mod:`~tourneylake.lake.partitions`), ``_tmp/``
(what a killed process left, swept once a day old). Opening reads and writes nothing (an absent lake reads as
empty); :meth:`Lake.claim` records the source the first time and then refuses another
(:class:`~tourneylake.errors.LakeSourceMismatch`): synthetic and live data never mix.

``data_dir`` may be an fsspec URL (:mod:`~tourneylake.lake.storage`). A local lake writes then
renames, fsyncs and locks with ``flock``; an object store has atomic PUTs but no rename and no
lock, so a settled body is a copy then a delete (a kill in between leaves both, settled again
next run), and one writer per account and night is the rule (Dagster's pools serialise runs).
The tables are Delta tables on both, each version's commit a conditional write (delta-rs's on
a disk; on S3 the lake's own, as delta-rs writes one: :mod:`~tourneylake.lake.partitions`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError, LakeSourceMismatch
from tourneylake.lake.partitions import (
    DELTA_LOG,
    PARTITION,
    TMP_DIR,
    PartitionWriter,
    active_files,
    check_name,
    damaged_part,
    finish_together,
    legacy_tables,
    night_parts,
    part_shard,
    partition_dates,
    read_parts,
    table_uri,
)
from tourneylake.lake.raw import (
    OK,
    STATUS,
    RawResponse,
    as_date,
    key_digest,
    raw_file_bytes,
    raw_stamps,
    read_raws,
)
from tourneylake.lake.segments import RawRef, SegmentWriter, night_index, writer_for
from tourneylake.lake.storage import AnyPath, StorePath, atomic_write, fsync_dir, location, read_if_there, remove_tree

if TYPE_CHECKING:
    from tourneylake.config import Settings
    from tourneylake.lake.postgres import SharedState

__all__ = [
    "Lake",
    "LakeError",
    "LakeSourceMismatch",
    "PartitionWriter",
    "RawRef",
    "RawResponse",
    "check_raw_request",
    "new_token",
]

log = logging.getLogger(__name__)

RAW_DIR = "_raw"
SOURCE_FILE = "_source.json"
#: Which shards' parts of a night are in (``_shards/snapshot_date=D/<shard>.json``), for the step
#: that makes the night's tables once all are in (``tables.night_tables.join_shards``).
SHARDS_DIR = "_shards"
#: The lake's layout, recorded in ``_source.json``: 1, tables as hive folders of Parquet parts
#: (none recorded); 2, Delta tables.
LAYOUT = 2
# Key fields that look like credentials: refused so a secret can never reach the lake.
_CREDENTIAL_KEY = re.compile(r"pass|pwd|user.?name|secret|token|app.?key|api.?key|credential|auth", re.IGNORECASE)


# The lock a harvest of the lake holds: this name for the settings' one account, with
# ``-<account>`` for each of several (``night.metering.harvest_lock_name``). A rebuild holds them all,
# and REBUILD_LOCK while it takes them: a harvest whose lock it could not list yet (an account's
# first) sees that and waits for it (`Lake.lock_for_harvest`).
HARVEST_LOCK = "harvest"
REBUILD_LOCK = "rebuild"


def new_token() -> str:
    """A new stored body's name among the answers to its request."""
    return uuid.uuid4().hex[:12]


def check_raw_request(resource: str, key: Mapping[str, str], fmt: str) -> None:
    """What a body is kept under is checked first: a known format, and a key that holds no
    credential (a secret can never reach the lake)."""
    check_name("resource", resource)
    bad = [k for k in key if _CREDENTIAL_KEY.search(str(k))]
    if bad:
        raise LakeError(f"raw response key must not hold credentials (fields {bad}); key by what was asked, not who asked")
    if fmt not in ("json", "xml"):
        raise LakeError(f"unknown format {fmt!r}: expected 'json' or 'xml'")


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
        # it costs little next to a network call.
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
    def reachable_from_other_processes(self) -> bool:
        """Whether a worker process can open this lake too (not a ``memory://`` store, which lives
        in this process alone)."""
        fs = self.filesystem
        return fs is None or "memory" not in ((fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol))

    @property
    def exists(self) -> bool:
        return (self.root / SOURCE_FILE).is_file()

    # ------------------------------------------------------------------ source guard
    def _source_document(self) -> dict[str, Any] | None:
        marker = self.root / SOURCE_FILE
        data = read_if_there(marker)
        if data is None:
            return None
        try:
            content = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise LakeError(f'{marker} is damaged ({exc}): restore it or write {{"source": ...}} by hand') from None
        if not isinstance(content, dict):
            raise LakeError(f'{marker} is damaged (not a JSON object): restore it or write {{"source": ...}} by hand')
        return content

    @property
    def source(self) -> str | None:
        """The source this lake holds data of, or ``None`` before any was claimed."""
        content = self._source_document()
        return None if content is None else content.get("source")

    def claim(self, source: str) -> Lake:
        """Record ``source`` as this lake's (first time) or check it is the recorded one. A lake
        whose tables are of the first layout is refused until ``tourneylake rebuild --all``
        converts them (one of that layout without tables is simply marked current)."""
        if not source:
            raise LakeError("a lake needs a source ('sandbox' or 'live:<host>')")
        content = self._source_document()
        if content is not None:
            recorded = content.get("source")
            if recorded != source:
                raise LakeSourceMismatch(
                    f"the data directory {self.data_dir} holds data from source {recorded!r}, not "
                    f"{source!r}; synthetic and live data never mix: use another data directory"
                )
            if content.get("layout", 1) < LAYOUT:
                if legacy_tables(self):
                    raise LakeError(
                        f"the lake in {self.data_dir} holds tables of its first layout: run `tourneylake rebuild --all` "
                        "once to convert them to Delta tables from its raw answers (no search)"
                    )
                self.mark_current_layout()
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        content = {"source": source, "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "layout": LAYOUT}
        atomic_write(self.root / SOURCE_FILE, orjson.dumps(content, option=orjson.OPT_INDENT_2), fsync=self.fsync)
        return self

    def mark_current_layout(self) -> None:
        """Record that the lake's tables are of the current layout (Delta tables)."""
        content = self._source_document() or {}
        content["layout"] = LAYOUT
        atomic_write(self.root / SOURCE_FILE, orjson.dumps(content, option=orjson.OPT_INDENT_2), fsync=self.fsync)

    def set_legacy_tables_aside(self) -> list[AnyPath]:
        """Move the tables of the first layout out of the way of the Delta tables that replace
        them (a rebuild of every night): on a disk into ``_tmp/`` (deleted by
        :meth:`drop_set_aside` once the rebuild is done, or by the sweep), on an object store
        deleted at once (nothing moves there: the raw answers remake them). Returns what was set aside."""
        aside: list[AnyPath] = []
        for table in legacy_tables(self):
            folder = self.table_dir(table)
            if isinstance(folder, Path):
                target = self.local_root / TMP_DIR / f"{uuid.uuid4().hex}.legacy-{table}"
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(folder, target)
                aside.append(target)
            else:
                remove_tree(folder)
            log.info("%s: the first layout's table set aside, to be made again as a Delta table", table)
        return aside

    @staticmethod
    def drop_set_aside(aside: list[AnyPath]) -> None:
        for folder in aside:
            remove_tree(folder)

    # ------------------------------------------------------------------ raw responses
    @property
    def raw_root(self) -> AnyPath:
        return self.root / RAW_DIR

    def raw_writer(self, snapshot_date: date | str) -> SegmentWriter:
        """This process's segment writer of the night (:mod:`~tourneylake.lake.segments`)."""
        return writer_for(self.raw_root, as_date(snapshot_date), fsync=self.fsync)

    def write_raw(
        self,
        snapshot_date: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
        *,
        token: str | None = None,
    ) -> RawRef:
        """Keep one body, as received (``received``), before anything else touches it; returns
        once it is kept (fsynced, or stored), with its reference, to be :meth:`settle_raw`-d
        once its envelope has been read. ``token`` names the body (a new one by default)."""
        return self.write_raw_soon(snapshot_date, resource, key, body, fmt, fetched_at, token=token).result()

    def write_raw_soon(
        self,
        snapshot_date: date | str,
        resource: str,
        key: Mapping[str, str],
        body: bytes,
        fmt: str,
        fetched_at: datetime | int | float,
        *,
        token: str | None = None,
    ) -> Future[RawRef]:
        """:meth:`write_raw`, returning the future of the body's reference."""
        check_raw_request(resource, key, fmt)
        night = as_date(snapshot_date)
        payload = raw_file_bytes(resource, key, fmt, *raw_stamps(fetched_at, night), body)
        stamp, _ = raw_stamps(fetched_at, night)
        return self.raw_writer(night).add_body(
            token or new_token(), key_digest(key), resource, {str(k): str(v) for k, v in key.items()}, fmt, stamp, payload
        )

    def settle_raw(self, ref: RawRef, status: str, *, at: int | None = None) -> RawRef:
        """Name a body by its status (see :mod:`~tourneylake.lake.raw`; ``at``: when that was
        decided, if not now); returns its reference so named. A body already of that status is
        left as is."""
        if status != OK and not STATUS.match(status):
            raise LakeError(f"unknown raw status {status!r}")
        if ref.status != status:
            self.raw_writer(ref.night).add_status(ref, status, at=at).result()
        return dataclasses.replace(ref, status=status)

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

    def raw_refs(self, snapshot_date: date | str, resource: str | None = None, *, status: str | None = OK) -> list[RawRef]:
        """The night's stored bodies (one resource or all) with ``status`` (``None``: every body),
        in a stable order (resource, then name); one accepted answer per request, its latest."""
        if resource is not None:
            check_name("resource", resource)
        return night_index(self.raw_root, as_date(snapshot_date)).refresh().refs(resource, status)

    def request_refs(self, snapshot_date: date | str, resource: str, key: Mapping[str, str], status: str) -> list[RawRef]:
        """The stored bodies of one request (``key``) with ``status``."""
        index = night_index(self.raw_root, as_date(snapshot_date)).refresh()
        return index.refs(check_name("resource", resource), status, key_digest(key))

    def raw_ref(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> RawRef | None:
        """The accepted answer to this request, or ``None``."""
        found = self.request_refs(snapshot_date, resource, key, OK)
        return found[0] if found else None

    def has_raw(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> bool:
        """Whether an accepted answer to this request is stored."""
        return self.raw_ref(snapshot_date, resource, key) is not None

    def read_raw(self, snapshot_date: date | str, resource: str, key: Mapping[str, str]) -> RawResponse | None:
        """The accepted answer to this request, or ``None``."""
        ref = self.raw_ref(snapshot_date, resource, key)
        return None if ref is None else next(read_raws([ref]))

    def iter_raw(
        self, snapshot_date: date | str, resource: str | None = None, *, status: str | None = OK
    ) -> Iterator[RawResponse]:
        """Stored bodies of a night (one resource or all) with ``status`` (``None``: every
        body), one at a time, in :meth:`raw_refs`'s order."""
        yield from read_raws(self.raw_refs(snapshot_date, resource, status=status))

    def raw_dates(self) -> list[date]:
        return partition_dates(self.root / RAW_DIR)

    # ------------------------------------------------------------------ tables
    def table_dir(self, table: str) -> AnyPath:
        return self.root / check_name("table", table)

    def table_uri(self, table: str) -> str:
        """Where the Delta table is, as any engine's reader opens it (a path or a URL)."""
        return table_uri(self, table)

    def partition_path(self, table: str, snapshot_date: date | str) -> AnyPath:
        """The folder of a night's parts (a Delta table's partition folder: it may also hold
        parts no version names any more, until they are expired)."""
        return self.table_dir(table) / f"{PARTITION}={as_date(snapshot_date).isoformat()}"

    def partition_writer(
        self, table: str, snapshot_date: date | str, *, shard: str | None = None, keep_shards: Iterable[str] | None = None
    ) -> PartitionWriter:
        return PartitionWriter(self, table, as_date(snapshot_date), shard=shard, keep_shards=keep_shards)

    def shard_parts(self, table: str, snapshot_date: date | str) -> dict[str | None, list[tuple[str, int | None]]]:
        """The night's parts of ``table`` (as :meth:`night_parts`) by the shard that committed
        each; ``None``: parts of the night written whole."""
        out: dict[str | None, list[tuple[str, int | None]]] = {}
        for parts in self.night_parts(table, snapshot_date).values():
            for path, rows in parts:
                out.setdefault(part_shard(path), []).append((path, rows))
        return out

    def shard_mark(self, snapshot_date: date | str, shard: str) -> AnyPath:
        """The document saying a shard's parts of the night are in (see :data:`SHARDS_DIR`)."""
        night = as_date(snapshot_date).isoformat()
        return self.root / SHARDS_DIR / f"{PARTITION}={night}" / f"{check_name('shard', shard)}.json"

    def drop_shard_marks(self, snapshot_date: date | str) -> None:
        """Forget which shards' parts of a night are in (the night was written whole since)."""
        folder = self.root / SHARDS_DIR / f"{PARTITION}={as_date(snapshot_date).isoformat()}"
        if folder.is_dir():
            remove_tree(folder)

    def write_table(self, table: str, snapshot_date: date | str, data: pa.Table, *, shard: str | None = None) -> int:
        """Replace one night of ``table`` (or one shard's part of it) with ``data``, in one
        commit; returns rows written."""
        with self.partition_writer(table, snapshot_date, shard=shard) as writer:
            writer.write(data)
        return writer.rows

    def write_tables(
        self, snapshot_date: date | str, tables: Mapping[str, pa.Table], *, last: str | None = None
    ) -> dict[str, int]:
        """Replace one night of several tables, a commit each, side by side (each waits on its
        own store round trips); ``last``, when given, is committed once the others are (a table
        whose night says the others' are there). Returns rows written per table."""
        writers = {name: self.partition_writer(name, snapshot_date).__enter__() for name in tables}
        try:
            for name, writer in writers.items():
                writer.write(tables[name])
        except BaseException as exc:
            finish_together(list(writers.values()), type(exc))
            raise
        finish_together([writer for name, writer in writers.items() if name != last])
        if last in writers:
            finish_together([writers[last]])
        return {name: writer.rows for name, writer in writers.items()}

    def drop_partition(self, table: str, snapshot_date: date | str) -> None:
        """Remove one night of ``table`` (a writer that writes nothing does exactly that)."""
        with self.partition_writer(table, snapshot_date):
            pass

    def table_folders(self) -> list[str]:
        """The lake's folders that may hold a table (one listing): its Delta tables, and any
        table of the first layout (see :meth:`tables`)."""
        return [p.name for p in self._table_folders()]

    def _table_folders(self) -> list[AnyPath]:
        try:
            return sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        except FileNotFoundError:
            return []

    def tables(self) -> list[str]:
        """The lake's Delta tables (on an object store a listing per folder, side by side)."""
        folders = self._table_folders()
        if not isinstance(self.root, StorePath):
            return sorted(p.name for p in folders if (p / DELTA_LOG).is_dir())
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-tables") as pool:
            logged = list(pool.map(lambda p: any(e.name == DELTA_LOG for e in p.iterdir()), folders))
        return sorted(p.name for p, has_log in zip(folders, logged, strict=True) if has_log)

    def partitions(self, table: str) -> list[date]:
        """The nights the table's current version holds rows of."""
        return list(active_files(self, table))

    def all_partition_files(self, table: str) -> list[str]:
        """Every night's parts of ``table`` in its current version, oldest night first."""
        return [self._file(table, path) for paths in active_files(self, table).values() for path in paths]

    def partition_files(self, table: str, snapshot_date: date | str) -> list[str]:
        """The night's parts of ``table`` in its current version (full URLs on an object store),
        never a part being written or one a later commit replaced."""
        day = as_date(snapshot_date)
        return [self._file(table, path) for path in active_files(self, table, day).get(day, [])]

    def night_parts(self, table: str, snapshot_date: date | str | None = None) -> dict[date, list[tuple[str, int | None]]]:
        """The table's parts in its current version by night (full paths or URLs), each with its
        rows when its commit says them (``None`` otherwise)."""
        day = None if snapshot_date is None else as_date(snapshot_date)
        return {
            night: [(self._file(table, path), rows) for path, rows in parts]
            for night, parts in night_parts(self, table, day).items()
        }

    def _file(self, table: str, path: str) -> str:
        """A part's full path or URL from its path in the Delta log (relative, URL-encoded)."""
        from urllib.parse import unquote

        if "://" in path or path.startswith("/"):
            return path
        return f"{self.table_uri(table).rstrip('/')}/{unquote(path)}"

    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem of a lake on an object store (``None`` for a local lake)."""
        return self.root.fs if isinstance(self.root, StorePath) else None

    def _fs_path(self, file: str) -> str:
        """A part's path as pyarrow wants it with :attr:`filesystem` (no protocol)."""
        return str(self.filesystem._strip_protocol(file)) if self.filesystem is not None else file

    def read_partition(self, table: str, snapshot_date: date | str, columns: list[str] | None = None) -> pa.Table:
        """One night of ``table`` (without ``snapshot_date``). A part that cannot be read is a
        :class:`LakeError` naming the file and the rebuild that makes it again."""
        day = as_date(snapshot_date)
        return self.read_parts(day, self.partition_files(table, day), columns)

    def read_parts(self, snapshot_date: date, files: list[str], columns: list[str] | None = None) -> pa.Table:
        """A night's parts (as :meth:`night_parts` names them), read into one table. On an object
        store each part is fetched whole, all side by side (one GET each: pyarrow's reads through
        fsspec ask each file's size twice, then its ranges)."""
        fetched: dict[str, bytes] = {}
        if isinstance(self.root, StorePath) and files:
            paths = {StorePath(self.root.fs, self._fs_path(path)): path for path in files}
            fetched = {paths[found]: data for found, data in read_parts(list(paths)).items()}
        parts = []
        for path in files:
            try:
                if self.filesystem is None:
                    parts.append(pq.read_table(path, columns=columns))
                elif path not in fetched:
                    raise FileNotFoundError(f"{path} is missing")
                else:
                    parts.append(pq.read_table(pa.BufferReader(fetched[path]), columns=columns))
            except (pa.ArrowException, OSError) as exc:
                raise damaged_part(path, snapshot_date, exc) from None
        return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})

    def read_table(self, table: str, snapshot_date: date | str | None = None) -> pa.Table:
        """A table (one night or all) with ``snapshot_date`` restored: for tests and notebooks."""
        import pyarrow.dataset as ds

        wanted = None if snapshot_date is None else as_date(snapshot_date)
        parts = []
        for day, paths in active_files(self, table, wanted).items():
            files = [self._file(table, path) for path in paths]
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
