"""The night's index of raw bodies (``tourneylake.lake.segments.NightIndex``): a body's ref is
made once per status for the night's many queries, and a status settled since is seen."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import OK, RECEIVED, UNUSABLE

NIGHT = date(2019, 12, 10)
FETCHED = datetime(2019, 12, 10, 3, tzinfo=UTC)


def test_a_query_after_a_status_is_settled_sees_it(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    ref = lake.raw.write(NIGHT, calls.PLAYER_SUMMARY, calls.player_summary("PokerStars", "Someone").key, b"{}", "json", FETCHED)
    (received,) = lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=RECEIVED)
    assert lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=RECEIVED) == [received]  # asked again: the same
    lake.raw.settle(ref, OK)
    assert lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=RECEIVED) == []
    (accepted,) = lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)
    assert accepted.status == OK and accepted.token == received.token
    lake.raw.settle(accepted, UNUSABLE)
    assert [r.status for r in lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=None)] == [UNUSABLE]


def test_the_same_query_gives_the_same_refs_without_making_them_again(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    for player in ("One", "Two"):
        ref = lake.raw.write(NIGHT, calls.PLAYER_SUMMARY, calls.player_summary("PokerStars", player).key, b"{}", "json", FETCHED)
        lake.raw.settle(ref, OK)
    first = lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)
    again = lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY)
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
