"""`tourneylake status`: the nights held and how each one's last run ended — a deferred, a
partial, a failed and a misconfigured night, each a real run against the sandbox — read back
from the lake's records, with the pairs still outstanding until a later run harvests them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import REPO, player_line, sandbox_settings, shipped_dagster_home, write_watchlist
from tourneylake.cli import app
from tourneylake.lake.cost_memo import SETTLED_NS
from tourneylake.lake.lake import Lake
from tourneylake.night.quota_day import next_scheduled
from tourneylake.night.status import in_words, lake_status
from tourneylake.pipelines.cli import app as console
from tourneylake.pipelines.nightly import run_night

pytestmark = [pytest.mark.xdist_group("status"), pytest.mark.slow]

DEFERRED, PARTIAL, FAILED, WATCHLIST = (date(2026, 11, d) for d in (17, 18, 19, 20))
SANDBOX = dict(seed=4, today=WATCHLIST)
PAIRS = [("PokerStars", "Borbas.Geri"), ("Winamax.fr", "Élodie.R"), ("iPoker", "Zoë O'Brien")]
PLAYERS = "players:\n" + "\n".join(player_line(n, p) for n, p in PAIRS) + "\n"


def _doctype(body: bytes, fmt: str) -> bytes:  # a complete answer never read (a DTD): the pair fails
    return b'<!DOCTYPE Response [<!ENTITY x "y">]>' + body.split(b"?>", 1)[-1]


@pytest.fixture(scope="module")
def lake(sandbox, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("status")
    settings = sandbox_settings(sandbox, folder / "data", watchlist=folder / "watchlist.yaml", format="xml")
    write_watchlist(settings, PLAYERS)
    sandbox.world.set_today(DEFERRED)
    assert run_night(settings.with_overrides(max_searches_per_run=2), DEFERRED).success
    sandbox.world.set_today(PARTIAL)
    sandbox.app.answer_rewrites[("Winamax.fr", "Élodie.R")] = _doctype
    assert run_night(settings, PARTIAL).success
    del sandbox.app.answer_rewrites[("Winamax.fr", "Élodie.R")]
    sandbox.world.set_today(FAILED)
    assert not run_night(settings.with_overrides(password="not-the-password"), FAILED).success
    sandbox.world.set_today(WATCHLIST)
    write_watchlist(settings, PLAYERS + player_line("NoSuchNetwork", "Someone") + "\n")
    assert run_night(settings, WATCHLIST).success
    return settings


def test_each_nights_last_run_is_told_with_what_is_still_outstanding(lake) -> None:
    found = lake_status(lake)
    nights = {n.night: n for n in found.nights}
    assert [(n.night, n.outcome) for n in found.nights] == [
        (DEFERRED, "deferred"),
        (PARTIAL, "partial"),
        (FAILED, "failed"),
        (WATCHLIST, "watchlist"),
    ]
    assert nights[DEFERRED].searches_spent == 2 and nights[DEFERRED].deferred == 1 and nights[DEFERRED].loaded
    # The latest nights alone are described when asked (a night's bill reads its ledger), or one night.
    latest = lake_status(lake, latest=2)
    assert latest.nights_held == 4 and latest.nights == found.nights[-2:]
    assert lake_status(lake, night=PARTIAL).nights == [nights[PARTIAL]]
    assert nights[DEFERRED].rows["player_snapshots"] == 2
    (deferred,) = nights[DEFERRED].outstanding
    assert deferred.startswith("iPoker/Zoë O'Brien: deferred: budget: run cap 2 reached")
    assert nights[PARTIAL].failed == 1 and nights[PARTIAL].outstanding[0].startswith(
        "Winamax.fr/Élodie.R: failed: answer unusable"
    )
    assert "credentials" in (nights[FAILED].reason or "") and not nights[FAILED].loaded
    assert nights[WATCHLIST].outstanding == [
        "NoSuchNetwork/Someone: misconfigured: unknown network 'NoSuchNetwork' (not in metadata)"
    ]
    assert nights[WATCHLIST].fetched == 3
    assert set(found.searches_left) == {lake.username} and found.searches_left[lake.username] > 0
    assert found.lake_bytes > 0 and found.warehouse_bytes


def test_a_later_run_of_the_night_settles_what_was_outstanding(lake, sandbox) -> None:
    write_watchlist(lake, PLAYERS)
    sandbox.world.set_today(DEFERRED)
    assert run_night(lake, DEFERRED).success  # the cap lifted: the deferred pair is fetched
    again = next(n for n in lake_status(lake).nights if n.night == DEFERRED)
    assert again.outcome == "ok" and again.outstanding == [] and again.fetched == 1
    assert (again.searches_spent, again.night_searches) == (1, 3)  # the night's bill is both runs'


def test_the_command_shows_the_nights_and_writes_json(lake, monkeypatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    runner = CliRunner()
    shown = runner.invoke(console, ["status", "--data-dir", str(lake.data_dir)])
    assert shown.exit_code == 0, shown.output
    assert "4 night(s) held" in shown.output and f"{FAILED} last run failed: credentials" in shown.output
    assert "NoSuchNetwork/Someone: misconfigured" in shown.output
    assert "nightly schedule: not known (DAGSTER_HOME is not set" in shown.output and "next run" not in shown.output
    as_json = runner.invoke(console, ["status", "--data-dir", str(lake.data_dir), "--json"])
    document = json.loads(as_json.stdout)
    assert [n["outcome"] for n in document["nights"]][1:] == ["partial", "failed", "watchlist"]


def test_a_failed_rerun_shows_beside_what_the_night_holds(lake, sandbox) -> None:
    """A wrong password on a re-run of a night loaded before: the night still holds its rows and
    its outcome, the failed attempt and its reason beside them, and its searches are the ledger's."""
    before = next(n for n in lake_status(lake).nights if n.night == PARTIAL)
    sandbox.world.set_today(PARTIAL)
    assert not run_night(lake.with_overrides(password="not-the-password"), PARTIAL).success
    after = next(n for n in lake_status(lake).nights if n.night == PARTIAL)
    assert (after.outcome, after.loaded, after.rows, after.failed) == ("partial", True, before.rows, 1)
    assert after.rows["player_snapshots"] == 2 and after.night_searches == before.night_searches == 3
    assert after.last_attempt == "failed" and "credentials" in (after.reason or "")
    shown = CliRunner().invoke(app, ["status", "--data-dir", str(lake.data_dir), "--date", PARTIAL.isoformat()])
    assert "last run: failed" in shown.output
    assert f"{PARTIAL} last run failed: credentials refused" in shown.output
    assert "the night keeps what an earlier run loaded: partial" in " ".join(shown.output.split())


def test_the_bills_are_kept_in_the_users_cache_and_the_next_status_reads_no_closed_run_again(
    lake, monkeypatch, tmp_path_factory
) -> None:
    """Each night's bill is its ledger's, as a fresh reading gives it; the closed runs' costs are
    kept in the user's cache (never in the lake), and the next status reads none of them again."""
    from tourneylake.lake import ledger

    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    time.sleep(SETTLED_NS / 1e9)  # the runs' files settled (a file changed just now is read again)
    first = {n.night: n.night_searches for n in lake_status(lake).nights}
    assert first == {night: ledger.Ledger(Lake.of(lake)).spent(night) for night in first} and sum(first.values()) > 0
    assert [p.name for p in cache.rglob("*.json")] == ["costs.json"] and not list(lake.data_dir.rglob("costs.json"))
    read, parse = [], ledger._run_costs
    monkeypatch.setattr(ledger, "_run_costs", lambda path, night: read.append(path.name) or parse(path, night))
    assert {n.night: n.night_searches for n in lake_status(lake).nights} == first
    assert all(name.endswith(".open.jsonl") for name in read), read  # a run still open alone is read


def test_an_interruption_is_said_in_words() -> None:
    assert "Ctrl-C" in in_words("interrupted", "KeyboardInterrupt") and "KeyboardInterrupt" not in in_words("interrupted", "")
    assert in_words("failed", "credentials refused by the service") == "credentials refused by the service"
    assert "(ValueError, without a message)" in in_words("failed", "ValueError")


def test_status_says_whether_the_nightly_schedule_is_on_and_how_to_turn_it_on(lake, tmp_path, monkeypatch) -> None:
    """Dagster's instance says (the schedule is off until started): off, with how to turn it on
    and no next run; started with Dagster's own command, on, with its next run."""
    home = shipped_dagster_home(tmp_path, monkeypatch)
    runner = CliRunner()
    off = runner.invoke(console, ["status", "--data-dir", str(lake.data_dir), "--nights", "0"])
    assert off.exit_code == 0, off.output
    assert f"nightly schedule: off (Dagster's instance in {home})" in " ".join(off.output.split())
    assert "dagster schedule start nightly_schedule" in off.output and "next run" not in off.output
    env = {**os.environ, "TOURNEYLAKE_DATA_DIR": str(lake.data_dir), "TOURNEYLAKE_WATCHLIST": str(lake.watchlist)}
    started = subprocess.run(
        [str(REPO / ".venv" / "bin" / "dagster"), "schedule", "start", "nightly_schedule", "-m", "tourneylake.pipelines.definitions"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert started.returncode == 0 and "Started schedule nightly_schedule" in started.stdout, started.stderr[-2000:]
    on = runner.invoke(console, ["status", "--data-dir", str(lake.data_dir), "--nights", "0"])
    assert "nightly schedule: on" in on.output and "03:00 UTC" in on.output, on.output


def test_an_empty_lake_and_the_next_tick(tmp_path: Path) -> None:
    empty = CliRunner().invoke(app, ["status", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "0 night(s) held" in empty.output
    assert next_scheduled("0 3 * * *", datetime(2026, 11, 26, 2, 0, tzinfo=UTC)) == datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    assert next_scheduled("0 3 * * *", datetime(2026, 11, 26, 3, 0, tzinfo=UTC)) == datetime(2026, 11, 27, 3, 0, tzinfo=UTC)


def test_status_reads_the_lake_without_loading_an_http_client() -> None:
    """``status`` calls nothing: its modules leave the HTTP stack unloaded (about 0.15 s of every
    ``status``), the service's clock included (:mod:`tourneylake.api.server_clock`)."""
    probe = "import sys, tourneylake.night.status; print(sorted({'httpx', 'tenacity', 'aiohttp'} & set(sys.modules)))"
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert shown.stdout.strip() == "[]", shown.stdout
