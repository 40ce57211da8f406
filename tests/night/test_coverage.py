"""Vanished data: a network gone from the service, a player who opted out, a player no longer
found. Earlier nights keep their rows; the night records the change (``coverage_changes``) and
the harvest says it; a rebuild from raw makes the same changes. Against the sandbox over HTTP.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers import player_line, sandbox_settings, write_watchlist
from tourneylake.lake.lake import Lake
from tourneylake.night.harvest import NOT_FOUND as NOT_FOUND_WHY
from tourneylake.night.harvest import harvest_players, refresh_free_resource, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.sandbox import DEMO
from tourneylake.sandbox.responses import envelope, error_element, render, user_info
from tourneylake.tables.coverage import coverage_changes
from tourneylake.tables.rebuild import rebuild
from tourneylake.tables.warehouse import Warehouse

pytestmark = pytest.mark.xdist_group("coverage")

FIRST, SECOND = date(2026, 7, 1), date(2026, 7, 2)
SANDBOX = dict(seed=19, today=FIRST, players=20, time_of_day=4 * 3600)
GONE = ("iPoker", "Zoë O'Brien")  # its network is removed
OPTED_OUT = ("PokerStars", "Borbas.Geri")
NOT_FOUND = ("GGNetwork", "José María")
KEPT = ("WPN", "Søren K")


def _night(sandbox, settings, night: date):
    sandbox.world.set_today(night)
    session = Session.open(settings, settings.base_url, night)
    refresh_metadata(session)
    refresh_free_resource(session, "countries")
    outcome = harvest_players(session, load_watchlist(settings.watchlist))
    with Warehouse(settings.warehouse_path) as db:
        db.load_night(session.lake, night)
    return outcome


def _not_found(sandbox, code: int = 103001):
    def rewrite(body: bytes, fmt: str) -> bytes:
        user = sandbox.accounts.users[DEMO.username]
        root = envelope(success=False, timestamp=sandbox.world.timestamp(), metadata_hash=None, payload=error_element(code))
        root.children.append(user_info(user))
        return render(fmt, root)

    return rewrite


def test_what_the_service_stops_showing_is_recorded_and_earlier_nights_keep_their_rows(sandbox, tmp_path: Path) -> None:
    settings = sandbox_settings(sandbox, tmp_path)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(*p) for p in (GONE, OPTED_OUT, NOT_FOUND, KEPT)) + "\n")
    first = _night(sandbox, settings, FIRST)
    assert first.fetched == 4 and first.coverage_changes == []

    sandbox.app.removed_networks.add(GONE[0])
    sandbox.app.opted_out.add(OPTED_OUT)
    sandbox.app.answer_rewrites[NOT_FOUND] = _not_found(sandbox)
    try:
        second = _night(sandbox, settings, SECOND)
    finally:
        sandbox.app.removed_networks.clear()
        sandbox.app.opted_out.clear()
        sandbox.app.answer_rewrites.clear()
    assert second.fetched == 2  # the opted-out player's answer is kept too: it says what it withholds
    assert [target.network for target, why in second.skipped if "not in metadata" in why] == [GONE[0]]  # free

    lake = Lake(settings.data_dir)
    changes = {
        (row["subject"], row["network"], row["player"], row["change"]): row
        for row in lake.tables.read_table("coverage_changes").to_pylist()
    }
    assert set(changes) == {
        ("network", GONE[0], "", "network_removed"),
        ("player", *OPTED_OUT, "statistics_withheld"),
        ("player", *NOT_FOUND, "player_not_found"),
    }
    assert all(row["snapshot_date"] == SECOND and row["last_seen"] == FIRST for row in changes.values())
    assert "opted out" in changes["player", *OPTED_OUT, "statistics_withheld"]["detail"]
    assert len(second.coverage_changes) == 3 and any("iPoker" in line for line in second.coverage_changes)

    with Warehouse(settings.warehouse_path, read_only=True) as db:  # the first night's rows stay
        kept = db.query("SELECT player, count(*) AS n FROM player_snapshots WHERE snapshot_date = $1 GROUP BY 1", [FIRST])
        assert len(kept) == 4
        shown = db.query("SELECT change FROM coverage_changes ORDER BY change").column("change").to_pylist()
    assert shown == ["network_removed", "player_not_found", "statistics_withheld"]

    before = coverage_changes(lake, SECOND)
    rebuild(settings, [SECOND])  # from raw alone: the same changes
    assert coverage_changes(lake, SECOND).equals(before)


def test_a_statistic_shown_on_one_night_only_is_a_change_of_its_pair() -> None:
    """Pairs are compared on the statistics both nights hold: one shown on one night only is
    withheld or restored; a statistic new tonight, or gone, is no change."""
    from tourneylake.tables.coverage import _SHOWN, _by_pair, _pairs_that_changed, _statistics_rows

    def shown(rows: list[tuple[str, str, bool]]) -> pa.Table:
        return pa.Table.from_pylist(
            [{"network": "N", "player": p, "filter_name": "", "statistic": s, "shown": v} for p, s, v in rows], schema=_SHOWN
        )

    now = shown(
        [
            ("a", "roi", False),
            ("a", "itm", True),
            ("b", "roi", True),
            ("c", "roi", True),
            ("c", "abi", False),
            ("d", "roi", False),
        ]
    )
    then = shown(
        [("a", "roi", True), ("a", "itm", True), ("b", "roi", False), ("c", "roi", True), ("d", "roi", True), ("e", "roi", True)]
    )
    changed = _pairs_that_changed(now, then)
    assert changed == {("N", "a", ""), ("N", "b", ""), ("N", "d", "")}
    now_shown, then_shown = _by_pair(now, changed), _by_pair(then, changed)
    rows = {key[1]: _statistics_rows(key, then_shown[key], now_shown[key], FIRST) for key in changed}
    assert [(r["change"], r["detail"]) for r in rows["a"]] == [("statistics_withheld", "not authorized any more: roi")]
    assert [r["change"] for r in rows["b"]] == ["statistics_restored"]
    assert "opted out" in rows["d"][0]["detail"]  # every statistic it showed


def test_a_player_not_found_is_a_change_asked_again_a_week_later_and_harvested_again_once_found(sandbox, tmp_path: Path) -> None:
    """200039, the code the service gives for a player it does not find (the sandbox answers it
    for a name its world does not hold): no failure, a coverage change for a player the lake held,
    and no search the next nights; a week after, the pair is asked again, and a player found
    again is harvested again."""
    from datetime import timedelta

    first = date(2026, 8, 1)
    unknown = ("PokerStars", "Nobody Here At All")
    settings = sandbox_settings(sandbox, tmp_path)
    write_watchlist(settings, "players:\n" + "\n".join(player_line(*p) for p in (NOT_FOUND, KEPT, unknown)) + "\n")

    def night(day: int):
        sandbox.app.clear_summary_log()
        outcome = _night(sandbox, settings, first + timedelta(days=day - 1))
        assert not outcome.failed
        return outcome, {(r.network, r.player) for r in sandbox.app.summary_log_snapshot()}

    one, _ = night(1)
    assert one.fetched == 2 and [why for t, why in one.skipped] == [NOT_FOUND_WHY]  # the unknown name: 200039
    sandbox.app.answer_rewrites[NOT_FOUND] = _not_found(sandbox, 200039)
    try:
        two, asked = night(2)
    finally:
        sandbox.app.answer_rewrites.clear()
    assert asked == {NOT_FOUND, KEPT} and two.fetched == 1  # the unknown name is not asked again
    assert two.coverage_changes == [
        f"{NOT_FOUND[0]}/{NOT_FOUND[1]}: the service does not find {NOT_FOUND[0]}/{NOT_FOUND[1]} (last seen {first})"
    ]
    three, asked = night(3)  # the player is back, but not asked before the week is out: no search
    assert asked == {KEPT} and three.searches_spent == 1
    assert {t.player: why for t, why in three.skipped}[NOT_FOUND[1]] == (
        "not found by the service on 2026-08-02: asked again on 2026-08-09 (a search a week, not a night)"
    )
    nine, asked = night(9)  # a week after each "not found": both asked, the player found again is harvested
    assert asked == {NOT_FOUND, KEPT, unknown} and nine.fetched == 2 and [t.player for t, _ in nine.skipped] == [unknown[1]]
