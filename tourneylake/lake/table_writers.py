"""The writers of the lake's Delta tables: a night of a table, or a shard's parts of it, each
committed by delta-rs (see :mod:`~tourneylake.lake.delta_tables`).

:class:`NightWriter`: delta-rs's writer (``write_deltalake``) replaces the night's partition by
its predicate; a reader sees the night before or after the commit, never half of it, and a
writer that fails commits nothing. :class:`ShardWriter`: shards of one night commit side by
side, each replacing only its own parts of the night. delta-rs's writers replace the rows a
predicate selects, and a shard's rows share their night with the other shards', so a shard
writes its Parquet parts itself, named for it, and commits them with delta-rs's transaction API
(its earlier parts removed, its new ones added). A commit is tried again after another writer's
or a store's failure, and one whose answer was lost is found by the writer's id in its commit
information.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError, one_line
from tourneylake.lake import outages
from tourneylake.lake.layout import PARTITION, check_name
from tourneylake.lake.legacy import is_legacy
from tourneylake.lake.outages import store_answered, store_failed, transient_text
from tourneylake.lake.storage import AnyPath, StorePath
from tourneylake.runtime.threads import ProcessThreads

if TYPE_CHECKING:
    from deltalake import DeltaTable


class DeltaTables(Protocol):
    """Where the lake's tables are, as a writer needs it (:class:`~tourneylake.lake.delta_tables.DeltaTables`)."""

    def uri(self, table: str) -> str: ...
    def folder(self, table: str) -> AnyPath: ...
    def night_folder(self, table: str, night: date | str) -> AnyPath: ...
    def storage_options(self) -> dict[str, str]: ...
    def opened(self, table: str) -> contextlib.AbstractContextManager[DeltaTable | None]: ...


__all__ = ["TABLE_CONFIGURATION", "NightWriter", "ShardWriter", "Tries", "finish_together", "part_shard", "store_failure"]

log = logging.getLogger(__name__)

#: Every table's properties: a checkpoint every 5 commits (a reader replays at most 5 JSON
#: commits: a GET each on an object store), the log's entries older than 30 days dropped at a checkpoint.
TABLE_CONFIGURATION = {
    "delta.checkpointInterval": "5",
    "delta.logRetentionDuration": "interval 30 days",
    "delta.enableExpiredLogCleanup": "true",
}
#: Tries after another writer's commit (delta-rs resolves what it can itself first).
TRIES = 8
#: Where a commit names the writer that made it (its commit information), to know whether a
#: commit whose answer was lost is in.
_COMMIT_ID = "tourneylake.writer"
#: A shard's part: ``part-shard-<shard>-<generation>-<n>.zstd.parquet`` (see :class:`ShardWriter`).
_SHARD_PART = re.compile(r"^part-shard-(?P<shard>.+)-[0-9a-f]{16}-[0-9]{5}\.zstd\.parquet$")
#: A part's Parquet: zstd, timestamps in microseconds as Delta keeps them.
_PART_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True, "coerce_timestamps": "us"}


def part_shard(path: str) -> str | None:
    """The shard whose part ``path`` is (its name says), or ``None``: a part of a night written whole."""
    found = _SHARD_PART.match(path.rsplit("/", 1)[-1])
    return found.group("shard") if found else None


def store_failure(exc: BaseException) -> bool:
    """Whether delta-rs (or the lake's own client) failed for a reason the store may get over
    (an outage, throttling, a connection lost): its requests' own tries were spent."""
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError | PermissionError):
        return True
    from deltalake.exceptions import CommitFailedError, DeltaError

    return isinstance(exc, DeltaError) and not isinstance(exc, CommitFailedError) and transient_text(str(exc))


class Tries:
    """The tries of one operation on a table: after another writer's commit (``commit``: only
    that, or a store's failure) it is tried again up to :data:`TRIES` times, after a store's
    failure until the store has been out for :data:`~tourneylake.lake.outages.PATIENCE_S`
    seconds (the process says it is retrying meanwhile); then :meth:`failed` says it on one line."""

    def __init__(self, what: str, *, commit: bool = False) -> None:
        self.what = what
        self.commit = commit
        self.attempt = 0
        self._outage: int | None = None  # counted as retrying the store (see outages)
        self._first_failure = 0.0

    def failed(self, exc: BaseException) -> None:
        """Wait before the next try, or raise the one-line :class:`LakeError` when there is none."""
        from deltalake.exceptions import CommitFailedError, DeltaError

        self.attempt += 1
        if store_failure(exc):
            if self._outage is None:
                self._first_failure = time.monotonic()
            self._outage = store_failed(self._outage, exc)
            if not outages.out_too_long(self._first_failure):
                time.sleep(outages.wait_before(self.attempt - 1))
                return
        elif isinstance(exc, CommitFailedError if self.commit else DeltaError) and self.attempt < TRIES:
            log.info("%s (%s): trying again", self.what, one_line(exc)[:200])
            time.sleep(min(2.0, 0.05 * 2 ** (self.attempt - 1)) * (0.5 + random.random()))
            return
        self.done(answered=False)
        raise LakeError(f"{self.what}: {one_line(exc)}") from None

    def done(self, *, answered: bool = True) -> None:
        """The operation is over (no longer counted as retrying the store)."""
        store_answered(self._outage, answered=answered)
        self._outage = None


class _Writer:
    """What both writers share: the night's parts checked, one schema for all, rows counted."""

    def __init__(self, tables: DeltaTables, table: str, night: date) -> None:
        self.tables = tables
        self.table = check_name("table", table)
        self.night = night
        self.rows = 0
        self.parts = 0
        self._schema: pa.Schema | None = None
        self._open = False
        self._id = uuid.uuid4().hex[:16]

    def __enter__(self) -> Any:
        self.tables.uri(self.table)  # refuses a store delta-rs cannot open, before any part
        self._open = True
        return self

    def _conformed(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """A part's rows without ``snapshot_date`` (checked to be the night), with the first
        part's columns, as the Delta table declares them."""
        if not self._open:
            raise LakeError(f"{type(self).__name__}.write outside its with-block")
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if PARTITION in data.column_names:
            column = data.column(PARTITION)
            if column.null_count or (data.num_rows and set(column.unique().to_pylist()) != {self.night}):
                raise LakeError(f"{self.table}: rows of another snapshot_date than {self.night} in this partition")
            data = data.drop_columns([PARTITION])
        if self._schema is None:
            self._schema = _delta_schema(data.schema)
        if not data.schema.equals(self._schema):
            try:
                data = data.cast(self._schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
                raise LakeError(f"{self.table}: part schema differs from the first part's: {exc}") from None
        self.parts += 1
        self.rows += data.num_rows
        return data

    def _refuse_legacy(self) -> None:
        """A one-line error when the table's folder holds the lake's first layout."""
        if is_legacy(self.tables.folder(self.table), without_log=True):
            raise LakeError(
                f"{self.tables.uri(self.table)} holds the lake's first table layout: run `tourneylake rebuild --all` "
                "to convert the lake's tables from its raw answers (no search)"
            )

    def _landed(self) -> bool:
        """Whether a commit of this writer is among the table's latest (a commit whose answer was
        lost may be in)."""
        from deltalake import DeltaTable

        try:
            history = DeltaTable(self.tables.uri(self.table), storage_options=self.tables.storage_options()).history(20)
        except Exception:  # noqa: BLE001 - cannot say: not known to be in
            return False
        return any(commit.get(_COMMIT_ID) == self._id for commit in history)

    def _commit_properties(self) -> Any:
        from deltalake import CommitProperties

        return CommitProperties(custom_metadata={_COMMIT_ID: self._id})

    def _committing(self, what: str, commit: Callable[[DeltaTable | None], None]) -> None:
        """``commit`` on the table as it is now (``None``: no table yet), tried again after
        another writer's commit or a store's failure; one whose answer was lost is found in the
        table (its commit names this writer) rather than made twice."""
        tries = Tries(f"{self.tables.uri(self.table)}: night {self.night} could not be {what}", commit=True)
        while True:
            try:
                with self.tables.opened(self.table) as delta:
                    commit(delta)
                tries.done()
                return
            except LakeError:
                tries.done(answered=False)
                raise
            except Exception as exc:  # noqa: BLE001 - another writer's commit, or a store's failure: tried again
                if self._landed():
                    tries.done()
                    return
                tries.failed(exc)


class NightWriter(_Writer):
    """Writes one night of one table, committed by delta-rs's writer on a successful exit: the
    night's partition replaced by the rows written. ``write`` may be called any number of times:
    the rows wait in a local file (Arrow IPC) for the commit, so memory stays flat, and
    delta-rs's writer reads them from there at the end (a writer fed as the rows come would hold
    one of delta-rs's runtime threads while it waits for them, and a night writes several tables
    at once). All parts must share a schema. An exception inside the ``with`` block commits
    nothing and leaves the night as it was; a writer that wrote nothing removes the night (it has
    no rows)."""

    def __init__(self, tables: DeltaTables, table: str, night: date) -> None:
        super().__init__(tables, table, night)
        self._spill: str | None = None  # the file the rows wait in
        self._file: pa.NativeFile | None = None
        self._sink: pa.ipc.RecordBatchStreamWriter | None = None

    def __enter__(self) -> NightWriter:
        return super().__enter__()

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Rows of the night."""
        data = self._conformed(data)
        if self._sink is None:
            handle, self._spill = tempfile.mkstemp(prefix=f"tourneylake-{self.table}-", suffix=".arrows")
            os.close(handle)
            self._file = pa.OSFile(self._spill, "wb")
            self._sink = pa.ipc.new_stream(self._file, _with_partition(data.schema))
        night = pa.repeat(pa.scalar(self.night, pa.date32()), data.num_rows)
        self._sink.write_table(data.append_column(pa.field(PARTITION, pa.date32()), night))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._open:
            return
        self._open = False
        if self._sink is None:
            if exc_type is None:
                self._drop()
            return
        try:
            self._sink.close()
            if self._file is not None:
                self._file.close()
            if exc_type is None:
                self._commit()
        finally:
            if self._spill is not None:
                Path(self._spill).unlink(missing_ok=True)

    def _commit(self) -> None:
        """The rows written, as the night's partition: delta-rs's overwrite of it (which creates
        the table when there is none, and adds the columns it does not have yet). A commit another
        writer's made fail (the table created, or its columns changed, at the same moment) is
        tried again from the rows kept."""
        from deltalake import write_deltalake

        assert self._spill is not None
        spill = self._spill

        def overwrite(delta: DeltaTable | None) -> None:
            if delta is None:
                self._refuse_legacy()
            with pa.OSFile(spill, "rb") as rows:
                write_deltalake(
                    delta if delta is not None else self.tables.uri(self.table),
                    pa.ipc.open_stream(rows),
                    mode="overwrite",
                    predicate=self._predicate(),
                    partition_by=[PARTITION],
                    schema_mode="merge",  # a night without some of the table's columns: they are NULL
                    configuration=TABLE_CONFIGURATION if delta is None else None,
                    storage_options=self.tables.storage_options(),
                    commit_properties=self._commit_properties(),
                )

        self._committing("committed", overwrite)

    def _drop(self) -> None:
        """The night removed from the table (delta-rs's delete of its partition), if it holds it."""

        def delete(delta: DeltaTable | None) -> None:
            if delta is not None and {PARTITION: self.night.isoformat()} in delta.partitions():
                delta.delete(self._predicate(), commit_properties=self._commit_properties())

        self._committing("removed", delete)

    def _predicate(self) -> str:
        return f"{PARTITION} = '{self.night.isoformat()}'"


#: The threads that store a shard's parts on an object store (each commit waits for its own).
_PARTS = ProcessThreads(4, "tourneylake-parts")


class ShardWriter(_Writer):
    """Writes a shard's parts of one night of one table, committed as one Delta transaction on a
    successful exit (see the module docstring): the parts that shard committed before for this
    night (``part-shard-<shard>-…``) are replaced, every other shard's are left, so several
    shards make one night's table side by side. With ``keep_shards`` (a night made of shards,
    once all are in) it keeps those shards' parts as they are and replaces every other part of
    the night; each ``write`` then names the shard its part is of. A writer that fails deletes
    its parts (a killed one leaves them to :meth:`DeltaTables.expire`'s ``strays``)."""

    def __init__(
        self,
        tables: DeltaTables,
        table: str,
        night: date,
        *,
        shard: str | None = None,
        keep_shards: Iterable[str] | None = None,
    ) -> None:
        super().__init__(tables, table, night)
        self.shard = None if shard is None else check_name("shard", shard)
        self.keep_shards = None if keep_shards is None else frozenset(keep_shards)
        self._writes: list[tuple[str, Future[int], int]] = []  # (path in the table, its write: its size, rows)
        self._written: list[tuple[str, int, int]] = []  # (path in the table, size, rows), once every write is done

    def __enter__(self) -> ShardWriter:
        return super().__enter__()

    def write(self, data: pa.Table | pa.RecordBatch, *, shard: str | None = None) -> None:
        """One part of the shard's (with ``keep_shards``: of ``shard``); on an object store it is
        stored on a thread of the process's own while the caller goes on."""
        owner = self.shard if self.keep_shards is None else shard
        if self.keep_shards is not None and (owner is None or owner in self.keep_shards):
            raise LakeError(f"{self.table}: a part of a night made of shards names a shard it replaces, not {owner!r}")
        data = self._conformed(data)
        name = f"part-shard-{check_name('shard', str(owner))}-{self._id}-{self.parts - 1:05d}.zstd.parquet"
        path = self.tables.night_folder(self.table, self.night) / name
        if isinstance(path, StorePath):
            sink = pa.BufferOutputStream()
            pq.write_table(data, sink, **_PART_OPTIONS)
            written = _PARTS.get().submit(_put, path, sink.getvalue().to_pybytes())
        else:
            written = _done(_write_local(path, data))
        self._writes.append((f"{path.parent.name}/{name}", written, data.num_rows))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._open:
            return
        self._open = False
        try:
            failed = self._wait_for_parts()
            if exc_type is None:
                if failed is not None:
                    raise failed
                self._commit()
                return
        except BaseException:
            self._discard()
            raise
        self._discard()

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

    def _discard(self) -> None:
        """Delete this writer's parts (best effort: one left over goes at a vacuum of strays)."""
        folder = self.tables.folder(self.table)
        for path, _, _ in self._written:
            with contextlib.suppress(OSError, LakeError):
                (folder / path).unlink(missing_ok=True)

    def _commit(self) -> None:
        """The shard's parts committed with delta-rs's transaction API: the parts of the night it
        replaces removed, its own added (none of either: no commit). Tried again on another
        writer's commit (the parts are kept until it lands)."""
        if self._schema is not None:
            self._prepare_table(self._schema)

        def replace(delta: DeltaTable | None) -> None:
            actions = [] if delta is None else [*self._removes(delta), *self._adds()]
            if delta is not None and actions:  # no table: nothing to write, the night has no rows
                delta.create_write_transaction(
                    actions, "append", delta.schema(), partition_by=[PARTITION], commit_properties=self._commit_properties()
                )

        self._committing("committed", replace)

    def _prepare_table(self, columns: pa.Schema) -> None:
        """The table as a shard's commit of ``columns`` needs it: created (with no rows) when
        there is none, and each of the columns it does not have yet added (with no value in the
        nights before): the commit of the shard's parts then changes none of the table's
        metadata, which other shards' commits at the same moment would conflict with."""
        from deltalake import DeltaTable, Schema

        tries = Tries(f"cannot prepare the table {self.tables.uri(self.table)}")
        while True:
            try:
                with self.tables.opened(self.table) as delta:
                    if delta is None:
                        self._refuse_legacy()
                        DeltaTable.create(
                            self.tables.uri(self.table),
                            _with_partition(columns),
                            partition_by=[PARTITION],
                            configuration=TABLE_CONFIGURATION,
                            storage_options=self.tables.storage_options(),
                        )
                    else:
                        known = set(pa.schema(delta.schema().to_arrow()).names)
                        new = [field.with_nullable(True) for field in columns if field.name not in known]
                        if new:
                            delta.alter.add_columns(Schema.from_arrow(pa.schema(new)).fields)
                tries.done()
                return
            except LakeError:
                tries.done(answered=False)
                raise
            except Exception as exc:  # noqa: BLE001 - another writer made it (or added the columns) first, or a store failed: looked at again
                tries.failed(exc)

    def _replaces(self, path: str) -> bool:
        """Whether the commit replaces this part of the night (see the class docstring)."""
        if self.keep_shards is not None:
            return part_shard(path) not in self.keep_shards
        return part_shard(path) == self.shard

    def _adds(self) -> list[Any]:
        from deltalake.transaction import AddAction

        now = int(time.time() * 1000)
        values = {PARTITION: self.night.isoformat()}
        return [
            AddAction(path, size, values, now, True, orjson.dumps({"numRecords": rows}).decode())
            for path, size, rows in self._written
        ]

    def _removes(self, delta: DeltaTable) -> list[Any]:
        """The parts of the night the commit replaces (the shard's own, before)."""
        from deltalake.transaction import RemoveAction

        now = int(time.time() * 1000)
        actions = pa.table(delta.get_add_actions(flatten=True)).select(["path", "size_bytes", f"partition.{PARTITION}"])
        return [
            RemoveAction(path, True, now, size=size, partition_values={PARTITION: self.night.isoformat()})
            for path, size, part_night in zip(*(c.to_pylist() for c in actions.columns), strict=True)
            if part_night == self.night and self._replaces(path)
        ]


def _put(path: StorePath, payload: bytes) -> int:
    """A part stored on a store (one PUT: whole or absent); its size."""
    path.write_bytes(payload)
    return len(payload)


def _done(size: int) -> Future[int]:
    done: Future[int] = Future()
    done.set_result(size)
    return done


def _write_local(path: Path, data: pa.Table) -> int:
    """One Parquet part on a disk; its size."""
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


def finish_together(writers: list[NightWriter | ShardWriter], exc_type: type[BaseException] | None = None) -> None:
    """Leave several writers' with-blocks at once (``exc_type``: the block failed): their
    commits, one table each, side by side (each waits on its store; a thread each)."""
    if exc_type is not None or len(writers) < 2:
        for writer in writers:
            writer.__exit__(exc_type, None, None)
        return
    with ThreadPoolExecutor(len(writers), thread_name_prefix="tourneylake-commit") as pool:
        done = [pool.submit(writer.__exit__, None, None, None) for writer in writers]
    failed = next((f.exception() for f in done if f.exception() is not None), None)
    if failed is not None:
        raise failed
