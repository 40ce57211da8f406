"""The lake at a URL (``tourneylake.lake.storage``): ``memory://`` and ``file://`` in-process, and a
real S3 API on loopback (``moto_server`` in a subprocess): two nights harvested into
``s3://bucket/prefix``, the warehouse rebuilt from there, a second process reading the same lake,
a writer killed mid-partition leaving no partial partition, and one-line errors without secrets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import fsspec
import orjson
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from tests.helpers import REPO, harvest_nights, player_line, sandbox_settings
from tourneylake.cli import app
from tourneylake.config import load_settings
from tourneylake.errors import ConfigError, LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger, LedgerWriter
from tourneylake.lake.state import StateStore
from tourneylake.lake.storage import StorePath
from tourneylake.sandbox import running_sandbox
from tourneylake.tables.rebuild import rebuild
from tourneylake.tables.warehouse import Warehouse

NIGHT = date(2026, 11, 20)
NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]
ROOT = REPO
SECRET = "moto-secret-do-not-show-42"


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
def test_a_memory_lake_keeps_tables_raw_bodies_and_state(memory_lake: Lake) -> None:
    lake = memory_lake
    assert isinstance(lake.root, StorePath) and not lake.local and str(lake.root).startswith("memory://")
    assert Lake(str(lake.data_dir)).source == "sandbox"
    lake.write_table("t", NIGHT, small(3))
    assert lake.partitions("t") == [NIGHT] and lake.read_partition("t", NIGHT).num_rows == 3
    assert lake.read_table("t").column("snapshot_date").to_pylist() == [NIGHT] * 3
    (part,) = lake.partition_files("t", NIGHT)
    assert part.startswith("memory://") and "/t/snapshot_date=2026-11-20/part-" in part
    lake.write_table("t", NIGHT, small(2, "b"))  # replaced: the old generation is gone
    assert lake.read_partition("t", NIGHT).column("tag").to_pylist() == ["b", "b"]
    assert sorted(p.name for p in lake.partition_path("t", NIGHT).iterdir())[0] == "_commit.json"
    assert len(list(lake.partition_path("t", NIGHT).iterdir())) == 2
    lake.drop_partition("t", NIGHT)
    assert lake.partitions("t") == [] and lake.read_partition("t", NIGHT).num_rows == 0

    path = lake.write_raw(NIGHT, "countries", {"q": "1"}, b'{"ok": true}', "json", 0)
    assert lake.raw_paths(NIGHT, status="received") == [path]
    settled = lake.settle_raw(path, "ok")
    assert lake.has_raw(NIGHT, "countries", {"q": "1"}) and not path.exists()
    assert lake.read_raw(NIGHT, "countries", {"q": "1"}).body == b'{"ok": true}' and lake.raw_dates() == [NIGHT]
    assert lake.settle_raw(path, "ok") == settled  # settled by another process meanwhile: left as is

    StateStore(lake).write("cache", {"a": 1})
    assert StateStore(lake).read("cache") == {"a": 1} and StateStore(lake).read("nothing") == {}
    with lake.lock("harvest"), lake.lock("harvest"):  # no lock on an object store: one writer per night
        pass
    with pytest.raises(LakeError, match="object store"):
        lake.table_glob("t")


def _fail_half_way(lake: Lake) -> None:
    with lake.partition_writer("t", NIGHT) as writer:
        writer.write(small(5, "new"))
        raise RuntimeError("the run fails half-way")


def test_uncommitted_parts_are_never_read(memory_lake: Lake) -> None:
    lake = memory_lake
    lake.write_table("t", NIGHT, small(3))
    with pytest.raises(RuntimeError, match="half-way"):
        _fail_half_way(lake)
    assert lake.read_partition("t", NIGHT).num_rows == 3
    # A writer killed before its commit leaves parts no marker lists: invisible, then cleaned up.
    stray = lake.partition_path("t", NIGHT) / "part-deadbeef0000-00000.parquet"
    stray.write_bytes(b"half a parquet file")
    assert lake.read_partition("t", NIGHT).num_rows == 3 and len(lake.partition_files("t", NIGHT)) == 1
    lake.write_table("t", NIGHT, small(4))
    assert not stray.exists() and lake.read_partition("t", NIGHT).num_rows == 4
    # A night whose only writer died before any commit has no partition at all.
    (lake.partition_path("t", NIGHTS[1]) / "part-deadbeef0000-00000.parquet").write_bytes(b"x")
    assert lake.partitions("t") == [NIGHT] and lake.partition_files("t", NIGHTS[1]) == []


def test_the_warehouse_loads_a_memory_lake(memory_lake: Lake, tmp_path: Path) -> None:
    lake = memory_lake
    lake.write_table("countries", NIGHT, pa.table({"code": ["FR"], "name": ["France"]}))
    with Warehouse(tmp_path / "w.duckdb") as db:
        assert db.load_night(lake, NIGHT, ["countries"]) == {"countries": 1}
        assert db.query("SELECT code, snapshot_date FROM countries").to_pylist() == [{"code": "FR", "snapshot_date": NIGHT}]


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
    lake.write_table("t", NIGHT, small(2))
    assert Lake(tmp_path / "d").read_partition("t", NIGHT).num_rows == 2
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
    from pipelines.cli import app as run_app

    (tmp_path / "watchlist.yaml").write_text("players:\n" + player_line("PokerStars", "Borbas.Geri") + "\n")
    args = ["run", "--sandbox", "--watchlist", str(tmp_path / "watchlist.yaml"), "--data-dir", "memory://x/y"]
    result = CliRunner().invoke(run_app, args)  # said before Dagster starts or any search is spent
    assert result.exit_code == 1 and "TOURNEYLAKE_WAREHOUSE: must be set" in result.output


# ---------------------------------------------------------------------- a real S3 API (moto)
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """``moto_server`` on a loopback port; its endpoint URL. Killed by its pid at teardown."""
    port = _free_port()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("moto_server did not come up within 30 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def s3(moto: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh bucket on moto with the usual AWS environment; its ``s3://bucket/prefix`` URL."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": moto,
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    return f"s3://{bucket}/prefix"


def _subprocess_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


_READ_LAKE = """
import sys, orjson
from tourneylake.lake.lake import Lake
lake = Lake(sys.argv[1])
out = {t: sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in lake.read_table(t).to_pylist())
       for t in lake.tables()}
print(orjson.dumps(out).decode())
"""


def _rows_by_table(lake: Lake) -> dict[str, list[str]]:
    return {
        t: sorted(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() for r in lake.read_table(t).to_pylist())
        for t in lake.tables()
    }


@pytest.mark.slow
def test_two_nights_on_s3_rebuilt_and_read_by_another_process(s3: str, tmp_path: Path, monkeypatch) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    with running_sandbox(seed=4, today=NIGHTS[0]) as server:
        settings = sandbox_settings(server, tmp_path, warehouse=warehouse).with_overrides(data_dir=s3)
        assert [outcome.searches_spent for outcome in harvest_nights(server, settings, NIGHTS)] == [1, 1]
    lake = Lake(s3)
    assert lake.partitions("player_statistics") == NIGHTS and lake.source == settings.source
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


_KILLED_WRITER = """
import os, signal, sys
import pyarrow as pa
from tourneylake.lake.lake import Lake, PartitionWriter
lake = Lake(sys.argv[1])
commit = PartitionWriter._commit
def die(self, folder, *, failed):
    if self.rows == 7:  # the second writer: its parts are written, its marker is not
        print("parts written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return commit(self, folder, failed=failed)
PartitionWriter._commit = die
lake.write_table("t", "2026-11-20", pa.table({"n": list(range(3))}))
with lake.partition_writer("t", "2026-11-20") as w:
    w.write(pa.table({"n": list(range(4))}))
    w.write(pa.table({"n": list(range(3))}))
with lake.partition_writer("t", "2026-11-21") as w:  # never reached
    w.write(pa.table({"n": [1]}))
"""


@pytest.mark.slow
def test_a_writer_killed_mid_partition_leaves_the_previous_one(s3: str) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, s3], capture_output=True, env=_subprocess_env(), timeout=120, check=False
    )
    assert killed.returncode == -signal.SIGKILL and b"parts written" in killed.stdout, killed.stderr.decode()
    lake = Lake(s3)
    assert lake.partitions("t") == [NIGHT]
    assert lake.read_partition("t", NIGHT).column("n").to_pylist() == [0, 1, 2]  # the previous partition, whole
    folder = lake.partition_path("t", NIGHT)
    assert len([p for p in folder.iterdir() if p.name.startswith("part-")]) == 3  # 1 committed + 2 stray
    lake.write_table("t", NIGHT, small(1))  # the next commit cleans the killed writer's parts up
    assert [p.name.startswith("part-") for p in folder.iterdir()].count(True) == 1


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


def test_the_readme_says_how_to_use_object_storage() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The lake on object storage", 1)[1].split("\n## ", 1)[0]
    for needle in ("TOURNEYLAKE_DATA_DIR", "TOURNEYLAKE_WAREHOUSE", "AWS_", "_commit.json", "One writer"):
        assert needle in section
