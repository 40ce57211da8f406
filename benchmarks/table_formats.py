"""Delta Lake (delta-rs) against Iceberg (pyiceberg, its SQL catalog on SQLite) on one night's
tables: ``python -m benchmarks.table_formats [--lake DIR] [--night D] [--repeats N]`` (run in
the bench environment, ``.venv-bench``, which has pyiceberg).

The night is a lake's (``--lake``, any layout ``Lake`` reads), or a 2,000-player night harvested
here against :mod:`benchmarks.bench_server`. Each format, on a local folder and on S3 (moto
behind the counting proxy of ``tests/s3_proxy.py``), in turn, for ``--repeats`` rounds:

1. the night committed into new tables (one commit per table, the tables created);
2. the next night committed (the steady state: tables exist);
3. the first night replaced by an overwrite on its date;
4. every table read back whole through Arrow (rows checked: a replaced night leaves none);
5. two nights committed at once from two threads (both must land);
6. old versions expired (Delta ``vacuum``, Iceberg ``expire_snapshots``);

then the objects and bytes the store holds and, on S3, the requests (PUT, GET, LIST) it took.
Prints one JSON document; the medians go in ``benchmarks/RESULTS.md`` by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

PARTITION = "snapshot_date"


# ---------------------------------------------------------------------- the night
def night_tables(lake_dir: Path, night: date) -> dict[str, pa.Table]:
    """Every table of ``night`` in the lake, ``snapshot_date`` included, in types both formats
    take (dictionary strings as strings, timestamps in microseconds)."""
    from tourneylake.lake.lake import Lake

    lake = Lake(lake_dir)
    out = {}
    for name in lake.tables.names():
        table = lake.tables.read_table(name, night)
        if table.num_rows:
            out[name] = _plain(table)
    return out


def _plain(table: pa.Table) -> pa.Table:
    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_timestamp(kind):
            kind = pa.timestamp("us", tz=kind.tz)
        fields.append(pa.field(field.name, kind))
    return table.cast(pa.schema(fields))


def harvested_night(workdir: Path) -> tuple[Path, date]:
    from benchmarks.common import NIGHT, BenchServer, harvest_once, roster

    with BenchServer(2000, 1) as server:
        harvest_once(server.base_url, roster(2000), workdir / "data")
    return workdir / "data", NIGHT


def _on(night: date, table: pa.Table) -> pa.Table:
    """``table`` as another night's rows."""
    return table.set_column(table.schema.get_field_index(PARTITION), PARTITION, pa.array([night] * table.num_rows, pa.date32()))


# ---------------------------------------------------------------------- the formats
class Delta:
    name = "delta"

    def __init__(self, root: str, options: dict[str, str]) -> None:
        self.root, self.options = root, options

    def commit(self, table: str, night: date, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(
            f"{self.root}/{table}",
            data,
            mode="overwrite",
            predicate=f"{PARTITION} = '{night.isoformat()}'",
            partition_by=[PARTITION],
            storage_options=self.options,
        )

    def read(self, table: str) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(f"{self.root}/{table}", storage_options=self.options).to_pyarrow_dataset().to_table()

    def expire(self, table: str) -> int:
        from deltalake import DeltaTable

        removed = DeltaTable(f"{self.root}/{table}", storage_options=self.options).vacuum(
            retention_hours=0, dry_run=False, enforce_retention_duration=False
        )
        return len(removed)


class Iceberg:
    name = "iceberg"

    def __init__(self, root: str, options: dict[str, str], catalog_dir: Path) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        props = {"uri": f"sqlite:///{catalog_dir / 'catalog.db'}", "warehouse": root}
        if options:
            props.update({
                "s3.endpoint": options["AWS_ENDPOINT_URL"],
                "s3.access-key-id": options["AWS_ACCESS_KEY_ID"],
                "s3.secret-access-key": options["AWS_SECRET_ACCESS_KEY"],
                "s3.region": options["AWS_REGION"],
            })  # fmt: skip
        self.catalog = SqlCatalog("lake", **props)
        self.catalog.create_namespace_if_not_exists("lake")
        self.lock = threading.Lock()

    def _table(self, table: str, schema: pa.Schema) -> Any:
        name = f"lake.{table}"
        with self.lock:
            if self.catalog.table_exists(name):
                return self.catalog.load_table(name)
            created = self.catalog.create_table(name, schema=schema)
            with created.update_spec() as update:
                update.add_identity(PARTITION)
            return self.catalog.load_table(name)

    def commit(self, table: str, night: date, data: pa.Table) -> None:
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.expressions import EqualTo

        for attempt in range(20):  # pyiceberg leaves a conflict's retry to its caller
            try:
                self._table(table, data.schema).overwrite(data, overwrite_filter=EqualTo(PARTITION, night.isoformat()))
                return
            except CommitFailedException:
                time.sleep(0.05 * (attempt + 1))
        raise RuntimeError(f"{table}: 20 conflicting commits in a row")

    def read(self, table: str) -> pa.Table:
        return self.catalog.load_table(f"lake.{table}").scan().to_arrow()

    def expire(self, table: str) -> int:
        loaded = self.catalog.load_table(f"lake.{table}")
        before = len(loaded.snapshots())
        current = loaded.current_snapshot()
        expire = loaded.maintenance.expire_snapshots()
        if current is not None:
            expire.older_than(
                datetime.fromtimestamp(current.timestamp_ms / 1000, UTC)
            ).commit()  # every snapshot but the current one
        return before - len(self.catalog.load_table(f"lake.{table}").snapshots())


# ---------------------------------------------------------------------- one round
def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def one_round(fmt: Any, tables: dict[str, pa.Table], night: date) -> dict[str, Any]:
    nxt, third, fourth = night + timedelta(days=1), night + timedelta(days=2), night + timedelta(days=3)
    out: dict[str, Any] = {}
    out["first_commit_s"], _ = _timed(lambda: [fmt.commit(t, night, d) for t, d in tables.items()])
    out["next_commit_s"], _ = _timed(lambda: [fmt.commit(t, nxt, _on(nxt, d)) for t, d in tables.items()])
    out["replace_s"], _ = _timed(lambda: [fmt.commit(t, night, d) for t, d in tables.items()])
    out["read_s"], read = _timed(lambda: {t: fmt.read(t) for t in tables})
    expected = {t: 2 * d.num_rows for t, d in tables.items()}
    out["rows_right"] = {t: r.num_rows for t, r in read.items()} == expected

    def both() -> None:
        threads = [
            threading.Thread(target=lambda n=n: [fmt.commit(t, n, _on(n, d)) for t, d in tables.items()]) for n in (third, fourth)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    out["concurrent_s"], _ = _timed(both)
    out["concurrent_landed"] = all(fmt.read(t).num_rows == 4 * d.num_rows for t, d in tables.items())
    out["expire_s"], removed = _timed(lambda: sum(fmt.expire(t) for t in tables))
    out["expired"] = removed
    return out


# ---------------------------------------------------------------------- stores
def _store_size(root: str, fs: Any) -> tuple[int, int]:
    found = fs.find(root, detail=True)
    return len(found), sum(int(info.get("size") or 0) for info in found.values())


@contextlib.contextmanager
def _s3() -> Iterator[tuple[Any, dict[str, str], Any]]:
    import fsspec

    from tests.s3_proxy import running_moto, running_proxy

    with running_moto() as moto, running_proxy(moto) as proxy:
        options = {
            "AWS_ENDPOINT_URL": proxy.url,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
        fs = fsspec.filesystem("s3", endpoint_url=proxy.url, key="bench", secret="bench", skip_instance_cache=True)
        yield fs, options, proxy


def measure(tables: dict[str, pa.Table], night: date, repeats: int) -> dict[str, Any]:
    import fsspec

    results: dict[str, Any] = {}
    with _s3() as (s3fs, options, proxy):
        for round_ in range(repeats):
            for store in ("local", "s3"):
                for kind in ("delta", "iceberg"):  # alternating, so the host's drift touches both
                    with tempfile.TemporaryDirectory(prefix="tl-formats-") as scratch:
                        if store == "local":
                            root, fs, opts = f"{scratch}/lake", fsspec.filesystem("file"), {}
                        else:
                            bucket = f"fmt-{uuid.uuid4().hex[:8]}"
                            s3fs.mkdir(bucket)
                            root, fs, opts = f"s3://{bucket}/lake", s3fs, options
                            proxy.reset()
                        fmt = Delta(root, opts) if kind == "delta" else Iceberg(root, opts, Path(scratch))
                        figures = one_round(fmt, tables, night)
                        figures["objects"], figures["bytes"] = _store_size(root, fs)
                        if store == "s3":
                            figures["requests"] = proxy.stats()["counts"]
                        results.setdefault(f"{kind}/{store}", []).append(figures)
                        print(f"round {round_ + 1} {kind}/{store}: {orjson.dumps(figures).decode()}", flush=True)
    return {arm: _medians(rounds) for arm, rounds in results.items()}


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in rounds[0].items():
        values = [r[key] for r in rounds]
        if isinstance(value, bool):
            out[key] = all(values)
        elif isinstance(value, (int, float)):
            out[key] = round(statistics.median(values), 3)
        else:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", type=Path, help="a data directory holding the night (default: harvest one)")
    parser.add_argument("--night", type=date.fromisoformat)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tl-formats-night-") as work:
        if args.lake is None:
            lake_dir, night = harvested_night(Path(work))
        else:
            lake_dir, night = args.lake, args.night
        tables = night_tables(lake_dir, night)
        rows = {t: d.num_rows for t, d in tables.items()}
        print(f"night {night}: {sum(rows.values())} rows in {len(rows)} tables", flush=True)
        result = {"night": night.isoformat(), "rows": rows, "medians": measure(tables, night, args.repeats)}
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
