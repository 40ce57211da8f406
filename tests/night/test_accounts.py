"""Several accounts sharing one watchlist (issue 12, part 2).

- the assignment of players to accounts: total, deterministic, and moving as few players as
  possible when an account comes or goes;
- the ``accounts:`` section of the watchlist and each account's settings (secrets by variable);
- a real night through Dagster with three sandbox accounts over HTTP — a healthy one, one with a
  tiny quota and one with a wrong password — harvesting 300 players: every player of the
  healthy account is fetched, each account spends within its own cap, and each account's ledger
  rows add up to its own drop in searches; one account's night is then re-run alone.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from dagster import AssetKey, materialize

from tests.helpers import ledger_rows, player_line, sandbox_settings, write_watchlist
from tourneylake.assets.models import dbt_resource
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.errors import ConfigError
from tourneylake.lake.lake import Lake
from tourneylake.night.accounts import account_settings, assign, share_of
from tourneylake.night.watchlist import AccountDef, WatchedPlayer, WatchlistError, parse_watchlist
from tourneylake.pipelines.cli import harvest_of
from tourneylake.pipelines.definitions import assets_for
from tourneylake.pipelines.nightly import run_night

NIGHT = date(2026, 11, 20)


def _players(n: int) -> list[WatchedPlayer]:
    return [WatchedPlayer("PokerStars", f"player {i}") for i in range(n)]


def test_every_player_goes_to_exactly_one_account_and_the_same_one_every_time() -> None:
    players = _players(3000)
    shares = assign(players, ["main", "spare", "third"])
    assert sorted(p.name for share in shares.values() for p in share) == sorted(p.name for p in players)
    assert all(700 < len(share) < 1300 for share in shares.values()), {k: len(v) for k, v in shares.items()}
    assert assign(players, ["third", "main", "spare"]) == shares  # the order accounts are listed in does not matter
    # Case and Unicode form do not move a player (they are the same player to the service).
    assert assign([WatchedPlayer("POKERSTARS", "PLAYER 7")], ["main", "spare", "third"]) == {
        name: [WatchedPlayer("POKERSTARS", "PLAYER 7")] if any(p.name == "player 7" for p in share) else []
        for name, share in shares.items()
    }


def test_adding_or_removing_an_account_moves_only_the_players_it_must() -> None:
    players = _players(3000)
    before = {p.name: name for name, share in assign(players, ["main", "spare"]).items() for p in share}
    after = {p.name: name for name, share in assign(players, ["main", "spare", "new"]).items() for p in share}
    moved = {p for p in before if before[p] != after[p]}
    assert moved == {p for p in after if after[p] == "new"}  # only to the new account
    assert 800 < len(moved) < 1200  # about a third
    removed = {p.name: name for name, share in assign(players, ["main", "new"]).items() for p in share}
    assert {p for p in after if after[p] != removed[p]} == {p for p in after if after[p] == "spare"}


def test_the_accounts_section_is_validated_line_by_line() -> None:
    text = (
        "accounts:\n"
        "  - {name: main, username: a@example.com, password_env: TL_MAIN, concurrency: 2, max_searches_per_run: 10}\n"
        "  - {name: 'no good', username: b@example.com, password_env: 'not a variable', concurrency: 100}\n"
        "  - {name: main, username: c@example.com, password_env: TL_C}\n"
        "  - {name: lonely}\n"
    )
    with pytest.raises(WatchlistError) as caught:
        parse_watchlist(text, "w.yaml")
    message = str(caught.value)
    assert "w.yaml:3: account name 'no good'" in message
    assert "w.yaml:3: account password_env must name an environment variable" in message
    assert "w.yaml:3: account concurrency must be a whole number from 1 to 64" in message
    assert "w.yaml:4: account 'main' is listed twice (first on line 2)" in message
    assert "w.yaml:5: account has no 'username', 'password_env'" in message
    good = parse_watchlist(text.splitlines(keepends=True)[0] + text.splitlines(keepends=True)[1])
    assert good.accounts == [AccountDef("main", "a@example.com", "TL_MAIN", concurrency=2, max_searches_per_run=10)]


def test_an_accounts_settings_take_its_secrets_from_the_variables_it_names(tmp_path: Path, monkeypatch) -> None:
    base = sandbox_settings(type("S", (), {"base_url": "http://127.0.0.1:1"})(), tmp_path)
    account = AccountDef("main", "coach@example.com", "TL_MAIN_PASSWORD", appkey_env="TL_MAIN_KEY", concurrency=3)
    monkeypatch.delenv("TL_MAIN_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match=r"account 'main': the password is read from \$TL_MAIN_PASSWORD, which is not set"):
        account_settings(base, account)
    monkeypatch.setenv("TL_MAIN_PASSWORD", "s3cret-value")
    monkeypatch.setenv("TL_MAIN_KEY", "NotLowercase")
    with pytest.raises(ConfigError) as caught:
        account_settings(base, account)
    assert "account 'main'" in str(caught.value) and "lowercase" in str(caught.value)
    assert "NotLowercase" not in str(caught.value) and "s3cret" not in str(caught.value)
    monkeypatch.setenv("TL_MAIN_KEY", "mainkey")
    settings = account_settings(base, account)
    assert (settings.username, settings.password.get_secret_value(), settings.appkey.get_secret_value()) == (
        "coach@example.com",
        "s3cret-value",
        "mainkey",
    )
    assert settings.concurrency == 3 and settings.max_searches_per_run == base.max_searches_per_run
    assert "s3cret" not in repr(settings)


# ------------------------------------------------------------------------------------ a night


SANDBOX = dict(seed=33, today=NIGHT, players=400)
SANDBOX_USERS = [
    ("healthy@example.com", "healthy-pw", "subscriber", 10_000),
    ("tiny@example.com", "tiny-pw", "subscriber", 5),
    ("locked@example.com", "the-real-pw", "subscriber", 10_000),
]


ACCOUNTS = """accounts:
  - {name: healthy, username: healthy@example.com, password_env: TL_HEALTHY_PW, concurrency: 3}
  - {name: tiny, username: tiny@example.com, password_env: TL_TINY_PW, max_searches_per_run: 3}
  - {name: locked, username: locked@example.com, password_env: TL_LOCKED_PW}
"""


def _drop(sandbox, username: str, before: int) -> int:
    return before - sandbox.app.accounts.remaining(username)


@pytest.mark.slow
def test_three_accounts_share_a_night_each_within_its_own_budget(sandbox, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TL_HEALTHY_PW", "healthy-pw")
    monkeypatch.setenv("TL_TINY_PW", "tiny-pw")
    monkeypatch.setenv("TL_LOCKED_PW", "a-wrong-password")
    settings = sandbox_settings(sandbox, tmp_path, concurrency=4)
    roster = sandbox.world.roster(300)
    write_watchlist(settings, ACCOUNTS + "players:\n" + "\n".join(player_line(n, p) for n, p in roster) + "\n")
    watchlist = parse_watchlist(settings.watchlist.read_text())
    shares = {a.name: {(p.network, p.name) for p in share_of(watchlist, a.name).players} for a in watchlist.accounts}
    assert all(len(share) > 50 for share in shares.values())
    users = {"healthy": "healthy@example.com", "tiny": "tiny@example.com", "locked": "locked@example.com"}
    before = {name: sandbox.app.accounts.remaining(user) for name, user in users.items()}

    report = run_night(settings, NIGHT)

    assert report.success, report.failure
    lake = Lake(settings.data_dir)
    snapshots = lake.tables.read_table("player_snapshots", NIGHT)
    fetched = set(zip(snapshots.column("network").to_pylist(), snapshots.column("player").to_pylist(), strict=True))
    assert shares["healthy"] <= fetched  # every player of the healthy account
    assert len(fetched & shares["tiny"]) == 3  # its cap, though its quota would allow 5
    assert not fetched & shares["locked"]
    spent = {name: _drop(sandbox, user, before[name]) for name, user in users.items()}
    assert spent == {"healthy": len(shares["healthy"]), "tiny": 3, "locked": 0}
    rows = ledger_rows(settings, NIGHT)
    for name in users:  # each account's ledger adds up to its own drop in searches
        assert sum(row["cost"] for row in rows if row["account"] == name) == spent[name]
    assert {row["account"] for row in rows} <= set(users)
    assert report.checks["player_summaries/locked:no_failed_players"] is False
    assert report.checks["player_summaries/healthy:no_failed_players"] is True
    locked = report.assets["player_summaries/locked"]
    assert locked["failed"] == len(shares["locked"]) and "credentials refused" in locked["failed_pairs"][0]
    assert report.assets["player_summaries/tiny"]["deferred"] == len(shares["tiny"]) - 3
    merged = harvest_of(report)  # what `tourneylake run` prints, and its exit status 3 (partial)
    assert merged["failed"] == len(shares["locked"]) and merged["searches_spent"] == sum(spent.values())
    assert merged["failed_pairs"][0].startswith("locked: ")
    assert merged["players_reused_from_lake"] == 0  # no account counts the answers another just fetched
    table = lake.tables.read_table("search_ledger", NIGHT)
    assert "a-wrong-password" not in str(table.to_pylist()) and "tiny-pw" not in str(table.to_pylist())

    # The password is fixed: that account's night alone is re-run; nobody else is asked again.
    monkeypatch.setenv("TL_LOCKED_PW", "the-real-pw")
    before = {name: sandbox.app.accounts.remaining(user) for name, user in users.items()}
    resource = TourneylakeResource.from_settings(settings)
    assets = assets_for(list(users))
    again = materialize(
        assets,
        selection=[AssetKey(["player_summaries", "locked"]), AssetKey("player_summaries")],
        partition_key=NIGHT.isoformat(),
        resources={"tourneylake": resource, "dbt": dbt_resource()},
    )
    assert again.success
    (locked_again,) = [
        e.materialization.metadata
        for e in again.get_asset_materialization_events()
        if e.materialization.asset_key == AssetKey(["player_summaries", "locked"])
    ]
    assert locked_again["players_reused_from_lake"].value == 0  # its own pairs: none were held
    assert {name: _drop(sandbox, user, before[name]) for name, user in users.items()} == {
        "healthy": 0,
        "tiny": 0,
        "locked": len(shares["locked"]),
    }
    snapshots = lake.tables.read_table("player_snapshots", NIGHT)
    fetched = set(zip(snapshots.column("network").to_pylist(), snapshots.column("player").to_pylist(), strict=True))
    assert shares["healthy"] | shares["locked"] <= fetched and len(fetched & shares["tiny"]) == 3


def test_the_budget_is_planned_per_account_without_a_search(sandbox, tmp_path: Path, monkeypatch) -> None:
    from tourneylake.night.forecast import budget_reports

    monkeypatch.setenv("TL_HEALTHY_PW", "healthy-pw")
    monkeypatch.setenv("TL_TINY_PW", "tiny-pw")
    monkeypatch.setenv("TL_LOCKED_PW", "a-wrong-password")
    settings = sandbox_settings(sandbox, tmp_path)
    roster = sandbox.world.roster(30)
    write_watchlist(settings, ACCOUNTS + "players:\n" + "\n".join(player_line(n, p) for n, p in roster) + "\n")
    watchlist = parse_watchlist(settings.watchlist.read_text())
    shares = {a.name: len(share_of(watchlist, a.name).players) for a in watchlist.accounts}
    before = {user: sandbox.app.accounts.remaining(user) for user in ("healthy@example.com", "tiny@example.com")}

    reports = {report.account: report for report in budget_reports(settings, NIGHT)}

    assert set(reports) == {"healthy", "tiny", "locked"}
    assert len(reports["healthy"].planned) == shares["healthy"]
    # its own cap (3), or its own searches left if fewer (the night's test above may have spent some)
    assert len(reports["tiny"].planned) == min(3, shares["tiny"], reports["tiny"].remaining)
    assert len(reports["tiny"].deferred) == shares["tiny"] - len(reports["tiny"].planned)
    assert reports["locked"].remaining is None and "credentials" in (reports["locked"].remaining_note or "")
    assert {user: sandbox.app.accounts.remaining(user) for user in before} == before  # free
