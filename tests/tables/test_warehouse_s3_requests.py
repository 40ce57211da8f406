"""A night's requests to the Delta logs of a lake on S3 (a real S3 API, ``moto_server``, behind the
counting proxy of ``tests/s3_proxy.py``): two nights harvested from the sandbox into the lake and
loaded into the warehouse, then the night's expiry. The first night creates every table; the
second commits to each one that exists. Every commit is delta-rs's conditional PUT
(``If-None-Match``: two writers of one version cannot both win). The bound is a count, not a
timing: about a dozen requests a table a night are delta-rs's (a commit reads the log before and
after its PUT, a read brings the table up to date); a table opened anew at each read would pass it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date
from pathlib import Path

import fsspec
import pytest

from tests.helpers import harvest_nights, sandbox_settings
from tests.s3_proxy import running_proxy
from tourneylake.lake.lake import Lake
from tourneylake.sandbox import running_sandbox
from tourneylake.tables.warehouse import LOAD_ORDER

NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]


def _log_requests(counts: dict[str, int]) -> int:
    return sum(n for what, n in counts.items() if what.endswith(" _delta_log"))


@pytest.mark.slow
def test_a_night_on_s3_commits_by_conditional_puts_and_asks_its_logs_a_bounded_number_of_requests(
    moto: str, s3_env: Callable[[str], None], tmp_path: Path
) -> None:
    tables = len(LOAD_ORDER)
    with running_proxy(moto) as proxy, running_sandbox(seed=4, today=NIGHTS[0]) as server:
        s3_env(moto)
        bucket = f"lake-{uuid.uuid4().hex[:8]}"
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
        s3_env(proxy.url)
        url = f"s3://{bucket}/prefix"
        settings = sandbox_settings(server, tmp_path, warehouse=tmp_path / "warehouse.duckdb").with_overrides(data_dir=url)
        asked = []
        for night in NIGHTS:
            proxy.reset()
            harvest_nights(server, settings, [night])
            Lake(url).tables.expire(settings.table_history_days)
            asked.append(proxy.stats()["counts"])
    for counts in asked:
        assert 0 < counts.get("PUT _delta_log", 0) == counts.get("conditional PUT", 0), counts  # delta-rs's commits
        assert _log_requests(counts) <= 25 * tables, counts
