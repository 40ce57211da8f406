"""One night rebuilt on two cores (``tourneylake.tables.split_night``): a forked child reads a
share of the night's summaries, and the night's tables hold exactly the rows one process makes —
tournaments both shares list alike written once, listed otherwise kept by content, unreadable
answers settled and reported — also when the child fails."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tests.tables.test_one_row_per_key import EARLY, FETCHED, LATE, METADATA, NIGHT, answer
from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import UNUSABLE
from tourneylake.tables import coverage, split_night
from tourneylake.tables.night_tables import rebuild_night, stored_summary_refs, target_key
from tourneylake.tables.reference import InForce

TABLES = ("player_snapshots", "player_statistics", "player_datasets", "player_timeline", "tournaments", "tournament_entries")


# Every answer lists the same tournaments: most alike (one row each, whichever share reads
# them), some otherwise (later, other entrants: one row by content), two unreadable.
ANSWERS = [
    *(answer(f"Alike{i}", EARLY, "9") for i in range(8)),
    *(answer(f"Later{i}", LATE, str(50 + i)) for i in range(4)),
]
UNREADABLE = [(calls.player_summary("PokerStars", f"Broken{i}").key, b'{"Response": {"@success": "true"') for i in range(2)]


def _lake(folder: Path, players: set[str] | None = None) -> Lake:
    """A lake holding the night's metadata and the answers (of ``players`` only, when given)."""
    lake = Lake(folder).claim("sandbox")
    lake.raw.settle(lake.raw.write(NIGHT, calls.METADATA, {"hash": ""}, METADATA, "json", FETCHED), "ok")
    for key, body in [*ANSWERS, *UNREADABLE]:
        if players is not None and key["player"] not in players:
            continue
        lake.raw.settle(lake.raw.write(NIGHT, calls.PLAYER_SUMMARY, key, body, "json", FETCHED), "ok")
    return lake


def _night(lake: Lake) -> dict[str, list[dict]]:
    """The night's player tables, each a sorted list of its rows (a multiset: parts in any order)."""
    return {name: sorted(lake.tables.read_table(name, NIGHT).to_pylist(), key=repr) for name in TABLES}


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A helper forked for any night of these tests (pytest's workers run threads of their
    own, and the nights are small); the children's pids, once forked."""
    forked: list[int] = []
    fork = split_night.Helper.fork.__func__  # type: ignore[attr-defined]

    def recorded(cls, lake, night):
        helper = fork(cls, lake, night)
        if helper is not None:
            forked.append(helper.pid)
        return helper

    monkeypatch.setattr(split_night, "MIN_SUMMARIES", 1)
    monkeypatch.setattr(split_night, "can_fork", lambda lake: True)
    monkeypatch.setattr(split_night.Helper, "fork", classmethod(recorded))
    return forked


def _in_one_process(folder: Path, players: set[str] | None = None) -> tuple[dict[str, list[dict]], list[str], Lake]:
    lake = _lake(folder, players)
    unusable: list[str] = []
    rebuild_night(lake, NIGHT, unusable)
    return _night(lake), unusable, lake


def test_the_shares_split_the_targets_whole(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    refs = stored_summary_refs(lake, NIGHT)
    mine, theirs = split_night._shares(refs)
    assert sorted(mine + theirs, key=repr) == sorted(refs, key=repr)
    assert {target_key(r.key) for r in mine}.isdisjoint(target_key(r.key) for r in theirs)
    assert len(theirs) == round(len(refs) * split_night.CHILD_SHARE)


def test_a_night_on_two_cores_has_the_rows_of_one_process(tmp_path: Path, forking: list[int], caplog) -> None:
    expected, expected_unusable, one = _in_one_process(tmp_path / "one")
    lake = _lake(tmp_path / "two")
    mine, theirs = split_night._shares(stored_summary_refs(lake, NIGHT))
    for share in (mine, theirs):  # each share lists the tournaments alike and otherwise
        players = {r.key["player"][:5] for r in share}
        assert {"Alike", "Later"} <= players, players
    unusable: list[str] = []
    with caplog.at_level(logging.WARNING):
        rows = split_night.rebuild_night_on_two_cores(lake, NIGHT, unusable)
    assert len(forking) == 1 and "helper process failed" not in caplog.text
    assert _night(lake) == expected
    assert sorted(unusable) == sorted(expected_unusable) and len(unusable) == 2
    assert rows["tournaments"] == lake.tables.read_table("tournaments", NIGHT).num_rows == 8  # one row a key, by content
    # The unreadable answers are marked so in the lake, whichever share read them.
    assert {r.key["player"] for r in lake.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=UNUSABLE)} == {"Broken0", "Broken1"}
    assert {r.key["player"] for r in one.raw.refs(NIGHT, calls.PLAYER_SUMMARY, status=UNUSABLE)} == {"Broken0", "Broken1"}


def test_answers_read_alike_by_both_shares_need_no_rewrite(tmp_path: Path, forking: list[int], monkeypatch) -> None:
    lake = _lake(tmp_path, {f"Alike{i}" for i in range(8)})
    passes = []
    monkeypatch.setattr(
        "tourneylake.tables.night_tables.keep_one_row_per_key", lambda lake, night, repeating=None: passes.append(repeating) or {}
    )
    split_night.rebuild_night_on_two_cores(lake, NIGHT, [])
    assert len(forking) == 1 and passes == [set()]  # both kept each key once, as listed: no table read back
    assert lake.tables.read_table("tournaments", NIGHT).num_rows == 8


def test_a_key_each_share_lists_otherwise_is_made_one_row_by_content(tmp_path: Path, forking: list[int], monkeypatch) -> None:
    """Each share reads one answer, so neither normaliser alone saw a key twice."""
    two = {"Alike0", "Later0"}
    expected, _, _ = _in_one_process(tmp_path / "one", two)
    lake = _lake(tmp_path / "two", two)
    split_night.rebuild_night_on_two_cores(lake, NIGHT, [])
    assert len(forking) == 1
    assert _night(lake) == expected and lake.tables.read_table("tournaments", NIGHT).num_rows == 8


def test_a_helper_that_fails_leaves_its_share_to_this_process(tmp_path: Path, forking: list[int], monkeypatch, caplog) -> None:
    expected, expected_unusable, _ = _in_one_process(tmp_path / "one")

    def broken(self):
        raise RuntimeError("the child's disk is full")

    monkeypatch.setattr(split_night._ChildSink, "flush", broken)
    lake = _lake(tmp_path / "two")
    unusable: list[str] = []
    with caplog.at_level(logging.WARNING):
        split_night.rebuild_night_on_two_cores(lake, NIGHT, unusable)
    assert len(forking) == 1
    assert "helper process failed (RuntimeError: the child's disk is full): its share is read here" in caplog.text
    assert _night(lake) == expected and sorted(unusable) == sorted(expected_unusable)


def test_a_stuck_helper_is_stopped_and_its_share_read_here(tmp_path: Path, forking: list[int], monkeypatch, caplog) -> None:
    expected, _, _ = _in_one_process(tmp_path / "one")
    monkeypatch.setattr(split_night._ChildSink, "flush", lambda self: time.sleep(600))
    monkeypatch.setattr(split_night, "_PATIENCE", 0.0)
    monkeypatch.setattr(split_night, "_MIN_PATIENCE_S", 0.5)
    lake = _lake(tmp_path / "two")
    with caplog.at_level(logging.WARNING):
        split_night.rebuild_night_on_two_cores(lake, NIGHT, [])
    assert "helper process failed (it did not finish in time and was stopped)" in caplog.text
    assert _night(lake) == expected


def test_a_helper_is_stopped_when_the_night_fails_before_it_is_handed_over(
    tmp_path: Path, forking: list[int], monkeypatch
) -> None:
    lake = _lake(tmp_path)

    def failing(*args, **kwargs):
        raise RuntimeError("the reference tables could not be written")

    monkeypatch.setattr(split_night, "write_reference_tables", failing)
    with pytest.raises(RuntimeError, match="could not be written"):
        split_night.rebuild_night_on_two_cores(lake, NIGHT, [])
    (pid,) = forking
    with pytest.raises(ChildProcessError):  # reaped already
        os.waitpid(pid, os.WNOHANG)
    assert not lake.tables.nights("player_snapshots")  # no player table committed either


def test_a_small_night_is_read_in_one_process(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(split_night, "can_fork", lambda lake: True)
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked for a small night"))
    lake = _lake(tmp_path)
    assert split_night.Helper.fork(lake, NIGHT) is None  # fewer summaries than MIN_SUMMARIES


def test_no_helper_while_threads_run(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not split_night.can_fork(lake)
    finally:
        stop.set()
        thread.join()


def test_the_nights_own_reference_tables_are_in_force_before_they_are_committed(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")  # holds no table
    currencies = pa.table({"iso": ["EUR"], "rate": [0.5], "metadata_hash": ["h"]})
    in_force = InForce(lake, NIGHT, own={"currencies": currencies})
    assert in_force.currencies is currencies and in_force.rates.rate("EUR") == 0.5 and in_force.metadata_hash == "h"
    assert in_force.statistic_types == {}  # not the night's own: read from the lake (none)


def test_a_first_night_reads_no_statistics_for_its_coverage(tmp_path: Path, monkeypatch) -> None:
    _, _, lake = _in_one_process(tmp_path)
    monkeypatch.setattr(coverage, "_shown", lambda lake, night: pytest.fail("statistics read"))
    assert coverage.coverage_changes(lake, NIGHT).num_rows == 0  # no earlier snapshot to compare with
