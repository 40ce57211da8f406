"""The DuckDB warehouse (``<data_dir>/warehouse.duckdb``), loaded night by night from the lake.

All SQL lives in ``sql/``: ``schema.sql`` (DDL), ``views.sql``, ``load/<table>.sql`` (the
statements that load one night of one table, named with ``-- name: ...`` markers),
``queries.sql`` and ``checks/<name>.sql``. Statements are read from those files into a fixed
dictionary and run with bound parameters (``$files``, ``$snapshot_date``); no SQL is ever built
from strings here, and a table name only selects one of those prepared statements.

Loading (:meth:`Warehouse.load_night`) reads each table's Parquet parts for the night with
``read_parquet(..., hive_partitioning = true)`` straight into the target, inside one
transaction, so a failure leaves the warehouse as it was:

* snapshot tables (player_*, search_ledger): the night's rows are deleted, then inserted;
* reference tables (currencies, networks, ...): replaced by the latest snapshot; an older night
  never replaces a newer one;
* ``tournaments`` / ``tournament_entries``: ``MERGE`` on (network, tournament_id[, player]);
  the latest snapshot wins, across nights.

Loading the same night twice leaves every table identical.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

import duckdb
import pyarrow as pa

from tourneylake.normalize.schemas import TABLES
from tourneylake.normalize.summary import SUMMARY_TABLES

__all__ = ["LOAD_ORDER", "Warehouse", "sql_dir"]

# Reference data first (views and checks read them), then facts.
LOAD_ORDER: tuple[str, ...] = (
    "currencies",
    "networks",
    "regions",
    "filter_constraints",
    "filter_options",
    "statistic_definitions",
    "dataset_definitions",
    "countries",
    "news",
    *SUMMARY_TABLES,
    "search_ledger",
)
assert set(LOAD_ORDER) == set(TABLES), "every lake table has a load statement"

_NAME_MARK = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def sql_dir() -> Path:
    """``sql/`` at the repository root (override with ``TOURNEYLAKE_SQL_DIR``)."""
    override = os.environ.get("TOURNEYLAKE_SQL_DIR")
    return Path(override) if override else Path(__file__).resolve().parent.parent / "sql"


def _named(text: str) -> dict[str, str]:
    """``-- name: x`` sections of a SQL file → {x: statement}."""
    marks = list(_NAME_MARK.finditer(text))
    out = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[mark.group(1)] = text[mark.end() : end].strip()
    return out


@cache
def _statements(root: str) -> dict[str, Any]:
    folder = Path(root)
    return {
        "schema": (folder / "schema.sql").read_text(),
        "views": (folder / "views.sql").read_text(),
        "load": {t: _named((folder / "load" / f"{t}.sql").read_text()) for t in LOAD_ORDER},
        "queries": _named((folder / "queries.sql").read_text()),
        "checks": {p.stem: p.read_text() for p in sorted((folder / "checks").glob("*.sql"))} if (folder / "checks").is_dir() else {},
    }


class Warehouse:
    """One DuckDB file. Opening it read-write applies the schema and views (idempotent)."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only = read_only
        self.connection = duckdb.connect(str(self.path), read_only=read_only)
        self.connection.execute("SET TimeZone = 'UTC'")
        self._sql = _statements(str(sql_dir()))
        if not read_only:
            self.apply_schema()

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    # ------------------------------------------------------------------ schema
    def apply_schema(self) -> None:
        """Create missing tables and (re)create the views."""
        self.connection.execute(self._sql["schema"])
        self.connection.execute(self._sql["views"])

    # ------------------------------------------------------------------ loading
    def load_night(self, lake: Any, snapshot_date: date | str, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Load one night of every table (or of ``tables``) from ``lake``; returns rows read
        from the lake per table. One transaction: all or nothing."""
        day = snapshot_date if isinstance(snapshot_date, date) else date.fromisoformat(snapshot_date)
        wanted = [t for t in LOAD_ORDER if tables is None or t in tables]
        unknown = set(tables or ()) - set(LOAD_ORDER)
        if unknown:
            raise ValueError(f"no such warehouse tables: {sorted(unknown)}")
        con = self.connection
        loaded: dict[str, int] = {}
        con.execute("BEGIN TRANSACTION")
        try:
            for table in wanted:
                files = lake.partition_files(table, day)
                loaded[table] = self._load_table(table, day, files)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return loaded

    def _load_table(self, table: str, day: date, files: list[str]) -> int:
        con = self.connection
        statements = self._sql["load"][table]
        kind = TABLES[table].load
        params = {"files": files}
        if kind == "snapshot":
            con.execute(statements["delete"], {"snapshot_date": day})
            if not files:
                return 0
            return _rows(con.execute(statements["insert"], params))
        if not files:
            return 0  # no snapshot of this reference table tonight: keep the one in force
        if kind == "reference":
            (latest,) = con.execute(statements["is_latest"], {"snapshot_date": day}).fetchone()
            if not latest:
                return 0  # an older night never replaces a newer reference snapshot
            con.execute(statements["delete"])
            return _rows(con.execute(statements["insert"], params))
        # dedup: MERGE on the key, the latest snapshot wins
        return _rows(con.execute(statements["merge"], {"files": files}))

    # ------------------------------------------------------------------ reading
    def table_counts(self) -> dict[str, int]:
        rows = self.connection.execute(self._sql["queries"]["table_counts"]).fetchall()
        return {name: count for name, count in rows}

    def check(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        """Run ``sql/checks/<name>.sql``; its first value (violations, by convention)."""
        try:
            statement = self._sql["checks"][name]
        except KeyError:
            raise ValueError(f"no such check: {name!r} (sql/checks/*.sql)") from None
        row = self.connection.execute(statement, dict(params) if params else None).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def query(
        self,
        sql: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        output: Literal["arrow", "pandas"] = "arrow",
    ) -> pa.Table | Any:
        """Run a query with bound parameters; an Arrow table (or a pandas frame)."""
        relation = self.connection.sql(sql, params=params)
        if relation is None:  # a statement without a result
            return None
        return relation.df() if output == "pandas" else relation.to_arrow_table()


def _rows(result: duckdb.DuckDBPyConnection) -> int:
    row = result.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
