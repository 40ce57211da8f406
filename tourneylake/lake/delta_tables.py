"""The lake's tables: Delta tables (delta-rs) partitioned by night, one commit per table per night
(or per shard of a night). Every commit is delta-rs's, with its conflict checks and, on S3, its
conditional PUTs; what the lake knows of a table's parts it asks delta-rs (the table's snapshot,
brought up to date incrementally).

A night, or a shard's parts of it, is written by the writers of
:mod:`~tourneylake.lake.table_writers`. The files no version of the last days names are deleted
by delta-rs's vacuum (:meth:`DeltaTables.expire`), with those a killed writer left when asked;
the nights held in several parts are rewritten as one by delta-rs's optimize
(:meth:`DeltaTables.compact`), on the nights :meth:`DeltaTables.upkeep` says.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.errors import LakeError, one_line
from tourneylake.lake.layout import PARTITION, SHARDS_DIR, check_name, night_folder
from tourneylake.lake.legacy import legacy_tables
from tourneylake.lake.raw import as_date
from tourneylake.lake.storage import AnyPath, StorePath, remove_tree
from tourneylake.lake.table_writers import NightWriter, ShardWriter, Tries, finish_together, part_shard

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["DeltaTables", "damaged_part"]

log = logging.getLogger(__name__)


def damaged_part(path: str | Path, night: date, exc: BaseException) -> LakeError:
    """The one-line error for a table part that cannot be read, with what to do about it: the
    part named once (its table and name) and the reader's first sentence about it."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    why = re.sub(r"^Could not open Parquet input source '[^']*':\s*", "", why).replace(f"'{path}'", "it")
    why = why.split(". ")[0].rstrip(".")[:60]
    folders = str(path).replace("\\", "/").split("/")
    part = f"{folders[-3]}/{folders[-1]}"  # its table and its name (the night is in the command)
    return LakeError(f"{part} is damaged ({why}): `tourneylake rebuild --date {night}` makes it again from raw (no search)")


#: delta-rs's client tries each request again itself for a blip (a second or two, as the lake's
#: own client: ``s3store.RETRY``); a longer outage is ridden out around it (``Tries``), which says so.
DELTA_RETRIES = {
    "max_retries": "3",
    "retry_timeout": "2s",
    "backoff_config.init_backoff": "50ms",
    "backoff_config.max_backoff": "1s",
    "backoff_config.base": "2",
}

#: The tables this process opened, each lent to one user at a time (:meth:`DeltaTables.opened`)
#: and brought up to date (delta-rs's incremental update) when lent again.
_IDLE: dict[str, list[DeltaTable]] = {}
_IDLE_LOCK = threading.Lock()


class DeltaTables:
    """The Delta tables of the lake under ``root`` (a local folder or an object store's prefix)."""

    def __init__(self, root: AnyPath) -> None:
        self.root = root

    # ------------------------------------------------------------------ where a table is
    def folder(self, table: str) -> AnyPath:
        return self.root / check_name("table", table)

    def uri(self, table: str) -> str:
        """Where the table is, as delta-rs (or any engine) opens it: a local path, or the store's URL."""
        folder = self.folder(table)
        if isinstance(folder, StorePath):
            protocol = folder.fs.protocol if isinstance(folder.fs.protocol, str) else folder.fs.protocol[0]
            if protocol not in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"):
                raise LakeError(
                    f"the lake's tables are Delta tables, which need a store delta-rs opens (a local folder, s3://, "
                    f"gs://, az://); {protocol}:// is not one"
                )
        return str(folder)

    def night_folder(self, table: str, night: date | str) -> AnyPath:
        """The folder of a night's parts (it may also hold parts no version names any more, until
        they are expired)."""
        return self.folder(table) / night_folder(night)

    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for the lake's store, from the store's usual environment (delta-rs reads
        the credentials themselves from it: ``AWS_ACCESS_KEY_ID``, a profile, a role…), with its
        client's own tries of each request (:data:`DELTA_RETRIES`)."""
        if isinstance(self.root, Path):
            return {}
        from tourneylake.lake.s3store import s3_options  # the lake's own S3 client is given the same

        return {**s3_options(), **DELTA_RETRIES}

    @contextlib.contextmanager
    def opened(self, table: str) -> Iterator[DeltaTable | None]:
        """The table at its latest version, for the block (``None``: no such table yet)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.uri(table)
        with _IDLE_LOCK:
            idle = _IDLE.get(uri)
            delta = idle.pop() if idle else None
        tries = Tries(f"cannot read the table {uri}")
        while True:
            try:
                if delta is not None:
                    delta.update_incremental()
                else:
                    delta = DeltaTable(uri, storage_options=self.storage_options())
                break
            except TableNotFoundError:
                delta = None
                break
            except Exception as exc:  # noqa: BLE001 - a store's failure (a lost answer, a 5xx): tried again, then one line
                delta = None
                tries.failed(exc)
        tries.done()
        yield delta
        if delta is not None:  # not after a failure inside the block: the next user opens it anew
            with _IDLE_LOCK:
                _IDLE.setdefault(uri, []).append(delta)

    def folders(self) -> list[str]:
        """The lake's folders that may hold a table (one listing): its Delta tables, and any
        table of the first layout."""
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        except FileNotFoundError:
            return []

    def names(self) -> list[str]:
        """The lake's Delta tables."""
        from deltalake import DeltaTable

        options, folders = self.storage_options(), self.folders()
        with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-tables") as pool:  # a round trip or two each
            found = list(pool.map(lambda name: DeltaTable.is_deltatable(self.uri(name), options), folders))
        return [name for name, is_table in zip(folders, found, strict=True) if is_table]

    def legacy(self) -> list[str]:
        """The tables of the lake's first layout (see :mod:`~tourneylake.lake.legacy`)."""
        return legacy_tables(self.root)

    # ------------------------------------------------------------------ what a table holds
    def nights(self, table: str) -> list[date]:
        """The nights the table's current version holds parts of."""
        with self.opened(table) as delta:
            found = [] if delta is None else delta.partitions()
        return sorted({date.fromisoformat(values[PARTITION]) for values in found})

    def parts(self, table: str, night: date | str | None = None) -> dict[date, list[tuple[str, int | None]]]:
        """The table's parts in its current version by night (one night's only, with ``night``),
        each as its full path or URL with its rows (``None`` when its commit did not say), sorted."""
        wanted = None if night is None else as_date(night)
        with self.opened(table) as delta:
            if delta is None:
                return {}
            actions = pa.table(delta.get_add_actions(flatten=True))
        columns = actions.select(["path", f"partition.{PARTITION}", "num_records"]).columns
        out: dict[date, list[tuple[str, int | None]]] = {}
        for path, part_night, rows in zip(*(column.to_pylist() for column in columns), strict=True):
            if wanted is None or part_night == wanted:
                out.setdefault(part_night, []).append((self._file(table, path), rows))
        return {part_night: sorted(parts) for part_night, parts in sorted(out.items())}

    def files(self, table: str, night: date | str) -> list[str]:
        """The night's parts of ``table`` in its current version (full URLs on an object store),
        never a part being written or one a later commit replaced."""
        return [path for parts in self.parts(table, night).values() for path, _ in parts]

    def shard_parts(self, table: str, night: date | str) -> dict[str | None, list[tuple[str, int | None]]]:
        """The night's parts of ``table`` (as :meth:`parts`) by the shard that committed each;
        ``None``: parts of the night written whole."""
        out: dict[str | None, list[tuple[str, int | None]]] = {}
        for parts in self.parts(table, night).values():
            for path, rows in parts:
                out.setdefault(part_shard(path), []).append((path, rows))
        return out

    def _file(self, table: str, path: str) -> str:
        """A part's full path or URL from its path in the Delta log (relative, URL-encoded)."""
        if "://" in path or path.startswith("/"):
            return path
        return f"{self.uri(table).rstrip('/')}/{unquote(path)}"

    # ------------------------------------------------------------------ reading
    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem of tables on an object store (``None`` on a local disk)."""
        return self.root.fs if isinstance(self.root, StorePath) else None

    def _fs_path(self, file: str) -> str:
        """A part's path as pyarrow wants it with :attr:`filesystem` (no protocol)."""
        return str(self.filesystem._strip_protocol(file)) if self.filesystem is not None else file

    def read(self, table: str, night: date | str, columns: list[str] | None = None) -> pa.Table:
        """One night of ``table`` (without ``snapshot_date``). A part that cannot be read is a
        :class:`LakeError` naming the file and the rebuild that makes it again."""
        return self.read_parts(as_date(night), self.files(table, night), columns)

    def read_parts(self, night: date, files: list[str], columns: list[str] | None = None) -> pa.Table:
        """A night's parts (as :meth:`parts` names them), read into one table. On an object store
        each part is fetched whole, all side by side (one GET each: pyarrow's reads through
        fsspec ask each file's size twice, then its ranges)."""
        fetched: dict[str, bytes] = {}
        if isinstance(self.root, StorePath) and files:
            paths = {StorePath(self.root.fs, self._fs_path(path)): path for path in files}
            fetched = {paths[found]: data for found, data in self.root.cat_many(list(paths)).items()}
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
                raise damaged_part(path, night, exc) from None
        return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})

    def read_table(self, table: str, night: date | str | None = None) -> pa.Table:
        """A table (one night or all) with ``snapshot_date``: for tests and notebooks."""
        import pyarrow.dataset as ds

        out = []
        for part_night, parts in self.parts(table, night).items():
            files = [path for path, _ in parts]
            try:
                t = ds.dataset([self._fs_path(f) for f in files], format="parquet", filesystem=self.filesystem).to_table()
            except (pa.ArrowException, OSError) as exc:
                raise damaged_part(files[0], part_night, exc) from None
            out.append(t.append_column(PARTITION, pa.array([part_night] * t.num_rows, pa.date32())))
        return pa.concat_tables(out, promote_options="default") if out else pa.table({})

    # ------------------------------------------------------------------ writing
    def writer(self, table: str, night: date | str, *, shard: str | None = None) -> NightWriter | ShardWriter:
        """The writer of one night of ``table``: the night whole, or with ``shard`` that shard's
        parts of it (see :class:`ShardWriter`)."""
        if shard is None:
            return NightWriter(self, table, as_date(night))
        return self.shard_writer(table, night, shard=shard)

    def shard_writer(
        self, table: str, night: date | str, *, shard: str | None = None, keep_shards: Iterable[str] | None = None
    ) -> ShardWriter:
        """The writer of ``shard``'s parts of one night of ``table``, or (``keep_shards``) of the
        night made of those shards' parts (see :class:`ShardWriter`)."""
        return ShardWriter(self, table, as_date(night), shard=shard, keep_shards=keep_shards)

    def write(self, table: str, night: date | str, data: pa.Table, *, shard: str | None = None) -> int:
        """Replace one night of ``table`` (or one shard's part of it) with ``data``, in one
        commit; returns rows written."""
        with self.writer(table, night, shard=shard) as writer:
            writer.write(data)
        return writer.rows

    def write_night(self, night: date | str, tables: Mapping[str, pa.Table], *, last: str | None = None) -> dict[str, int]:
        """Replace one night of several tables, a commit each, side by side; ``last``, when given,
        is committed once the others are (a table whose night says the others' are there).
        Returns rows written per table."""
        writers = {name: self.writer(name, night).__enter__() for name in tables}
        try:
            for name, writer in writers.items():
                writer.write(tables[name])
        except BaseException as exc:
            finish_together(list(writers.values()), type(exc))
            raise
        try:
            finish_together([writer for name, writer in writers.items() if name != last])
        except BaseException as exc:
            finish_together([writers[last]] if last in writers else [], type(exc))
            raise
        if last in writers:
            finish_together([writers[last]])
        return {name: writer.rows for name, writer in writers.items()}

    def drop(self, table: str, night: date | str) -> None:
        """Remove one night of ``table`` (a writer that writes nothing does exactly that)."""
        with self.writer(table, night):
            pass

    def shard_mark(self, night: date | str, shard: str) -> AnyPath:
        """The document saying a shard's parts of the night are in (see :data:`SHARDS_DIR`)."""
        return self.root / SHARDS_DIR / night_folder(night) / f"{check_name('shard', shard)}.json"

    def drop_shard_marks(self, night: date | str) -> None:
        """Forget which shards' parts of a night are in (the night was written whole since)."""
        folder = self.root / SHARDS_DIR / night_folder(night)
        if folder.is_dir():
            remove_tree(folder)

    # ------------------------------------------------------------------ upkeep
    def upkeep(self, night: date, keep_days: float, compact_every: int) -> dict[str, int]:
        """A night's upkeep of every table: on every ``compact_every``-th night (by date; 0:
        never) the earlier nights held in several parts rewritten as one each (:meth:`compact`);
        then the files no version of the last ``keep_days`` days needs deleted (:meth:`expire`).
        Returns the parts compacted and the files expired."""
        due = compact_every > 0 and night.toordinal() % compact_every == 0
        compacted = self.compact(before=night) if due else 0
        return {"compacted": compacted, "expired": self.expire(keep_days)}

    def compact(self, before: date) -> int:
        """Each table's nights before ``before`` held in several parts (a lake written before
        a night's table was one part, or a night's parts added since) rewritten as one part each
        by delta-rs's optimize, one commit a table (none where every night is one part); the
        parts replaced are left to :meth:`expire`, so a reader of an older version still finds
        them. A night of shards keeps its shards' parts: the night's join reads them by their
        names. Returns how many parts were replaced."""
        from deltalake import WriterProperties

        def compact(table: str) -> int:
            nights = [
                night.isoformat()
                for night, parts in self.parts(table).items()
                if night < before and len(parts) > 1 and all(part_shard(path) is None for path, _ in parts)
            ]
            if not nights:
                return 0
            with self.opened(table) as delta:
                if delta is None:
                    return 0
                try:
                    done = delta.optimize.compact(
                        partition_filters=[(PARTITION, "in", nights)], writer_properties=WriterProperties(compression="ZSTD")
                    )
                except Exception as exc:  # noqa: BLE001 - the next due night tries again; the parts stay as they are
                    log.warning("%s: nights could not be compacted (%s)", table, one_line(exc))
                    return 0
            return int(done.get("numFilesRemoved", 0))

        with ThreadPoolExecutor(4, thread_name_prefix="tourneylake-compact") as pool:
            replaced = sum(pool.map(compact, self.folders()))
        if replaced:
            log.info("compacted %d part(s) of nights held in several", replaced)
        return replaced

    def expire(self, keep_days: float, *, strays: bool = False) -> int:
        """Delete the files no version of the last ``keep_days`` days needs, in every table
        (delta-rs's vacuum: the parts of replaced nights); returns how many. ``strays``: also the
        files no version ever named (a killed writer's), which takes a listing of every table's
        folder (a rebuild does it; a night does not)."""
        hours = max(0, round(keep_days * 24))

        def expire(table: str) -> int:
            with self.opened(table) as delta:
                if delta is None:
                    return 0
                try:
                    return len(delta.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False, full=strays))
                except Exception as exc:  # noqa: BLE001 - the next night's upkeep tries again
                    log.warning("%s: old versions could not be expired (%s)", table, one_line(exc))
                    return 0

        with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-expire") as pool:  # each table waits on its own round trips
            removed = sum(pool.map(expire, self.folders()))
        if removed:
            log.info("expired %d file(s) no version of the last %g day(s) needs", removed, keep_days)
        return removed
