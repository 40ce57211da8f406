"""The ``tourneylake`` command line.

``run`` executes the same Dagster job the nightly schedule runs, in-process, then prints a
summary. Every other command uses the library directly. Errors end with a non-zero exit and
the reason in one line.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from tourneylake.config import ConfigError, Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Harvest the poker statistics service into a Parquet lake and DuckDB.")
filter_app = typer.Typer(no_args_is_help=True, help="Check filters, or convert a question into one.")
hand_app = typer.Typer(no_args_is_help=True, help="Hand analysis (subscribers, 5 searches).")
app.add_typer(filter_app, name="filter")
app.add_typer(hand_app, name="hand")

# Piped output (CI logs, `make run | tee`) gets a wide console instead of 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=140)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=140)

DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (TOURNEYLAKE_DATA_DIR).")]
Sandbox = Annotated[bool, typer.Option("--sandbox", help="Use the built-in sandbox whatever TOURNEYLAKE_BASE_URL says.")]
Format = Annotated[str | None, typer.Option("--format", help="json or xml (TOURNEYLAKE_FORMAT).")]


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def load_settings(**overrides: Any) -> Settings:
    sandbox = overrides.pop("sandbox", False)
    try:
        settings = Settings.from_env(**{k: v for k, v in overrides.items() if v is not None})
        if sandbox:
            settings = settings.with_overrides(base_url="sandbox")
        return settings
    except ConfigError as exc:
        raise fail(str(exc)) from None


def setup_logging(verbose: bool) -> None:
    handler = RichHandler(console=err, show_path=False, show_time=False, markup=False)
    logging.basicConfig(level=logging.WARNING, handlers=[handler], format="%(message)s", force=True)
    logging.getLogger("tourneylake").setLevel(logging.DEBUG if verbose else logging.INFO)


# --------------------------------------------------------------------------------------- run


@app.command()
def run(
    night: Annotated[str | None, typer.Option("--date", help="The night to harvest, YYYY-MM-DD (default: today, UTC).")] = None,
    sandbox: Sandbox = False,
    watchlist: Annotated[Path | None, typer.Option("--watchlist", help="Watchlist YAML (TOURNEYLAKE_WATCHLIST).")] = None,
    data_dir: DataDir = None,
    fmt: Format = None,
    max_searches: Annotated[int | None, typer.Option("--max-searches", help="Cap for this run (TOURNEYLAKE_MAX_SEARCHES_PER_RUN).")] = None,
    reserve: Annotated[int | None, typer.Option("--reserve", help="Searches never spent (TOURNEYLAKE_RESERVE_SEARCHES).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Parallel calls (TOURNEYLAKE_CONCURRENCY).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Run one night through Dagster (the nightly job), then print what it did."""
    from pipelines.nightly import run_night  # the CLI is the one library module that drives Dagster

    setup_logging(verbose)
    settings = load_settings(
        sandbox=sandbox,
        watchlist=watchlist,
        data_dir=data_dir,
        format=fmt,
        max_searches_per_run=max_searches,
        reserve_searches=reserve,
        concurrency=concurrency,
    )
    try:
        when = date.fromisoformat(night) if night else datetime.now(UTC).date()
    except ValueError:
        raise fail(f"--date must be YYYY-MM-DD, got {night!r}") from None
    if not settings.watchlist.is_file():
        raise fail(f"watchlist {settings.watchlist} not found (set --watchlist or TOURNEYLAKE_WATCHLIST)")
    report = run_night(settings, when)
    report.print(console)
    if not report.success:
        raise fail(f"run failed: {report.failure}")


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
) -> None:
    """Serve the sandbox emulator in the foreground (Ctrl-C stops it)."""
    from tourneylake.sandbox import Faults, serve_forever

    kwargs: dict[str, Any] = {"host": host, "port": port, "seed": seed, "latency_ms": latency_ms, "faults": Faults.parse(faults)}
    if players is not None:
        kwargs["players"] = players
    if today:
        kwargs["today"] = date.fromisoformat(today)
    serve_forever(**kwargs)


# ------------------------------------------------------------------------------------ budget


@app.command()
def budget(
    sandbox: Sandbox = False,
    data_dir: DataDir = None,
    watchlist: Annotated[Path | None, typer.Option("--watchlist")] = None,
    night: Annotated[str | None, typer.Option("--date", help="The night to plan (default: today, UTC).")] = None,
) -> None:
    """Searches left, tonight's plan, what would be deferred and why, and the spend per night."""
    from tourneylake.economy import budget_report

    settings = load_settings(sandbox=sandbox, data_dir=data_dir, watchlist=watchlist)
    when = date.fromisoformat(night) if night else datetime.now(UTC).date()
    try:
        budget_report(settings, when).print(console)
    except Exception as exc:  # noqa: BLE001 - the CLI's contract is one line
        raise fail(_one_line(exc)) from None


# ------------------------------------------------------------------------------------ filter


@filter_app.command("check")
def filter_check(
    expression: Annotated[str, typer.Argument(help="A filter, e.g. 'Class:SNG;Date:30D'.")],
    data_dir: DataDir = None,
    sandbox: Sandbox = False,
) -> None:
    """Check a filter's syntax and (with metadata in the lake or the sandbox) its constraints. Free."""
    from tourneylake.economy import check_filter

    settings = load_settings(sandbox=sandbox, data_dir=data_dir)
    problems = check_filter(settings, expression)
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
    from tourneylake.economy import ask

    settings = load_settings(sandbox=sandbox, data_dir=data_dir)
    try:
        expression, cost = ask(settings, question, timezone, locale)
    except Exception as exc:  # noqa: BLE001
        raise fail(_one_line(exc)) from None
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
    from tourneylake.economy import analyze_hand

    settings = load_settings(sandbox=sandbox, data_dir=data_dir)
    try:
        analysis, cost = analyze_hand(settings, file.read_bytes(), lang)
    except Exception as exc:  # noqa: BLE001
        raise fail(_one_line(exc)) from None
    console.print(analysis, highlight=False)
    err.print(f"searches spent: {cost}", highlight=False)


# ------------------------------------------------------------------------------------- query

EXAMPLE = "example"


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL to run on the warehouse, or 'example'.")] = EXAMPLE,
    data_dir: DataDir = None,
) -> None:
    """Run SQL on the warehouse and print the answer ('example' runs sql/examples/top_players_usd.sql)."""
    from tourneylake.warehouse import Warehouse

    settings = load_settings(data_dir=data_dir)
    path = settings.data_dir / "warehouse.duckdb"
    if not path.is_file():
        raise fail(f"no warehouse at {path}: run `tourneylake run` first")
    if sql == EXAMPLE:
        text = (Path(__file__).resolve().parent.parent / "sql" / "examples" / "top_players_usd.sql").read_text()
        console.print("[bold]Example:[/] players by profit in USD over every harvested tournament\n")
    else:
        text = sql
    db = Warehouse(path, read_only=True)
    try:
        result = db.query(text)
    except Exception as exc:  # noqa: BLE001
        raise fail(_one_line(exc)) from None
    finally:
        db.close()
    table = Table(*result.column_names)
    for row in result.slice(0, 50).to_pylist():
        table.add_row(*(_cell(v) for v in row.values()))
    console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    return "" if value is None else str(value)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
