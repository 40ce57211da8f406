"""The lake's Delta logs read and written with fewer requests (``tourneylake.lake.delta_log``, the
creation and the expiry of ``tourneylake.lake.partitions``): the lake's own log reader gives the
parts delta-rs gives, across replaced nights, shards, a dropped night and a checkpoint, locally
and on a real S3 API (``moto_server``); a log it does not read is left to delta-rs; on S3 a new
table is one conditional PUT of its first commit, read back by no one in its process, and
two creators of one table both land; a night's expiry lists each table's log and opens none
when nothing is due, and still deletes what is."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import fsspec
import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.lake.test_object_store import lake_behind_proxy
from tourneylake.lake import delta_log, partitions
from tourneylake.lake.lake import Lake
from tourneylake.lake.partitions import DELTA_LOG, PARTITION, expire_versions, storage_options

NIGHT = date(2026, 11, 20)


def small(n: int, tag: str = "a") -> pa.Table:
    return pa.table({"n": list(range(n)), "tag": [tag] * n})


def by_delta_rs(lake: Lake, table: str) -> list[tuple[str, date, int | None]]:
    """The table's parts as delta-rs opens it: (path, night, rows)."""
    actions = pa.table(DeltaTable(lake.table_uri(table), storage_options=storage_options(lake)).get_add_actions(flatten=True))
    columns = actions.select(["path", f"partition.{PARTITION}", "num_records"]).columns
    return sorted(zip(*(c.to_pylist() for c in columns), strict=True))


def by_reader(lake: Lake, table: str) -> list[tuple[str, date, int | None]]:
    return sorted(delta_log.table_parts(lake.table_dir(table) / DELTA_LOG, PARTITION) or [])


def many_commits(lake: Lake) -> None:
    """Seven nights, two of them replaced, a shard's parts replaced, a night dropped: past the
    checkpoint every five commits."""
    for i in range(7):
        lake.write_table("t", NIGHT + timedelta(days=i), small(i + 1, f"n{i}"))
    lake.write_table("t", NIGHT, small(9, "again"))
    lake.write_table("t", NIGHT + timedelta(days=1), small(2, "s1"), shard="one")
    lake.write_table("t", NIGHT + timedelta(days=1), small(3, "s1b"), shard="one")
    lake.drop_partition("t", NIGHT + timedelta(days=2))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_the_log_reader_gives_the_parts_delta_rs_gives(where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    lake = Lake(str(tmp_path) if where == "local" else request.getfixturevalue("s3")).claim("sandbox")
    assert by_reader(lake, "t") == [] and delta_log.table_parts(lake.table_dir("t") / DELTA_LOG, PARTITION) is None
    many_commits(lake)
    logged = [p.name for p in (lake.table_dir("t") / DELTA_LOG).iterdir()]
    assert any(name.endswith(".checkpoint.parquet") for name in logged)  # the reader started from a checkpoint
    delta_log._READ.clear()  # another process: nothing read yet
    assert by_reader(lake, "t") == by_delta_rs(lake, "t")
    assert lake.partitions("t") == [NIGHT + timedelta(days=i) for i in range(7) if i != 2]
    assert lake.read_table("t", NIGHT).column("tag").to_pylist() == ["again"] * 9
    assert sorted(lake.read_table("t", NIGHT + timedelta(days=1)).column("tag").to_pylist()) == ["n1"] * 2 + ["s1b"] * 3


def test_a_log_the_reader_does_not_read_is_read_by_delta_rs(tmp_path: Path) -> None:
    """A reader feature it does not know (here a protocol asking reader version 3): the lake's
    reads still answer, through delta-rs, which knows the log."""
    lake = Lake(str(tmp_path)).claim("sandbox")
    lake.write_table("t", NIGHT, small(2))
    first = tmp_path / "lake" / "t" / DELTA_LOG / f"{0:020d}.json"
    lines = first.read_bytes().splitlines()
    unread = [b'{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["x"],"writerFeatures":["x"]}}']
    assert delta_log.table_parts(first.parent, PARTITION) is not None
    delta_log._READ.clear()
    first.write_bytes(b"\n".join([*(line for line in lines if b'"protocol"' not in line), *unread]) + b"\n")
    with pytest.raises(delta_log.Unreadable):
        delta_log.table_parts(first.parent, PARTITION)


def test_a_new_table_on_s3_is_one_conditional_put_read_back_by_no_one_here(moto: str, s3_env: Callable[[str], None]) -> None:
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        proxy.reset()
        lake.write_table("t", NIGHT, small(3))
        counts = proxy.stats()["counts"]
        # delta-rs's own creation: a listing, the PUT, then two reads of the new table (four requests each)
        assert counts.get("PUT _delta_log", 0) == 1 and counts.get("conditional PUT", 0) == 1
        assert counts.get("GET _delta_log", 0) + counts.get("LIST _delta_log", 0) <= 2  # is it there (delta-rs asks)
        proxy.reset()
        assert lake.night_parts("t", NIGHT)[NIGHT][0][1] == 3
        counts = proxy.stats()["counts"]
        assert (counts.get("LIST _delta_log", 0), counts.get("GET _delta_log", 0)) == (1, 0)  # the commit is known here
        assert by_delta_rs(lake, "t") == by_reader(lake, "t")  # a Delta table to any reader


def test_two_creators_of_one_table_on_s3_both_land(s3: str) -> None:
    """Two nights committed at once to a table that does not exist yet: one creates it (its
    conditional PUT wins), the other's is refused and commits to the table it finds."""
    nights = [NIGHT, NIGHT + timedelta(days=1), NIGHT + timedelta(days=2)]
    barrier = threading.Barrier(len(nights))
    failures: list[BaseException] = []

    def commit(night: date) -> None:
        try:
            with Lake(s3).partition_writer("t", night) as writer:
                writer.write(small(2, night.isoformat()))
                barrier.wait(30)
        except BaseException as exc:  # noqa: BLE001 - the assertion below names it
            failures.append(exc)

    threads = [threading.Thread(target=commit, args=(night,)) for night in nights]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    lake = Lake(s3)
    assert lake.partitions("t") == nights
    assert by_delta_rs(lake, "t") == by_reader(lake, "t")


def test_a_night_expiry_opens_no_table_when_nothing_is_due(moto: str, s3_env: Callable[[str], None]) -> None:
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, bucket):
        for table in ("a", "b", "c"):
            lake.write_table(table, NIGHT, small(2))
            lake.write_table(table, NIGHT + timedelta(days=1), small(2))
        lake.write_table("a", NIGHT, small(1, "replaced"))  # a removal, young
        delta_log._LISTED.clear()  # another process: no listing of its own yet
        proxy.reset()
        assert expire_versions(lake, keep_days=7) == 0
        counts = proxy.stats()["counts"]
        assert counts == {**counts, "requests": 4, "LIST": 4}  # the lake's folders, then each table's log
        assert counts.get("LIST _delta_log", 0) == 3
        for table in ("a", "b", "c"):
            lake.night_parts(table, NIGHT)  # the warehouse load's reads, beside the expiry
        proxy.reset()
        assert expire_versions(lake, keep_days=7) == 0
        again = proxy.stats()["counts"]
        assert (again["requests"], again["LIST"], again.get("LIST _delta_log", 0)) == (1, 1, 0)  # their listings serve
        assert expire_versions(lake, keep_days=0) == 1  # due at once: the replaced part deleted
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        night = f"{bucket}/prefix/lake/a/{PARTITION}={NIGHT.isoformat()}"
        assert len(fs.find(night)) == 1 and lake.read_table("a", NIGHT).column("tag").to_pylist() == ["replaced"]


def test_a_removal_is_due_once_its_commit_is_as_old_as_the_history_kept(tmp_path: Path) -> None:
    from tourneylake.lake.partitions import expiry_due

    lake = Lake(str(tmp_path)).claim("sandbox")
    lake.write_table("t", NIGHT, small(2))
    assert not expiry_due(lake, "t", 0.0)  # a first commit only adds
    assert not expiry_due(lake, "missing", 0.0)
    lake.write_table("t", NIGHT, small(1))
    assert not expiry_due(lake, "t", 48.0) and expiry_due(lake, "t", 0.0)
    second = tmp_path / "lake" / "t" / DELTA_LOG / f"{1:020d}.json"
    old = time.time() - 47 * 3600
    os.utime(second, (old, old))
    assert expiry_due(lake, "t", 48.0)  # within the margin of the clocks: due
    (tmp_path / "lake" / "t" / DELTA_LOG / f"{0:020d}.json").unlink()  # a log cleaned up: cannot say
    os.utime(second, None)
    assert expiry_due(lake, "t", 48.0)


def test_a_table_with_a_writer_rule_is_committed_by_delta_rs(s3: str) -> None:
    """A table that asks its writers for more than parts added and removed (here append-only,
    set by another Delta writer) is committed by delta-rs, which keeps its rules; the lake's
    own commits are plain ones."""
    lake = Lake(s3).claim("sandbox")
    lake.write_table("t", NIGHT, small(2))
    lake.write_table("t", NIGHT, small(3, "b"))  # a table that exists: the lake's own commit
    log_dir = lake.table_dir("t") / DELTA_LOG

    def last_commit() -> dict:
        return orjson.loads(
            (log_dir / max(p.name for p in log_dir.iterdir() if p.name.endswith(".json"))).read_bytes().splitlines()[0]
        )

    assert last_commit()["commitInfo"]["engineInfo"] == "tourneylake"
    DeltaTable(lake.table_uri("t"), storage_options=storage_options(lake)).alter.set_table_properties(
        {"delta.appendOnly": "true"}
    )
    lake.write_table("t", NIGHT + timedelta(days=1), small(1))
    assert last_commit()["commitInfo"]["engineInfo"].startswith("delta-rs")
    assert lake.partitions("t") == [NIGHT, NIGHT + timedelta(days=1)]


def test_parts_stored_here_are_read_here_without_a_get(moto: str, s3_env: Callable[[str], None]) -> None:
    """A part this process stored is read back from memory (the reference data's lookups, the
    warehouse load); one another process stored is fetched."""
    with lake_behind_proxy(moto, s3_env) as (proxy, lake, _):
        lake.write_table("t", NIGHT, small(3))
        proxy.reset()
        assert lake.read_partition("t", NIGHT).num_rows == 3
        assert proxy.stats()["counts"].get("GET .parquet", 0) == 0
        partitions._STORED._kept.clear()  # another process: nothing stored here
        assert lake.read_partition("t", NIGHT).num_rows == 3
        assert proxy.stats()["counts"].get("GET .parquet", 0) == 1
