"""The search ledger (``tourneylake.lake.ledger``): one writer, one reader, the catalogue's schema,
write-ahead announcements, runs that died, and the reconciliation arithmetic."""

from __future__ import annotations

import errno
import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import fsspec
import orjson
import pytest

from tourneylake.lake import cost_memo
from tourneylake.lake.cost_memo import SETTLED_NS, CostMemo
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import COLUMNS, Ledger, LedgerError, LedgerWriter, _run_bytes, unexplained_charges
from tourneylake.schemas import TABLES
from tourneylake.user_cache import user_cache

NIGHT = date(2026, 11, 20)


def row(**values) -> dict:
    base = {
        "called_at": datetime(2026, 11, 20, 3, tzinfo=UTC),
        "run_id": "r1",
        "resource": "player_summary",
        "cost": 1,
        "outcome": "ok",
        "attempt": 1,
    }
    return {**base, **values}


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path).claim("sandbox")


@pytest.fixture
def store_lake() -> Iterator[Lake]:
    """A lake on an object store (``memory://``, in-process): its ledger lines are PUTs, which
    the writer's own thread makes."""
    url = f"memory://tl-ledger-{uuid.uuid4().hex[:8]}/data"
    yield Lake(url).claim("sandbox")
    fsspec.filesystem("memory").rm(url.removeprefix("memory://").split("/")[0], recursive=True)


def run_lines(writer: LedgerWriter) -> bytes:
    assert writer.path is not None
    with _run_bytes(writer.path) as handle:
        return handle.read()


def test_the_schema_is_the_catalogues() -> None:
    assert ("snapshot_date", *COLUMNS) == tuple(name for name, _, _ in TABLES["search_ledger"].columns)


def test_rows_are_read_back_and_exported(lake: Lake) -> None:
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=100) as writer:
        writer.sent("player_summary", "k1", 1)
        writer.record("k1", **row(network="PokerStars", player="A", remaining_after=99))
        writer.sent("nlq", "k2", 1)
        writer.record("k2", **row(resource="nlq", question="sit and gos", remaining_after=98))
        assert writer.spent == 2 and writer.attempts == 2
        assert writer.path is not None and writer.path.name == "run-r1.open.jsonl"
    assert writer.path.name == "run-r1.jsonl"  # closed
    ledger = Ledger(lake)
    assert ledger.nights() == [NIGHT]
    assert [r["resource"] for r in ledger.entries(NIGHT)] == ["player_summary", "nlq"]
    assert ledger.spent(NIGHT) == 2 and ledger.spent(NIGHT, only="nlq") == 1 and ledger.spent(NIGHT, excluding="nlq") == 1
    table = ledger.table(NIGHT)
    assert table.num_rows == 2 and table.schema.names == list(COLUMNS)
    (run,) = ledger.runs(NIGHT)
    assert run.closed and run.remaining_before == 100 and run.unanswered == [] and ledger.dead_runs() == []


@pytest.mark.parametrize("where", ["local", "object store"])
def test_lines_are_written_in_the_order_asked_and_a_future_is_done_once_its_line_is_in(
    where: str, lake: Lake, store_lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a local disk the caller writes each line itself (one write to the page cache: a
    round trip through a thread cost each call more than the write), and its future is done as
    it is returned; on an object store (a PUT for the lines that came together) one thread of
    the writer's own writes them. Either way in order, and a ``sent_soon`` future is done only once its line is in."""
    writing_threads: set[str] = set()
    write, write_segment = LedgerWriter._write, LedgerWriter._write_segment

    def spied(self: LedgerWriter, line: dict) -> None:
        writing_threads.add(threading.current_thread().name)
        write(self, line)

    def spied_segment(self: LedgerWriter, lines: list[dict]) -> None:
        if lines[0]["kind"] != "closed":  # the closing line is written by close() itself
            writing_threads.add(threading.current_thread().name)
        write_segment(self, lines)

    monkeypatch.setattr(LedgerWriter, "_write", spied)
    monkeypatch.setattr(LedgerWriter, "_write_segment", spied_segment)
    local = where == "local"
    with LedgerWriter(lake if local else store_lake, NIGHT, "r1", remaining_before=100) as writer:
        for i in range(30):
            sent = writer.sent_soon("player_summary", f"k{i}", 1)
            assert sent.done() if local else sent.result(10) is None
            assert f'"call":"k{i}"'.encode() in run_lines(writer)
            writer.record_soon(f"k{i}", **row(remaining_after=99 - i))  # not waited for: close() does
        assert writer.spent == 30
    if local:
        assert writing_threads == {threading.current_thread().name}
    else:
        assert writing_threads and all(name.startswith("tourneylake-ledger") for name in writing_threads)
    lines = [orjson.loads(line) for line in run_lines(writer).splitlines()]
    assert [(line["kind"], line.get("call")) for line in lines[1:-1]] == [
        (kind, f"k{i}") for i in range(30) for kind in ("sent", "entry")
    ]
    ledger = Ledger(lake if local else store_lake)
    (run,) = ledger.runs(NIGHT)
    assert run.closed and ledger.spent(NIGHT) == 30


def test_after_a_ledger_write_fails_no_line_is_written_and_the_run_is_left_for_reconciliation(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = LedgerWriter._write

    def disk_full_at_k2(self: LedgerWriter, line: dict) -> None:
        if line.get("call") == "k2":
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, line)

    monkeypatch.setattr(LedgerWriter, "_write", disk_full_at_k2)
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=100)
    writer.sent("player_summary", "k1", 1)
    with pytest.raises(OSError, match="No space left"):
        writer.sent("player_summary", "k2", 1)
    with pytest.raises(LedgerError, match=r"could not be written .*No space left.*no call is paid for"):
        writer.sent_soon("player_summary", "k3", 1)
    with pytest.raises(LedgerError, match="could not be written"):
        writer.record("k1", **row())
    writer.close()
    (dead,) = Ledger(lake).dead_runs()  # unanswered calls: left open for the next run to reconcile
    assert dead.run_id == "r1" and [line["call"] for line in dead.unanswered] == ["k1"]  # the line that failed is not there


def test_a_ctrl_c_during_a_local_write_is_the_callers_and_later_lines_are_written(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C lands while the caller writes a line (the sync client, on the main thread): it
    is raised to the caller, whose call then never goes out; the ledger is not broken by it."""
    write = LedgerWriter._write
    interrupted = []

    def ctrl_c_once(self: LedgerWriter, line: dict) -> None:
        if line.get("call") == "k2" and not interrupted:
            interrupted.append(line)
            raise KeyboardInterrupt
        write(self, line)

    monkeypatch.setattr(LedgerWriter, "_write", ctrl_c_once)
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=100) as writer:
        writer.sent("player_summary", "k1", 1)
        writer.record("k1", **row(remaining_after=99))
        with pytest.raises(KeyboardInterrupt):
            writer.sent("player_summary", "k2", 1)
        writer.sent("player_summary", "k3", 1)
        writer.record("k3", **row(remaining_after=98))
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and run.unanswered == [] and [e["remaining_after"] for e in run.entries] == [99, 98]


def test_a_row_that_does_not_fit_is_refused(lake: Lake) -> None:
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=None) as writer:
        with pytest.raises(LedgerError, match="unknown columns \\['remaining_before'\\]"):
            writer.record(None, **row(remaining_before=5))
        with pytest.raises(LedgerError, match="missing \\['cost'\\]"):
            writer.record(None, **row(cost=None))


def test_a_live_run_is_not_dead_and_a_dead_one_is_found(lake: Lake) -> None:
    writer = LedgerWriter(lake, NIGHT, "alive", remaining_before=50)
    writer.sent("player_summary", "k1", 1)
    assert Ledger(lake).dead_runs() == []  # its writer holds the file
    writer._file.close()  # the process dies: the kernel drops the lock, nothing is renamed
    (dead,) = Ledger(lake).dead_runs()
    assert dead.run_id == "alive" and dead.remaining_before == 50 and len(dead.unanswered) == 1
    assert dead.uncertain == {"player_summary": 1}
    Ledger(lake).close_dead_run(dead, row(run_id="alive", resource="unattributed", outcome="reconciled_after_crash", attempt=0))
    assert Ledger(lake).dead_runs() == []
    assert [r["outcome"] for r in Ledger(lake).entries(NIGHT)] == ["reconciled_after_crash"]


def test_a_line_cut_by_a_kill_does_not_lose_the_rest(lake: Lake) -> None:
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=10) as writer:
        writer.record("k1", **row())
    path = next((Path(lake.root) / "_ledger").rglob("*.jsonl"))
    path.write_bytes(path.read_bytes() + b'{"kind": "entry", "cost": 1, "outc')
    assert Ledger(lake).spent(NIGHT) == 1


def test_a_dead_runs_reconciliation_after_a_cut_line_is_kept_whole(lake: Lake) -> None:
    writer = LedgerWriter(lake, NIGHT, "dying", remaining_before=50)
    writer.record("k0", **row(run_id="dying"))
    writer.sent("player_summary", "k1", 1)
    writer._file.write(b'{"kind": "entry", "call": "k1", "co')  # the kill cuts this line
    writer._file.close()
    (dead,) = Ledger(lake).dead_runs()
    Ledger(lake).close_dead_run(dead, row(run_id="dying", resource="unattributed", outcome="reconciled_after_crash", attempt=0))
    # Appended after the cut line, the row would have been joined to it and lost.
    assert [r["outcome"] for r in Ledger(lake).entries(NIGHT)] == ["ok", "reconciled_after_crash"]
    assert Ledger(lake).spent(NIGHT) == 2


def test_a_damaged_line_inside_a_ledger_file_is_one_line_naming_file_and_line(lake: Lake) -> None:
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=10) as writer:
        writer.record("k1", **row())
        writer.record("k2", **row())
    path = next((Path(lake.root) / "_ledger").rglob("*.jsonl"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"kind": "entry", garbage\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerError) as caught:
        Ledger(lake).spent(NIGHT)
    message = str(caught.value)
    assert f"ledger file {path} line 2 is damaged" in message and "\n" not in message
    assert path.read_bytes() == b"".join(lines)  # nothing rewritten or deleted


def test_lines_are_flushed_as_written(lake: Lake) -> None:
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=10)
    writer.record("k1", **row())
    kinds = [orjson.loads(line)["kind"] for line in writer.path.read_bytes().splitlines()]
    assert kinds == ["run", "entry"]  # on disk before close: a kill keeps it
    writer.close()


@pytest.mark.parametrize(
    ("before", "after", "recorded", "others", "uncertain", "expected"),
    [
        (100, 90, 9, 0, 1, 1),  # one charged call never answered
        (100, 90, 10, 0, 1, 0),  # the ledger explains it all
        (100, 8, 10, 0, 2, 2),  # another client drained the account: at most what could be ours
        (100, 90, 5, 5, 3, 0),  # another run of ours spent the rest
        (100, 120, 5, 0, 3, 0),  # the quota reset or the account was topped up: nothing known
        (None, 90, 5, 0, 3, 0),  # no reading before: nothing can be said
        (100, None, 5, 0, 3, 0),
        (100, 90, 5, 0, 0, 0),  # nothing uncertain: nothing booked
    ],
)
def test_unexplained_charges(before, after, recorded, others, uncertain, expected) -> None:
    assert unexplained_charges(before=before, after=after, recorded=recorded, others=others, uncertain_cost=uncertain) == expected


def test_a_run_that_ends_with_calls_unanswered_stays_open_for_the_next_run(lake: Lake) -> None:
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012 - a Ctrl-C (or SIGTERM) while a call is in flight
        with LedgerWriter(lake, NIGHT, "interrupted", remaining_before=40) as writer:
            writer.sent("player_summary", "k1", 1)
            writer.record("k1", **row(run_id="interrupted"))
            writer.sent("player_summary", "k2", 1)
            raise KeyboardInterrupt
    assert writer.path.name == "run-interrupted.open.jsonl"
    (dead,) = Ledger(lake).dead_runs()
    assert dead.run_id == "interrupted" and dead.uncertain == {"player_summary": 1} and dead.spent == 1


def test_a_starting_run_is_never_seen_unlocked(lake: Lake) -> None:
    writer = LedgerWriter(lake, NIGHT, "new", remaining_before=1)
    writer.sent("player_summary", "k", 1)
    night_dir = writer.path.parent
    assert [p.name for p in night_dir.iterdir()] == ["run-new.open.jsonl"]  # no staging name left behind
    assert Ledger(lake).dead_runs() == []
    writer.record("k", **row(run_id="new"))
    writer.close()


def test_runs_carry_their_accounts_name_and_readings_filter_by_it(lake: Lake) -> None:
    with LedgerWriter(lake, NIGHT, "a1", remaining_before=10, account="alice") as writer:
        writer.record("k1", **row(run_id="a1"))
    with LedgerWriter(lake, NIGHT, "b1", remaining_before=20, account="bob") as writer:
        writer.record("k2", **row(run_id="b1", cost=2))
    with LedgerWriter(lake, NIGHT, "n1", remaining_before=30) as writer:  # no account named: NULL
        writer.record("k3", **row(run_id="n1", cost=4))
    header = orjson.loads(next((Path(lake.root) / "_ledger").rglob("run-a1.jsonl")).read_bytes().splitlines()[0])
    assert header["account"] == "alice" and "password" not in str(header)
    ledger = Ledger(lake)
    assert [run.account for run in ledger.runs(NIGHT)] == ["alice", "bob", None]
    assert [run.run_id for run in ledger.runs(NIGHT, account="bob")] == ["b1"]
    assert ledger.spent(NIGHT) == 7 and ledger.spent(NIGHT, account="alice") == 1
    assert ledger.spend_per_night(account="bob") == {NIGHT: (2, 1)} and ledger.spend_per_night(account="carol") == {}
    since = datetime(2026, 11, 20, tzinfo=UTC)
    assert ledger.spent_since(since, except_run="a1") == 6 and ledger.spent_since(since, except_run="a1", account="bob") == 2
    # None is the default credentials' runs only: another account's spending is off another count
    assert ledger.spent_since(since, except_run="a1", account=None) == 4
    assert ledger.table(NIGHT).column("account").to_pylist() == ["alice", "bob", None]

    dying = LedgerWriter(lake, NIGHT, "b2", remaining_before=18, account="bob")
    dying.sent("player_summary", "k9", 1)
    dying._file.close()  # killed
    assert ledger.dead_runs(account="alice") == [] and [r.run_id for r in ledger.dead_runs(account="bob")] == ["b2"]
    (dead,) = ledger.dead_runs()
    ledger.close_dead_run(dead, row(run_id="b2", resource="unattributed", outcome="reconciled_after_crash", attempt=0))
    assert ledger.spent(NIGHT, account="bob") == 3  # the reconciliation is booked to the dead run's account


def _held_writer(monkeypatch: pytest.MonkeyPatch, fail_at: str | None = None, fails: int = 1_000_000) -> threading.Event:
    """The writer thread (an object-store lake's) held before each object it writes until the
    event is set; the object holding the row of call ``fail_at`` fails (a full disk, a store
    that does not answer), its first ``fails`` writes."""
    release = threading.Event()
    write, write_segment = LedgerWriter._write, LedgerWriter._write_segment
    failed = [0]

    def failing(lines: list[dict]) -> bool:
        if failed[0] < fails and any(line["kind"] == "entry" and line.get("call") == fail_at for line in lines):
            failed[0] += 1
            return True
        return False

    def held(self: LedgerWriter, line: dict) -> None:  # a local disk's: a line at a time
        assert release.wait(10)
        if failing([line]):
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, line)

    def held_segment(self: LedgerWriter, lines: list[dict]) -> None:
        assert release.wait(10)
        if failing(lines):
            raise OSError(errno.ENOSPC, "No space left on device")
        write_segment(self, lines)

    monkeypatch.setattr(LedgerWriter, "_write", held)
    monkeypatch.setattr(LedgerWriter, "_write_segment", held_segment)
    return release


def test_a_line_is_written_even_when_its_waiter_is_cancelled(store_lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A harvest task cancelled while it waits for its row (a sibling failed, Ctrl-C) stops
    waiting; the row of the call it paid for is still written, and the run closes whole."""
    import asyncio

    lake = store_lake
    release = _held_writer(monkeypatch)
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=100)

    async def harvest() -> None:
        sent = writer.sent_soon("player_summary", "k1", 1)
        row_written = asyncio.ensure_future(asyncio.wrap_future(writer.record_soon("k1", **row(remaining_after=99))))
        await asyncio.sleep(0.05)
        row_written.cancel()
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.wrap_future(sent)

    asyncio.run(harvest())
    writer.close()
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and run.unanswered == [] and Ledger(lake).spent(NIGHT) == 1


def test_a_row_that_cannot_be_written_leaves_the_run_open_for_reconciliation(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row of a paid call fails (a full disk): the run is not closed as if complete, so the
    next run finds the call without its row and books what the service charged for it."""
    release = _held_writer(monkeypatch, fail_at="k1")
    release.set()
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=100)
    writer.sent("player_summary", "k1", 1)
    with pytest.raises(OSError, match="No space left"):
        writer.record("k1", **row(remaining_after=99))
    writer.close()
    (dead,) = Ledger(lake).dead_runs()
    assert dead.run_id == "r1" and [line["call"] for line in dead.unanswered] == ["k1"] and dead.entries == []


def test_a_failed_write_stops_new_calls_and_every_paid_row_is_written_after_it(
    store_lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines written together share their object's fate: a write-ahead line in the object that
    failed, or queued while the ledger cannot be written, keeps its call from going out; the
    rows (calls paid for) are tried again until written, a later row is never refused, and the
    run closes whole: no lump reconciliation."""
    lake = store_lake
    release = _held_writer(monkeypatch, fail_at="k1", fails=2)
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=100)
    sent_k1 = writer.sent_soon("player_summary", "k1", 1)
    release.set()
    assert sent_k1.result(10) is None
    sent_k0 = writer.sent_soon("player_summary", "k0", 1)
    assert sent_k0.result(10) is None
    release.clear()
    row_k1 = writer.record_soon("k1", **row(remaining_after=99))  # its object fails twice
    sent_k2 = writer.sent_soon("player_summary", "k2", 1)  # in the same object
    release.set()
    with pytest.raises(OSError, match="No space left"):
        sent_k2.result(10)  # k2 does not go out ...
    release.clear()  # the row's second write fails too; its third waits here
    with pytest.raises(LedgerError, match="could not be written"):  # ... nor does a call while the ledger fails
        writer.sent_soon("player_summary", "k3", 1)
    row_k0 = writer.record_soon("k0", **row(remaining_after=98))  # a later row is taken
    release.set()
    assert row_k1.result(10) is None and row_k0.result(10) is None  # both written, in order
    writer.sent("player_summary", "k4", 1)  # the ledger is written again: calls go out again
    writer.record("k4", **row(remaining_after=97))
    writer.close()
    assert Ledger(lake).dead_runs() == []
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and run.unanswered == [] and [e["remaining_after"] for e in run.entries] == [99, 98, 97]
    assert b'"k2"' not in run_lines(writer) and b'"k3"' not in run_lines(writer)


def test_rows_that_cannot_be_written_for_long_leave_the_run_open_for_reconciliation(
    store_lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last resort: a row still unwritten long after its first failure (a store down for
    minutes) is given up and the run left open, so the next run books what the service charged."""
    from tourneylake.lake import ledger

    monkeypatch.setattr(ledger, "KEEP_ROWS_S", 0.3)
    lake = store_lake
    release = _held_writer(monkeypatch, fail_at="k1")
    release.set()
    writer = LedgerWriter(lake, NIGHT, "r1", remaining_before=100)
    writer.sent("player_summary", "k1", 1)
    with pytest.raises(OSError, match="No space left"):
        writer.record("k1", **row(remaining_after=99))
    writer.close()
    (dead,) = Ledger(lake).dead_runs()
    assert [line["call"] for line in dead.unanswered] == ["k1"] and dead.entries == []


@pytest.mark.parametrize("where", ["local", "store"])
def test_readers_of_run_files_tolerate_a_concurrent_close(
    where: str, lake: Lake, store_lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader lists a night's runs, then reads them, while another shard's writer closes its
    run (renames it): the run is read as it is now, once, never a FileNotFoundError."""
    from tourneylake.lake import ledger

    lake = lake if where == "local" else store_lake
    started = datetime.now(UTC)
    writer = LedgerWriter(lake, NIGHT, "other", remaining_before=100, account="right")
    writer.sent("player_summary", "k1", 1)
    writer.record("k1", **row(run_id="other", remaining_after=99, called_at=datetime.now(UTC)))
    closing = writer.close
    list_runs, read_run = Ledger._run_paths, ledger._read_run

    def listed_then_closed(self: Ledger, directory: object) -> list:
        found = list_runs(self, directory)
        closing()
        return found

    def closed_first(path: object, night: date) -> object:
        closing()
        return read_run(path, night)

    monkeypatch.setattr(Ledger, "_run_paths", listed_then_closed)
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and run.spent == 1
    monkeypatch.setattr(ledger, "_read_run", closed_first)
    writer = LedgerWriter(lake, NIGHT, "other2", remaining_before=100, account="right")
    writer.sent("player_summary", "k2", 1)
    writer.record("k2", **row(run_id="other2", remaining_after=98, called_at=datetime.now(UTC)))
    closing = writer.close
    assert Ledger(lake).spent_since(started, except_run="mine", account="right") == 2
    assert Ledger(lake).dead_runs() == []


def test_publishing_a_night_waits_for_another_publisher_of_it(lake: Lake) -> None:
    """Two runs publishing one night's `search_ledger` take turns (each reads and writes under
    the night's export lock), so a stale copy is never swapped in after a newer one."""
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=10) as writer:
        writer.record("k1", **row(run_id="r1", cost=3))
    done = threading.Event()
    with lake.locks.hold(f"ledger-export-{NIGHT.isoformat()}"):
        publisher = threading.Thread(target=lambda: (Ledger(lake).publish(NIGHT), done.set()))
        publisher.start()
        assert not done.wait(0.3)  # waits for the holder
    publisher.join(10)
    assert done.is_set() and lake.tables.read_table("search_ledger", NIGHT).column("cost").to_pylist() == [3]


def test_a_line_submitted_after_close_is_refused_not_lost_in_a_new_file(lake: Lake) -> None:
    writer = LedgerWriter(lake, NIGHT, "late", remaining_before=10)
    writer.record("k1", **row(run_id="late"))
    writer.close()
    with pytest.raises(LedgerError, match="closed"):
        writer.sent_soon("player_summary", "k2", 1)  # its call does not go out
    with pytest.raises(LedgerError, match="closed"):
        writer.record_soon("k3", **row(run_id="late"))
    (run,) = Ledger(lake).runs(NIGHT)
    assert run.closed and [e["cost"] for e in run.entries] == [1] and Ledger(lake).dead_runs() == []


# ------------------------------------------------------------------ the memo of closed runs' costs (status's bills)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's cache, this test's own (outside the lake): where the memo is kept."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run files whose lines are read for their costs, by name, as they are read."""
    from tourneylake.lake import ledger

    names: list[str] = []
    read = ledger._run_costs

    def spy(path: Path, night: date) -> object:
        names.append(path.name)
        return read(path, night)

    monkeypatch.setattr(ledger, "_run_costs", spy)
    return names


def settle() -> None:
    """Wait until the files just written have settled: only then is their reading kept."""
    time.sleep(SETTLED_NS / 1e9 + 0.05)


def bill(lake: Lake) -> int:
    """The night's bill as `tourneylake status` reads it (through the memo, kept after)."""
    from tourneylake.night.status import _bills

    return _bills(lake, [NIGHT])[NIGHT]


def entry_line(**values: object) -> bytes:
    return orjson.dumps({"kind": "entry", "call": "added", **row(**values)}) + b"\n"


def test_the_cost_memo_gives_a_fresh_readings_bills_and_a_closed_run_is_read_once(
    lake: Lake, cache: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with LedgerWriter(lake, NIGHT, "alice", remaining_before=100, account="alice") as writer:
        writer.record("k1", **row(run_id="alice"))
        writer.record("k2", **row(run_id="alice", resource="nlq", cost=2))
    with LedgerWriter(lake, NIGHT, "bob", remaining_before=100, account="bob") as writer:
        writer.record("k1", **row(run_id="bob", cost=3))
    live = LedgerWriter(lake, NIGHT, "live", remaining_before=100)  # still being written: never kept
    live.record("k1", **row(run_id="live", cost=5))
    asks: list[dict] = [{}, {"only": "nlq"}, {"excluding": "nlq"}, {"account": "alice"}, {"account": "bob", "only": "nlq"}]
    fresh = [Ledger(lake).spent(NIGHT, **ask) for ask in asks]
    assert fresh == [11, 2, 9, 3, 0]
    every = ["run-alice.jsonl", "run-bob.jsonl", "run-live.open.jsonl"]
    with monkeypatch.context() as within:  # files changed within the file system's clock tick: read, not kept
        within.setattr(cost_memo, "SETTLED_NS", 3600 * 10**9)
        parsed.clear()
        assert bill(lake) == bill(lake) == 11 and sorted(parsed) == sorted(every * 2)
    settle()
    parsed.clear()
    assert bill(lake) == 11 and sorted(parsed) == every
    kept = user_cache("ledger", lake.root) / "costs.json"
    assert kept.is_file() and kept.is_relative_to(cache)
    assert sorted(orjson.loads(kept.read_bytes())["runs"]) == [
        f"_ledger/snapshot_date={NIGHT}/run-{r}.jsonl" for r in ("alice", "bob")
    ]
    parsed.clear()
    memo = CostMemo.of(lake.root)
    assert [Ledger(lake).spent(NIGHT, memo=memo, **ask) for ask in asks] == fresh
    assert bill(lake) == 11 and parsed == ["run-live.open.jsonl"] * (len(asks) + 1)  # the open run alone is read again
    live.record("k2", **row(run_id="live", cost=1))
    live.close()
    settle()
    parsed.clear()
    assert bill(lake) == 12 and parsed == ["run-live.jsonl"]  # closed since: read once more, then kept
    parsed.clear()
    assert bill(lake) == 12 and parsed == []


def closed_run(lake: Lake, *costs: int) -> Path:
    """A closed run of the night with one entry per cost, settled: its file."""
    with LedgerWriter(lake, NIGHT, "r1", remaining_before=100) as writer:
        for number, cost in enumerate(costs):
            writer.record(f"k{number}", **row(cost=cost))
    settle()
    assert isinstance(writer.path, Path)
    return writer.path


def test_a_closed_run_changed_after_it_was_kept_is_read_again(lake: Lake, cache: Path, parsed: list[str]) -> None:
    path = closed_run(lake, 1, 1)
    assert bill(lake) == 2 and bill(lake) == 2 and parsed == ["run-r1.jsonl"]  # kept
    with open(path, "ab") as handle:  # a line appended
        handle.write(entry_line(cost=4))
    assert bill(lake) == 6 and Ledger(lake).spent(NIGHT) == 6
    settle()
    # Rewritten in place as a backup had it: the same size and modification time, another cost.
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"cost":4', b'"cost":7'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert bill(lake) == 9 and Ledger(lake).spent(NIGHT) == 9
    settle()
    # Replaced by another file (a restore from a backup copy).
    restored = path.with_name(".restored")
    restored.write_bytes(path.read_bytes().replace(b'"cost":7', b'"cost":5'))
    os.replace(restored, path)
    assert bill(lake) == 7 and Ledger(lake).spent(NIGHT) == 7


def test_a_closed_run_damaged_after_it_was_kept_fails_as_without_the_memo(lake: Lake, cache: Path, parsed: list[str]) -> None:
    path = closed_run(lake, 1, 1, 1)
    assert bill(lake) == 3
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"kind": "entry", garbage\n'
    path.write_bytes(b"".join(lines))
    settle()
    with pytest.raises(LedgerError) as fresh:
        Ledger(lake).spent(NIGHT)
    for _ in range(2):  # and again: a reading that failed is not kept
        parsed.clear()
        with pytest.raises(LedgerError) as through_memo:
            bill(lake)
        assert str(through_memo.value) == str(fresh.value) and f"{path} line 3 is damaged" in str(fresh.value)
        assert parsed == ["run-r1.jsonl"]
    assert orjson.loads((user_cache("ledger", lake.root) / "costs.json").read_bytes())["runs"] == {}


@pytest.mark.parametrize(
    "memo",
    [
        b"\x00garbage{",
        b"[]",
        b'{"runs": []}',
        b'{"runs": {"%s": {"file": "x", "costs": 3}}}',
        b'{"runs": {"%s": {"file": %s, "costs": [["nlq", "9"]]}}}',
    ],
    ids=["not json", "a list", "runs a list", "an entry of another shape", "a cost not a number"],
)
def test_a_corrupt_memo_is_ignored_and_written_again(lake: Lake, cache: Path, parsed: list[str], memo: bytes) -> None:
    path = closed_run(lake, 2, 3)
    kept = user_cache("ledger", lake.root) / "costs.json"
    kept.parent.mkdir(parents=True)
    found = path.stat()
    identity = [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino]
    key = path.relative_to(lake.root).as_posix()
    kept.write_bytes(memo.replace(b"%s", key.encode(), 1).replace(b"%s", orjson.dumps(identity), 1))
    assert bill(lake) == 5 and parsed == ["run-r1.jsonl"]
    assert bill(lake) == 5 and parsed == ["run-r1.jsonl"]  # kept once written again
    assert orjson.loads(kept.read_bytes())["runs"][key]["file"] == identity


def test_a_memo_that_cannot_be_written_is_ignored(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    not_a_folder = tmp_path_factory.mktemp("cache") / "a-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    closed_run(lake, 2)
    assert bill(lake) == 2 and bill(lake) == 2


def test_the_memos_of_lakes_no_longer_there_are_removed(lake: Lake, cache: Path, tmp_path: Path) -> None:
    gone, there = tmp_path / "gone", tmp_path / "there"
    there.mkdir()
    for folder in (gone, there):
        memo = user_cache("ledger", folder) / "costs.json"
        memo.parent.mkdir(parents=True)
        memo.write_bytes(orjson.dumps({"lake": str(folder), "runs": {}}))
    closed_run(lake, 2)
    settle()
    assert bill(lake) == 2
    assert (user_cache("ledger", lake.root) / "costs.json").is_file()
    assert not user_cache("ledger", gone).exists() and (user_cache("ledger", there) / "costs.json").is_file()
