"""Shards killed, their run killed, and the state database restarted, mid-night, with the state
in PostgreSQL: ``tourneylake run``'s night (accounts side by side, each in a process of its own)
run by a process of its own against the sandbox over HTTP.

- ``kill -9`` of one shard's process while its calls are in flight: the other account's night
  is kept, the run fails in one line naming the account and how its harvest died; a re-run pays
  for nothing twice, its tables are those of an uninterrupted night, and each account's ledger
  adds up to the service's charges (the dead run found by its connection and reconciled).
- ``kill -9`` of the run's own process alone: its shards see their parent gone and stop
  starting searches (the calls in flight finish and are kept); a re-run completes the night,
  paying again at most the calls that were in flight.
- PostgreSQL restarted mid-night: the writers reconnect and the night completes (or fails in
  one line and completes when run again); nothing paid is lost, the ledger is the bill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import postgres_at
from tests.helpers import DEMO_ENV, REPO, player_line, summary_rows
from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger

# One worker runs these tests (they share a night made once), on a PostgreSQL server of their
# own: one of them restarts it, and the suite's server goes on for the other workers' tests.
pytestmark = [pytest.mark.slow, pytest.mark.deploy, pytest.mark.xdist_group("shards_kill")]


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Any]:
    """This module's own server (the suite's ``postgres_server`` for its tests and its ``state_url``)."""
    with postgres_at(Path(tempfile.gettempdir()) / f"tourneylake-postgres-{uuid.uuid4().hex[:12]}") as server:
        yield server


NIGHT = date(2026, 11, 20)
SANDBOX = dict(seed=21, today=NIGHT, players=200, latency_ms=150)
USERS = {"left": "left@example.com", "right": "right@example.com"}
SANDBOX_USERS = [(user, f"{name}-pw", "subscriber", 100_000) for name, user in USERS.items()]
PLAYERS = 60

_DRIVER = """
import json, sys
from datetime import date
from tourneylake.pipelines.nightly import run_night
from tourneylake.config import load_settings
report = run_night(load_settings(), date.fromisoformat(sys.argv[1]))
print(json.dumps({"success": report.success, "failure": report.failure}), flush=True)
"""


def _environment(sandbox, folder: Path, state_url: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    watchlist = folder / "watchlist.yaml"
    accounts = "".join(
        f"  - {{name: {name}, username: {user}, password_env: TL_{name.upper()}_PW}}\n" for name, user in USERS.items()
    )
    players = "\n".join(player_line(n, p) for n, p in sandbox.world.roster(PLAYERS))
    watchlist.write_text("accounts:\n" + accounts + "players:\n" + players + "\n", encoding="utf-8")
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_HOME"))},
        "TL_LEFT_PW": "left-pw",
        "TL_RIGHT_PW": "right-pw",
        "TOURNEYLAKE_BASE_URL": sandbox.base_url,
        **DEMO_ENV,
        "TOURNEYLAKE_DATA_DIR": str(folder / "data"),
        "TOURNEYLAKE_WATCHLIST": str(watchlist),
        "TOURNEYLAKE_STATE_URL": state_url,
        "TOURNEYLAKE_CONCURRENCY": "2",
        "TOURNEYLAKE_MAX_ATTEMPTS": "2",
        "TOURNEYLAKE_RETRY_INITIAL_WAIT_S": "0.01",
        "TOURNEYLAKE_RETRY_PASS_WAIT_S": "0.05",
    }


def _start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, NIGHT.isoformat()],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=300)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, err[-3000:]
    return json.loads(lines[-1])


def _lake(env: dict[str, str]) -> Lake:
    return Lake(env["TOURNEYLAKE_DATA_DIR"], state_url=env["TOURNEYLAKE_STATE_URL"])


def _writer_of(env: dict[str, str], account: str, *, answered: int, within_s: float = 120) -> int:
    """The pid of ``account``'s live harvest once it has ``answered`` rows (from its run's header)."""
    lake = _lake(env)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for run in Ledger(lake).runs(NIGHT, account=account):
            if not run.closed and len(run.entries) >= answered and run.pid:
                return run.pid
        time.sleep(0.05)
    raise AssertionError(f"{account}'s harvest never answered {answered} calls")


def _ledger_by_account(lake: Lake) -> dict[str, int]:
    spent: dict[str, int] = {}
    for row in Ledger(lake).entries(NIGHT):
        spent[row["account"]] = spent.get(row["account"], 0) + int(row["cost"])
    return spent


def _remaining(sandbox) -> dict[str, int]:
    return {name: sandbox.app.accounts.remaining(user) for name, user in USERS.items()}


@pytest.fixture(scope="module")
def uninterrupted(sandbox, tmp_path_factory, state_url: str) -> dict[str, list[str]]:
    env = _environment(sandbox, tmp_path_factory.mktemp("uninterrupted"), state_url)
    assert _finish(_start(env))["success"]
    return summary_rows(_lake(env), NIGHT)


def test_a_shard_killed_mid_night_then_a_re_run(sandbox, tmp_path: Path, state_url: str, uninterrupted) -> None:
    env = _environment(sandbox, tmp_path, state_url)
    before = _remaining(sandbox)
    night = _start(env)
    os.kill(_writer_of(env, "left", answered=5), signal.SIGKILL)  # mid-night, calls in flight
    first = _finish(night)
    assert not first["success"] and first["failure"] == "account left's harvest died (killed by signal 9, SIGKILL)"
    lake = _lake(env)
    assert Ledger(lake).dead_runs(account="left")  # found by its connection, no host or pid guessed
    stored = {ref.name for ref in lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)}
    assert 5 <= len(stored) < PLAYERS  # right's answers and left's first ones are kept

    again = _finish(_start(env))
    assert again["success"], again
    assert not Ledger(lake).dead_runs()
    assert summary_rows(lake, NIGHT) == uninterrupted
    assert stored <= {ref.name for ref in lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)}
    drops = {name: before[name] - after for name, after in _remaining(sandbox).items()}
    assert _ledger_by_account(lake) == drops  # the ledger is the bill, the dead run reconciled
    assert sum(drops.values()) <= PLAYERS + 2  # a call in flight when killed may have been paid twice, no more
    with psycopg.connect(state_url) as conn:  # the ledger's rows are the database's, none in the lake's files
        assert conn.execute("SELECT count(*) FROM tourneylake_runs WHERE NOT closed").fetchone() == (0,)
    assert not (tmp_path / "data" / "lake" / "_ledger").exists()


def _ended(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_shards_whose_run_was_killed_stop_paying(sandbox, tmp_path: Path, state_url: str, uninterrupted) -> None:
    """``kill -9`` of the run's process alone (not its group): each shard notices its parent is
    gone and stops starting searches; nobody is left paying for answers nobody asked for."""
    env = _environment(sandbox, tmp_path, state_url)
    before = _remaining(sandbox)
    plan, latency = sandbox.app.plan, sandbox.app.plan.latency_ms
    plan.latency_ms = 600.0  # a night of minutes: only a shard that stops leaves most of it unpaid
    try:
        night = _start(env)
        shards = {account: _writer_of(env, account, answered=2) for account in USERS}
        os.kill(night.pid, signal.SIGKILL)
        night.wait(30)
        deadline = time.monotonic() + 120
        while not all(map(_ended, shards.values())) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(map(_ended, shards.values()))  # they ended by themselves, their night unfinished
    finally:
        plan.latency_ms = latency
    lake = _lake(env)
    spent = _ledger_by_account(lake)
    assert sum(spent.values()) < PLAYERS // 2  # stopped, not fetching the rest of the night
    assert all(run.closed for run in Ledger(lake).runs(NIGHT))  # the calls in flight finished and were booked

    again = _finish(_start(env))
    assert again["success"], again
    assert summary_rows(lake, NIGHT) == uninterrupted
    drops = {name: before[name] - after for name, after in _remaining(sandbox).items()}
    assert _ledger_by_account(lake) == drops
    assert sum(drops.values()) <= PLAYERS + 4  # at most the calls in flight (2 a shard) paid twice


def test_postgres_restarted_mid_night(sandbox, tmp_path: Path, state_url: str, postgres_server, uninterrupted) -> None:
    from pgserver import pg_ctl

    env = _environment(sandbox, tmp_path, state_url)
    before = _remaining(sandbox)
    night = _start(env)
    _writer_of(env, "right", answered=3)
    plan, latency = sandbox.app.plan, sandbox.app.plan.latency_ms

    def restart_while_calls_are_slow() -> None:
        """The service slowed while the server restarts, so the night cannot end meanwhile
        (a busy machine restarts it slower than a night of 60 calls takes)."""
        plan.latency_ms = 1000.0
        try:
            pg_ctl(["-w", "-m", "fast", "restart"], pgdata=postgres_server.pgdata, user=postgres_server.system_user, timeout=60)
        finally:
            plan.latency_ms = latency

    restart = threading.Thread(target=restart_while_calls_are_slow)
    restart.start()
    first = _finish(night)
    restart.join(60)
    lake = _lake(env)
    with psycopg.connect(state_url) as conn:
        (restarted,) = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    runs = Ledger(lake).runs(NIGHT)
    assert min(run.started_at for run in runs) < restarted  # while the night was being written
    assert restarted < max(datetime.fromisoformat(str(e["called_at"])) for run in runs for e in run.entries)
    if not first["success"]:  # failed cleanly (one line): the next run completes it
        assert first["failure"] and "\n" not in first["failure"]
        again = _finish(_start(env))
        assert again["success"], again
    assert summary_rows(lake, NIGHT) == uninterrupted
    drops = {name: before[name] - after for name, after in _remaining(sandbox).items()}
    assert _ledger_by_account(lake) == drops  # nothing paid is missing from the ledger
    assert not Ledger(lake).dead_runs()
