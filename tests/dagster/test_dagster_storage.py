"""The instance's event log (``pipelines/dagster_storage.py``) with the shipped ``dagster.yaml``:
the same SQLite files as Dagster's default, its connections kept open.

Real Dagster runs on a real instance: what one instance writes, a second one (another process
would, as the UI does) reads; events stored from several threads at once are all kept; a process
reading many runs keeps only a bounded number of databases open.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest
from dagster import AssetCheckResult, AssetKey, AssetMaterialization, DagsterInstance, asset, asset_check, materialize

from pipelines.dagster_storage import _OPEN_SHARDS, OpenSqliteEventLogStorage
from tests.helpers import shipped_dagster_home


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    return shipped_dagster_home(tmp_path, monkeypatch)


@asset
def counted() -> int:
    return 1


@asset_check(asset=counted)
def positive() -> AssetCheckResult:
    return AssetCheckResult(passed=True)


def test_runs_are_stored_and_read_back_by_another_instance(home: Path) -> None:
    with DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, OpenSqliteEventLogStorage)
        results = [materialize([counted], instance=instance) for _ in range(3)]
        assert all(r.success for r in results)
    assert (home / "history" / "runs" / "index.db").is_file()
    # The first run's empty database was kept: the next two were copies of it, as readable.
    assert len(list((home / "history" / "runs").glob(".run-shard-*.sqlite"))) == 1
    with DagsterInstance.get() as reader:  # a second instance on the same files, as the UI is
        assert len(reader.get_runs()) == 3
        assert set(reader.event_log_storage.get_all_run_ids()) == {r.run_id for r in results}  # the copy is no run
        for result in results:
            kinds = [e.dagster_event.event_type_value for e in reader.all_logs(result.run_id) if e.dagster_event]
            assert "ASSET_MATERIALIZATION" in kinds and kinds[-1] == "PIPELINE_SUCCESS"
        latest = reader.get_latest_materialization_event(AssetKey("counted"))
        assert latest is not None and latest.run_id == results[-1].run_id


def test_events_stored_from_several_threads_are_all_kept(home: Path) -> None:
    with DagsterInstance.get() as instance:
        run = materialize([counted], instance=instance)

        def report(n: int) -> None:
            for i in range(20):
                instance.report_runless_asset_event(AssetMaterialization(AssetKey(["threaded", f"{n}-{i}"])))

        threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        keys = {k.to_user_string() for k in instance.get_asset_keys() if k.path[0] == "threaded"}
        assert len(keys) == 80
        assert instance.get_run_by_id(run.run_id).is_success


def test_a_process_reading_many_runs_keeps_few_databases_open(home: Path) -> None:
    with DagsterInstance.get() as instance:
        runs = [materialize([counted], instance=instance).run_id for _ in range(_OPEN_SHARDS + 3)]
        for run_id in runs:
            assert instance.all_logs(run_id)
        storage = instance.event_log_storage
        assert isinstance(storage, OpenSqliteEventLogStorage)
        assert len(storage._engines) <= _OPEN_SHARDS
        assert set(storage._connections) <= set(storage._engines)  # a connection only for an open database


def test_a_stamped_database_is_opened_without_reading_every_migration(home: Path, monkeypatch) -> None:
    """Dagster learns the newest schema revision by loading every migration script; a database
    already stamped needs only its stamp read. A new home still gets its schema made."""
    from dagster._core.storage.event_log.sqlite import sqlite_event_log

    checked: list[object] = []
    real = sqlite_event_log.check_alembic_revision
    monkeypatch.setattr(sqlite_event_log, "check_alembic_revision", lambda *a: checked.append(a) or real(*a))
    with DagsterInstance.get() as instance:  # a new home: the index is made (and stamped)
        assert materialize([counted], instance=instance).success
    made = len(checked)
    assert made >= 1
    with DagsterInstance.get() as instance:  # the same home again: its index is stamped
        assert materialize([counted], instance=instance).success
        assert len(instance.get_runs()) == 2
    assert len(checked) == made


def test_the_schema_is_asked_once_per_table_not_once_per_event(home: Path, monkeypatch) -> None:
    """Dagster asks whether a table exists before storing each check evaluation (a new engine
    and connection each time); a table found stays found, a missing one is asked again."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    asked: list[str] = []
    real = SqliteEventLogStorage.has_table
    monkeypatch.setattr(SqliteEventLogStorage, "has_table", lambda self, name: asked.append(name) or real(self, name))

    with DagsterInstance.get() as instance:
        for _ in range(3):
            assert materialize([counted, positive], instance=instance).success
        evaluations = instance.event_log_storage.get_asset_check_execution_history(positive.check_key, limit=10)
        assert len(evaluations) == 3
        storage = instance.event_log_storage
        assert asked.count("asset_check_executions") == 1
        assert not storage.has_table("no_such_table") and not storage.has_table("no_such_table")
        assert asked.count("no_such_table") == 2


def test_a_process_keeps_one_instance_per_home(home: Path, tmp_path: Path, monkeypatch) -> None:
    """``tourneylake run``'s runs share one instance of ``$DAGSTER_HOME``; another home gets its
    own (the first disposed), and so does a forked child (its parent's is left to the parent)."""
    from pipelines import nightly

    first = nightly.persistent_instance()
    assert nightly.persistent_instance() is first
    assert materialize([counted], instance=first).success
    storage = first.event_log_storage
    assert isinstance(storage, OpenSqliteEventLogStorage) and storage._engines

    monkeypatch.setattr(nightly, "_kept", (-1, str(home), first))  # as a forked child sees its parent's
    child = nightly.persistent_instance()
    assert child is not first and storage._engines  # the parent's is not disposed by the child
    assert len(child.get_runs()) == 1

    other = tmp_path / "other_home"
    other.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(other))
    assert nightly.persistent_instance() is not child
    assert not child.event_log_storage._engines and not child.event_log_storage._connections  # disposed
    nightly._dispose_kept()
    assert nightly._kept is None


# The storages an instance may name beside the event log (see pipelines/dagster_storage.py).
STAMPED = """
run_storage:
  module: pipelines.dagster_storage
  class: StampedSqliteRunStorage
schedule_storage:
  module: pipelines.dagster_storage
  class: StampedSqliteScheduleStorage
compute_logs:
  module: pipelines.dagster_storage
  class: ThreadMirroredComputeLogManager
"""


def test_stamped_run_and_schedule_storages_share_dagsters_files(home: Path, monkeypatch) -> None:
    """Runs and schedules written through the stamped storages are Dagster's own files (the
    default storages read them, and the other way round); a stamped database is opened by its
    stamp, not checked against every migration."""
    from dagster._core.storage.runs.sqlite import sqlite_run_storage
    from dagster._core.storage.schedules.sqlite import sqlite_schedule_storage

    from pipelines.dagster_storage import StampedSqliteRunStorage, StampedSqliteScheduleStorage

    shipped = (home / "dagster.yaml").read_text()
    with DagsterInstance.get() as default:  # Dagster's run and schedule storages make the files
        first = materialize([counted], instance=default).run_id
    (home / "dagster.yaml").write_text(shipped + STAMPED)
    checked: list[str] = []
    for module in (sqlite_run_storage, sqlite_schedule_storage):
        real = module.check_alembic_revision
        monkeypatch.setattr(module, "check_alembic_revision", lambda *a, real=real: checked.append("x") or real(*a))
    with DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, StampedSqliteRunStorage)
        assert isinstance(instance.schedule_storage, StampedSqliteScheduleStorage)
        assert checked == []  # both stamped: read by their stamps
        second = materialize([counted], instance=instance).run_id
        assert {r.run_id for r in instance.get_runs()} == {first, second}
        assert instance.get_run_by_id(second).is_success and instance.all_instigator_state() == []
    (home / "dagster.yaml").write_text(shipped)
    with DagsterInstance.get() as default:  # the default storages read what the stamped ones wrote
        assert default.get_run_by_id(second).is_success and len(default.get_runs()) == 2


def test_stamped_storages_make_a_new_homes_databases(home: Path) -> None:
    """On a new home the stamped storages make their databases as Dagster's do (schema, stamp)."""
    (home / "dagster.yaml").write_text((home / "dagster.yaml").read_text() + STAMPED)
    with DagsterInstance.get() as instance:
        assert materialize([counted], instance=instance).success
    for database in (home / "history" / "runs.db", home / "schedules" / "schedules.db"):
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT version_num FROM alembic_version").fetchone()


SAYS = """
import os, subprocess, sys
from dagster import DagsterInstance, asset, materialize

@asset
def says() -> None:
    print("to stdout", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    subprocess.run(["echo", "from a child"], check=True)

with DagsterInstance.get() as instance:
    run = materialize([says], instance=instance)
    print("run", run.run_id, flush=True)
"""


def test_a_runs_output_is_captured_for_the_ui_and_shown_on_the_terminal(home: Path, tmp_path: Path) -> None:
    """The thread-mirrored compute logs: what a run's step writes (its children included) is in
    the run's captured logs, which the UI reads, and on the terminal as it is written; no
    `tail` process is started for it."""
    import subprocess
    import sys

    from tests.helpers import REPO

    (home / "dagster.yaml").write_text((home / "dagster.yaml").read_text() + STAMPED)
    script = tmp_path / "says.py"
    script.write_text(SAYS)
    tails = tmp_path / "bin"
    tails.mkdir()
    (tails / "tail").write_text("#!/bin/sh\necho tail-was-run >&2\nexit 1\n")
    (tails / "tail").chmod(0o755)
    env = {**os.environ, "PATH": f"{tails}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert "to stdout" in done.stdout and "from a child" in done.stdout and "to stderr" in done.stderr
    assert "tail-was-run" not in done.stderr
    run_id = done.stdout.split("run ", 1)[1].split()[0]
    with DagsterInstance.get() as instance:
        (captured,) = [
            e.dagster_event.logs_captured_data
            for e in instance.all_logs(run_id)
            if e.dagster_event and e.dagster_event.event_type_value == "LOGS_CAPTURED"
        ]
        manager = instance.compute_log_manager
        data = manager.get_log_data(manager.build_log_key_for_run(run_id, captured.file_key))
    assert b"to stdout" in data.stdout and b"from a child" in data.stdout and b"to stderr" in data.stderr
