"""The instance's event log (``pipelines/dagster_storage.py``) with the shipped ``dagster.yaml``:
the same SQLite files as Dagster's default, its connections kept open.

Real Dagster runs on a real instance: what one instance writes, a second one (another process
would, as the UI does) reads; events stored from several threads at once are all kept; a process
reading many runs keeps only a bounded number of databases open.
"""

from __future__ import annotations

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
    assert not child.event_log_storage._engines  # the previous home's instance was disposed
    nightly._dispose_kept()
    assert nightly._kept is None
