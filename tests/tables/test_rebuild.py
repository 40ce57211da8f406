"""Rebuilding nights from raw (``tourneylake.tables.rebuild`` and ``tourneylake rebuild``): which nights,
one-line errors, and a damaged warehouse replaced by a fresh one — without a request.
(Identity with the original nights, every table compared both ways: ``test_history.py``.)"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.helpers import body_payload, harvest_nights, raw_files, rewrite_body, sandbox_settings
from tourneylake.cli import app
from tourneylake.config import Settings
from tourneylake.errors import LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.locks import REBUILD_LOCK
from tourneylake.lake.segments import RawRef
from tourneylake.lake.state import StateStore
from tourneylake.night.harvest import last_harvested
from tourneylake.sandbox import running_sandbox
from tourneylake.tables import rebuild as rebuild_module
from tourneylake.tables.rebuild import NothingToRebuild, rebuild
from tourneylake.tables.warehouse import LOAD_ORDER, Warehouse, WarehouseError
from tourneylake.tables.worker import RebuildWorkers, TablesWorkerError, rebuild_workers

pytestmark = pytest.mark.xdist_group("rebuild")

NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory):
    """Two harvested nights in a lake, loaded into a warehouse; the sandbox stopped afterwards."""
    data = tmp_path_factory.mktemp("rebuild")
    with running_sandbox(seed=4, today=NIGHTS[0]) as server:
        settings = sandbox_settings(server, data)
        harvest_nights(server, settings, NIGHTS)
    return settings


def invoke(settings, *args: str):
    return CliRunner().invoke(app, ["rebuild", *args, "--data-dir", str(settings.data_dir)])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "say which nights"),
        (("--all", "--date", "2026-11-20"), "say which nights"),
        (("--from", "2026-11-20"), "--from and --to go together"),
        (("--from", "2026-11-22", "--to", "2026-11-20"), "is after --to"),
        (("--date", "2026-13-01"), "--date must be a date YYYY-MM-DD, got '2026-13-01'"),
        (("--date", "2026-11-25"), "the lake holds no raw answers for 2026-11-25"),
    ],
)
def test_bad_requests_are_one_line(harvested, args, message) -> None:
    result = invoke(harvested, *args)
    usage = "no raw answers" not in message  # a flag's value or a missing one: a usage error
    assert result.exit_code == (2 if usage else 1) and message in result.output and "Traceback" not in result.output


def test_no_lake_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NothingToRebuild, match="no lake in"):
        rebuild(Settings(data_dir=tmp_path))


def test_a_range_rebuilds_the_nights_it_holds(harvested) -> None:
    result = invoke(harvested, "--from", "2026-11-19", "--to", "2026-11-21")
    assert result.exit_code == 0, result.output
    assert "Rebuilt 2 night(s)" in result.output and "player_statistics" in result.output


def test_a_damaged_warehouse_is_replaced_by_a_fresh_one(harvested) -> None:
    with duckdb.connect(str(harvested.warehouse_path), read_only=True) as con:
        before = con.execute("SELECT count(*) FROM player_statistics").fetchone()[0]
    harvested.warehouse_path.write_bytes(b"not a duckdb file at all" * 100)
    result = invoke(harvested, "--all")
    assert result.exit_code == 0, result.output
    assert "fresh file" in result.output
    with duckdb.connect(str(harvested.warehouse_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM player_statistics").fetchone()[0] == before > 0
        assert con.execute("SELECT count(DISTINCT snapshot_date) FROM player_snapshots").fetchone()[0] == 2


def test_one_night_rebuilds_only_that_night(harvested) -> None:
    outcome = rebuild(harvested, [NIGHTS[1]])
    assert outcome.nights == [NIGHTS[1]] and not outcome.fresh_warehouse
    assert outcome.rows["player_snapshots"] == 1 and outcome.rows["currencies"] > 0


def test_a_damaged_warehouse_is_one_line_saying_how_to_rebuild_it(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    path.write_bytes(b"not a duckdb file at all" * 100)
    with pytest.raises(WarehouseError) as caught:
        Warehouse(path)
    message = str(caught.value)
    assert str(path) in message and "tourneylake rebuild --all" in message and "\n" not in message


def test_a_damaged_partition_is_one_line_and_rebuilding_its_night_makes_it_again(harvested) -> None:
    lake = Lake(harvested.data_dir)
    (part,) = lake.tables.files("player_snapshots", NIGHTS[0])
    good = Path(part).read_bytes()
    raw_before = raw_files(lake)
    Path(part).write_bytes(good[:100])  # a disk that lost the file's end
    with pytest.raises(LakeError) as caught:
        last_harvested(lake, NIGHTS[1])  # what the next night's plan reads
    message, named = str(caught.value), f"player_snapshots/{Path(part).name}"  # the part by its table and name, once
    assert message.startswith(f"{named} is damaged") and "tourneylake rebuild --date 2026-11-20" in message
    assert "\n" not in message and message.count("part-") == 1 and len(message) < 250
    with pytest.raises(LakeError) as caught, Warehouse(harvested.warehouse_path.with_name("fresh.duckdb")) as db:
        db.load_night(lake, NIGHTS[0])  # what a load reads (a fresh warehouse: the night is new to it)
    assert str(caught.value).startswith(f"{named} is damaged (No magic bytes found at end of file): `tourneylake rebuild")
    assert invoke(harvested, "--date", "2026-11-20").exit_code == 0
    assert last_harvested(lake, NIGHTS[1]) == {("PokerStars", "Borbas.Geri", "sng"): NIGHTS[0]}
    assert raw_files(lake) == raw_before  # nothing paid touched


def test_a_damaged_state_file_is_one_line_naming_it(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    path = lake.root / "_state" / "nlq_cache.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{not json")
    with pytest.raises(LakeError) as caught:
        StateStore(lake).read("nlq_cache")
    assert f"state file {path} is damaged" in str(caught.value) and "move it aside" in str(caught.value)
    assert path.read_bytes() == b"{not json"


# ---------------------------------------------------------------------- nights side by side


def _copy(harvested: Settings, into: Path, *, drop_tables: bool = False, **overrides) -> Settings:
    """The harvested data directory copied, so a test may damage it; its settings.
    ``drop_tables``: without its tables (only what a rebuild reads: raw answers and the ledger)."""
    shutil.copytree(harvested.data_dir, into, ignore=shutil.ignore_patterns("warehouse.duckdb*"))
    if drop_tables:
        lake = Lake(into)
        for table in lake.tables.names():
            shutil.rmtree(lake.tables.folder(table))
    return harvested.with_overrides(data_dir=into, watchlist=into / "watchlist.yaml", **overrides)


def _tables(settings: Settings) -> dict[tuple[str, date], list[dict]]:
    """Every partition of every table, its rows in a stable order."""
    lake = Lake(settings.data_dir)
    out = {}
    for table in lake.tables.names():
        for night in lake.tables.nights(table):
            rows = pq.read_table(lake.tables.files(table, night)).to_pylist()
            out[table, night] = sorted(rows, key=repr)
    return out


def _damage_summary(settings: Settings, night: date) -> RawRef:
    (ref,) = Lake(settings.data_dir).raw.refs(night, "player_summary")
    rewrite_body(ref, b"\x1f\x8b not gzip at all")
    (ref,) = Lake(settings.data_dir).raw.refs(night, "player_summary")
    return ref


def test_nights_rebuilt_side_by_side_are_the_nights_rebuilt_one_after_another(harvested, tmp_path, monkeypatch) -> None:
    one = _copy(harvested, tmp_path / "one", drop_tables=True, rebuild_workers=1)
    two = _copy(harvested, tmp_path / "two", drop_tables=True, rebuild_workers=2)
    serial = rebuild(one)
    # Side by side, this process makes no night's player tables itself: the workers do.
    monkeypatch.setattr("tourneylake.tables.night_tables.player_tables", lambda *a, **k: pytest.fail("made in process"))
    parallel = rebuild(two)
    assert parallel.nights == serial.nights == NIGHTS and parallel.rows == serial.rows
    assert parallel.warehouse_rows == serial.warehouse_rows
    tables = _tables(one)
    assert _tables(two) == tables and {("player_statistics", n) for n in NIGHTS} <= set(tables)


def test_a_fresh_warehouse_gets_the_nights_in_order_whatever_order_they_finish(harvested, tmp_path, monkeypatch) -> None:
    """Side by side, nights finish in any order; the warehouse still gets them night by night
    (a reference table's latest snapshot depends on it), and the ledger once, after every night
    (its load reads every night's partition, which workers may be replacing)."""
    one = _copy(harvested, tmp_path / "one", rebuild_workers=1)
    two = _copy(harvested, tmp_path / "two", rebuild_workers=2)
    rebuild(one)
    calls = []
    load_night = Warehouse.load_night

    def recorded(self, lake, night, tables=None):
        calls.append((night, tuple(tables or ())))
        return load_night(self, lake, night, tables)

    monkeypatch.setattr(Warehouse, "load_night", recorded)
    rebuild(two)
    per_night = tuple(t for t in LOAD_ORDER if t != "search_ledger")
    assert calls == [(NIGHTS[0], per_night), (NIGHTS[1], per_night), (NIGHTS[1], ("search_ledger",))]
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{one.warehouse_path}' AS one (READ_ONLY)")
        con.execute(f"ATTACH '{two.warehouse_path}' AS two (READ_ONLY)")
        for table in LOAD_ORDER:
            for a, b in (("one", "two"), ("two", "one")):
                query = f"SELECT count(*) FROM (SELECT * FROM {a}.{table} EXCEPT ALL SELECT * FROM {b}.{table})"
                assert con.execute(query).fetchone()[0] == 0, table


def test_a_failure_before_a_night_is_handed_out_is_the_error_once_the_nights_under_way_are_done(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d", drop_tables=True, rebuild_workers=2)
    (metadata,) = Lake(settings.data_dir).raw.refs(NIGHTS[1], "metadata")
    rewrite_body(metadata, b"\x1f\x8b not gzip at all")  # read by the night's reference step, here
    with pytest.raises(LakeError, match="is damaged"):
        rebuild(settings)
    done = {night for table, night in _tables(settings) if table == "player_snapshots"}
    assert done == {NIGHTS[0]}  # the night under way finished; the next was never handed out


def test_a_worker_that_fails_on_its_own_is_one_line(harvested, tmp_path) -> None:
    """A worker's own last word (``failed``: it could not even start a night) is the error."""
    settings = _copy(harvested, tmp_path / "d")
    with RebuildWorkers(settings.data_dir, 1) as pool:
        pool._events.put((0, ["failed", "ImportError: no module named x"]))
        with pytest.raises(TablesWorkerError, match="night 2026-11-20 could not be rebuilt: ImportError: no module named x"):
            list(pool.rebuild(NIGHTS))


def test_a_night_reads_the_earlier_nights_reference_tables_as_rebuilt(harvested, tmp_path) -> None:
    """A night without metadata of its own uses the latest earlier night's tables: those are
    made again first, in order, before any worker reads them (here, a damaged part of them)."""
    prepared = []
    for name, workers in (("one", 1), ("two", 2)):
        settings = _copy(harvested, tmp_path / name, rebuild_workers=workers)
        lake = Lake(settings.data_dir)
        for ref in lake.raw.refs(NIGHTS[1], "metadata", status=None):  # the night's metadata answer is not there
            lake.raw.settle(ref, "refused-0")
        for table in ("currencies", "statistic_definitions", "dataset_definitions"):
            lake.tables.drop(table, NIGHTS[1])
        prepared.append(settings)
    one, two = prepared
    for attempt in range(4):  # a race shows one time in a few (it did, before the reference step went first)
        for settings in prepared:
            (part,) = Lake(settings.data_dir).tables.files("currencies", NIGHTS[0])
            Path(part).write_bytes(Path(part).read_bytes()[:100])
            rebuild(settings, warehouse=attempt == 3)  # the lake's tables each round, the warehouse and models once
        assert _tables(two) == _tables(one)
    with duckdb.connect(str(two.warehouse_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM player_statistics WHERE value_usd IS NOT NULL").fetchone()[0] > 0


def test_one_worker_takes_the_nights_one_after_another(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d", drop_tables=True)
    with RebuildWorkers(settings.data_dir, 1) as pool:
        done = [night for night, rows, _ in pool.rebuild(NIGHTS) if rows["player_snapshots"] == 1]
    assert done == NIGHTS
    assert {night for table, night in _tables(settings) if table == "player_snapshots"} == set(NIGHTS)


def test_a_night_that_fails_stops_the_hand_out_and_is_one_line(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d", drop_tables=True)
    damaged = _damage_summary(settings, NIGHTS[0])
    with RebuildWorkers(settings.data_dir, 1) as pool, pytest.raises(TablesWorkerError) as caught:
        list(pool.rebuild(NIGHTS))
    message = str(caught.value)
    assert message.startswith("night 2026-11-20 could not be rebuilt: LakeError: raw body") and "\n" not in message
    assert "is damaged" in message and body_payload(damaged) == b"\x1f\x8b not gzip at all"  # nothing paid touched
    assert not _tables(settings)  # the next night was never handed out


def test_a_failure_in_a_worker_reaches_the_command_in_one_line(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d")
    _damage_summary(settings, NIGHTS[1])
    result = CliRunner().invoke(app, ["rebuild", "--all", "--workers", "2", "--data-dir", str(settings.data_dir)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "night 2026-11-21 could not be rebuilt: LakeError: raw body" in result.output


def test_an_unreadable_answer_found_by_a_worker_is_reported_and_kept(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d", rebuild_workers=2)
    lake = Lake(settings.data_dir)
    (ref,) = lake.raw.refs(NIGHTS[1], "player_summary")
    header = json.loads(gzip.decompress(body_payload(ref)).split(b"\n", 1)[0])
    del header["body_bytes"]  # and rewritten in the earliest layout (the body inside the JSON), which still reads
    header["body"] = '{"Response": {"@success": "true", "PlayerResponse": "garbage"'  # cut short... and kept
    rewrite_body(ref, gzip.compress(json.dumps(header).encode()))
    outcome = rebuild(settings)
    assert len(outcome.unusable) == 1 and outcome.unusable[0].startswith("2026-11-21 PokerStars/Borbas.Geri")
    assert lake.raw.refs(NIGHTS[1], "player_summary", status="unusable")  # kept, marked: a fixed normaliser reads it again
    assert outcome.rows["player_snapshots"] == 1  # the other night's summary


def test_a_worker_killed_before_its_night_is_a_clear_error(harvested, tmp_path) -> None:
    settings = _copy(harvested, tmp_path / "d", drop_tables=True)
    with RebuildWorkers(settings.data_dir, 2) as pool:
        victim = pool._procs[0]
        victim.kill()
        victim.wait(timeout=30)
        with pytest.raises(TablesWorkerError, match=r"the worker rebuilding night 2026-11-20 ended \(exit status -9\)"):
            list(pool.rebuild(NIGHTS))
    assert {night for _, night in _tables(settings)} == {NIGHTS[1]}  # the other worker's night is whole


_WRITING = """
import signal, sys, time
from datetime import date
import pyarrow as pa
from tourneylake.lake.lake import Lake
from tourneylake.tables.worker import _stop
signal.signal(signal.SIGTERM, _stop)
with Lake(sys.argv[1]).tables.writer("player_snapshots", date(2026, 11, 20)) as writer:
    writer.write(pa.table({"x": [1, 2, 3]}))
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_worker_stopped_while_writing_drops_its_staged_rows(tmp_path) -> None:
    """The workers' SIGTERM handler: a night being written when the rebuild is stopped leaves
    nothing behind, in the lake or in the rows waiting for the commit (its previous tables stay)."""
    lake = Lake(tmp_path / "data").claim("sandbox")
    staged = tmp_path / "tmp"
    staged.mkdir()
    env = {**os.environ, "TMPDIR": str(staged)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITING, str(tmp_path / "data")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline() == "writing\n"
        assert list(staged.iterdir())  # the rows wait for the commit
        proc.terminate()
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # SystemExit, not death by the signal
    finally:
        proc.kill()
        proc.wait()
    assert not list(staged.iterdir()) and not lake.tables.nights("player_snapshots")
    assert not lake.tables.folder("player_snapshots").exists()


@pytest.mark.parametrize(
    ("setting", "nights", "cores", "expected"), [(0, 10, 2, 2), (0, 1, 4, 1), (0, 50, 32, 8), (3, 2, 2, 2), (1, 9, 8, 1)]
)
def test_how_many_workers_a_rebuild_starts(monkeypatch, setting, nights, cores, expected) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert rebuild_workers(setting, nights) == expected


@pytest.mark.parametrize(("workers", "way"), [(0, "two cores"), (2, "two cores"), (1, "one process")])
def test_one_night_is_rebuilt_on_two_cores_unless_one_is_asked_for(harvested, tmp_path, monkeypatch, workers, way) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    settings = _copy(harvested, tmp_path / "d", rebuild_workers=workers)
    ways = []
    for name, label in (("rebuild_night_on_two_cores", "two cores"), ("rebuild_night", "one process")):
        real = getattr(rebuild_module, name)
        monkeypatch.setattr(rebuild_module, name, lambda *a, real=real, label=label: ways.append(label) or real(*a))
    rebuild(settings, [NIGHTS[1]])
    assert ways == [way]
    assert _tables(settings) == _tables(_copy(harvested, tmp_path / "copy"))  # the night's rows, as harvested


def test_the_command_rebuilds_nights_side_by_side_when_asked(harvested, tmp_path, monkeypatch) -> None:
    settings = _copy(harvested, tmp_path / "d")

    def in_process(*args, **kwargs):
        raise RuntimeError("made in process")

    monkeypatch.setattr("tourneylake.tables.night_tables.player_tables", in_process)

    def invoke_with(workers: str):
        return CliRunner().invoke(app, ["rebuild", "--all", "--workers", workers, "--data-dir", str(settings.data_dir)])

    result = invoke_with("2")
    assert result.exit_code == 0, result.output
    assert "Rebuilt 2 night(s)" in result.output and "player_statistics" in result.output
    result = invoke_with("1")  # one after another: in this process
    assert result.exit_code != 0 and isinstance(result.exception, RuntimeError)


@pytest.mark.parametrize("harvest_lock", ["harvest", "harvest-alice"])
def test_a_rebuild_waits_for_a_harvest_of_the_same_lake(harvested, tmp_path, harvest_lock: str) -> None:
    """A rebuild that read a night half-harvested could swap its partial tables in after the
    harvest's: it waits for the harvest's lock, the one account's or any of several accounts'
    (a harvest waits for a rebuild the same way)."""
    import threading

    settings = _copy(harvested, tmp_path / "d")
    lake = Lake(settings.data_dir)
    done: list[object] = []

    def rebuild_now() -> None:
        done.append(rebuild(settings, [NIGHTS[1]]))

    with lake.locks.hold(harvest_lock):  # a harvest under way (another process, in life)
        worker = threading.Thread(target=rebuild_now)
        worker.start()
        worker.join(5.0)  # a night's rebuild takes well under a second here
        assert worker.is_alive() and not done  # waiting
        with lake.locks.hold(REBUILD_LOCK, wait=False) as free:
            assert not free  # what a harvest starting now looks for
    worker.join(60)
    assert not worker.is_alive() and done and done[0].nights == [NIGHTS[1]]


def test_a_harvest_that_starts_during_a_rebuild_waits_for_it(tmp_path) -> None:
    """A rebuild takes the harvest locks it lists when it starts; an account's first harvest,
    whose lock did not exist then, sees the rebuild's own lock and waits for it, without holding
    its lock meanwhile (the rebuild may be waiting for that one)."""
    import threading

    lake = Lake(tmp_path / "d")
    entered = threading.Event()

    def harvest() -> None:
        with lake.locks.for_harvest("harvest-new"):
            entered.set()

    with lake.locks.hold(REBUILD_LOCK):  # a rebuild under way (another process, in life)
        worker = threading.Thread(target=harvest)
        worker.start()
        assert not entered.wait(1.0)
        with lake.locks.hold("harvest-new", wait=False) as free:
            assert free
    assert entered.wait(10)
    worker.join(10)
    with lake.locks.for_harvest("harvest-new") as held:  # no rebuild: at once
        assert held
