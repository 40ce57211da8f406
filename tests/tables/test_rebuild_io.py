"""The rebuild's reading of raw bodies: ``raw._gunzip`` is ``gzip.decompress`` (result and
exception) on every input; ``raw_refs`` lists a night in name order; the GC pause of
``SummarySink.add_stored`` leaves the collector as it found it, and it reads a night's answers
a batch at a time."""

from __future__ import annotations

import gzip
from contextlib import ExitStack
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.helpers import DATA as TEST_DATA
from tourneylake.api import calls
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import OK, _gunzip
from tourneylake.lake.raw import status_of as _status_of
from tourneylake.tables import night_tables as from_raw
from tourneylake.tables.reference import InForce

DATA = b'{"resource": "player-summary", "body": "' + b"x" * 5000 + b'"}'
ONE = gzip.compress(DATA, mtime=0)  # the same bytes in every process: pytest-xdist compares the ids


def _outcome(fn, data: bytes) -> tuple[str, object]:
    try:
        return "ok", fn(data)
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize(
    "data",
    [
        ONE,
        ONE + gzip.compress(b"second member", mtime=0),
        ONE + b"\0\0\0\0",  # padding after a member
        ONE[:-3],  # cut short in the trailer
        ONE[:20],  # cut short in the data
        ONE[:-8] + b"\1\2\3\4" + ONE[-4:],  # wrong CRC
        ONE + b"garbage",
        b"not gzip at all",
        b"",
    ],
)
def test_gunzip_is_gzip_decompress(data: bytes) -> None:
    assert _outcome(_gunzip, data) == _outcome(gzip.decompress, data)


def test_a_nights_bodies_in_name_order_first_layout_files_and_segments_alike(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    folder = lake.root / "_raw" / "snapshot_date=2026-03-01" / "player-summary"
    folder.mkdir(parents=True)
    names = ["b.json.gz", "a.json.gz", "B.json.gz", "a.tok.unusable.json.gz", "_.json.gz", "a.json.gz.tmp", "c.json"]
    for name in names:
        (folder / name).write_bytes(b"")
    kept = lake.raw.write("2026-03-01", "player-summary", {"player": "x"}, b"{}", "json", 0)
    expected = sorted([*(p.name for p in folder.glob("*.json.gz")), kept.name])
    assert [ref.name for ref in lake.raw.refs("2026-03-01", status=None)] == expected
    assert [ref.name for ref in lake.raw.refs("2026-03-01")] == [n for n in expected if _status_of(n) == OK]
    assert [ref.name for ref in lake.raw.refs("2026-03-01", status="unusable")] == ["a.tok.unusable.json.gz"]
    assert [ref.name for ref in lake.raw.refs("2026-03-01", status="received")] == [kept.name]


def test_a_nights_stored_answers_are_read_a_batch_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild never holds a night's bodies all at once (20,000 summaries are ~300 MB): it
    reads at most a batch ahead of the normaliser, and every answer is still read."""
    lake = Lake(tmp_path).claim("sandbox")
    night = date(2019, 12, 10)
    body = (TEST_DATA / "recorded" / "player-summary.json").read_bytes()
    for i in range(7):
        key = {"network": "PokerStars", "player": f"player{i}"}
        lake.raw.settle(lake.raw.write(night, calls.PLAYER_SUMMARY, key, body, "json", datetime(2019, 12, 10, tzinfo=UTC)), OK)
    events: list[str] = []
    read, add = from_raw.read_raws, from_raw.SummarySink.add

    def reading(refs):
        for raw in read(refs):
            events.append("read")
            yield raw

    monkeypatch.setattr(from_raw, "read_raws", reading)
    monkeypatch.setattr(from_raw.SummarySink, "add", lambda self, *args: (events.append("add"), add(self, *args))[1])
    with ExitStack() as stack:
        sink = from_raw.SummarySink(lake, night, InForce(lake, night), stack, batch_size=3)
        stored = sink.add_stored()
    assert len(stored.done) == 7 and not stored.unusable
    ahead = [events[: i + 1].count("read") - events[: i + 1].count("add") for i in range(len(events))]
    assert events.count("read") == 7 and max(ahead) == 3
