"""Helpers shared by the tests that talk to a sandbox over real HTTP."""

from __future__ import annotations

import os
import shutil
import struct
import threading
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from tourneylake.api import Client
from tourneylake.config import Settings
from tourneylake.lake.lake import Lake
from tourneylake.lake.ledger import Ledger
from tourneylake.lake.segments import RawRef, forget_indexes, frame, frames, payload_of
from tourneylake.night.harvest import HarvestOutcome, harvest_players, refresh_free_resource, refresh_metadata
from tourneylake.night.session import Session
from tourneylake.night.watchlist import load_watchlist
from tourneylake.sandbox import DEMO
from tourneylake.tables.normalize.summary import SUMMARY_TABLES
from tourneylake.tables.warehouse import Warehouse

REPO = Path(__file__).resolve().parent.parent
#: The sandbox's demo account, named as any service but the in-process sandbox needs it named
#: (a URL other than `sandbox` never gets the demo account by default): as settings, as variables.
DEMO_ACCOUNT = {"appname": DEMO.appname, "appkey": DEMO.appkey, "username": DEMO.username, "password": DEMO.password}
DEMO_ENV = {f"TOURNEYLAKE_{name.upper()}": value for name, value in DEMO_ACCOUNT.items()}
#: The tests' own data files (recorded answers, the filter corpus, metadata with rates).
DATA = REPO / "tests" / "data"

HAND = """PokerStars Hand #1234567890: Tournament #42, $10+$1 USD Hold'em No Limit - Level I (10/20)
Table '42 1' 9-max Seat #1 is the button
Seat 1: villain (1500 in chips)
Seat 2: hero (1500 in chips)
villain: posts small blind 10
hero: posts big blind 20
*** HOLE CARDS ***
Dealt to hero [Ah Kd]
villain: raises 40 to 60
hero: raises 120 to 180
villain: calls 120
*** FLOP *** [2c 7d Ks]
hero: bets 200
villain: folds
hero collected 560 from pot
"""


def raw_files(lake: Lake) -> dict[str, bytes]:
    """Every file of the lake's raw store (its segments), by path under ``_raw``, with its bytes."""
    root = lake.root / "_raw"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def rewrite_body(ref: RawRef, payload: bytes) -> None:
    """Replace one stored body's file (its record's payload) with ``payload``, as a damaged disk
    or a hand would; the other records of its segment stay whole."""
    path = Path(str(ref.location))
    data = path.read_bytes()
    assert ref.offset is not None and ref.length is not None
    record = data[ref.offset : ref.offset + ref.length]
    head, _ = struct.unpack_from("<II", record, 4)
    header = orjson.loads(record[12 : 12 + head])
    path.write_bytes(data[: ref.offset] + frame(header, payload) + data[ref.offset + ref.length :])
    forget_indexes()


def drop_status_records(lake: Lake, night: date) -> None:
    """The night's segments without their status records: every body ``received``, as a process
    killed before it read them leaves them."""
    for segment in (lake.root / "_raw" / f"snapshot_date={night}").glob("w-*/*.seg"):
        data = segment.read_bytes()
        segment.write_bytes(b"".join(data[o : o + n] for o, n, h in frames(data)[0] if h.get("k") == "body"))
    forget_indexes()


def body_payload(ref: RawRef) -> bytes:
    """A stored body's file (its record's payload), as kept."""
    data = Path(str(ref.location)).read_bytes()
    assert ref.offset is not None and ref.length is not None
    return payload_of(data[ref.offset : ref.offset + ref.length])


def sandbox_settings(sandbox: Any, data_dir: Path, **overrides: Any) -> Settings:
    """Settings pointing at a running sandbox (a plain http URL: no second server), with quick retries."""
    values: dict[str, Any] = dict(
        base_url=sandbox.base_url,
        **DEMO_ACCOUNT,
        data_dir=data_dir,
        watchlist=data_dir / "watchlist.yaml",
        concurrency=2,
        max_attempts=2,
        retry_initial_wait_s=0.01,
        retry_max_wait_s=0.05,
        retry_pass_wait_s=0.05,
    )
    values.update(overrides)
    return Settings(**values)


def dagster_cli_env(sandbox: Any, settings: Settings, home: Path, night: date, **extra: str) -> dict[str, str]:
    """The environment of a ``dagster job execute`` of a night on ``home``'s instance: the
    settings' lake and watchlist against the sandbox (no ``TOURNEYLAKE_*`` of this process); its
    partitions start at ``night`` (the lake is empty: they would start yesterday)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOURNEYLAKE_")},
        "DAGSTER_HOME": str(home),
        "TOURNEYLAKE_BASE_URL": sandbox.base_url,
        **DEMO_ENV,
        "TOURNEYLAKE_DATA_DIR": str(settings.data_dir),
        "TOURNEYLAKE_WATCHLIST": str(settings.watchlist),
        "TOURNEYLAKE_CONCURRENCY": "2",
        "TOURNEYLAKE_FIRST_NIGHT": night.isoformat(),
        **extra,
    }


def accounts_run_side_by_side(home: Path) -> str:
    """The one run of ``home``'s instance succeeded with each account's harvest in a process of
    its own; returns its events as text, for the secrets a test looks for."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.is_success
        events = instance.all_logs(run.run_id)
        step_pids = {e.step_key: e.dagster_event.pid for e in events if e.dagster_event and e.dagster_event.is_step_start}
        assert {"player_summaries__left", "player_summaries__right"} <= set(step_pids)
        assert len(set(step_pids.values())) == len(step_pids)  # every step in its own process
        return str([(e.user_message, e.dagster_event) for e in events])


def remaining(settings: Settings) -> int:
    """The account's searches left, through the free Countries call."""
    with Client(settings) as client:
        value = client.countries().remaining_searches
    assert value is not None
    return value


def ledger_rows(settings: Settings, night: date | None = None) -> list[dict]:
    ledger = Ledger(Lake(settings.data_dir))
    nights = [night] if night else ledger.nights()
    return [row for d in nights for row in ledger.entries(d)]


def write_watchlist(settings: Settings, text: str) -> None:
    settings.watchlist.parent.mkdir(parents=True, exist_ok=True)
    settings.watchlist.write_text(text, encoding="utf-8")


def player_line(network: str, name: str, filters: str = "[]") -> str:
    """One watchlist player entry (names JSON-quoted: they hold dots, quotes and accents)."""
    return f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}, filters: {filters}}}"


def harvest_nights(server: Any, settings: Settings, nights: list[date], watchlist: str | None = None) -> list[HarvestOutcome]:
    """The ``watchlist`` (default: one player with one filter) harvested on each night in turn
    (metadata, countries, the summaries) from a running sandbox, each night loaded into the
    settings' warehouse."""
    default = "filters:\n  sng: 'Class:SNG'\nplayers:\n" + player_line("PokerStars", "Borbas.Geri", "[sng]")
    write_watchlist(settings, (watchlist or default) + "\n")
    outcomes = []
    for night in nights:
        server.world.set_today(night)
        session = Session.open(settings, server.base_url, night)
        refresh_metadata(session)
        refresh_free_resource(session, "countries")
        outcomes.append(harvest_players(session, load_watchlist(settings.watchlist)))
        with Warehouse(settings.warehouse_path) as db:
            db.load_night(session.lake, night)
    return outcomes


class WebhookReceiver:
    """A real HTTP server on loopback that keeps the JSON bodies posted to it (an alert webhook)."""

    def __init__(self) -> None:
        import http.server
        import threading

        posts: list[dict[str, Any]] = []
        self.posts = posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                posts.append(orjson.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def shipped_dagster_home(tmp_path: Path, monkeypatch: Any) -> Path:
    """A Dagster home with the shipped ``dagster_home/dagster.yaml``, named by ``DAGSTER_HOME``
    for the test."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def only_side_by_side(monkeypatch: Any, module: Any, name: str) -> None:
    """``module.name`` made to wait for a second call to run beside it: a call alone breaks the
    barrier (an error), so the test fails unless two calls run at once."""
    both = threading.Barrier(2, timeout=10)
    real = getattr(module, name)

    def gated(*args: Any) -> Any:
        both.wait()
        return real(*args)

    monkeypatch.setattr(module, name, gated)


#: Columns that differ between two harvests of the same answers (clocks, listing times, hashes).
VOLATILE = {"fetched_at", "server_time", "listed_at", "last_activity_at", "metadata_hash"}


def summary_rows(lake: Lake, night: date) -> dict[str, list[str]]:
    """The night's summary tables, each as its sorted rows without :data:`VOLATILE` columns: what
    two harvests of the same night must agree on."""
    out = {}
    for name in SUMMARY_TABLES:
        table = lake.tables.read_table(name, night)
        keep = [c for c in table.column_names if c not in VOLATILE]
        out[name] = sorted(map(repr, table.select(keep).to_pylist()))
    return out


def copy_warehouse(source: Path, into: Path) -> None:
    """A built warehouse copied with the project its models follow (``built/`` beside it), so
    its next build adds nights rather than making the incremental models again whole."""
    from tourneylake.tables.models import target_dir

    shutil.copyfile(source, into)
    shutil.copytree(target_dir(source) / "built", target_dir(into) / "built")
