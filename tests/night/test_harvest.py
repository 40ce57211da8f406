"""The harvest of a night (``tourneylake.night.harvest``) against the sandbox over real HTTP: planning
within the budget over several nights, and nothing paid for what is known locally to fail."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import pytest

from tests.helpers import ledger_rows, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.night.harvest import harvest_players, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist

# One worker runs the whole file, so every test shares the module's sandbox (and its clock).
pytestmark = pytest.mark.xdist_group("harvest")

FIRST_NIGHT = date(2025, 3, 1)
CAP = 5


SANDBOX = dict(seed=11, today=FIRST_NIGHT)


def key(row: dict) -> tuple[str, str, str]:
    return (row["network"], row["player"], row["filter_name"] or "")


def test_watchlist_larger_than_budget_is_served_over_several_nights(sandbox, tmp_path):
    from tourneylake.night.forecast import budget_report

    roster = sandbox.world.roster(12)
    lines = ["filters:", '  sng: "Class:SNG"', '  recent: "Date:1Y"', "players:"]
    lines += [player_line(network, name, "[sng, recent]" if index < 6 else "[]") for index, (network, name) in enumerate(roster)]
    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=CAP)
    write_watchlist(settings, "\n".join(lines) + "\n")
    watchlist = load_watchlist(settings.watchlist)
    everything = {(p.network, p.name, f or "") for p, f in watchlist.targets()}
    assert len(everything) == 18  # 6 players x 2 filters + 6 unfiltered: more than 3 nights' cap

    # Before the first night: the report plans the cap and defers the rest, spending nothing.
    sandbox.world.set_today(FIRST_NIGHT)
    refresh_metadata(Session.open(settings, settings.base_url, FIRST_NIGHT))
    before = remaining(settings)
    report = budget_report(settings, FIRST_NIGHT)
    assert remaining(settings) == before
    assert report.remaining == before
    assert len(report.planned) == CAP and report.searches_planned == CAP
    assert len(report.deferred) == 18 - CAP
    assert all("run cap" in why for _, why in report.deferred)
    assert ledger_rows(settings) == []

    last_served: dict[tuple[str, str, str], date] = {}
    served_nights: list[set[tuple[str, str, str]]] = []
    for number in range(5):
        night_date = FIRST_NIGHT + timedelta(days=number)
        sandbox.world.set_today(night_date)
        session = Session.open(settings, settings.base_url, night_date)
        refresh_metadata(session)
        before = remaining(settings)
        outcome = harvest_players(session, watchlist)
        after = remaining(settings)

        rows = ledger_rows(settings, night_date)
        paid = [row for row in rows if row["cost"]]
        served = [key(row) for row in rows if row["resource"] == "player_summary" and row["outcome"] == "ok"]
        # The ledger's arithmetic, night after night.
        assert outcome.searches_spent == sum(row["cost"] for row in rows) == before - after
        assert outcome.searches_spent <= CAP
        # Nothing paid twice in a night.
        assert len(served) == len(set(served)), Counter(served).most_common(3)
        assert len(paid) == len(served)
        assert outcome.failed == []

        never = everything - set(last_served)
        if len(never) >= CAP:
            assert set(served) <= never  # the never-fetched come first...
        else:
            assert never <= set(served)  # ...all of them, then the stalest
            others = set(served) - never
            waiting = set(last_served) - set(served)
            if others and waiting:
                assert max(last_served[k] for k in others) <= min(last_served[k] for k in waiting)
        for k in served:
            last_served[k] = night_date
        served_nights.append(set(served))

        # Re-running a finished night costs nothing.
        if number == 0:
            again = harvest_players(Session.open(settings, settings.base_url, night_date), watchlist)
            assert again.searches_spent == 0 and again.reused == CAP
            assert remaining(settings) == after

    assert set(last_served) == everything  # all served after enough nights
    assert [len(s) for s in served_nights] == [5, 5, 5, 5, 5]

    # The report's spend per night is the ledger's.
    report = budget_report(settings, FIRST_NIGHT + timedelta(days=5))
    assert report.spend_per_night == {FIRST_NIGHT + timedelta(days=n): (CAP, CAP) for n in range(5)}


def test_invalid_filter_and_unknown_network_cost_nothing(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    network, name = sandbox.world.roster(1)[0]
    write_watchlist(
        settings,
        "filters:\n"
        '  bad: "Type:NOPE"\n'
        '  future: "Date:2099"\n'
        "players:\n" + player_line(network, name, "[bad, future]") + '\n  - {network: "NoSuchNetwork", name: "Somebody"}\n'
        '  - {network: "pokerstars", name: "Somebody Else"}\n',
    )
    session = Session.open(settings, settings.base_url, sandbox.world.today)
    refresh_metadata(session)
    before = remaining(settings)
    outcome = harvest_players(session, load_watchlist(settings.watchlist))
    assert remaining(settings) == before
    assert outcome.searches_spent == 0
    assert ledger_rows(settings) == []
    # The watchlist's mistakes are not skips: the night names them (tourneylake run exits 4).
    wrong = " | ".join(why for _, why in outcome.misconfigured)
    assert len(outcome.misconfigured) == 3
    assert "NOPE" in wrong and "unknown network 'NoSuchNetwork'" in wrong and "did you mean 'PokerStars'" in wrong
    (skipped,) = outcome.skipped
    assert "filter 'future' selects nothing up to" in skipped[1]  # a Date after the night: no search, no mistake


def test_a_player_the_service_does_not_know_is_paid_for_once_a_night(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    write_watchlist(settings, "players:\n" + player_line("PokerStars", "Nobody Of That Name") + "\n")
    session = Session.open(settings, settings.base_url, sandbox.world.today)
    refresh_metadata(session)
    before = remaining(settings)
    first = harvest_players(session, load_watchlist(settings.watchlist))
    assert first.searches_spent == 1 == before - remaining(settings)  # "not found" is charged: a lookup
    not_found = ["not found by the service tonight (paid once, not asked again)"]
    assert [why for _, why in first.skipped] == not_found and not first.failed  # a watchlist matter, not a failure
    again = harvest_players(Session.open(settings, settings.base_url, sandbox.world.today), load_watchlist(settings.watchlist))
    assert again.searches_spent == 0 and before - remaining(settings) == 1
    assert [why for _, why in again.skipped] == not_found


def test_last_harvested_is_each_targets_latest_night_before_the_one_planned(tmp_path) -> None:
    """The plan's "last fetched" from every night's ``player_snapshots`` at once: the latest
    night before the planned one wins, a filter written '' is the unfiltered target, and the
    planned night and later ones are not read."""
    from pathlib import Path

    import pyarrow as pa

    from tourneylake.errors import LakeError
    from tourneylake.lake.lake import Lake
    from tourneylake.night.harvest import last_harvested
    from tourneylake.schemas import TABLES

    lake = Lake(tmp_path)
    schema = TABLES["player_snapshots"].schema
    schema = schema.remove(schema.get_field_index("snapshot_date"))  # the night is the partition
    first = date(2026, 11, 1)
    nights: dict[date, list[tuple[str, str, str | None]]] = {
        first: [("PokerStars", "a", None), ("PokerStars", "b", "sng")],
        first + timedelta(days=1): [("PokerStars", "a", ""), ("GGNetwork", "b", None)],
        first + timedelta(days=3): [("PokerStars", "b", "sng")],
        first + timedelta(days=5): [("PokerStars", "c", None)],
    }
    for night, keys in nights.items():
        rows = {name: [None] * len(keys) for name in schema.names}
        rows["network"], rows["player"], rows["filter_name"] = (list(column) for column in zip(*keys, strict=True))
        lake.tables.write("player_snapshots", night, pa.table(rows, schema=schema))
    assert last_harvested(lake, first + timedelta(days=5)) == {
        ("PokerStars", "a", None): first + timedelta(days=1),
        ("GGNetwork", "b", None): first + timedelta(days=1),
        ("PokerStars", "b", "sng"): first + timedelta(days=3),
    }
    assert last_harvested(lake, first) == {}
    # Asked for some targets, the reading stops once each is found: a damaged part of an earlier
    # night is not read then, and is for a target never harvested (read back to the first night).
    (part,) = lake.tables.files("player_snapshots", first)
    Path(part).write_bytes(b"damaged")
    wanted = [("PokerStars", "a", ""), ("GGNetwork", "b", None)]
    assert last_harvested(lake, first + timedelta(days=9), wanted) == {
        ("PokerStars", "a", None): first + timedelta(days=1),
        ("GGNetwork", "b", None): first + timedelta(days=1),
        ("PokerStars", "b", "sng"): first + timedelta(days=3),
        ("PokerStars", "c", None): first + timedelta(days=5),
    }
    with pytest.raises(LakeError, match="is damaged"):
        last_harvested(lake, first + timedelta(days=9), [*wanted, ("PokerStars", "never", None)])
