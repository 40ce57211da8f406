"""``tourneylake standby`` as a user runs it: the standby in its own process, ``tourneylake run``
(the console script's module, ``pipelines.command``) handing nights to it over its socket, and
the cases where it must step aside (another interpreter, code changed on disk)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import pytest

from tests.end_to_end.test_cli import _summaries_kept, clean_env
from tests.helpers import REPO

pytestmark = [pytest.mark.xdist_group("cli"), pytest.mark.slow]

COMMAND = [sys.executable, "-m", "pipelines.command"]
NIGHT = date(2026, 11, 20)


# A standby that also watches the file named by its first argument, as it watches its own
# sources: a test changes that file, not one of the checkout's (other tests' standbys watch those).
WATCHING = """
import os, sys
import pipelines.standby as standby
found, extra = standby._sources, sys.argv.pop(1)
standby._sources = lambda: {**found(), extra: os.stat(extra).st_mtime_ns}
from pipelines.cli import main
main()
"""


@contextmanager
def standby(socket_file: Path, *options: str, watching: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    """``tourneylake standby`` on ``socket_file``, once it listens; stopped by its pid after."""
    env = clean_env(TOURNEYLAKE_STANDBY=str(socket_file))
    command = ["-m", "pipelines.cli"] if watching is None else ["-c", WATCHING, str(watching)]
    waiting = subprocess.Popen(
        [sys.executable, *command, "standby", *options], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not socket_file.exists():
            assert waiting.poll() is None, waiting.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the standby did not start"
            time.sleep(0.1)
        yield waiting
    finally:
        if waiting.poll() is None:
            os.killpg(waiting.pid, signal.SIGTERM)
        try:
            waiting.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(waiting.pid, signal.SIGKILL)
            waiting.communicate(timeout=10)


def run_pid(home: Path, night: date) -> int:
    """The pid the night's last Dagster run was executed in (its ``tourneylake/pid`` tag)."""
    from dagster import DagsterInstance, RunsFilter

    from pipelines.failures import PID_TAG

    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with DagsterInstance.get() as instance:
            (run,) = instance.get_runs(RunsFilter(job_name="nightly", tags={"dagster/partition": night.isoformat()}), limit=1)
            return int(run.tags[PID_TAG])
    finally:
        os.environ.pop("DAGSTER_HOME", None)


def test_a_night_handed_to_the_standby_runs_in_its_fork_with_the_callers_settings(tmp_path: Path) -> None:
    """The night runs in a child of the standby (not the caller's process), with the caller's
    environment (its watchlist, data directory, password), directory and streams; its summary
    and exit status come back; a usage error is the child's one line and exit 2."""
    socket_file, home, data = tmp_path / "standby.sock", tmp_path / "home", tmp_path / "data"
    home.mkdir()
    (home / "dagster.yaml").write_bytes((REPO / "dagster_home" / "dagster.yaml").read_bytes())
    with standby(socket_file) as waiting:
        env = clean_env(TOURNEYLAKE_STANDBY=str(socket_file), DAGSTER_HOME=str(home))
        args = ["run", "--sandbox", "--date", NIGHT.isoformat(), "--data-dir", str(data), "--watchlist", "watchlist.yaml"]
        night = subprocess.Popen([*COMMAND, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = night.communicate(timeout=240)
        assert night.returncode == 0, err[-3000:]
        assert "searches spent: 13" in out and "run ok" in out and "models ok: 17 built" in out
        assert "summaries: 13/13 (" in err  # the library's progress lines, on the caller's stderr
        assert (data / "warehouse.duckdb").is_file()
        if run_pid(home, NIGHT) in (night.pid, waiting.pid):
            waiting.terminate()
            raise AssertionError(waiting.communicate(timeout=60)[1][-3000:])

        wrong = subprocess.run(
            [*COMMAND, *args], cwd=REPO, capture_output=True, text=True, timeout=240,
            env={**env, "TOURNEYLAKE_PASSWORD": "definitely-wrong"},
        )  # fmt: skip
        assert wrong.returncode == 1  # the caller's password, not the standby's (it has none)
        assert wrong.stderr.strip().splitlines()[-1].startswith("error: run failed:")
        assert "definitely-wrong" not in wrong.stdout + wrong.stderr

        usage = subprocess.run([*COMMAND, "run", "--date", "nonsense"], cwd=REPO, env=env, capture_output=True, text=True)
        assert usage.returncode == 2
        assert usage.stderr.strip().splitlines() == ["error: --date must be a date YYYY-MM-DD, got 'nonsense'"]
        assert waiting.poll() is None  # still waiting for the next night
    assert waiting.returncode == 0 and not socket_file.exists()  # SIGTERM: stopped, its socket gone


def test_ctrl_c_reaches_the_night_in_the_standby(tmp_path: Path) -> None:
    """Ctrl-C to the caller's process group while the night fetches: passed on to the child,
    which stops as in its own process: one line, exit 130, every paid answer kept."""
    from tourneylake.config import SANDBOX_USERNAME
    from tourneylake.lake.lake import Lake
    from tourneylake.sandbox import running_sandbox

    socket_file, data, home = tmp_path / "standby.sock", tmp_path / "data", tmp_path / "home"
    home.mkdir()
    with standby(socket_file), running_sandbox(seed=7, today=NIGHT, latency_ms=300) as server:
        env = clean_env(TOURNEYLAKE_STANDBY=str(socket_file), TOURNEYLAKE_BASE_URL=server.base_url, TOURNEYLAKE_CONCURRENCY="2")
        env["DAGSTER_HOME"] = str(home)
        args = ["run", "--date", NIGHT.isoformat(), "--data-dir", str(data), "--watchlist", "watchlist.yaml"]
        before = server.accounts.remaining(SANDBOX_USERNAME)
        caller = subprocess.Popen(
            [*COMMAND, *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and caller.poll() is None and not _summaries_kept(Lake(data), NIGHT):
            time.sleep(0.05)
        os.killpg(caller.pid, signal.SIGINT)
        out, err = caller.communicate(timeout=120)
        paid = before - server.accounts.remaining(SANDBOX_USERNAME)
        assert caller.returncode == 130, err[-2000:]
        assert err.strip().splitlines()[-1].startswith("error: interrupted") and "Traceback" not in err + out
        assert 0 < paid < 13 and _summaries_kept(Lake(data), NIGHT) == paid
        assert run_pid(home, NIGHT) != caller.pid  # it was the standby's child that stopped


def test_a_standby_steps_aside_for_changed_code_and_other_interpreters(tmp_path: Path) -> None:
    """A source file touched after the standby started: the night runs in the caller's own
    process, and the standby stops (its socket gone). A caller of another interpreter is never
    served, and a caller never hands its environment to a socket another user answers."""
    from pipelines import standby as standby_module

    socket_file, data = tmp_path / "standby.sock", tmp_path / "data"
    env = clean_env(TOURNEYLAKE_STANDBY=str(socket_file), DAGSTER_HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    source = tmp_path / "watched.py"  # one of the standby's sources, for this test alone
    source.write_text("")
    with standby(socket_file, watching=source) as waiting:
        os.environ[standby_module.STANDBY_ENV] = str(socket_file)
        try:
            identity = standby_module._identity
            standby_module._identity = lambda: "another checkout"  # type: ignore[assignment]
            assert standby_module.forward(["run", "--help"]) is None  # refused: the caller runs it
        finally:
            standby_module._identity = identity  # type: ignore[assignment]
        peer = standby_module._peer_uid
        try:  # a socket another user answers gets nothing (the environment holds secrets)
            standby_module._peer_uid = lambda conn: os.getuid() + 1  # type: ignore[assignment]
            assert standby_module.forward(["run", "--help"]) is None
        finally:
            standby_module._peer_uid = peer  # type: ignore[assignment]
            os.environ.pop(standby_module.STANDBY_ENV)
        assert waiting.poll() is None

        stat = source.stat()
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # an edit
        args = ["run", "--sandbox", "--date", NIGHT.isoformat(), "--data-dir", str(data), "--watchlist", "watchlist.yaml"]
        night = subprocess.Popen([*COMMAND, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = night.communicate(timeout=240)
        assert night.returncode == 0 and "run ok" in out, err[-2000:]
        assert run_pid(tmp_path / "home", NIGHT) == night.pid  # in the caller's own process
        _, said = waiting.communicate(timeout=30)
    assert waiting.returncode == 0 and not socket_file.exists()
    assert f"standby: {source} changed since it started: stopping" in said


def test_a_standby_ends_after_its_idle_hours_and_a_second_one_is_refused(tmp_path: Path) -> None:
    socket_file = tmp_path / "standby.sock"
    with standby(socket_file, "--idle-exit", "0.001") as waiting:  # 3.6 s without a night
        second = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "standby"], cwd=REPO, capture_output=True, text=True, timeout=120,
            env=clean_env(TOURNEYLAKE_STANDBY=str(socket_file)),
        )  # fmt: skip
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [f"error: a standby already runs on {socket_file}"]
        waiting.wait(timeout=60)  # by itself
        assert waiting.returncode == 0 and not socket_file.exists()
        assert waiting.stderr is not None and waiting.stderr.read().strip().endswith("standby: stopped")
