"""The sandbox's faults over real HTTP: each kind, its metering, and reproducibility by seed."""

from __future__ import annotations

import asyncio
import time
from datetime import date

import httpx
import pytest

from tourneylake.api import tree
from tourneylake.errors import TourneylakeError
from tourneylake.sandbox import DEMO, Faults, FaultSpecError, running_sandbox

TODAY = date(2026, 3, 1)
HEADERS = {
    "Accept": "application/json",
    "User-Agent": "tourneylake-tests/1",
    "Username": DEMO.username,
    "Password": DEMO.encoded_password,
}
SUMMARY = "networks/PokerStars/players/Borbas.Geri/summary"


def test_faults_parse_and_format() -> None:
    f = Faults.parse("5xx=0.1,drop=0.05,truncate=0.05,slow=0.02,internal=0.02,parallel=4,jitter=5")
    assert (f.error_5xx, f.drop, f.truncate, f.slow, f.internal, f.parallel, f.jitter_ms) == (0.1, 0.05, 0.05, 0.02, 0.02, 4, 5.0)
    assert Faults.parse(str(f)) == f
    assert Faults.parse("") == Faults() == Faults.parse("none")
    assert Faults.parse("slow=1,slow_s=2.5").slow_seconds == 2.5
    for bad in ("5xx=2", "bogus=1", "drop", "5xx=0.6,drop=0.6", "parallel=0", "jitter=x"):
        with pytest.raises(FaultSpecError) as caught:
            Faults.parse(bad)
        assert isinstance(caught.value, TourneylakeError) and isinstance(caught.value, ValueError)


def test_5xx_before_charging() -> None:
    with running_sandbox(seed=1, today=TODAY, faults=Faults(error_5xx=1.0)) as server:
        for _ in range(5):
            r = httpx.get(f"{server.api_url}/{SUMMARY}", headers=HEADERS)
            assert r.status_code in (500, 502, 503) and r.headers["content-type"].startswith("text/html")
        assert server.accounts.remaining(DEMO.username) == 100_000


def test_dropped_connection_before_charging() -> None:
    with running_sandbox(seed=1, today=TODAY, faults="drop=1") as server:
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.get(f"{server.api_url}/{SUMMARY}", headers=HEADERS)
        assert server.accounts.remaining(DEMO.username) == 100_000


@pytest.mark.parametrize("fmt", ["json", "xml"])
def test_truncated_body_is_charged(fmt: str) -> None:
    with running_sandbox(seed=1, today=TODAY, faults="truncate=1") as server:
        r = httpx.get(f"{server.api_url}/{SUMMARY}", headers={**HEADERS, "Accept": f"application/{fmt}"})
        assert r.status_code == 200 and len(r.content) == int(r.headers["content-length"])
        with pytest.raises(tree.MalformedPayload):
            tree.parse(r.content, fmt)
        assert server.accounts.remaining(DEMO.username) == 100_000 - 1


def test_slow_body_times_out_and_is_charged() -> None:
    with running_sandbox(seed=1, today=TODAY, faults=Faults(slow=1.0, slow_seconds=1.0)) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(f"{server.api_url}/{SUMMARY}", headers=HEADERS, timeout=0.3)
        # The client gave up at 0.3 s; on a loaded machine the server may reach the charge a
        # little later. Wait for it (bounded), then require exactly one search charged.
        deadline = time.monotonic() + 5
        while server.accounts.remaining(DEMO.username) == 100_000 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.accounts.remaining(DEMO.username) == 100_000 - 1
        r = httpx.get(f"{server.api_url}/metadata/countries", headers=HEADERS, timeout=5)
        assert tree.parse_json(r.content).attr("success") == "true"


def test_internal_error_costs_nothing() -> None:
    with running_sandbox(seed=1, today=TODAY, faults="internal=1") as server:
        node = tree.parse_json(httpx.get(f"{server.api_url}/{SUMMARY}", headers=HEADERS).content)
        assert node.attr("success") == "false" and node.find("ErrorResponse/Error").attr("id") == "0"
        assert server.accounts.remaining(DEMO.username) == 100_000


def test_latency_and_jitter_are_asynchronous() -> None:
    # A second of latency: even on a busy host the client opens its eight connections within it.
    with running_sandbox(seed=1, today=TODAY, latency_ms=1000, faults="jitter=50") as server:

        async def burst() -> None:
            async with httpx.AsyncClient(headers=HEADERS) as client:
                await asyncio.gather(*(client.get(f"{server.api_url}/metadata/countries") for _ in range(8)))

        asyncio.run(burst())
        # the latency is slept without blocking: all eight calls were in the server at once
        assert server.accounts.peak_in_flight(DEMO.username) == 8


def test_logged_in_elsewhere_when_too_many_in_flight() -> None:
    with running_sandbox(seed=1, today=TODAY, latency_ms=300, faults="parallel=2") as server:

        async def burst() -> list[str | None]:
            async with httpx.AsyncClient(headers=HEADERS) as client:
                replies = await asyncio.gather(*(client.get(f"{server.api_url}/{SUMMARY}") for _ in range(5)))
            nodes = [tree.parse_json(r.content) for r in replies]
            return [None if n.attr("success") == "true" else n.find("ErrorResponse/Error").attr("id") for n in nodes]

        codes = asyncio.run(burst())
        assert codes.count(None) == 2 and codes.count("101024") == 3
        assert server.accounts.remaining(DEMO.username) == 100_000 - 2
        # sequential calls are fine again
        node = tree.parse_json(httpx.get(f"{server.api_url}/{SUMMARY}", headers=HEADERS).content)
        assert node.attr("success") == "true"


def _statuses(seed: int) -> list[int | str]:
    out: list[int | str] = []
    with running_sandbox(seed=seed, today=TODAY, faults="5xx=0.3,truncate=0.2,internal=0.2") as server:
        with httpx.Client(headers=HEADERS) as client:
            for _ in range(25):
                r = client.get(f"{server.api_url}/metadata/countries")
                if r.status_code != 200:
                    out.append(r.status_code)
                    continue
                try:
                    node = tree.parse_json(r.content)
                except tree.MalformedPayload:
                    out.append("truncated")
                    continue
                out.append("ok" if node.attr("success") == "true" else "error0")
    return out


def test_faults_are_reproducible_by_seed() -> None:
    first, again, other = _statuses(21), _statuses(21), _statuses(22)
    assert first == again
    assert first != other
    assert {"ok", "truncated", "error0"} <= set(first) | set(other)
