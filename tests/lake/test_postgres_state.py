"""Shared state in PostgreSQL (``TOURNEYLAKE_STATE_URL``): the ledger, locks and documents of a
lake in a real PostgreSQL 16 (PyPI's ``pgserver``), read back as the files give them; a dead
writer on any machine found by its connection, not its host or pid; a server restart survived."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path

import psycopg
import pytest

from tests.helpers import REPO
from tests.lake.test_ledger import row
from tourneylake.config import Settings, load_settings
from tourneylake.errors import ConfigError, LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger, LedgerWriter
from tourneylake.lake.postgres import shown_url
from tourneylake.lake.state import StateStore

# One worker runs these tests (their module's database, made once).
pytestmark = pytest.mark.xdist_group("postgres")
NIGHT = date(2026, 11, 20)


def _write_run(lake: Lake, run_id: str, *, answered: int, unanswered: int = 0, account: str | None = None) -> None:
    with LedgerWriter(lake, NIGHT, run_id, remaining_before=100, account=account, login="d1") as writer:
        for i in range(answered):
            writer.sent("player_summary", f"{run_id}-k{i}", 1)
            writer.record(f"{run_id}-k{i}", **row(run_id=run_id, player=f"P{i}", remaining_after=99 - i, duration_ms=1.25))
        for i in range(unanswered):
            writer.sent("player_summary", f"{run_id}-u{i}", 1)


def test_the_ledger_reads_the_same_rows_from_postgres_as_from_files(tmp_path: Path, state_url: str) -> None:
    files = Lake(tmp_path / "files").claim("sandbox")
    shared = Lake(tmp_path / "shared", state_url=state_url).claim("sandbox")
    for lake in (files, shared):
        _write_run(lake, "a", answered=3, account="main")
        _write_run(lake, "b", answered=2, unanswered=1, account="spare")
    by_files, by_postgres = Ledger(files), Ledger(shared)
    assert by_postgres.nights() == by_files.nights() == [NIGHT]
    assert by_postgres.table(NIGHT).equals(by_files.table(NIGHT))
    assert by_postgres.spent(NIGHT, account="main") == 3 and by_postgres.spend_per_night() == by_files.spend_per_night()
    assert not (tmp_path / "shared" / "lake" / "_ledger").exists()  # nothing in the lake's files
    closed = {run.run_id: run.closed for run in by_postgres.runs(NIGHT)}
    assert closed == {"a": True, "b": False}
    # the export the warehouse loads is the same partition either way
    by_files.publish(NIGHT)
    by_postgres.publish(NIGHT)
    assert shared.tables.read_table("search_ledger", NIGHT).equals(files.tables.read_table("search_ledger", NIGHT))
    moment = datetime(2026, 11, 20, 2, tzinfo=UTC)
    assert (
        by_postgres.spent_since(moment, except_run="zzz", login="d1")
        == 5
        == by_files.spent_since(moment, except_run="zzz", login="d1")
    )


_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import date
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import LedgerWriter
    lake = Lake(sys.argv[1], state_url=sys.argv[2])
    writer = LedgerWriter(lake, date(2026, 11, 20), "killed", remaining_before=50, account="main")
    writer.sent("player_summary", "k1", 1)
    print("sent", flush=True)
    time.sleep(120)
    """
)


def test_a_writer_killed_on_another_machine_is_found_dead_by_its_connection(tmp_path: Path, state_url: str) -> None:
    """A run's writer holds it by its own connection: alive, nobody reconciles it; killed
    (``kill -9``: no goodbye), the server drops the connection and the run is found dead,
    with no host or pid in the question. Its reconciliation closes it once, under its lease."""
    lake = Lake(tmp_path, state_url=state_url).claim("sandbox")
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path), state_url], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "sent"
        assert Ledger(lake).dead_runs() == []  # alive: held
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
        deadline = time.monotonic() + 10
        while not (dead := Ledger(lake).dead_runs()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the closed socket
    finally:
        writer.kill()
    (run,) = dead
    assert run.run_id == "killed" and run.remaining_before == 50 and len(run.unanswered) == 1 and run.host is None
    book = Ledger(lake)
    assert book.still_open(run)
    reconciliation = row(run_id="killed", resource="unattributed", outcome="reconciled_after_crash", attempt=0)
    assert book.close_dead_run(run, reconciliation)
    assert not book.close_dead_run(run, reconciliation)  # once only
    assert book.dead_runs() == [] and not book.still_open(run)
    (closed,) = book.runs(NIGHT)
    assert closed.closed and [e["outcome"] for e in closed.entries] == ["reconciled_after_crash"]


def test_a_live_writer_keeps_its_run_from_a_reconciler(tmp_path: Path, state_url: str) -> None:
    lake = Lake(tmp_path, state_url=state_url).claim("sandbox")
    with LedgerWriter(lake, NIGHT, "live", remaining_before=10) as writer:
        writer.sent("player_summary", "k1", 1)
        book = Ledger(lake)
        assert book.dead_runs() == []
        assert not lake.shared.close_dead("live", [])  # its lease is held
        writer.record("k1", **row(run_id="live"))
    assert [run.closed for run in Ledger(lake).runs(NIGHT)] == [True]


def test_locks_exclude_other_holders_and_are_listed(tmp_path: Path, state_url: str) -> None:
    lake = Lake(tmp_path, state_url=state_url)
    other = Lake(tmp_path, state_url=state_url)
    with lake.locks.hold("harvest-main") as held:
        assert held
        with other.locks.hold("harvest-main", wait=False) as second:
            assert not second
        with other.locks.hold("harvest-spare", wait=False) as third:
            assert third
        with other.locks.every("harvest", wait=False) as every:
            assert every is None  # one is held elsewhere
    with other.locks.every("harvest", wait=False) as every:
        assert every == frozenset({"harvest-main", "harvest-spare"})
    assert lake.locks.names("harvest") == ["harvest-main", "harvest-spare"]
    assert lake.locks.lockable and not (tmp_path / "lake" / "_state").exists()


def test_a_waiting_lock_is_granted_when_the_holder_lets_go(tmp_path: Path, state_url: str) -> None:
    lake = Lake(tmp_path, state_url=state_url)
    order: list[str] = []
    with lake.locks.hold("settle"):
        waiter = threading.Thread(target=lambda: (lake.locks.hold("settle").__enter__(), order.append("waiter")))
        waiter.start()
        time.sleep(0.3)
        order.append("holder")
    waiter.join(10)
    assert order == ["holder", "waiter"]


def test_documents_live_in_postgres_and_concurrent_updates_both_land(tmp_path: Path, state_url: str) -> None:
    lake = Lake(tmp_path, state_url=state_url)
    store = StateStore(lake)
    assert store.read("cost_votes") == {}
    threads = [
        threading.Thread(target=store.update, args=("cost_votes", lambda d, i=i: d.__setitem__(f"r{i}", [i]))) for i in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert store.read("cost_votes") == {f"r{i}": [i] for i in range(6)}
    assert not (tmp_path / "lake" / "_state").exists()


def test_the_state_url_is_a_secret_never_shown(tmp_path: Path, state_url: str) -> None:
    settings = Settings(data_dir=tmp_path, state_url="postgresql://tl:hunter2-secret@127.0.0.1:1/nothing")
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.model_dump())
    with pytest.raises(LakeError) as failure:
        Lake.of(settings).locks.hold("x").__enter__()
    assert "hunter2" not in str(failure.value) and "127.0.0.1" in str(failure.value)
    assert "hunter2" not in shown_url("postgresql://tl:hunter2-secret@db/x")
    with pytest.raises(ConfigError) as bad:
        load_settings(state_url="mysql://tl:hunter2-secret@db/x")
    assert "TOURNEYLAKE_STATE_URL" in str(bad.value) and "hunter2" not in str(bad.value)


def test_a_writer_survives_a_server_restart(tmp_path: Path, state_url: str, postgres_server) -> None:
    """The server restarts between two lines: the writer reconnects, takes its run again and
    writes on; nothing is written twice."""
    from pgserver import pg_ctl

    lake = Lake(tmp_path, state_url=state_url).claim("sandbox")
    with LedgerWriter(lake, NIGHT, "restart", remaining_before=10) as writer:
        writer.sent("player_summary", "k1", 1)
        writer.record("k1", **row(run_id="restart"))
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=postgres_server.pgdata, user=postgres_server.system_user, timeout=60)
        writer.sent("player_summary", "k2", 1)
        writer.record("k2", **row(run_id="restart"))
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and len(run.entries) == 2 and run.unanswered == []
    with psycopg.connect(state_url) as conn:  # the lines, once each
        assert conn.execute("SELECT count(*) FROM tourneylake_ledger_lines WHERE run_id = 'restart'").fetchone() == (5,)
