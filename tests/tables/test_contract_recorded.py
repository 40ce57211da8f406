"""Contract tests: our readers against responses recorded from the live service."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.helpers import DATA
from tourneylake.api import CredentialsError, UnknownServiceError, read_envelope
from tourneylake.api.envelope import service_error
from tourneylake.api.tree import Node, parse_json, parse_xml, to_json, to_xml
from tourneylake.sandbox.stats import STATISTIC_IDS as SANDBOX_STATISTIC_IDS

RECORDED = DATA / "recorded"

# The 37 statistic ids of the recorded real summary, in order (the recorded player summary): the sandbox
# serves the same, plus `Entries` (newer clients ask for it) — one list, so they cannot drift.
STATISTIC_IDS = [sid for sid in SANDBOX_STATISTIC_IDS if sid != "Entries"]


def load(name: str) -> Node:
    data = (RECORDED / name).read_bytes()
    return parse_xml(data) if name.endswith(".xml") else parse_json(data)


@pytest.fixture(scope="module")
def summary() -> Node:
    return load("player-summary.json")


@pytest.fixture(scope="module")
def metadata() -> Node:
    return load("metadata.json")


def test_summary_statistics(summary: Node) -> None:
    player = summary.find("PlayerResponse/PlayerView/Player")
    assert player is not None
    assert player.attrs == {
        "country": "HU",
        "countryName": "Hungary",
        "lastActivity": "1575870493",
        "name": "Borbas.Geri",
        "network": "PokerStars",
    }
    stats = player.one("Statistics")
    assert stats.attr("displayCurrency") == "USD"
    values = {s.attr("id"): s.text for s in stats.all("Statistic")}
    assert [s.attr("id") for s in stats.all("Statistic")] == STATISTIC_IDS
    assert values["Count"] == "279"
    assert values["Profit"] == "55.48"
    assert values["AvROI"] == "20.7"
    assert values["FirstGameDate"] == "1341360101"
    assert summary.find("PlayerResponse/PlayerView").child_text("Filter") is None  # "" = unfiltered


def test_summary_recent_tournaments(summary: Node) -> None:
    tournaments = summary.find("PlayerResponse/PlayerView/Player/RecentTournaments").all("Tournament")
    assert len(tournaments) == 8
    entries = [t.all("TournamentEntry") for t in tournaments]
    assert all(len(e) == 1 for e in entries)  # a lone object in the JSON, read as a list
    prizes = {t.attr("id"): e[0].attr("prize") for t, e in zip(tournaments, entries, strict=True)}
    assert prizes == {
        "2754430738": None,
        "2754427402": None,
        "2753613930": "1.18",
        "2753602668": None,
        "2753515421": None,
        "2752861824": "11.37",
        "2752851373": None,
        "2752331045": None,
    }
    first = tournaments[0]
    assert (first.attr("currency"), first.attr("stake"), first.attr("rake")) == ("USD", "1.32", "0.18")
    assert first.attr("flags") == "T" and first.attr("totalEntrants") == "9"


def test_summary_datasets_keep_lists(summary: Node) -> None:
    stats = summary.find("PlayerResponse/PlayerView/Player/Statistics")
    sets = {d.attr("id"): d for d in stats.all("StatisticalDataSet")}
    assert {"ByStake", "ByMonth", "ByGameType"} <= set(sets)
    for data in sets["ByStake"].all("Data"):
        assert data.attr("x") is not None
        assert all(y.attr("id") for y in data.all("Y"))


def test_summary_envelope(summary: Node) -> None:
    envelope = read_envelope(summary)
    assert envelope.success is True
    assert envelope.timestamp == datetime(2019, 12, 10, 3, 3, 24, tzinfo=UTC)
    assert envelope.metadata_hash == "aef83e3d1f034d04321d61099076ef00"
    assert envelope.app_version is None
    info = envelope.user_info
    assert info is not None and info.logged_in is True
    assert info.remaining_searches == 149
    assert info.username == "__USERNAME__"
    assert {r.code for r in info.regions} == {"NonUS", "All"}
    assert info.expiration_date == datetime.fromtimestamp(1578092748, tz=UTC)
    assert info.request_languages == "en-us"
    assert info.authorized_networks_all is True


def test_metadata(metadata: Node) -> None:
    envelope = read_envelope(metadata)
    assert envelope.success and envelope.user_info is None  # the real metadata has no UserInfo
    response = metadata.one("MetadataResponse")
    currencies = response.find("Currencies").all("Currency")
    assert [c.attr("iso") for c in currencies][:5] == ["USD", "GBP", "EUR", "SEK", "CAD"]
    assert all(c.attr("rate") is None for c in currencies)  # older metadata: no rates
    networks = {n.attr("name"): n for n in response.find("Networks").all("Network")}
    assert len(networks) == 63
    single = networks["888Poker(ES-PT)"].find("Skins").all("Skin")  # a bare object in the JSON
    assert len(single) == 1 and single[0].attr("name")
    assert len(networks["888Poker"].find("Skins").all("Skin")) > 1
    no_skins = networks["888(NJ)"].one("Skins")
    assert (no_skins.all("Skin") if no_skins is not None else []) == []
    constraints = response.find("FilterDefinition").all("ConstraintDefinition")
    assert len(constraints) == 24
    by_id = {c.attr("id"): c for c in constraints}
    assert by_id["Stake"].attr("type") == "CashRange"
    assert {o.attr("id") for o in by_id["Class"].all("Option")} == {"SNG", "SCHEDULED", "LIVE"}
    assert by_id["Date"].all("Option") == []  # a missing container reads as empty


@pytest.mark.parametrize("name", ["error.json", "error.xml"])
def test_error_in_both_formats(name: str) -> None:
    root = load(name)
    envelope = read_envelope(root)
    assert envelope.success is False
    error = service_error(root, envelope, "download")
    assert isinstance(error, UnknownServiceError) and not isinstance(error, CredentialsError)
    assert error.code == 200016
    assert error.service_message == "Valid download types are ‘installer’ and ‘updater’."
    assert envelope.user_info is not None and envelope.user_info.logged_in is False
    assert envelope.user_info.remaining_searches == 0
    assert envelope.user_info.authorized_networks_all is None  # <AuthorizedNetworks/> and ""


def test_error_same_tree_from_xml_and_json() -> None:
    from_xml = load("error.xml").to_element()
    from_json = load("error.json").to_element()
    # The two recordings were made minutes apart: only the timestamp differs.
    from_xml.attrs.pop("timestamp")
    from_json.attrs.pop("timestamp")
    assert from_xml.canonical() == from_json.canonical()


@pytest.mark.parametrize("name", ["player-summary.json", "metadata.json", "error.json"])
def test_recorded_round_trip_through_both_writers(name: str) -> None:
    element = load(name).to_element()
    assert parse_xml(to_xml(element)).to_element().canonical() == element.canonical()
    assert parse_json(to_json(element)).to_element().canonical() == element.canonical()
