"""The same rows whatever the order (issue 33): when answers of one night list a tournament
differently, the row kept is chosen by content — the latest listing (the answer's server time),
then the row's own values — never by which process read it first. Every order of arrival, the
answers split between two shards' normalisers and commits in either order (then joined), a
rebuild from raw and the warehouse's merge all keep the same rows."""

from __future__ import annotations

import copy
import itertools
from contextlib import ExitStack
from datetime import UTC, date, datetime
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from tests.helpers import DATA
from tourneylake.api import calls
from tourneylake.api.tree import parse
from tourneylake.lake.lake import Lake
from tourneylake.tables.night_tables import (
    SummarySink,
    join_shards,
    keep_one_row_per_key,
    mark_shard,
    player_tables,
    reference_tables,
)
from tourneylake.tables.normalize.summary import SummaryNormalizer
from tourneylake.tables.reference import InForce
from tourneylake.tables.warehouse import Warehouse

NIGHT = date(2019, 12, 10)
FETCHED = datetime(2019, 12, 10, 3, tzinfo=UTC)
SUMMARY = orjson.loads((DATA / "recorded" / "player-summary.json").read_bytes())
METADATA = (DATA / "recorded" / "metadata.json").read_bytes()
EARLY, LATE = 1575947004, 1575947100


def answer(player: str, timestamp: int, entrants: str) -> tuple[dict[str, str], bytes]:
    """A summary for ``player`` answered at ``timestamp`` whose first tournament lists ``entrants``."""
    body = copy.deepcopy(SUMMARY)
    body["Response"]["@timestamp"] = str(timestamp)
    tournaments = body["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]["Tournament"]
    tournaments[0]["@totalEntrants"] = entrants
    return calls.player_summary("PokerStars", player).key, orjson.dumps(body)


# The first tournament: 50 entrants early, then 52 and 51 at one later second. The latest
# listing wins, and of the two at that second, the one whose values sort first (51).
ANSWERS = [answer("Borbas.Geri", EARLY, "50"), answer("Someone", LATE, "52"), answer("Other", LATE, "51")]


def _lake(folder: Path, stored: list[tuple[dict[str, str], bytes]] = ()) -> Lake:
    lake = Lake(folder).claim("sandbox")
    lake.raw.settle(lake.raw.write(NIGHT, calls.METADATA, {"hash": ""}, METADATA, "json", FETCHED), "ok")
    reference_tables(lake, NIGHT)
    for key, body in stored:
        lake.raw.settle(lake.raw.write(NIGHT, calls.PLAYER_SUMMARY, key, body, "json", FETCHED), "ok")
    return lake


def _rows(lake: Lake) -> dict[str, list[dict]]:
    out = {}
    for name in ("tournaments", "tournament_entries"):
        table = lake.tables.read_table(name, NIGHT).drop_columns(["snapshot_date"])
        out[name] = sorted(table.to_pylist(), key=lambda row: (row["network"], row["tournament_id"], row.get("player", "")))
    return out


def _in_one_process(folder: Path, order: list[tuple[dict[str, str], bytes]]) -> dict[str, list[dict]]:
    """The answers in ``order`` through one harvest's sink, a part per answer, then the tables
    the sink says repeat a key made one row per key (as a night does)."""
    lake, repeating = _through_one_sink(_lake(folder), order)
    # Every answer lists the recorded player's entries (its served name) at its own server time.
    assert repeating == {"tournaments", "tournament_entries"}
    keep_one_row_per_key(lake, NIGHT, repeating)
    return _rows(lake)


def _through_one_sink(lake: Lake, answers: list[tuple[dict[str, str], bytes]]) -> tuple[Lake, set[str]]:
    """``answers`` through one harvest's sink, a part per answer; the lake, and the tables of
    which the sink kept a key twice."""
    with ExitStack() as stack:
        sink = SummarySink(lake, NIGHT, InForce(lake, NIGHT), stack, batch_size=1)
        for key, body in answers:
            sink.add(parse(body, "json"), key, FETCHED)
        sink.flush()
    return lake, sink.repeating


def _shard_tables(lake: Lake, answers: list[tuple[dict[str, str], bytes]]) -> dict[str, pa.Table]:
    """One shard's normaliser over its answers (a process of its own: it knows nothing of the others)."""
    in_force = InForce(lake, NIGHT)
    normalizer = SummaryNormalizer(NIGHT, in_force.rates, in_force.statistic_types, in_force.series_types, in_force.axis_types)
    for key, body in answers:
        normalizer.add(parse(body, "json"), network=key["network"], player=key["player"], fetched_at=FETCHED)
    return normalizer.flush()


def _two_shards(folder: Path, first: list, second: list) -> Lake:
    """Two shards' rows committed side by side as their own parts of the night (shard ``a``'s
    first, then ``b``'s), each marked in, not joined yet."""
    lake = _lake(folder)
    for shard, answers in (("a", first), ("b", second)):
        tables = _shard_tables(lake, answers)
        for name in ("tournaments", "tournament_entries"):
            lake.tables.write(name, NIGHT, tables[name], shard=shard)
        mark_shard(lake, NIGHT, shard, "split", {})
    return lake


def test_every_order_of_arrival_keeps_the_same_rows(tmp_path: Path) -> None:
    results = [_in_one_process(tmp_path / f"order{i}", list(order)) for i, order in enumerate(itertools.permutations(ANSWERS))]
    assert all(result == results[0] for result in results[1:])
    chosen = next(row for row in results[0]["tournaments"] if row["tournament_id"] == "2754430738")
    assert chosen["total_entrants"] == 51 and chosen["listed_at"] == datetime.fromtimestamp(LATE, UTC)
    assert len(results[0]["tournaments"]) == 8  # one row per key
    entries = [row for row in results[0]["tournament_entries"] if row["tournament_id"] == "2754430738"]
    assert len(entries) == 1 and entries[0]["listed_at"] == datetime.fromtimestamp(LATE, UTC)


@pytest.mark.parametrize("split", [0, 1, 2])
def test_two_shards_that_disagree_keep_the_same_rows_in_either_order_and_after_a_rebuild(tmp_path: Path, split: int) -> None:
    expected = _in_one_process(tmp_path / "one", ANSWERS)
    mine = [ANSWERS[split]]
    theirs = [a for i, a in enumerate(ANSWERS) if i != split]
    for name, (first, second) in {"mine_first": (mine, theirs), "theirs_first": (theirs, mine)}.items():
        lake = _two_shards(tmp_path / name, first, second)
        assert lake.tables.read_table("tournaments", NIGHT).num_rows > 8  # both shards' listings are in the parts
        with Warehouse(tmp_path / f"{name}.duckdb") as db:  # the warehouse's merge chooses alike
            db.load_night(lake, NIGHT)
            merged = db.connection.execute(
                "SELECT total_entrants, listed_at FROM tournaments WHERE tournament_id = '2754430738'"
            ).fetchall()
        assert merged == [(51, datetime.fromtimestamp(LATE, UTC))]
        join_shards(lake, NIGHT, "split", ["a", "b"])  # no raw answer read
        assert _rows(lake) == expected, name
        assert set(lake.tables.shard_parts("tournaments", NIGHT)) <= {"a", "b"}  # each row in its own shard's parts
        join_shards(lake, NIGHT, "split", ["a", "b"])  # again: nothing changes
        assert _rows(lake) == expected, name
    rebuilt = _lake(tmp_path / "rebuilt", ANSWERS)
    player_tables(rebuilt, NIGHT)  # the rebuild's path: every stored answer, in file order
    assert _rows(rebuilt) == expected


def test_answers_that_agree_keep_one_row_and_no_rewrite(tmp_path: Path) -> None:
    same = [answer("Borbas.Geri", EARLY, "9"), answer("Someone", EARLY, "9")]  # identical listings
    lake, repeating = _through_one_sink(_lake(tmp_path), same)
    assert lake.tables.read_table("tournaments", NIGHT).num_rows == 8  # the normaliser kept each once
    assert repeating == set()  # so a night reads neither table back
    assert keep_one_row_per_key(lake, NIGHT) == {}  # nothing to rewrite
