"""Rebuilding nights from raw (``tourneylake.rebuild`` and ``tourneylake rebuild``): which nights,
one-line errors, and a damaged warehouse replaced by a fresh one — without a request.
(Identity with the original nights, every table compared both ways: ``test_history.py``.)"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.helpers import harvest_nights, sandbox_settings
from tourneylake.cli import app
from tourneylake.config import Settings
from tourneylake.harvest import last_harvested
from tourneylake.lake import Lake, LakeError
from tourneylake.rebuild import NothingToRebuild, rebuild
from tourneylake.sandbox import running_sandbox
from tourneylake.state import StateStore
from tourneylake.warehouse import Warehouse, WarehouseError

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
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


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
    (part,) = lake.partition_files("player_snapshots", NIGHTS[0])
    good = Path(part).read_bytes()
    raw_before = sorted(p.name for p in (lake.root / "_raw").rglob("*.json.gz"))
    Path(part).write_bytes(good[:100])  # a disk that lost the file's end
    with pytest.raises(LakeError) as caught:
        last_harvested(lake, NIGHTS[1])  # what the next night's plan reads
    message = str(caught.value)
    assert f"{part} is damaged" in message and "tourneylake rebuild --date 2026-11-20" in message and "\n" not in message
    with pytest.raises(LakeError) as caught, Warehouse(harvested.warehouse_path) as db:
        db.load_night(lake, NIGHTS[0])  # what the night's warehouse load reads
    assert str(caught.value).startswith(f"{part} is damaged (No magic bytes found at end of file): run `tourneylake rebuild")
    assert invoke(harvested, "--date", "2026-11-20").exit_code == 0
    assert last_harvested(lake, NIGHTS[1]) == {("PokerStars", "Borbas.Geri", "sng"): NIGHTS[0]}
    assert sorted(p.name for p in (lake.root / "_raw").rglob("*.json.gz")) == raw_before  # nothing paid touched


def test_a_damaged_state_file_is_one_line_naming_it(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    path = lake.root / "_state" / "nlq_cache.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{not json")
    with pytest.raises(LakeError) as caught:
        StateStore(lake).read("nlq_cache")
    assert f"state file {path} is damaged" in str(caught.value) and "move it aside" in str(caught.value)
    assert path.read_bytes() == b"{not json"
