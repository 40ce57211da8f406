"""The lake at a URL (``tourneylake.lake.storage``): ``memory://`` and ``file://`` in-process, and a
real S3 API on loopback (``moto_server``, one for the module): Delta tables committed there (two
nights at once both land; a replaced night leaves no stale row in Delta's own reader), raw answers
in segments with one listing a night whatever their number, two nights harvested into
``s3://bucket/prefix``, the warehouse rebuilt from there, a second process reading the same lake,
a writer killed before its commit leaving the previous night, and one-line errors without secrets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import fsspec
import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from tests.conftest import S3_SECRET as SECRET
from tests.helpers import REPO, harvest_nights, only_side_by_side, player_line, sandbox_settings
from tests.s3_proxy import running_proxy
from tourneylake.api import ReceivedBody, calls
from tourneylake.cli import app
from tourneylake.config import load_settings
from tourneylake.errors import ConfigError, LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger, LedgerWriter
from tourneylake.lake.raw_saver import RawSaver
from tourneylake.lake.segments import LINGER_S, forget_indexes, frames
from tourneylake.lake.state import StateStore
from tourneylake.lake.storage import StorePath
from tourneylake.sandbox import running_sandbox
from tourneylake.tables.rebuild import rebuild
from tourneylake.tables.warehouse import Warehouse

NIGHT = date(2026, 11, 20)
NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]
ROOT = REPO


def small(n: int, tag: str = "a") -> pa.Table:
    return pa.table({"n": list(range(n)), "tag": [tag] * n})


def row(**values) -> dict:
    base = {"called_at": datetime(2026, 11, 20, 3, tzinfo=UTC), "run_id": "r1", "resource": "player_summary"}
    return {**base, "cost": 1, "outcome": "ok", "attempt": 1, **values}


@pytest.fixture
def memory_lake() -> Iterator[Lake]:
    url = f"memory://tl-{uuid.uuid4().hex[:8]}/data"
    yield Lake(url).claim("sandbox")
    fsspec.filesystem("memory").rm(url.removeprefix("memory://").split("/")[0], recursive=True)


# ---------------------------------------------------------------------- memory:// and file://
def test_a_memory_lake_keeps_raw_bodies_ledger_and_state_but_no_tables(memory_lake: Lake) -> None:
    lake = memory_lake
    assert isinstance(lake.root, StorePath) and not lake.local and str(lake.root).startswith("memory://")
    assert Lake(str(lake.data_dir)).source == "sandbox"

    ref = lake.raw.write(NIGHT, "countries", {"q": "1"}, b'{"ok": true}', "json", 0)
    assert lake.raw.refs(NIGHT, status="received") == [ref]
    settled = lake.raw.settle(ref, "ok")
    assert lake.raw.has(NIGHT, "countries", {"q": "1"}) and settled.status == "ok"
    assert lake.raw.read(NIGHT, "countries", {"q": "1"}).body == b'{"ok": true}' and lake.raw.nights() == [NIGHT]
    (segment, _status) = sorted((lake.root / "_raw" / f"snapshot_date={NIGHT}").glob("w-*/*.seg"))
    assert frames(segment.read_bytes())[0][0][2]["k"] == "index"  # an object store's segment: its index first

    StateStore(lake).write("cache", {"a": 1})
    assert StateStore(lake).read("cache") == {"a": 1} and StateStore(lake).read("nothing") == {}
    with lake.locks.hold("harvest"), lake.locks.hold("harvest"):  # no lock on an object store: one writer per night
        pass
    with pytest.raises(LakeError, match=r"Delta tables, which need a store delta-rs opens .* memory:// is not one"):
        lake.tables.write("t", NIGHT, small(3))


def test_a_status_in_the_harvests_own_process_is_stored_at_once(memory_lake: Lake) -> None:
    """A writer in the harvest's own process (the free answers: a body, then at once its status,
    which the step waits for) stores a record at once when no PUT is out: no linger after the
    body's PUT, as the saver's writer has (its many bodies share PUTs)."""
    import time

    waits = []
    for i in range(3):
        ref = memory_lake.raw.write(NIGHT, "countries", {"n": str(i)}, b"<Countries/>", "xml", datetime.now(UTC))
        started = time.monotonic()
        memory_lake.raw.settle(ref, "ok")
        waits.append(time.monotonic() - started)
    assert min(waits) < 0.8 * LINGER_S  # the saver's writer would wait about its linger


def test_the_ledger_on_an_object_store_keeps_its_promises(memory_lake: Lake) -> None:
    lake = memory_lake
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=100, account="main") as writer:
        writer.sent("player_summary", "k1", 1)
        segments = writer.path
        assert isinstance(segments, StorePath) and segments.name == "run-r1.open"
        assert len(list(segments.iterdir())) == 1  # the header and the sent line: stored before the call
        (live,) = Ledger(lake).runs(NIGHT)
        assert live.unanswered and Ledger(lake).dead_runs() == []  # its writer (this process) holds it
        writer.record("k1", **row())
    assert writer.path.name == "run-r1.jsonl" and not segments.exists()
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and run.account == "main" and run.entries[0]["account"] == "main"
    assert Ledger(lake).spent(NIGHT) == 1 and Ledger(lake).spent(NIGHT, account="other") == 0

    dying = LedgerWriter(lake, NIGHT, "r2", remaining_before=99, account="other")
    dying.record("k0", **row(run_id="r2"))
    dying.sent("player_summary", "k2", 1)
    dying.close()  # a call never answered: the run stays open for the next run to reconcile
    (dead,) = Ledger(lake).dead_runs()
    assert dead.run_id == "r2" and dead.account == "other" and dead.uncertain == {"player_summary": 1}
    assert Ledger(lake).dead_runs(account="main") == []
    Ledger(lake).close_dead_run(dead, row(run_id="r2", resource="unattributed", outcome="reconciled_after_crash", attempt=0))
    assert Ledger(lake).dead_runs() == []
    assert Ledger(lake).spend_per_night(account="other") == {NIGHT: (2, 2)}
    assert Ledger(lake).spend_per_night() == {NIGHT: (3, 3)}
    assert Ledger(lake).spent_since(datetime(2026, 11, 20, tzinfo=UTC), except_run="r1", account="other") == 2
    table = Ledger(lake).table(NIGHT)
    assert table.column("account").to_pylist() == ["main", "other", "other"]


def _open_run(lake: Lake, run_id: str, pid: int) -> None:
    header = {"kind": "run", "run_id": run_id, "started_at": "2026-11-20T03:00:00+00:00", "pid": pid}
    header["host"] = socket.gethostname()
    folder = lake.root / "_ledger" / "snapshot_date=2026-11-20" / f"run-{run_id}.open"
    (folder / "00000000.jsonl").write_bytes(orjson.dumps(header) + b"\n")


def test_an_open_run_of_a_live_process_on_this_host_is_not_dead(memory_lake: Lake) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    _open_run(memory_lake, "alive", os.getppid())  # pytest's parent: alive
    _open_run(memory_lake, "gone", int(gone.stdout))  # that process has exited
    assert [run.run_id for run in Ledger(memory_lake).dead_runs()] == ["gone"]


def test_file_urls_are_local_directories(tmp_path: Path) -> None:
    settings = load_settings(data_dir=f"file://{tmp_path}/d")
    assert settings.data_dir == tmp_path / "d" and settings.warehouse_path == tmp_path / "d" / "warehouse.duckdb"
    lake = Lake(f"file://{tmp_path}/d").claim("sandbox")
    assert lake.local and lake.root == tmp_path / "d" / "lake" and (tmp_path / "d" / "lake" / "_source.json").is_file()
    lake.tables.write("t", NIGHT, small(2))
    assert Lake(tmp_path / "d").tables.read("t", NIGHT).num_rows == 2
    assert not any(p.name.startswith("file:") for p in Path.cwd().iterdir())


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("nosuch://bucket/x", "unknown filesystem protocol 'nosuch'"),
        ("s3://AKIA:" + SECRET + "@bucket/x", "must not hold credentials"),
        ("s3://", "needs a bucket"),
    ],
)
def test_a_bad_url_is_one_line_without_secrets(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings(data_dir=url)
    assert SECRET not in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError):
        Lake(url)
    result = CliRunner().invoke(app, ["budget", "--data-dir", url])
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output
    assert SECRET not in result.output


def test_a_url_lake_needs_a_local_warehouse_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TOURNEYLAKE_WAREHOUSE: must be set"):
        _ = load_settings(data_dir="memory://x/y").warehouse_path
    settings = load_settings(data_dir="memory://x/y", warehouse=tmp_path / "w.duckdb")
    assert settings.warehouse_path == tmp_path / "w.duckdb" and settings.local_dir == tmp_path
    from tourneylake.pipelines.cli import app as run_app

    (tmp_path / "watchlist.yaml").write_text("players:\n" + player_line("PokerStars", "Borbas.Geri") + "\n")
    args = ["run", "--sandbox", "--watchlist", str(tmp_path / "watchlist.yaml"), "--data-dir", "memory://x/y"]
    result = CliRunner().invoke(run_app, args)  # said before Dagster starts or any search is spent
    assert result.exit_code == 1 and "TOURNEYLAKE_WAREHOUSE: must be set" in result.output


# ---------------------------------------------------------------------- a real S3 API (moto)
def _options() -> dict[str, str]:
    return Lake("s3://x/y").tables.storage_options()


def test_delta_tables_on_s3(s3: str) -> None:
    lake = Lake(s3).claim("sandbox")
    lake.tables.write("t", NIGHT, small(3))
    lake.tables.write("t", NIGHTS[1], small(2, "n2"))
    assert lake.tables.nights("t") == NIGHTS and lake.tables.read("t", NIGHT).num_rows == 3
    (part,) = lake.tables.files("t", NIGHT)
    assert part.startswith(s3 + "/lake/t/snapshot_date=2026-11-20/part-")
    lake.tables.write("t", NIGHT, small(2, "b"))  # the night replaced, by an overwrite on its date
    delta = DeltaTable(lake.tables.uri("t"), storage_options=_options())
    rows = delta.to_pyarrow_table().to_pylist()  # Delta's own reader: no stale row of the replaced night
    assert sorted((r["snapshot_date"], r["tag"]) for r in rows) == [
        (NIGHT, "b"),
        (NIGHT, "b"),
        (NIGHTS[1], "n2"),
        (NIGHTS[1], "n2"),
    ]
    assert len(list(lake.tables.night_folder("t", NIGHT).iterdir())) == 2  # the replaced part: an older version's
    assert lake.tables.expire(keep_days=0) == 1
    assert len(list(lake.tables.night_folder("t", NIGHT).iterdir())) == 1
    lake.tables.write("t", NIGHTS[1], small(1, "a"), shard="a")  # a shard's rows beside the night's others
    assert sorted(lake.tables.read_table("t", NIGHTS[1]).column("tag").to_pylist()) == ["a", "n2", "n2"]
    lake.tables.drop("t", NIGHT)
    assert lake.tables.nights("t") == [NIGHTS[1]] and lake.tables.read("t", NIGHT).num_rows == 0


def test_a_shards_parts_are_stored_side_by_side(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard's part on a store is PUT on a part thread: a writer's parts (and several
    writers') are stored at once; the commit waits for them all."""
    from tourneylake.lake import table_writers

    lake = Lake(s3).claim("sandbox")
    only_side_by_side(monkeypatch, table_writers, "_put")
    with lake.tables.writer("t", NIGHT, shard="a") as writer:
        writer.write(small(2))
        writer.write(small(3, "b"))
    assert lake.tables.read_table("t", NIGHT).num_rows == 5


@pytest.mark.parametrize("where", ["local", "s3"])
def test_two_nights_committed_at_once_both_land(where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A backfill's nights and shards committed at the same moment: every commit lands (on S3 by
    delta-rs's conditional PUT, ``If-None-Match``); of two writers of one whole night one may
    fail (one writer a night is the rule), and the night is one of them, whole."""
    url = str(tmp_path) if where == "local" else request.getfixturevalue("s3")
    lake = Lake(url).claim("sandbox")
    lake.tables.write("t", NIGHT, small(1, "first"))  # the table exists: the writers race on commits only
    nights = [NIGHT + timedelta(days=i) for i in range(1, 5)]
    failed: list[BaseException] = []

    def commit(night: date, tag: str, shard: str | None = None) -> None:
        try:
            with Lake(url).tables.writer("t", night, shard=shard) as writer:
                writer.write(small(3, tag))
                barrier.wait(30)  # every writer's rows are handed over: the commits start together
        except LakeError as exc:
            failed.append(exc)

    jobs = [(night, f"n{night.day}", None) for night in nights[:2]] + [(night, "s", "a") for night in nights[2:]]
    jobs += [(nights[2], "t", "b"), (NIGHT, "x", None), (NIGHT, "y", None)]
    barrier = threading.Barrier(len(jobs))
    threads = [threading.Thread(target=commit, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert lake.tables.nights("t") == [NIGHT, *nights]
    for night in nights[:2]:
        assert lake.tables.read_table("t", night).column("tag").to_pylist() == [f"n{night.day}"] * 3
    assert sorted(lake.tables.read_table("t", nights[2]).column("tag").to_pylist()) == ["s"] * 3 + ["t"] * 3
    assert lake.tables.read_table("t", nights[3]).column("tag").to_pylist() == ["s"] * 3
    assert lake.tables.read_table("t", NIGHT).column("tag").to_pylist() in (["x"] * 3, ["y"] * 3)  # one of them, whole
    assert len(failed) <= 1 and all("night 2026-11-20 could not be committed" in str(exc) for exc in failed)


@contextlib.contextmanager
def lake_behind_proxy(moto: str, s3_env: Callable[[str], None]) -> Iterator[tuple[Any, Lake, str]]:
    """A lake in a new bucket, its requests through the counting proxy: (proxy, lake, bucket)."""
    with running_proxy(moto) as proxy:
        s3_env(proxy.url)
        bucket = f"lake-{uuid.uuid4().hex[:8]}"
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
        yield proxy, Lake(f"s3://{bucket}/prefix").claim("sandbox"), bucket


def test_raw_segments_on_s3_are_read_with_one_listing_a_night(moto: str, s3_env: Callable[[str], None]) -> None:
    """Many bodies to an object; a night read with one LIST whatever its answers' number; a
    body saved by the saver process (a second process, on S3 too) reads back."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        lists = []
        for night, count in ((NIGHT, 10), (NIGHTS[1], 60)):
            futures = [
                lake.raw.write_soon(night, "player_summary", {"player": f"p{i}"}, b'{"x": %d}' % i, "json", 0)
                for i in range(count)
            ]
            refs = [future.result(30) for future in futures]
            for ref in refs:
                lake.raw.settle(ref, "ok")
            forget_indexes()  # another process's view: nothing known of the night
            proxy.reset()
            bodies = list(lake.raw.bodies(night))
            assert sorted(raw.body for raw in bodies) == sorted(b'{"x": %d}' % i for i in range(count))
            counts = proxy.stats()["counts"]
            lists.append(counts.get("LIST", 0))
            assert len({ref.location for ref in refs}) < count  # many bodies to a segment
            folder = lake.raw.root / f"snapshot_date={night.isoformat()}"
            assert isinstance(folder, StorePath)
            segments = [name for name in folder.fs.find(folder.path) if name.endswith(".seg")]  # bodies' and statuses'
            assert counts["GET"] - counts["LIST"] == len(segments)  # one GET a segment: its index's peek was all of it
        assert lists == [1, 1]

        async def saved_by_the_saver() -> None:
            saver = RawSaver(lake, NIGHT)
            try:
                settle = await saver.save(ReceivedBody(calls.countries(), b"<Countries/>", "xml", datetime.now(UTC)))
                await settle("ok")
                assert saver.pid is not None
            finally:
                await saver.aclose()

        asyncio.run(saved_by_the_saver())
        assert lake.raw.read(NIGHT, calls.COUNTRIES, calls.countries().key).body == b"<Countries/>"


def test_the_segments_the_saver_stored_are_known_to_the_harvest(moto: str, s3_env: Callable[[str], None]) -> None:
    """On S3 the saver process tells the harvest each segment it stored, with its index: the
    harvest's later reads of the night list it once and GET none of them, and know what a
    process that reads every index knows. The harvest's own segments (the free answers it keeps
    itself) are known the same way."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        forget_indexes()

        async def harvest() -> None:
            saver = RawSaver(lake, NIGHT)
            try:
                for i in range(12):
                    call = calls.player_summary("PokerStars", f"p{i}")
                    settle = await saver.save(ReceivedBody(call, b'{"x": %d}' % i, "json", datetime.now(UTC)))
                    await settle("ok" if i % 3 else "refused-404")
                    await asyncio.sleep(0.03)  # several segments
                assert saver.pid is not None
            finally:
                await saver.aclose()

        asyncio.run(harvest())
        lake.raw.write_soon(NIGHT, calls.COUNTRIES, calls.countries().key, b"<Countries/>", "xml", 0).result(30)
        proxy.reset()
        known = lake.raw.refs(NIGHT, status=None)
        counts = proxy.stats()["counts"]
        assert (counts.get("LIST", 0), counts.get("GET", 0) - counts.get("LIST", 0)) == (1, 0)
        forget_indexes()  # another process: every segment's index read from the store
        read = lake.raw.refs(NIGHT, status=None)
        assert len(read) == 13 and [(r.digest, r.token, r.status, r.location, r.offset) for r in known] == [
            (r.digest, r.token, r.status, r.location, r.offset) for r in read
        ]
        assert {r.status for r in read} == {"ok", "refused-404", "received"}


def test_a_document_on_s3_is_read_in_one_request_there_or_not(moto: str, s3_env: Callable[[str], None]) -> None:
    """A state document (there or not), the lake's source and a folder of nights, each read
    with one request (a GET, a listing): no question first whether it is there."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        StateStore(lake).write("kept", {"a": 1})

        def requests(read: Callable[[], object], expected: object) -> int:
            proxy.reset()
            assert read() == expected
            return proxy.stats()["counts"]["requests"]

        assert requests(lambda: StateStore(lake).read("absent"), {}) == 1
        assert requests(lambda: StateStore(lake).read("kept"), {"a": 1}) == 1
        assert requests(lambda: lake.source, "sandbox") == 1
        lake.raw.write_soon(NIGHT, "player_summary", {"player": "p"}, b'{"x": 1}', "json", 0).result(30)
        assert requests(lambda: lake.raw.nights(), [NIGHT]) == 1


def test_a_new_table_on_s3_is_checked_for_the_first_layout_in_one_listing(moto: str, s3_env: Callable[[str], None]) -> None:
    """Before a table is created its folder is checked for the first layout's parts with one
    listing of everything under it (not one per night folder); a folder of that layout is
    still refused."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, bucket):
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.pipe(f"{bucket}/prefix/lake/old/snapshot_date=2026-11-19/part-00000.parquet", b"PAR1")
        with pytest.raises(LakeError, match="first table layout"):
            lake.tables.write("old", NIGHT, small(1))
        proxy.reset()
        lake.tables.write("new", NIGHT, small(2))
        assert proxy.stats()["counts"].get("LIST snapshot_date=", 0) == 0  # the night's folder not listed on its own
        assert lake.tables.read("new", NIGHT).num_rows == 2


def test_a_nights_expiry_on_s3_finds_the_tables_in_the_lakes_one_listing(moto: str, s3_env: Callable[[str], None]) -> None:
    """The night's expiry of old versions takes the lake's folders from its one listing (not a
    listing more per folder to see a Delta log), then each table's own requests."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        for table in ("a", "b", "c"):
            lake.tables.write(table, NIGHT, small(1))
        proxy.reset()
        assert lake.tables.expire(keep_days=7) == 0
        assert proxy.stats()["counts"].get("LIST other", 0) == 1  # the lake's root, once


def test_a_nights_bytes_on_s3_list_each_folder_once(moto: str, s3_env: Callable[[str], None]) -> None:
    """``night_bytes`` (what the night's record keeps) on a store: the lake's root listed once,
    then each folder's night, side by side; the same bytes as the objects' sizes."""
    from tourneylake.night.status import night_bytes

    with lake_behind_proxy(moto, s3_env) as (proxy, lake, bucket):
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        lake.tables.write("t", NIGHT, small(3))
        lake.tables.write("u", NIGHT, small(2))
        lake.tables.write("t", NIGHTS[1], small(1))
        lake.raw.write_soon(NIGHT, "player_summary", {"player": "p"}, b'{"x": 1}', "json", 0).result(30)
        folders = [p.name for p in lake.root.iterdir() if p.is_dir()]
        night = f"snapshot_date={NIGHT.isoformat()}"
        expected = sum(fs.du(f"{bucket}/prefix/lake/{name}/{night}") for name in ("t", "u", "_raw"))
        proxy.reset()
        assert night_bytes(lake, NIGHT) == expected > 0
        assert proxy.stats()["counts"].get("LIST", 0) == 1 + len(folders)


def _subprocess_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


_READ_LAKE = """
import sys, orjson
from tourneylake.lake.lake import Lake
lake = Lake(sys.argv[1])
out = {t: sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in lake.tables.read_table(t).to_pylist())
       for t in lake.tables.names()}
print(orjson.dumps(out).decode())
"""


def _rows_by_table(lake: Lake) -> dict[str, list[str]]:
    return {
        t: sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in lake.tables.read_table(t).to_pylist())
        for t in lake.tables.names()
    }


@pytest.mark.slow
def test_two_nights_on_s3_rebuilt_and_read_by_another_process(s3: str, tmp_path: Path, monkeypatch) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    with running_sandbox(seed=4, today=NIGHTS[0]) as server:
        settings = sandbox_settings(server, tmp_path, warehouse=warehouse).with_overrides(data_dir=s3)
        assert [outcome.searches_spent for outcome in harvest_nights(server, settings, NIGHTS)] == [1, 1]
    lake = Lake(s3)
    assert lake.tables.nights("player_statistics") == NIGHTS and lake.source == settings.source
    assert Ledger(lake).spend_per_night() == dict.fromkeys(NIGHTS, (1, 1))
    before = _rows_by_table(lake)

    # The lake is all there is: the warehouse is rebuilt from it, by the command, in a fresh file.
    warehouse.unlink()
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", s3)
    monkeypatch.setenv("TOURNEYLAKE_WAREHOUSE", str(warehouse))
    result = CliRunner().invoke(app, ["rebuild", "--all"])
    assert result.exit_code == 0, result.output
    assert _rows_by_table(lake) == before
    with Warehouse(warehouse, read_only=True) as db:
        counts = db.table_counts()
        statistics = db.query("SELECT count(DISTINCT snapshot_date) AS n FROM player_statistics").to_pylist()
    assert counts["player_snapshots"] == 2 and counts["search_ledger"] == 2 and statistics == [{"n": 2}]
    assert counts["player_statistics"] == len(before["player_statistics"])

    # A second process, same environment, reads the same lake and sees the same rows.
    other = subprocess.run(
        [sys.executable, "-c", _READ_LAKE, s3], capture_output=True, env=_subprocess_env(), timeout=120, check=False
    )
    assert other.returncode == 0, other.stderr.decode()
    assert orjson.loads(other.stdout) == before
    query = subprocess.run(
        [str(Path(sys.executable).parent / "tourneylake"), "query", "--json", "SELECT count(*) AS n FROM player_snapshots"],
        capture_output=True,
        env=_subprocess_env(),
        timeout=120,
        check=False,
    )
    assert query.returncode == 0 and orjson.loads(query.stdout.splitlines()[0]) == {"n": 2}, query.stderr.decode()


_KILLED_WRITERS = """
import os, signal, sys, threading
import pyarrow as pa
from tourneylake.lake.table_writers import ShardWriter
from tourneylake.lake.lake import Lake
lake = Lake(sys.argv[1])
lake.tables.write("t", "2026-11-20", pa.table({"n": list(range(3))}))
def die(self):
    print("parts written", flush=True)  # the shard's parts are stored, its commit is not
    os.kill(os.getpid(), signal.SIGKILL)
ShardWriter._commit = die
with lake.tables.writer("t", "2026-11-20") as night:  # killed while its rows go to delta-rs's writer
    night.write(pa.table({"n": list(range(4))}))
    with lake.tables.writer("t", "2026-11-20", shard="a") as shard:
        shard.write(pa.table({"n": list(range(4))}))
        shard.write(pa.table({"n": list(range(3))}))
"""


@pytest.mark.slow
def test_writers_killed_before_their_commits_leave_the_previous_night(s3: str) -> None:
    """A night's writer and a shard's, killed before they commit: the night stays as it was,
    and what they stored goes with the expiry of strays (files no version ever named)."""
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITERS, s3], capture_output=True, env=_subprocess_env(), timeout=120, check=False
    )
    assert killed.returncode == -signal.SIGKILL and b"parts written" in killed.stdout, killed.stderr.decode()
    lake = Lake(s3)
    assert lake.tables.nights("t") == [NIGHT]
    assert lake.tables.read("t", NIGHT).column("n").to_pylist() == [0, 1, 2]  # the previous night, whole
    folder = lake.tables.night_folder("t", NIGHT)
    assert len(list(folder.iterdir())) >= 3  # 1 committed + the shard's 2 no version names
    assert DeltaTable(lake.tables.uri("t"), storage_options=_options()).to_pyarrow_table().num_rows == 3
    lake.tables.write("t", NIGHT, small(1))
    assert lake.tables.expire(keep_days=0) == 1  # the replaced part, as the log names it
    assert len(list(folder.iterdir())) >= 3  # the killed writers' parts: no version ever named them
    lake.tables.expire(keep_days=0, strays=True)  # a listing finds them
    assert [p.name for p in folder.iterdir()] == [lake.tables.files("t", NIGHT)[0].rsplit("/", 1)[1]]


@pytest.mark.slow
def test_missing_s3_credentials_are_one_line_without_secrets(s3: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # the secret alone: botocore refuses partial credentials
    with pytest.raises(LakeError, match="credentials") as caught:
        _ = Lake(s3).source
    assert SECRET not in str(caught.value) and "\n" not in str(caught.value)
    monkeypatch.setenv("TOURNEYLAKE_WAREHOUSE", str(tmp_path / "w.duckdb"))
    result = CliRunner().invoke(app, ["rebuild", "--all", "--data-dir", s3])
    assert result.exit_code == 1 and "error:" in result.output and "credentials" in result.output
    assert "Traceback" not in result.output and SECRET not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_rebuild_refuses_a_memory_lake_that_is_not_there(tmp_path: Path) -> None:
    settings = load_settings(data_dir=f"memory://absent-{uuid.uuid4().hex[:6]}/d", warehouse=tmp_path / "w.duckdb")
    with pytest.raises(Exception, match="nothing to rebuild"):
        rebuild(settings)


def test_the_docs_say_how_to_use_object_storage() -> None:
    guide = (ROOT / "docs" / "guides" / "beyond-one-machine.md").read_text()
    section = guide.split("## The lake on S3", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "TOURNEYLAKE_DATA_DIR",
        "TOURNEYLAKE_WAREHOUSE",
        "AWS_",
        "Delta",
        "conditional writes",
        "segments",
        "One writer",
    ):
        assert needle in section
