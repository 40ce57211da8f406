"""A finished night's USD figures do not move when a later night lands, nor when the lake is
rebuilt: every model's USD figures of each night, on the shared three-night warehouse
(``conftest.three_nights``, the sandbox's rates moving every day), read from the models built
before the last night landed (a real dbt build on the warehouse as it was then), after it, and
after ``rebuild --all`` of a copy of the lake (the models built again by the rebuild)."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.end_to_end.conftest import NIGHTS, Harvest
from tourneylake.tables.models import build_models, manifest_document
from tourneylake.tables.rebuild import rebuild

pytestmark = [pytest.mark.xdist_group("notebook"), pytest.mark.slow]

#: Each model with USD figures: the rows that are a night's own ($night), by their key.
NIGHT_ROWS = {
    "player_results_usd": ("(started_at AT TIME ZONE 'UTC')::DATE = $night", "network, player, tournament_id"),
    "player_entries": ("day = $night", "network, player, tournament_id"),
    "player_days": ("day = $night", "network, player"),
    "player_results_by_period": ("period = 'day' AND period_start = $night", "network, player"),
    "leaderboard": ("period = 'day' AND period_start = $night", "network, player"),
    "player_comparison": ("period = 'day' AND period_start = $night", "network_a, player_a, network_b, player_b"),
    "player_daily_results": ("day = $night", "network, player, filter_name"),
    "filter_results_by_period": ("period = 'day' AND period_start = $night", "network, player, filter_name"),
    "player_statistics_over_time": ("snapshot_date = $night", "network, player, filter_name, statistic"),
    "movers": ("snapshot_date = $night", "network, player, filter_name, statistic"),
}
#: Models with USD figures but no night of their own: they add up every night held, so a new
#: night adds to them (their rows per night are the models above).
EVERY_NIGHT = {
    "latest_player_statistics": "the latest value of each statistic: the newest night's",
    "roi_by_stake_usd": "every entry held, by stake",
    "player_breakdowns": "every entry held, by dimension",
    "stake_buckets": "constants: the buckets' bounds in USD",
}


def usd_figures(warehouse: Path, nights: tuple[date, ...]) -> dict[tuple[str, date, tuple], tuple]:
    """Each model's USD figures of each night: (model, night, its row's key) → every `_usd` and
    ROI column of the row (rounded to a millionth: the same sums in another order differ in the
    last bit)."""
    out: dict[tuple[str, date, tuple], tuple] = {}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for model, (where, key) in NIGHT_ROWS.items():
            columns = [
                name
                for (name,) in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [model]
                ).fetchall()
                if "_usd" in name or ("roi" in name and "_pct" in name)
            ]
            figures = ", ".join(f"round({c}, 6) AS {c}" for c in columns)
            width = len(key.split(","))
            for night in nights:
                for row in con.execute(f"SELECT {key}, {figures} FROM {model} WHERE {where}", {"night": night}).fetchall():
                    out[model, night, row[:width]] = row[width:]
    return out


def test_every_model_with_usd_figures_is_checked() -> None:
    manifest = manifest_document()
    with_usd = {
        node["name"]
        for node in manifest["nodes"].values()
        if node["resource_type"] == "model" and any("_usd" in column for column in node["columns"])
    }
    assert with_usd == set(NIGHT_ROWS) | set(EVERY_NIGHT), "a new model with USD figures: say which of its rows are a night's"


def test_a_finished_nights_usd_does_not_move_when_a_later_night_lands(three_nights: Harvest) -> None:
    final = three_nights.warehouse
    with duckdb.connect(str(final), read_only=True) as con:
        # the case that moved USD before: entries of earlier nights, in a currency other than USD,
        # listed again by the last night (whose rates differ from those of the night they were played)
        (relisted,) = con.execute(
            "SELECT count(*) FROM player_results_usd WHERE snapshot_date = ? AND currency NOT IN ('USD') "
            "AND NOT usd_rate_missing AND (started_at AT TIME ZONE 'UTC')::DATE < ?",
            [NIGHTS[-1], NIGHTS[-1]],
        ).fetchone()
        rates = con.execute(
            "SELECT count(DISTINCT rate) FROM currencies WHERE iso = 'EUR' AND snapshot_date IN ?", [list(NIGHTS)]
        ).fetchone()
    assert relisted > 0 and rates == (len(NIGHTS),), "entries of earlier nights listed again, at rates that moved"
    before = three_nights.before_last_night
    built = build_models(before, variables=three_nights.settings.model_vars)
    assert built.named("error", "fail", "skipped") == [], built.statuses
    earlier = NIGHTS[:-1]
    then, now = usd_figures(before, earlier), usd_figures(final, earlier)
    assert {model for model, _, _ in then} == set(NIGHT_ROWS), "every model has figures of the earlier nights"
    for row, figures in then.items():  # (a pair the capped night deferred brings rows of its own, new ones)
        assert now.get(row) == figures, row


def test_a_rebuild_gives_every_nights_usd_figures_again(three_nights: Harvest, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    shutil.copytree(three_nights.data / "lake", copy / "lake")
    settings = three_nights.settings.with_overrides(data_dir=copy)
    rebuild(settings)  # a fresh warehouse from the raw answers, its models built by the rebuild
    assert usd_figures(settings.warehouse_path, NIGHTS) == usd_figures(three_nights.warehouse, NIGHTS)
