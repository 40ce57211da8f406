"""The deployment in ``deploy/`` (issue 33): its Definitions on the Kubernetes, Celery and
multiprocess executors with the run configs shipped, each account's harvest a step of its own;
its Dagster instance on PostgreSQL (dagster-postgres); a real two-account night run by
``dagster job execute`` under the multiprocess executor on that instance, with tourneylake's
state shared in PostgreSQL too; and the Dockerfile, checked for what can be checked without a
Docker engine (it names files that exist, installs from the lock file, starts the code location)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import psycopg
import pytest
import yaml
from dagster import DagsterInstance, validate_run_config

from deploy.definitions import RUN_CONFIGS, deployment, run_config
from tests.helpers import REPO, accounts_run_side_by_side, dagster_cli_env, player_line, sandbox_settings, write_watchlist
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.sandbox import DEMO

# One worker runs these tests (their module's database, made once).
pytestmark = pytest.mark.xdist_group("postgres")
NIGHT = date(2026, 11, 20)
DEPLOY = REPO / "deploy"
ACCOUNTS = """accounts:
  - {name: left, username: left@example.com, password_env: TL_LEFT_PW}
  - {name: right, username: right@example.com, password_env: TL_RIGHT_PW}
"""
SANDBOX = dict(seed=5, today=NIGHT, players=100)
SANDBOX_USERS = [
    ("left@example.com", "left-pw", "subscriber", 10_000),
    ("right@example.com", "right-pw", "subscriber", 10_000),
]


def dagster_url(url: str) -> str:
    """The instance's URL names its driver (psycopg2, which dagster-postgres is written for)."""
    return url.replace("postgresql://", "postgresql+psycopg2://", 1)


@pytest.fixture
def two_accounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(ACCOUNTS + 'players:\n  - {network: PokerStars, name: "A"}\n  - {network: PokerStars, name: "B"}\n')
    monkeypatch.setenv("TOURNEYLAKE_WATCHLIST", str(watchlist))
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DAGSTER_CELERY_BROKER_URL", "pyamqp://guest@127.0.0.1//")
    monkeypatch.setenv("DAGSTER_CELERY_BACKEND_URL", "rpc://")
    return watchlist


@pytest.mark.parametrize("executor", ["k8s", "celery", "multiprocess"])
def test_each_account_is_a_step_of_its_own_on_every_executor(executor: str, two_accounts: Path) -> None:
    job = deployment(executor).resolve_job_def("nightly")
    assert job.executor_def.name == executor
    config = {**(run_config(executor) or {}), **job.partitioned_config.get_run_config_for_partition_key(NIGHT.isoformat())}
    assert validate_run_config(job, config)  # the shipped run config fits the executor's schema
    pools = {op.name: op.pool for op in job.graph.node_defs}  # each asset's op, each account's its own
    assert {"player_summaries__left", "player_summaries__right", "player_summaries"} <= set(pools)
    assert pools["player_summaries__left"] == "tourneylake_service_left"
    assert pools["player_summaries__right"] == "tourneylake_service_right"


def test_the_run_configs_shipped_are_the_executors(two_accounts: Path) -> None:
    assert set(RUN_CONFIGS) == {"k8s", "celery"} and all(path.is_file() for path in RUN_CONFIGS.values())
    k8s = yaml.safe_load(RUN_CONFIGS["k8s"].read_text())["execution"]["config"]
    assert k8s["env_secrets"] == ["tourneylake-secrets"] and k8s["env_config_maps"] == ["tourneylake-settings"]
    celery = yaml.safe_load(RUN_CONFIGS["celery"].read_text())["execution"]["config"]
    assert celery["broker"] == {"env": "DAGSTER_CELERY_BROKER_URL"}


def test_the_instance_is_on_postgres_with_a_slot_per_pool(tmp_path: Path, state_url: str, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_PG_URL", dagster_url(state_url))
    with DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 4
        instance.event_log_storage.set_concurrency_slots("tourneylake_service_left", 1)
        assert instance.event_log_storage.get_concurrency_info("tourneylake_service_left").slot_count == 1


def test_the_dockerfile_installs_from_the_lock_file_and_names_files_that_exist() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    copied = [src for line in re.findall(r"^COPY (.+)$", text, re.MULTILINE) for src in line.split()[:-1]]
    assert copied and all((REPO / source).exists() for source in copied), copied
    syncs = re.findall(r"uv sync ([^\n\\&]+)", text)
    assert syncs and all("--locked" in sync and "--group deploy" in sync for sync in syncs)
    command = json.loads(re.search(r"^CMD (.+)$", text, re.MULTILINE).group(1))
    module, attribute = command[command.index("-m") + 1], command[command.index("-a") + 1]
    assert (module, attribute) == ("deploy.definitions", "defs")
    assert "deploy.definitions" in (DEPLOY / "k8s" / "values.yaml").read_text()
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert compose["x-tourneylake"]["build"]["dockerfile"] == "deploy/Dockerfile"
    for service in ("webserver", "daemon"):
        workspace = compose["services"][service]["command"][-1]
        assert (REPO / workspace).is_file()
    worker = compose["services"]["worker"]["command"]
    assert (REPO / worker[worker.index("-y") + 1]).is_file()


@pytest.mark.slow
@pytest.mark.deploy
def test_a_two_account_night_on_a_postgres_instance_with_shared_state(
    sandbox, tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployment's code location run by ``dagster job execute`` on the multiprocess
    executor: the instance (run history, event log, pools) and tourneylake's state (ledger,
    locks, documents) both in PostgreSQL; every step in its own process; the accounts side by side."""
    settings = sandbox_settings(sandbox, tmp_path / "data")
    roster = sandbox.world.roster(30)
    write_watchlist(settings, ACCOUNTS + "players:\n" + "\n".join(player_line(n, p) for n, p in roster) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    env = dagster_cli_env(
        sandbox,
        settings,
        home,
        NIGHT,
        DAGSTER_PG_URL=dagster_url(state_url),
        DEPLOY_EXECUTOR="multiprocess",
        TL_LEFT_PW="left-pw",
        TL_RIGHT_PW="right-pw",
        TOURNEYLAKE_STATE_URL=state_url,
    )
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "job", "execute", "-m", "deploy.definitions", "-a", "defs", "-j", "nightly",
         "--tags", json.dumps({"dagster/partition": NIGHT.isoformat()})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]

    monkeypatch.setenv("DAGSTER_PG_URL", dagster_url(state_url))
    logged = accounts_run_side_by_side(home)
    assert "left-pw" not in logged and DEMO.password not in logged and state_url not in logged
    lake = Lake(settings.data_dir, state_url=state_url)
    assert lake.tables.read_table("player_snapshots", NIGHT).num_rows == 30
    ledger = Ledger(lake)
    assert {run.account for run in ledger.runs(NIGHT)} >= {"left", "right"} and not ledger.dead_runs()
    assert lake.tables.read_table("search_ledger", NIGHT).num_rows == len(list(ledger.entries(NIGHT))) > 0
    assert not (settings.data_dir / "lake" / "_ledger").exists()  # the ledger is the database's
    with psycopg.connect(state_url) as conn:  # both in one database here: Dagster's tables and ours
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
