"""The command line end to end, as a user runs it (subprocesses, the in-process sandbox)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import DEMO_ENV, REPO
from tourneylake.tables.models import manifest_document

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "tourneylake.pipelines.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOURNEYLAKE_")}
    env.update(extra)
    return env


def tourneylake(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=REPO, env=env or clean_env(), capture_output=True, text=True, timeout=timeout)


def test_run_then_query(tmp_path: Path) -> None:
    run = tourneylake("run", "--sandbox", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "searches spent: 13" in run.stdout and "run ok" in run.stdout
    assert "summaries: 13/13 (" in run.stderr and "13 searches spent" in run.stderr  # progress, as plain lines off a terminal
    # the library's lines as it wrote them (no `nightly - <run id> - <step> -`), no dbt chatter on the views' first build
    assert " - player_summaries - " not in run.stderr and "dbt command" not in run.stderr + run.stdout
    built = re.search(r"models ok: (\d+) built, (\d+) of (\d+) tests passed", run.stdout)  # dbt builds every model
    models = [node for node in manifest_document()["nodes"].values() if node["resource_type"] == "model"]
    assert built is not None and int(built[1]) == len(models) and built[2] == built[3], run.stdout[-1000:]
    assert "tournaments" in run.stdout and "player_statistics" in run.stdout
    assert (tmp_path / "warehouse.duckdb").is_file()

    query = tourneylake("query", "--data-dir", str(tmp_path))
    assert query.returncode == 0, query.stderr
    assert "profit_usd" in query.stdout and "Ana Łukasz" in query.stdout

    again = tourneylake(
        "run", "--sandbox", "--no-models", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml"
    )
    assert again.returncode == 0 and "searches spent: 0" in again.stdout
    assert "models: not built (--no-models)" in again.stdout and "models ok" not in again.stdout


def test_wrong_password_exits_non_zero_with_one_line_and_one_alert(tmp_path: Path) -> None:
    from tests.helpers import WebhookReceiver

    with WebhookReceiver() as hook:
        result = tourneylake(
            "run", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml",
            env=clean_env(TOURNEYLAKE_BASE_URL="sandbox", TOURNEYLAKE_PASSWORD="definitely-wrong", TOURNEYLAKE_ALERT_WEBHOOK_URL=hook.url),
        )  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run failed:") and "credentials" in last.lower()
    output = result.stderr + result.stdout
    assert output.count("credentials refused") == 1 and "error:" not in result.stdout  # said once
    assert "Traceback" not in output and "definitely-wrong" not in output and "secret-token" not in output
    (post,) = hook.posts  # the same hook as Dagster's sensor, outside Dagster
    assert (post["night"], post["job"]) == ("2026-11-20", "nightly") and "credentials" in post["reason"]
    assert "definitely-wrong" not in str(post) and "secret-token" not in str(post)


def test_a_bad_watchlist_names_the_line(tmp_path: Path) -> None:
    watchlist = tmp_path / "w.yaml"
    watchlist.write_text("filters:\n  a: 'Class:SNG'\nplayers:\n  - {network: PokerStars, name: X, filters: [nope]}\n")
    result = tourneylake(
        "run", "--sandbox", "--date", "2026-11-20", "--data-dir", str(tmp_path / "d"), "--watchlist", str(watchlist)
    )
    assert result.returncode != 0
    assert "w.yaml:4" in result.stderr and "nope" in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sandbox_command_serves_the_metadata_envelope() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [*CLI, "sandbox", "--port", str(port)], cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        response = None
        while time.monotonic() < deadline:
            try:
                response = httpx.get(
                    f"http://127.0.0.1:{port}/api/demo/metadata",
                    headers={"Accept": "application/json", "User-Agent": "x"},
                    timeout=5,
                )
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert response is not None and response.status_code == 200
        body = response.json()["Response"]
        assert body["@success"] == "true" and "MetadataResponse" in body and body["@metadataHash"]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@pytest.mark.parametrize("tables_worker", ["off", "on"])
def test_a_killed_run_keeps_what_it_paid_for(tmp_path: Path, tables_worker: str) -> None:
    """SIGKILL in the middle of the harvest, then run again: the responses paid before the kill
    are reused from the lake (not paid again), the call in flight is booked, and the night
    completes — on the persistent Dagster instance with the shipped pools, whose slot the killed
    run still held. With the tables worker, the worker ends by itself (its input closed) and
    commits nothing."""

    import duckdb
    import psutil

    from tourneylake.config import SANDBOX_USERNAME
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import Ledger
    from tourneylake.sandbox import running_sandbox

    data = tmp_path / "data"
    ledger_dir = data / "lake" / "_ledger" / "snapshot_date=2026-11-20"
    with running_sandbox(seed=7, today=date(2026, 11, 20), latency_ms=150) as server:
        home = tmp_path / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text((REPO / "dagster_home" / "dagster.yaml").read_text())
        env = clean_env(
            TOURNEYLAKE_BASE_URL=server.base_url,
            **DEMO_ENV,
            TOURNEYLAKE_CONCURRENCY="1",
            TOURNEYLAKE_TABLES_WORKER=tables_worker,
            DAGSTER_HOME=str(home),
        )
        args = ["run", "--no-models", "--date", "2026-11-20", "--data-dir", str(data), "--watchlist", "watchlist.yaml"]
        before = server.accounts.remaining(SANDBOX_USERNAME)
        process = subprocess.Popen([*CLI, *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        paid_before_kill = 0
        while time.monotonic() < deadline and process.poll() is None:
            lines = b"".join(p.read_bytes() for p in ledger_dir.glob("run-*.jsonl")) if ledger_dir.exists() else b""
            paid_before_kill = lines.count(b'"outcome":"ok"')
            if paid_before_kill >= 3:
                workers = [
                    p for p in psutil.Process(process.pid).children() if "tourneylake.tables.worker" in " ".join(p.cmdline())
                ]
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)
        process.wait(timeout=30)
        assert paid_before_kill >= 3 and process.returncode == -signal.SIGKILL
        assert len(workers) == (tables_worker == "on")
        for worker in workers:  # orphaned, it reads the end of its input and ends
            worker.wait(timeout=30)
        assert not (data / "lake" / "player_snapshots").exists()  # nothing committed by the dead run

        rerun = tourneylake(*args, env=env, timeout=240)  # without freeing the dead run's slot it would wait forever
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        assert "freed the pool slots of run" in rerun.stderr
        reused = int(rerun.stdout.split("reused from the lake: ")[1].split(",")[0])
        assert reused >= paid_before_kill  # every response on disk before the kill was kept
        spent = before - server.accounts.remaining(SANDBOX_USERNAME)
    assert spent <= 13 + 1  # at most the one call in flight at the kill is paid twice
    # The ledger is the bill: the call in flight at the kill was charged by the service but never
    # answered; the rerun found the dead run's announcement and booked it into that night.
    rows = list(Ledger(Lake(data)).entries(date(2026, 11, 20)))
    assert sum(int(row["cost"]) for row in rows) == spent
    crash = [row for row in rows if row["outcome"] == "reconciled_after_crash"]
    assert len(crash) == 1 and crash[0]["cost"] == spent - 13
    assert not list(ledger_dir.glob("*.open.jsonl"))  # the dead run is closed
    con = duckdb.connect(str(data / "warehouse.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM player_snapshots").fetchone()[0] == 13
    assert con.execute("SELECT sum(cost) FROM search_ledger").fetchone()[0] == spent
    con.close()


def test_a_night_with_a_failed_pair_exits_partial_naming_it_and_pays_it_once(tmp_path: Path) -> None:
    """A player whose answer is complete but unreadable (a DTD, refused for safety): the night
    loads the others, names the pair, exits 3 (partial) — and a re-run pays nothing for it again."""

    from tourneylake.config import SANDBOX_USERNAME
    from tourneylake.sandbox import running_sandbox

    def with_doctype(body: bytes, fmt: str) -> bytes:
        return b'<!DOCTYPE Response [<!ENTITY x "y">]>' + body.split(b"?>", 1)[-1]

    with running_sandbox(seed=7, today=date(2026, 11, 20)) as server:
        server.app.answer_rewrites[("Winamax.fr", "Élodie.R")] = with_doctype
        env = clean_env(TOURNEYLAKE_BASE_URL=server.base_url, **DEMO_ENV, TOURNEYLAKE_FORMAT="xml")
        args = ["run", "--no-models", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml"]
        before = server.accounts.remaining(SANDBOX_USERNAME)
        first = tourneylake(*args, env=env)
        spent = before - server.accounts.remaining(SANDBOX_USERNAME)
        again = tourneylake(*args, env=env)
        assert server.accounts.remaining(SANDBOX_USERNAME) == before - spent  # not paid again
    assert spent == 13
    for result in (first, again):
        assert result.returncode == 3, result.stderr[-2000:]
        assert "failed (1):\n- Winamax.fr/Élodie.R: answer unusable" in result.stdout
        assert result.stderr.strip().splitlines()[-1] == (
            "error: run partial: 1 pair(s) failed (listed above); run the night again to retry them"
        )
        assert "Traceback" not in result.stderr
    assert "players fetched: 12" in first.stdout and "reused from the lake: 12" in again.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--date", "2999-01-01"), "the night of 2999-01-01 has not ended yet (UTC)"),
        (("--date", "2006-12-31"), "the service's data starts on 2007-01-01"),
        (("--date", "yesterday"), "--date must be a date YYYY-MM-DD, got 'yesterday'"),
    ],
)
def test_a_night_that_cannot_be_harvested_is_one_line(args: tuple[str, ...], message: str) -> None:
    from typer.testing import CliRunner

    from tourneylake.pipelines.cli import app

    result = CliRunner().invoke(app, ["run", "--sandbox", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output  # usage


def test_a_flag_fixes_a_bad_variable_for_run(tmp_path: Path) -> None:
    """A bad TOURNEYLAKE_* value that a flag overrides does not stop `run` (Dagster's definitions
    read no setting at import)."""
    result = tourneylake(
        "run", "--sandbox", "--no-models", "--date", "2026-11-20", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml", "--concurrency", "4",
        env=clean_env(TOURNEYLAKE_CONCURRENCY="100000"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "run ok" in result.stdout


BAD_WATCHLIST = """filters:
  a: "Class:SNG"
players:
  - {network: PokerStars, name: X, filters: [nope]}
  - {network: PokerStars, filters: [a]}
  - {network: PokerStars, name: Y, priority: high}
"""


@pytest.mark.parametrize(
    ("case", "args", "env", "errors"),
    [
        (
            "a watchlist with three mistakes",
            ("run", "--sandbox", "--date", "2026-11-20", "--watchlist", "{tmp}/bad.yaml"),
            {},
            ["bad.yaml:4: filter 'nope' is not defined", "bad.yaml:5: player has no 'name'", "bad.yaml:6: priority must be"],
        ),
        (
            "a wrong password",  # the sandbox by its URL: `--sandbox` brings its demo account whatever the environment says
            ("run", "--date", "2026-11-20", "--watchlist", "watchlist.yaml"),
            {"TOURNEYLAKE_BASE_URL": "sandbox", "TOURNEYLAKE_PASSWORD": "definitely-wrong"},
            ["run failed: credentials refused by the service"],
        ),
        (
            "a data directory of another source",
            ("run", "--date", "2026-11-20", "--watchlist", "watchlist.yaml"),
            {"TOURNEYLAKE_BASE_URL": "http://127.0.0.1:9", **DEMO_ENV},
            ["run failed: the data directory", "from source 'sandbox', not 'live:http://127.0.0.1:9'"],
        ),
        (
            "a setting out of bounds",
            ("budget",),
            {"TOURNEYLAKE_CONCURRENCY": "100000"},
            ["TOURNEYLAKE_CONCURRENCY: Input should be"],
        ),
        ("an impossible date", ("budget", "--date", "2026-13-01"), {}, ["--date must be a date YYYY-MM-DD, got '2026-13-01'"]),
        ("a word for a date", ("sandbox", "--today", "yesterday"), {}, ["--today must be a date YYYY-MM-DD, got 'yesterday'"]),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_bad_input_is_one_error_line_per_problem_and_no_traceback(
    tmp_path: Path, case: str, args: tuple[str, ...], env: dict[str, str], errors: list[str]
) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_WATCHLIST)
    data = tmp_path / "data"
    if "another source" in case:  # a lake the built-in sandbox filled, then pointed at another service
        seeded = tourneylake(
            "run", "--sandbox", "--no-models", "--date", "2026-11-20", "--data-dir", str(data), "--watchlist", "watchlist.yaml"
        )
        assert seeded.returncode == 0, seeded.stderr[-2000:]
    result = (
        tourneylake(*(a.format(tmp=tmp_path) for a in args), "--data-dir", str(data), env=clean_env(**env))
        if args[0] != "sandbox"
        else tourneylake(*args, env=clean_env(**env))
    )
    usage = "date" in case  # a flag's value: a usage error
    assert result.returncode == (2 if usage else 1), (result.stdout[-1000:], result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    error_lines = [line for line in lines if line.startswith("error:")]
    assert len(error_lines) == (len(errors) if "watchlist" in case else 1), lines
    for expected in errors:
        assert any(expected in line for line in error_lines), (expected, lines)
    assert "Traceback" not in result.stderr + result.stdout and "definitely-wrong" not in result.stderr + result.stdout
    if "watchlist" in case:
        assert not data.exists()  # found before Dagster started or anything was called


LAUNCHED = """
import atexit, os, sys, threading, time
from pathlib import Path
from typing import Any
import typer
from tourneylake.cli import launch
out = Path(os.environ["OUT"])
app = typer.Typer()
class TornDown:
    def __del__(self) -> None:
        (out / "teardown").write_text("ran")
torn_down = TornDown()  # freed only by the interpreter's teardown
@app.command()
def go(code: int, linger: float = 0.0, pool: str = "") -> None:
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    if linger:
        threading.Thread(target=lambda: (time.sleep(linger), (out / "thread").write_text("done"))).start()
    if pool:  # the process's shared threads, as a night leaves them: idle
        from tourneylake.lake import s3store, table_writers
        shared = {"parts": table_writers._PARTS, "reads": s3store._READS}[pool]
        shared.get().submit(lambda: (out / "pool").write_text("used")).result()
    sys.stdout.write("no newline")
    raise typer.Exit(code)
launch(app)
"""


@pytest.mark.parametrize(("linger", "pool"), [(0.0, ""), (0.5, ""), (0.0, "parts"), (0.0, "reads")])
def test_the_console_script_exits_with_its_status_its_output_and_exit_handlers(tmp_path: Path, linger: float, pool: str) -> None:
    """`launch` skips the interpreter's teardown, never what a normal exit does first (a running
    thread waited for, the exit handlers, the output flushed); neither a running thread nor the
    process's idle shared threads (the lake's part writes, the S3 client's reads) bring it back."""
    script = tmp_path / "launched.py"
    script.write_text(LAUNCHED)
    args = [sys.executable, str(script), "3", "--linger", str(linger), *(["--pool", pool] if pool else [])]
    done = subprocess.run(args, cwd=REPO, env=clean_env(OUT=str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "no newline"), done.stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").is_file() == bool(linger)  # a running thread is waited for
    assert (tmp_path / "pool").is_file() == bool(pool)
    assert not (tmp_path / "teardown").is_file()  # waited for the thread, ran the handlers, skipped the teardown


def _summaries_kept(lake: Any, night: Any) -> int:
    """Player summaries answered and kept on disk for the night (in the raw segments)."""
    from tourneylake.api import calls

    return len(lake.raw.refs(night, calls.PLAYER_SUMMARY)) if lake.raw.root.exists() else 0


def test_ctrl_c_exits_130_with_one_line_and_keeps_every_paid_answer(tmp_path: Path) -> None:
    """SIGINT to the run's process group (a terminal's Ctrl-C) while it fetches: no new search
    starts, the calls in flight finish, one line, exit 130; every search paid has its answer on
    disk, and the next run pays only for the rest."""

    from tourneylake.config import SANDBOX_USERNAME, Settings
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import Ledger
    from tourneylake.night.status import lake_status
    from tourneylake.sandbox import running_sandbox

    night, data = date(2026, 11, 20), tmp_path / "data"
    with running_sandbox(seed=7, today=night, latency_ms=300) as server:
        env = clean_env(TOURNEYLAKE_BASE_URL=server.base_url, **DEMO_ENV, TOURNEYLAKE_CONCURRENCY="2")
        args = ["run", "--no-models", "--date", night.isoformat(), "--data-dir", str(data), "--watchlist", "watchlist.yaml"]
        before = server.accounts.remaining(SANDBOX_USERNAME)
        process = subprocess.Popen(
            [*CLI, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not _summaries_kept(Lake(data), night):
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        paid = before - server.accounts.remaining(SANDBOX_USERNAME)
        assert process.returncode == 130, err[-2000:]
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors == [err.strip().splitlines()[-1]] and errors[0].startswith("error: interrupted")
        assert "Traceback" not in err + out and "run interrupted" in out
        rows = list(Ledger(Lake(data)).entries(night))
        assert 0 < paid < 13 and sum(int(row["cost"]) for row in rows) == paid  # nothing charged unanswered
        assert _summaries_kept(Lake(data), night) == paid  # each paid answer kept
        [stopped] = lake_status(Settings(data_dir=data)).nights  # every search counted, the reason in words
        assert (stopped.outcome, stopped.night_searches) == ("interrupted", paid)
        assert stopped.reason and "KeyboardInterrupt" not in stopped.reason
        again = tourneylake(*args, env=env)
        assert again.returncode == 0, again.stderr[-2000:]
        assert before - server.accounts.remaining(SANDBOX_USERNAME) == 13  # the rest, and nothing twice
        assert f"reused from the lake: {paid}," in again.stdout
        [done] = lake_status(Settings(data_dir=data)).nights
        assert (done.outcome, done.night_searches, done.last_attempt) == ("ok", 13, None)


def test_ctrl_c_during_the_free_calls_ends_the_night(tmp_path: Path) -> None:
    """SIGINT while the night's first steps (the free calls, which Dagster retries on a
    transient failure) wait on the service: the night stops there, exit 130, one line, no
    search spent. (Dagster retries an interrupted step that has a retry policy: the night went on.)"""

    from tourneylake.config import SANDBOX_USERNAME
    from tourneylake.sandbox import running_sandbox

    night = date(2026, 11, 20)
    with running_sandbox(seed=7, today=night, latency_ms=1000) as server:
        env = clean_env(TOURNEYLAKE_BASE_URL=server.base_url, **DEMO_ENV)
        args = ["run", "--date", night.isoformat(), "--data-dir", str(tmp_path / "data"), "--watchlist", "watchlist.yaml"]
        before = server.accounts.remaining(SANDBOX_USERNAME)
        process = subprocess.Popen(
            [*CLI, *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not server.app.requests:
            time.sleep(0.02)
        time.sleep(0.2)  # the first free call waits on the service (1 s)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 130, (out[-1500:], err[-2000:])
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors == [err.strip().splitlines()[-1]] and errors[0].startswith("error: interrupted")
        assert "Traceback" not in err + out and "retry" not in err.lower()
        assert server.accounts.remaining(SANDBOX_USERNAME) == before  # stopped before the searches


@pytest.mark.parametrize(
    ("why", "env"),
    [
        ("a wrong password", {"TOURNEYLAKE_BASE_URL": "sandbox", "TOURNEYLAKE_PASSWORD": "definitely-wrong"}),
        ("an unreachable service", {"TOURNEYLAKE_BASE_URL": "http://127.0.0.1:9", **DEMO_ENV, "TOURNEYLAKE_MAX_ATTEMPTS": "1"}),
    ],
    ids=["wrong-password", "unreachable"],
)
def test_budget_exits_non_zero_when_it_cannot_read_the_account(tmp_path: Path, why: str, env: dict[str, str]) -> None:
    args = ["budget", "--data-dir", str(tmp_path), "--watchlist", "watchlist.yaml"]
    result = tourneylake(*args, env=clean_env(**env))
    assert result.returncode == 1, (why, result.stdout[-500:], result.stderr[-1000:])
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: could not read the searches left on the account:") and len(line) <= 210
    assert "Traceback" not in result.stderr and "definitely-wrong" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("rebuild",),
        ("rebuild", "--from", "2026-11-20"),
        ("query", "--csv", "--json"),
        ("status", "--date", "soon"),
        ("run", "--nope"),
    ],
    ids=lambda args: " ".join(args),
)
def test_usage_errors_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = tourneylake(*args, env=clean_env(TOURNEYLAKE_DATA_DIR=str(tmp_path)))
    assert result.returncode == 2, (result.stdout[-500:], result.stderr[-1000:])
    assert "Traceback" not in result.stderr


MISCONFIGURED = """filters:
  sng: "Class:SNG"
  bad: "Class:NOT_A_CLASS"
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng, bad]}
  - {network: "888Poker(ES-PT)", name: "Ana Łukasz"}
  - {network: NoSuchNetwork, name: "Somebody Whose Name Is Long Enough To Need The Log File, Truly"}
"""


def test_a_wrong_watchlist_exits_4_naming_the_pairs_after_harvesting_the_others(tmp_path: Path) -> None:
    """Two nights with an invalid filter and an unknown network in the watchlist: every other pair
    harvested each night, one total for the two nights, exit 4 and one line naming the pairs (cut
    at 200 characters, the whole of it in the data directory's log file)."""
    watchlist = tmp_path / "w.yaml"
    watchlist.write_text(MISCONFIGURED)
    data = tmp_path / "data"
    report = data / "reports" / "2026-11-20.html"  # the night's report of the project's own watchlist
    report.parent.mkdir(parents=True)
    report.write_text("the project's report")
    result = tourneylake(
        "run", "--sandbox", "--date", "2026-11-20", "--nights", "2", "--data-dir", str(data), "--watchlist", str(watchlist)
    )
    assert result.returncode == 4, result.stderr[-2000:]
    assert "run ok" not in result.stdout and result.stdout.count("run incomplete: pairs not attempted") == 2
    assert "report: not written (a one-off --watchlist" in result.stdout  # another watchlist than the project's
    assert report.read_text() == "the project's report" and list(report.parent.iterdir()) == [report]
    assert result.stdout.count("players fetched: 2,") == 2  # each night: the two good pairs
    assert result.stdout.count("not attempted: fix the watchlist (2)") == 2
    assert "2 nights (2026-11-19 to 2026-11-20): players fetched 4, deferred 0, failed 0, not attempted 4" in result.stdout
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: watchlist: 2 pair(s) not attempted, fix it and run again: NoSuchNetwork/Somebody")
    assert len(line) <= 210 and line.endswith("(the whole message is in tourneylake.log)")
    logged = (data / "tourneylake.log").read_text()
    assert "PokerStars/Borbas.Geri [bad]: invalid filter 'bad'" in logged and "unknown network 'NoSuchNetwork'" in logged


def test_the_operating_guides_dagster_examples_work_as_written(tmp_path: Path) -> None:
    """Every `dagster asset materialize` and `dagster job execute` line of the operating guide,
    run as written (a shell, the virtual environment on the PATH) on an empty data directory."""
    guide = (REPO / "docs" / "guides" / "operating.md").read_text()
    commands = [line.strip() for line in guide.splitlines() if line.strip().startswith(("dagster asset ", "dagster job "))]
    assert len(commands) >= 2
    night = datetime.now(UTC).date() - timedelta(days=1)  # the commands' $(date -u -d yesterday +%F)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster_home" / "dagster.yaml").read_text())
    env = clean_env(
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        DAGSTER_HOME=str(home),
        TOURNEYLAKE_DATA_DIR=str(tmp_path / "data"),
        PYTHONWARNINGS="ignore",
    )
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    from tourneylake.lake.lake import Lake

    lake = Lake(tmp_path / "data")
    assert night in lake.tables.nights("countries") and night in lake.tables.nights("player_snapshots")
