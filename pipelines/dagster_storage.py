"""Dagster's SQLite event log, with one open connection per database file.

Dagster's ``SqliteEventLogStorage`` builds a SQLAlchemy engine and opens a new SQLite connection
for every event it stores (``NullPool``), and a night's run stores every step, output,
materialisation and check as an event. This subclass keeps one engine and one connection per database file per
process, used only under the storage's own lock (as Dagster's connections are), in the WAL
mode Dagster sets, with ``synchronous=NORMAL``, SQLite's recommended setting for WAL: a crashed
process loses nothing, a power cut may lose the run history's last events (never anything of
the lake's, which has its own durability).

``dagster_home/dagster.yaml`` names it as the instance's ``event_log_storage``; the UI, the
daemon and every run process read and write the same files as with the default storage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster import DagsterInvariantViolationError, Field, StringSource
from dagster import __version__ as dagster_version
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

__all__ = ["OpenSqliteEventLogStorage"]

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
        base_dir = config_value.get("base_dir")
        if not base_dir:
            home = os.environ.get("DAGSTER_HOME")
            if not home:
                raise DagsterInvariantViolationError(
                    "OpenSqliteEventLogStorage: set DAGSTER_HOME (the instance's folder) or the storage's `base_dir`"
                )
            base_dir = os.path.join(home, "history", "runs")
        return cls(base_dir, inst_data=inst_data)

    def _engine(self, shard: str) -> Engine:
        if self._engines_pid != os.getpid():  # a forked child never shares its parent's connections
            self._engines, self._engines_pid = OrderedDict(), os.getpid()
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
                self._engines.popitem(last=False)[1].dispose()
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
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def wipe(self) -> None:
        self._close_engines()  # the run databases are deleted: none of their connections may be reused
        super().wipe()

    def dispose(self) -> None:
        self._close_engines()
        super().dispose()

    def _close_engines(self) -> None:
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()
