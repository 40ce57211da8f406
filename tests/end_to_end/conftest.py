"""Three sandbox nights harvested once (real HTTP, real Dagster runs, a real dbt build and the
report the models job writes), shared by the notebook, report and USD tests of this folder: they
run in one xdist group, so one worker builds it once. A copy of the warehouse as it was before the
last night landed is kept beside it (`Harvest.before_last_night`)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from tests.helpers import DEMO_ACCOUNT
from tourneylake.config import Settings
from tourneylake.pipelines.nightly import RunReport, run_models, run_night
from tourneylake.sandbox import running_sandbox

NIGHTS = (date(2026, 11, 19), date(2026, 11, 20), date(2026, 11, 21))
CAPPED_NIGHT = NIGHTS[1]  # a budget of 2 searches: the watchlist's other pairs are deferred
SEED = 11

WATCHLIST = """
filters:
  sng_30d: "Class:SNG;Date:30D"
  sng_day: {filter: "Class:SNG", window: day}
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng_30d, sng_day]}
  - {network: iPoker, name: "Zoë O'Brien"}
  - {network: PartyPoker, name: "mr. Müller", priority: 1}
  - {network: GGNetwork, name: "王小明"}
"""


@dataclass
class Harvest:
    data: Path
    watchlist: Path
    settings: Settings
    models: RunReport
    #: the warehouse file copied after the night before the last (its tables; no models built on it)
    before_last_night: Path

    @property
    def warehouse(self) -> Path:
        return self.data / "warehouse.duckdb"


@pytest.fixture(scope="session")
def three_nights(tmp_path_factory: pytest.TempPathFactory) -> Harvest:
    root = tmp_path_factory.mktemp("three-nights")
    watchlist = root / "watchlist.yaml"
    watchlist.write_text(WATCHLIST, encoding="utf-8")
    data = root / "data"
    with running_sandbox(seed=SEED, today=NIGHTS[0]) as server:
        settings = Settings(
            base_url=server.base_url,
            **DEMO_ACCOUNT,
            data_dir=data,
            watchlist=watchlist,
            retry_initial_wait_s=0.01,
            retry_max_wait_s=0.05,
        )
        for night in NIGHTS:
            server.world.set_today(night)
            capped = settings.with_overrides(max_searches_per_run=2) if night == CAPPED_NIGHT else settings
            report = run_night(capped, night)
            assert report.success, report.failure
            if night == NIGHTS[-2]:
                for suffix in ("", ".wal"):  # the file as a reader would open it
                    if (data / f"warehouse.duckdb{suffix}").is_file():
                        shutil.copy(data / f"warehouse.duckdb{suffix}", root / f"before-last-night.duckdb{suffix}")
        models = run_models(settings)  # the views and the report, once after the last night, as `tourneylake run` does
        assert models.success, models.failure
    return Harvest(data, watchlist, settings, models, root / "before-last-night.duckdb")
