"""The client against the sandbox over real HTTP: every resource in both formats, credentials,
quota, and every fault kind the sandbox can inject."""

from __future__ import annotations

import asyncio
from datetime import date

import pytest

from tests.helpers import DEMO_ACCOUNT
from tourneylake.api import (
    AsyncClient,
    Attempt,
    Client,
    CredentialsError,
    QuotaError,
    SubscriptionError,
    TransportError,
)
from tourneylake.api.answers import metadata_is_cached
from tourneylake.config import Settings
from tourneylake.sandbox import Faults, SandboxServer, running_sandbox

TODAY = date(2026, 11, 20)
HAND = """PokerStars Hand #1: Hold'em No Limit ($0.05/$0.10 USD)
Seat 1: hero (10 in chips)
Seat 2: villain (10 in chips)
*** HOLE CARDS ***
Dealt to hero [Ah Kh]
hero: raises 0.20 to 0.30
villain: calls 0.20
*** FLOP *** [2c 7d 9s]
hero: bets 0.40
villain: folds
hero collected 0.60 from pot
"""


def settings(server: SandboxServer, **kw: object) -> Settings:
    base: dict[str, object] = dict(
        base_url=server.base_url, **DEMO_ACCOUNT, retry_initial_wait_s=0.01, retry_max_wait_s=0.05, max_attempts=6, timeout_s=5.0
    )
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


SANDBOX = dict(seed=3, today=TODAY, time_of_day=12 * 3600)


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_every_resource(sandbox: SandboxServer, fmt: str) -> None:
    with Client(settings(sandbox, format=fmt)) as client:
        metadata = client.metadata()
        assert metadata.payload.find("Currencies") is not None and metadata.envelope.user_info is None
        current = client.metadata(hash=metadata.envelope.metadata_hash)
        assert metadata_is_cached(current.root) and current.envelope.metadata_hash == metadata.envelope.metadata_hash
        assert current.envelope.app_version is None

        countries = client.countries()
        assert len(countries.payload.all("Country")) > 10 and countries.remaining_searches is not None

        news = client.whats_new(limit=3)
        assert len(news.payload.all("NewsItem")) == 3

        before = client.remaining_searches
        nlq = client.natural_language_filter("sit and go tournaments in the last 30 days", timezone="UTC")
        assert "Class:SNG" in (nlq.payload.child_text("Filter") or "")
        assert nlq.remaining_searches == before - 1

        analysis = client.hand_analysis(HAND, lang_code="en")
        assert "AK" in (analysis.payload.child_text("Analysis") or "")
        assert analysis.remaining_searches == before - 1 - 5

        network, player = sandbox.world.roster(3)[2]
        summary = client.player_summary(network, player, filter="Class:SNG")
        view = summary.payload.one("PlayerView")
        assert view.child_text("Filter") == "Class:SNG"
        assert view.one("Player").attr("name") == player
        assert summary.remaining_searches == before - 7


def test_one_summary_reads_the_same_from_xml_and_json(sandbox: SandboxServer) -> None:
    network, player = sandbox.world.roster(2)[1]
    trees = []
    for fmt in ("json", "xml"):
        with Client(settings(sandbox, format=fmt)) as client:
            response = client.player_summary(network, player, filter="Type!:SAT")
        element = response.root.to_element()
        # UserInfo's counters differ: the second call is one search later.
        element.children = [c for c in element.children if c.name != "UserInfo"]
        trees.append(element.canonical())
    assert trees[0] == trees[1]


def test_wrong_password_is_one_request_and_no_search(sandbox: SandboxServer) -> None:
    attempts: list[Attempt] = []
    before = sandbox.accounts.remaining("analyst@example.com")
    with Client(settings(sandbox, password="wrong"), on_attempt=attempts.append) as client:
        with pytest.raises(CredentialsError) as info:
            client.player_summary("PokerStars", "Borbas.Geri")
    assert info.value.code == 101002 and len(attempts) == 1
    assert sandbox.accounts.remaining("analyst@example.com") == before


def test_unknown_user(sandbox: SandboxServer) -> None:
    with Client(settings(sandbox, username="nobody@example.com")) as client, pytest.raises(CredentialsError) as info:
        client.natural_language_filter("sng")
    assert info.value.code == 101001


def test_quota_exhaustion_and_subscription(sandbox: SandboxServer) -> None:
    with Client(settings(sandbox, username="free@example.com", password="free-password")) as client:
        with pytest.raises(SubscriptionError) as info:
            client.hand_analysis(HAND)
        assert info.value.code == 102004
        sandbox.accounts.set_remaining("free@example.com", 2)
        network, player = sandbox.world.roster(1)[0]
        client.player_summary(network, player)
        assert client.player_summary(network, player).remaining_searches == 0
        with pytest.raises(QuotaError) as info:
            client.player_summary(network, player)
        assert info.value.code in (102001, 102002) and info.value.remaining_searches == 0


def _outcomes(attempts: list[Attempt]) -> set[str]:
    return {a.outcome if a.error_code is None else f"{a.outcome}:{a.error_code}" for a in attempts}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("5xx=0.5", "transport_error"),
        ("drop=0.5", "transport_error"),
        ("truncate=0.5", "malformed_response"),
        ("internal=0.5", "service_error:0"),
    ],
)
def test_faults_are_retried_until_the_data_arrives(spec: str, expected: str) -> None:
    attempts: list[Attempt] = []
    bodies: list[bytes] = []
    with running_sandbox(seed=5, today=TODAY, faults=Faults.parse(spec)) as server:
        roster = server.world.roster(8)
        with Client(settings(server), on_attempt=attempts.append, on_body=lambda b: bodies.append(b.body)) as client:
            for network, player in roster:
                response = client.player_summary(network, player)
                assert response.payload.find("PlayerView/Player").attr("name") == player
    assert expected in _outcomes(attempts), _outcomes(attempts)
    assert sum(a.outcome == "ok" for a in attempts) == len(roster)
    if expected == "malformed_response":
        assert len(bodies) > len(roster)  # the cut bodies reached the hook too, before parsing


def test_slow_bodies_time_out_and_are_bounded() -> None:
    attempts: list[Attempt] = []
    with running_sandbox(seed=5, today=TODAY, faults=Faults.parse("slow=1.0,slow_s=2")) as server:
        with Client(settings(server, timeout_s=0.3, max_attempts=2), on_attempt=attempts.append) as client:
            with pytest.raises(TransportError, match="timed out"):
                client.countries()
    assert [a.outcome for a in attempts] == ["transport_error", "transport_error"]


def test_parallel_sessions_beyond_the_limit_are_backed_off() -> None:
    attempts: list[Attempt] = []

    async def harvest(server: SandboxServer) -> list[str | None]:
        async with AsyncClient(settings(server, concurrency=6, max_attempts=10), on_attempt=attempts.append) as client:
            responses = await asyncio.gather(*(client.player_summary(n, p) for n, p in server.world.roster(18)))
        return [r.payload.find("PlayerView/Player").attr("name") for r in responses]

    with running_sandbox(seed=5, today=TODAY, latency_ms=30, faults=Faults.parse("parallel=2")) as server:
        names = asyncio.run(harvest(server))
        assert names == [p for _, p in server.world.roster(18)]
    assert "service_error:101024" in _outcomes(attempts)
