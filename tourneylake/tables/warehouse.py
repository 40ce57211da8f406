"""The DuckDB warehouse (``<data_dir>/warehouse.duckdb``), loaded night by night from the lake.

Each table's DDL and idempotent load are rendered from the catalogue (``tourneylake/schemas.py``)
and the templates of ``sql/tables.sql`` (only the catalogue's identifiers are substituted,
checked and quoted; every value is a bound parameter); the views over the tables are the dbt
models of ``sql/``. :meth:`Warehouse.load_night` reads each table's parts for the night, as its
Delta table's current version names them, with ``read_parquet`` straight into the target, in
one transaction, and only what changed (the parts each night was loaded from are kept in
``tourneylake_meta.lake_loads``). Snapshot tables: the night's rows replaced; the ledger: every
night whose parts changed replaced; reference tables: the latest snapshot; deduplicated tables
(``tournaments``, ``tournament_entries``): the rows a night lists again replaced and the keys not held inserted: the latest night wins (a night's
rows of one key: one chosen by content, as the lake does: :func:`one_row_per_key`). Loading a
night twice leaves every table identical; an older file gains the catalogue's new columns. A
lake on an object store is read through its fsspec filesystem registered with DuckDB.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import string
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

import duckdb
import pyarrow as pa

from tourneylake.errors import TourneylakeError
from tourneylake.lake.delta_tables import damaged_part
from tourneylake.lake.lake import Lake
from tourneylake.lake.storage import StorePath
from tourneylake.packaged import packaged
from tourneylake.schemas import TABLES, TableSpec, duckdb_type
from tourneylake.tables.normalize.summary import SUMMARY_TABLES

__all__ = ["LOAD_ORDER", "Warehouse", "WarehouseError", "one_row_per_key", "rows_not_kept", "sql_dir", "table_ddl"]

# Reference data first (the models read them), then facts.
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
    "coverage_changes",
    "search_ledger",
)
assert set(LOAD_ORDER) == set(TABLES), "every lake table is loaded"

log = logging.getLogger(__name__)

_NAME_MARK = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


class WarehouseError(TourneylakeError):
    """The warehouse file cannot be opened or loaded; the message says which and what to do."""


class _Template(string.Template):
    delimiter = "@"  # "$" is DuckDB's parameter marker


def sql_dir() -> Path:
    """The package's ``sql/`` (the tables' DDL, the dbt project, the example queries)."""
    return packaged("sql")


def _named(text: str) -> dict[str, str]:
    """``-- name: x`` sections of a SQL file → {x: statement}."""
    marks = list(_NAME_MARK.finditer(text))
    out = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[mark.group(1)] = text[mark.end() : end].strip()
    return out


def _quote(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise WarehouseError(f"{name!r} is not a catalogue identifier")
    return f'"{name}"'


@cache
def _templates() -> dict[str, _Template]:
    return {name: _Template(text) for name, text in _named((sql_dir() / "tables.sql").read_text()).items()}


def _render(template: str, spec: TableSpec, **extra: str) -> str:
    key = [_quote(column) for column in spec.key]
    return _templates()[template].substitute(
        table=_quote(spec.name),
        key=", ".join(key),
        key_match=" AND ".join(f"t.{k} = s.{k}" for k in key),
        **extra,
    )


def _column_ddl(name: str, dtype: pa.DataType) -> str:
    return f"{_quote(name)} {duckdb_type(dtype)}" + (" NOT NULL" if name == "snapshot_date" else "")


def table_ddl(spec: TableSpec) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of one catalogue table."""
    columns = ",\n".join(f"    {_column_ddl(name, dtype)}" for name, dtype, _ in spec.columns)
    return _render("create", spec, columns=columns)


@cache
def _damaged_lake_part(table: str, night: date, exc: duckdb.Error) -> Exception:
    """DuckDB's error about a part it cannot read, as the lake words it (file, then what to do)."""
    text = str(exc).split("\nLINE ")[0]
    named = re.search(r"'([^']+\.parquet)'", text)
    why = text.replace(f" '{named.group(1)}'", "") if named else text
    return damaged_part(
        named.group(1) if named else f"a part of {table}", night, RuntimeError(why.removeprefix("Invalid Input Error: "))
    )


#: How a night's rows of one key are ranked (see ``night_one_per_key`` in ``sql/tables.sql``):
#: the latest listing first, when the parts have the column (parts of an older version do not).
RANK_BY_LISTING = "s.listed_at DESC NULLS LAST,"


def _loads(table: str, rank: str = RANK_BY_LISTING) -> dict[str, str]:
    """The statements of ``table``'s load, by their role in ``Warehouse._load_table``."""
    spec = TABLES[table]
    templates = {
        "whole": {"delete": "snapshot_delete", "insert": "insert"},
        "snapshot": {"delete": "snapshot_delete", "insert": "insert"},
        "reference": {"is_latest": "reference_is_latest", "delete": "delete_all", "insert": "insert"},
        "dedup": {
            "repeated_keys": "dedup_repeated_keys",
            "is_empty": "dedup_is_empty",
            "insert": "insert",
            "replace": "dedup_replace",
            "insert_new": "dedup_insert_new",
            "insert_new_first": "dedup_insert_new_first",
        },
    }
    return {role: _render(template, spec, rank=rank) for role, template in templates[spec.load].items()}


def parts_rank(con: duckdb.DuckDBPyConnection, files: list[str]) -> str:
    """The rank of ``night_one_per_key`` for these parts: by listing when they have ``listed_at``."""
    described = con.execute("DESCRIBE SELECT * FROM read_parquet($files, union_by_name = true)", {"files": files}).fetchall()
    return RANK_BY_LISTING if any(row[0] == "listed_at" for row in described) else ""


@contextlib.contextmanager
def _repeating_parts(
    lake: Lake, spec: TableSpec, files: list[str]
) -> Iterator[tuple[duckdb.DuckDBPyConnection, str, list[str], dict[str, str]] | None]:
    """A connection reading a night's ``files`` of a deduplicated table, the rank of their rows
    (``parts_rank``) and the files as it reads them (fetched whole from an object store, with
    each one's URL: see :func:`_fetched`); ``None`` when they hold each key once (or there are none)."""
    if not files:
        yield None
        return
    with _fetched(lake, files) as (local, named), contextlib.closing(duckdb.connect()) as con:
        con.execute("SET TimeZone = 'UTC'")  # the rows' text, which breaks ties, in UTC
        repeated = _rows(con.execute(_render("dedup_repeated_keys", spec), {"files": local}))
        yield (con, parts_rank(con, local), local, named) if repeated else None


def one_row_per_key(lake: Lake, table: str, night: date) -> pa.Table | None:
    """The night's rows of a deduplicated ``table`` with one row per key, chosen by content
    (``night_one_per_key``); ``None`` when its partition already holds each key once."""
    spec = TABLES[table]
    files = lake.tables.files(table, night)
    with _repeating_parts(lake, spec, files) as repeating:
        if repeating is None:
            return None
        con, rank, local, _ = repeating
        table_rows = con.sql(_render("night_one_per_key", spec, rank=rank), params={"files": local}).to_arrow_table()
    schema = pa.schema([field for field in spec.schema if field.name in table_rows.column_names])
    return table_rows.select(schema.names).cast(schema)


def rows_not_kept(lake: Lake, table: str, night: date, files: list[str]) -> dict[str, list[int]]:
    """Of a deduplicated ``table``'s parts ``files`` of one night (several shards'), the rows
    :func:`one_row_per_key` would not keep, by part (part → row numbers); empty when each key
    is there once."""
    lost: dict[str, list[int]] = {}
    spec = TABLES[table]
    with _repeating_parts(lake, spec, files) as repeating:
        if repeating is not None:
            con, rank, local, named = repeating
            for part, row in con.execute(_render("night_rows_not_kept", spec, rank=rank), {"files": local}).fetchall():
                lost.setdefault(named.get(str(part), str(part)), []).append(int(row))
    return lost


# A night's load keeps its memory flat as the watchlist grows: DuckDB spills what passes the limit
# to `<warehouse>.tmp`, and may write rows in any order (queries order them). Reset after the
# load: queries keep DuckDB's defaults.
_LOAD_SETTINGS = ("SET memory_limit = '128MB'", "SET preserve_insertion_order = false")
_LOAD_RESETS = ("RESET memory_limit", "RESET preserve_insertion_order")


def _interrupted(exc: BaseException) -> bool:
    """DuckDB's word for a query it stopped on Ctrl-C (it takes the signal while a query runs):
    ``InterruptException``, or a ``RuntimeError`` "Query interrupted" from a COMMIT."""
    return isinstance(exc, duckdb.InterruptException) or (isinstance(exc, RuntimeError) and str(exc) == "Query interrupted")


class Warehouse:
    """One DuckDB file. Opening it read-write creates missing tables and columns (idempotent)."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only = read_only
        try:
            self.connection = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            reason = " ".join(str(exc).split())
            if "Could not set lock" in reason:
                raise WarehouseError(f"the warehouse {self.path} is in use by another process: {reason}") from None
            raise WarehouseError(
                f"cannot open the warehouse {self.path}: {reason} — "
                "it can be rebuilt from the lake at no cost: move it aside and run `tourneylake rebuild --all`"
            ) from None
        self.connection.execute("SET TimeZone = 'UTC'")
        self._registered: set[str] = set()
        #: The nights the last :meth:`load_night` read from the lake, by table (the others were unchanged).
        self.reloaded: dict[str, list[date]] = {}
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
        """Create missing tables and columns."""
        con = self.connection
        existing: dict[str, set[str]] = {}
        for table, column in con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall():
            existing.setdefault(table, set()).add(column)
        for name in LOAD_ORDER:
            spec = TABLES[name]
            if name not in existing:
                con.execute(table_ddl(spec))
                continue
            for column, dtype, _ in spec.columns:
                if column not in existing[name]:
                    con.execute(_render("add_column", spec, column=_column_ddl(column, dtype).replace(" NOT NULL", "")))
        con.execute(_templates()["loads_create"].template)

    # ------------------------------------------------------------------ loading
    def load_night(self, lake: Lake, night: date | str, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Load what changed of one night of every table (or of ``tables``) from ``lake`` (see the
        module docstring); returns the rows each table's night holds in the lake. One
        transaction: all or nothing. :attr:`reloaded` says which nights were read, by table."""
        night = night if isinstance(night, date) else date.fromisoformat(night)
        unknown = set(tables or ()) - set(LOAD_ORDER)
        if unknown:
            raise WarehouseError(f"no such warehouse tables: {sorted(unknown)}")
        wanted = [t for t in LOAD_ORDER if tables is None or t in tables]
        con = self.connection
        self._register(lake)
        # Every table's parts first, side by side (each a read of its log: a round trip or more on a store).
        with ThreadPoolExecutor(8, thread_name_prefix="tourneylake-parts") as pool:
            parts = dict(
                zip(
                    wanted,
                    pool.map(lambda t: lake.tables.parts(t, None if TABLES[t].load == "whole" else night), wanted),
                    strict=True,
                )
            )
        loaded: dict[str, int] = {}
        self.reloaded = {}
        recorded: dict[str, dict[date, str]] = {}
        for table, loaded_night, digest in con.execute(_templates()["loads_all"].template).fetchall():
            recorded.setdefault(table, {})[loaded_night] = digest
        changed = {table: self._changed(table, night, parts[table], recorded.get(table, {})) for table in wanted}
        for setting in _LOAD_SETTINGS:
            con.execute(setting)
        # Every changed part at once (from an object store, side by side), then the loads.
        fetching = _fetched(lake, [file for nights in changed.values() for _, files in nights for file in files])
        with fetching as (_, named):
            con.execute("BEGIN TRANSACTION")
            try:
                for table in wanted:
                    try:
                        loaded[table] = self._load_changed(table, night, parts[table], changed[table], named)
                    except (duckdb.IOException, duckdb.InvalidInputException) as exc:  # a lake part DuckDB cannot read
                        raise _damaged_lake_part(table, night, exc) from None
                self._record_loads(changed)
                con.execute("COMMIT")
            except BaseException as exc:
                # DuckDB takes Ctrl-C while a query runs and answers in its own words once the query
                # ends (`_interrupted`); the transaction may be over by then. The ROLLBACK is best
                # effort: the interrupt, not a failed ROLLBACK, is what the caller must see.
                with contextlib.suppress(duckdb.TransactionException):
                    con.execute("ROLLBACK")
                if _interrupted(exc):
                    raise KeyboardInterrupt from None
                raise
            finally:
                for reset in _LOAD_RESETS:
                    con.execute(reset)
        return loaded

    @staticmethod
    def _changed(
        table: str, night: date, nights: dict[date, list[tuple[str, int | None]]], recorded: dict[date, str]
    ) -> list[tuple[date, list[str]]]:
        """The nights of ``table`` whose parts changed since they were loaded (``recorded``: each
        night's parts as last loaded), with those parts: ``night``, or (a whole table) any night the
        lake or the last loads know."""
        candidates = {night} if TABLES[table].load != "whole" else {night, *nights, *recorded}
        out = []
        for candidate in sorted(candidates):
            files = [path for path, _ in nights.get(candidate, [])]
            if recorded.get(candidate, "") != _parts_digest(files):  # else the same parts as last time (or none, and none loaded)
                out.append((candidate, files))
        return out

    def _load_changed(
        self,
        table: str,
        night: date,
        nights: dict[date, list[tuple[str, int | None]]],
        changed: list[tuple[date, list[str]]],
        named: dict[str, str],
    ) -> int:
        """Load ``table``'s ``changed`` nights from their parts as DuckDB reads them (fetched from
        an object store: ``named`` gives each local copy's URL, see :func:`_fetched`); the rows
        ``night`` holds."""
        where = {url: path for path, url in named.items()}
        for changed_night, files in changed:
            try:
                self._load_table(table, changed_night, [where.get(file, file) for file in files])
            except (duckdb.IOException, duckdb.InvalidInputException) as exc:  # named as the lake names the part
                raise type(exc)(functools.reduce(lambda text, pair: text.replace(*pair), named.items(), str(exc))) from None
            self.reloaded.setdefault(table, []).append(changed_night)
        return self._rows_in_lake(nights.get(night, []))

    def _record_loads(self, changed: dict[str, list[tuple[date, list[str]]]]) -> None:
        """What the load read, in its transaction: each changed night's parts (a night without
        any forgotten), for the next load to compare (``_changed``)."""
        templates = _templates()
        loads = [
            {"table_name": table, "snapshot_date": night, "parts": _parts_digest(files)}
            for table, nights in changed.items()
            for night, files in nights
            if files
        ]
        gone = [
            {"table_name": table, "snapshot_date": night}
            for table, nights in changed.items()
            for night, files in nights
            if not files
        ]
        if loads:
            self.connection.execute(templates["loads_record"].template, {"loads": loads})
        if gone:
            self.connection.execute(templates["loads_forget"].template, {"loads": gone})

    def _rows_in_lake(self, parts: list[tuple[str, int | None]]) -> int:
        """A night's rows, as its Delta commits say (or, when one did not, as its parts' footers do)."""
        if all(rows is not None for _, rows in parts):
            return sum(rows or 0 for _, rows in parts)
        return _rows(self.connection.execute(_templates()["count_parts"].template, {"files": [path for path, _ in parts]}))

    def _register(self, lake: Lake) -> None:
        """Let DuckDB read the lake's URLs through its fsspec filesystem (object stores only),
        its listings forgotten (another process may have written the parts since)."""
        fs = lake.filesystem
        if fs is None:
            return
        fs.invalidate_cache()
        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        if protocols & self._registered:
            return
        try:
            self.connection.register_filesystem(fs)
        except (duckdb.Error, ValueError) as exc:
            raise WarehouseError(f"cannot read the lake {lake!r} from DuckDB: {' '.join(str(exc).split())}") from None
        self._registered |= protocols

    def _load_table(self, table: str, night: date, files: list[str]) -> int:
        con = self.connection
        statements = _loads(table)
        kind = TABLES[table].load
        params = {"files": files}
        if kind in ("whole", "snapshot"):  # a night's rows replaced
            con.execute(statements["delete"], {"snapshot_date": night})
            return _rows(con.execute(statements["insert"], params)) if files else 0
        if not files:
            return 0  # no snapshot of this table tonight: keep the one in force
        if kind == "reference":
            if not _rows(con.execute(statements["is_latest"], {"snapshot_date": night})):
                return 0  # an older night never replaces a newer reference snapshot
            con.execute(statements["delete"])
            return _rows(con.execute(statements["insert"], params))
        repeated = _rows(con.execute(statements["repeated_keys"], params))
        if repeated:
            log.warning(
                "%s, night %s: %d key(s) more than once in the lake's partition; one row of each is loaded, by content",
                table,
                night,
                repeated,
            )
            con.execute(statements["replace"], params)
            return _rows(con.execute(_loads(table, parts_rank(con, files))["insert_new_first"], params))
        if _rows(con.execute(statements["is_empty"])):
            return _rows(con.execute(statements["insert"], params))
        con.execute(statements["replace"], params)  # the rows listed again, then the keys not held (a MERGE, faster)
        return _rows(con.execute(statements["insert_new"], params))

    # ------------------------------------------------------------------ reading
    def table_counts(self) -> dict[str, int]:
        return {name: _rows(self.connection.execute(_render("count_rows", TABLES[name]))) for name in LOAD_ORDER}

    def describe(self, relation: str) -> tuple[int, list[tuple[str, str]]]:
        """A table's or view's rows and its (column, type) pairs, as the catalog shows them."""
        templates = _templates()
        rows = _rows(self.connection.execute(templates["relation_rows"].template, {"name": relation}))
        columns = self.connection.execute(templates["relation_columns"].template, {"name": relation}).fetchall()
        return rows, [(str(name), str(kind)) for name, kind in columns]

    def night_rows(self, table: str, night: date | str) -> int:
        """Rows ``table`` holds for the night (the load's check: as many as the lake gave)."""
        return _rows(self.connection.execute(_render("night_rows", TABLES[table]), {"snapshot_date": night}))

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


@contextlib.contextmanager
def _fetched(lake: Lake, files: list[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The parts as DuckDB reads them best: where they are on a disk; from an object store, each
    fetched whole (one GET each, side by side) into a temporary folder (DuckDB's reads through
    fsspec ask for each file's size and ranges again and again: hundreds of requests a night).
    Yields the local paths and, for messages, each one's URL."""
    fs = lake.filesystem
    if fs is None or not files:
        yield files, {}
        return
    paths = [StorePath(fs, fs._strip_protocol(file)) for file in files]
    found = lake.root.cat_many(paths) if isinstance(lake.root, StorePath) else {}
    with tempfile.TemporaryDirectory(prefix="tourneylake-parts-") as folder:
        local: list[str] = []
        for path in paths:
            target = Path(folder, *path.path.rsplit("/", 3)[-3:])  # <table>/snapshot_date=D/<part>: the night in the path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in found:
                target.write_bytes(found[path])
            local.append(str(target))  # one not fetched: DuckDB says it is missing, by its URL
        yield local, dict(zip(local, files, strict=True))


def _parts_digest(files: list[str]) -> str:
    """What a night's parts were, in a few characters ("" for none)."""
    if not files:
        return ""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:32]


def _rows(result: duckdb.DuckDBPyConnection) -> int:
    """The first value of a one-row result (DuckDB 2 wants every result read to the end)."""
    rows = result.fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0
