"""Shared pieces of the benchmark harness: the sandbox in its own process, settings, the
watchlist, the warm-up pass and one timed harvest of ours.

The sandbox always runs as a separate process (``tourneylake sandbox`` on a free loopback
port), started and stopped by pid, so its CPU work never shares our GIL. Its per-player summary
cache is warmed with one untimed pass before anything is timed, so what we time is the client
side (ours or dlt's) against the same warm server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
SEED = 7
TODAY = date(2026, 3, 2)
APPNAME = "demo"
APPKEY = "sandboxkey2026"
USERNAME = "analyst@example.com"
PASSWORD = "correct-horse-battery"
CONCURRENCY = 4


def tourneylake_exe() -> list[str]:
    exe = Path(sys.executable).with_name("tourneylake")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "tourneylake.pipelines.cli"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen[Any] | None) -> None:
    """Stop a server process this harness started, by its pid: SIGTERM, then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)


def sandbox_bodies(players: int) -> tuple[list[tuple[str, str, bytes]], Any]:
    """``players`` sandbox summaries as served (network, player, body), and the night's
    reference data in force (rates and metadata types) the normaliser needs."""
    import httpx

    names = roster(players)
    with SandboxProcess(players, 0.0) as sandbox, scratch() as tmp:
        with httpx.Client(base_url=sandbox.base_url, headers=headers("json"), timeout=60) as client:
            bodies = [(n, p, client.get(summary_path(n, p)).content) for n, p in names]
        in_force = prepare_night(sandbox.base_url, tmp / "d").in_force()
        _ = in_force.rates, in_force.statistic_types, in_force.series_types  # read (lazily) before the lake goes
        return bodies, in_force


class SandboxProcess:
    """``tourneylake sandbox`` in a child process on 127.0.0.1; killed by pid on exit."""

    def __init__(
        self, players: int, latency_ms: float, *, seed: int = SEED, today: date = TODAY, log: Path | None = None
    ) -> None:
        self.players = players
        self.latency_ms = latency_ms
        self.seed = seed
        self.today = today
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = log

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> SandboxProcess:
        cmd = [
            *tourneylake_exe(),
            "sandbox",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--seed",
            str(self.seed),
            "--players",
            str(self.players),
            "--latency-ms",
            str(self.latency_ms),
            "--today",
            self.today.isoformat(),
        ]
        out = open(self._log, "ab") if self._log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the sandbox process exited with {self.proc.returncode}")
            try:
                r = httpx.get(f"{self.base_url}/api/{APPNAME}/metadata/countries", headers=headers(), timeout=2.0)
                if r.status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the sandbox process did not answer in time")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def cpu_seconds(self) -> float | None:
        """User+system CPU of the server process so far (Linux /proc)."""
        if self.proc is None:
            return None
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            return (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            return None

    def __enter__(self) -> SandboxProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def headers(fmt: str = "json") -> dict[str, str]:
    from tourneylake.api import encode_password

    return {
        "Accept": "application/json" if fmt == "json" else "application/xml",
        "User-Agent": "tourneylake-benchmarks/1",
        "Username": USERNAME,
        "Password": encode_password(PASSWORD, APPKEY),
    }


def roster(players: int, seed: int = SEED) -> list[tuple[str, str]]:
    from tourneylake.sandbox import World

    return World(seed, players, TODAY).roster(players)


def summary_path(network: str, player: str) -> str:
    from tourneylake.api import calls

    return f"/api/{APPNAME}/" + calls.player_summary(network, player).path


def warm(sandbox: SandboxProcess, players: list[tuple[str, str]], fmt: str = "json", parallel: int = 16) -> float:
    """One untimed pass over every summary so the server's synthetic-data generation (~5 ms
    of CPU per player, cached after) is not what the timed runs measure. Returns seconds."""

    async def go() -> None:
        limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
        async with httpx.AsyncClient(base_url=sandbox.base_url, headers=headers(fmt), limits=limits, timeout=60) as client:
            queue = list(players)

            async def worker() -> None:
                while queue:
                    network, player = queue.pop()
                    r = await client.get(summary_path(network, player))
                    r.raise_for_status()

            await asyncio.gather(*(worker() for _ in range(parallel)))

    t0 = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t0


def settings_for(base_url: str, data_dir: Path, concurrency: int = CONCURRENCY, fmt: str = "json") -> Any:
    from tourneylake.config import Settings

    return Settings(
        base_url=base_url,
        appname=APPNAME,
        appkey=APPKEY,
        username=USERNAME,
        password=PASSWORD,
        data_dir=data_dir,
        watchlist=data_dir / "watchlist.yaml",
        concurrency=concurrency,
        format=fmt,
    )


def watchlist_for(players: list[tuple[str, str]]) -> Any:
    from tourneylake.night.watchlist import parse_watchlist

    lines = ["players:"]
    for network, name in players:
        lines.append(f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}}}")
    return parse_watchlist("\n".join(lines) + "\n", "<benchmark>")


@dataclass
class HarvestRun:
    seconds: float
    fetched: int
    rows: dict[str, int]
    data_dir: Path


def prepare_night(base_url: str, data_dir: Path, concurrency: int = CONCURRENCY, fmt: str = "json") -> Any:
    """A session over a fresh data directory with what a night makes before its harvest (the
    nightly job's first steps: countries, metadata, news) already in the lake. The harvest then
    takes its searches-left reading from the countries answer (a free answer seconds old), as it
    does in a night."""
    from tourneylake.night.harvest import refresh_free_resource, refresh_metadata
    from tourneylake.night.session import Session

    settings = settings_for(base_url, data_dir, concurrency, fmt)
    session = Session.open(settings, base_url, TODAY)
    refresh_free_resource(session, "countries")
    refresh_metadata(session)
    refresh_free_resource(session, "whats_new")
    return session


def harvest_once(
    base_url: str, players: list[tuple[str, str]], data_dir: Path, concurrency: int = CONCURRENCY, fmt: str = "json"
) -> HarvestRun:
    """Time :func:`tourneylake.night.harvest.harvest_players` (fetch, raw write, parse, normalise,
    Parquet parts, ledger) over a fresh data directory; metadata is fetched before the clock."""
    from tourneylake.night.harvest import harvest_players

    night = prepare_night(base_url, data_dir, concurrency, fmt)
    watchlist = watchlist_for(players)
    t0 = time.perf_counter()
    outcome = harvest_players(night, watchlist)
    seconds = time.perf_counter() - t0
    if outcome.failed or outcome.fetched != len(players):
        raise RuntimeError(f"harvest incomplete: fetched {outcome.fetched}/{len(players)}, failed {outcome.failed[:3]}")
    return HarvestRun(seconds, outcome.fetched, outcome.rows, data_dir)


@contextlib.contextmanager
def scratch(prefix: str = "tourneylake-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------- the bench server


NIGHT = TODAY - timedelta(days=1)  # the night the bench server's answers describe


class BenchServer:
    """:mod:`benchmarks.bench_server` in a child process: precomputed answers, latency by timer.

    Renders ``players`` summaries (``distinct`` of them through the sandbox) before it listens;
    ``latency_ms`` can be changed between runs with :meth:`set_latency`."""

    #: The server's module (``python -m``): it prints ``listening <url> ...`` once ready.
    MODULE = "benchmarks.bench_server"

    def __init__(
        self, players: int, latency_ms: float, *, distinct: int = 2000, log: Path | None = None, accounts: int = 0
    ) -> None:
        self.players = players
        self.accounts = accounts
        self.distinct = min(distinct, players)
        self.latency_ms = latency_ms
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.banner = ""
        self._log = log

    def start(self, timeout: float = 600.0) -> BenchServer:
        cmd = [
            sys.executable,
            "-m",
            self.MODULE,
            "--players",
            str(self.players),
            "--distinct",
            str(self.distinct),
            "--latency-ms",
            str(self.latency_ms),
            "--today",
            TODAY.isoformat(),
            "--seed",
            str(SEED),
            "--accounts",
            str(self.accounts),
        ]
        err = open(self._log, "ab") if self._log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT, start_new_session=True
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            if line.startswith("listening "):
                self.banner = line.strip()
                self.base_url = line.split()[1]
                return self
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"the bench server exited with {self.proc.returncode}")
        self.stop()
        raise RuntimeError("the bench server did not start in time")

    def control(self, what: str, **params: Any) -> dict[str, Any]:
        r = httpx.get(f"{self.base_url}/_bench/{what}", params=params, timeout=10)
        r.raise_for_status()
        return orjson.loads(r.content)

    def reset(self) -> None:
        self.control("reset")

    def set_latency(self, ms: float) -> None:
        self.control("latency", ms=ms)
        self.latency_ms = ms

    def stats(self) -> dict[str, Any]:
        return self.control("stats")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc)

    def __enter__(self) -> BenchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Measured:
    """A child process measured from spawn to exit: wall seconds, CPU (its descendants' included
    once they are reaped) and peak RSS (``ru_maxrss`` from ``wait4``: the high-water mark of the
    child, or of its largest reaped descendant; its floor is this process's RSS at the spawn,
    ~100 MB, well below what is measured), and the sampled peak of the whole process tree."""

    seconds: float
    user_s: float
    sys_s: float
    peak_rss_mb: float
    returncode: int
    started_at: float  # time.time() at the spawn
    ended_at: float
    stdout: str
    stderr: str
    # The most memory the child and its descendants held at once (sampled every ~50 ms: a
    # harvest with its tables worker is two processes; ``ru_maxrss`` sees one at a time), or
    # the largest of their own peaks (``VmHWM``) if more. Not ``ru_maxrss``: Linux counts in it
    # the parent's RSS at the fork, so a benchmark process holding gigabytes (a year's in-process
    # nights) would report them as the child's.
    tree_peak_rss_mb: float = 0.0
    # The share of the machine's CPU time the hypervisor gave to others while the child ran
    # (``steal`` in /proc/stat), in percent; None where the kernel does not say. A run that
    # uses both cores loses more wall time to it than one that uses one (see RESULTS.md).
    steal_pct: float | None = None
    # Seconds from the spawn until ``mark`` (see :func:`measure`) first appeared in its output.
    marked_s: float | None = None
    # The CPU seconds (user + system) of each kind of process in the tree (:func:`process_kind`),
    # as last sampled (every ~50 ms: a process's last ~50 ms may be missed): which part grew.
    cpu_by_kind: dict[str, float] = field(default_factory=dict)


def cpu_jiffies() -> tuple[int, int] | None:
    """(steal, total) CPU time of the whole machine so far, from /proc/stat (Linux)."""
    try:
        with open("/proc/stat", "rb") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    values = [int(f) for f in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return values[7], sum(values)


def steal_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100 * (after[0] - before[0]) / (after[1] - before[1]), 1)


def process_kind(cmdline: list[str]) -> str:
    """What a process of a measured tree is, for its CPU: the module it runs (``-m``), else its
    script's or program's name (``dbt``, ``tail``)."""
    if "-m" in cmdline[:-1]:
        return cmdline[cmdline.index("-m") + 1]
    if len(cmdline) > 1 and Path(cmdline[0]).name.startswith("python") and not cmdline[1].startswith("-"):
        return Path(cmdline[1]).name
    return Path(cmdline[0]).name if cmdline else "?"


def _tree_memory_mb(pid: int, cpu: dict[int, tuple[str, float]] | None = None) -> tuple[float, float]:
    """The RSS of ``pid`` and its descendants now, summed, and the largest high-water mark
    (``VmHWM``) among them: a process's own peak, even between two samples. With ``cpu``, each
    one's kind and CPU seconds so far are noted there by process id."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0, 0.0
    total, largest = 0, 0
    for process in processes:
        with contextlib.suppress(psutil.Error, OSError, ValueError):  # ended between the listing and the reading
            total += process.memory_info().rss
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    largest = max(largest, int(line.split()[1]) * 1024)
            if cpu is not None:
                times = process.cpu_times()
                kind = cpu[process.pid][0] if process.pid in cpu else process_kind(process.cmdline())
                cpu[process.pid] = (kind, times.user + times.system)
    return total / 1e6, largest / 1e6


def measure(
    cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 900, mark: bytes | None = None
) -> Measured:
    """Run ``cmd`` to its exit; its output goes to temporary files (no pipe to drain). With
    ``mark``, when those bytes first appear in its standard output, looked for every ~50 ms (the
    child should write unbuffered: ``PYTHONUNBUFFERED=1``).

    The file systems are synced first, untimed: what the arm before left to the kernel (dirty
    pages to write back, a deleted folder's blocks to free and, on this host's ``discard``
    mount, trim) is not charged to this one."""
    os.sync()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started_at = time.time()
        jiffies = cpu_jiffies()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = t0 + timeout
        tree_peak, polls = 0.0, 0
        cpu: dict[int, tuple[str, float]] = {}
        marked_s: float | None = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            polls += 1
            if polls % 10 == 0:
                now_mb, largest_mb = _tree_memory_mb(proc.pid, cpu)
                tree_peak = max(tree_peak, now_mb, largest_mb)
                if mark is not None and marked_s is None and mark in os.pread(out.fileno(), 1 << 24, 0):
                    marked_s = time.perf_counter() - t0
            if time.perf_counter() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        seconds = time.perf_counter() - t0
        ended_at = time.time()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds,
            usage.ru_utime,
            usage.ru_stime,
            usage.ru_maxrss / 1024,
            proc.returncode,
            started_at,
            ended_at,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            tree_peak,
            steal_pct(jiffies, cpu_jiffies()),
            marked_s,
            cpu_by_kind(cpu),
        )


def cpu_by_kind(cpu: dict[int, tuple[str, float]]) -> dict[str, float]:
    """The CPU seconds of each kind of process, the largest first."""
    kinds: dict[str, float] = {}
    for kind, seconds in cpu.values():
        kinds[kind] = kinds.get(kind, 0.0) + seconds
    return {kind: round(seconds, 2) for kind, seconds in sorted(kinds.items(), key=lambda item: -item[1])}


def write_watchlist(path: Path, players: list[tuple[str, str]]) -> Path:
    lines = ["players:"]
    for network, name in players:
        lines.append(f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Deadline:
    """A whole benchmark's time: ``left`` says how long a step may take, and raises once it passed."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, at_most: float) -> float:
        left = self.end - time.monotonic()
        if left <= 5:
            raise TimeoutError("the benchmark's deadline passed")
        return min(at_most, left)


@contextlib.contextmanager
def environment(values: dict[str, str], unset: tuple[str, ...] = ()) -> Iterator[None]:
    """``values`` set and ``unset`` removed in this process's environment for the block."""
    before = {name: os.environ.get(name) for name in (*values, *unset)}
    os.environ.update(values)
    for name in unset:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_env(
    base_url: str, data_dir: Path, watchlist: Path, dagster_home: Path, concurrency: int, *, tree: Path = ROOT, **extra: str
) -> dict[str, str]:
    """The environment of one ``tourneylake run`` against ``base_url`` (demo credentials: the
    defaults), with the instance settings of ``tree``, the source it runs (its own classes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
    dagster_home.mkdir(parents=True, exist_ok=True)
    instance = tree / "dagster_home" / "dagster.yaml"  # the project's instance settings (pools, no telemetry)
    if instance.is_file():
        shutil.copyfile(instance, dagster_home / "dagster.yaml")
    env.update(
        TOURNEYLAKE_BASE_URL=base_url,
        TOURNEYLAKE_APPNAME=APPNAME,
        TOURNEYLAKE_APPKEY=APPKEY,
        TOURNEYLAKE_USERNAME=USERNAME,
        TOURNEYLAKE_PASSWORD=PASSWORD,
        TOURNEYLAKE_DATA_DIR=str(data_dir),
        TOURNEYLAKE_WATCHLIST=str(watchlist),
        TOURNEYLAKE_CONCURRENCY=str(concurrency),
        DAGSTER_HOME=str(dagster_home),
    )
    env.update(extra)
    return env
