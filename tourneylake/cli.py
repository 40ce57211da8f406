"""The ``tourneylake`` command line: every command but ``run`` (see ``pipelines/cli.py``, which adds
it to this app, because ``run`` drives Dagster and the library never imports Dagster).

All terminal rendering lives here: the library returns plain values. An error tourneylake raises
on purpose (:class:`~tourneylake.errors.TourneylakeError`) ends the command with its reason in
one line and a non-zero exit; anything else is a bug and shows its traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from tourneylake import __version__
from tourneylake.config import ON_SANDBOX, Settings, load_settings
from tourneylake.errors import ConfigError, TourneylakeError
from tourneylake.runtime.threads import stop_process_threads

# Click's plain help (no boxes): a flag shows no type, an option the kind of value it takes.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Harvest the poker statistics service into a Parquet lake and DuckDB.",
)
filter_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Check filters, or convert a question into one.")
hand_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Hand analysis (subscribers, 5 searches).")
app.add_typer(filter_app, name="filter")
app.add_typer(hand_app, name="hand")

#: The commands ``tourneylake --help`` lists first, in this order: a night's, then setting up.
FIRST = ("run", "status", "report", "query", "budget", "doctor", "init")


def order_commands(application: typer.Typer) -> None:
    """List :data:`FIRST` first in ``--help`` (the others after, as registered)."""

    def rank(info: Any) -> int:
        name = info.name or info.callback.__name__.replace("_", "-")
        return FIRST.index(name) if name in FIRST else len(FIRST)

    application.registered_commands.sort(key=rank)


def _fitted(stderr: bool) -> dict[str, Any]:
    """A console's settings for the stream it writes to now: a terminal's width and colours;
    piped output (CI logs, `make run | tee`) gets 140 columns instead of 80."""
    stream = sys.stderr if stderr else sys.stdout
    return {"stderr": stderr} if stream.isatty() else {"stderr": stderr, "width": 140}


console = Console(**_fitted(False))
err = Console(**_fitted(True))


DataDir = Annotated[str | None, typer.Option("--data-dir", help="Data directory or fsspec URL (TOURNEYLAKE_DATA_DIR).")]
Sandbox = Annotated[
    bool, typer.Option("--sandbox", help="Use the built-in sandbox and its demo account, whatever TOURNEYLAKE_BASE_URL says.")
]
Night = Annotated[
    str | None, typer.Option("--date", help="The night, YYYY-MM-DD (default: the night that ended, yesterday UTC).")
]
WatchlistFile = Annotated[Path | None, typer.Option("--watchlist", help="Watchlist YAML (TOURNEYLAKE_WATCHLIST).")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show the library's debug lines too.")]

T = TypeVar("T")

#: Exit statuses: 0 ok, 1 failed, 2 a usage error (a flag or argument), 3 a partial night and 4
#: pairs the watchlist kept from being attempted (``tourneylake run``), 130 interrupted (Ctrl-C).
FAILED, USAGE, INTERRUPTED = 1, 2, 130
#: An error line's length at most; a longer message is kept whole in the log file.
MAX_LINE = 200
LOG_FILE = "tourneylake.log"
_log_dir: list[Path] = []  # where the log file goes, once the command knows its settings


def fail(message: str, code: int = FAILED) -> typer.Exit:
    err.print(f"[bold red]error:[/] {short(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def short(message: str) -> str:
    """``message`` on one line of at most :data:`MAX_LINE` characters; a longer one is cut, and
    kept whole in the log file (``tourneylake.log`` in the data directory) when there is one."""
    message = " ".join(message.split())
    if len(message) <= MAX_LINE:
        return message
    kept = _log_whole(message)
    message = _LONG_PATH.sub(lambda found: "…/" + "/".join(found.group(0).rsplit("/", 2)[-2:]), message)
    if len(message) <= MAX_LINE:
        return message
    tail = f" … (the whole message is in {LOG_FILE})" if kept else " …"
    return message[: MAX_LINE - len(tail)].rstrip() + tail


# An absolute path of four folders or more: a long message names it by its last two.
_LONG_PATH = re.compile(r"(?<![\w.:])/(?:[^\s/'\"(),:;]+/){3,}[^\s/'\"(),:;]+")


def _log_whole(message: str) -> Path | None:
    if not _log_dir:
        return None
    path = _log_dir[-1] / LOG_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as log_file:
            log_file.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} error: {message}\n")
    except OSError:
        return None
    return path


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def reported() -> Iterator[None]:
    """Turn a :class:`TourneylakeError` into its reason and exit status 1: one line per problem
    (a watchlist with three mistakes says all three, each with its file and line)."""
    try:
        yield
    except TourneylakeError as exc:
        problems = [" ".join(line.split()) for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        for problem in problems[:-1]:
            err.print(f"[bold red]error:[/] {short(problem)}", highlight=False, soft_wrap=True)
        raise fail(problems[-1]) from None


def settings_from(sandbox: bool = False, **overrides: Any) -> Settings:
    """The settings (environment, `.env`, then the command's flags)."""
    with reported():
        settings = load_settings(**overrides, **(ON_SANDBOX if sandbox else {}))
    with contextlib.suppress(ConfigError):  # a lake at a URL without TOURNEYLAKE_WAREHOUSE: said where it matters
        _log_dir[:] = [settings.local_dir]
    return settings


def parse_night(value: str | None, flag: str = "--date", *, default: date | None = None) -> date:
    """``value`` as a night; none given: ``default``, else the night that ended (yesterday,
    UTC), the one ``run`` harvests: every command that takes a night has that one default."""
    if not value:
        return default or datetime.now(UTC).date() - timedelta(days=1)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise fail(f"{flag} must be a date YYYY-MM-DD, got {value!r}", USAGE) from None


def ended_night(value: str | None) -> date:
    """The night to harvest: a UTC day that has ended (default: yesterday), not before the
    service's data starts — a night is harvested once it is over, so it means the whole night."""
    from tourneylake.api.filters import FIRST_NIGHT

    today = datetime.now(UTC).date()
    night = parse_night(value)
    if night >= today:
        raise fail(f"the night of {night} has not ended yet (UTC): harvest it from {night + timedelta(days=1)} on", USAGE)
    if night < FIRST_NIGHT:
        raise fail(f"the service's data starts on {FIRST_NIGHT}: there is nothing to harvest for {night}", USAGE)
    return night


def setup_logging(verbose: bool) -> None:
    handler = RichHandler(console=err, show_path=False, show_time=False, markup=False)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], format="%(message)s", force=True)
    logging.getLogger("tourneylake").setLevel(logging.DEBUG if verbose else logging.INFO)


def launch(application: typer.Typer) -> NoReturn:
    """Run the command line, then exit as Python does, less the interpreter's teardown.

    A ``tourneylake run`` has Dagster, SQLAlchemy, pydantic and pyarrow loaded; freeing all of
    that object by object at exit takes a noticeable share of a night, for nothing: the operating
    system reclaims it at once. So the command ends with ``sys.exit``, and the interpreter's own
    exit does what it always does first (it waits for running threads, then calls the exit
    handlers, last registered first); the last of them, registered here before the command
    ran, flushes logging and standard output and error and ends the process with ``os._exit``,
    skipping only the teardown. Every file a command writes is closed by the command itself (its
    bytes are the kernel's: ``os._exit`` cannot lose them)."""
    status: list[int] = []
    atexit.register(_end_now, status)
    try:
        application()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # Ctrl-C outside a night (a night's own is reported by `run`)
        err.print("[bold red]error:[/] interrupted", highlight=False)
        code = INTERRUPTED
    stop_process_threads()  # idle now: the lake's part threads, the S3 client's reads
    if isinstance(code, int | None):  # a message instead of a number: Python prints it, then tears down
        status.append(code or 0)
    sys.exit(code)


def _end_now(status: list[int]) -> None:
    """The exit handler :func:`launch` registers: the command's status without the teardown,
    once every other handler registered after it (temporary folders, Dagster's, the process
    pools') ran. Of those registered before it, at import, logging's is called here; pyarrow's
    S3 finalizer only guards a teardown."""
    if not status:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`): what could be written was
            stream.flush()
    os._exit(status[-1])


def call(action: Callable[[], T]) -> T:
    with reported():
        return action()


def _version(value: bool) -> None:
    if value:
        console.print(f"tourneylake {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Harvest the poker statistics service into a Parquet lake and DuckDB."""


# ----------------------------------------------------------------------------------- sandbox


@app.command()
def sandbox(
    host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8765,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic world and of the faults.")] = 7,
    latency_ms: Annotated[float, typer.Option("--latency-ms", help="Added latency per request.")] = 0.0,
    faults: Annotated[str, typer.Option(help="Fault spec, e.g. '5xx=0.1,drop=0.05,truncate=0.05,parallel=4'.")] = "",
    players: Annotated[int | None, typer.Option(help="Players in the synthetic world.")] = None,
    today: Annotated[str | None, typer.Option(help="The sandbox's date, YYYY-MM-DD (default: today, UTC).")] = None,
    quota_reset: Annotated[
        str | None, typer.Option("--quota-reset", help="When every daily quota resets, HH:MM UTC (TOURNEYLAKE_QUOTA_RESET_UTC).")
    ] = None,
    free_no_data: Annotated[
        bool,
        typer.Option(
            "--free-no-data", help="Charge nothing for lookups that return no data (unknown player, opted out, network gone)."
        ),
    ] = False,
) -> None:
    """Serve the sandbox emulator (Ctrl-C stops it).

    In the foreground, on loopback, as a service at http://HOST:PORT (app `demo`)."""
    from tourneylake.sandbox import Costs, Faults, serve_forever

    settings = settings_from(quota_reset_utc=quota_reset)
    with reported():
        kwargs: dict[str, Any] = {
            "host": host,
            "port": port,
            "seed": seed,
            "latency_ms": latency_ms,
            "faults": Faults.parse(faults),
            "quota_reset_s": settings.quota_reset_s,
            "costs": Costs(no_data=0 if free_no_data else 1),
        }
    if players is not None:
        kwargs["players"] = players
    if today:
        kwargs["today"] = parse_night(today, "--today")
    call(lambda: serve_forever(**kwargs))


# -------------------------------------------------------------------------------------- init


@app.command()
def init(
    folder: Annotated[Path, typer.Argument(help="The project folder to make (made if missing; nothing in it is overwritten).")],
    sandbox: Annotated[bool, typer.Option("--sandbox", help="A folder that runs the built-in sandbox at once.")] = False,
) -> None:
    """Make a project folder: watchlist, settings, Dagster instance.

    A commented watchlist.yaml, .env.example naming every setting, what `dagster dev` needs there
    (dagster_home/, workspace.yaml), the notebooks, a .gitignore and NEXT.md. Never overwrites."""
    from tourneylake.project import ProjectExists, init_project

    try:
        made = init_project(folder, sandbox=sandbox)
    except ProjectExists as exc:
        raise fail(str(exc), USAGE) from None
    except TourneylakeError as exc:
        raise fail(str(exc)) from None
    kind = "on the built-in sandbox" if made.sandbox else "for a live account"
    console.print(f"made {folder}, a tourneylake project {kind}: {', '.join(made.files)}", highlight=False, soft_wrap=True)
    console.print(f"next: cd {folder} and read NEXT.md", highlight=False)


# ------------------------------------------------------------------------------------ doctor


def print_diagnosis(found: Any) -> None:
    console.print(f"[bold]tourneylake doctor[/]: {found.service} ({found.source}), the night of {found.night}", highlight=False)
    for finding in found.findings:
        mark = "[green]✓[/]" if finding.ok else "[red]✗[/]"
        console.print(f"{mark} {finding.check}: {escape(finding.text)}", highlight=False, soft_wrap=True)
    for plan in found.plans:
        for target, why in plan.deferred:
            pair = f"{target.network}/{target.player}" + (f" [{target.filter_name}]" if target.filter_name else "")
            console.print(f"  deferred: {pair}: {why}", highlight=False, markup=False)


@app.command()
def doctor(
    sandbox: Sandbox = False,
    data_dir: DataDir = None,
    watchlist: WatchlistFile = None,
    as_json: Annotated[bool, typer.Option("--json", help="Everything as one JSON document on standard output.")] = False,
) -> None:
    """Check the account and tonight's plan, at no search.

    The URL answers, the application and credentials are accepted, searches left and the quota
    reset, every watchlist pair against the service's metadata, tonight's plan. Exit 1 on any
    problem, each one line naming what to change."""
    from tourneylake.doctor import diagnose

    settings = settings_from(sandbox, data_dir=data_dir, watchlist=watchlist)
    found = call(lambda: diagnose(settings, parse_night(None)))
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(found.as_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        sys.stdout.buffer.flush()
    else:
        print_diagnosis(found)
    if found.problems:
        raise fail(f"{len(found.problems)} problem(s), each above with what to change")
    if not as_json:
        console.print("[green]ok[/]: a night can run (`tourneylake run`)", highlight=False)


# ------------------------------------------------------------------------------------ budget


def _plan_row(report: Any, target: Any) -> str:
    if report.needs_conversion(target):
        cost = report.costs.get("nlq", 1)
        return f"needs conversion ({cost} search{'es' if cost != 1 else ''})"
    return ""


def print_budget(report: Any) -> None:
    whose = f", account {report.account}" if report.account else ""
    console.print(f"[bold]Budget for the night of {report.night.isoformat()}[/] ({report.source}{whose})", highlight=False)
    if report.remaining is None:
        console.print(f"Searches left now: [yellow]unknown[/] ({report.remaining_note or 'not reported'})", highlight=False)
    else:
        console.print(f"Searches left now: [bold]{report.remaining}[/]", highlight=False)
    cap = "none" if report.max_searches_per_run is None else str(report.max_searches_per_run)
    affordable = "unlimited" if report.affordable is None else report.affordable
    console.print(
        f"Run cap: {cap}; spent tonight: {report.spent_tonight}; reserve: {report.reserve}; affordable tonight: {affordable}",
        highlight=False,
    )
    if report.quota is not None:
        console.print(report.quota.describe(), highlight=False)
    owed = report.drain
    if owed is not None and owed.owed:
        would = min(owed.spendable // max(report.costs.get("player_summary", 1), 1), owed.owed)
        now = f"nothing now: {owed.held_back}" if owed.held_back else f"{would} now ({owed.kept()})"
        console.print(
            f"Backlog: {owed.owed} pair(s) owed to earlier nights; `tourneylake drain` would fetch {now}", highlight=False
        )
    console.print("Costs: " + ", ".join(f"{name} {cost}" for name, cost in sorted(report.costs.items())), highlight=False)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)

    plan = Table(title=f"Tonight's plan: {len(report.planned)} calls, {report.searches_planned} searches")
    for column in ("#", "network", "player", "filter", "note"):
        plan.add_column(column)
    for number, target in enumerate(report.planned, 1):
        plan.add_row(str(number), target.network, target.player, target.filter_name or "(unfiltered)", _plan_row(report, target))
    console.print(plan)

    for title, items in (
        ("Deferred to a later night", report.deferred),
        ("Skipped (free, known to fail or done)", report.skipped),
    ):
        table = Table(title=f"{title}: {len(items)}")
        for column in ("network", "player", "filter", "why"):
            table.add_column(column)
        for target, why in items:
            extra = _plan_row(report, target)
            table.add_row(
                target.network, target.player, target.filter_name or "(unfiltered)", why + (f"; {extra}" if extra else "")
            )
        console.print(table)

    spend = Table(title="Spend per night (search ledger)")
    spend.add_column("night")
    spend.add_column("searches", justify="right")
    spend.add_column("metered calls", justify="right")
    for when, (searches, rows) in sorted(report.spend_per_night.items()):
        spend.add_row(when.isoformat(), str(searches), str(rows))
    if not report.spend_per_night:
        spend.add_row("(none yet)", "0", "0")
    console.print(spend)


@app.command()
def budget(
    sandbox: Sandbox = False,
    data_dir: DataDir = None,
    watchlist: WatchlistFile = None,
    night: Night = None,
) -> None:
    """Searches left and the night's plan (free).

    What would be deferred and why, and the spend per night; the only call is a free one."""
    from tourneylake.night.forecast import budget_reports

    settings = settings_from(sandbox, data_dir=data_dir, watchlist=watchlist)
    when = parse_night(night)
    reports = call(lambda: budget_reports(settings, when))  # one per account when the watchlist lists several
    for report in reports:
        print_budget(report)
    unread = [report for report in reports if report.remaining is None]
    if unread:  # the plan above assumed an unknown count: say so with the exit status too
        whose = ", ".join(f"account {r.account}" for r in unread if r.account) or "the account"
        raise fail(f"could not read the searches left on {whose}: {unread[0].remaining_note or 'not reported'}")


# ------------------------------------------------------------------------------------ status

_SHOWN_TABLES = ("player_snapshots", "player_statistics", "tournaments")


def _size(count: int | None) -> str:
    if count is None:
        return "none"
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{count} B"


def print_status(found: Any, night: date | None, pairs: int) -> None:
    source = found.source or "nothing harvested yet"
    console.print(
        f"[bold]tourneylake status[/]: {found.data_dir} ({source}); lake {_size(found.lake_bytes)}, "
        f"warehouse {_size(found.warehouse_bytes)}",
        highlight=False,
    )
    nights = found.nights
    earlier = "" if night or len(nights) == found.nights_held else f", the latest {len(nights)} shown (--nights N)"
    table = Table(
        title=f"{found.nights_held} night(s) held: what each holds (its last run's, or the last that loaded it)" + earlier
    )
    for column in ("night", "outcome", "searches", "fetched", "deferred", "failed", "not attempted", *_SHOWN_TABLES):
        table.add_column(column, justify="left" if column in ("night", "outcome") else "right", no_wrap=column == "outcome")
    for one in nights:
        state = one.outcome + ("" if one.loaded or one.outcome in ("failed", "interrupted", "unrecorded") else ", not loaded")
        if one.last_attempt:  # what the night holds, and beside it how its last run ended
            state += f"\nlast run: {one.last_attempt}"
        counts = (
            one.night_searches,
            one.fetched,
            one.deferred,
            one.failed,
            one.misconfigured,
        )  # the night's bill, then its counts
        table.add_row(
            one.night.isoformat(), state, *(f"{n:,}" for n in counts), *(f"{one.rows.get(t, 0):,}" for t in _SHOWN_TABLES)
        )
    console.print(table)
    for one in nights:
        if one.reason:
            ended = one.last_attempt or one.outcome
            kept = f" (the night keeps what an earlier run loaded: {one.outcome})" if one.last_attempt else ""
            console.print(f"{one.night} last run {ended}: {one.reason}{kept}", highlight=False, markup=False)
    if night is not None and nights and nights[0].rows:
        console.print("rows: " + ", ".join(f"{t} {n:,}" for t, n in sorted(nights[0].rows.items())), highlight=False)
    outstanding = [f"{n.night} {line}" for n in nights for line in n.outstanding]
    if outstanding:
        console.print(f"pairs still outstanding (deferred, failed or not attempted; not harvested since): {len(outstanding):,}")
        for line in outstanding[-pairs:]:
            console.print(f"- {line}", highlight=False, markup=False)
        if len(outstanding) > pairs:
            console.print(f"  … and {len(outstanding) - pairs:,} earlier (--pairs N, or --json)", highlight=False)
    left = ", ".join(f"{name} {'unknown' if n is None else f'{n:,}'}" for name, n in found.searches_left.items())
    console.print(f"searches left: {left or 'unknown'}" + (f" (as of {found.searches_left_at})" if left else ""), highlight=False)


def print_schedule(found: Any) -> None:
    if found.schedule_on:
        console.print(
            f"nightly schedule: on ({found.schedule_source}); next run {found.next_run:%Y-%m-%d %H:%M} UTC "
            f"(TOURNEYLAKE_SCHEDULE_CRON '{found.schedule_cron}', while Dagster's daemon runs)",
            highlight=False,
        )
    else:
        state = "off" if found.schedule_on is False else "not known"
        console.print(
            f"nightly schedule: {state} ({found.schedule_source}); to run every night: {found.how_to_schedule}",
            highlight=False,
        )


#: How ``status`` learns whether the nightly schedule is on: Dagster's instance knows, and the
#: library never imports Dagster, so the console script (``pipelines/cli.py``) adds its reader
#: here (a function of no argument returning a ``tourneylake.night.status.ScheduleState``).
schedule_readers: list[Callable[[], Any]] = []


@app.command()
def status(
    data_dir: DataDir = None,
    night: Annotated[str | None, typer.Option("--date", help="Show one night: its rows per table and outstanding pairs.")] = None,
    latest: Annotated[
        int, typer.Option("--nights", min=0, help="The latest nights to show (the JSON has them all, unless --date).")
    ] = 31,
    pairs: Annotated[int, typer.Option("--pairs", min=0, help="Outstanding pairs to list (the latest).")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Everything as one JSON document on standard output.")] = False,
) -> None:
    """The nights held and how each one's last run ended.

    What each night holds, searches, rows, pairs still outstanding, searches left, sizes, whether
    the nightly schedule is on. Reads the lake (and Dagster's instance); calls nothing."""
    from tourneylake.night.status import lake_status
    from tourneylake.runtime.without_pandas import skip_pandas_sniffing

    skip_pandas_sniffing()  # a status makes no data frame (pyarrow would import pandas to ask)
    settings = settings_from(data_dir=data_dir)
    chosen = parse_night(night) if night else None
    found = call(lambda: lake_status(settings, latest=None if as_json else latest, night=chosen))
    if not as_json:
        print_status(found, chosen, pairs)  # the lake first: asking Dagster's instance takes its import
    if schedule_readers:
        found.with_schedule(schedule_readers[-1](), settings.schedule_cron)
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(found.as_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        sys.stdout.buffer.flush()
        return
    print_schedule(found)


# ------------------------------------------------------------------------------------- drain


def print_drain(outcome: Any) -> None:
    plan = outcome.plan
    whose = f" (account {outcome.account})" if outcome.account else ""
    console.print(f"[bold]Drain{whose}[/]: {plan.quota.describe()}", highlight=False)
    console.print(plan.kept(), highlight=False)
    if plan.held_back:
        console.print(f"[yellow]nothing spent[/]: {plan.held_back}", highlight=False)
    else:
        console.print(f"spendable now: {plan.spendable}", highlight=False)
    nights = sorted(outcome.nights.items())
    console.print(
        f"owed: {plan.owed} pair(s); fetched {outcome.fetched} with {outcome.searches_spent} search(es) "
        f"({', '.join(f'{night}: {done.fetched}' for night, done in nights) or 'none'}); still owed: {outcome.still_owed}",
        highlight=False,
    )
    for night, dropped in sorted(plan.dropped.items()):
        for (network, player, filter_name), why in sorted(dropped.items()):
            suffix = f" [{filter_name}]" if filter_name else ""
            console.print(f"dropped from the backlog: {night} {network}/{player}{suffix}: {why}", highlight=False, markup=False)
    if outcome.failed:
        console.print(f"[red]failed ({len(outcome.failed)})[/]:")
        for target, why in outcome.failed:
            console.print(f"- {target}: {why}", highlight=False, markup=False)


@app.command()
def drain(
    sandbox: Sandbox = False,
    data_dir: DataDir = None,
    watchlist: WatchlistFile = None,
    now: Annotated[
        bool,
        typer.Option(
            "--now",
            help="Drain now, outside the window before the reset (what the next scheduled night needs is still kept).",
        ),
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Spend expiring searches on pairs owed to earlier nights.

    The searches that expire at the next quota reset, each pair into its own night: in the last
    TOURNEYLAKE_DRAIN_LEAD_MIN minutes before the reset, what is left above the reserve and the
    next scheduled night's plan; exit 3 when some pair failed."""
    from tourneylake.night.drain import drain as drain_backlog
    from tourneylake.night.drain import load_drained
    from tourneylake.night.endpoint import connect
    from tourneylake.night.watchlist import load_watchlist

    setup_logging(verbose)
    settings = settings_from(sandbox, data_dir=data_dir, watchlist=watchlist)
    if not settings.watchlist.is_file():
        raise fail(f"watchlist {settings.watchlist} not found (set --watchlist or TOURNEYLAKE_WATCHLIST)")
    listed = call(lambda: load_watchlist(settings.watchlist))
    with reported(), connect(settings) as endpoint:
        outcomes = drain_backlog(settings, listed, endpoint.base_url, anytime=now)
        loaded = load_drained(settings, outcomes)
    for outcome in outcomes:
        print_drain(outcome)
    if loaded:
        console.print(f"warehouse: loaded {', '.join(night.isoformat() for night in loaded)}", highlight=False)
    if any(outcome.failed for outcome in outcomes):
        raise fail("drain partial: some pairs failed (listed above); they stay owed", 3)


# ------------------------------------------------------------------------------------ filter


@filter_app.command("check")
def filter_check(
    expression: Annotated[str, typer.Argument(help="A filter, e.g. 'Class:SNG;Date:30D'.")],
    data_dir: DataDir = None,
    sandbox: Sandbox = False,
) -> None:
    """Check a filter's syntax and (with metadata in the lake or the sandbox) its constraints. Free."""
    from tourneylake.questions import check_filter

    settings = settings_from(sandbox, data_dir=data_dir)
    problems = call(lambda: check_filter(settings, expression))
    if problems:
        for problem in problems:
            err.print(f"[red]✗[/] {problem}", highlight=False)
        raise typer.Exit(1)
    console.print(f"[green]✓[/] {expression}", highlight=False)


@filter_app.command("ask")
def filter_ask(
    question: Annotated[str, typer.Argument(help="A question, e.g. 'sit and gos in the last 30 days'.")],
    timezone: Annotated[str | None, typer.Option(help="Time zone for dates in the question.")] = None,
    locale: Annotated[str | None, typer.Option(help="Locale for numbers and dates.")] = None,
    data_dir: DataDir = None,
    sandbox: Sandbox = False,
) -> None:
    """Convert a question to a filter (1 search the first time; cached after)."""
    from tourneylake.questions import ask

    settings = settings_from(sandbox, data_dir=data_dir)
    expression, cost = call(lambda: ask(settings, question, timezone, locale))
    console.print(expression, highlight=False)
    err.print(f"searches spent: {cost}", highlight=False)


# -------------------------------------------------------------------------------------- hand


@hand_app.command("analyze")
def hand_analyze(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A hand history file.")],
    lang: Annotated[str | None, typer.Option("--lang", help="Language of the analysis (default English).")] = None,
    data_dir: DataDir = None,
    sandbox: Sandbox = False,
) -> None:
    """Analyse one hand (5 searches; an already analysed hand costs nothing)."""
    from tourneylake.hands import analyze_hand

    settings = settings_from(sandbox, data_dir=data_dir)
    analysis, cost = call(lambda: analyze_hand(settings, file.read_bytes(), lang))
    console.print(analysis, highlight=False)
    err.print(f"searches spent: {cost}", highlight=False)


# ----------------------------------------------------------------------------------- rebuild


@app.command()
def rebuild(
    night: Annotated[str | None, typer.Option("--date", help="One night, YYYY-MM-DD.")] = None,
    first: Annotated[str | None, typer.Option("--from", help="First night of a range, YYYY-MM-DD.")] = None,
    last: Annotated[str | None, typer.Option("--to", help="Last night of a range, YYYY-MM-DD.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every night the lake holds (and a fresh warehouse file).")] = False,
    data_dir: DataDir = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=0,
            max=64,
            help="Processes rebuilding nights side by side (0: one per core, at most 8; 1: one after another).",
        ),
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Re-make nights from the lake's raw answers (free).

    No network call, no search: every table of the nights, then the warehouse."""
    from tourneylake.runtime.without_pandas import skip_pandas_sniffing
    from tourneylake.tables.rebuild import rebuild as run_rebuild

    setup_logging(verbose)
    skip_pandas_sniffing()
    chosen = sum(bool(x) for x in (night, first or last, every))
    if chosen != 1:
        raise fail("say which nights: --date D, --from D --to D, or --all", USAGE)
    nights: list[date] | None = None
    if night:
        nights = [parse_night(night)]
    elif first or last:
        if not (first and last):
            raise fail("--from and --to go together", USAGE)
        start, end = parse_night(first, "--from"), parse_night(last, "--to")
        if start > end:
            raise fail(f"--from {start} is after --to {end}", USAGE)
        nights = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    settings = settings_from(data_dir=data_dir, rebuild_workers=workers)
    if nights is not None and len(nights) > 1:
        from tourneylake.lake.lake import Lake
        from tourneylake.tables.rebuild import nights_in_lake

        held = set(nights_in_lake(Lake.of(settings)))
        asked, nights = nights, [d for d in nights if d in held]  # a range may span nights that never ran
        if not nights:
            raise fail(f"the lake in {settings.data_dir} holds no night from {asked[0]} to {asked[-1]}")
    outcome = call(lambda: run_rebuild(settings, nights))
    table = Table(title=f"Rebuilt {len(outcome.nights)} night(s) from raw answers, 0 searches")
    table.add_column("table")
    table.add_column("rows rebuilt", justify="right")
    table.add_column("rows in warehouse", justify="right")
    for name in sorted(set(outcome.rows) | set(outcome.warehouse_rows)):
        table.add_row(name, f"{outcome.rows.get(name, 0):,}", f"{outcome.warehouse_rows.get(name, 0):,}")
    console.print(table)
    if outcome.fresh_warehouse:
        console.print(f"warehouse rebuilt into a fresh file: {settings.warehouse_path}", highlight=False)
    if outcome.unusable:
        console.print(f"answers that still cannot be read ({len(outcome.unusable)}, kept in the lake):", highlight=False)
        for line in outcome.unusable:
            console.print(f"- {line}", highlight=False, markup=False)


# ------------------------------------------------------------------------------------- query

EXAMPLE = "example"


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL to run on the warehouse, or 'example'.")] = EXAMPLE,
    data_dir: DataDir = None,
    limit: Annotated[
        int | None, typer.Option(help="Rows to show (the rest are counted); default 50 in a table, all in CSV/JSON.")
    ] = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="Write the answer as CSV (with a header) to standard output.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Write the answer as JSON lines (one object per row).")] = False,
) -> None:
    """Run SQL on the warehouse and print the answer.

    'example' runs the packaged example (players by profit in USD)."""
    if as_csv and as_json:
        raise fail("--csv and --json: choose one", USAGE)
    import duckdb

    from tourneylake.tables.warehouse import Warehouse, sql_dir

    settings = settings_from(data_dir=data_dir)
    path = call(lambda: settings.warehouse_path)
    if not path.is_file():
        raise fail(f"no warehouse at {path}: run `tourneylake run` first")
    if sql == EXAMPLE:
        text = call(lambda: (sql_dir() / "examples" / "top_players_usd.sql").read_text())
        if not (as_csv or as_json):
            console.print("[bold]Example:[/] players by profit in USD over every harvested tournament\n")
    else:
        text = sql
    with reported(), Warehouse(path, read_only=True) as db:
        try:
            result = db.query(text)
        except duckdb.Error as exc:
            raise fail(one_line(exc) + _why_empty(db)) from None
    if result is None:
        return
    if as_csv or as_json:
        _write_rows(result if limit is None else result.slice(0, limit), "csv" if as_csv else "json")
        return
    import pyarrow as pa

    shown = 50 if limit is None else limit
    table = Table()
    for name, field in zip(result.column_names, result.schema, strict=True):
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
        table.add_column(name, justify="right" if numeric else "left")
    for row in result.slice(0, shown).to_pylist():
        table.add_row(*(_cell(name, value) for name, value in row.items()))
    console.print(table)
    if result.num_rows > shown:
        console.print(f"… and {result.num_rows - shown:,} more rows (--limit to show more)", highlight=False)


# ------------------------------------------------------------------------------------ report


@app.command()
def report(
    night: Annotated[
        str | None, typer.Option("--date", help="The night, YYYY-MM-DD (default: the latest the warehouse holds).")
    ] = None,
    data_dir: DataDir = None,
    open_it: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
) -> None:
    """Write the night's HTML report and print its path.

    Beside the warehouse, reports/<night>.html, with a page per player."""
    from tourneylake.report import write_report

    settings = settings_from(data_dir=data_dir)
    wanted = parse_night(night) if night else None
    with reported():
        written = write_report(
            settings.warehouse_path, wanted, watchlist=settings.watchlist
        )  # one line when there is nothing to report
    console.print(
        f"report of the night of {written.night}: {written.path} ({written.player_pages} player pages)", highlight=False
    )
    if open_it:
        import webbrowser

        webbrowser.open(written.path.resolve().as_uri())


def _why_empty(db: Any) -> str:
    """What a failed query on a warehouse that holds no night yet, or no models, is missing."""
    import duckdb

    try:
        names = {row[0] for row in db.connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "player_snapshots" not in names or not db.connection.execute("SELECT count(*) FROM player_snapshots").fetchone()[0]:
            return f" (the warehouse {db.path} holds no night yet: run `tourneylake run` first)"
        if "player_results_usd" not in names:
            return " (the models are not built on this warehouse yet: `tourneylake run` builds them after its night)"
    except duckdb.Error:
        return f" (the warehouse {db.path} holds no tables: run `tourneylake run` first)"
    return ""


def _cell(column: str, value: Any) -> str:
    """A value as the table shows it: money, percentages and counts written by their kind, as the
    report writes them (``tourneylake.figures``: a column's kind is in its name, ``…_usd``,
    ``…_pct``); any other number at full precision (0.917264 stays 0.917264)."""
    from tourneylake.figures import figure, kind_of

    if isinstance(value, float | int) and not isinstance(value, bool):
        return figure(column, value) if kind_of(column, value) in ("money", "percent", "count") else format(value, ",")
    return "" if value is None else str(value)


def _write_rows(result: Any, fmt: str) -> None:
    """The whole answer, machine-readable, on standard output (nothing else is printed there)."""
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(result, sys.stdout.buffer)
    else:
        import orjson

        def plain(value: Any) -> Any:  # DECIMAL as a JSON number; dates and the rest as text
            return float(value) if isinstance(value, Decimal) else str(value)

        for row in result.to_pylist():
            sys.stdout.buffer.write(orjson.dumps(row, default=plain, option=orjson.OPT_APPEND_NEWLINE))
    sys.stdout.buffer.flush()


__all__ = [
    "FAILED",
    "INTERRUPTED",
    "USAGE",
    "ConfigError",
    "app",
    "fail",
    "launch",
    "main",
    "one_line",
    "parse_night",
    "reported",
    "settings_from",
    "setup_logging",
    "short",
]

if __name__ == "__main__":  # pragma: no cover
    launch(app)
