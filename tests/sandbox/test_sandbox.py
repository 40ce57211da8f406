"""The sandbox over real HTTP with plain httpx: resources, formats, auth, metering, truth."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import UTC, date, datetime

import httpx
import orjson
import pytest

from tourneylake.api import tree
from tourneylake.errors import TourneylakeError
from tourneylake.sandbox import DEMO, FREE, NotLoopback, SandboxServer, SandboxStartError, World, running_sandbox
from tourneylake.sandbox.app import DroppedConnection
from tourneylake.sandbox.filtering import FilterNotSupported, compile_filter
from tourneylake.sandbox.handanalysis import HandParseError, analyse
from tourneylake.sandbox.nlq import convert
from tourneylake.sandbox.truth import player_history, truth

TODAY = date(2026, 3, 1)
NOON = 12 * 3600


SANDBOX = dict(seed=7, today=TODAY, players=300, time_of_day=NOON)


def encoded(password: str, appkey: str = DEMO.appkey) -> str:
    inner = hashlib.md5(password.encode()).hexdigest().lower()
    return hashlib.md5((inner + appkey.lower()).encode()).hexdigest()


def headers(fmt: str = "json", user: str | None = DEMO.username, password: str | None = DEMO.password) -> dict[str, str]:
    h = {"Accept": f"application/{fmt}", "User-Agent": "tourneylake-tests/1"}
    if user is not None:
        h["Username"] = user
    if password is not None:
        h["Password"] = encoded(password)
    return h


def get(server: SandboxServer, path: str, fmt: str = "json", params: dict | None = None, **kw) -> tree.Node:
    r = httpx.get(f"{server.api_url}/{path}", headers=kw.pop("hdrs", None) or headers(fmt, **kw), params=params, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(f"application/{fmt}")
    return tree.parse(r.content, fmt)


def error_id(node: tree.Node) -> str | None:
    return None if node.attr("success") == "true" else node.find("ErrorResponse/Error").attr("id")


def remaining(node: tree.Node) -> int:
    return int(node.find("UserInfo/RemainingSearches").text)


def summary_path(network: str, player: str) -> str:
    return f"networks/{network}/players/{player}/summary"


def statistics(node: tree.Node) -> dict[str, str | None]:
    stats = node.find("PlayerResponse/PlayerView/Player/Statistics")
    return {s.attr("id"): (None if s.attr("authorized") == "false" else s.text) for s in stats.all("Statistic")}


# ----------------------------------------------------------------------------------- metadata


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_metadata_has_rates_and_no_userinfo(sandbox: SandboxServer, fmt: str) -> None:
    node = get(sandbox, "metadata", fmt, user=None, password=None)
    assert node.attr("success") == "true" and node.attr("appVersion") == "1.0"
    assert node.one("UserInfo") is None
    currencies = {c.attr("iso"): c.attr("rate") for c in node.find("MetadataResponse/Currencies").all("Currency")}
    assert currencies["USD"] == "1"
    assert currencies["CNY"] is None  # unknown today
    assert float(currencies["EUR"]) == sandbox.world.rates()["EUR"]
    names = {n.attr("name") for n in node.find("MetadataResponse/Networks").all("Network")}
    assert {"PokerStars", "888Poker(ES-PT)", "Gioco Online Italia"} <= names


def test_metadata_same_tree_in_both_formats(sandbox: SandboxServer) -> None:
    as_json = get(sandbox, "metadata", "json", user=None, password=None)
    as_xml = get(sandbox, "metadata", "xml", user=None, password=None)
    assert as_json.to_element().canonical() == as_xml.to_element().canonical()


def test_metadata_hash_cache_marker_and_daily_change() -> None:
    with running_sandbox(seed=3, today=TODAY) as server:
        first = get(server, "metadata", user=None, password=None)
        digest = first.attr("metadataHash")
        cached = get(server, "metadata", params={"hash": digest}, user=None, password=None)
        assert cached.attr("metadataHash") == digest and cached.attr("appVersion") is None
        marker = cached.one("MetadataResponse")
        assert marker.attr("cached") == "true" and list(marker.children()) == []
        stale = get(server, "metadata", params={"hash": "0" * 32}, user=None, password=None)
        assert stale.attr("appVersion") == "1.0" and stale.find("MetadataResponse/Currencies") is not None
        # every response carries the hash; it changes when the day (and so the rates) changes
        assert get(server, "metadata/countries").attr("metadataHash") == digest
        server.world.set_today(date(2026, 3, 2))
        second = get(server, "metadata", params={"hash": digest}, user=None, password=None)
        assert second.attr("metadataHash") != digest
        assert second.find("MetadataResponse/Currencies") is not None


# ----------------------------------------------------------------------------------- free resources


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_countries_and_news(sandbox: SandboxServer, fmt: str) -> None:
    countries = get(sandbox, "metadata/countries", fmt).find("CountriesResponse").all("Country")
    assert {"code": "HU", "name": "Hungary"} in [c.attrs for c in countries]
    news = get(sandbox, "news/whatsnew", fmt).find("WhatsNewResponse").all("NewsItem")
    limited = get(sandbox, "news/whatsnew", fmt, params={"limit": 3}).find("WhatsNewResponse").all("NewsItem")
    assert len(news) > 3 and [n.attrs for n in limited] == [n.attrs for n in news[:3]]
    dates = [int(n.attr("date")) for n in news]
    assert dates == sorted(dates, reverse=True) and all(n.text for n in limited)


def test_free_resources_cost_nothing_and_tolerate_bad_credentials(sandbox: SandboxServer) -> None:
    sandbox.accounts.add_user("free-res@example.com", "pw", "subscriber", 50)
    for path in ("metadata/countries", "news/whatsnew", "metadata"):
        get(sandbox, path, user="free-res@example.com", password="pw")
    assert sandbox.accounts.remaining("free-res@example.com") == 50
    wrong = get(sandbox, "metadata/countries", user="free-res@example.com", password="nope")
    assert wrong.attr("success") == "true" and wrong.find("UserInfo").attr("loggedIn") == "false"


# ----------------------------------------------------------------------------------- auth


def test_password_encoding_headers_and_query(sandbox: SandboxServer) -> None:
    expected = hashlib.md5((hashlib.md5(b"correct-horse-battery").hexdigest() + "sandboxkey2026").encode()).hexdigest()
    assert DEMO.encoded_password == expected
    by_header = get(sandbox, summary_path("PokerStars", "Borbas.Geri"))
    assert by_header.find("UserInfo").attr("loggedIn") == "true"
    assert by_header.find("UserInfo/Username").text == DEMO.username
    r = httpx.get(
        f"{sandbox.api_url}/{summary_path('PokerStars', 'Borbas.Geri')}",
        params={"Username": DEMO.username, "Password": expected},
        headers={"Accept": "application/json", "User-Agent": "t"},
    )
    assert tree.parse_json(r.content).attr("success") == "true"


@pytest.mark.parametrize(
    ("user", "password", "code"),
    [
        (DEMO.username, "wrong-password", "101002"),
        ("nobody@example.com", "x", "101001"),
        (None, None, "101003"),
        (DEMO.username, None, "101003"),
    ],
)
def test_credential_errors(sandbox: SandboxServer, user: str | None, password: str | None, code: str) -> None:
    node = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), user=user, password=password)
    assert node.attr("success") == "false" and error_id(node) == code
    assert node.find("UserInfo").attr("loggedIn") == "false"
    assert node.find("ErrorResponse/Error").text


def test_unknown_application_is_invalid_request(sandbox: SandboxServer) -> None:
    r = httpx.get(f"{sandbox.base_url}/api/other/metadata", headers=headers())
    assert error_id(tree.parse_json(r.content)) == "101012"


def test_http_level_errors(sandbox: SandboxServer) -> None:
    base = sandbox.api_url
    assert httpx.get(f"{base}/no/such/resource", headers=headers()).status_code == 404
    assert httpx.get(f"{sandbox.base_url}/elsewhere", headers=headers()).status_code == 404
    assert httpx.post(f"{base}/metadata", headers=headers()).status_code == 405
    assert httpx.get(f"{base}/handanalysis", headers=headers()).status_code == 405
    assert httpx.get(f"{base}/metadata", headers={**headers(), "Accept": "text/html"}).status_code == 404
    assert httpx.get(f"{base}/metadata", headers={"User-Agent": "t"}).status_code == 404
    r = httpx.get(f"{base}/metadata/countries", headers={**headers(), "User-Agent": ""})
    assert r.status_code == 200 and error_id(tree.parse_json(r.content)) == "101011"
    h = headers()
    del h["User-Agent"]
    # httpx adds its own User-Agent unless told otherwise; send the request without one
    with httpx.Client() as client:
        request = client.build_request("GET", f"{base}/metadata", headers=h)
        del request.headers["User-Agent"]
        r = client.send(request)
    assert error_id(tree.parse_json(r.content)) == "101011"


# ----------------------------------------------------------------------------------- metering


def test_metering_costs(sandbox: SandboxServer) -> None:
    user = "meter@example.com"
    sandbox.accounts.add_user(user, "pw", "subscriber", 100)
    kw = {"user": user, "password": "pw"}
    node = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), **kw)
    assert remaining(node) == 99
    node = get(sandbox, "filters/nlq", params={"question": "sit and go turbo over $5"}, **kw)
    assert node.find("FilterResponse/Filter").text == "Class:SNG;Type:T;Stake:USD5~*" and remaining(node) == 98
    hand = "PokerStars Hand #1: Hold'em\nSeat 1: hero (1500)\nSeat 2: villain (1500)\nDealt to hero [Ah Ad]\nhero: folds\n"
    r = httpx.post(
        f"{sandbox.api_url}/handanalysis",
        params={"langCode": "en"},
        content=hand.encode(),
        headers=headers(user=user, password="pw"),
    )
    node = tree.parse_json(r.content)
    assert "premium" in node.find("HandAnalysisResponse/Analysis").text and remaining(node) == 93
    r = httpx.post(f"{sandbox.api_url}/handanalysis", content=b"", headers=headers(user=user, password="pw"))
    node = tree.parse_json(r.content)
    assert error_id(node) == "101012" and remaining(node) == 93
    node = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), params={"filter": "Bogus:1"}, **kw)
    assert error_id(node) == "101012" and remaining(node) == 93
    node = get(sandbox, summary_path("NoSuchNetwork", "Borbas.Geri"), **kw)
    assert error_id(node) == "101012" and remaining(node) == 93
    node = get(sandbox, summary_path("PokerStars", "Not A Player"), **kw)
    assert error_id(node) == "200039" and remaining(node) == 92  # the service's code; a lookup costs a search
    sandbox.app.not_found_code = 103001  # the sandbox's earlier choice, still to be read alike
    try:
        node = get(sandbox, summary_path("PokerStars", "Nor This One"), **kw)
    finally:
        sandbox.app.not_found_code = 200039
    assert error_id(node) == "103001" and remaining(node) == 91
    node = get(sandbox, "filters/nlq", params={"question": "what is the meaning of life"}, **kw)
    assert error_id(node) == "101012" and remaining(node) == 91
    assert sandbox.accounts.remaining(user) == 91


def test_quota_exhaustion_and_subscription(sandbox: SandboxServer) -> None:
    sandbox.accounts.add_user("empty@example.com", "pw", "subscriber", 5)
    sandbox.accounts.set_remaining("empty@example.com", 0)
    node = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), user="empty@example.com", password="pw")
    assert error_id(node) == "102002" and remaining(node) == 0
    sandbox.accounts.set_remaining("empty@example.com", 3)
    r = httpx.post(
        f"{sandbox.api_url}/handanalysis",
        content=b"Dealt to me [Ah Kd]\n",
        headers=headers(user="empty@example.com", password="pw"),
    )
    node = tree.parse_json(r.content)
    assert error_id(node) == "102006" and remaining(node) == 3
    # a non-subscriber: subscriber-only resources refuse, summaries use the free quota
    node = get(sandbox, "filters/nlq", params={"question": "turbo"}, user=FREE.username, password=FREE.password)
    assert error_id(node) == "102004"
    sandbox.accounts.set_remaining(FREE.username, 1)
    ok = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), user=FREE.username, password=FREE.password)
    assert ok.attr("success") == "true" and remaining(ok) == 0
    assert ok.find("UserInfo/Subscriptions").attr("freeSearchesRemaining") == "0"
    node = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), user=FREE.username, password=FREE.password)
    assert error_id(node) == "102001"


def test_quota_resets_on_a_new_day() -> None:
    with running_sandbox(seed=1, today=TODAY, demo_quota=7) as server:
        server.accounts.set_remaining(DEMO.username, 0)
        assert error_id(get(server, summary_path("PokerStars", "Borbas.Geri"))) == "102002"
        server.world.advance(1)
        assert remaining(get(server, summary_path("PokerStars", "Borbas.Geri"))) == 6


@pytest.mark.parametrize("real_hour", [0, 7, 8, 12, 23])
def test_a_pinned_date_answers_on_its_own_quota_day_at_any_real_hour(monkeypatch, real_hour: int) -> None:
    """Only the date pinned: the answers' timestamp (the client's reading of the service's clock)
    falls in the quota day that began at that date's reset, as the service's own quota clock does,
    before the real reset hour too."""
    from tourneylake.night.quota_day import quota_day_of
    from tourneylake.sandbox import accounts

    real_now = datetime.now(UTC).replace(hour=real_hour, minute=30, second=0, microsecond=0).timestamp()
    monkeypatch.setattr(accounts, "real_time", lambda: real_now)
    with running_sandbox(seed=1, today=TODAY) as server:
        stamp = int(get(server, summary_path("PokerStars", "Borbas.Geri")).attr("timestamp"))
        reset_s = server.accounts.quota_reset_s
        assert server.accounts.quota_day() == TODAY
        assert quota_day_of(datetime.fromtimestamp(stamp, UTC), reset_s) == TODAY
        assert stamp % 86400 == max(reset_s, real_hour * 3600 + 1800)  # the real hour once past the reset


# ----------------------------------------------------------------------------------- summaries


def test_summary_same_tree_from_json_and_xml(sandbox: SandboxServer) -> None:
    sandbox.accounts.add_user("twins@example.com", "pw", "subscriber", 10)
    kw = {"user": "twins@example.com", "password": "pw"}
    sandbox.accounts.set_remaining("twins@example.com", 10)
    as_json = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), "json", **kw)
    sandbox.accounts.set_remaining("twins@example.com", 10)
    as_xml = get(sandbox, summary_path("PokerStars", "Borbas.Geri"), "xml", **kw)
    assert as_json.to_element().canonical() == as_xml.to_element().canonical()


def test_summary_shape_and_json_quirks(sandbox: SandboxServer) -> None:
    r = httpx.get(f"{sandbox.api_url}/{summary_path('PokerStars', 'Borbas.Geri')}", headers=headers())
    raw = orjson.loads(r.content)["Response"]
    assert isinstance(raw["UserInfo"]["RemainingSearches"], int)
    assert isinstance(raw["UserInfo"]["ExpirationDate"], int)
    assert raw["PlayerResponse"]["PlayerView"]["Filter"] == ""
    player = raw["PlayerResponse"]["PlayerView"]["Player"]
    assert player["@name"] == "Borbas.Geri" and player["@network"] == "PokerStars"
    stats = player["Statistics"]
    ids = [s["@id"] for s in stats["Statistic"]]
    assert ids[:3] == ["Count", "AvProfit", "AvStake"] and ids[-1] == "Entries" and len(ids) == 38
    sets = {d["@id"]: d for d in stats["StatisticalDataSet"]}
    assert {"ByStake", "ByMonth", "ByGameType"} <= set(sets)
    for data in sets["ByGameType"]["Data"]:  # Data and Y stay lists even when alone
        assert isinstance(data["Y"], list)
    assert isinstance(sets["ByGameType"]["Data"], list)
    recent = player["RecentTournaments"]["Tournament"]
    assert len(recent) == 30
    dates = [int(t["@date"]) for t in recent]
    assert dates == sorted(dates, reverse=True)
    played = {str(r.tournament.id): r for r in truth(sandbox.world, "PokerStars", "Borbas.Geri").results}
    for t in recent:
        entry = t["TournamentEntry"]
        assert isinstance(entry, dict) and entry["@playerName"] == "Borbas.Geri"  # a lone child is bare
        assert t["@currency"] in {"USD", "EUR", "GBP", "CAD", "CNY"}
        result = played[t["@id"]]
        assert int(entry["@position"]) == result.position
        # @prize only when the player cashed: a paid place of a tournament with a prize pool
        assert ("@prize" in entry) == (result.position <= result.tournament.paid and result.tournament.prize_pool > 0)


@pytest.mark.parametrize(
    ("network", "name"),
    [
        ("GGNetwork", "José María"),
        ("888Poker(ES-PT)", "Ana Łukasz"),
        ("Gioco Online Italia", "Luca Bianchi"),
        ("888Poker", "big.fish (2)"),
        ("GGNetwork", "王小明"),
        ("iPoker", "Zoë O'Brien"),
    ],
)
def test_url_encoded_names(sandbox: SandboxServer, network: str, name: str) -> None:
    node = get(sandbox, summary_path(network, name))
    player = node.find("PlayerResponse/PlayerView/Player")
    assert (player.attr("network"), player.attr("name")) == (network, name)
    assert statistics(node) == dict(truth(sandbox.world, network, name))


FILTERS = [
    "",
    "Class:SNG",
    "Class:SCHEDULED",
    "Type:T",
    "Type!:T",
    "Type:H,NL",
    "Type:O,OHL",
    "Type!:SAT;Type:H",
    "Date:1Y",
    "Date:30D",
    "Date:6M",
    "Date:2W",
    "Date:48H",
    "Date:86400S",
    "Date:-3D",
    "Date:2025",
    "Date:1735689600~1751327999",
    "Stake:USD2~*",
    "Stake:*~EUR10",
    "StakePlusRake:USD1.50",
    "StakePlusRake:USD1~USD20",
    "Entrants:10~*",
    "Entrants:*~9",
    "Entrants!:9",
    "Class:SNG;Type:H,NL,T;StakePlusRake:USD1~*;Date:2Y",
    "DayOfWeek:Sa,Su",
    "Limit:Last,1~10",
]


@pytest.mark.parametrize("filter_text", FILTERS)
def test_filtered_statistics_equal_truth(sandbox: SandboxServer, filter_text: str) -> None:
    for network, name in (("PokerStars", "Borbas.Geri"), ("PokerStars", "Dmitrij Šimek"), ("iPoker", "Zoë O'Brien")):
        node = get(sandbox, summary_path(network, name), params={"filter": filter_text} if filter_text else None)
        assert node.attr("success") == "true", filter_text
        assert node.find("PlayerResponse/PlayerView/Filter").text == (filter_text or None)
        expected = truth(sandbox.world, network, name, filter_text)
        assert statistics(node) == dict(expected), filter_text
        recent = node.find("PlayerResponse/PlayerView/Player/RecentTournaments")
        served_ids = [t.attr("id") for t in recent.all("Tournament")] if recent else []
        assert served_ids == [str(r.tournament.id) for r in reversed(expected.results[-30:])]
        if expected["Count"] != "0":
            assert f"{expected.profit_usd:.2f}".replace("-0.00", "0.00") == expected["Profit"]


def test_filters_really_restrict(sandbox: SandboxServer) -> None:
    world = sandbox.world
    net, name = "PokerStars", "Borbas.Geri"
    count = lambda f: int(truth(world, net, name, f)["Count"])  # noqa: E731
    total = count("")
    assert total > 50
    for positive, negative in (("Type:T", "Type!:T"), ("Class:SNG", "Class!:SNG"), ("Entrants:*~9", "Entrants!:*~9")):
        assert count(positive) + count(negative) == total
        assert 0 < count(positive) < total or positive == "Class:SNG"
    assert count("Date:1Y") < total and count("Date:-3D") == 0
    low, high = count("StakePlusRake:*~USD3"), count("StakePlusRake:USD3~*")
    assert low + high >= total and low < total and high < total
    assert count("Limit:Last,1~10") == 10
    # A cash range compares the stake converted at the rates of the tournament's own start day
    # (Zoë's EUR 1.36 stakes are worth USD 1.43 to 1.52 depending on the day: the bound splits them).
    for net, name, low in (("PokerStars", "Borbas.Geri", 200), ("iPoker", "Zoë O'Brien", 148)):
        selected = {r.tournament.id for r in player_history(world, net, name, f"Stake:USD{low / 100:.2f}~*")}
        results = player_history(world, net, name)
        assert 0 < len(selected) < len(results)
        for r in results:
            t = r.tournament
            day = datetime.fromtimestamp(t.date, UTC).date()
            usd_cents = round(t.stake / world.rates(day)[t.currency])  # cents of USD
            assert (usd_cents >= low) == (t.id in selected), (name, t.currency, t.stake, day)


def test_invalid_filters_are_refused_free(sandbox: SandboxServer) -> None:
    sandbox.accounts.add_user("filters@example.com", "pw", "subscriber", 20)
    for bad in ("Bogus:1", "Type:", "Type:XYZ", "Stake:USD5~USD1", "Date:yesterday", "Stake:ABC5", "Stat:AvROI,1~*"):
        node = get(
            sandbox, summary_path("PokerStars", "Borbas.Geri"), params={"filter": bad}, user="filters@example.com", password="pw"
        )
        assert error_id(node) == "101012", bad
    assert sandbox.accounts.remaining("filters@example.com") == 20


def test_history_grows_with_the_day() -> None:
    with running_sandbox(seed=11, today=date(2026, 1, 10)) as server:
        night1 = statistics(get(server, summary_path("PokerStars", "Borbas.Geri")))
        server.world.set_today(date(2026, 2, 20))
        night2 = statistics(get(server, summary_path("PokerStars", "Borbas.Geri")))
        assert int(night2["Count"]) > int(night1["Count"])
        assert int(night2["LastGameDate"]) > int(night1["LastGameDate"])
        assert night2["FirstGameDate"] == night1["FirstGameDate"]


def test_determinism_same_seed_same_bytes() -> None:
    bodies = []
    for _ in range(2):
        with running_sandbox(seed=5, today=TODAY, time_of_day=NOON) as server:
            got = []
            for path, params in (
                (summary_path("PokerStars", "Borbas.Geri"), {"filter": "Class:SNG"}),
                ("metadata", None),
                ("news/whatsnew", {"limit": 5}),
            ):
                for fmt in ("json", "xml"):
                    got.append(httpx.get(f"{server.api_url}/{path}", params=params, headers=headers(fmt)).content)
            bodies.append(got)
    assert bodies[0] == bodies[1]
    with running_sandbox(seed=6, today=TODAY, time_of_day=NOON) as other:
        different = httpx.get(
            f"{other.api_url}/{summary_path('PokerStars', 'Borbas.Geri')}", params={"filter": "Class:SNG"}, headers=headers()
        ).content
    assert different != bodies[0][0]


# ----------------------------------------------------------------------------------- the world


def test_world_is_lazy_deterministic_and_shares_tournaments() -> None:
    big = World(seed=2, players=100_000, today=TODAY)
    assert big._player_cache == {} and big._index is None  # nothing generated up front: lazy
    assert big.roster(3) == World(seed=2, players=100_000).roster(3)
    world = World(seed=2, players=400, today=TODAY)
    roster = world.roster()
    assert len(set(roster)) == len(roster) == 400
    assert any(" " in n for _, n in roster) and any("." in n for _, n in roster)
    assert any(not n.isascii() for _, n in roster)
    seen: Counter[tuple[str, int]] = Counter()
    players_of: dict[tuple[str, int], set[str]] = {}
    for network, name in roster:
        for r in player_history(world, network, name):
            key = (network, r.tournament.id)
            seen[key] += 1
            players_of.setdefault(key, set()).add(name)
    shared = [k for k, v in players_of.items() if len(v) > 1]
    assert len(shared) > 20
    # the same tournament is identical for every player who played it
    net, tid = shared[0]
    views = {
        (r.tournament.date, r.tournament.template.name, r.tournament.entrants)
        for name in players_of[(net, tid)]
        for r in player_history(world, net, name)
        if r.tournament.id == tid
    }
    assert len(views) == 1
    currencies = {r.tournament.currency for n, m in roster for r in player_history(world, n, m)}
    assert {"USD", "EUR", "GBP", "CAD", "CNY"} <= currencies


def test_nlq_rules() -> None:
    assert convert("sit and go turbo over $50 last year") == "Class:SNG;Type:T;Stake:USD50~*;Date:1Y"
    assert convert("scheduled hold'em no limit, no satellites, last 30 days") == "Class:SCHEDULED;Type:H,NL;Type!:SAT;Date:30D"
    assert (
        convert("MTTs under €10 with more than 100 players in 2019") == "Class:SCHEDULED;Stake:*~EUR10;Entrants:100~*;Date:2019"
    )
    assert convert("hyper turbos between $5 and $20") == "Type:ST;Stake:USD5~USD20"
    assert convert("über 5,50 €", locale="de-DE") is None  # German words are not understood: no filter
    assert convert("sit and gos over €5,50", locale="de-DE") == "Class:SNG;Stake:EUR5.50~*"  # a decimal comma
    assert convert("sit and gos over €5,50", locale="en-US") == "Class:SNG;Stake:EUR550~*"  # a thousands comma
    assert convert("what is the meaning of life") is None


def test_errors_raised_on_purpose_share_the_root() -> None:
    world = World(seed=1, players=10, today=TODAY)
    with pytest.raises(FilterNotSupported) as bad_filter:
        compile_filter("Bogus:1", world, world.day_end())
    with pytest.raises(HandParseError) as bad_hand:
        analyse("not a hand")
    with pytest.raises(NotLoopback) as bad_host:
        SandboxServer(host="0.0.0.0")
    for caught in (bad_filter, bad_hand, bad_host):
        assert isinstance(caught.value, TourneylakeError) and isinstance(caught.value, ValueError)
    assert issubclass(SandboxStartError, TourneylakeError) and issubclass(SandboxStartError, RuntimeError)
    assert not issubclass(DroppedConnection, TourneylakeError)  # a control-flow device, not an error
