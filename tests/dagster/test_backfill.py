"""One account, one set of sessions: a three-night backfill through Dagster — three runs of the
nightly job at once, as separate processes (``dagster job execute``, as a run worker executes a
run) on one persistent instance with the shipped ``dagster_home/dagster.yaml`` — never has more
calls in flight at the service than ``TOURNEYLAKE_CONCURRENCY``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.helpers import DEMO_ENV, REPO, ledger_rows
from tourneylake.config import Settings
from tourneylake.sandbox import DEMO, running_sandbox

pytestmark = [pytest.mark.xdist_group("backfill"), pytest.mark.slow]

NIGHTS = [date(2026, 11, 18) + timedelta(days=i) for i in range(3)]
CONCURRENCY = 4


def test_a_three_night_backfill_never_exceeds_the_concurrency(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
    env["DAGSTER_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        DagsterInstance.get().dispose()  # create the instance's storage once, before three runs race for it
    finally:
        del os.environ["DAGSTER_HOME"]

    with running_sandbox(seed=5, today=NIGHTS[-1], latency_ms=40) as server:
        env.update(
            TOURNEYLAKE_BASE_URL=server.base_url,
            **DEMO_ENV,
            TOURNEYLAKE_CONCURRENCY=str(CONCURRENCY),
            TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"),
            TOURNEYLAKE_WATCHLIST="watchlist.yaml",
            TOURNEYLAKE_FIRST_NIGHT=NIGHTS[0].isoformat(),
        )
        server.accounts.reset_peak(DEMO.username)
        command = [
            sys.executable,
            "-m",
            "dagster",
            "job",
            "execute",
            "-m",
            "tourneylake.pipelines.definitions",
            "-a",
            "defs",
            "-j",
            "nightly",
        ]
        runs = [
            subprocess.Popen(
                [*command, "--tags", json.dumps({"dagster/partition": night.isoformat()})],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for night in NIGHTS
        ]
        outputs = [run.communicate(timeout=240) for run in runs]
        peak = server.accounts.users[DEMO.username].peak_in_flight
    for run, (_out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err[-2000:]
    assert 1 <= peak <= CONCURRENCY
    settings = Settings(data_dir=tmp_path / "data")
    assert [sum(row["cost"] for row in ledger_rows(settings, night)) for night in NIGHTS] == [13, 13, 13]
