"""The lake's store out mid-night (a proxy in front of moto answers nothing but 503s and dropped
connections for a while, as a restarting object store or a throttling burst does), the lake
and its ledger on the store, the harvest in one process against the sandbox over HTTP.

- Out for 5 s: the night rides it out (the store's client tries again with backoff, and says it
  is retrying) and finishes with the tables of an uninterrupted night, each search paid once.
- Out for 90 s, longer than the minute a request is tried: the night stops paying, and loses
  nothing it paid for (each paid answer kept, each with its own ledger row: no lump
  reconciliation), which is tried for five minutes. A night whose only requests then were paid
  answers' saves rides the outage out; one that asked anything else of the store fails in one
  line, and its re-run completes the night paying nothing twice.

Slow (a minute and a half of outage): ``make test-deploy`` runs it, and CI with it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import fsspec
import pytest

from tests.helpers import player_line, sandbox_settings, summary_rows, write_watchlist
from tests.s3_proxy import RunningProxy, running_proxy
from tourneylake.api import calls
from tourneylake.config import SANDBOX_USERNAME, Settings
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import RECONCILED_AFTER_CRASH, Ledger
from tourneylake.pipelines.nightly import RunReport, run_night

pytestmark = [pytest.mark.slow, pytest.mark.deploy]

NIGHT = date(2026, 11, 20)
PLAYERS = 40
SANDBOX = dict(seed=21, today=NIGHT, players=100, latency_ms=100)


def _settings(sandbox, folder: Path, data_dir: str | Path) -> Settings:
    settings = sandbox_settings(sandbox, folder, warehouse=folder / "w.duckdb")
    settings = settings.with_overrides(data_dir=data_dir)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in sandbox.world.roster(PLAYERS)) + "\n")
    return settings


@pytest.fixture(scope="module")
def uninterrupted(sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("uninterrupted")
    report = run_night(_settings(sandbox, folder, folder / "data"), NIGHT)
    assert report.success, report.failure
    return summary_rows(Lake(folder / "data"), NIGHT)


@pytest.fixture
def store_behind_proxy(moto: str, s3_env: Callable[[str], None]) -> Iterator[tuple[RunningProxy, str]]:
    """A bucket of its own behind the proxy; the store's environment points at the proxy."""
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", endpoint_url=moto, key="testing", secret="testing", skip_instance_cache=True).mkdir(bucket)
    with running_proxy(moto) as proxy:
        s3_env(proxy.url)
        yield proxy, f"s3://{bucket}/lake"


def _night_with_an_outage(sandbox, settings: Settings, proxy: RunningProxy, seconds: float) -> RunReport:
    """The night, its store out for ``seconds`` once the harvest has paid for 5 searches."""
    before = sandbox.accounts.remaining(SANDBOX_USERNAME)
    started = threading.Event()

    def out_mid_harvest() -> None:
        deadline = time.monotonic() + 120
        while before - sandbox.accounts.remaining(SANDBOX_USERNAME) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        proxy.outage(seconds)
        started.set()

    trigger = threading.Thread(target=out_mid_harvest, daemon=True)
    trigger.start()
    report = run_night(settings, NIGHT)
    trigger.join(10)
    assert started.is_set() and proxy.stats()["faults"]["outage"] > 0  # the store was out while the night ran
    return report


def test_a_5_s_outage_is_ridden_out(
    sandbox, store_behind_proxy, tmp_path: Path, uninterrupted, caplog: pytest.LogCaptureFixture, capfd
) -> None:
    proxy, url = store_behind_proxy
    settings = _settings(sandbox, tmp_path, url)
    before = sandbox.accounts.remaining(SANDBOX_USERNAME)
    with caplog.at_level(logging.WARNING, logger="tourneylake.lake.outages"):
        report = _night_with_an_outage(sandbox, settings, proxy, 5)
    assert report.success, report.failure
    # Said by whichever process met the outage: the night's (its log) or its raw saver's (stderr).
    said = [r.getMessage() for r in caplog.records if r.name == "tourneylake.lake.outages"]
    said += capfd.readouterr().err.splitlines()
    assert any("the lake's store is not answering" in line and "retrying" in line for line in said), said
    assert any("answers again" in line for line in said), said
    lake = Lake(url)
    assert summary_rows(lake, NIGHT) == uninterrupted
    assert before - sandbox.accounts.remaining(SANDBOX_USERNAME) == PLAYERS == Ledger(lake).spent(NIGHT)


def test_a_90_s_outage_keeps_what_was_paid_and_a_failed_night_s_re_run_pays_nothing_twice(
    sandbox, store_behind_proxy, tmp_path: Path, uninterrupted
) -> None:
    proxy, url = store_behind_proxy
    settings = _settings(sandbox, tmp_path, url)
    before = sandbox.accounts.remaining(SANDBOX_USERNAME)
    report = _night_with_an_outage(sandbox, settings, proxy, 90)
    lake = Lake(url)
    paid = before - sandbox.accounts.remaining(SANDBOX_USERNAME)
    kept = {raw.key["player"] for raw in lake.raw.bodies(NIGHT, calls.PLAYER_SUMMARY, status=None)}
    assert paid >= 5 and len(kept) == paid  # every paid answer is kept ...
    rows = list(Ledger(lake).entries(NIGHT))
    assert sum(int(row["cost"]) for row in rows) == paid  # ... each with its own row
    assert not Ledger(lake).dead_runs()
    if not report.success:  # it gave up on the store: one line, and it stopped paying
        assert report.failure and "\n" not in report.failure and "store" in report.failure, report.failure
        assert paid < PLAYERS
        again = run_night(settings, NIGHT)
        assert again.success, again.failure
    assert summary_rows(lake, NIGHT) == uninterrupted
    assert before - sandbox.accounts.remaining(SANDBOX_USERNAME) == PLAYERS  # nothing paid twice
    rows = list(Ledger(lake).entries(NIGHT))
    assert sum(int(row["cost"]) for row in rows) == PLAYERS and not [r for r in rows if r["outcome"] == RECONCILED_AFTER_CRASH]
