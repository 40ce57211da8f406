"""The lake's tables: Delta tables (delta-rs), partitioned by night, one commit per table per
night (or per shard of a night).

:class:`PartitionWriter` writes one night of one table as Parquet parts (zstd) straight into the
table's ``snapshot_date=D/`` folder, then commits them in one Delta transaction that replaces
the night (an overwrite on its date) — or, for a shard, that shard's parts of the night only.
Until the commit no reader sees a part; a writer that fails deletes its parts, a killed one
leaves them for :func:`expire_versions` (Delta's vacuum). Commits of other nights, or of other
shards, may run at the same moment: each version's commit is a conditional write (a local file
created only if absent; on S3 a PUT with ``If-None-Match: *``), and a conflict or a store's
transient failure is tried again here, after checking whether the commit had in fact landed.
On a local folder delta-rs commits (and checks a loser against the winner). On S3 the lake
writes the commit itself, as delta-rs writes one, from its own reading of the log
(:mod:`~tourneylake.lake.delta_log`): delta-rs's commit and creation read the table back after
their PUT, a dozen requests where one listing and the PUT do; a log that reader does not read,
or a commit that adds columns, is still delta-rs's.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError, one_line
from tourneylake.lake.storage import AnyPath, KeptBytes, StorePath, entries_of, fsync_dir, fsync_file, mtime
from tourneylake.runtime.threads import ProcessThreads

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from tourneylake.lake.delta_log import Snapshot
    from tourneylake.lake.lake import Lake

__all__ = [
    "DELTA_LOG",
    "PARTITION",
    "TMP_DIR",
    "PartitionWriter",
    "check_name",
    "damaged_part",
    "expire_versions",
    "finish_together",
    "part_shard",
    "partition_dates",
]

log = logging.getLogger(__name__)

PARTITION = "snapshot_date"
TMP_DIR = "_tmp"
DELTA_LOG = "_delta_log"
#: A table's first commit in its log (version 0).
FIRST_COMMIT = f"{0:020d}.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Every table's properties: a checkpoint every 5 commits (a reader replays at most 5 JSON
#: commits: a GET each on an object store), the log's entries older than 30 days dropped at a checkpoint.
TABLE_CONFIGURATION = {
    "delta.checkpointInterval": "5",
    "delta.logRetentionDuration": "interval 30 days",
    "delta.enableExpiredLogCleanup": "true",
}
#: Tries of one commit (a conflict with another writer, a store's transient failure).
_COMMIT_TRIES = 8
#: A part's name: ``part-night-<generation>-<n>`` when its night was written whole, else
#: ``part-shard-<shard>-<generation>-<n>`` (a shard's part: see :class:`PartitionWriter`).
_SHARD_PART = re.compile(r"^part-shard-(?P<shard>.+)-[0-9a-f]{16}-[0-9]{5}\.zstd\.parquet$")


def check_name(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise LakeError(f"invalid {kind} name {name!r}: letters, digits, '_', '.', '-' only")
    return name


def part_shard(path: str) -> str | None:
    """The shard whose part ``path`` is (its name says), or ``None``: a part of a night written whole."""
    found = _SHARD_PART.match(path.rsplit("/", 1)[-1])
    return found.group("shard") if found else None


# ---------------------------------------------------------------------- where a table is
def table_uri(lake: Lake, table: str) -> str:
    """The table's location as delta-rs opens it: a local path, or the store's URL."""
    folder = lake.table_dir(table)
    if isinstance(folder, StorePath):
        protocol = folder.fs.protocol if isinstance(folder.fs.protocol, str) else folder.fs.protocol[0]
        if protocol not in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"):
            raise LakeError(
                f"the lake's tables are Delta tables, which need a store delta-rs opens (a local folder, s3://, gs://, "
                f"az://); {protocol}:// is not one"
            )
    return str(folder)


def creates_conditionally(folder: StorePath) -> bool:
    """Whether the store under ``folder`` is the lake's own S3 client, whose create-only PUT
    refuses to replace an object (fsspec's other filesystems may not honour the mode)."""
    from tourneylake.lake.s3store import S3ObjectStoreFileSystem

    return isinstance(folder.fs, S3ObjectStoreFileSystem)


def storage_options(lake: Lake) -> dict[str, str]:
    """delta-rs's options for the lake's store, from the store's usual environment (delta-rs reads
    the credentials themselves from it: ``AWS_ACCESS_KEY_ID``, a profile, a role…)."""
    if lake.local:
        return {}
    from tourneylake.lake.s3store import s3_options  # the lake's own S3 client is given the same

    return s3_options()


#: The tables this process opened, each lent to one user at a time (:func:`opened`) and brought up
#: to date with the commits made since when lent again, rather than read anew from its last checkpoint.
_IDLE: dict[str, list[DeltaTable]] = {}
_IDLE_LOCK = threading.Lock()


@contextlib.contextmanager
def opened(lake: Lake, table: str) -> Iterator[DeltaTable | None]:
    """The table at its latest version, for the block (``None``: no such table yet)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = table_uri(lake, table)
    with _IDLE_LOCK:
        idle = _IDLE.get(uri)
        delta = idle.pop() if idle else None
    for attempt in range(_COMMIT_TRIES):
        try:
            if delta is not None:
                delta.update_incremental()
            else:
                delta = DeltaTable(uri, storage_options=storage_options(lake))
            break
        except TableNotFoundError:
            delta = None
            break
        except Exception as exc:  # noqa: BLE001 - a store's failure (a lost answer, a 5xx): tried again, then one line
            delta = None
            _transient(exc, attempt, f"cannot read the table {uri}")
    yield delta
    if delta is not None:  # not after a failure inside the block: the next user opens it anew
        with _IDLE_LOCK:
            _IDLE.setdefault(uri, []).append(delta)


def _transient(exc: BaseException, attempt: int, what: str) -> None:
    """Wait before the next try of something that failed for a reason outside our code, or say
    it on one line once the tries are spent."""
    from deltalake.exceptions import DeltaError

    if not isinstance(exc, DeltaError | OSError) or attempt + 1 >= _COMMIT_TRIES:
        raise LakeError(f"{what}: {one_line(exc)}") from None
    log.info("%s (%s): trying again", what, one_line(exc)[:200])
    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))


def active_files(lake: Lake, table: str, night: date | None = None) -> dict[date, list[str]]:
    """The files of the table's current version, by night (one night's only, with ``night``),
    each as a path relative to the table's folder, sorted."""
    return {day: [path for path, _ in parts] for day, parts in night_parts(lake, table, night).items()}


def night_parts(lake: Lake, table: str, night: date | None = None) -> dict[date, list[tuple[str, int | None]]]:
    """:func:`active_files` with each file's rows (``None`` when its commit did not say). Read
    from the log by the lake's own reader (:mod:`~tourneylake.lake.delta_log`: a listing, and
    only the commits not read before), else by opening the table with delta-rs."""
    out: dict[date, list[tuple[str, int | None]]] = {}
    for path, day, rows in _current_parts(lake, table):
        if night is None or day == night:
            out.setdefault(day, []).append((path, rows))
    return {day: sorted(parts) for day, parts in sorted(out.items())}


def _current_parts(lake: Lake, table: str) -> list[tuple[str, date, int | None]]:
    """Every part of the table's current version with its night and rows (none: no table)."""
    from tourneylake.lake.delta_log import Unreadable, table_parts

    for attempt in range(_COMMIT_TRIES):
        try:
            return table_parts(lake.table_dir(table) / DELTA_LOG, PARTITION) or []
        except Unreadable as exc:
            log.debug("%s: its log is read by delta-rs (%s)", table, exc)
            break
        except FileNotFoundError:  # a commit cleaned up between the listing and its read: listed again
            continue
        except (OSError, LakeError) as exc:  # a store's failure: tried again, then one line
            _transient(exc, attempt, f"cannot read the table {table_uri(lake, table)}")
    with opened(lake, table) as delta:
        if delta is None:
            return []
        actions = pa.table(delta.get_add_actions(flatten=True)).select(["path", f"partition.{PARTITION}", "num_records"])
    return list(zip(*(column.to_pylist() for column in actions.columns), strict=True))


#: The parts of the first layout (before the lake's tables were Delta tables): ``part-00000.parquet``
#: on a disk, ``part-<generation>-00000.parquet`` and ``_commit.json`` markers on an object store.
_LEGACY_PART = re.compile(r"^(part-([0-9a-f]{12}-)?[0-9]{5}\.parquet|_commit\.json)$")


def is_legacy(lake: Lake, table: str, *, without_log: bool = False) -> bool:
    """Whether the table's folder holds the lake's first layout (hive folders of Parquet parts
    and no Delta log), which ``tourneylake rebuild --all`` converts. ``without_log``: the caller
    found no Delta log there (a table about to be created): on a store its objects are then
    listed at once (one request for a new table's parts, not a listing per folder)."""
    folder = lake.table_dir(table)
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


def legacy_tables(lake: Lake) -> list[str]:
    """The tables of the lake's first layout (see :func:`is_legacy`; on an object store the
    folders looked at side by side)."""

    try:
        folders = [p.name for p in lake.root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    except FileNotFoundError:
        return []
    with ThreadPoolExecutor(1 if lake.local else 8, thread_name_prefix="tourneylake-legacy") as pool:
        legacy = list(pool.map(lambda name: is_legacy(lake, name), folders))
    return sorted(name for name, old in zip(folders, legacy, strict=True) if old)


# ---------------------------------------------------------------------- the writer
class PartitionWriter:
    """Writes one night of one table as parts, committed as one Delta transaction on a
    successful exit (see the module docstring).

    ``write`` may be called any number of times (one part each: write every N players and
    memory stays flat). All parts must share a schema. An exception inside the ``with`` block
    deletes the new parts and leaves the night as it was. A writer that wrote nothing removes
    the night (the night has no rows for this table). With ``shard``, the commit replaces only
    the parts that shard committed before for this night (``part-shard-<shard>-…``) and leaves
    every other shard's: several shards make one night's table side by side. With
    ``keep_shards`` (a night made of shards, once all are in), it keeps those shards' parts as
    they are and replaces every other part of the night; each ``write`` then names the shard
    its part is of.
    """

    def __init__(
        self,
        lake: Lake,
        table: str,
        snapshot_date: date,
        *,
        shard: str | None = None,
        keep_shards: Iterable[str] | None = None,
    ) -> None:
        self.lake = lake
        self.table = check_name("table", table)
        self.snapshot_date = snapshot_date
        self.shard = None if shard is None else check_name("shard", shard)
        self.keep_shards = None if keep_shards is None else frozenset(keep_shards)
        self.rows = 0
        self.parts = 0
        self._schema: pa.Schema | None = None
        self._folder: AnyPath | None = None
        # (path in the table, its write: its bytes once done, rows); written side by side (see `write`)
        self._writes: list[tuple[str, Future[int], int]] = []
        self._written: list[tuple[str, int, int]] = []  # (path in the table, bytes, rows), once every write is done
        self._generation = uuid.uuid4().hex[:16]

    def __enter__(self) -> PartitionWriter:
        table_uri(self.lake, self.table)  # refuses a store delta-rs cannot open, before any part
        self._folder = self.lake.table_dir(self.table) / f"{PARTITION}={self.snapshot_date.isoformat()}"
        return self

    def write(self, data: pa.Table | pa.RecordBatch, *, shard: str | None = None) -> None:
        """One part of the night (with ``keep_shards``: of ``shard``), encoded here; what waits on
        the storage (a store's PUT, a disk's fsync) is done on a thread of the process's own while
        the caller goes on; the commit waits for every part, and a part that could not be stored
        fails the writer."""
        if self._folder is None:
            raise LakeError("PartitionWriter.write outside its with-block")
        owner = self.shard if self.keep_shards is None else shard
        if self.keep_shards is not None and (owner is None or owner in self.keep_shards):
            raise LakeError(f"{self.table}: a part of a night made of shards names a shard it replaces, not {owner!r}")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if PARTITION in data.column_names:
            data = self._drop_partition_column(data)
        if self._schema is None:
            self._schema = data.schema
        elif not data.schema.equals(self._schema):
            try:
                data = data.cast(self._schema)
            except (pa.ArrowInvalid, ValueError) as exc:
                raise LakeError(f"{self.table}: part schema differs from the first part's: {exc}") from None
        owned = "night" if owner is None else f"shard-{check_name('shard', owner)}"
        name = f"part-{owned}-{self._generation}-{self.parts:05d}.zstd.parquet"
        path = self._folder / name
        # Encoded here (Arrow's memory stays with this thread), stored or fsynced on a part
        # thread: the wait for the store or the disk overlaps the next batch.
        if isinstance(path, StorePath):
            written = _PARTS.get().submit(_put, path, _encoded(data))
        else:
            size = _write_local_part(path, data)  # its data fsynced before the commit names it
            written = _PARTS.get().submit(_synced, path, size) if self.lake.fsync else _done(size)
        self._writes.append((f"{self._folder.name}/{name}", written, data.num_rows))
        self.parts += 1
        self.rows += data.num_rows

    def _drop_partition_column(self, data: pa.Table) -> pa.Table:
        column = data.column(PARTITION)
        if column.null_count or (data.num_rows and set(column.unique().to_pylist()) != {self.snapshot_date}):
            raise LakeError(f"{self.table}: rows of another snapshot_date than {self.snapshot_date} in this partition")
        return data.drop_columns([PARTITION])

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        folder, self._folder = self._folder, None
        if folder is None:
            return
        try:
            failed = self._wait_for_parts()
            if exc_type is None:
                if failed is not None:
                    raise failed
                if self.lake.fsync and isinstance(folder, Path) and self._written:
                    fsync_dir(folder)  # the parts' names on disk before the commit that names them
                self._commit()
                return
        except BaseException:
            self._discard(folder)
            raise
        self._discard(folder)

    def _wait_for_parts(self) -> BaseException | None:
        """Wait for every part's write; the first failure (the parts written are in ``_written``)."""
        failed = None
        for path, written, rows in self._writes:
            try:
                self._written.append((path, written.result(), rows))
            except Exception as exc:  # noqa: BLE001 - the writer fails with it (its parts deleted)
                failed = failed or exc
        self._writes = []
        return failed

    def _discard(self, folder: AnyPath) -> None:
        """Delete this writer's parts (best effort: one left over goes at the next vacuum)."""
        for path, _, _ in self._written:
            with contextlib.suppress(OSError, LakeError):
                (folder / path.rsplit("/", 1)[-1]).unlink(missing_ok=True)

    # ------------------------------------------------------------------ the commit
    def _commit(self) -> None:
        from deltalake.exceptions import CommitFailedError

        uri = table_uri(self.lake, self.table)
        what = f"{uri}: night {self.snapshot_date} could not be committed"
        folder = self.lake.table_dir(self.table)
        if isinstance(folder, StorePath) and creates_conditionally(folder) and self._commit_by_put(folder, what):
            return
        for attempt in range(_COMMIT_TRIES):
            try:
                with opened(self.lake, self.table) as delta:
                    if self._commit_to(delta):
                        return
            except CommitFailedError as exc:  # another writer's commit touched what this one replaces
                if attempt + 1 >= _COMMIT_TRIES:
                    raise LakeError(f"{what} ({one_line(exc)})") from None
                time.sleep(0.02 * (attempt + 1) * (0.5 + random.random()))
            except LakeError:
                raise
            except Exception as exc:  # noqa: BLE001 - a store's failure: tried again, then one line
                _transient(exc, attempt, what)
        raise LakeError(f"{what} (the table kept appearing and disappearing)")

    def _commit_by_put(self, folder: StorePath, what: str) -> bool:
        """The commit on a store with create-only PUTs, written here: the table's latest version
        read by the lake's own reader (:mod:`~tourneylake.lake.delta_log`: a listing, and the
        commits not read before), then the next version's commit stored with one conditional
        PUT, which only one writer of that version can win; the loser reads again and commits on
        the new version (its removals are then of what that version holds). delta-rs's commit
        asks a dozen requests more (it reads the table back twice after its PUT). ``False``: this
        commit is delta-rs's (a log this reader does not read, or parts with columns the table
        does not have yet, whose schema delta-rs merges)."""
        from tourneylake.lake.delta_log import Unreadable, remember, snapshot

        log_dir = folder / DELTA_LOG
        failed: BaseException | None = None
        for attempt in range(_COMMIT_TRIES):
            try:
                table = snapshot(log_dir, PARTITION)
            except Unreadable as exc:
                log.debug("%s: committed by delta-rs (%s)", self.table, exc)
                return False
            except (OSError, LakeError) as exc:  # a commit cleaned up under the listing, a store's failure
                failed = exc
                time.sleep(0.02 * (attempt + 1) * (0.5 + random.random()))
                continue
            if table is None:
                if not self._written:
                    return True  # no table, and nothing to write: the night has no rows
                self._refuse_legacy(without_log=True)
                if self._create_on_store(folder):
                    return True
                continue
            if {path for path, night, _, _ in table.parts.values() if night == self.snapshot_date and self._replaces(path)} == {
                path for path, _, _ in self._written
            }:
                return True  # already the table's: this writer's (a try whose answer was lost), or nothing to replace
            if not table.plain_writes() or not set(self._file_schema().names) <= set(table.columns()):
                return False
            name = f"{table.version + 1:020d}.json"
            body = self._commit_body(table)
            try:
                tag = (log_dir / name).write_new(body)
            except FileExistsError:  # another writer's commit (or this one's, its answer lost): read again
                time.sleep(0.01 * (attempt + 1) * (0.5 + random.random()))
                continue
            except LakeError as exc:  # a store's failure (the commit may have landed: read again)
                failed = exc
                time.sleep(0.02 * (attempt + 1) * (0.5 + random.random()))
                continue
            remember(log_dir, name, body, tag, PARTITION)
            self._checkpoint_if_due(table, table.version + 1)
            return True
        raise LakeError(f"{what} ({one_line(failed) if failed else 'other writers kept committing first'})")

    def _commit_body(self, table: Snapshot) -> bytes:
        """The next version's commit, as delta-rs writes one: the night's parts this writer
        replaces removed (all of them; a shard's own with ``shard``; all but the kept shards'
        with ``keep_shards``), this writer's parts added."""
        now = int(time.time() * 1000)
        values = {PARTITION: self.snapshot_date.isoformat()}
        whole = self.shard is None and self.keep_shards is None
        info = {
            "timestamp": now,
            "operation": "WRITE",
            "operationParameters": {
                "mode": "Overwrite" if whole else "Append",
                "partitionBy": orjson.dumps([PARTITION]).decode(),
            },
            "engineInfo": "tourneylake",
        }
        removes = [
            {"remove": {"path": path, "dataChange": True, "deletionTimestamp": now, "extendedFileMetadata": True,
                        "partitionValues": values, "size": size}}
            for path, night, _, size in table.parts.values()
            if night == self.snapshot_date and self._replaces(path)
        ]  # fmt: skip
        adds = [
            {"add": {"path": path, "partitionValues": values, "size": size, "modificationTime": now, "dataChange": True,
                     "stats": orjson.dumps({"numRecords": rows}).decode()}}
            for path, size, rows in self._written
        ]  # fmt: skip
        return b"\n".join(orjson.dumps(action) for action in [{"commitInfo": info}, *adds, *removes])

    def _checkpoint_if_due(self, table: Snapshot, version: int) -> None:
        """A checkpoint of the table after every ``delta.checkpointInterval`` commits, as delta-rs
        makes one after its own commits (and the log's expired entries dropped, as it does then
        when the table asks it): it opens the table to write it. A checkpoint that cannot be
        written is not this commit's failure (readers replay the commits since the last one)."""
        from deltalake import DeltaTable

        interval = table.setting("delta.checkpointInterval") or ""
        every = int(interval) if interval.isdigit() and int(interval) > 0 else 100
        if (version + 1) % every:
            return
        try:
            delta = DeltaTable(table_uri(self.lake, self.table), storage_options=storage_options(self.lake))
            delta.create_checkpoint()
            if (table.setting("delta.enableExpiredLogCleanup") or "true").lower() == "true":
                delta.cleanup_metadata()
        except Exception as exc:  # noqa: BLE001 - the next due checkpoint is tried again
            log.warning("%s: no checkpoint after version %d (%s)", self.table, version, one_line(exc))

    def _refuse_legacy(self, *, without_log: bool) -> None:
        if is_legacy(self.lake, self.table, without_log=without_log):
            raise LakeError(
                f"{table_uri(self.lake, self.table)} holds the lake's first table layout: run `tourneylake rebuild "
                "--all` to convert the lake's tables from its raw answers (no search)"
            )

    def _commit_to(self, delta: DeltaTable | None) -> bool:
        """One try of the commit, on the table as it is now; ``False``: try again (another
        writer created the table meanwhile)."""
        if delta is None:
            if not self._written:
                return True  # no table, and nothing to write: the night has no rows
            self._refuse_legacy(without_log=True)
            return self._create()
        if self._landed(delta):
            return True
        schema = _merged_schema(delta, self._file_schema())
        if self.shard is None and self.keep_shards is None:
            day = self.snapshot_date.isoformat()
            partition_filters = [(PARTITION, "=", day)]
            delta.create_write_transaction(
                self._adds(), "overwrite", schema, partition_by=[PARTITION], partition_filters=partition_filters
            )
            return True
        actions = [*self._removes(delta), *self._adds()]
        if actions:  # else nothing to replace: no commit
            delta.create_write_transaction(actions, "append", schema, partition_by=[PARTITION])
        return True

    def _replaces(self, path: str) -> bool:
        """Whether the commit replaces this part of the night (see the class docstring)."""
        if self.keep_shards is not None:
            return part_shard(path) not in self.keep_shards
        return self.shard is None or part_shard(path) == self.shard

    def _create(self) -> bool:
        """The table created with this writer's parts as its first version (one commit);
        ``False`` when another writer created it at the same moment (this one then commits to it)."""
        folder = self.lake.table_dir(self.table)
        if isinstance(folder, StorePath) and creates_conditionally(folder):
            return self._create_on_store(folder)
        try:
            self._create_with_delta_rs(table_uri(self.lake, self.table), storage_options(self.lake))
        except Exception as exc:  # noqa: BLE001 - lost to another creator, or a store's failure: opened again
            log.info("%s: creating the table failed (%s): opening it again", self.table, one_line(exc)[:200])
            return False
        return True

    def _create_with_delta_rs(self, uri: str, options: dict[str, str]) -> None:
        from deltalake import Schema
        from deltalake.transaction import create_table_with_add_actions

        create_table_with_add_actions(
            uri,
            Schema.from_arrow(_with_partition(self._file_schema())),
            self._adds(),
            mode="error",
            partition_by=[PARTITION],
            configuration=TABLE_CONFIGURATION,
            storage_options=options,
        )

    def _create_on_store(self, folder: StorePath) -> bool:
        """:meth:`_create` on a store with create-only PUTs: the first commit as delta-rs writes it,
        made in a local folder, then stored with one conditional PUT. delta-rs's own creation on a
        store asks a listing before its PUT and reads the new table back twice after it; the PUT
        alone is what makes the creation atomic (a second creator's is refused)."""
        from tourneylake.lake.delta_log import remember

        commit = self._first_commit(str(folder))
        try:
            tag = (folder / DELTA_LOG / FIRST_COMMIT).write_new(commit)
        except FileExistsError:
            log.info("%s: another writer created the table (or this one, its answer lost): opening it", self.table)
            return False
        except LakeError as exc:  # a store's failure: opened again (it may have landed), as delta-rs's own
            log.info("%s: creating the table failed (%s): opening it again", self.table, one_line(exc)[:200])
            return False
        remember(folder / DELTA_LOG, FIRST_COMMIT, commit, tag, PARTITION)  # its readers here need not read it back
        return True

    def _first_commit(self, uri: str) -> bytes:
        """The table's version 0 (its protocol, its metadata, this writer's parts) as delta-rs
        writes it for a local table; the commit's information names the table's real location."""
        with tempfile.TemporaryDirectory(prefix="tourneylake-delta-") as scratch:
            self._create_with_delta_rs(scratch, {})
            lines = (Path(scratch) / DELTA_LOG / FIRST_COMMIT).read_bytes().splitlines()
        info = orjson.loads(lines[0])
        parameters = info.get("commitInfo", {}).get("operationParameters")
        if isinstance(parameters, dict) and "location" in parameters:
            parameters["location"] = uri
            lines[0] = orjson.dumps(info)
        return b"\n".join(lines)

    def _landed(self, delta: DeltaTable) -> bool:
        """Whether this writer's commit is already the table's (a try whose answer was lost):
        the night's (or the shard's) parts are exactly this writer's."""
        mine = {path for path, _, _ in self._written}
        current = {path for path in active_files_of(delta, self.snapshot_date) if self._replaces(path)}
        return current == mine

    def _file_schema(self) -> pa.Schema:
        return _delta_schema(self._schema) if self._schema is not None else pa.schema([])

    def _adds(self) -> list[Any]:
        from deltalake.transaction import AddAction

        now = int(time.time() * 1000)
        values = {PARTITION: self.snapshot_date.isoformat()}
        return [
            AddAction(path, size, values, now, True, orjson.dumps({"numRecords": rows}).decode())
            for path, size, rows in self._written
        ]

    def _removes(self, delta: DeltaTable) -> list[Any]:
        """The parts of the night the commit replaces (a shard's own, before)."""
        from deltalake.transaction import RemoveAction

        now = int(time.time() * 1000)
        actions = pa.table(delta.get_add_actions(flatten=True)).select(["path", "size_bytes", f"partition.{PARTITION}"])
        return [
            RemoveAction(path, True, now, size=size, partition_values={PARTITION: self.snapshot_date.isoformat()})
            for path, size, day in zip(*(c.to_pylist() for c in actions.columns), strict=True)
            if day == self.snapshot_date and self._replaces(path)
        ]


def active_files_of(delta: DeltaTable, night: date) -> list[str]:
    actions = pa.table(delta.get_add_actions(flatten=True)).select(["path", f"partition.{PARTITION}"])
    paths, days = (column.to_pylist() for column in actions.columns)
    return sorted(path for path, day in zip(paths, days, strict=True) if day == night)


#: The threads that write the process's parts (each writer's commit waits for its own).
_PARTS = ProcessThreads(4, "tourneylake-parts")


#: A part: Parquet, zstd, timestamps in microseconds as Delta keeps them.
_PART_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True, "coerce_timestamps": "us"}


def _encoded(data: pa.Table) -> bytes:
    """A part's Parquet bytes, for a store."""
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, **_PART_OPTIONS)
    return sink.getvalue().to_pybytes()


def _put(path: StorePath, payload: bytes) -> int:
    """A part stored on a store (one PUT: whole or absent); its size. A small one is kept for
    this process's reads of it (:func:`read_parts`)."""
    path.write_bytes(payload)
    _STORED.keep(path.path, payload)
    return len(payload)


#: The small parts this process stored: a part is never written again under its name (a
#: writer's generation is in it), so the night's later reads here (the reference data's lookups,
#: the warehouse load) need no GET.
_STORED = KeptBytes(total_bytes=64 << 20, item_bytes=4 << 20)


def read_parts(paths: list[StorePath]) -> dict[StorePath, bytes]:
    """Parts of a store whole: those this process stored from memory, the others fetched side by
    side (one GET each); a missing one is left out."""
    found = {path: data for path in paths if (data := _STORED.get(path.path)) is not None}
    missing = [path for path in paths if path not in found]
    if missing:
        found.update(missing[0].cat_many(missing))
    return found


def _done(size: int) -> Future[int]:
    done: Future[int] = Future()
    done.set_result(size)
    return done


def _synced(path: Path, size: int) -> int:
    """A part written on a disk, fsynced (deleted when it cannot be); its size."""
    try:
        fsync_file(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return size


def _write_local_part(path: Path, data: pa.Table) -> int:
    """One Parquet part on a disk, not fsynced yet (see :func:`_synced`); its size."""
    try:
        pq.write_table(data, path, **_PART_OPTIONS)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, path, **_PART_OPTIONS)
    except BaseException:
        path.unlink(missing_ok=True)  # a part written half-way is never committed: not left either
        raise
    return path.stat().st_size


def _delta_schema(schema: pa.Schema) -> pa.Schema:
    """A part's columns as the Delta table declares them (dictionary strings are strings,
    timestamps are microseconds)."""
    fields = []
    for field in schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_timestamp(kind):
            kind = pa.timestamp("us", tz=kind.tz)
        fields.append(field.with_type(kind))
    return pa.schema(fields)


def _with_partition(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(PARTITION, pa.date32()))


def _merged_schema(delta: DeltaTable, parts: pa.Schema) -> pa.Schema:
    """The table's columns, then any new ones of the parts: a commit never drops a column (the
    parts of another night may hold it), and a new one is added for every night (NULL before)."""
    current = pa.schema(delta.schema().to_arrow())
    known = set(current.names)
    fields = [f for f in current if f.name != PARTITION] + [f for f in parts if f.name not in known]
    return _with_partition(pa.schema(fields))


def finish_together(writers: list[PartitionWriter], exc_type: type[BaseException] | None = None) -> None:
    """Leave several writers' with-blocks at once (``exc_type``: the block failed): their
    commits, one table each, side by side (each waits on the store; a thread each)."""
    if exc_type is not None or len(writers) < 2:
        for writer in writers:
            writer.__exit__(exc_type, None, None)
        return

    with ThreadPoolExecutor(len(writers), thread_name_prefix="tourneylake-commit") as pool:
        done = [pool.submit(writer.__exit__, None, None, None) for writer in writers]
    failed = next((f.exception() for f in done if f.exception() is not None), None)
    if failed is not None:
        raise failed


# ---------------------------------------------------------------------- upkeep
def expire_versions(lake: Lake, keep_days: float, *, strays: bool = False) -> int:
    """Delete the files no version of the last ``keep_days`` days needs (Delta's vacuum: the
    parts of replaced nights, as the log names them), in every table; returns how many.
    ``strays``: also the parts no version ever named (a killed writer's), which takes a listing
    of every table's folder (a rebuild does it; a night does not). Without ``strays`` the tables
    are the lake's folders, from its one listing, and a table is opened only when its log says
    a removal may be due (:func:`expiry_due`): most nights replace nothing, and a night's expiry
    is then a listing per table, not a read of every table's log."""

    hours = max(0, round(keep_days * 24))

    def expire(table: str) -> int:
        if not strays and not expiry_due(lake, table, hours):
            return 0
        with opened(lake, table) as delta:
            if delta is None:
                return 0
            try:
                return len(delta.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False, full=strays))
            except Exception as exc:  # noqa: BLE001 - the next night's upkeep tries again
                log.warning("%s: old versions could not be expired (%s)", table, one_line(exc))
                return 0

    tables = lake.tables() if strays else lake.table_folders()
    with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-expire") as pool:  # each table waits on its own round trips
        removed = sum(pool.map(expire, tables))
    if removed:
        log.info("expired %d file(s) no version of the last %g day(s) needs", removed, keep_days)
    return removed


#: A log object counts as old enough to hold a due removal this much before its age says so:
#: a removal's time is taken before its commit is written, and the store's clock is not ours.
_DUE_MARGIN_S = 3600.0


def expiry_due(lake: Lake, table: str, hours: float) -> bool:
    """Whether the table may hold a file removed over ``hours`` ago, which is all a night's
    vacuum deletes: one listing of its log, where opening the table reads it. A removal is in a
    commit no older than its object: only a commit or checkpoint that old can hold one due, and
    never the first commit (it only adds). A log whose first commits were cleaned up (a
    checkpoint stands for them) cannot say: always due. No log: nothing to expire. The listing is
    one this process made a while ago when it is young enough to answer (see below)."""
    from tourneylake.lake.delta_log import LOG_ENTRY, recent_listing

    log_dir = lake.table_dir(table) / DELTA_LOG
    # A listing this process made a little before (the warehouse load's, beside the expiry) misses
    # only commits newer than it, whose removals cannot be due before the history kept has passed.
    entries = recent_listing(log_dir, hours * 3600 - 2 * _DUE_MARGIN_S)
    if entries is None:
        entries = entries_of(log_dir)
    oldest_allowed = time.time() - hours * 3600 + _DUE_MARGIN_S
    commits = set()
    for entry in entries:
        found = LOG_ENTRY.match(entry.name)
        if found is None:
            continue  # `_last_checkpoint`, a writer's temporary file
        version = int(found.group("version"))
        if found.group("kind") == "json":
            commits.add(version)
            if version == 0:
                continue
        written = mtime(entry)
        if written is None or written < oldest_allowed:
            return True
    return bool(entries) and 0 not in commits


def damaged_part(path: str | Path, night: date, exc: BaseException) -> LakeError:
    """The one-line error for a table part that cannot be read, with what to do about it: the
    part named once (its table and name) and the reader's first sentence about it."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    why = re.sub(r"^Could not open Parquet input source '[^']*':\s*", "", why).replace(f"'{path}'", "it")
    why = why.split(". ")[0].rstrip(".")[:60]
    folders = str(path).replace("\\", "/").split("/")
    part = f"{folders[-3]}/{folders[-1]}"  # its table and its name (the night is in the command)
    return LakeError(f"{part} is damaged ({why}): `tourneylake rebuild --date {night}` makes it again from raw (no search)")


def partition_dates(folder: AnyPath) -> list[date]:
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
