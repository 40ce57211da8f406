"""The night's summary tables made in a second process (``tourneylake.tables.worker``).

Against the sandbox over real HTTP, with real Parquet and a real worker process:

- the worker's tables are the in-process tables, row for row, and the outcome is the same;
- a worker killed mid-night stops new searches; every paid answer is in the raw store, and the
  re-run normalises them without paying again;
- the worker's environment holds none of the service's credentials.
(An answer the worker's normaliser refuses, and its warning in the harvest's log:
``tests/test_faults.py``, hostile answers; the harvest killed with its worker running:
``tests/test_cli.py``.)
"""

from __future__ import annotations

import os
import signal
from datetime import date
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from tests.helpers import REPO, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import OK
from tourneylake.night.harvest import harvest_players, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.runtime.pipes import worker_env
from tourneylake.sandbox import DEMO
from tourneylake.tables.normalize.summary import SUMMARY_TABLES
from tourneylake.tables.worker import TablesWorkerError

pytestmark = pytest.mark.xdist_group("tables_worker")

NIGHT = date(2026, 11, 20)


SANDBOX = dict(seed=33, today=NIGHT, players=200)


@pytest.fixture(autouse=True)
def _no_rewrites_left(sandbox):
    yield
    sandbox.app.answer_rewrites.clear()


def _settings(sandbox, data_dir: Path, players: list[tuple[str, str]], **overrides):
    settings = sandbox_settings(sandbox, data_dir, **{"concurrency": 4, **overrides})
    write_watchlist(
        settings,
        'filters:\n  sng: "Class:SNG"\n  mtt: "Class:SCHEDULED"\nplayers:\n'
        + "\n".join(player_line(n, p, "[sng, mtt]") for n, p in players)
        + "\n",
    )
    return settings


def _harvest(settings):
    session = Session.open(settings, settings.base_url, NIGHT)
    refresh_metadata(session)
    return harvest_players(session, load_watchlist(settings.watchlist), batch_size=16)


def _table(settings, name: str):
    table = Lake(settings.data_dir).tables.read(name, NIGHT)  # the night's current version
    for i, f in enumerate(table.schema):  # dictionaries hold their values in arrival order
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(f.type.value_type))
    plain = [f.name for f in table.schema if not pa.types.is_nested(f.type)]
    return table.sort_by([(c, "ascending") for c in plain if c not in _PER_FETCH])


# When each answer was made and arrived: the two harvests fetched at different times.
_PER_FETCH = {"fetched_at", "server_time", "listed_at"}


def _workers() -> list[psutil.Process]:
    """This process's live tables workers (a child that has ended, a zombie not yet reaped
    among them, is none: its command line can no longer be read)."""
    return [p for p in psutil.Process().children(recursive=True) if "tourneylake.tables.worker" in _cmdline(p)]


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return ""


def _no_worker_left() -> bool:
    """Every worker has ended (one that committed may still be tearing its interpreter down)."""
    psutil.wait_procs(_workers(), timeout=30)
    return not _workers()


def test_the_worker_makes_the_in_process_tables_row_for_row(sandbox, tmp_path: Path) -> None:
    roster = sandbox.world.roster(40)  # 80 pairs, five batches of 16
    made = {}
    for mode in ("off", "on"):
        settings = _settings(sandbox, tmp_path / mode, roster, tables_worker=mode)
        outcome = _harvest(settings)
        assert outcome.fetched == 80 and not outcome.failed, mode
        assert outcome.rows["player_snapshots"] == 80
        made[mode] = (settings, outcome)
    (off, off_outcome), (on, on_outcome) = made["off"], made["on"]
    assert on_outcome.rows == off_outcome.rows
    for name in SUMMARY_TABLES:
        left, right = _table(off, name), _table(on, name)
        assert left.schema == right.schema and left.num_rows == right.num_rows > 0, name
        differ = [c for c in left.column_names if c not in _PER_FETCH and not left.column(c).equals(right.column(c))]
        assert not differ, (name, differ)
    assert _no_worker_left()


def test_a_killed_worker_stops_new_searches_and_the_re_run_pays_nothing_twice(sandbox, tmp_path: Path) -> None:
    roster = sandbox.world.roster(60)  # 120 pairs
    settings = _settings(sandbox, tmp_path, roster, tables_worker="on", concurrency=2)
    answered: list[int] = []
    seen_env: list[str] = []

    def kill_the_worker_at_the_20th(body: bytes, fmt: str) -> bytes:
        answered.append(1)
        if len(answered) == 20:
            for worker in _workers():
                seen_env.append(Path(f"/proc/{worker.pid}/environ").read_bytes().decode(errors="replace"))
                os.kill(worker.pid, signal.SIGKILL)
        return body

    for player in roster:
        sandbox.app.answer_rewrites[player] = kill_the_worker_at_the_20th
    before = remaining(settings)
    with pytest.raises(TablesWorkerError, match="tables worker"):
        _harvest(settings)
    spent = before - remaining(settings)
    assert seen_env and DEMO.password not in seen_env[0] and "TOURNEYLAKE_" not in seen_env[0]
    assert 20 <= spent < 120  # no new search once the worker was gone (the calls in flight finished)
    lake = Lake(settings.data_dir)
    assert len(list(lake.raw.bodies(NIGHT, calls.PLAYER_SUMMARY, status=OK))) == spent  # every paid answer kept
    assert not lake.tables.nights("player_snapshots")  # no partial tables committed

    sandbox.app.answer_rewrites.clear()
    outcome = _harvest(settings)  # the re-run: the stored answers normalised (free), the rest fetched
    assert outcome.reused == spent and outcome.fetched == 120 - spent and not outcome.failed
    assert before - remaining(settings) == 120  # each pair paid exactly once over both runs
    assert (
        lake.tables.read("player_snapshots", NIGHT).num_rows == 120
    )  # the committed parts (a killed writer's strays are in no commit)
    assert _no_worker_left()


def test_the_worker_environment_holds_no_credentials(monkeypatch) -> None:
    monkeypatch.setenv("TOURNEYLAKE_PASSWORD", "hunter2")
    monkeypatch.setenv("MAIN_ACCOUNT_PASSWORD", "hunter3")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter4")
    env = worker_env()
    assert not {"hunter2", "hunter3", "hunter4"} & set(env.values())
    assert "PATH" in env and env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)


def test_a_worker_started_ahead_makes_the_next_harvests_tables_and_one_never_used_ends(sandbox, tmp_path: Path) -> None:
    """``tourneylake run`` starts the worker before it imports Dagster (``prestart``): the
    harvest takes that very process; one no harvest takes ends when its input is closed."""
    from tourneylake.tables import worker as tables_worker

    settings = _settings(sandbox, tmp_path / "ahead", sandbox.world.roster(5), tables_worker="on")
    tables_worker.prestart()
    (ahead,) = _workers()
    outcome = _harvest(settings)
    assert outcome.fetched == 10 and outcome.rows["player_snapshots"] == 10
    assert tables_worker._started_ahead is None  # taken
    assert {p.pid for p in _workers()} <= {ahead.pid}  # no other was started (it may still be exiting)
    assert _no_worker_left()

    tables_worker.prestart()
    unused = tables_worker._started_ahead
    assert unused is not None and [p.pid for p in _workers()] == [unused.pid]
    tables_worker._dismiss_started_ahead()  # what the process's exit does
    assert unused.returncode == 0 and _no_worker_left()  # it ended by itself ("nothing to do")


# A stand-in for the worker whose normaliser fails on every answer (a bug): it says so, and
# still commits at "finish", as the worker does (what it could normalise is kept).
_CRASHING_WORKER = """
import sys
from tourneylake.runtime.pipes import receive, send
inp, out = sys.stdin.buffer, sys.stdout.buffer
while (message := receive(inp)) is not None:
    if message[0] == "add":
        send(out, ["crashed", "KeyError while normalising: '@id'"]); out.flush()
    elif message[0] == "finish":
        send(out, ["done", {}]); out.flush()
        break
"""


@pytest.mark.parametrize("told_before", [False, True], ids=["on-the-last-answer", "mid-night"])
def test_a_normaliser_failure_is_never_left_unsaid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told_before: bool) -> None:
    """On the night's last answer no later hand-over hears of it, so the last flush raises it
    (the night fails; the answer is in the raw store for a rebuild); one the harvest was told of
    mid-night is not raised twice."""
    import subprocess
    import sys
    import time
    from datetime import UTC, datetime

    from tourneylake.tables import worker as tables_worker

    def stand_in(**_: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", _CRASHING_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_env()
        )

    monkeypatch.setattr(tables_worker, "_spawn", stand_in)
    monkeypatch.setattr(tables_worker, "_take_started_ahead", lambda **_: None)
    key = {"network": "PokerStars", "player": "p", "filter": ""}
    with tables_worker.TablesWorker(Lake(tmp_path), NIGHT, 16) as worker:
        worker.add_stored()  # an empty night: nothing stored to read
        worker.add_answer(key, b"{}", "json", datetime.now(UTC))
        if told_before:
            deadline = time.monotonic() + 10
            while worker._crash is None and time.monotonic() < deadline:
                time.sleep(0.01)
            with pytest.raises(TablesWorkerError, match="KeyError while normalising"):
                worker.add_answer(key, b"{}", "json", datetime.now(UTC))
            worker.flush()  # told already: the night fails by that error, not by this one
        else:
            with pytest.raises(TablesWorkerError, match=r"could not normalise an answer \(KeyError.*rebuild --date 2026-11-20"):
                worker.flush()


def test_a_stuck_worker_is_stopped_and_the_night_fails_instead_of_hanging(
    sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker alive but stuck (a stalled disk; here stopped by a signal) when the night's last
    flush waits for it: after the bound it is killed and the night fails, its answers kept."""
    from tourneylake.tables import worker as tables_worker

    monkeypatch.setattr(tables_worker, "_STUCK_S", 2.0)
    roster = sandbox.world.roster(5)  # 10 pairs
    settings = _settings(sandbox, tmp_path, roster, tables_worker="on")
    answered: list[int] = []

    def stop_the_worker_at_the_last(body: bytes, fmt: str) -> bytes:
        answered.append(1)
        if len(answered) == 10:
            for worker in _workers():
                os.kill(worker.pid, signal.SIGSTOP)
        return body

    for player in roster:
        sandbox.app.answer_rewrites[player] = stop_the_worker_at_the_last
    with pytest.raises(TablesWorkerError, match="did not finish the night in 2 s and was stopped"):
        _harvest(settings)
    assert len(list(Lake(settings.data_dir).raw.bodies(NIGHT, calls.PLAYER_SUMMARY, status=OK))) == 10
    assert not Lake(settings.data_dir).tables.nights("player_snapshots")
    assert _no_worker_left()
