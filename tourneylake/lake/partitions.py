"""The lake's tables: a night a partition, replaced whole.

:class:`PartitionWriter` writes one night of one table as Parquet parts (zstd). On a local lake
the parts go to ``_tmp/`` and, on success, replace the night's folder with two renames (the old
one moved aside first, deleted last), so a failed run never loses the previous night. On an
object store the parts go straight into the night's folder under a fresh generation, and a
marker, ``_commit.json`` (one PUT), lists the generation's parts: readers see only what a marker
lists, so a writer killed at any point leaves the previous partition visible.
``snapshot_date`` is the hive partition column: it is not stored inside the files.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError
from tourneylake.lake.storage import AnyPath, StorePath, fsync_dir, fsync_file, remove_tree

if TYPE_CHECKING:
    from tourneylake.lake.lake import Lake

__all__ = ["COMMIT_FILE", "PARTITION", "TMP_DIR", "PartitionWriter", "check_name", "damaged_part"]

PARTITION = "snapshot_date"
TMP_DIR = "_tmp"
#: On an object store, the marker that commits a partition (lists its parts).
COMMIT_FILE = "_commit.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_name(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise LakeError(f"invalid {kind} name {name!r}: letters, digits, '_', '.', '-' only")
    return name


class PartitionWriter:
    """Writes one night of one table as parts; replaces the partition on successful exit.

    ``write`` may be called any number of times (one part each: write every N players and
    memory stays flat). All parts must share a schema. An exception inside the ``with`` block
    discards the new parts and leaves the previous partition untouched. A writer that wrote
    nothing at all removes the night's partition (the night has no rows for this table).
    On an object store the parts go straight into the night's folder under a new generation and
    the commit marker makes them the partition (see the module docstring).
    """

    def __init__(self, lake: Lake, table: str, snapshot_date: date, *, folder: AnyPath | None = None) -> None:
        self.lake = lake
        self.table = check_name("table", table)
        self.snapshot_date = snapshot_date
        #: The folder the parts replace: the night's partition, or (``folder``) another, e.g. a
        #: shard's own (:meth:`Lake.shard_writer`).
        self.target = folder if folder is not None else lake.partition_path(self.table, snapshot_date)
        self.rows = 0
        self.parts = 0
        self._schema: pa.Schema | None = None
        self._staged: AnyPath | None = None
        self._names: list[str] = []  # object store: this generation's parts
        self._generation = ""

    def __enter__(self) -> PartitionWriter:
        if self.lake.local:
            self._staged = self.lake._tmp_dir()
        else:
            self._staged = self.target
            self._generation = uuid.uuid4().hex[:12]
        return self

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        if self._staged is None:
            raise LakeError("PartitionWriter.write outside its with-block")
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
        if not self.lake.local:
            name = f"part-{self._generation}-{self.parts:05d}.parquet"
            sink = pa.BufferOutputStream()
            pq.write_table(data, sink, compression="zstd", write_statistics=True)
            (self._staged / name).write_bytes(sink.getvalue().to_pybytes())  # one PUT: whole or absent
            self._names.append(name)
            self.parts += 1
            self.rows += data.num_rows
            return
        assert isinstance(self._staged, Path)  # a local lake's staging folder
        path = self._staged / f"part-{self.parts:05d}.parquet"
        # A part is whole or absent: a write that fails half-way leaves no file to commit.
        partial = path.with_name(f".{path.name}.tmp")
        try:
            pq.write_table(data, partial, compression="zstd", write_statistics=True)
            if self.lake.fsync:  # its data on the disk before its name: a power loss leaves no empty part
                fsync_file(partial)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, path)
        self.parts += 1
        self.rows += data.num_rows

    def _drop_partition_column(self, data: pa.Table) -> pa.Table:
        column = data.column(PARTITION)
        if column.null_count or (data.num_rows and set(column.unique().to_pylist()) != {self.snapshot_date}):
            raise LakeError(f"{self.table}: rows of another snapshot_date than {self.snapshot_date} in this partition")
        return data.drop_columns([PARTITION])

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        staged, self._staged = self._staged, None
        assert staged is not None
        if isinstance(staged, StorePath):
            self._commit(staged, failed=exc_type is not None)
            return
        if exc_type is not None:
            shutil.rmtree(staged, ignore_errors=True)
            return
        target = self.target
        assert isinstance(target, Path)  # the local lake's partition folder
        try:
            if self.parts == 0:
                shutil.rmtree(staged, ignore_errors=True)
                if target.exists():
                    aside = self.lake.local_root / TMP_DIR / f"{uuid.uuid4().hex}.old"
                    os.replace(target, aside)
                    shutil.rmtree(aside, ignore_errors=True)
                return
            if self.lake.fsync:
                fsync_dir(staged)
            self.lake._swap_in(staged, target)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise

    def _commit(self, folder: StorePath, *, failed: bool) -> None:
        """Object store: the marker (one PUT) makes this generation the partition; then every
        other object of the folder (the replaced generation, a killed writer's) is deleted."""
        marker = folder / COMMIT_FILE
        if failed:
            for name in self._names:
                (folder / name).unlink(missing_ok=True)
            return
        if self.parts == 0:
            marker.unlink(missing_ok=True)  # the night is gone for readers from here on
            remove_tree(folder)
            return
        content = {
            "parts": self._names,
            "rows": self.rows,
            "generation": self._generation,
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        marker.write_bytes(orjson.dumps(content, option=orjson.OPT_INDENT_2))
        keep = {*self._names, COMMIT_FILE}
        for stale in folder.iterdir():
            if stale.name not in keep:
                remove_tree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)


def damaged_part(path: str | Path, night: date, exc: BaseException) -> LakeError:
    """The one-line error for a table part that cannot be read, with what to do about it."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    return LakeError(
        f"{path} is damaged ({why}): run `tourneylake rebuild --date {night}` to make that night's "
        "tables again from its raw answers (no search)"
    )


def read_commit(marker: AnyPath) -> list[str] | None:
    """The parts an object-store partition's commit marker lists (``None``: no partition)."""
    try:
        content = orjson.loads(marker.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as exc:
        raise LakeError(f"commit marker {marker} is damaged ({exc}): run `tourneylake rebuild` for that night") from None
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not all(isinstance(p, str) and p.startswith("part-") and "/" not in p for p in parts):
        raise LakeError(f"commit marker {marker} lists no parts: run `tourneylake rebuild` for that night")
    return parts


def committed_dates(folder: AnyPath) -> list[date]:
    """Object store: the nights of a table folder that have a commit marker."""
    out = []
    for marker in folder.glob(f"{PARTITION}=*/{COMMIT_FILE}"):
        with contextlib.suppress(ValueError):
            out.append(date.fromisoformat(marker.parent.name.split("=", 1)[1]))
    return sorted(out)


def partition_dates(folder: AnyPath) -> list[date]:
    if not folder.is_dir():
        return []
    out = []
    prefix = PARTITION + "="
    for p in folder.iterdir():
        if p.is_dir() and p.name.startswith(prefix):
            try:
                out.append(date.fromisoformat(p.name[len(prefix) :]))
            except ValueError:
                continue
    return sorted(out)
