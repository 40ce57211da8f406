"""A year of nights: ``python -m benchmarks.year [--nights 365] [--players 2000] [--at 1,30,90,180,365]``.

How the year is made: the sandbox's living world in a process of its own (its players play
another day every night), its clock moved to each night before that night runs (a control path
this benchmark adds to it, ``/_year/today``); every night is the real nightly job
(``tourneylake.pipelines.nightly.run_night``: Dagster's job, in this process, its runs recorded in the
year's own Dagster home), so the lake, the ledger, the warehouse and the instance hold what a
year of nights leaves. The watchlist: ``--players`` unfiltered players, and a per-day filter for
the first ``--daily`` of them (the day models have rows). The models job runs the night before
each measured night (the models are built every night; their build at a measured night is one
night's).

Measured at each night of ``--at`` (its run is then a whole ``tourneylake run`` process against
the same world, warmed first: the sandbox's own cost is not the run's):

- the run: process start to exit, the night up to its "run ok" line and the models job after it,
  peak RSS of its process tree;
- the lake: every table's data files and bytes, its current parts, its log files and bytes;
- the warehouse load of the night alone (``Warehouse.load_night`` into a copy of the file as it
  was before the night; median of three);
- every dbt model computed whole (every column of every row, ``max(hash(...))``), and the same
  over a table holding its rows (the floor: a bare scan of the same rows), median of three;
- ``tourneylake report`` and each notebook (nbclient, a kernel of this interpreter), whole;
- ``tourneylake status`` (until its nights and searches left show, and the whole command with the
  schedule's line from Dagster's instance; medians of three);

and after the last night: ``tourneylake rebuild --all`` (whole process: summaries per second, and
per CPU-second of its process tree), the lake's tables again after it, and the Dagster UI on the
year (``dagster-webserver`` on the year's instance; headless Chromium over its DevTools socket:
seconds from navigation until the asset page and the partitions page show their content).

Prints a JSON document (also written to ``--out``, and on Ctrl-C or the deadline); ``--render``
prints its table for ``benchmarks/RESULTS.md``, where the machine and the date go by hand;
``--resume`` goes on with a year kept by ``--keep``. Bounded: every child has a timeout, the whole
run ``--deadline``; servers are stopped by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import orjson

from benchmarks.common import (
    APPKEY,
    APPNAME,
    PASSWORD,
    ROOT,
    SEED,
    USERNAME,
    Deadline,
    environment,
    free_port,
    headers,
    measure,
    roster,
    run_env,
    stop_process,
)

CONCURRENCY = 16
NIGHT_DONE = b"run ok in "
LAST_NIGHT = date(2026, 3, 1)
NOTEBOOKS = ("player", "watchlist", "bill")


def log(message: str) -> None:
    print(f"[year {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ the world


def serve(players: int, today: date, port: int = 0) -> int:
    """The sandbox on a loopback port, its clock moved by ``GET /_year/today?night=D``; prints
    ``listening <url>`` and serves until its standard input closes (the parent ended)."""
    from tourneylake.sandbox import SandboxServer

    server = SandboxServer(seed=SEED, players=players, today=today, port=port)
    inner = server.app.asgi

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/_year/today":
            night = date.fromisoformat(parse_qs(scope["query_string"].decode())["night"][0])
            server.world.set_today(night)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": night.isoformat().encode()})
            return
        await inner(scope, receive, send)

    server.app.asgi = app  # type: ignore[assignment]
    with server:
        print(f"listening {server.base_url}", flush=True)
        sys.stdin.read()
    return 0


class World:
    """:func:`serve` in a child process (stopped by pid)."""

    def __init__(self, players: int, today: date, log_file: Path, port: int = 0) -> None:
        self.players, self.today, self.log_file, self.port = players, today, log_file, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def __enter__(self) -> World:
        err = open(self.log_file, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "benchmarks.year", "serve",
                "--players", str(self.players), "--today", self.today.isoformat(), "--port", str(self.port),
            ],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"the year's sandbox did not start: {line!r}")
        self.base_url = line.split()[1]
        return self

    def set_today(self, night: date) -> None:
        httpx.get(f"{self.base_url}/_year/today", params={"night": night.isoformat()}, timeout=30).raise_for_status()

    def warm(self, night: date, players: list[tuple[str, str]], parallel: int = 16) -> float:
        """Every unfiltered summary of ``night`` asked once, as the night will ask it (the same
        anchored filter): the world's histories and rendered answers cached. Seconds."""
        import asyncio

        from tourneylake.api import calls
        from tourneylake.api.filters import filter_for_night

        sent = filter_for_night("", night).sent

        async def go() -> None:
            limits = httpx.Limits(max_connections=parallel, max_keepalive_connections=parallel)
            async with httpx.AsyncClient(base_url=self.base_url, headers=headers(), limits=limits, timeout=120) as client:
                queue = list(players)

                async def worker() -> None:
                    while queue:
                        network, player = queue.pop()
                        call = calls.player_summary(network, player, sent)
                        (await client.get(f"/api/demo/{call.path}", params=call.params)).raise_for_status()

                await asyncio.gather(*(worker() for _ in range(parallel)))

        t0 = time.perf_counter()
        asyncio.run(go())
        return time.perf_counter() - t0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        stop_process(proc)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def write_watchlist(path: Path, players: list[tuple[str, str]], daily: int) -> Path:
    lines = ["filters:", '  daily_sng: {filter: "Class:SNG", window: day}', "players:"]
    for i, (network, name) in enumerate(players):
        extra = ", filters: [daily_sng]" if i < daily else ""
        lines.append(f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}{extra}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ the year


class Year:
    """The year's folders, settings and the nights made so far."""

    def __init__(self, folder: Path, world: World, players: list[tuple[str, str]], daily: int) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.home = folder / "dagster_home"
        self.world = world
        self.players = players
        self.watchlist = write_watchlist(folder / "watchlist.yaml", players, daily)
        self.env = run_env(world.base_url, self.data, self.watchlist, self.home, CONCURRENCY)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.made: list[date] = []  # the nights made outside Dagster

    @property
    def warehouse(self) -> Path:
        return self.data / "warehouse.duckdb"

    def settings(self) -> Any:
        from tourneylake.config import Settings

        return Settings(
            base_url=self.world.base_url,
            appname=APPNAME,
            appkey=APPKEY,
            username=USERNAME,
            password=PASSWORD,  # a served sandbox: a URL of its own, so its demo account named
            data_dir=self.data,
            watchlist=self.watchlist,
            concurrency=CONCURRENCY,
        )

    def instance_env(self) -> contextlib.AbstractContextManager[None]:
        """The year's Dagster home in this process's environment (the in-process runs record there)."""
        return environment({"DAGSTER_HOME": str(self.home)})

    def night(self, night: date) -> float:
        """One night of the year: the nightly job's steps, as its assets call them (metadata,
        countries and news, the harvest and its record, the tables' upkeep and the warehouse
        load and its record), without Dagster's run around them (its fixed cost a night, which
        the measured nights pay). Seconds."""
        from tourneylake.lake.lake import Lake
        from tourneylake.night.harvest import harvest_players, refresh_free_resource, refresh_metadata
        from tourneylake.night.session import Session, new_run_id
        from tourneylake.night.status import night_bytes, record_harvest, record_harvest_start, record_load
        from tourneylake.night.watchlist import load_watchlist
        from tourneylake.tables.warehouse import Warehouse

        self.world.set_today(night)
        t0 = time.perf_counter()
        settings, run_id = self.settings(), new_run_id()
        session = Session.open(settings, self.world.base_url, night)
        refresh_metadata(session)
        refresh_free_resource(session, "countries")
        refresh_free_resource(session, "whats_new")
        record_harvest_start(session.lake, night, run_id)
        outcome = harvest_players(session, load_watchlist(self.watchlist))
        record_harvest(session.lake, night, run_id, None, outcome)
        if outcome.failed:
            raise RuntimeError(f"night {night}: {len(outcome.failed)} pair(s) failed: {outcome.failed[:3]}")
        lake = Lake(self.data)
        lake.tables.upkeep(night, settings.table_history_days, settings.compaction_days)
        with Warehouse(self.warehouse) as db:
            loaded = db.load_night(lake, night)
        record_load(lake, night, run_id, loaded, size=night_bytes(lake, night))
        self.made.append(night)
        return time.perf_counter() - t0

    def record_materialisations(self) -> int:
        """The nights made outside Dagster recorded in the year's instance as its assets'
        materialisations (Dagster's runless events), so the UI shows every night a year leaves."""
        from dagster import AssetMaterialization, AssetsDefinition, DagsterInstance

        from tourneylake.pipelines.definitions import assets_for
        from tourneylake.schemas import TABLES

        partitioned = sorted(
            {
                key
                for a in assets_for(with_models=False)
                if isinstance(a, AssetsDefinition) and a.partitions_def
                for key in a.keys
            },
            key=lambda key: key.path,
        )
        count = 0
        with self.instance_env(), DagsterInstance.get() as instance:
            for night in self.made:
                for key in partitioned:
                    rows = {"dagster/row_count": 0} if key.path[0] == "warehouse" and key.path[-1] in TABLES else {}
                    instance.report_runless_asset_event(AssetMaterialization(key, partition=night.isoformat(), metadata=rows))
                    count += 1
        return count

    def models(self) -> float:
        """The models job (dbt build and the report), as after a night. Seconds."""
        from tourneylake.pipelines.nightly import run_models

        t0 = time.perf_counter()
        with self.instance_env():
            report = run_models(self.settings())
        if not report.success:
            raise RuntimeError(f"the models failed: {report.failure}")
        return time.perf_counter() - t0


# ------------------------------------------------------------------------------ measures


def lake_figures(data: Path) -> dict[str, Any]:
    """Per table: data files and bytes on disk, current parts, log files and bytes; the raw
    answers' and the ledger's files and bytes."""
    from tourneylake.lake.lake import Lake

    lake = Lake(data)
    out: dict[str, Any] = {}
    root = data / "lake"
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = [p for p in folder.rglob("*") if p.is_file()]
        log_files = [p for p in files if "_delta_log" in p.parts]
        parquet = [p for p in files if p.suffix == ".parquet" and "_delta_log" not in p.parts]
        entry: dict[str, Any] = {
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
        }
        if log_files:
            entry.update(
                data_files=len(parquet),
                data_bytes=sum(p.stat().st_size for p in parquet),
                log_files=len(log_files),
                log_bytes=sum(p.stat().st_size for p in log_files),
                current_parts=sum(len(parts) for parts in lake.tables.parts(folder.name).values()),
            )
        out[folder.name] = entry
    return out


def load_figures(year: Year, before: Path, night: date, tmp: Path, repeats: int = 3) -> dict[str, Any]:
    """The night's warehouse load alone, into a copy of the file as it was before the night."""
    from tourneylake.lake.lake import Lake
    from tourneylake.tables.warehouse import Warehouse

    times, rows = [], 0
    for rep in range(repeats):
        target = tmp / f"load-{rep}.duckdb"
        shutil.copyfile(before, target)
        os.sync()  # the copy's dirty pages written back, untimed: else the load's commit pays for them
        with Warehouse(target) as db:
            t0 = time.perf_counter()
            rows = sum(db.load_night(Lake(year.data), night).values())
            times.append(time.perf_counter() - t0)
        target.unlink()
        Path(str(target) + ".wal").unlink(missing_ok=True)
    return {"load_s": round(statistics.median(times), 3), "runs_s": [round(t, 3) for t in times], "rows": rows}


def model_names() -> list[str]:
    from tourneylake.tables.models import ensure_manifest

    manifest = orjson.loads(ensure_manifest().read_bytes())
    return sorted(n["name"] for n in manifest["nodes"].values() if n["resource_type"] == "model")


def model_figures(warehouse: Path, repeats: int = 3) -> dict[str, Any]:
    """Each model computed whole (every column of every row, hashed in DuckDB: nothing crosses
    into Python), against the same over a temporary table of its rows (the floor); medians."""
    import duckdb

    out: dict[str, Any] = {}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET memory_limit = '6GB'")
        for model in model_names():
            whole = f"SELECT count(*), max(hash(COLUMNS(*))) FROM {model}"
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                con.execute(whole).fetchall()
                times.append(time.perf_counter() - t0)
            con.execute(f"CREATE OR REPLACE TEMP TABLE floor_rows AS SELECT * FROM {model}")
            floors = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                rows = con.execute("SELECT count(*), max(hash(COLUMNS(*))) FROM floor_rows").fetchall()[0][0]
                floors.append(time.perf_counter() - t0)
            con.execute("DROP TABLE floor_rows")
            seconds, floor = statistics.median(times), statistics.median(floors)
            out[model] = {"s": round(seconds, 4), "floor_s": round(floor, 4), "ratio": round(seconds / floor, 1), "rows": rows}
    return out


@contextlib.contextmanager
def kernel(folder: Path) -> Iterator[None]:
    """A ``python3`` kernelspec of this interpreter first on ``JUPYTER_PATH`` for the block."""
    from ipykernel.kernelspec import install

    prefix = folder / "jupyter-prefix"
    install(kernel_name="python3", prefix=str(prefix))
    with environment({"JUPYTER_PATH": str(prefix / "share" / "jupyter")}, unset=("MPLBACKEND",)):
        yield


def notebook_seconds(year: Year, name: str) -> float:
    """One notebook run top to bottom (kernel start included) on the year's warehouse."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    with environment({"TOURNEYLAKE_DATA_DIR": str(year.data), "TOURNEYLAKE_WATCHLIST": str(year.watchlist)}):
        client = NotebookClient(
            notebook, timeout=300, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(year.folder)}}
        )
        t0 = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - t0
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    if errors:
        raise RuntimeError(f"notebook {name}: {errors[0].ename}: {errors[0].evalue}")
    return seconds


def command(year: Year, args: list[str], timeout: float, mark: bytes | None = None) -> Any:
    m = measure(
        [sys.executable, "-m", "tourneylake.pipelines.cli", *args],
        env={**year.env, "PYTHONUNBUFFERED": "1"},
        timeout=timeout,
        mark=mark,
    )
    if m.returncode != 0:
        raise RuntimeError(f"tourneylake {' '.join(args)} exited {m.returncode}: {m.stderr[-2000:]} {m.stdout[-500:]}")
    return m


def checkpoint(year: Year, night: date, number: int, tmp: Path, deadline: Deadline) -> dict[str, Any]:
    """Every measure at one night (see the module docstring)."""
    before = tmp / "before.duckdb"
    if year.warehouse.is_file():
        shutil.copyfile(year.warehouse, before)
    else:  # the first night: its load into a new file
        from tourneylake.tables.warehouse import Warehouse

        Warehouse(before).close()
    year.world.set_today(night)
    warm = year.world.warm(night, year.players)
    env = {**year.env}
    run = measure(
        [sys.executable, "-m", "tourneylake.pipelines.cli", "run", "--date", night.isoformat()],
        env=env,
        timeout=deadline.left(1800),
        mark=NIGHT_DONE,
    )
    if run.returncode != 0:
        raise RuntimeError(f"tourneylake run (night {number}) exited {run.returncode}: {run.stderr[-2000:]} {run.stdout[-1000:]}")
    figures: dict[str, Any] = {
        "night": night.isoformat(),
        "number": number,
        "warm_s": round(warm, 2),
        "run_s": round(run.seconds, 2),
        "night_s": round(run.marked_s, 2) if run.marked_s is not None else None,
        "models_job_s": round(run.seconds - run.marked_s, 2) if run.marked_s is not None else None,
        "cpu_s": round(run.user_s + run.sys_s, 2),
        "peak_rss_mb": round(run.tree_peak_rss_mb, 1),
        "steal_pct": run.steal_pct,
        "cpu_by_process_s": run.cpu_by_kind,
        "steps_s": step_seconds(year),
        "dbt_nodes_s": dbt_node_seconds(year.warehouse),
    }
    log(f"night {number} ({night}): run {run.seconds:.1f} s (night {run.marked_s}), peak {run.tree_peak_rss_mb:.0f} MB")
    log(f"night {number}: CPU by process {run.cpu_by_kind}; steps {figures['steps_s']}")
    figures["lake"] = lake_figures(year.data)
    figures["warehouse_load"] = load_figures(year, before, night, tmp)
    before.unlink()
    log(f"night {number}: load {figures['warehouse_load']}")
    figures["warehouse_mb"] = round(year.warehouse.stat().st_size / 1e6, 1)
    figures["models"] = model_figures(year.warehouse)
    slowest = max(figures["models"].items(), key=lambda kv: kv[1]["s"])
    log(f"night {number}: models, slowest {slowest[0]} {slowest[1]}")
    report = command(year, ["report", "--date", night.isoformat()], deadline.left(600))
    figures["report_s"] = round(report.seconds, 2)
    with kernel(tmp):
        figures["notebooks_s"] = {name: round(notebook_seconds(year, name), 2) for name in NOTEBOOKS}
    status = [command(year, ["status"], deadline.left(300), mark=b"searches left") for _ in range(3)]
    figures["status_s"] = round(statistics.median(m.seconds for m in status), 3)
    figures["status_shown_s"] = round(statistics.median(m.marked_s or m.seconds for m in status), 3)
    figures["status_read_s"] = round(statistics.median(status_read(year) for _ in range(3)), 3)
    log(f"night {number}: report {figures['report_s']} s, notebooks {figures['notebooks_s']}, status {figures['status_s']} s")
    return figures


def step_seconds(year: Year, runs: int = 2) -> dict[str, dict[str, float]]:
    """The wall seconds of each step of the latest ``runs`` Dagster runs (a measured night's
    ``tourneylake run``: the night's job, then the models job), from the year's instance."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(year.home)) as instance:
        return {
            run.job_name: {
                step.step_key: round(step.end_time - step.start_time, 2)
                for step in instance.get_run_step_stats(run.run_id)
                if step.end_time and step.start_time
            }
            for run in instance.get_runs(limit=runs)
        }


def dbt_node_seconds(warehouse: Path, top: int = 8) -> dict[str, Any]:
    """The last dbt build of the warehouse (the models job's): its nodes' seconds summed by kind
    (model, test), and the slowest nodes."""
    from tourneylake.tables.models import target_dir

    results = orjson.loads((target_dir(warehouse) / "run_results.json").read_bytes())["results"]
    kinds: dict[str, float] = {}
    for node in results:
        kind = node["unique_id"].split(".")[0]
        kinds[kind] = round(kinds.get(kind, 0.0) + node["execution_time"], 2)
    slowest = sorted(results, key=lambda node: -node["execution_time"])[:top]
    return {**kinds, "slowest": {node["unique_id"].split(".", 2)[-1][:60]: round(node["execution_time"], 2) for node in slowest}}


def status_read(year: Year) -> float:
    """The status read alone, in this process (what grows with the nights; the command adds
    its start)."""
    from tourneylake.config import Settings
    from tourneylake.night.status import lake_status

    t0 = time.perf_counter()
    lake_status(Settings(data_dir=year.data, watchlist=year.watchlist), latest=31)  # what the command describes
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------ the UI


def ui_figures(year: Year, deadline: Deadline, last: date, nights: int) -> dict[str, Any]:
    """The Dagster UI on the year's instance: seconds from navigation until the asset page shows
    its latest materialisation (``last``) and the partitions page its count (``nights``),
    in headless Chromium, through its DevTools socket."""
    port = free_port()
    env = {**year.env, "PYTHONWARNINGS": "ignore"}
    ui = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        t0 = time.perf_counter()
        end = time.monotonic() + deadline.left(300)
        while time.monotonic() < end:
            if ui.poll() is not None:
                raise RuntimeError("dagster-webserver exited")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/server_info", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        started = time.perf_counter() - t0
        pages = {
            # the asset's page: its latest materialisation, the last night
            "asset": (f"{base}/assets/player_summaries", last.isoformat()),
            # its partitions: every night's state, the nights materialised counted
            "partitions": (f"{base}/assets/player_summaries?view=partitions", f"Materialized ({nights})"),
        }
        out: dict[str, Any] = {"webserver_start_s": round(started, 2)}
        with chromium() as browser:
            for name, (url, text) in pages.items():
                try:
                    out[name] = [round(browser.load_until(url, text, deadline.left(90)), 2) for _ in range(3)]
                except TimeoutError as exc:
                    out[name] = str(exc)
                log(f"ui: {name} {out[name]}")
        return out
    finally:
        stop_process(ui)


class _Chromium:
    def __init__(self, socket_url: str) -> None:
        from websockets.sync.client import connect

        page = next(t for t in httpx.get(socket_url + "/json/list", timeout=10).json() if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None)
        self.next_id = 0

    def call(self, method: str, **params: Any) -> Any:
        self.next_id += 1
        self.ws.send(orjson.dumps({"id": self.next_id, "method": method, "params": params}).decode())
        while True:
            message = orjson.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                return message.get("result")

    def load_until(self, url: str, text: str, timeout: float) -> float:
        """Seconds from navigating to ``url`` until the page's text holds ``text``."""
        self.call("Page.navigate", url="about:blank")
        t0 = time.perf_counter()
        self.call("Page.navigate", url=url)
        script = f"document.body !== null && document.body.innerText.includes({orjson.dumps(text).decode()})"
        while time.perf_counter() - t0 < timeout:
            found = self.call("Runtime.evaluate", expression=script, returnByValue=True)
            if found and found.get("result", {}).get("value"):
                return time.perf_counter() - t0
            time.sleep(0.05)
        shown = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''", returnByValue=True)
        raise TimeoutError(f"{url} did not show {text!r} in {timeout:.0f} s: {str(shown)[:1500]}")


@contextlib.contextmanager
def chromium() -> Iterator[_Chromium]:
    port = free_port()
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"tl-year-chromium-{port}"
    proc = subprocess.Popen(
        [
            "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            f"--remote-debugging-port={port}", "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
            "--window-size=1400,1000", "about:blank",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + 60
        browser = None
        while browser is None and time.monotonic() < end:
            try:
                browser = _Chromium(f"http://127.0.0.1:{port}")
            except (httpx.HTTPError, StopIteration, OSError):
                time.sleep(0.2)
        if browser is None:
            raise RuntimeError("chromium did not open its DevTools socket")
        browser.call("Page.enable")
        yield browser
        browser.ws.close()
    finally:
        stop_process(proc)
        shutil.rmtree(profile, ignore_errors=True)


# ------------------------------------------------------------------------------ main


def rebuild_figures(year: Year, deadline: Deadline) -> dict[str, Any]:
    from tourneylake.api import calls
    from tourneylake.lake.lake import Lake

    lake = Lake(year.data)
    summaries = sum(len(lake.raw.refs(n, calls.PLAYER_SUMMARY)) for n in lake.raw.nights())
    m = command(year, ["rebuild", "--all"], deadline.left(3600))
    cpu = m.user_s + m.sys_s
    return {
        "summaries": summaries,
        "seconds": round(m.seconds, 1),
        "cpu_s": round(cpu, 1),
        "summaries_per_s": round(summaries / m.seconds, 1),
        "summaries_per_cpu_s": round(summaries / cpu, 1),
        "peak_rss_mb": round(m.tree_peak_rss_mb, 1),
    }


def render(out: dict[str, Any]) -> str:
    """The figures as a Markdown table: a row per measure, a column per measured night."""
    at = {int(k): v for k, v in out["at"].items()}
    nights = sorted(at)

    def row(label: str, value: Any) -> str:
        return f"| {label} | " + " | ".join(str(value(at[n])) for n in nights) + " |"

    def models(figures: dict[str, Any], key: str) -> str:
        return "; ".join(f"{name} {m[key]}" for name, m in sorted(figures["models"].items(), key=lambda kv: -kv[1]["s"])[:4])

    def lake(figures: dict[str, Any], table: str) -> str:
        t = figures["lake"].get(table, {})
        return f"{t.get('data_files', 0)} + {t.get('log_files', 0)} log, {t.get('bytes', 0) / 1e6:.1f} MB"

    def largest(seconds: dict[str, float], n: int = 4) -> str:
        return "; ".join(f"{kind} {s}" for kind, s in list(seconds.items())[:n]) or "-"

    def dbt(figures: dict[str, Any]) -> str:
        nodes = figures.get("dbt_nodes_s")
        return f"{nodes.get('model')}; {nodes.get('test')}" if nodes else "-"

    first = at[nights[0]]
    lines = [
        "| measure | " + " | ".join(f"night {n}" for n in nights) + " |",
        "|---|" + "---|" * len(nights),
        row("`tourneylake run`: whole process (s)", lambda f: f["run_s"]),
        row('the night, to its "run ok" (s)', lambda f: f["night_s"]),
        row("night / night 1's", lambda f: round(f["night_s"] / first["night_s"], 2)),
        row("the models job after it (s)", lambda f: f["models_job_s"]),
        row("CPU of the run's tree (s)", lambda f: f["cpu_s"]),
        row("its CPU by process, the largest (s)", lambda f: largest(f.get("cpu_by_process_s", {}))),
        row("the models job's dbt nodes: models; tests (s, summed)", lambda f: dbt(f)),
        row("peak RSS of the run's tree (MB)", lambda f: round(f["peak_rss_mb"])),
        row("warehouse load of the night (s)", lambda f: f["warehouse_load"]["load_s"]),
        row("load / night 1's", lambda f: round(f["warehouse_load"]["load_s"] / first["warehouse_load"]["load_s"], 2)),
        row("slowest models, whole (s)", lambda f: models(f, "s")),
        row("their ratio to the floor", lambda f: models(f, "ratio")),
        row("models over 1 s", lambda f: sum(m["s"] > 1 for m in f["models"].values())),
        row("`tourneylake report` (s)", lambda f: f["report_s"]),
        row("notebooks: player, watchlist, bill (s)", lambda f: ", ".join(str(v) for v in f["notebooks_s"].values())),
        row(
            "`tourneylake status`: the nights shown; the command; the read alone (s)",
            lambda f: f"{f.get('status_shown_s', '-')}; {f['status_s']}; {f.get('status_read_s')}",
        ),
        row("warehouse file (MB)", lambda f: f["warehouse_mb"]),
    ]
    for table in ("player_statistics", "player_datasets", "tournament_entries", "search_ledger", "countries", "_raw", "_ledger"):
        lines.append(row(f"lake `{table}`: files, bytes", lambda f, t=table: lake(f, t)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    serving = sub.add_parser("serve")
    serving.add_argument("--players", type=int, required=True)
    serving.add_argument("--today", type=date.fromisoformat, required=True)
    serving.add_argument("--port", type=int, default=0)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--players", type=int, default=2000)
    parser.add_argument("--daily", type=int, default=50, help="players with a per-day filter too")
    parser.add_argument("--at", default="1,30,90,180,365", help="the nights measured (1 = the first)")
    parser.add_argument("--last", type=date.fromisoformat, default=LAST_NIGHT, help="the year's last night")
    parser.add_argument("--keep", type=Path, help="make the year in this folder and keep it")
    parser.add_argument("--out", type=Path, help="write the JSON document here too")
    parser.add_argument("--no-ui", action="store_true")
    parser.add_argument("--no-rebuild", action="store_true")
    parser.add_argument("--deadline", type=float, default=3 * 3600)
    parser.add_argument("--render", type=Path, help="print the Markdown table of a JSON document this wrote, and exit")
    parser.add_argument(
        "--resume",
        type=Path,
        help="on a year kept by --keep, the JSON document its run wrote (one stopped by --deadline or by hand): the "
        "nights its warehouse holds are kept, the figures too, and the year goes on from the next night",
    )
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args.players, args.today, args.port)
    if args.render:
        print(render(orjson.loads(args.render.read_bytes())))
        return 0
    deadline = Deadline(args.deadline)
    at = sorted({int(x) for x in args.at.split(",") if x and int(x) <= args.nights})
    first = args.last - timedelta(days=args.nights - 1)
    nights = [first + timedelta(days=i) for i in range(args.nights)]
    folder = args.keep or Path(os.environ.get("TMPDIR", "/tmp")) / f"tl-year-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tmp"
    tmp.mkdir(exist_ok=True)
    started = time.monotonic()
    out: dict[str, Any] = {
        "nights": args.nights,
        "players": args.players,
        "daily": args.daily,
        "first": first.isoformat(),
        "last": args.last.isoformat(),
        "at": {},
        "made_s": {},
    }
    if args.resume:
        out = orjson.loads(args.resume.read_bytes())
        out["resumed_after_s"] = out.pop("elapsed_s", None)
    players = roster(args.players)
    try:
        # A resumed year's world on the port it had: the lake holds the source it was harvested from.
        url_file = folder / "world.url"
        port = int(url_file.read_text().rsplit(":", 1)[1]) if args.resume and url_file.is_file() else 0
        with World(args.players, first, folder / "world.log", port) as world:
            url_file.write_text(world.base_url)
            year = Year(folder, world, players, args.daily)
            made: list[float] = []
            if args.resume:  # the nights the run resumed loaded (one it was stopped in is made again)
                import duckdb

                with duckdb.connect(str(year.warehouse), read_only=True) as con:
                    held = {row[0] for row in con.execute("SELECT DISTINCT snapshot_date FROM player_statistics").fetchall()}
                measured = {f["night"] for f in out["at"].values()}  # Dagster's runs: recorded by Dagster
                year.made = [n for n in nights if n in held and n.isoformat() not in measured]
            else:
                held = set()
            for number, night in enumerate(nights, start=1):
                if night in held:
                    continue
                deadline.left(60)
                if number in at:  # a whole run, its models job included (`--at 1,2` measures both)
                    out["at"][number] = checkpoint(year, night, number, tmp, deadline)
                    out["made_s"][number] = round(sum(made), 1)
                    made = []
                elif number + 1 in at:
                    made.append(year.night(night))
                    year.models()  # as every night does: the measured night's models are one night's
                else:
                    made.append(year.night(night))
                if number % 10 == 0:
                    log(f"night {number}/{args.nights} ({night}); the last ten {sum(made[-10:]):.1f} s")
            if not args.no_ui:
                out["ui_runless_materialisations"] = year.record_materialisations()
                # The latest materialisation the asset page shows: the last night recorded above
                # (after the measured nights' runs), else the last night.
                out["ui"] = ui_figures(year, deadline, max(year.made, default=nights[-1]), len(nights))
            if not args.no_rebuild:
                out["rebuild"] = rebuild_figures(year, deadline)
                log(f"rebuild: {out['rebuild']}")
                out["lake_after_rebuild"] = lake_figures(year.data)
    finally:
        out["elapsed_s"] = round(time.monotonic() - started, 1)
        text = orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
        if args.out:
            args.out.write_text(text)
        print(text)
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
