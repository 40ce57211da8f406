"""The console script ``tourneylake``: the library's command line plus ``run``.

``run`` executes the same Dagster job the nightly schedule runs, in-process, then prints a
summary. It is added here because it drives Dagster and the library (``tourneylake.cli``) never
imports Dagster; Dagster itself is imported only when ``run`` runs, so the other commands start
fast.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from tourneylake.api.filters import FIRST_NIGHT
from tourneylake.cli import (
    INTERRUPTED,
    USAGE,
    Sandbox,
    Verbose,
    app,
    console,
    ended_night,
    err,
    fail,
    launch,
    order_commands,
    reported,
    schedule_readers,
    settings_from,
    setup_logging,
)
from tourneylake.config import unwritable
from tourneylake.errors import ConfigError
from tourneylake.packaged import check_packaged
from tourneylake.pipelines.schedule_state import nightly_schedule_state
from tourneylake.runtime.without_pandas import skip_pandas_sniffing

if TYPE_CHECKING:
    from tourneylake.night.progress import ProgressSnapshot

__all__ = ["PARTIAL", "WATCHLIST", "app", "main"]

schedule_readers.append(nightly_schedule_state)  # `status` says whether the nightly schedule is on

#: The exit status of a night that ran but could not fetch every pair (0 ok, 1 failed, 2 usage).
PARTIAL = 3
#: The exit status of a night whose watchlist kept pairs from being attempted (an invalid
#: filter, an unknown network, a question the service will not convert): the others were harvested.
WATCHLIST = 4


@contextmanager
def progress_bar() -> Iterator[None]:
    """On a terminal, a bar per stage (done/total, rate, time left, searches spent) instead of
    the periodic progress lines; elsewhere (a pipe, a log file) the lines, unchanged."""
    if not err.is_terminal:
        yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from tourneylake.night.progress import listening

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:,.1f}/s"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[searches]} searches"),
    )
    tasks: dict[str, Any] = {}
    lines = logging.getLogger("tourneylake.night.progress")
    level = lines.level
    with Progress(*columns, console=err, transient=True) as bar:

        def show(snapshot: ProgressSnapshot) -> None:
            task = tasks.get(snapshot.stage)
            if task is None:
                task = tasks[snapshot.stage] = bar.add_task(snapshot.stage, total=snapshot.total, rate=0.0, searches=0)
            bar.update(task, completed=snapshot.done, rate=snapshot.rate, searches=f"{snapshot.searches or 0:,}")

        lines.setLevel(logging.WARNING)
        try:
            with listening(show):
                yield
        finally:
            lines.setLevel(level)


_SUMMED = ("players_fetched", "players_reused_from_lake", "deferred", "skipped", "failed", "misconfigured", "searches_spent")


def harvest_of(report: Any) -> dict[str, Any]:
    """What the night's harvest did: ``player_summaries``'s metadata, or with several accounts
    the sum of their ``player_summaries/<account>`` assets (failed pairs named with their
    account, searches left per account)."""
    accounts = {key.split("/", 1)[1]: meta for key, meta in report.assets.items() if key.startswith("player_summaries/")}
    if not accounts:
        return report.assets.get("player_summaries", {})
    merged: dict[str, Any] = {key: sum(meta.get(key) or 0 for meta in accounts.values()) for key in _SUMMED}
    for pairs in ("failed_pairs", "misconfigured_pairs"):
        merged[pairs] = [f"{name}: {line}" for name, meta in accounts.items() for line in meta.get(pairs) or []]
    merged["searches_left_by_account"] = {name: meta.get("searches_left") for name, meta in accounts.items()}
    merged["quota_reset_at"] = next((meta["quota_reset_at"] for meta in accounts.values() if meta.get("quota_reset_at")), None)
    unusable = report.assets.get("player_summaries", {}).get("unusable", 0)
    merged["failed"] += unusable  # answers paid but unreadable: listed by `tourneylake rebuild`
    merged["coverage_changes"] = report.assets.get("player_summaries", {}).get("coverage_changes")
    return merged


def print_run(report: Any) -> None:
    loaded = report.assets.get("warehouse", {}).get("tables")
    if loaded is not None:
        table = Table(title=f"tourneylake — night of {report.night.isoformat()}")
        table.add_column("table")
        table.add_column("rows loaded", justify="right")
        table.add_column("rows in warehouse", justify="right")
        for record in sorted(loaded.records, key=lambda r: r.data["table"]):
            table.add_row(record.data["table"], f"{record.data['loaded']:,}", f"{record.data['rows']:,}")
        console.print(table)
    players = harvest_of(report)
    if players:
        console.print(
            f"players fetched: {players.get('players_fetched', 0):,}, "
            f"reused from the lake: {players.get('players_reused_from_lake', 0):,}, "
            f"deferred: {players.get('deferred', 0):,}, skipped: {players.get('skipped', 0):,}, "
            f"failed: {players.get('failed', 0):,}",
            highlight=False,
        )
        by_account = players.get("searches_left_by_account")
        left = players.get("searches_left")
        shown = "unknown" if left is None else f"{left:,}"
        if by_account is not None:
            shown = ", ".join(f"{name} {'unknown' if n is None else f'{n:,}'}" for name, n in by_account.items())
        console.print(f"searches spent: {players.get('searches_spent', 0):,}, searches left: {shown}", highlight=False)
        if players.get("quota_reset_at"):
            reset = datetime.fromisoformat(players["quota_reset_at"])
            console.print(f"next quota reset: {reset:%Y-%m-%d %H:%M} UTC; the searches left expire at it", highlight=False)
        deferred = "deferred (owed to this night: `tourneylake drain` spends searches that would expire on them)"
        for key, title in (("deferred_players", deferred), ("skipped_players", "skipped")):
            listed = players.get(key)
            if listed and listed != "_none_":
                console.print(f"{title}:", highlight=False)
                console.print(listed, highlight=False, markup=False)
        changes = players.get("coverage_changes")
        if changes and changes != "_none_":
            console.print("[yellow]coverage changed[/] (what the service no longer shows; earlier nights keep their rows):")
            console.print(changes, highlight=False, markup=False)
        for key, title in (("failed_pairs", "failed"), ("misconfigured_pairs", "not attempted: fix the watchlist")):
            pairs = players.get(key) or []
            if pairs:
                console.print(f"[red]{title} ({len(pairs)})[/]:")
                for line in pairs:
                    console.print(f"- {line}", highlight=False, markup=False)
    meta = report.assets.get("metadata", {})
    if meta:
        state = (
            "downloaded"
            if meta.get("downloaded")
            else "unchanged (hash current)"
            if meta.get("called")
            else "already held for this night"
        )
        console.print(
            f"metadata: {state}; currencies without a USD rate: {meta.get('currencies_without_rate', 'none')}", highlight=False
        )
    failed_checks = [name for name, ok in report.checks.items() if not ok]
    if failed_checks:
        console.print(f"[yellow]checks not passing:[/] {', '.join(failed_checks)}")
    console.print(f"run {run_state(report)} in {report.duration_s:.1f} s")  # why it is not ok: the one error line that follows


def run_state(report: Any) -> str:
    """How a night's run ended, as its exit status says it: "ok" only for a run that left nothing
    to fix (0); failed pairs make it partial (3), pairs the watchlist kept from being attempted
    incomplete (4)."""
    if report.interrupted:
        return "[red]interrupted[/]"
    if not report.success:
        return "[red]failed[/]"
    harvest = harvest_of(report)
    if harvest.get("misconfigured"):
        return "[yellow]incomplete: pairs not attempted[/]"
    if harvest.get("failed"):
        return "[yellow]partial[/]"
    return "[green]ok[/]"


def print_total(reports: list[Any]) -> None:
    """One line for several nights: what they did together."""
    players = [harvest_of(report) for report in reports]
    sums = {key: sum(p.get(key) or 0 for p in players) for key in _SUMMED}
    console.print(
        f"[bold]{len(reports)} nights[/] ({reports[0].night} to {reports[-1].night}): "
        f"players fetched {sums['players_fetched']:,}, deferred {sums['deferred']:,}, failed {sums['failed']:,}, "
        f"not attempted {sums['misconfigured']:,}; searches spent {sums['searches_spent']:,} "
        f"in {sum(r.duration_s for r in reports):.1f} s",
        highlight=False,
    )


def as_the_library_wrote_it(record: logging.LogRecord) -> bool:
    """A library line on the terminal as it was written: in a run, Dagster rewrites each record it
    keeps for the event log as ``job - run id - step - message`` (its original in ``dagster_meta``)."""
    meta = getattr(record, "dagster_meta", None)
    if isinstance(meta, dict) and isinstance(meta.get("orig_message"), str):
        record.msg, record.args = meta["orig_message"], ()
    return True


@app.command()
def run(
    night: Annotated[
        str | None, typer.Option("--date", help="The night, YYYY-MM-DD: a UTC day that has ended (default: yesterday).")
    ] = None,
    sandbox: Sandbox = False,
    watchlist: Annotated[Path | None, typer.Option("--watchlist", help="Watchlist YAML (TOURNEYLAKE_WATCHLIST).")] = None,
    data_dir: Annotated[
        str | None, typer.Option("--data-dir", help="Data directory or fsspec URL (TOURNEYLAKE_DATA_DIR).")
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="json or xml (TOURNEYLAKE_FORMAT).")] = None,
    max_searches: Annotated[
        int | None, typer.Option("--max-searches", help="Cap for this run (TOURNEYLAKE_MAX_SEARCHES_PER_RUN).")
    ] = None,
    reserve: Annotated[int | None, typer.Option("--reserve", help="Searches never spent (TOURNEYLAKE_RESERVE_SEARCHES).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Parallel calls (TOURNEYLAKE_CONCURRENCY).")] = None,
    nights: Annotated[
        int,
        typer.Option("--nights", min=1, max=366, help="Harvest the N nights ending with --date, oldest first (one run each)."),
    ] = 1,
    models: Annotated[
        bool,
        typer.Option(
            "--models/--no-models",
            help="Build the models and the report after the nights (default); --no-models harvests and loads only.",
        ),
    ] = True,
    verbose: Verbose = False,
) -> None:
    """Harvest a night, load it, build the models and the report.

    The night that ended (or the last --nights N), through Dagster's nightly job, the one the
    schedule runs; then what it did. A one-off --watchlist leaves the nightly report as it is."""
    setup_logging(verbose)
    for handler in logging.getLogger().handlers:
        handler.addFilter(as_the_library_wrote_it)
    flags: dict[str, Any] = dict(
        data_dir=data_dir, format=fmt, max_searches_per_run=max_searches, reserve_searches=reserve, concurrency=concurrency
    )
    settings = settings_from(sandbox, watchlist=watchlist, **flags)
    when = ended_night(night)
    if not settings.watchlist.is_file():
        raise fail(f"watchlist {settings.watchlist} not found (set --watchlist or TOURNEYLAKE_WATCHLIST)")
    # The nightly report follows the project's watchlist: a run of another one builds the models only.
    one_off = watchlist is not None and settings.watchlist.resolve() != settings_from(sandbox, **flags).watchlist.resolve()
    from tourneylake.night.accounts import account_settings
    from tourneylake.night.watchlist import load_watchlist

    with reported():
        check_packaged()  # what a night reads from the installation, before anything is called
        problem = unwritable(settings)
        if problem:
            raise ConfigError(problem)
        listed = load_watchlist(settings.watchlist)  # every mistake, with its line, before Dagster starts or anything is called
        for account in listed.accounts:  # and every account's credentials are where it says
            account_settings(settings, account)
        _ = settings.warehouse_path  # a lake at a URL needs TOURNEYLAKE_WAREHOUSE: said before any search
        from tourneylake.tables.worker import prestart, worker_wanted

        if worker_wanted(settings, len(listed.targets())):
            prestart(store=settings.lake_is_remote)  # the tables worker starts on the other core while Dagster is imported
        from tourneylake.pipelines.nightly import run_night  # Dagster is imported only when a night runs
    skip_pandas_sniffing()  # a night makes no data frame

    first = when - timedelta(days=nights - 1)
    if first < FIRST_NIGHT:
        raise fail(f"the service's data starts on {FIRST_NIGHT}: --nights {nights} would start on {first}", USAGE)
    partial: list[str] = []
    reports = []
    loaded = False
    try:
        for day in (when - timedelta(days=back) for back in range(nights - 1, -1, -1)):
            with reported(), progress_bar():
                report = run_night(settings, day)
            print_run(report)
            loaded = loaded or "warehouse" in report.assets
            on = f" (night {day})" if nights > 1 else ""
            if report.interrupted:
                raise fail(f"interrupted{on}: every answer paid for is kept; run the night again to finish it", INTERRUPTED)
            if not report.success:
                raise fail(f"run failed{on}: {report.failure}")
            reports.append(report)
            failed = harvest_of(report).get("failed", 0)
            if failed:
                partial.append(f"{failed} pair(s) failed" + (f" on {day}" if nights > 1 else ""))
    finally:
        if loaded and models:  # once, after the last night loaded (and before a failed night is reported)
            build_models(settings, report=not one_off)
        elif loaded:
            console.print("models: not built (--no-models); the next run builds them", highlight=False)
    if len(reports) > 1:
        print_total(reports)
    misconfigured = sorted({line for report in reports for line in harvest_of(report).get("misconfigured_pairs") or []})
    if misconfigured:
        raise fail(
            f"watchlist: {len(misconfigured)} pair(s) not attempted, fix it and run again: {'; '.join(misconfigured)}", WATCHLIST
        )
    if partial:
        raise fail(f"run partial: {'; '.join(partial)} (listed above); run the night again to retry them", PARTIAL)


def build_models(settings: Any, *, report: bool = True) -> None:
    """The models job (dbt builds the views and runs their tests) on the warehouse the nights
    loaded, and one line on it; ``report=False``: without the nightly report."""
    from tourneylake.pipelines.nightly import run_models

    with reported():
        built = run_models(settings, report=report)
    print_models(built)
    if not report:
        console.print(
            "report: not written (a one-off --watchlist; the nightly report follows the project's, `tourneylake report` writes it)",
            highlight=False,
        )
    if not built.success:
        failing = sorted(name.split(":", 1)[1] for name, ok in built.checks.items() if not ok)
        why = "dbt tests not passing: " + ", ".join(failing) if failing else built.failure
        raise fail(f"models failed: {why}")


def print_models(report: Any) -> None:
    models = [key for key in report.assets if key.startswith("warehouse/")]
    failed = sorted(name.split(":", 1)[1] for name, ok in report.checks.items() if not ok)
    state = "[red]failed[/]" if not report.success else "[yellow]tests failing[/]" if failed else "[green]ok[/]"
    console.print(
        f"models {state}: {len(models)} built, {len(report.checks) - len(failed)} of {len(report.checks)} tests passed "
        f"in {report.duration_s:.1f} s",
        highlight=False,
    )
    if failed:
        console.print(f"[yellow]tests not passing:[/] {', '.join(failed)}")
    page = report.value("nightly_report", "path")
    if page is not None:
        console.print(f"report: {page}", highlight=False)


order_commands(app)  # `run` first


def main() -> None:
    """The console script ``tourneylake`` (see :func:`tourneylake.cli.launch`)."""
    launch(app)


if __name__ == "__main__":  # pragma: no cover
    main()
