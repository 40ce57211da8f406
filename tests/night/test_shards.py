"""Accounts as shards (issue 33): the night's player split computed once (``player_shares``),
each account's harvest committing its own parts of the night's tables from its own answers only
(never another shard's bodies), and the night's tables made of the shards' parts once all are
in, without reading a raw answer: the same tables a night made from every raw answer gives."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from dagster import AssetKey, materialize

import tourneylake.night.accounts as accounts_module
import tourneylake.tables.night_tables as night_tables
from tests.helpers import player_line, sandbox_settings, write_watchlist
from tourneylake.api import calls
from tourneylake.assets.models import dbt_resource
from tourneylake.assets.resource import TourneylakeResource
from tourneylake.lake.lake import Lake
from tourneylake.night.accounts import load_share, share_of
from tourneylake.night.watchlist import load_watchlist
from tourneylake.pipelines.definitions import assets_for
from tourneylake.tables.night_tables import player_tables
from tourneylake.tables.normalize.summary import SUMMARY_TABLES

NIGHT = date(2026, 11, 20)
SANDBOX = dict(seed=9, today=NIGHT, players=120)
SANDBOX_USERS = [("left@example.com", "left-pw", "subscriber", 10_000), ("right@example.com", "right-pw", "subscriber", 10_000)]
ACCOUNTS = """filters:
  sng: "Class:SNG"
accounts:
  - {name: left, username: left@example.com, password_env: TL_LEFT_PW}
  - {name: right, username: right@example.com, password_env: TL_RIGHT_PW}
"""


@pytest.fixture
def night(sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TL_LEFT_PW", "left-pw")
    monkeypatch.setenv("TL_RIGHT_PW", "right-pw")
    settings = sandbox_settings(sandbox, tmp_path)
    players = "\n".join(player_line(n, p, "[sng]") for n, p in sandbox.world.roster(40))
    write_watchlist(settings, ACCOUNTS + "players:\n" + players + "\n")
    resource = TourneylakeResource.from_settings(settings)

    def run(*keys: str) -> None:
        selection = [AssetKey(k.split("/")) for k in keys] if keys else None
        result = materialize(
            assets_for(["left", "right"]),
            selection=selection,
            partition_key=NIGHT.isoformat(),
            resources={"tourneylake": resource, "dbt": dbt_resource()},
        )
        assert result.success

    return settings, run


def _rows(lake: Lake) -> dict[str, list]:
    return {name: sorted(map(repr, lake.tables.read_table(name, NIGHT).to_pylist())) for name in SUMMARY_TABLES}


def _makers(lake: Lake) -> set[str | None]:
    """Who committed the night's parts of the summary tables (``None``: the night written whole)."""
    return {shard for name in SUMMARY_TABLES for shard in lake.tables.shard_parts(name, NIGHT)}


def test_the_split_is_computed_once_and_shards_read_only_their_own_answers(night, monkeypatch) -> None:
    settings, run = night
    splits: list[int] = []
    assign = accounts_module.assign
    monkeypatch.setattr(accounts_module, "assign", lambda *a, **k: splits.append(1) or assign(*a, **k))
    run("metadata", "player_shares", "player_summaries/left", "player_summaries/right", "player_summaries")
    assert len(splits) == 1  # player_shares alone split the players
    lake = Lake(settings.data_dir)
    watchlist = load_watchlist(settings.watchlist)
    for account in ("left", "right"):
        share, _ = load_share(lake, watchlist, account)
        assert share.players == share_of(watchlist, account).players and share.players
    assert len(splits) == 3  # (share_of above, for the comparison)
    joined = _rows(lake)
    assert len(joined["player_snapshots"]) == 40
    assert _makers(lake) == {"left", "right"}  # each account's own commits, kept as they are

    # A re-run of one account: it reads the answers it paid for, and no other shard's.
    read: list[str] = []
    reader = night_tables.read_raws
    monkeypatch.setattr(night_tables, "read_raws", lambda refs: read.extend(ref.name for ref in refs) or reader(refs))
    run("player_summaries/left")
    refs = lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)
    left = {ref.name for ref in refs if ref.key["player"] in _names(watchlist, "left")}
    assert set(read) == left and len(read) == len(left) > 0

    # The join reads no raw answer, and gives the tables a night made from every answer gives.
    def no_body(refs):
        raise AssertionError(f"the join read raw answers: {refs[:1]}")

    monkeypatch.setattr(night_tables, "read_raws", no_body)
    run("player_summaries")
    assert _rows(lake) == joined
    monkeypatch.setattr(night_tables, "read_raws", reader)
    player_tables(lake, NIGHT)  # the rebuild's way: every raw answer, one process
    assert _rows(lake) == joined
    assert _makers(lake) == {None} and not lake.tables.shard_mark(NIGHT, "left").exists()  # written whole: no shard is in


def _names(watchlist, account: str) -> set[str]:
    return {p.name for p in share_of(watchlist, account).players}


def test_a_shard_that_did_not_finish_leaves_the_night_to_its_raw_answers(night, monkeypatch) -> None:
    """A shard whose harvest failed has no parts of the night in (its mark is gone): the join
    makes the night from every raw answer instead, so nothing it paid for is missing. The next
    night of shards replaces the night written whole with their parts."""
    settings, run = night
    run()
    lake = Lake(settings.data_dir)
    expected = _rows(lake)
    lake.tables.shard_mark(NIGHT, "right").unlink()  # as a failed harvest leaves it
    run("player_summaries")
    assert _rows(lake) == expected
    assert _makers(lake) == {None} and not lake.tables.shard_mark(NIGHT, "left").exists()  # made another way: no shard is in
    run("player_summaries/left", "player_summaries/right")
    assert _makers(lake) == {None, "left", "right"}  # the shards' commits beside the night written whole
    run("player_summaries")
    assert _rows(lake) == expected and _makers(lake) == {"left", "right"}  # the join keeps the shards' parts alone
