"""`tourneylake status`: the nights held and how each one's last run ended — a deferred, a
partial, a failed and a misconfigured night, each a real run against the sandbox — read back
from the lake's records, with the pairs still outstanding until a later run harvests them."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import player_line, sandbox_settings, write_watchlist
from tourneylake.cli import app
from tourneylake.night.status import lake_status, next_scheduled
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


def test_the_command_shows_the_nights_and_writes_json(lake) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["status", "--data-dir", str(lake.data_dir)])
    assert shown.exit_code == 0, shown.output
    assert "4 night(s) held" in shown.output and f"{FAILED} failed: credentials" in shown.output
    assert "NoSuchNetwork/Someone: misconfigured" in shown.output and "next scheduled run:" in shown.output
    as_json = runner.invoke(app, ["status", "--data-dir", str(lake.data_dir), "--json"])
    document = json.loads(as_json.stdout)
    assert [n["outcome"] for n in document["nights"]][1:] == ["partial", "failed", "watchlist"]


def test_an_empty_lake_and_the_next_tick(tmp_path: Path) -> None:
    empty = CliRunner().invoke(app, ["status", "--data-dir", str(tmp_path)])
    assert empty.exit_code == 0 and "0 night(s) held" in empty.output
    assert next_scheduled("0 3 * * *", datetime(2026, 11, 26, 2, 0, tzinfo=UTC)) == datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    assert next_scheduled("0 3 * * *", datetime(2026, 11, 26, 3, 0, tzinfo=UTC)) == datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
