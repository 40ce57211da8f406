"""A night's tables from its raw answers (``tourneylake.tables.night_tables``): the path both the harvest
and the rebuild take, so it is tested on real recorded answers, with no network."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import orjson
import pytest

from tests.helpers import DATA
from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.tables.night_tables import metadata_tables, settle_received, summary_labels

NIGHT1, NIGHT2 = date(2019, 12, 10), date(2019, 12, 11)
FETCHED = datetime(2019, 12, 10, 3, tzinfo=UTC)
FULL = (DATA / "metadata-with-rates.json").read_bytes()
HASH = "rates-aef83e3d1f034d04321d61099076ef00"
CACHED = orjson.dumps(
    {"Response": {"@success": "true", "@timestamp": "1576000000", "@metadataHash": HASH, "MetadataResponse": {"@cached": "true"}}}
)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path).claim("sandbox")


def keep(lake: Lake, night: date, resource: str, key: dict, body: bytes, status: str = "ok") -> None:
    lake.raw.settle(lake.raw.write(night, resource, key, body, "json", FETCHED), status)


def test_a_nights_full_metadata_answer_is_its_tables(lake: Lake) -> None:
    keep(lake, NIGHT1, calls.METADATA, {"hash": ""}, FULL)
    result = metadata_tables(lake, NIGHT1)
    assert result is not None and result.downloaded and result.metadata_hash == HASH
    currencies = result.tables["currencies"]
    assert currencies.num_rows > 10 and set(currencies.column("snapshot_date").to_pylist()) == {NIGHT1}


def test_a_current_answer_is_resolved_to_the_copy_it_confirmed(lake: Lake) -> None:
    keep(lake, NIGHT1, calls.METADATA, {"hash": ""}, FULL)
    keep(lake, NIGHT2, calls.METADATA, {"hash": HASH}, CACHED)
    own, confirmed = metadata_tables(lake, NIGHT1), metadata_tables(lake, NIGHT2)
    assert confirmed is not None and not confirmed.downloaded and confirmed.metadata_hash == HASH
    for name, table in confirmed.tables.items():  # the same snapshot, under the second night
        assert set(table.column("snapshot_date").to_pylist()) <= {NIGHT2}
        assert table.drop_columns(["snapshot_date"]) == own.tables[name].drop_columns(["snapshot_date"]), name


def test_a_confirmation_of_a_copy_the_lake_lost_is_none(lake: Lake) -> None:
    keep(lake, NIGHT2, calls.METADATA, {"hash": HASH}, CACHED)
    assert metadata_tables(lake, NIGHT2) is None
    assert metadata_tables(lake, NIGHT1) is None  # no answer at all


def test_bodies_left_unread_by_a_killed_process_get_their_status(lake: Lake) -> None:
    refused = orjson.dumps({"Response": {"@success": "false", "ErrorResponse": {"Error": {"@id": "0", "$": "Internal error"}}}})
    lake.raw.write(NIGHT1, calls.METADATA, {"hash": ""}, FULL, "json", FETCHED)  # written, never read
    lake.raw.write(NIGHT1, calls.COUNTRIES, {}, refused, "json", FETCHED)
    lake.raw.write(NIGHT1, calls.WHATS_NEW, {"limit": ""}, b'{"Response": {"@succ', "json", FETCHED)
    assert settle_received(lake, NIGHT1) == 3
    statuses = {raw.resource: raw.status for raw in lake.raw.bodies(NIGHT1, status=None)}
    assert statuses == {"metadata": "ok", "countries": "refused-0", "whats_new": "malformed"}
    assert settle_received(lake, NIGHT1) == 0


def test_summary_labels_read_old_and_new_keys() -> None:
    new = calls.player_summary(
        "PokerStars", "A", "Class:SNG;Date:1~2", "sng", written="Class:SNG", window="day", anchored=True
    ).key
    assert summary_labels(new) == {
        "network": "PokerStars", "player": "A", "filter_name": "sng", "filter_expression": "Class:SNG",
        "filter_sent": "Class:SNG;Date:1~2", "window": "day", "anchored": True,
    }  # fmt: skip
    old = {"network": "PokerStars", "player": "A", "filter": "Class:SNG", "filter_name": ""}  # before filters were anchored
    assert summary_labels(old)["filter_expression"] == "Class:SNG" and summary_labels(old)["anchored"] is False
