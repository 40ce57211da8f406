"""Data sets are converted one Arrow call a summary and cut apart at flush (`summary._DataSets`):
the same rows as one summary at a time, whatever mix of summaries a batch holds; garbage in
any of the five string columns is named as before; a number is read like its spelling."""

from __future__ import annotations

import copy
from datetime import date
from typing import Any

import orjson
import pyarrow as pa
import pytest

from tests.helpers import DATA
from tourneylake.api import tree
from tourneylake.tables.normalize import Rates, SummaryNormalizer, axis_types, series_types, statistic_types

NIGHT = date(2019, 12, 10)


@pytest.fixture(scope="module")
def metadata() -> tree.Node:
    return tree.parse((DATA / "metadata-with-rates.json").read_bytes(), "json")


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return orjson.loads((DATA / "recorded" / "player-summary.json").read_bytes())


def _normalizer(meta: tree.Node) -> SummaryNormalizer:
    return SummaryNormalizer(NIGHT, Rates.from_response(meta), statistic_types(meta), series_types(meta), axis_types(meta))


def _stats(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["Statistics"]


def _node(raw: dict[str, Any]) -> tree.Node:
    return tree.parse(orjson.dumps(raw), "json")


def _datasets(meta: tree.Node, raws: list[dict[str, Any]], every: int) -> pa.Table:
    n = _normalizer(meta)
    parts = []
    for i, raw in enumerate(raws, 1):
        n.add(_node(raw), network="PokerStars", player=f"p{i}")
        if i % every == 0:
            parts.append(n.flush()["player_datasets"])
    parts.append(n.flush()["player_datasets"])
    return pa.concat_tables(parts).combine_chunks()


def _variants(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded summary, one without data sets, one with a single lone point, and one whose
    first set has no values (skipped, its points with it)."""
    none = copy.deepcopy(summary)
    del _stats(none)["StatisticalDataSet"]
    lone = copy.deepcopy(summary)
    _stats(lone)["StatisticalDataSet"] = {"@id": "ByGameType", "Data": {"@x": "H/NL", "Y": {"@id": "Count", "$": "279"}}}
    empty_first = copy.deepcopy(summary)
    sets = _stats(empty_first)["StatisticalDataSet"]
    sets[0]["Data"] = [{"@x": d.get("@x"), "Y": []} for d in sets[0]["Data"]]
    return [summary, none, lone, empty_first]


@pytest.mark.parametrize("every", [1, 2, 3, 100])
def test_a_batch_gives_the_rows_of_its_summaries_one_at_a_time(metadata: tree.Node, summary: dict[str, Any], every: int) -> None:
    raws = _variants(summary) * 2
    one_by_one = pa.concat_tables([_datasets(metadata, [raw], 1) for raw in raws]).combine_chunks()
    batched = _datasets(metadata, raws, every)
    # the player differs per summary (p1, p2, ...): compare with the player of each position
    players = [f"p{i}" for i, raw in enumerate(raws, 1) for _ in range(_datasets(metadata, [raw], 1).num_rows)]
    one_by_one = one_by_one.set_column(one_by_one.schema.get_field_index("player"), "player", pa.array(players))
    assert batched.num_rows == sum(_datasets(metadata, [raw], 1).num_rows for raw in raws) > 0
    assert batched.cast(one_by_one.schema).equals(one_by_one.cast(one_by_one.schema))


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda s: s[0].__setitem__("@id", ["x"]), "StatisticalDataSet/@id"),
        (lambda s: s[0]["Data"][0].__setitem__("@x", {"a": "1"}), "StatisticalDataSet/Data/@x"),
        (lambda s: s[0]["Data"][0].__setitem__("@z", ["1"]), "StatisticalDataSet/Data/@z"),
        (lambda s: s[-1]["Data"][-1]["Y"][-1].__setitem__("@id", {"a": "1"}), "StatisticalDataSet/Data/Y/@id"),
        (lambda s: s[-1]["Data"][-1]["Y"][-1].__setitem__("$", ["1"]), "StatisticalDataSet/Data/Y/\\$"),
    ],
)
def test_garbage_in_any_column_is_named_and_keeps_nothing(metadata: tree.Node, summary: dict[str, Any], where, path) -> None:
    raw = copy.deepcopy(summary)
    where(_stats(raw)["StatisticalDataSet"])
    n = _normalizer(metadata)
    n.add(_node(summary), network="PokerStars", player="good")
    with pytest.raises(tree.MalformedPayload, match=f"^Response/PlayerResponse/PlayerView/Player/Statistics/{path}: "):
        n.add(_node(raw), network="PokerStars", player="bad")
    assert n.pending == 1
    assert n.flush()["player_datasets"].num_rows == _datasets(metadata, [summary], 1).num_rows


def test_numbers_read_like_their_spelling(metadata: tree.Node, summary: dict[str, Any]) -> None:
    raw = copy.deepcopy(summary)
    y = _stats(raw)["StatisticalDataSet"][0]["Data"][0]["Y"][0]
    served = y["$"]
    y["$"] = float(served) if "." in served else int(served)
    assert _datasets(metadata, [raw], 1)["value"].to_pylist() == _datasets(metadata, [summary], 1)["value"].to_pylist()
