"""A night's requests to the Delta logs of a lake on S3 (a real S3 API, ``moto_server``, behind the
counting proxy of ``tests/s3_proxy.py``): two nights harvested from the sandbox into the lake and
loaded into the warehouse, then the night's expiry. The first night creates every table; the
second commits to each one that exists. The bounds are counts, not timings: what delta-rs asked
before (a creation 14 requests, a commit ten, each read of a table 4 or more, the expiry an open
of every table) is four times more."""

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
from tourneylake.lake.partitions import expire_versions
from tourneylake.sandbox import running_sandbox
from tourneylake.tables.warehouse import LOAD_ORDER

NIGHTS = [date(2026, 11, 20), date(2026, 11, 21)]


def _log_requests(counts: dict[str, int]) -> int:
    return sum(n for what, n in counts.items() if what.endswith(" _delta_log"))


@pytest.mark.slow
def test_a_night_on_s3_asks_its_delta_logs_a_few_requests_a_table(
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
            expire_versions(Lake(url), settings.table_history_days)
            asked.append(proxy.stats()["counts"])
    first, second = (_log_requests(counts) for counts in asked)
    assert asked[0].get("PUT _delta_log", 0) <= tables  # one PUT a table created
    assert first <= 5 * tables, asked[0]
    assert second <= 5 * tables, asked[1]
