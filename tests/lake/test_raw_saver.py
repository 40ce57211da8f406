"""The raw saver (:mod:`tourneylake.lake.raw_saver`): a harvest's paid bodies saved by a second process.

Each test drives a real saver process over its real pipes, from a real event loop, into a real
lake: the record it writes holds the file the harvest would have written; a body is acknowledged
only once it is on disk; a saver killed (or never answering) leaves nothing unsaved, the harvest
saving the rest itself under the same tokens; a body the saver cannot write fails with the harvest's own
error; a harvest that dies with bodies in the pipe leaves them saved; the saver's environment and
command line hold no secret; and a whole sandbox night survives its saver being killed mid-way.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import psutil
import pytest

from tests.helpers import body_payload, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.api import ReceivedBody, calls
from tourneylake.api.client import _PoolSaver
from tourneylake.errors import LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.raw import OK, RECEIVED, raw_file_bytes
from tourneylake.lake.raw_answers import RawAnswers
from tourneylake.lake.raw_saver import RAW_SAVER_ENV, SAVER_MIN_CALLS, RawSaver, saver_wanted
from tourneylake.night.harvest import harvest_players, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.runtime.pipes import frame, worker_env
from tourneylake.sandbox import running_sandbox

NIGHT = date(2026, 11, 20)
FETCHED = datetime(2026, 11, 20, 3, 4, 5, 678901, tzinfo=UTC)


def _received(player: str, body: bytes = b'{"Response": {"success": true}}', fmt: str = "json") -> ReceivedBody:
    return ReceivedBody(calls.player_summary("PokerStars", player, "Class:SNG", "sng"), body, fmt, FETCHED)


def _savers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if "tourneylake.lake.raw_saver" in " ".join(p.cmdline())]


def _no_saver_left() -> bool:
    psutil.wait_procs(_savers(), timeout=30)
    return not _savers()


def _files(lake: Lake) -> list[Path]:
    return sorted(p for p in (lake.root / "_raw").rglob("*") if p.is_file())


def _kept(lake: Lake) -> list[str]:
    """The players whose bodies the night holds, one each, whatever their status."""
    return sorted(ref.key["player"] for ref in lake.raw.refs(NIGHT, status=None))


def test_the_saver_keeps_the_very_file_the_harvest_would_and_names_it_by_its_status(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    bodies = {"alice": b'{"Response": {"success": true, "n": "\xc3\xa9"}}', "bob": b"\xff\xfe not UTF-8", "carol": b"<x/>"}

    async def night() -> None:
        saver = RawSaver(lake, NIGHT)
        try:
            settles = [await saver.save(_received(name, body)) for name, body in bodies.items()]
            assert saver.pid is not None and saver.pid != os.getpid()
            received = list(lake.raw.bodies(NIGHT, status=None))  # acknowledged: on disk before any status
            assert len(received) == 3 and {raw.status for raw in received} == {RECEIVED}
            assert len({raw.ref.location for raw in received}) == 1  # the saver's one segment
            for raw in received:
                assert body_payload(raw.ref) == raw_file_bytes(
                    raw.resource, raw.key, raw.fmt, FETCHED.isoformat(), "2026-11-20", raw.body
                )
            await settles[0]("ok")
            await settles[1]("unusable")
            await settles[2]("refused-101024")
        finally:
            await saver.aclose()

    asyncio.run(night())
    by_player = {raw.key["player"]: raw for raw in lake.raw.bodies(NIGHT, status=None)}
    assert {k: v.status for k, v in by_player.items()} == {"alice": OK, "bob": "unusable", "carol": "refused-101024"}
    assert {k: v.body for k, v in by_player.items()} == bodies
    assert by_player["alice"].fetched_at == FETCHED and len(_files(lake)) == 1
    assert lake.raw.read(NIGHT, calls.PLAYER_SUMMARY, dict(_received("alice").call.key)).body == bodies["alice"]
    assert _no_saver_left()


def test_a_killed_saver_leaves_nothing_unsaved_and_nothing_twice(tmp_path: Path) -> None:
    """Bodies the saver held unanswered when it died are saved by the harvest, under the tokens
    it chose; so is every later body and status."""
    lake = Lake(tmp_path)

    async def night() -> None:
        saver = RawSaver(lake, NIGHT)
        try:
            first = [await saver.save(_received(f"p{i}")) for i in range(3)]
            assert saver.pid is not None
            os.kill(saver.pid, signal.SIGSTOP)  # these five wait in the pipe, unanswered
            held = [asyncio.ensure_future(saver.save(_received(f"q{i}"))) for i in range(5)]
            await asyncio.sleep(0.3)
            assert not any(t.done() for t in held)
            os.kill(saver.pid, signal.SIGKILL)
            settles = first + list(await asyncio.wait_for(asyncio.gather(*held), 30))
            settles.append(await saver.save(_received("after")))
            await asyncio.gather(*(settle("ok") for settle in settles))
        finally:
            await saver.aclose()

    asyncio.run(night())
    players = ["after", "p0", "p1", "p2", *(f"q{i}" for i in range(5))]
    assert _kept(lake) == players and sorted(raw.key["player"] for raw in lake.raw.bodies(NIGHT)) == players  # all accepted
    assert _no_saver_left()


def _save_four(lake: Lake, saver: RawSaver) -> None:
    """Four bodies saved and named by their status through ``saver``, then closed."""

    async def night() -> None:
        try:
            settles = await asyncio.gather(*(saver.save(_received(f"p{i}")) for i in range(4)))
            await asyncio.gather(*(settle("ok") for settle in settles))
        finally:
            await asyncio.wait_for(saver.aclose(), 60)

    asyncio.run(night())


def _saved_once(lake: Lake) -> bool:
    """p0..p3 each saved, named ``ok``, once."""
    return sorted(raw.key["player"] for raw in lake.raw.bodies(NIGHT)) == ["p0", "p1", "p2", "p3"] == _kept(lake)


@pytest.mark.parametrize("failure", [OSError(24, "Too many open files"), ValueError("bad file descriptor count")])
def test_a_saver_that_cannot_start_leaves_every_save_to_the_harvest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def no_process(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr("tourneylake.lake.raw_saver.subprocess.Popen", no_process)
    lake = Lake(tmp_path)
    saver = RawSaver(lake, NIGHT)
    assert saver.pid is None
    _save_four(lake, saver)
    assert _saved_once(lake)


def test_a_saver_whose_pipes_cannot_be_joined_is_stopped_and_leaves_every_save_to_the_harvest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no pipes tonight")

    monkeypatch.setattr(asyncio.get_event_loop_policy().new_event_loop().__class__, "connect_write_pipe", refused)
    lake = Lake(tmp_path)
    fds = len(os.listdir("/proc/self/fd"))
    saver = RawSaver(lake, NIGHT)
    _save_four(lake, saver)
    assert _saved_once(lake)
    assert saver.pid is not None and not psutil.pid_exists(saver.pid)  # ended and reaped
    assert len(os.listdir("/proc/self/fd")) <= fds  # its pipes closed


# A stand-in for the saver: reads its first message's length, then answers with ``{}`` and
# reads on without a word until its input ends, then lingers (only a kill ends it early).
_STAND_IN = "import sys, time; sys.stdin.buffer.read(4); sys.stdout.buffer.write({}); sys.stdout.flush(); sys.stdin.buffer.read(); time.sleep(60)"


@pytest.mark.parametrize(
    "answer",
    [
        b"\x03\x00\x00\x00\xc1\xc1\xc1",  # a frame that is not msgpack
        b"\xff\xff\xff\x7f",  # a frame said to be 2 GB long
        b"\x03\x00\x00\x00\x93\x01\x02",  # msgpack, but no answer: [1, 2, ...] cut short
        b"\x04\x00\x00\x00\x93\x01\xc0\xc0",  # a message of three, not [id, failed]
    ],
    ids=["not-msgpack", "huge", "torn", "not-an-answer"],
)
def test_a_saver_answering_garbage_is_stopped_and_the_harvest_saves_everything_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: bytes
) -> None:
    monkeypatch.setattr("tourneylake.lake.raw_saver._command", lambda *a: [sys.executable, "-c", _STAND_IN.format(answer)])
    lake = Lake(tmp_path)
    saver = RawSaver(lake, NIGHT)
    _save_four(lake, saver)
    assert _saved_once(lake)
    assert saver.pid is not None and not psutil.pid_exists(saver.pid)


def test_a_silent_saver_is_stopped_at_close_and_the_harvest_saves_everything_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tourneylake.lake.raw_saver._command", lambda *a: [sys.executable, "-c", _STAND_IN.format(b"")])
    monkeypatch.setattr("tourneylake.lake.raw_saver._CLOSE_TIMEOUT_S", 1.0)
    lake = Lake(tmp_path)

    async def night() -> None:
        saver = RawSaver(lake, NIGHT)
        saves = [asyncio.ensure_future(saver.save(_received(f"p{i}"))) for i in range(4)]
        await asyncio.sleep(0.5)
        assert not any(s.done() for s in saves) and not _kept(lake)  # unanswered, so not yet the caller's
        await asyncio.wait_for(saver.aclose(), 60)  # its input closed, no end in 1 s: killed, then saved here
        assert len(_kept(lake)) == 4  # on disk once the saver is closed
        await asyncio.wait_for(asyncio.gather(*saves), 10)
        assert saver.pid is not None and not psutil.pid_exists(saver.pid)

    asyncio.run(night())
    assert _kept(lake) == ["p0", "p1", "p2", "p3"]


@pytest.mark.parametrize("saver_kind", ["threads", "fallback"])
def test_a_body_is_saved_even_when_its_call_is_cancelled_while_it_waits_for_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saver_kind: str
) -> None:
    """A cancelled call (a sibling failed, Ctrl-C) stops waiting; its paid body is saved all
    the same, though it was still waiting for a thread when the call was cancelled."""
    lake = Lake(tmp_path)
    gate = threading.Event()
    write = RawAnswers.write

    def slow_first(self: RawAnswers, night: date, resource: str, key: dict, *args: object, **kwargs: object):
        if key["player"] == "first":
            assert gate.wait(10)
        return write(self, night, resource, key, *args, **kwargs)

    monkeypatch.setattr(RawAnswers, "write", slow_first)

    def make() -> object:
        if saver_kind == "threads":  # the saves on the harvest's threads (TOURNEYLAKE_RAW_SAVER=thread)

            def on_body(received: ReceivedBody) -> None:
                call = received.call
                lake.raw.write(NIGHT, call.resource, call.key, received.body, received.format, received.fetched_at)

            return _PoolSaver(on_body, 1)
        monkeypatch.setattr("tourneylake.lake.raw_saver._THREADS", 1)
        monkeypatch.setattr("tourneylake.lake.raw_saver.subprocess.Popen", _no_process)  # the harvest saves itself
        return RawSaver(lake, NIGHT)

    async def night() -> None:
        saver = make()
        first = asyncio.ensure_future(saver.save(_received("first")))
        second = asyncio.ensure_future(saver.save(_received("second")))  # queued behind the first
        await asyncio.sleep(0.2)
        second.cancel()
        await asyncio.sleep(0.1)
        gate.set()
        await asyncio.wait_for(first, 10)
        await asyncio.wait_for(saver.aclose(), 30)
        assert second.cancelled(), second

    asyncio.run(night())
    assert sorted(raw.key["player"] for raw in lake.raw.bodies(NIGHT, status=None)) == ["first", "second"]


def _no_process(*args: object, **kwargs: object) -> None:
    raise OSError(24, "Too many open files")


def test_a_body_the_saver_cannot_write_fails_with_the_harvests_own_error(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    blocked = lake.root / "_raw" / "snapshot_date=2026-11-20"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the folder should be")
    with pytest.raises(OSError) as in_process:
        lake.raw.write(NIGHT, calls.PLAYER_SUMMARY, _received("x").call.key, b"{}", "json", FETCHED)

    async def night() -> None:
        saver = RawSaver(lake, NIGHT)
        try:
            with pytest.raises(type(in_process.value)):
                await saver.save(_received("x"))
            assert saver.pid is not None and psutil.pid_exists(saver.pid)  # the saver lives on
            with pytest.raises(LakeError, match="credentials"):  # refused before anything is sent
                await saver.save(
                    ReceivedBody(
                        calls.Call(calls.PLAYER_SUMMARY, "GET", "x", key={"password": "hunter2"}), b"{}", "json", FETCHED
                    )
                )
        finally:
            await saver.aclose()

    asyncio.run(night())
    assert blocked.read_text() == "a file where the folder should be"
    assert _no_saver_left()


def test_a_harvest_gone_with_bodies_in_the_pipe_leaves_every_whole_one_saved(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    messages = b"".join(
        frame(["save", i, f"t{i}", calls.PLAYER_SUMMARY, {"player": f"p{i}"}, "json", FETCHED.isoformat(), "2026-11-20", b"{}"])
        for i in range(4)
    )
    torn = frame(["save", 9, "torn", calls.PLAYER_SUMMARY, {}, "json", "", "", b"{}"])[:-3]
    saver = subprocess.Popen(
        [sys.executable, "-m", "tourneylake.lake.raw_saver", str(tmp_path), "2026-11-20", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=worker_env(),
    )
    saver.communicate(messages + torn, timeout=30)  # the harvest's end of the pipe closes mid-frame
    assert saver.returncode == 0
    refs = lake.raw.refs(NIGHT, status=RECEIVED)  # each whole one kept, for the next run to name
    assert [(r.token, r.key) for r in sorted(refs, key=lambda r: r.token)] == [(f"t{i}", {"player": f"p{i}"}) for i in range(4)]


def test_the_saver_holds_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOURNEYLAKE_PASSWORD", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter4")
    lake = Lake(tmp_path)

    async def night() -> bytes:
        saver = RawSaver(lake, NIGHT)
        try:
            await saver.save(_received("x"))
            assert saver.pid is not None
            return Path(f"/proc/{saver.pid}/environ").read_bytes() + Path(f"/proc/{saver.pid}/cmdline").read_bytes()
        finally:
            await saver.aclose()

    seen = asyncio.run(night())
    assert b"hunter" not in seen and b"PATH=" in seen


def test_where_the_saver_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RAW_SAVER_ENV, raising=False)
    assert saver_wanted(Lake(tmp_path)) and saver_wanted(Lake(tmp_path), SAVER_MIN_CALLS)
    assert not saver_wanted(Lake(tmp_path), SAVER_MIN_CALLS - 1)  # a small night: its own threads
    assert not saver_wanted(Lake("memory://tourneylake-saver-test"))  # a store in this process's memory
    monkeypatch.setenv(RAW_SAVER_ENV, "process")
    assert saver_wanted(Lake(tmp_path), 1)
    monkeypatch.setenv(RAW_SAVER_ENV, "thread")
    assert not saver_wanted(Lake(tmp_path))


def test_a_night_survives_its_saver_killed_midway_and_pays_for_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RAW_SAVER_ENV, raising=False)
    saved, killed = [], []
    real_save = RawSaver.save

    async def save_then_kill(self: RawSaver, received: ReceivedBody):
        settle = await real_save(self, received)
        saved.append(received.call.key["player"])
        if len(saved) == 25 and self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            killed.append(self.pid)
        return settle

    monkeypatch.setattr(RawSaver, "save", save_then_kill)
    with running_sandbox(seed=44, today=NIGHT, players=60) as sandbox:
        settings = sandbox_settings(sandbox, tmp_path, concurrency=8, tables_worker="off")
        players = sandbox.world.roster(40)
        write_watchlist(settings, "players:\n" + "\n".join(player_line(n, p) for n, p in players) + "\n")
        before = remaining(settings)
        session = Session.open(settings, settings.base_url, NIGHT)
        refresh_metadata(session)
        outcome = harvest_players(session, load_watchlist(settings.watchlist), batch_size=16)
        assert killed  # the saver died a third of the way in
        assert outcome.fetched == 40 and not outcome.failed
        assert before - remaining(settings) == 40  # each player paid once
        lake = Lake(settings.data_dir)
        assert not lake.raw.refs(NIGHT, status=RECEIVED)  # every body named by its status
        answers = list(lake.raw.bodies(NIGHT, calls.PLAYER_SUMMARY))
        assert sorted(raw.key["player"] for raw in answers) == sorted(p for _, p in players)
        again = harvest_players(
            Session.open(settings, settings.base_url, NIGHT), load_watchlist(settings.watchlist), batch_size=16
        )
        assert again.fetched == 0 and before - remaining(settings) == 40
    assert _no_saver_left()
