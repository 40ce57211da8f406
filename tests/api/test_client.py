"""The client over real HTTP on loopback: headers, auth, errors by code, retries, hooks."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from tests.helpers import DATA
from tests.scripted_server import Reply, ScriptedServer
from tourneylake.api import (
    USER_AGENT,
    AsyncClient,
    Attempt,
    Client,
    CredentialsError,
    InternalServiceError,
    MalformedCallError,
    MalformedResponse,
    QuotaError,
    SubscriptionError,
    TransportError,
    UnknownServiceError,
    UnusableResponse,
    encode_password,
)
from tourneylake.api.answers import metadata_is_cached
from tourneylake.api.client import AdaptiveLimit, _described, retry_after_seconds
from tourneylake.api.tree import Element, to_json, to_xml
from tourneylake.config import Settings

PASSWORD = "s3cret-Pass"
APPKEY = "abc123key"


# The same bodies as above, each completed into an accepted summary where it was one: what the
# envelope-only read must judge exactly as the full read does.
ENVELOPE_ONLY_CASES = [
    (b'{"Response": {"@success": "true", "UserInfo": {"Username": "an', MalformedResponse, 3),
    ('{"Response": {"@success": "true", "x": "é'.encode()[:-1], MalformedResponse, 3),
    (b'{"Response": {"@success": "true"}} trailing', UnusableResponse, 1),
    (b"\xff\xfe not text at all", UnusableResponse, 1),
    (b'{"Response": {"@success": "true", "x": "\xff"}}', UnusableResponse, 1),  # invalid UTF-8 in the payload
    (b'{"Response": {"@success": "true"}, "Other": {}}', UnusableResponse, 1),  # two roots
    (b'{"Nope": {"@success": "true"}}', UnusableResponse, 1),
]


@pytest.mark.parametrize(("body", "error", "tries"), ENVELOPE_ONLY_CASES)
def test_a_summary_read_for_its_envelope_alone_judges_a_bad_body_as_the_full_read_does(
    body: bytes, error: type, tries: int
) -> None:
    async def fetch(base_url: str, tree: bool) -> None:
        async with AsyncClient(settings(max_attempts=3), base_url=base_url) as client:
            await client.player_summary("PokerStars", "p", tree=tree)

    for tree in (True, False):
        with ScriptedServer(default=Reply(body=body)) as server, pytest.raises(error):
            asyncio.run(fetch(server.base_url, tree))
        assert len(server.received) == tries, tree


def test_a_summary_read_for_its_envelope_alone_has_the_full_reads_envelope_and_its_tree_on_demand() -> None:
    from tourneylake.api.answers import read_accepted_envelope, read_answer

    recorded = (DATA / "recorded" / "player-summary.json").read_bytes()
    refused = (DATA / "recorded" / "error.json").read_bytes()
    for body in (recorded, summary_body(), summary_body(remaining=0)):
        assert read_accepted_envelope(body) == read_answer(body, "json")[1]
    assert read_answer(refused, "json")[1].success is False and read_accepted_envelope(refused) is None

    async def fetch(base_url: str) -> tuple:
        async with AsyncClient(settings(), base_url=base_url) as client:
            full = await client.player_summary("PokerStars", "p")
            alone = await client.player_summary("PokerStars", "p", tree=False)
        return full, alone

    with ScriptedServer(default=Reply(body=recorded)) as server:
        full, alone = asyncio.run(fetch(server.base_url))
    assert full.tree is not None and alone.tree is None
    assert alone.envelope == full.envelope and alone.remaining_searches == full.remaining_searches
    assert alone.payload is not None and alone.payload.raw == full.payload.raw  # parsed when asked for


def settings(**kw: object) -> Settings:
    base = dict(
        appname="myapp",
        appkey=APPKEY,
        username="coach@example.com",
        password=PASSWORD,
        retry_initial_wait_s=0.01,
        retry_max_wait_s=0.05,
        max_attempts=4,
        timeout_s=5.0,
    )
    base.update(kw)
    return Settings(**base)  # type: ignore[arg-type]


def envelope(
    success: bool = True, remaining: int = 42, payload: Element | None = None, error: tuple[int, str] | None = None
) -> Element:
    root = Element("Response", {"success": "true" if success else "false", "timestamp": "1700000000", "metadataHash": "abc"})
    if payload is not None:
        root.children.append(payload)
    if error is not None:
        err = root.add("ErrorResponse")
        err.add("Error", {"id": str(error[0])}, error[1])
    info = root.add("UserInfo", {"loggedIn": "true" if success else "false"})
    info.add("Username", text="coach@example.com")
    info.add("RemainingSearches", text=str(remaining))
    return root


def summary_body(remaining: int = 41, fmt: str = "json") -> bytes:
    payload = Element("PlayerResponse")
    view = payload.add("PlayerView")
    view.add("Filter")
    view.add("Player", {"name": "José María", "network": "888Poker(ES-PT)"})
    tree = envelope(remaining=remaining, payload=payload)
    return to_json(tree) if fmt == "json" else to_xml(tree)


def error_body(code: int, text: str) -> bytes:
    return to_json(envelope(success=False, remaining=0, error=(code, text)))


def test_password_encoding_matches_the_reference() -> None:
    inner = hashlib.md5(PASSWORD.encode()).hexdigest().lower()
    expected = hashlib.md5((inner + APPKEY).encode()).hexdigest()
    assert encode_password(PASSWORD, APPKEY) == expected
    assert encode_password(PASSWORD, APPKEY.upper()) == expected  # the key is used lowercase


def test_headers_auth_and_path_encoding() -> None:
    with ScriptedServer().play(Reply(body=summary_body())) as server, Client(settings(), base_url=server.base_url) as client:
        response = client.player_summary("888Poker(ES-PT)", "José María", filter="Class:SNG;Date:30D")
    (request,) = server.received
    assert request.path == "/api/myapp/networks/888Poker%28ES-PT%29/players/Jos%C3%A9%20Mar%C3%ADa/summary"
    assert request.query == {"filter": ["Class:SNG;Date:30D"]}
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"] == USER_AGENT and USER_AGENT.startswith("tourneylake/")
    assert request.headers["Username"] == "coach@example.com"
    assert request.headers["Password"] == encode_password(PASSWORD, APPKEY)
    assert PASSWORD not in repr(request)  # the plain password is never sent
    assert response.remaining_searches == 41 and client.remaining_searches == 41
    player = response.payload.find("PlayerView/Player")
    assert player.attr("name") == "José María"


def test_query_parameter_credentials_and_xml() -> None:
    cfg = settings(credentials_in="query", format="xml")
    with ScriptedServer().play(Reply(body=summary_body(fmt="xml"))) as server, Client(cfg, base_url=server.base_url) as client:
        response = client.player_summary("PokerStars", "Borbas.Geri")
    (request,) = server.received
    assert request.headers["Accept"] == "application/xml"
    assert "Password" not in request.headers
    assert request.query["Password"] == [encode_password(PASSWORD, APPKEY)]
    assert request.path.endswith("/players/Borbas.Geri/summary")
    assert response.format == "xml" and response.remaining_searches == 41


def test_wrong_password_fails_after_exactly_one_request() -> None:
    with ScriptedServer(default=Reply(body=error_body(101002, "Invalid password."))) as server:
        with Client(settings(), base_url=server.base_url) as client, pytest.raises(CredentialsError) as info:
            client.player_summary("PokerStars", "x")
    assert len(server.received) == 1
    assert info.value.code == 101002 and info.value.service_message == "Invalid password."
    assert PASSWORD not in str(info.value) and encode_password(PASSWORD, APPKEY) not in str(info.value)


@pytest.mark.parametrize("status", [404, 405])
def test_malformed_call_is_not_retried(status: int) -> None:
    with ScriptedServer(default=Reply(status=status, body=b"Method Not Allowed")) as server:
        with Client(settings(), base_url=server.base_url) as client, pytest.raises(MalformedCallError) as info:
            client.countries()
    assert len(server.received) == 1 and info.value.status_code == status


def test_500_then_200_gives_the_data_after_one_retry() -> None:
    attempts = []
    with ScriptedServer().play(Reply(status=500, body=b"oops"), Reply(body=summary_body())) as server:
        with Client(settings(), base_url=server.base_url, on_attempt=attempts.append) as client:
            response = client.player_summary("PokerStars", "Borbas.Geri")
    assert len(server.received) == 2
    assert response.attempts == 2 and response.remaining_searches == 41
    assert [a.outcome for a in attempts] == ["transport_error", "ok"]
    assert attempts[-1].remaining_after == 41


def test_truncated_body_is_saved_then_retried() -> None:
    bodies = []
    good = summary_body()
    with ScriptedServer().play(Reply(body=good[: len(good) // 2]), Reply(body=good)) as server:
        with Client(settings(), base_url=server.base_url, on_body=bodies.append) as client:
            response = client.player_summary("PokerStars", "Borbas.Geri")
    assert [len(b.body) for b in bodies] == [len(good) // 2, len(good)]  # every paid body reached the hook
    assert response.body == good and len(server.received) == 2


def test_dropped_connection_is_a_retried_transport_error() -> None:
    body = summary_body()
    with ScriptedServer().play(Reply(body=body[:10], content_length=len(body))) as server:
        server.default = Reply(body=body)
        with Client(settings(), base_url=server.base_url) as client:
            assert client.player_summary("PokerStars", "a").remaining_searches == 41
    assert len(server.received) == 2


def test_retries_are_bounded() -> None:
    with ScriptedServer(default=Reply(status=503, body=b"busy")) as server:
        with Client(settings(max_attempts=3), base_url=server.base_url) as client, pytest.raises(TransportError):
            client.metadata()
    assert len(server.received) == 3


def test_timeout_is_explicit_and_retried() -> None:
    with ScriptedServer().play(Reply(body=summary_body(), delay_s=0.6)) as server:
        server.default = Reply(body=summary_body())
        with Client(settings(timeout_s=0.2), base_url=server.base_url) as client:
            assert client.player_summary("PokerStars", "a").attempts == 2


@pytest.mark.parametrize(
    ("code", "cls", "requests"),
    [
        (102002, QuotaError, 1),
        (102004, SubscriptionError, 1),
        (101001, CredentialsError, 1),
        (0, InternalServiceError, 4),
        (999999, UnknownServiceError, 1),
    ],
)
def test_errors_by_code(code: int, cls: type, requests: int) -> None:
    with ScriptedServer(default=Reply(body=error_body(code, "some localised text"))) as server:
        with Client(settings(), base_url=server.base_url) as client, pytest.raises(cls) as info:
            client.natural_language_filter("sng last month")
    assert info.value.code == code and info.value.service_message == "some localised text"
    assert len(server.received) == requests


def test_a_complete_answer_that_is_no_envelope_is_unusable_and_asked_once() -> None:
    with ScriptedServer(default=Reply(body=orjson.dumps({"Nope": {}}))) as server:
        with (
            Client(settings(max_attempts=3), base_url=server.base_url) as client,
            pytest.raises(UnusableResponse, match="Response root"),
        ):
            client.countries()
    assert len(server.received) == 1  # asking again would pay again for the same answer


DOCTYPE_BODY = b'<?xml version="1.0"?><!DOCTYPE Response [<!ENTITY x "y">]><Response success="true">&x;</Response>'


@pytest.mark.parametrize(
    ("body", "fmt", "error", "tries"),
    [
        (DOCTYPE_BODY, "xml", UnusableResponse, 1),
        (b'<Response success="true"><UserInfo loggedIn="tr', "xml", MalformedResponse, 3),
        (b'{"Response": {"@success": "true", "UserInfo": {"Username": "an', "json", MalformedResponse, 3),
        ('{"Response": {"@success": "true", "x": "é'.encode()[:-1], "json", MalformedResponse, 3),  # cut inside a character
        (b'{"Response": {"@success": "true"}} trailing', "json", UnusableResponse, 1),
        (b"\xff\xfe not text at all", "json", UnusableResponse, 1),
    ],
)
def test_a_body_cut_short_is_retried_and_a_complete_unreadable_one_is_not(body: bytes, fmt: str, error: type, tries: int) -> None:
    with ScriptedServer(default=Reply(body=body)) as server:
        with Client(settings(max_attempts=3, format=fmt), base_url=server.base_url) as client, pytest.raises(error):
            client.countries()
    assert len(server.received) == tries


def test_credentials_never_reach_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with ScriptedServer().play(Reply(status=500), Reply(body=summary_body())) as server:
        with Client(settings(credentials_in="query"), base_url=server.base_url) as client:
            client.player_summary("PokerStars", "a")
    text = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "HTTP Request" in text  # httpx did log the request line ...
    assert encode_password(PASSWORD, APPKEY) not in text and PASSWORD not in text  # ... without credentials


def test_settings_never_show_secrets() -> None:
    cfg = settings()
    assert PASSWORD not in repr(cfg) and APPKEY not in repr(cfg)


def test_async_client_bounds_concurrency() -> None:
    async def harvest(base_url: str) -> list[int | None]:
        async with AsyncClient(settings(concurrency=3), base_url=base_url) as client:
            responses = await asyncio.gather(*(client.player_summary("PokerStars", f"p{i}") for i in range(12)))
        return [r.remaining_searches for r in responses]

    with ScriptedServer(default=Reply(body=summary_body(), delay_s=0.05)) as server:
        remaining = asyncio.run(harvest(server.base_url))
    assert remaining == [41] * 12
    assert len(server.received) == 12 and server.max_in_flight <= 3


def test_metadata_hash_current_marker() -> None:
    cached = envelope(payload=Element("MetadataResponse", {"cached": "true"}))
    cached.attrs["metadataHash"] = "abc"
    with ScriptedServer().play(Reply(body=to_json(cached))) as server, Client(settings(), base_url=server.base_url) as client:
        response = client.metadata(hash="abc")
    assert server.received[0].query == {"hash": ["abc"]}
    assert metadata_is_cached(response.root) and response.envelope.metadata_hash == "abc"


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(status: int) -> None:
    attempts: list[Attempt] = []
    ok = Reply(body=orjson.dumps({"Response": {"@success": "true"}}))
    with ScriptedServer().play(Reply(status=status, headers={"Retry-After": "1"}), ok) as server:
        with Client(
            settings(max_attempts=3, retry_initial_wait_s=0.01), base_url=server.base_url, on_attempt=attempts.append
        ) as c:
            c.countries()
    first, second = attempts
    assert "asked to retry after 1 s" in (first.error or "")
    assert (second.started_at - first.started_at).total_seconds() >= 0.95  # not the 10 ms backoff


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from email.utils import format_datetime

    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 28 <= (retry_after_seconds(format_datetime(later, usegmt=True)) or 0) <= 30
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date already past


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_concurrency_halves_on_objection_then_recovers_to_what_the_account_allows() -> None:
    clock = FakeClock()
    limit = AdaptiveLimit(8, probe_after_s=5, clock=clock)

    def tick(seconds: float) -> int:
        clock.now += seconds
        limit._probe()
        return limit.limit

    limit.refused(8)  # the account allows 3: 8 in flight is refused...
    assert limit.limit == 4
    limit.refused(8)  # ...an echo of the same level changes nothing
    assert limit.limit == 4
    limit.refused(4)  # ...and so is 4
    assert (limit.limit, limit.ceiling) == (2, 3)
    assert tick(1) == 2  # not before a quiet period
    assert [tick(5) for _ in range(4)] == [3, 3, 3, 3]  # up by one, then held at the known ceiling
    assert tick(5 * 30) == 4  # after thirty quiet periods the refused level is tried again
    limit.refused(4)
    assert (limit.limit, limit.ceiling) == (2, 3)
    assert max(tick(5) for _ in range(40)) <= 8  # never above the configured maximum


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        ({}, "aiohttp"),
        ({"HTTP_PROXY": "http://proxy.invalid:3128"}, "httpcore"),  # httpx honours the proxy
        ({"HTTP_PROXY": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1"}, "aiohttp"),
        ({"TOURNEYLAKE_HTTP_BACKEND": "httpcore"}, "httpcore"),
    ],
)
def test_async_client_sends_with_aiohttp_unless_a_proxy_or_httpcore_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], backend: str
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("TOURNEYLAKE_HTTP_BACKEND", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    async def build() -> str:
        async with AsyncClient(settings(base_url="http://127.0.0.1:9")) as client:
            return client.backend

    assert asyncio.run(build()) == backend


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_async_client_reads_a_gzipped_answer_once(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    import gzip

    monkeypatch.setenv("TOURNEYLAKE_HTTP_BACKEND", backend)
    body = summary_body()

    async def fetch(base_url: str) -> bytes:
        async with AsyncClient(settings(), base_url=base_url) as client:
            assert client.backend == backend
            return (await client.player_summary("PokerStars", "p")).body

    reply = Reply(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})
    with ScriptedServer(default=reply) as server:
        assert asyncio.run(fetch(server.base_url)) == body


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_a_transport_failure_with_credentials_in_the_query_never_shows_them(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("TOURNEYLAKE_HTTP_BACKEND", backend)

    async def fetch(base_url: str) -> None:
        async with AsyncClient(settings(credentials_in="query", max_attempts=1), base_url=base_url) as client:
            await client.player_summary("PokerStars", "p")

    cut_short = Reply(body=summary_body(), content_length=len(summary_body()) + 500)
    with ScriptedServer(default=cut_short) as server, pytest.raises(TransportError) as caught:
        asyncio.run(fetch(server.base_url))
    chain, error = [], caught.value
    while error is not None:  # the error, and everything it was raised from or during
        chain.append(f"{type(error).__name__}: {error} {error.args!r}")
        error = error.__cause__ or error.__context__
    shown = "\n".join(chain)
    assert encode_password(PASSWORD, APPKEY) not in shown and "Password=" not in shown, shown
    # A message that names the request's URL loses its query string.
    assert "?…" in _described(ValueError("400, url='http://h/api/demo/x?Username=u&Password=p'"))
    assert "Password" not in _described(ValueError("url='http://h/x?Password=p'"))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_call_is_not_sent_when_its_write_ahead_line_cannot_be_written(kind: str) -> None:
    """The gate (the search ledger) hands back the future of its line's write: the call goes
    out only once it is done, and not at all when it failed."""
    from concurrent.futures import Future

    failed: Future[None] = Future()
    failed.set_exception(OSError(28, "No space left on device"))
    written: Future[None] = Future()
    gates: list[str] = []

    def gate(call: object, number: int) -> Future[None]:
        gates.append(kind)
        return failed if len(gates) > 1 else written

    async def fetch_async(base_url: str) -> None:
        async with AsyncClient(settings(), base_url=base_url, before_attempt=gate) as client:
            sending = asyncio.ensure_future(client.player_summary("PokerStars", "p"))
            await asyncio.sleep(0.2)
            assert server.received == []  # waits for its line
            written.set_result(None)
            assert (await sending).remaining_searches == 41
            await client.player_summary("PokerStars", "q")

    def fetch_sync(base_url: str) -> None:
        written.set_result(None)
        with Client(settings(), base_url=base_url, before_attempt=gate) as client:
            assert client.player_summary("PokerStars", "p").remaining_searches == 41
            client.player_summary("PokerStars", "q")

    fetch = (lambda url: asyncio.run(fetch_async(url))) if kind == "async" else fetch_sync
    with ScriptedServer(default=Reply(body=summary_body())) as server:
        with pytest.raises(OSError, match="No space left"):
            fetch(server.base_url)
    assert len(server.received) == 1 and len(gates) == 2


def test_the_caller_hears_of_an_answer_once_its_ledger_row_is_written() -> None:
    from concurrent.futures import Future

    recorded: Future[None] = Future()

    async def fetch(base_url: str) -> None:
        async with AsyncClient(settings(), base_url=base_url, on_attempt=lambda attempt: recorded) as client:
            sending = asyncio.ensure_future(client.player_summary("PokerStars", "p"))
            await asyncio.sleep(0.2)
            assert len(server.received) == 1 and not sending.done()  # answered, the row not yet written
            recorded.set_result(None)
            assert (await sending).remaining_searches == 41

    with ScriptedServer(default=Reply(body=summary_body())) as server:
        asyncio.run(fetch(server.base_url))


def test_a_failed_rename_reaches_the_caller_only_once_its_ledger_row_is_written() -> None:
    """Every write a call waits for is waited for, whichever fails first: the body's rename
    (told before the row) fails at once, the row is still in the file before the caller hears."""
    from concurrent.futures import Future

    recorded: Future[None] = Future()

    def on_body(received: object):
        def named(status: str) -> None:
            raise OSError(5, "Input/output error")

        return named

    async def fetch(base_url: str) -> None:
        async with AsyncClient(settings(), base_url=base_url, on_body=on_body, on_attempt=lambda attempt: recorded) as client:
            sending = asyncio.ensure_future(client.player_summary("PokerStars", "p"))
            await asyncio.sleep(0.3)
            assert len(server.received) == 1 and not sending.done()  # the rename failed; the row is not written yet
            recorded.set_result(None)
            with pytest.raises(OSError, match="Input/output error"):
                await sending

    with ScriptedServer(default=Reply(body=summary_body())) as server:
        asyncio.run(fetch(server.base_url))
    assert len(server.received) == 1
