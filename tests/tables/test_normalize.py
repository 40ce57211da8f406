"""Normalisers on the recorded real responses (and a rates-bearing copy of the metadata)."""

from __future__ import annotations

import copy
import logging
import math
from datetime import UTC, date, datetime

import orjson
import pyarrow as pa
import pytest

from tests.helpers import DATA
from tourneylake.api import tree
from tourneylake.sandbox.stats import STATISTIC_IDS as SANDBOX_STATISTIC_IDS
from tourneylake.tables.normalize import (
    SCHEMAS,
    TABLES,
    Rates,
    SummaryNormalizer,
    axis_types,
    normalize_countries,
    normalize_metadata,
    normalize_news,
    series_types,
    statistic_types,
    tables_markdown,
)

NIGHT = date(2019, 12, 10)
FETCHED = datetime(2019, 12, 10, 3, 3, 24, tzinfo=UTC)

# The 37 statistic ids of the recorded real summary, in order (the recorded player summary): the sandbox
# serves the same, plus `Entries` (newer clients ask for it) — one list, so they cannot drift.
STATISTIC_IDS = [sid for sid in SANDBOX_STATISTIC_IDS if sid != "Entries"]


def _load(name: str) -> bytes:
    return (DATA / name).read_bytes()


@pytest.fixture(scope="module")
def summary_body() -> bytes:
    return _load("recorded/player-summary.json")


@pytest.fixture(scope="module")
def metadata() -> tree.Node:
    return tree.parse(_load("recorded/metadata.json"), "json")


@pytest.fixture(scope="module")
def rated_metadata() -> tree.Node:
    return tree.parse(_load("metadata-with-rates.json"), "json")


def normalizer(meta: tree.Node) -> SummaryNormalizer:
    return SummaryNormalizer(NIGHT, Rates.from_response(meta), statistic_types(meta), series_types(meta), axis_types(meta))


def normalize_one(meta: tree.Node, node: tree.Node, **kw) -> dict[str, pa.Table]:
    n = normalizer(meta)
    n.add(node, network="PokerStars", player="Borbas.Geri", fetched_at=FETCHED, **kw)
    return n.flush()


# ---------------------------------------------------------------------------- metadata


def test_metadata_tables(metadata: tree.Node) -> None:
    tables = normalize_metadata(metadata, NIGHT)
    for name, table in tables.items():
        assert table.schema.equals(SCHEMAS[name]), name
        assert set(table.column("snapshot_date").to_pylist()) <= {NIGHT}
    assert tables["currencies"].num_rows == 14
    assert tables["regions"].num_rows == 7
    assert tables["filter_constraints"].num_rows == 24
    networks = {r["name"]: r for r in tables["networks"].to_pylist()}
    assert len(networks) == 63
    # a single-skin network has a bare Skin object
    assert networks["888Poker(ES-PT)"]["skins"] == [{"id": "4135", "name": "888Poker.es", "major": True}]
    assert networks["888Poker"]["skin_count"] == 10
    assert networks["888(NJ)"]["skins"] == []
    assert networks["888Poker(ES-PT)"]["tracked_games_count"] == 17891097
    assert networks["888Poker"]["closed"] is False and networks["888Poker"]["searchable"] is True
    options = {(r["constraint_id"], r["option_id"]): r for r in tables["filter_options"].to_pylist()}
    assert options[("Class", "SNG")]["name"] == "Sit'n'Go"
    omaha = [r for (c, o), r in options.items() if o == "OMAHA"][0]
    assert omaha["children"] == ["O", "OHL", "O5", "OHL5", "CL", "CLHL"]
    defs = {(r["scope"], r["statistic_id"]): r["type"] for r in tables["statistic_definitions"].to_pylist()}
    assert defs[("player", "AvROI")] == "Percentage"
    assert defs[("player", "FirstGameDate")] == "Timestamp"
    assert defs[("tournament", "AvAbility")] == "Number"
    series = {(r["dataset"], r["series"]): r["type"] for r in tables["dataset_definitions"].to_pylist()}
    assert series[("ByDate", "Profit")] == "Currency"


def test_recorded_metadata_has_no_rates_but_usd_is_one(metadata: tree.Node) -> None:
    currencies = {r["iso"]: r for r in normalize_metadata(metadata, NIGHT)["currencies"].to_pylist()}
    assert currencies["USD"]["rate"] == 1.0 and currencies["USD"]["rate_known"]
    assert currencies["EUR"]["rate"] is None and not currencies["EUR"]["rate_known"]
    rates = Rates.from_response(metadata)
    assert rates.rate("USD") == 1.0 and rates.rate("EUR") is None


def test_rates(rated_metadata: tree.Node) -> None:
    rates = Rates.from_response(rated_metadata)
    assert rates.rate("EUR") == pytest.approx(0.9) and rates.rate("GBP") == pytest.approx(0.8)
    assert rates.rate("SEK") is None  # rate omitted: unknown
    assert rates.rate("XYZ") is None  # not in metadata at all
    assert rates.rate(None) is None
    table = normalize_metadata(rated_metadata, NIGHT)["currencies"]
    again = Rates.from_table(table)
    for iso in ("USD", "EUR", "GBP", "CAD", "SEK", "XYZ"):
        assert again.rate(iso) == rates.rate(iso)


def test_bad_rates_are_unknown(rated_metadata: tree.Node) -> None:
    raw = copy.deepcopy(rated_metadata.raw)
    for c in raw["MetadataResponse"]["Currencies"]["Currency"]:
        if c["@iso"] == "EUR":
            c["@rate"] = "0"
        if c["@iso"] == "GBP":
            c["@rate"] = "n/a"
    rates = Rates.from_response(tree.Node("Response", raw))
    assert rates.rate("EUR") is None and rates.rate("GBP") is None


# ---------------------------------------------------------------------------- summaries


def test_statistics_long_form(metadata: tree.Node, summary_body: bytes) -> None:
    tables = normalize_one(metadata, tree.parse(summary_body, "json"))
    stats = tables["player_statistics"]
    assert stats.num_rows == 37
    rows = stats.to_pylist()
    assert [r["statistic"] for r in rows] == STATISTIC_IDS
    assert all(r["type"] is not None for r in rows)
    by_id = {r["statistic"]: r for r in rows}
    assert by_id["Count"]["type"] == "Number" and by_id["Count"]["value"] == "279" and by_id["Count"]["value_number"] == 279
    assert by_id["AvROI"]["type"] == "Percentage" and by_id["AvROI"]["value_number"] == pytest.approx(20.7)
    assert by_id["AvROI"]["value_usd"] is None
    profit = by_id["Profit"]
    assert profit["type"] == "Currency" and profit["display_currency"] == "USD"
    assert profit["value_usd"] == pytest.approx(55.48) and not profit["usd_rate_missing"]
    first = by_id["FirstGameDate"]
    assert first["type"] == "Timestamp"
    assert first["value_time"] == datetime(2012, 7, 4, 0, 1, 41, tzinfo=UTC)
    assert by_id["Worst100StreakAvProfit"]["value_number"] == pytest.approx(-1.01)
    assert all(r["authorized"] for r in rows)
    assert {r["filter_name"] for r in rows} == {""}
    types = {f: SCHEMAS["player_statistics"].field(f).type for f in ("value_time", "value_usd", "authorized")}
    assert types["value_time"] == pa.timestamp("s", tz="UTC")


def test_snapshot_row(metadata: tree.Node, summary_body: bytes) -> None:
    (snap,) = normalize_one(metadata, tree.parse(summary_body, "json"))["player_snapshots"].to_pylist()
    assert snap["snapshot_date"] == NIGHT
    assert (snap["network"], snap["player"], snap["filter_name"], snap["filter_expression"]) == (
        "PokerStars",
        "Borbas.Geri",
        "",
        "",
    )
    assert snap["country"] == "HU" and snap["country_name"] == "Hungary" and snap["found"]
    assert snap["last_activity_at"] == datetime.fromtimestamp(1575870493, UTC)
    assert snap["display_currency"] == "USD" and snap["statistic_count"] == 37 and snap["tournament_count"] == 8
    assert snap["fetched_at"] == FETCHED
    assert snap["metadata_hash"] == "aef83e3d1f034d04321d61099076ef00"


def test_tournaments_and_entries(metadata: tree.Node, summary_body: bytes) -> None:
    tables = normalize_one(metadata, tree.parse(summary_body, "json"))
    tournaments = tables["tournaments"].to_pylist()
    assert len(tournaments) == 8
    first = tournaments[0]
    assert first["tournament_id"] == "2754430738" and first["network"] == "PokerStars"
    assert first["started_at"] == datetime.fromtimestamp(1575870490, UTC)
    assert first["duration_s"] == 2409 and first["total_entrants"] == 9 and first["players_per_table"] == 9
    assert first["stake"] == pytest.approx(1.32) and first["rake"] == pytest.approx(0.18)
    assert first["stake_usd"] == pytest.approx(1.32) and first["buy_in_usd"] == pytest.approx(1.5)
    assert first["flags"] == ["T"] and first["game_class"] == "sng" and first["state"] == "Completed"
    assert first["prize_pool"] is None and first["prize_pool_usd"] is None
    assert not any(t["usd_rate_missing"] for t in tournaments)

    entries = {e["tournament_id"]: e for e in tables["tournament_entries"].to_pylist()}
    assert len(entries) == 8
    cashed = {tid: e["prize"] for tid, e in entries.items() if e["cashed"]}
    assert cashed == {"2753613930": pytest.approx(1.18), "2752861824": pytest.approx(11.37)}
    assert all(e["prize"] is None and e["prize_usd"] is None for e in entries.values() if not e["cashed"])
    assert entries["2752861824"]["profit"] == pytest.approx(11.37 - 3.16 - 0.34)
    assert entries["2754430738"]["profit"] == pytest.approx(-1.50)
    assert entries["2754430738"]["profit_usd"] == pytest.approx(-1.50)
    assert entries["2754430738"]["position"] == 7 and entries["2754430738"]["player"] == "Borbas.Geri"


def test_datasets_and_timeline(metadata: tree.Node, summary_body: bytes) -> None:
    tables = normalize_one(metadata, tree.parse(summary_body, "json"))
    sets = tables["player_datasets"]
    rows = sets.to_pylist()
    assert len({r["dataset"] for r in rows}) == 11
    stake = [r for r in rows if r["dataset"] == "ByStake" and r["x"] == "USD0.91"]
    assert {r["series"]: r["value"] for r in stake} == {"Profit": "36.05", "AvROI": "51.5", "Count": "70", "Rake": "6.30"}
    two_d = [r for r in rows if r["dataset"] == "ByPositionAndEntrants"]
    assert two_d[0]["x"] == "2" and two_d[0]["z"] == "1"
    # a list-valued series stays a string, with no number
    listed = [r for r in rows if r["dataset"] == "ByStake" and r["series"] == "Stakes"]
    assert listed and all(r["value_number"] is None for r in listed)
    events = tables["player_timeline"].to_pylist()
    assert len(events) == 22
    prizes = [e for e in events if e["category"] == "Prize"]
    assert len(prizes) == 13 and prizes[0]["game_id"] == "582610452" and prizes[0]["prize"] == pytest.approx(16.79)
    assert prizes[0]["prize_usd"] == pytest.approx(16.79)
    assert dict(events[0]["attributes"])["code"] == "2d"


def test_dataset_axes_are_typed_by_metadata_and_kept_as_served(metadata: tree.Node, summary_body: bytes) -> None:
    rows = normalize_one(metadata, tree.parse(summary_body, "json"))["player_datasets"].to_pylist()
    month = next(r for r in rows if r["dataset"] == "ByMonth")  # xAxisType Timestamp: epoch seconds
    assert month["x"] == "1341100800" and month["x_time"] == datetime(2012, 7, 1, tzinfo=UTC) and month["x_number"] is None
    hour = next(r for r in rows if r["dataset"] == "ByHourOfWeek" and r["x"] == "13")  # Number
    assert hour["x_number"] == 13.0 and hour["x_time"] is None
    stake = next(r for r in rows if r["dataset"] == "ByStake")  # String: only the value as served
    assert stake["x"] == "USD0.91" and stake["x_time"] is None and stake["x_number"] is None
    assert all(r["x"] is not None for r in rows)


def test_usd_conversion_with_rates(rated_metadata: tree.Node, summary_body: bytes) -> None:
    raw = orjson.loads(summary_body)
    player = raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]
    player["Statistics"]["@displayCurrency"] = "EUR"
    tours = player["RecentTournaments"]["Tournament"]
    tours[2]["@currency"] = "EUR"  # cashed 1.18, stake 0.44, rake 0.06
    tours[2]["@prizePool"] = "4.00"
    tours[5]["@currency"] = "SEK"  # no rate: NULL _usd and the flag
    tables = normalize_one(rated_metadata, tree.parse(orjson.dumps(raw), "json"))

    stats = {r["statistic"]: r for r in tables["player_statistics"].to_pylist()}
    assert stats["Profit"]["display_currency"] == "EUR"
    assert stats["Profit"]["value_usd"] == pytest.approx(55.48 / 0.9)
    assert stats["Count"]["value_usd"] is None and not stats["Count"]["usd_rate_missing"]

    t = {r["tournament_id"]: r for r in tables["tournaments"].to_pylist()}
    eur = t["2753613930"]
    assert eur["stake_usd"] == pytest.approx(0.44 / 0.9) and eur["rake_usd"] == pytest.approx(0.06 / 0.9)
    assert eur["prize_pool_usd"] == pytest.approx(4 / 0.9) and eur["usd_rate"] == pytest.approx(0.9)
    assert not eur["usd_rate_missing"]
    sek = t["2752861824"]
    assert sek["stake"] == pytest.approx(3.16)
    assert sek["stake_usd"] is None and sek["rake_usd"] is None and sek["buy_in_usd"] is None
    assert sek["usd_rate_missing"] is True and sek["usd_rate"] is None
    assert t["2754430738"]["usd_rate_missing"] is False

    e = {r["tournament_id"]: r for r in tables["tournament_entries"].to_pylist()}
    assert e["2753613930"]["prize_usd"] == pytest.approx(1.18 / 0.9)
    assert e["2753613930"]["profit_usd"] == pytest.approx((1.18 - 0.44 - 0.06) / 0.9)
    assert e["2752861824"]["profit"] == pytest.approx(11.37 - 3.5)
    assert e["2752861824"]["profit_usd"] is None and e["2752861824"]["usd_rate_missing"]


def test_xml_and_json_give_identical_tables(metadata: tree.Node, summary_body: bytes) -> None:
    node = tree.parse(summary_body, "json")
    xml_body = tree.to_xml(node.to_element())
    from_json = normalize_one(metadata, node)
    from_xml = normalize_one(metadata, tree.parse(xml_body, "xml"))
    meta_xml = tree.parse(tree.to_xml(metadata.to_element()), "xml")
    assert normalize_one(meta_xml, node)["player_statistics"].equals(from_json["player_statistics"])
    for name in from_json:
        assert from_xml[name].schema.equals(from_json[name].schema), name
        assert from_xml[name].to_pylist() == from_json[name].to_pylist(), name
    for name, table in normalize_metadata(metadata, NIGHT).items():
        assert normalize_metadata(meta_xml, NIGHT)[name].to_pylist() == table.to_pylist(), name


def test_schemas_are_fixed(metadata: tree.Node, summary_body: bytes) -> None:
    tables = normalize_one(metadata, tree.parse(summary_body, "json"))
    for name, table in tables.items():
        assert table.schema.equals(SCHEMAS[name]), name
    empty = normalizer(metadata).flush()
    for name, table in empty.items():
        assert table.num_rows == 0 and table.schema.equals(SCHEMAS[name]), name
    doc = tables_markdown()
    for name in TABLES:
        assert f"## `{name}`" in doc
    for spec in TABLES.values():
        money = {c for c, t, _ in spec.columns if f"{c}_usd" in spec.descriptions}
        assert all(f"{m}_usd" in spec.descriptions for m in money)


def test_batches_dedup_tournaments(metadata: tree.Node, summary_body: bytes) -> None:
    node = tree.parse(summary_body, "json")
    n = normalizer(metadata)
    n.add(node, network="PokerStars", player="Borbas.Geri", fetched_at=FETCHED)
    n.add(node, network="PokerStars", player="Borbas.Geri", filter_name="turbo", filter_expression="Type:T", fetched_at=FETCHED)
    assert n.pending == 2
    first = n.flush()
    assert n.pending == 0
    assert first["player_snapshots"].num_rows == 2
    assert first["player_statistics"].num_rows == 74
    assert set(first["player_statistics"].column("filter_name").to_pylist()) == {"", "turbo"}
    assert first["tournaments"].num_rows == 8
    assert first["tournament_entries"].num_rows == 8
    n.add(node, network="PokerStars", player="Borbas.Geri", filter_name="again", fetched_at=FETCHED)
    second = n.flush()
    assert second["player_statistics"].num_rows == 37
    assert second["tournaments"].num_rows == 0 and second["tournament_entries"].num_rows == 0


@pytest.mark.parametrize("fast", [True, False])
def test_a_later_batch_keeps_only_what_earlier_batches_had_not(metadata: tree.Node, summary_body: bytes, fast: bool) -> None:
    """A batch that repeats some of the earlier batches' tournaments keeps the others, in
    order, and each of its own keys once (the night's keys are kept as hashes: `_seen`)."""
    raw = orjson.loads(summary_body)
    tournaments = raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]["Tournament"]
    ids = [t["@id"] for t in tournaments]
    n = normalizer(metadata)
    n.fast = fast
    half = copy.deepcopy(raw)
    for t in half["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]["Tournament"][::2]:
        t["@id"] = "new" + t["@id"]
    n.add(tree.parse(summary_body, "json"), network="PokerStars", player="Borbas.Geri")
    assert n.flush()["tournaments"].column("tournament_id").to_pylist() == ids
    for player in ("Borbas.Geri", "Borbas.Geri", "Someone"):  # the same summary twice, then another player's
        n.add(tree.parse(orjson.dumps(half), "json"), network="PokerStars", player=player)
    second = n.flush()
    new = ["new" + i for i in ids[::2]]
    assert second["tournaments"].column("tournament_id").to_pylist() == new
    entries = second["tournament_entries"].select(["tournament_id", "player"]).to_pylist()
    assert [(e["tournament_id"], e["player"]) for e in entries] == [(i, "Borbas.Geri") for i in new]
    n.add(tree.parse(orjson.dumps(half), "json"), network="PokerStars", player="Borbas.Geri")
    third = n.flush()
    assert third["tournaments"].num_rows == 0 and third["tournament_entries"].num_rows == 0


def test_unauthorized_and_unknown_statistics(metadata: tree.Node, summary_body: bytes) -> None:
    raw = orjson.loads(summary_body)
    stats = raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["Statistics"]
    stats["Statistic"] = [
        {"@id": "Entries", "$": "12"},  # not in this metadata: type NULL, value kept
        {"@id": "Profit", "@authorized": "false"},
    ]
    stats["StatisticalDataSet"] = {"@id": "ByGameType", "Data": {"@x": "H/NL", "Y": {"@id": "Count", "$": "279"}}}
    stats["Timeline"] = ""
    del raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]["RecentTournaments"]
    tables = normalize_one(metadata, tree.parse(orjson.dumps(raw), "json"))
    rows = {r["statistic"]: r for r in tables["player_statistics"].to_pylist()}
    assert rows["Entries"]["type"] is None and rows["Entries"]["value"] == "12" and rows["Entries"]["value_number"] == 12
    assert rows["Profit"]["authorized"] is False and rows["Profit"]["value"] is None and rows["Profit"]["value_usd"] is None
    assert not rows["Profit"]["usd_rate_missing"]
    assert tables["player_datasets"].to_pylist()[0]["value"] == "279"
    assert tables["player_timeline"].num_rows == 0 and tables["tournaments"].num_rows == 0


def test_error_response_is_refused(metadata: tree.Node) -> None:
    error = tree.parse(_load("recorded/error.json"), "json")
    with pytest.raises(ValueError, match="error response"):
        normalizer(metadata).add(error, network="PokerStars", player="x")


def test_missing_player_gives_a_snapshot_row(metadata: tree.Node) -> None:
    node = tree.parse(b'{"Response": {"@success": "true", "@timestamp": "1575947004", "PlayerResponse": ""}}', "json")
    tables = normalize_one(metadata, node)
    (snap,) = tables["player_snapshots"].to_pylist()
    assert snap["found"] is False and snap["statistic_count"] == 0
    assert all(t.num_rows == 0 for name, t in tables.items() if name != "player_snapshots")


# ---------------------------------------------------------------------------- countries, news


def _response(payload_name: str, payload) -> tree.Node:
    body = {
        "Response": {"@success": "true", "@timestamp": "1575947004", "UserInfo": {"@loggedIn": "false"}, payload_name: payload}
    }
    return tree.parse(orjson.dumps(body), "json")


def test_countries_sandbox_shape_json_and_xml() -> None:
    node = _response(
        "CountriesResponse", {"Country": [{"@code": "HU", "@name": "Hungary"}, {"@code": "GB", "@name": "United Kingdom"}]}
    )
    result = normalize_countries(node, NIGHT)
    table, warnings = result
    assert warnings == []
    assert table.schema.equals(SCHEMAS["countries"])
    assert [(r["code"], r["name"]) for r in table.to_pylist()] == [("HU", "Hungary"), ("GB", "United Kingdom")]
    xml = tree.parse(tree.to_xml(node.to_element()), "xml")
    assert normalize_countries(xml, NIGHT).table.to_pylist() == table.to_pylist()


def test_countries_other_shapes() -> None:
    nested = _response("CountriesResponse", {"Countries": {"Country": {"@iso": "HU", "Name": "Hungary"}}})
    table, warnings = normalize_countries(nested, NIGHT)
    assert [(r["code"], r["name"]) for r in table.to_pylist()] == [("HU", "Hungary")] and warnings == []
    texts = _response("CountriesResponse", {"Country": ["HU", "AT"]})
    assert normalize_countries(texts, NIGHT).table.column("code").to_pylist() == ["HU", "AT"]
    odd = _response("CountriesResponse", {"A": "1", "B": {"C": "2"}})
    table, warnings = normalize_countries(odd, NIGHT)
    assert table.num_rows == 1 and table.column("code").to_pylist() == [None]
    assert orjson.loads(table.column("raw_json")[0].as_py()) == {"A": "1", "B": {"C": "2"}}
    assert warnings and "unrecognised" in warnings[0]


def test_news_sandbox_shape() -> None:
    items = [
        {"@id": "2", "@date": "1515000000", "@title": "Second", "@url": "https://example.com/news/2", "$": "Text two"},
        {"@id": "1", "@date": "1514000000", "@title": "First", "$": "Text one"},
    ]
    table, warnings = normalize_news(_response("WhatsNewResponse", {"NewsItem": items}), NIGHT)
    assert warnings == []
    rows = table.to_pylist()
    assert [(r["news_id"], r["title"], r["body"]) for r in rows] == [("2", "Second", "Text two"), ("1", "First", "Text one")]
    assert rows[0]["published_at"] == datetime.fromtimestamp(1515000000, UTC)
    assert rows[0]["url"] == "https://example.com/news/2" and rows[1]["url"] is None
    lone, _ = normalize_news(_response("WhatsNewResponse", {"NewsItem": items[0]}), NIGHT)
    assert lone.num_rows == 1
    empty, warnings = normalize_news(_response("WhatsNewResponse", ""), NIGHT)
    assert empty.num_rows == 0 and warnings


def test_the_sandbox_catalog_shapes_are_read() -> None:
    from tourneylake.sandbox import catalog

    countries = tree.Element("Response", {"success": "true"}, None, [catalog.countries_payload()])
    table, warnings = normalize_countries(tree.parse(tree.to_json(countries), "json"), NIGHT)
    assert warnings == [] and table.num_rows > 10 and None not in table.column("code").to_pylist()
    news = tree.Element("Response", {"success": "true"}, None, [catalog.news_payload(date(2019, 12, 10), None)])
    table, warnings = normalize_news(tree.parse(tree.to_xml(news), "xml"), NIGHT)
    assert warnings == [] and table.num_rows > 10
    assert None not in table.column("published_at").to_pylist() and None not in table.column("title").to_pylist()


def test_float_columns_tolerate_garbage() -> None:
    from tourneylake.tables.normalize import _columns as C

    assert C.float_array(["1.5", "", None, "nan", "USD1", "-2", "1e3"]).to_pylist() == [1.5, None, None, None, None, -2.0, 1000.0]
    assert C.float_array(["1", 2, 2.5]).to_pylist() == [1.0, 2.0, 2.5]
    assert C.int_array(["1", "2.0", "x", None, "99999999999"], pa.int32()).to_pylist() == [1, 2, None, None, None]
    assert not math.isnan(C.float_array(["0.20"]).to_pylist()[0])


@pytest.mark.parametrize(
    "value",
    ["+1", "1.", "-.5", "+.5e-3", "1E+5", "0001", "-0", "1e-400", "nan", "NaN", "inf", "-Infinity", "1e400",
     " 1", "1 ", "0x10", "1_0", "\u0661", "1.2.3", "", "e5", "5e", "-", "."],
)  # fmt: skip
def test_a_float_column_reads_a_value_alone_as_among_garbage(value: str) -> None:
    """A column the cast takes whole skips the regex (`float_array`): alone, a value reads as it
    does in a column the regex has to mask ("USD1" sends that one the regex way)."""
    from tourneylake.tables.normalize import _columns as C

    alone = C.float_array([value]).to_pylist()
    masked = C.float_array([value, "USD1"]).to_pylist()[:1]
    assert str(alone) == str(masked)  # str: -0.0 is not 0.0


@pytest.mark.parametrize("value", ["7", "007", "+7", "-7", "99999999999", "0x10", " 7", "7.0", "\u0661", "", "-"])
def test_an_int_column_reads_a_value_alone_as_among_others(value: str) -> None:
    """`int_array` takes a column of ASCII digits by the cast alone, a signed one after the
    regex, anything else value by value: a value reads the same whichever way its column went."""
    from tourneylake.tables.normalize import _columns as C

    alone = C.int_array([value], pa.int32()).to_pylist()
    signed = C.int_array([value, "-1"], pa.int32()).to_pylist()[:1]  # the regex's way
    odd = C.int_array([value, "x"], pa.int32()).to_pylist()[:1]  # value by value
    assert alone == signed == odd


def test_json_numbers_and_nulls_read_like_strings(rated_metadata: tree.Node, summary_body: bytes) -> None:
    """Attributes served as JSON numbers (or null) take the per-value path and still give the
    same tables as their string spelling (null: absent, also from the attributes map)."""
    raw = orjson.loads(summary_body)
    player = raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]
    stats = player["Statistics"]
    events = stats["Timeline"]["Event"]
    events = events if isinstance(events, list) else [events]
    events[0]["@category"] = None
    expected = normalize_one(rated_metadata, tree.parse(orjson.dumps(raw), "json"))
    del events[0]["@category"]
    assert normalize_one(rated_metadata, tree.parse(orjson.dumps(raw), "json"))["player_timeline"].equals(
        expected["player_timeline"]
    )

    def numbers(items) -> int:
        changed = 0
        for item in items if isinstance(items, list) else [items]:
            for key, value in item.items():
                if isinstance(value, str) and value.isdigit() and str(int(value)) == value:
                    item[key] = int(value)
                    changed += 1
        return changed

    tournaments = player["RecentTournaments"]["Tournament"]
    assert numbers(stats["Statistic"]) and numbers(events) and numbers(tournaments)
    assert numbers([t["TournamentEntry"] for t in (tournaments if isinstance(tournaments, list) else [tournaments])])
    events[0]["@category"] = None
    got = normalize_one(rated_metadata, tree.parse(orjson.dumps(raw), "json"))
    for name, table in expected.items():
        assert got[name].equals(table), name


# ---------------------------------------------------------------------------- hostile and broken input


def _player(raw: dict) -> dict:
    return raw["Response"]["PlayerResponse"]["PlayerView"]["Player"]


def _node(raw: dict) -> tree.Node:
    return tree.parse(orjson.dumps(raw), "json")


def test_an_object_as_statistic_id_is_refused_by_add_not_flush(metadata: tree.Node, summary_body: bytes) -> None:
    raw = orjson.loads(summary_body)
    _player(raw)["Statistics"]["Statistic"][3]["@id"] = {"id": "BODY-TEXT"}
    n = normalizer(metadata)
    with pytest.raises(
        tree.MalformedPayload, match=r"^Response/PlayerResponse/PlayerView/Player/Statistics/Statistic\[3\]/@id: an object"
    ):
        n.add(_node(raw), network="PokerStars", player="x")
    assert n.pending == 0
    assert all(t.num_rows == 0 for t in n.flush().values())


def _break_statistic(player: dict) -> None:
    player["Statistics"]["Statistic"][-1]["@id"] = {"x": "1"}


def _break_dataset_value(player: dict) -> None:
    player["Statistics"]["StatisticalDataSet"][-1]["Data"][-1]["Y"][-1]["$"] = ["1"]


def _break_event(player: dict) -> None:
    player["Statistics"]["Timeline"]["Event"][-1]["@date"] = {"x": "1"}


def _break_last_entry(player: dict) -> None:
    player["RecentTournaments"]["Tournament"][-1]["TournamentEntry"]["@position"] = ["7"]


@pytest.mark.parametrize("break_it", [_break_statistic, _break_dataset_value, _break_event, _break_last_entry])
def test_a_failed_add_leaves_the_batch_as_it_was(metadata: tree.Node, summary_body: bytes, break_it) -> None:
    """good, bad, good: the batch equals the two good ones alone. The bad one shares the second
    good one's tournaments and breaks only in its last element, so a key it had already
    counted as seen would drop the second one's tournaments."""
    first = orjson.loads(summary_body)
    second = orjson.loads(summary_body)
    for t in _player(second)["RecentTournaments"]["Tournament"]:
        t["@id"] += "-2"  # new tournaments for the night
    bad = copy.deepcopy(second)
    break_it(_player(bad))

    batch = normalizer(metadata)
    batch.add(_node(first), network="PokerStars", player="first", fetched_at=FETCHED)
    with pytest.raises(tree.MalformedPayload):
        batch.add(_node(bad), network="PokerStars", player="second", fetched_at=FETCHED)
    batch.add(_node(second), network="PokerStars", player="second", fetched_at=FETCHED)
    alone = normalizer(metadata)
    alone.add(_node(first), network="PokerStars", player="first", fetched_at=FETCHED)
    alone.add(_node(second), network="PokerStars", player="second", fetched_at=FETCHED)

    got, expected = batch.flush(), alone.flush()
    for name, table in expected.items():
        assert got[name].equals(table), name
    assert got["player_snapshots"].column("player").to_pylist() == ["first", "second"]
    assert got["tournaments"].num_rows == 16 and got["tournament_entries"].num_rows == 16


def test_out_of_range_values_are_null_with_a_warning(
    rated_metadata: tree.Node, summary_body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """A value that parses but fits no column is NULL, with a logged warning: never a wrong
    value (an infinity, a wrapped integer, a rounded one), never a failed batch."""
    raw = orjson.loads(summary_body)
    player = _player(raw)
    player["@lastActivity"] = "-" + "9" * 20
    tournaments = player["RecentTournaments"]["Tournament"]
    tournaments[0]["@date"] = "1" * 20
    tournaments[1]["@stake"] = "1e400"
    tournaments[2]["@duration"] = "9007199254740993"  # beyond a double's integers: must stay exact
    tournaments[3]["@duration"] = "x"  # ... while a neighbour sends the column down the slow path
    tournaments[4]["@totalEntrants"] = "3000000000"  # beyond int32
    statistics = {s["@id"]: s for s in player["Statistics"]["Statistic"]}
    statistics["Profit"]["$"] = "1e400"
    statistics["FirstGameDate"]["$"] = "253402300800"  # one second after 9999-12-31
    player["Statistics"]["Timeline"]["Event"][0]["@date"] = "9" * 30
    with caplog.at_level(logging.WARNING, logger="tourneylake.tables.normalize"):
        tables = normalize_one(rated_metadata, _node(raw))

    (snapshot,) = tables["player_snapshots"].to_pylist()
    assert snapshot["last_activity_at"] is None
    rows = {r["tournament_id"]: r for r in tables["tournaments"].to_pylist()}
    t0, t1, t2, t3, t4 = (rows[t["@id"]] for t in tournaments[:5])
    assert t0["started_at"] is None and t1["started_at"] is not None
    assert t1["stake"] is None and t1["buy_in"] is None and t1["stake_usd"] is None and t1["rake"] is not None
    assert t2["duration_s"] == 9007199254740993 and t3["duration_s"] is None
    assert t4["total_entrants"] is None
    stats = {r["statistic"]: r for r in tables["player_statistics"].to_pylist()}
    assert (
        stats["Profit"]["value"] == "1e400" and stats["Profit"]["value_number"] is None and stats["Profit"]["value_usd"] is None
    )
    assert stats["FirstGameDate"]["value_time"] is None
    assert tables["player_timeline"].column("event_at")[0].as_py() is None
    for column in (
        "player_snapshots.last_activity_at",
        "tournaments.started_at",
        "tournaments.stake",
        "tournaments.total_entrants",
        "player_statistics.value_number",
        "player_statistics.value_time",
        "player_timeline.event_at",
    ):
        assert f"{column}: 1 value(s)" in caplog.text, column


def test_news_dates_out_of_range_are_null_with_a_warning() -> None:
    items = [
        {"@id": "1", "@date": "1" * 20},
        {"@id": "2", "@date": "1e400"},
        {"@id": "3", "@date": "-inf"},
        {"@id": "4", "@date": "1515000000"},
        {"@id": "5", "@date": "2018-01-03T17:20:00Z"},
    ]
    table, warnings = normalize_news(_response("WhatsNewResponse", {"NewsItem": items}), NIGHT)
    assert table.column("published_at").to_pylist() == [None, None, None, *[datetime.fromtimestamp(1515000000, UTC)] * 2]
    assert orjson.loads(table.column("raw_json")[0].as_py())["@date"] == "1" * 20
    assert warnings == ["news: 3 date(s) outside the years 1-9999; published_at left NULL (kept in raw_json)"]


def test_countries_nested_300_deep_are_refused() -> None:
    body = b'{"Response": {"@success": "true", "CountriesResponse": {"Country": [{"@code": "HU", "Sub": '
    body += b'{"A": ' * 300 + b'""' + b"}" * 300 + b"}]}}}"
    with pytest.raises(tree.TooDeeplyNested, match=r"^Response/CountriesResponse: containers nested more than 128 deep"):
        normalize_countries(tree.parse(body, "json"), NIGHT)


def test_reference_records_with_an_object_as_attribute_are_refused() -> None:
    node = _response("CountriesResponse", {"Country": [{"@code": "HU"}, {"@code": {"x": "BODY-TEXT"}}]})
    with pytest.raises(tree.ContainerWhereValueExpected, match=r"^Response/CountriesResponse/…/Country\[1\]/@code") as caught:
        normalize_countries(node, NIGHT)
    assert "BODY-TEXT" not in str(caught.value)


def test_metadata_with_an_object_as_attribute_is_refused(rated_metadata: tree.Node) -> None:
    raw = copy.deepcopy(rated_metadata.raw)
    raw["MetadataResponse"]["Currencies"]["Currency"][1]["@rate"] = {"x": "0.9"}
    node = tree.Node("Response", raw)
    for read in (lambda: normalize_metadata(node, NIGHT), lambda: Rates.from_response(node)):
        with pytest.raises(tree.ContainerWhereValueExpected, match=r"^Response/MetadataResponse/Currencies/Currency/@rate"):
            read()
