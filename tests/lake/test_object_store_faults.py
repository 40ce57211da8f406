"""A night on an object store that fails as real ones do: a proxy in front of moto fails 15 % of
the requests (HTTP 500, SlowDown, connections dropped before or after the store acted, answers cut
half-way; bounded, never twice in a row for one object). The night completes, or fails with one
line and completes when run again; either way no paid answer is lost (every target's answer is in
the lake, its row in the ledger) and none is paid twice (the service's count moved by one search
a target), and the warehouse holds every target."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date
from pathlib import Path

import fsspec
import pytest

from tests.helpers import ledger_rows, player_line, sandbox_settings, write_watchlist
from tests.s3_proxy import running_proxy
from tourneylake.api import calls
from tourneylake.config import SANDBOX_USERNAME
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import RECEIVED
from tourneylake.pipelines.nightly import run_night
from tourneylake.tables.warehouse import Warehouse

pytestmark = pytest.mark.slow

NIGHT = date(2026, 11, 20)
SANDBOX = dict(seed=21, today=NIGHT, players=80)
PLAYERS = 30


def test_a_night_on_a_failing_store_loses_nothing_and_pays_nothing_twice(
    sandbox, moto: str, s3_env: Callable[[str], None], tmp_path: Path
) -> None:
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", endpoint_url=moto, key="testing", secret="testing", skip_instance_cache=True).mkdir(bucket)
    roster = sandbox.world.roster(PLAYERS)
    with running_proxy(moto, faults=0.15, max_faults=400, seed=3) as proxy:  # a night asks ~200 requests
        s3_env(proxy.url)
        settings = sandbox_settings(sandbox, tmp_path, warehouse=tmp_path / "w.duckdb", concurrency=4)
        settings = settings.with_overrides(data_dir=f"s3://{bucket}/lake")
        write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in roster) + "\n")
        before = sandbox.accounts.remaining(SANDBOX_USERNAME)
        reports = [run_night(settings, NIGHT)]
        while not reports[-1].success and len(reports) < 3:  # failed cleanly: run again, as the schedule would
            assert reports[-1].failure and "\n" not in reports[-1].failure and "Traceback" not in reports[-1].failure
            reports.append(run_night(settings, NIGHT))
        faults = proxy.stats()["faults"]
        assert reports[-1].success, [r.failure for r in reports]
        assert sum(faults.values()) >= 20 and set(faults) == {"5xx", "slowdown", "drop", "truncate"}, faults
        spent = before - sandbox.accounts.remaining(SANDBOX_USERNAME)
        assert spent == PLAYERS  # each target paid once, whatever the store did
        assert sum(int(row["cost"]) for row in ledger_rows(settings, NIGHT)) == spent  # the ledger is the bill
        lake = Lake(settings.data_dir)
        answers = {raw.key["player"] for raw in lake.raw.bodies(NIGHT, calls.PLAYER_SUMMARY)}
        assert answers == {player for _, player in roster}  # every paid answer kept
        assert not lake.raw.refs(NIGHT, status=RECEIVED)  # and named by its status
    with Warehouse(settings.warehouse_path, read_only=True) as db:
        assert db.table_counts()["player_snapshots"] == PLAYERS
