"""The Parquet lake: source guard, raw responses, atomic partition replacement."""

from __future__ import annotations

import base64
import gzip
import hashlib
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.helpers import body_payload, rewrite_body
from tourneylake.errors import LakeError, LakeSourceMismatch
from tourneylake.lake.lake import Lake
from tourneylake.lake.legacy import sweep_tmp
from tourneylake.lake.raw import key_digest
from tourneylake.lake.segments import forget_indexes, frames

NIGHT = date(2019, 12, 10)
FETCHED = datetime(2019, 12, 10, 3, 0, tzinfo=UTC)
KEY = {"network": "PokerStars", "player": "Borbas.Geri", "filter_name": ""}


def test_opening_claims_nothing_and_claiming_is_enforced(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    assert not lake.exists and lake.source is None
    assert not (tmp_path / "lake").exists()  # opening writes nothing
    lake.claim("sandbox")
    assert orjson.loads((tmp_path / "lake" / "_source.json").read_bytes())["source"] == "sandbox"
    Lake(tmp_path).claim("sandbox")  # same source: fine
    with pytest.raises(LakeSourceMismatch, match="synthetic and live data never mix"):
        Lake(tmp_path).claim("live:api.example.com")
    (tmp_path / "lake" / "_source.json").write_text("{not json")
    with pytest.raises(LakeError, match=r"_source\.json is damaged"):
        Lake(tmp_path).claim("sandbox")


def _segments(lake: Lake, night: date = NIGHT) -> list[Path]:
    return sorted((lake.root / "_raw" / f"snapshot_date={night}").glob("w-*/*.seg"))


def test_raw_is_kept_received_then_named_by_its_status(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    assert not lake.raw.has(NIGHT, "player_summary", KEY)
    ref = lake.raw.write(NIGHT, "player_summary", KEY, b'{"Response": {}}', "json", FETCHED)
    assert ref.status == "received" and ref.name.endswith(".received.json.gz")
    assert not lake.raw.has(NIGHT, "player_summary", KEY)  # not read yet: not an accepted answer
    assert [r.status for r in lake.raw.bodies(NIGHT, status=None)] == ["received"]
    accepted = lake.raw.settle(ref, "ok")
    assert accepted == lake.raw.ref(NIGHT, "player_summary", KEY) and lake.raw.has(NIGHT, "player_summary", KEY)
    # the key's order does not matter; a new accepted answer is the request's answer from then on
    reordered = dict(reversed(list(KEY.items())))
    lake.raw.settle(lake.raw.write(NIGHT, "player_summary", reordered, b'{"Response": {"@x": "2"}}', "json", FETCHED), "ok")
    (raw,) = list(lake.raw.bodies(NIGHT))
    assert raw.body == b'{"Response": {"@x": "2"}}' and raw.key == reordered
    assert raw.fmt == "json" and raw.fetched_at == FETCHED and raw.resource == "player_summary" and raw.status == "ok"
    # every body and status of the night in one segment: each body the first layout's file
    (segment,) = _segments(lake)
    assert len(frames(segment.read_bytes())[0]) == 4
    line, body = gzip.decompress(body_payload(raw.ref)).split(b"\n", 1)  # a header line, then the body as received
    header = orjson.loads(line)
    assert header["format"] == "json" and header["key"] == reordered and body == raw.body
    assert header["body_bytes"] == len(body) and header["sha256"] == hashlib.sha256(body).hexdigest()


def test_a_body_kept_twice_under_one_token_reads_once(tmp_path: Path) -> None:
    """A saver that died after writing a body but before saying so: the harvest writes it again
    under the token it chose; the night holds it once."""
    lake = Lake(tmp_path).claim("sandbox")
    first = lake.raw.write(NIGHT, "player_summary", KEY, b"{}", "json", FETCHED, token="abc")
    second = lake.raw.write(NIGHT, "player_summary", KEY, b"{}", "json", FETCHED, token="abc")
    assert first.offset != second.offset
    assert [r.token for r in lake.raw.refs(NIGHT, status=None)] == ["abc"]


@pytest.mark.parametrize("body", [b'{"Response": {"@x": "1"}}', b"\xff\xfe not utf-8\n<Response/>"])
def test_raw_files_of_the_first_layouts_still_read(tmp_path: Path, body: bytes) -> None:
    """Bodies kept one file each (before segments) read as they did: a header line then the body,
    or, earliest, one JSON document with the body inside as text (base64 when not UTF-8)."""
    lake = Lake(tmp_path).claim("sandbox")
    folder = lake.root / "_raw" / f"snapshot_date={NIGHT}" / "player_summary"
    folder.mkdir(parents=True)
    ref = lake.raw.write(date(2019, 1, 1), "player_summary", KEY, body, "json", FETCHED)
    header = orjson.loads(gzip.decompress(body_payload(ref)).split(b"\n", 1)[0])
    header["snapshot_date"] = NIGHT.isoformat()
    path = folder / f"{key_digest(KEY)}.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(header) + b"\n" + body))
    (raw,) = list(lake.raw.bodies(NIGHT))
    assert raw.body == body and raw.ref.location == path and raw.status == "ok"
    try:
        text, encoding = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(body).decode("ascii"), "base64"
    del header["body_bytes"]
    for option in (0, orjson.OPT_INDENT_2):  # as written, and as someone pretty-printed it by hand
        path.write_bytes(gzip.compress(orjson.dumps({**header, "body_encoding": encoding, "body": text}, option=option)))
        (raw,) = list(lake.raw.bodies(NIGHT))
        assert raw.body == body and raw.key == KEY and raw.fetched_at == FETCHED and raw.fmt == "json"
    # named anew by a status record, never renamed
    lake.raw.settle(raw.ref, "unusable")
    assert [r.status for r in lake.raw.bodies(NIGHT, status=None)] == ["unusable"] and path.exists()


@pytest.mark.parametrize("cut", [1, -1])
def test_a_body_whose_length_is_not_what_its_header_says_is_damaged(tmp_path: Path, cut: int) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    ref = lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b'{"Response": {}}', "json", FETCHED), "ok")
    data = gzip.decompress(body_payload(ref))
    rewrite_body(ref, gzip.compress(data[:cut] if cut < 0 else data + b" "))
    with pytest.raises(LakeError, match=r"is damaged \(ValueError: \d+ body bytes, the header says 16\).*kept as is"):
        list(lake.raw.bodies(NIGHT))


def test_a_body_damaged_inside_or_without_a_header_field_is_a_clear_error(tmp_path: Path) -> None:
    """A flipped byte in the compressed stream, or a header without its night: a LakeError
    naming the segment and where in it (the bare zlib or KeyError said neither), the bytes kept."""
    lake = Lake(tmp_path).claim("sandbox")
    ref = lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b'{"Response": {}}' * 50, "json", FETCHED), "ok")
    good = body_payload(ref)
    flipped = bytearray(good)
    flipped[10] ^= 0xFF  # the first byte of the deflate stream: zlib cannot read its blocks
    rewrite_body(ref, bytes(flipped))
    (ref,) = lake.raw.refs(NIGHT)
    with pytest.raises(LakeError, match=rf"raw body {ref.location} \(at byte {ref.offset}\) is damaged \(error: .*kept as is"):
        list(lake.raw.bodies(NIGHT))
    assert body_payload(ref) == bytes(flipped)
    line, body = gzip.decompress(good).split(b"\n", 1)
    header = orjson.loads(line)
    del header["snapshot_date"]
    rewrite_body(ref, gzip.compress(orjson.dumps(header) + b"\n" + body))
    with pytest.raises(LakeError, match=r"is damaged \(KeyError: 'snapshot_date'\)"):
        list(lake.raw.bodies(NIGHT))


def test_a_refusal_never_hides_an_accepted_answer(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b"good", "json", FETCHED), "ok")
    lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b"\xff\xfe not utf-8", "json", FETCHED), "refused-0")
    lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b"{", "json", FETCHED), "malformed")
    assert lake.raw.read(NIGHT, "player_summary", KEY).body == b"good"
    statuses = sorted(r.status for r in lake.raw.bodies(NIGHT, status=None))
    assert statuses == ["malformed", "ok", "refused-0"]
    (refused,) = list(lake.raw.bodies(NIGHT, status="refused-0"))
    assert refused.body == b"\xff\xfe not utf-8"  # a body that is not UTF-8 is kept byte for byte
    with pytest.raises(LakeError, match="unknown raw status"):
        lake.raw.settle(lake.raw.write(NIGHT, "metadata", {}, b"", "json", FETCHED), "weird")


def test_raw_listing(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    lake.raw.settle(lake.raw.write(NIGHT, "metadata", {}, b"<Response/>", "xml", FETCHED), "ok")
    lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b"{}", "json", FETCHED), "ok")
    lake.raw.settle(lake.raw.write(date(2019, 12, 11), "player_summary", KEY, b"{}", "json", 1575950000), "ok")
    assert lake.raw.nights() == [NIGHT, date(2019, 12, 11)]
    assert [r.resource for r in lake.raw.bodies(NIGHT)] == ["metadata", "player_summary"]
    assert list(lake.raw.bodies(date(2020, 1, 1))) == []


def test_a_torn_last_record_loses_nothing_whole(tmp_path: Path) -> None:
    """A writer killed mid-record (or a disk that lost a segment's end): every whole record
    before it reads; the torn one is skipped, and the next writer's segment is its own."""
    lake = Lake(tmp_path).claim("sandbox")
    for player in ("a", "b", "c"):
        lake.raw.settle(lake.raw.write(NIGHT, "player_summary", {"player": player}, b"{}", "json", FETCHED), "ok")
    (segment,) = _segments(lake)
    whole = segment.read_bytes()
    last = frames(whole)[0][-2]  # the third body's record (its status record follows)
    segment.write_bytes(whole[: last[0] + last[1] // 2])
    forget_indexes()
    assert sorted(r.key["player"] for r in lake.raw.bodies(NIGHT, status=None)) == ["a", "b"]


def test_segments_are_sealed_by_size_and_a_full_disk_cuts_back_to_the_last_whole_record(tmp_path, monkeypatch) -> None:
    import errno
    import os

    from tourneylake.lake import segments

    monkeypatch.setattr(segments, "SEAL_BYTES", 300)
    lake = Lake(tmp_path).claim("sandbox")
    writer = segments.SegmentWriter(lake.root / "_raw", NIGHT, fsync=False)
    for player in ("a", "b", "c"):
        writer.add_body(player, player, "player_summary", {"player": player}, "json", "", b"x" * 200).result()
    assert len(list(writer.folder.iterdir())) == 3  # each past the seal size: a segment each
    write = os.write
    monkeypatch.setattr(
        os, "write", lambda fd, data: write(fd, bytes(data)[:50]) and (_ for _ in ()).throw(OSError(errno.ENOSPC, "full"))
    )
    with pytest.raises(OSError, match="full"):
        writer.add_body("d", "d", "player_summary", {"player": "d"}, "json", "", b"x" * 200).result()
    monkeypatch.setattr(os, "write", write)
    writer.add_body("e", "e", "player_summary", {"player": "e"}, "json", "", b"x" * 200).result()
    writer.close()
    forget_indexes()
    assert [r.token for r in lake.raw.refs(NIGHT, status=None)] == ["a", "b", "c", "e"]
    assert all(frames(p.read_bytes())[1] == p.stat().st_size for p in writer.folder.iterdir())  # no torn record left


def test_bodies_that_come_together_share_an_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group commit: the bodies queued while one fsync runs are made durable by the next one."""
    import os
    import threading

    lake = Lake(tmp_path).claim("sandbox")
    synced = []
    gate = threading.Event()
    fdatasync = os.fdatasync

    def slow(fd: int) -> None:
        synced.append(fd)
        gate.wait(5)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    first = lake.raw.write_soon(NIGHT, "player_summary", {"player": "first"}, b"{}", "json", FETCHED)
    while not synced:
        pass
    more = [lake.raw.write_soon(NIGHT, "player_summary", {"player": str(i)}, b"{}", "json", FETCHED) for i in range(20)]
    assert not any(f.done() for f in (first, *more))  # none is said kept before its fsync
    gate.set()
    for future in (first, *more):
        future.result()
    assert len(synced) == 2


def test_a_damaged_raw_file_is_named_and_kept(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    ref = lake.raw.settle(lake.raw.write(NIGHT, "player_summary", KEY, b"{}", "json", FETCHED), "ok")
    rewrite_body(ref, body_payload(ref)[:10])
    (ref,) = lake.raw.refs(NIGHT)
    with pytest.raises(LakeError, match=f"raw body {ref.location}"):
        lake.raw.read(NIGHT, "player_summary", KEY)
    assert ref.location.exists()


@pytest.mark.parametrize("field", ["Password", "Username", "password", "appkey", "api_token"])
def test_raw_key_refuses_credentials(tmp_path: Path, field: str) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    with pytest.raises(LakeError, match="credentials"):
        lake.raw.write(NIGHT, "player_summary", {**KEY, field: "secret"}, b"{}", "json", FETCHED)
    assert lake.raw.nights() == []


def _table(n: int, tag: str = "a") -> pa.Table:
    return pa.table({"k": pa.array([f"{tag}{i}" for i in range(n)]), "v": pa.array(range(n), pa.int64())})


def test_a_night_writer_replaces_the_night_atomically(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    with lake.tables.writer("t", NIGHT) as writer:
        writer.write(_table(3))
        assert lake.tables.nights("t") == []  # a reader never sees half a night
        writer.write(_table(2, "b"))
    assert writer.rows == 5 and lake.tables.nights("t") == [NIGHT]
    assert lake.tables.read_table("t", NIGHT).num_rows == 5
    # a second run of the night replaces, never appends
    assert lake.tables.write("t", NIGHT, _table(4, "c")) == 4
    table = lake.tables.read_table("t", NIGHT)
    assert sorted(table.column("k").to_pylist()) == ["c0", "c1", "c2", "c3"]
    assert table.column("snapshot_date").to_pylist() == [NIGHT] * 4
    # each a Delta commit of delta-rs's: the table created with the night, then the night replaced
    delta = DeltaTable(lake.tables.uri("t"))
    assert [h["operation"] for h in delta.history()] == ["WRITE", "WRITE"] and delta.version() == 1
    assert delta.to_pyarrow_table().num_rows == 4


def test_failed_writer_keeps_the_old_partition(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(3))
    before = sorted(Path(p).read_bytes() for p in lake.tables.files("t", NIGHT))
    with pytest.raises(RuntimeError, match="boom"):  # noqa: PT012 - the failure is inside a writer's block
        with lake.tables.writer("t", NIGHT) as writer:
            writer.write(_table(10, "new"))
            raise RuntimeError("boom")
    assert sorted(Path(p).read_bytes() for p in lake.tables.files("t", NIGHT)) == before
    assert lake.tables.read_table("t", NIGHT).num_rows == 3
    assert DeltaTable(lake.tables.uri("t")).version() == 0  # nothing committed


def test_a_night_delta_rs_refuses_fails_its_writer_in_one_line(tmp_path: Path) -> None:
    """delta-rs's writer fails (a value it cannot cast to the table's column): one line, at
    once (not a failure tried again), and the night stays as it was."""
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(3))
    with pytest.raises(LakeError, match=r"night 2019-12-10 could not be committed: .*Cast error") as caught:
        with lake.tables.writer("t", NIGHT) as writer:
            writer.write(pa.table({"k": ["x"], "v": ["not a number"]}))
    assert "\n" not in str(caught.value)
    assert sorted(lake.tables.read_table("t", NIGHT).column("k").to_pylist()) == ["a0", "a1", "a2"]


def test_a_commit_whose_answer_was_lost_is_not_made_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """delta-rs's commit lands but its caller hears a store's failure (an answer lost): the
    writer finds its commit in the table (the commit names its writer) and is done, without
    committing the night a second time."""
    import deltalake

    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(1))
    real = deltalake.write_deltalake

    def answer_lost(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)
        raise OSError("connection reset by peer")

    monkeypatch.setattr(deltalake, "write_deltalake", answer_lost)
    assert lake.tables.write("t", NIGHT, _table(2, "b")) == 2
    assert DeltaTable(lake.tables.uri("t")).version() == 1
    assert sorted(lake.tables.read_table("t", NIGHT).column("k").to_pylist()) == ["b0", "b1"]


def test_part_schemas_must_agree(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(1))
    with pytest.raises(LakeError):  # noqa: PT012 - the second write of the block is the one refused
        with lake.tables.writer("t", NIGHT) as writer:
            writer.write(_table(1))
            writer.write(pa.table({"other": ["x"]}))
    assert lake.tables.read_table("t", NIGHT).num_rows == 1


def test_snapshot_date_column_becomes_the_partition(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    data = _table(2).append_column("snapshot_date", pa.array([NIGHT, NIGHT], pa.date32()))
    lake.tables.write("t", NIGHT, data)
    assert "snapshot_date" not in pa.parquet.read_schema(lake.tables.files("t", NIGHT)[0]).names
    wrong = _table(1).append_column("snapshot_date", pa.array([date(2020, 1, 1)], pa.date32()))
    with pytest.raises(LakeError, match="another snapshot_date"):
        lake.tables.write("t", NIGHT, wrong)
    lake.tables.write("t", date(2019, 12, 11), _table(1, "z"))
    dataset = DeltaTable(lake.tables.uri("t")).to_pyarrow_dataset()  # any engine reads the night back from the log
    rows = duckdb.sql("SELECT snapshot_date, count(*) FROM dataset GROUP BY 1 ORDER BY 1").fetchall()
    del dataset
    assert rows == [(NIGHT, 2), (date(2019, 12, 11), 1)]


def test_a_night_without_rows_has_no_partition(tmp_path: Path) -> None:
    """An empty writer, or one of no rows, empties the night (a delete, or an overwrite of nothing)."""
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(2))
    lake.tables.write("t", date(2019, 12, 11), _table(1))
    with lake.tables.writer("t", NIGHT):
        pass
    assert lake.tables.nights("t") == [date(2019, 12, 11)] and lake.tables.files("t", NIGHT) == []
    lake.tables.write("t", date(2019, 12, 11), _table(0))
    assert lake.tables.nights("t") == [] and lake.tables.read_table("t").num_rows == 0
    assert DeltaTable(lake.tables.uri("t")).schema().to_arrow().names == ["k", "v", "snapshot_date"]  # the columns stay
    version = DeltaTable(lake.tables.uri("t")).version()
    lake.tables.drop("t", NIGHT)  # nothing to remove: no commit
    assert DeltaTable(lake.tables.uri("t")).version() == version


def test_a_shard_replaces_its_own_parts_and_a_night_of_shards_keeps_theirs_alone(tmp_path: Path) -> None:
    """Shard commits: ``a`` replaces its own parts, never those of ``a-b`` (a name it prefixes);
    the commit of a night made of shards keeps the shards it names as they are, drops every
    other part of the night (one written whole, a shard not named) and writes a shard anew."""
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("t", NIGHT, _table(1, "whole"))
    for shard, tag in (("a", "a"), ("a-b", "ab"), ("gone", "g"), ("a", "a2")):
        lake.tables.write("t", NIGHT, _table(2, tag), shard=shard)
    assert sorted(lake.tables.read_table("t", NIGHT).column("k").to_pylist()) == [
        "a20",
        "a21",
        "ab0",
        "ab1",
        "g0",
        "g1",
        "whole0",
    ]
    assert set(lake.tables.shard_parts("t", NIGHT)) == {None, "a", "a-b", "gone"}
    with pytest.raises(LakeError, match="names a shard it replaces"):
        with lake.tables.shard_writer("t", NIGHT, keep_shards=["a"]) as writer:
            writer.write(_table(1, "x"), shard="a")
    with lake.tables.shard_writer("t", NIGHT, keep_shards=["a"]) as writer:
        writer.write(_table(1, "ab"), shard="a-b")  # a-b written anew, with one row
    assert sorted(lake.tables.read_table("t", NIGHT).column("k").to_pylist()) == ["a20", "a21", "ab0"]
    assert set(lake.tables.shard_parts("t", NIGHT)) == {"a", "a-b"}
    version = DeltaTable(lake.tables.uri("t")).version()
    with lake.tables.shard_writer("t", NIGHT, keep_shards=["a", "a-b"]):
        pass  # nothing to replace: no commit
    assert DeltaTable(lake.tables.uri("t")).version() == version


def test_names_are_checked(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    with pytest.raises(LakeError):
        lake.tables.write("../escape", NIGHT, _table(1))
    with pytest.raises(LakeError):
        lake.raw.write(NIGHT, "a/b", {}, b"", "json", FETCHED)


def test_a_body_settled_by_another_process_is_settled_the_same(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    ref = lake.raw.write(NIGHT, "player_summary", KEY, b"{}", "json", FETCHED)
    first = lake.raw.settle(ref, "ok")  # say, the next run's settle_received
    assert lake.raw.settle(ref, "ok") == first  # the writer's own settle: no error
    assert [r.status for r in lake.raw.bodies(NIGHT, status=None)] == ["ok"]


def test_the_lake_lock_makes_processes_take_turns(tmp_path: Path) -> None:
    import subprocess
    import sys

    lake = Lake(tmp_path).claim("sandbox")
    mark = tmp_path / "holder-done"
    code = (
        "import time\nfrom pathlib import Path\nfrom tourneylake.lake.lake import Lake\n"
        f"with Lake({str(tmp_path)!r}).locks.hold('harvest'):\n"
        "    print('held', flush=True)\n    time.sleep(1)\n"
        f"    Path({str(mark)!r}).write_text('done')\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with lake.locks.hold("harvest"):
        assert mark.read_text() == "done"  # we got the lock only once the holder let it go
    assert holder.wait(timeout=30) == 0


def test_replaced_parts_stay_until_their_versions_expire(tmp_path: Path) -> None:
    # A replaced night's parts are an older version's (time travel) until expire_versions.
    lake = Lake(str(tmp_path)).claim("sandbox")
    assert lake.local and lake.root == tmp_path / "lake" and lake.filesystem is None
    lake.tables.write("t", "2026-11-20", pa.table({"n": [1, 2]}))
    lake.tables.write("t", "2026-11-20", pa.table({"n": [3]}))
    folder = tmp_path / "lake" / "t" / "snapshot_date=2026-11-20"
    assert len(list(folder.iterdir())) == 2
    older = DeltaTable(lake.tables.uri("t"))
    older.load_as_version(0)
    assert older.to_pyarrow_table().column("n").to_pylist() == [1, 2]
    assert lake.tables.expire(keep_days=7) == 0  # young: kept for time travel
    assert lake.tables.expire(keep_days=0) == 1
    assert [p.name for p in folder.iterdir()] == [Path(lake.tables.files("t", "2026-11-20")[0]).name]
    assert Lake(f"file://{tmp_path}").tables.read("t", "2026-11-20").column("n").to_pylist() == [3]


def test_what_killed_processes_left_in_tmp_is_swept_once_a_day_old(tmp_path: Path) -> None:
    lake = Lake(tmp_path).claim("sandbox")
    lake.tables.write("currencies", date(2026, 11, 20), pa.table({"code": ["USD"]}))
    tmp = lake.root / "_tmp"
    (tmp / "0a1b2c").mkdir(parents=True)  # a staged partition never swapped in
    (tmp / "0a1b2c" / "part-00000.parquet").write_bytes(b"PAR1")
    (tmp / "3d4e5f.old").mkdir()  # a replaced partition never deleted
    (tmp / "stray.tmp").write_bytes(b"x")
    assert sweep_tmp(lake.root) == 0 and len(list(tmp.iterdir())) == 3  # young: perhaps a live writer's
    assert sweep_tmp(lake.root, older_than_s=-1) == 3 and not list(tmp.iterdir())
    assert lake.tables.nights("currencies") == [date(2026, 11, 20)]  # nothing outside _tmp/
