"""The first hour's rough edges: each a line that says what is wrong and what to change, never a
traceback or a silence, and nothing reported as ok that is not."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import DEMO_ENV, REPO, WebhookReceiver
from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.night.alerts import night_failed
from tourneylake.pipelines.cli import app
from tourneylake.tables.warehouse import Warehouse

NIGHT = date(2026, 11, 20)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith((ENV_PREFIX, "DAGSTER_HOME")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _closed_port() -> int:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        return closed.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_service_says_so_at_once_and_names_the_setting(tmp_path: Path) -> None:
    """A wrong URL: one line while the first call retries, then the night fails naming
    TOURNEYLAKE_BASE_URL; the night's other first calls do not wait for the same verdict again,
    and Dagster's step retries (for a service that answered, then failed) are not spent on it.
    A DAGSTER_HOME without a dagster.yaml prints no telemetry notice or banner before it."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"http://127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    env.update(DEMO_ENV, TOURNEYLAKE_BASE_URL=url, DAGSTER_HOME=str(home), TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "tourneylake.pipelines.cli", "run", "--date", NIGHT.isoformat(), "--watchlist", str(REPO / "watchlist.yaml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    retrying = [line for line in done.stderr.splitlines() if "trying again" in line]
    assert len(retrying) == 1 and f"cannot reach the service at {url}" in retrying[0], output[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run failed:") and f"cannot reach the service at {url}" in last, last
    assert "check TOURNEYLAKE_BASE_URL" in last and "run failed" in done.stdout and "run ok" not in done.stdout
    assert "Retry" not in output and "Traceback" not in output
    for banner in ("Telemetry", "Welcome to Dagster", "No dagster instance configuration file"):
        assert banner not in output
    assert "DAGSTER_HOME had no dagster.yaml: wrote tourneylake's instance settings there" in done.stderr
    assert (home / "dagster.yaml").read_text() == (REPO / "dagster_home" / "dagster.yaml").read_text()
    assert not (home / ".telemetry").exists() and (home / "history").is_dir()  # the run is recorded there, without telemetry


def test_a_data_directory_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    result = CliRunner().invoke(
        app, ["run", "--sandbox", "--data-dir", str(tmp_path / "a-file" / "data"), "--watchlist", str(REPO / "watchlist.yaml")]
    )
    assert result.exit_code == 1, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("error: TOURNEYLAKE_DATA_DIR: the data directory") and "a-file is a file, not a folder" in line


def test_a_failure_while_recording_a_failure_never_hides_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The night's record cannot be written (its data directory is below a file): one warning,
    and the alert of the first failure still goes out, with its reason."""
    (tmp_path / "a-file").write_text("not a folder")
    with WebhookReceiver() as hook, caplog.at_level(logging.WARNING, logger="tourneylake"):
        settings = Settings(data_dir=tmp_path / "a-file" / "data", alert_webhook_url=hook.url)
        night_failed(settings, NIGHT, "nightly", "run-1", "credentials refused by the service")
    (post,) = hook.posts
    assert post["reason"] == "credentials refused by the service" and post["night"] == NIGHT.isoformat()
    assert any("could not be recorded" in record.getMessage() for record in caplog.records)


def test_report_and_query_without_a_night_say_so_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    data = tmp_path / "data"
    for command in (["query"], ["query", "example"], ["report"]):
        result = runner.invoke(app, [*command, "--data-dir", str(data)])
        assert result.exit_code == 1 and result.output.strip().splitlines() == [
            f"error: no warehouse at {data / 'warehouse.duckdb'}: run `tourneylake run` first"
        ], result.output
    Warehouse(data / "warehouse.duckdb").close()  # its tables, no night in them
    for command, said in ((["query"], "holds no night yet"), (["report"], "holds no night yet")):
        result = runner.invoke(app, [*command, "--data-dir", str(data)])
        (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 1 and said in line and "run `tourneylake run` first" in line, result.output
        assert "Traceback" not in result.output
    assert runner.invoke(app, ["query", "SELECT 42 AS answer", "--data-dir", str(data)]).exit_code == 0  # SQL of one's own runs
    (data / "warehouse.duckdb").write_bytes(b"not a duckdb file" * 100)
    result = runner.invoke(app, ["report", "--data-dir", str(data)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1 and "cannot open the warehouse" in result.output
