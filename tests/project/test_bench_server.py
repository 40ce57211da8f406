"""Smoke test of the benchmark server (benchmarks/bench_server.py): what it answers, not how fast.

Five players, three rendered through the sandbox and two copies: every answer a night needs,
the credentials checked, the searches left counting down, an unknown player refused.
"""

from __future__ import annotations

import sys

import httpx
import orjson
import pytest

from benchmarks.common import BenchServer, cpu_jiffies, headers, measure, roster, steal_pct, summary_path
from tourneylake.api import read_answer

pytestmark = pytest.mark.xdist_group("bench_server")


@pytest.fixture(scope="module")
def server():
    with BenchServer(5, 0.0, distinct=3) as running:
        yield running


def test_answers_a_night_and_counts_searches(server: BenchServer) -> None:
    server.reset()
    filter_sent = server.stats()["filter"]
    with httpx.Client(base_url=server.base_url, headers=headers(), timeout=10) as http:
        metadata = http.get("/api/demo/metadata")
        _, envelope = read_answer(metadata.content, "json")
        assert metadata.status_code == 200 and envelope.success
        cached = http.get("/api/demo/metadata", params={"hash": envelope.metadata_hash})
        assert b'"cached":"true"' in cached.content or b'"@cached":"true"' in cached.content
        _, before = read_answer(http.get("/api/demo/metadata/countries").content, "json")
        names = roster(5)
        for network, player in names:
            body = http.get(summary_path(network, player), params={"filter": filter_sent}).content
            _, env = read_answer(body, "json")
            assert env.success
            found = orjson.loads(body)["Response"]["PlayerResponse"]["PlayerView"]["Player"]
            assert (found["@network"], found["@name"]) == (network, player)  # copies too
        _, after = read_answer(http.get("/api/demo/news/whatsnew").content, "json")
        assert before.remaining_searches is not None
        assert before.remaining_searches - after.remaining_searches == 5

        _, refused = read_answer(http.get(summary_path(*names[0]), headers={"Password": "0" * 32}).content, "json")
        assert not refused.success
        unknown = http.get(summary_path("PokerStars", "nobody at all"), params={"filter": filter_sent}).content
        assert b"200039" in unknown
        assert http.get("/api/demo/metadata", headers={"Accept": "text/html"}).status_code == 404
    stats = server.stats()
    assert stats["counts"]["summary"] == 5 and stats["filter_mismatches"] == 0
    assert stats["counts"]["error_101002"] == 1 and stats["counts"]["error_200039"] == 1


def test_measure_reports_the_hosts_steal_time() -> None:
    """Benchmark 1's rounds carry the machine's steal time: a child measured on Linux gets a
    share between 0 and 100 %; the arithmetic is steal over all CPU time between two readings."""
    assert steal_pct((10, 1000), (40, 1600)) == 5.0
    assert steal_pct(None, (40, 1600)) is None and steal_pct((10, 1000), (10, 1000)) is None
    m = measure([sys.executable, "-c", "sum(range(3_000_000))"], timeout=60)
    assert m.returncode == 0
    if cpu_jiffies() is not None:
        assert m.steal_pct is not None and 0.0 <= m.steal_pct <= 100.0
