"""Dagster's SQLite storages and local compute logs, without the costs they pay for nothing.

Dagster's ``SqliteEventLogStorage`` builds a SQLAlchemy engine and opens a new SQLite connection
for every event it stores (``NullPool``), and a night's run stores every step, output,
materialisation and check as an event. This subclass keeps one engine and one connection per database file per
process, used only under the storage's own lock (as Dagster's connections are), in the WAL
mode Dagster sets, with ``synchronous=NORMAL``, SQLite's recommended setting for WAL: a crashed
process loses nothing, a power cut may lose the run history's last events (never anything of
the lake's, which has its own durability).

``dagster_home/dagster.yaml`` names it as the instance's ``event_log_storage``; the UI, the
daemon and every run process read and write the same files as with the default storage.

Beside it, for an instance that names them (``run_storage``, ``schedule_storage``,
``compute_logs``), each on the same files as Dagster's default: the run and schedule storages
open a stamped database by reading its stamp (Dagster loads every migration script to learn the
newest revision, then only asks whether the database has one) and keep their engine (Dagster
makes an engine, and compiles its statements anew, for every connection); the compute log
manager mirrors a run's output to the terminal from a thread instead of a ``tail -F`` process
and a Python watcher process for each of stdout and stderr.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from dagster import DagsterInvariantViolationError, Field, Float, StringSource
from dagster import __version__ as dagster_version
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import create_db_conn_string
from dagster._utils import ensure_file, mkdir_p, touch_file
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool, StaticPool

__all__ = [
    "OpenSqliteEventLogStorage",
    "StampedSqliteRunStorage",
    "StampedSqliteScheduleStorage",
    "ThreadMirroredComputeLogManager",
]

# Dagster's own wait for a locked database (seconds).
_BUSY_TIMEOUT_S = 15
# Open databases kept per process: the index and the runs being written or read (a webserver
# paging through old runs closes the least recently used).
_OPEN_SHARDS = 8


class OpenSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` whose connections stay open (see the module docstring).
    ``base_dir`` defaults to ``$DAGSTER_HOME/history/runs``, where Dagster keeps it."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._connections: dict[str, Connection] = {}  # each engine's one connection, kept checked out
        self._engines_pid = os.getpid()
        # Schema facts seen true: Dagster asks them again for every event it stores (a new
        # engine and connection each, or the table's columns), and a migration only adds.
        self._tables_seen: set[str] = set()
        self._columns_seen: set[str] = set()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> OpenSqliteEventLogStorage:
        return cls(_base_dir(cls, config_value, "history", "runs"), inst_data=inst_data)

    def _engine(self, shard: str) -> Engine:
        if self._engines_pid != os.getpid():  # a forked child never shares its parent's connections
            self._engines, self._connections, self._engines_pid = OrderedDict(), {}, os.getpid()
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
        else:
            new_run = shard != INDEX_SHARD_NAME and not os.path.exists(self.path_for_shard(shard))
            if new_run and self._copy_template(shard):
                self._initialized_dbs.add(shard)
            engine = create_engine(
                self.conn_string_for_shard(shard),
                poolclass=StaticPool,
                # one connection, used by one thread at a time: under `_db_lock`
                connect_args={"timeout": _BUSY_TIMEOUT_S, "check_same_thread": False},
            )
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
                if new_run:
                    self._keep_template(shard)
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
            self._engines[shard] = engine
            if len(self._engines) > _OPEN_SHARDS:
                oldest, closing = self._engines.popitem(last=False)
                kept = self._connections.pop(oldest, None)
                if kept is not None:
                    kept.close()
                closing.dispose()
        return engine

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """Dagster's, once the database is known to be stamped. Dagster creates the schema of a
        database its migrations have not stamped, and checks nothing else: a stamped one needs
        no more than reading its stamp, not the revision of every migration script (which
        Dagster loads, file by file, to learn the newest)."""
        with contextlib.suppress(sqlite3.Error, SQLAlchemyError), engine.connect() as conn:
            if conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar():
                return
        super()._initdb(engine, for_index_shard=for_index_shard)

    def has_table(self, table_name: str) -> bool:
        if table_name in self._tables_seen:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables_seen.add(table_name)
        return found

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        if column_name in self._columns_seen:
            return True
        found: bool = super()._has_asset_key_col_on_connection(conn, column_name)
        if found:
            self._columns_seen.add(column_name)
        return found

    def _template(self) -> str:
        # Named for the Dagster version (its schema); no `.db`: Dagster's listings never see it.
        return os.path.join(self._base_dir, f".run-shard-{dagster_version}.sqlite")

    def _copy_template(self, shard: str) -> bool:
        """A new run's database as a copy of the empty one kept by :meth:`_keep_template`
        (schema made, migration stamped): creating it table by table took ~0.1-0.3 s of every
        run. Whether the copy became the run's database (never over one that appeared meanwhile)."""
        template = self._template()
        if not os.path.exists(template):
            return False
        target = self.path_for_shard(shard)
        staged = f"{target}.{uuid.uuid4().hex}.tmp"
        try:
            shutil.copyfile(template, staged)
            os.link(staged, target)
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(staged)
        return True

    def _keep_template(self, shard: str) -> None:
        """Keep a copy of a run's database just made, before its first event (SQLite's backup:
        consistent whatever its write-ahead log holds), for the next runs to copy."""
        template = self._template()
        if os.path.exists(template):
            return
        staged = f"{template}.{uuid.uuid4().hex}.tmp"
        try:
            with contextlib.closing(sqlite3.connect(self.path_for_shard(shard))) as source:
                with contextlib.closing(sqlite3.connect(staged)) as copy:
                    source.backup(copy)
            os.replace(staged, template)
        except (OSError, sqlite3.Error):
            with contextlib.suppress(OSError):
                os.unlink(staged)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            conn = self._connections.get(shard)
            if conn is None or conn.engine is not engine:
                conn = self._connections[shard] = engine.connect()
            with conn.begin():
                yield conn

    def wipe(self) -> None:
        self._close_engines()  # the run databases are deleted: none of their connections may be reused
        super().wipe()

    def dispose(self) -> None:
        self._close_engines()
        super().dispose()

    def _close_engines(self) -> None:
        with self._db_lock:
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()


def _base_dir(cls: type, config_value: Any, *under_home: str) -> str:
    """The storage's ``base_dir``, by default where Dagster keeps it in ``$DAGSTER_HOME``."""
    base_dir = config_value.get("base_dir")
    if base_dir:
        return str(base_dir)
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise DagsterInvariantViolationError(f"{cls.__name__}: set DAGSTER_HOME (the instance's folder) or its `base_dir`")
    return os.path.join(home, *under_home)


def _stamped(path: str, *tables: str) -> bool:
    """Whether the SQLite database at ``path`` carries a schema revision (Dagster's migrations
    stamped it) and holds ``tables``."""
    if not os.path.isfile(path):
        return False
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S)) as db:
            if not db.execute("SELECT version_num FROM alembic_version").fetchone():
                return False
            names = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return False
    return set(tables) <= names


class _OpenedByStamp:
    """What the stamped run and schedule storages share: a stamped database in ``FOLDER``
    (``$DAGSTER_HOME/<FOLDER>`` by default, where Dagster keeps it), named ``DATABASE`` and
    holding ``TABLES``, opened by its stamp, and one engine kept (see the module docstring)."""

    FOLDER: str
    DATABASE: str
    TABLES: tuple[str, ...]

    def __init__(self, conn_string: str, inst_data: Any = None) -> None:
        # NullPool: a connection per use, as Dagster's, so threads and forked children share nothing.
        self._kept_engine = create_engine(conn_string, poolclass=NullPool)
        super().__init__(conn_string, inst_data)  # type: ignore[call-arg]

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> Any:
        return cls.from_local(_base_dir(cls, config_value, cls.FOLDER), inst_data=inst_data)

    @classmethod
    def from_local(cls, base_dir: str, inst_data: Any = None) -> Any:
        mkdir_p(base_dir)
        if _stamped(os.path.join(base_dir, f"{cls.DATABASE}.db"), *cls.TABLES):  # all Dagster's would do
            return cls(create_db_conn_string(base_dir, cls.DATABASE), inst_data)
        return super().from_local(base_dir, inst_data=inst_data)  # type: ignore[misc]

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._kept_engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        self._kept_engine.dispose()
        super().dispose()  # type: ignore[misc]


class StampedSqliteRunStorage(_OpenedByStamp, SqliteRunStorage):
    """``SqliteRunStorage`` opening a stamped database by its stamp, its engine kept."""

    FOLDER, DATABASE, TABLES = "history", "runs", ("runs", "instance_info")


class StampedSqliteScheduleStorage(_OpenedByStamp, SqliteScheduleStorage):
    """``SqliteScheduleStorage`` opening a stamped database by its stamp, its engine kept."""

    FOLDER, DATABASE, TABLES = "schedules", "schedules", ("jobs", "job_ticks")


class ThreadMirroredComputeLogManager(LocalComputeLogManager):
    """``LocalComputeLogManager`` (the same files, read by the UI the same way) whose capture
    shows the output on the terminal from a thread of the process (see the module docstring).
    ``base_dir`` defaults to ``$DAGSTER_HOME/storage``, where Dagster keeps it."""

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"base_dir": Field(StringSource, is_required=False), "polling_timeout": Field(Float, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> ThreadMirroredComputeLogManager:
        polling = config_value.get("polling_timeout")
        return cls(_base_dir(cls, config_value, "storage"), polling_timeout=polling, inst_data=inst_data)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        if os.name == "nt":  # Dagster's own way there
            with super().capture_logs(log_key) as context:
                yield context
            return
        out = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        with _mirrored(sys.stdout, out), _mirrored(sys.stderr, err):
            yield CapturedLogContext(log_key)
        touch_file(self.complete_artifact_path(log_key))  # the capture is complete (Dagster's mark)


# How often the mirror looks for more output (seconds): `tail -F` looks once a second.
_MIRROR_POLL_S = 0.05


@contextmanager
def _mirrored(stream: IO[str], path: str) -> Iterator[None]:
    """``stream``'s file descriptor written to the file at ``path`` for the block (Dagster's
    redirection: the process's own writes and its children's), and what lands there copied to
    where the stream wrote before, as it comes, by a thread; drained when the block ends."""
    ensure_file(path)
    try:
        terminal = os.dup(stream.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor (a test's captured stream): Dagster's redirection
        with redirect_to_file(stream, path):
            yield
        return
    done = threading.Event()
    copier = threading.Thread(target=_copy_out, args=(path, terminal, done), name="tourneylake-compute-log", daemon=True)
    copier.start()
    try:
        with redirect_to_file(stream, path):
            yield
    finally:
        done.set()
        copier.join()
        os.close(terminal)


def _copy_out(path: str, terminal: int, done: threading.Event) -> None:
    """Copy the file at ``path`` to ``terminal`` from its start, following it until ``done`` is
    set, then to its end. A terminal gone (a closed pipe) ends the copying, not the capture."""
    with open(path, "rb") as source:
        while True:
            ending = done.is_set()
            chunk = source.read(1 << 16)
            if chunk:
                try:
                    _write_all(terminal, chunk)
                except OSError:
                    return
                continue
            if ending:
                return
            done.wait(_MIRROR_POLL_S)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
