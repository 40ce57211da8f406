"""The nightly report: one HTML page a person opens instead of reading tables.

For a night, ``reports/<night>.html`` beside the warehouse file holds a chart of the watchlist (each
player's average ROI with its 95 % interval, and the group's cumulative profit), the leaderboard
(the night's month to date and every night held), the statistics that moved since the previous
night, the bill (searches per account and resource, searches left, the watchlist's pairs not
harvested) and a link per player to ``reports/<night>/<player>.html``: their numbers per period
and rolling window, a chart of their cumulative profit and their latest results. Every number
comes from the dbt models (``sql/models``); this module only picks the rows and lays them out,
each figure written by its kind (:mod:`tourneylake.figures`). Charts are inline SVG; the glyphs
of the names the page shows that a browser may lack are embedded (:mod:`tourneylake.fonts`).
Plain f-strings, every value escaped (player names hold quotes, ``<`` and non-ASCII); no script,
no network.

It lives beside the command line, above ``tables/`` (it reads the warehouse) and ``night/`` (it
reads the watchlist to tell which pairs a night did not harvest).
"""

from __future__ import annotations

import hashlib
import html
import math
import re
import shutil
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from tourneylake.errors import TourneylakeError
from tourneylake.figures import count, money, percent, words
from tourneylake.fonts import NAMES_FAMILY, font_face_css
from tourneylake.lake.storage import atomic_write
from tourneylake.tables.warehouse import Warehouse

__all__ = ["Report", "ReportError", "coverage", "player_page_name", "reports_dir", "write_report"]

Row = dict[str, Any]

#: Results listed on a player's page.
LATEST_RESULTS = 12
#: Statistics a mover row is kept for: numbers that mean something as a change (not timestamps).
MOVER_TYPES = ("Currency", "Number", "Percentage")
#: Movers kept per player and filter (``mover_rank`` of the ``movers`` model).
MOVERS_PER_PAIR = 3
#: The finish distribution's classes (``player_entries.finish``), best first.
FINISHES = ("won", "final_table", "top_10pct", "cashed", "out")
#: The periods a player's page shows, as the models name them, with their label.
PLAYER_PERIODS = (
    ("last_7_days", "last 7 days"),
    ("last_30_days", "last 30 days"),
    ("last_90_days", "last 90 days"),
    ("last_365_days", "last 365 days"),
    ("month", "month-to-date"),
    ("year", "year-to-date"),
    ("all", "every night held"),
)
#: Rows of the night's page's tables (the leaderboard's, the movers'); the rest are counted.
SHOWN = 50
#: Nights in the bill's recent-nights table.
RECENT_NIGHTS = 7


class ReportError(TourneylakeError):
    """The report cannot be written (no warehouse, no such night); the message says what to do."""


@dataclass
class Report:
    """A written report: its page, the night, and a short markdown summary (Dagster's preview)."""

    night: date
    path: Path
    player_pages: int
    preview: str
    counts: dict[str, int] = field(default_factory=dict)


def reports_dir(warehouse_path: Path) -> Path:
    """Where reports go: ``reports/`` beside the warehouse file they are read from."""
    return warehouse_path.parent / "reports"


def player_page_name(network: str, player: str) -> str:
    """A player's page file name: readable, ASCII, and unique (a digest of network and name)."""
    ascii_name = unicodedata.normalize("NFKD", f"{network}-{player}").encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:40] or "player"
    digest = hashlib.sha256(f"{network}\0{player}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}.html"


# ------------------------------------------------------------------------------- the data
def _rows(wh: Warehouse, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
    table = wh.query(sql, params)
    return [] if table is None else table.to_pylist()


def coverage(wh: Warehouse, watchlist: Path | None, nights: tuple[date, date] | None = None) -> list[Row]:
    """Per night held: the pairs (player, filter) of today's watchlist, how many the night
    harvested, how many it called for without an answer, and how many it did not call for
    (deferred by the budget, or skipped) with their share. The warehouse does not hold a night's
    plan, so "wanted" is the watchlist as it is now; without one, only what was harvested.
    ``nights``: the nights from the first to the last given alone, read from their rows only (the
    report's recent nights: a year's history does not make it slower)."""
    pairs = _watchlist_pairs(watchlist)
    wanted = pa.table(
        {"network": [p[0] for p in pairs], "player": [p[1] for p in pairs], "filter_name": [p[2] for p in pairs]},
        schema=pa.schema([("network", pa.string()), ("player", pa.string()), ("filter_name", pa.string())]),
    )
    wh.connection.register("watchlist_pairs", wanted)
    try:
        return _rows(
            wh,
            """
            WITH nights AS (SELECT DISTINCT snapshot_date AS night FROM search_ledger WHERE {held}
                            UNION SELECT DISTINCT snapshot_date FROM player_snapshots WHERE {held}),
            harvested AS (SELECT DISTINCT snapshot_date AS night, network, player, filter_name FROM player_snapshots
                          WHERE {held}),
            called AS (SELECT DISTINCT snapshot_date AS night, network, player, coalesce(filter_name, '') AS filter_name
                       FROM search_ledger WHERE player IS NOT NULL AND {held})
            SELECT n.night,
                   (SELECT count(*) FROM watchlist_pairs) AS pairs_wanted,
                   (SELECT count(*) FROM harvested h WHERE h.night = n.night) AS pairs_harvested,
                   (SELECT count(*) FROM called c WHERE c.night = n.night AND NOT EXISTS (
                       SELECT 1 FROM harvested h WHERE (h.night, h.network, h.player, h.filter_name)
                                                     = (c.night, c.network, c.player, c.filter_name))) AS pairs_failed,
                   (SELECT count(*) FROM watchlist_pairs w WHERE NOT EXISTS (
                       SELECT 1 FROM called c WHERE (c.night, c.network, c.player, c.filter_name)
                                                  = (n.night, w.network, w.player, w.filter_name))
                       AND NOT EXISTS (SELECT 1 FROM harvested h WHERE (h.night, h.network, h.player, h.filter_name)
                                                  = (n.night, w.network, w.player, w.filter_name))) AS pairs_not_called
            FROM nights AS n ORDER BY n.night
            """.format(held="true" if nights is None else "snapshot_date BETWEEN $first AND $last"),
            None if nights is None else {"first": nights[0], "last": nights[1]},
        )
    finally:
        wh.connection.unregister("watchlist_pairs")


def _watchlist_pairs(watchlist: Path | None) -> list[tuple[str, str, str]]:
    if watchlist is None or not watchlist.is_file():
        return []
    from tourneylake.night.watchlist import WatchlistError, load_watchlist

    try:
        listed = load_watchlist(watchlist)
    except WatchlistError:
        return []
    return [(player.network, player.name, name or "") for player, name in listed.targets()]


def latest_night(wh: Warehouse) -> date | None:
    rows = _rows(wh, "SELECT max(snapshot_date) AS night FROM player_snapshots")
    return rows[0]["night"] if rows else None


@dataclass
class _Data:
    night: date
    nights: list[date]
    month: list[Row]
    all_time: list[Row]
    movers: list[Row]
    bill: list[Row]
    recent_bill: list[Row]
    month_bill: list[Row]
    coverage: list[Row]
    players: list[Row]  # network, player, page
    results: dict[tuple[str, str], dict[str, Row]]  # (network, player) → period → row
    profits: dict[tuple[str, str], list[float]]  # cumulative profit in USD, entry by entry
    latest: dict[tuple[str, str], list[Row]]
    group: list[Row]  # the watchlist's profit day by day, and its running sum
    movers_by_player: dict[tuple[str, str], list[Row]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for mover in self.movers:
            self.movers_by_player.setdefault((mover["network"], mover["player"]), []).append(mover)


def _gather(wh: Warehouse, night: date, watchlist: Path | None) -> _Data:
    at = {"night": night}
    board = "SELECT * FROM leaderboard WHERE period = $period AND period_start IS NOT DISTINCT FROM $start ORDER BY qualified DESC, rank_by_profit NULLS LAST, entries DESC, network, player"
    month_start = night.replace(day=1)
    month = _rows(wh, board, {"period": "month", "start": month_start})
    all_time = _rows(wh, board, {"period": "all", "start": None})
    movers = _rows(
        wh,
        "SELECT * FROM movers WHERE snapshot_date = $night AND mover_rank <= $top AND list_contains($types, type) "
        "ORDER BY network, player, filter_name, mover_rank",
        {**at, "top": MOVERS_PER_PAIR, "types": list(MOVER_TYPES)},
    )
    bill = _rows(wh, "SELECT * FROM bill_nightly WHERE night = $night ORDER BY account, resource", at)
    recent_bill = _rows(
        wh,
        "SELECT night, sum(searches)::BIGINT AS searches, sum(retries)::BIGINT AS retries, min(fewest_searches_left) AS fewest_searches_left "
        "FROM bill_nightly WHERE night <= $night GROUP BY night ORDER BY night DESC LIMIT $n",
        {**at, "n": RECENT_NIGHTS},
    )
    month_bill = _rows(wh, "SELECT * FROM bill_monthly WHERE month = $month ORDER BY account", {"month": month_start})
    players = _rows(
        wh,
        "SELECT DISTINCT network, player FROM player_snapshots WHERE found AND snapshot_date <= $night "
        "UNION SELECT DISTINCT network, player FROM player_entries WHERE day <= $night ORDER BY network, player",
        at,
    )
    results: dict[tuple[str, str], dict[str, Row]] = {}
    for row in _rows(
        wh,
        "SELECT * FROM player_results_by_period WHERE period IN ('all', 'last_7_days', 'last_30_days', 'last_90_days', "
        "'last_365_days') OR (period = 'month' AND period_start = $month) OR (period = 'year' AND period_start = $year)",
        {"month": month_start, "year": night.replace(month=1, day=1)},
    ):
        results.setdefault((row["network"], row["player"]), {})[row["period"]] = row
    profits: dict[tuple[str, str], list[float]] = {}
    for row in _rows(
        wh,
        "SELECT network, player, sum(profit_usd) OVER (PARTITION BY network, player ORDER BY started_at, tournament_id) AS total "
        "FROM player_entries WHERE profit_usd IS NOT NULL AND day <= $night ORDER BY network, player, started_at, tournament_id",
        at,
    ):
        profits.setdefault((row["network"], row["player"]), []).append(row["total"])
    latest: dict[tuple[str, str], list[Row]] = {}
    for row in _rows(
        wh,
        "SELECT network, player, started_at, tournament_name, position, total_entrants, finish, buy_in_usd, profit_usd "
        "FROM player_entries WHERE day <= $night "
        "QUALIFY row_number() OVER (PARTITION BY network, player ORDER BY started_at DESC, tournament_id DESC) <= $n "
        "ORDER BY network, player, started_at DESC, tournament_id DESC",
        {**at, "n": LATEST_RESULTS},
    ):
        latest.setdefault((row["network"], row["player"]), []).append(row)
    nights = [r["night"] for r in _rows(wh, "SELECT DISTINCT snapshot_date AS night FROM player_snapshots ORDER BY 1")]
    group = _rows(
        wh,
        "SELECT day, sum(profit_usd) AS profit_usd, sum(sum(profit_usd)) OVER (ORDER BY day) AS cumulative_profit_usd "
        "FROM player_days WHERE day <= $night AND profit_usd IS NOT NULL GROUP BY day ORDER BY day",
        at,
    )
    recent_nights = (min((r["night"] for r in recent_bill), default=night), night)
    return _Data(
        night, nights, month, all_time, movers, bill, recent_bill, month_bill, coverage(wh, watchlist, recent_nights),
        [{**p, "page": player_page_name(p["network"], p["player"])} for p in players],
        results, profits, latest, group,
    )  # fmt: skip


# ------------------------------------------------------------------------------- formatting
def esc(value: object) -> str:
    """Text for HTML, quotes included (``None`` is a dash)."""
    return "—" if value is None else html.escape(str(value), quote=True)


def interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"{percent(low)} … {percent(high)}"


def finish_words(finish: str | None) -> str:
    """A finish class (``player_entries.finish``) in words: ``final_table`` → ``final table``."""
    return "—" if finish is None else words(finish)


def statistic_value(type_: str | None, value: float | None) -> str:
    """A served statistic's value by its metadata type: Currency as money, Percentage with 1
    decimal, a Number as a count."""
    if type_ == "Currency":
        return money(value)
    if type_ == "Percentage":
        return percent(value)
    return count(value)


def _table(table_id: str, headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    """A table whose cells are already HTML (escaped by the caller), in a box that scrolls it
    sideways when it is wider than the page, so the page itself never does."""
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty" id="{table_id}">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f'<div class="wide"><table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def td(text: str, value: float | None = None, *, numeric: bool = True) -> str:
    """A cell of formatted text (escaped here); red when ``value`` is negative."""
    css = ' class="num neg"' if value is not None and value < 0 else (' class="num"' if numeric else "")
    return f"<td{css}>{esc(text)}</td>"


def _link(href: str, text: str) -> str:
    return f'<td><a href="{esc(href)}">{esc(text)}</a></td>'


# ------------------------------------------------------------------------------- the charts
def _svg(title: str, width: int, height: int, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">'
        f'<title>{esc(title)}</title><text x="{width / 2}" y="16" text-anchor="middle" class="title">{esc(title)}</text>{body}</svg>'
    )


def _ticks(low: float, high: float, n: int = 4) -> list[float]:
    """About ``n`` round values from ``low`` to ``high`` (and 0 when it is in between)."""
    span = (high - low) or 1.0
    raw = span / n
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if raw <= step * m)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _money_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """The USD axis's round values from ``low`` to ``high``, each with its label."""
    return [(v, money(v)) for v in _ticks(low, high)]


def _money_margin(ticks: list[tuple[float, str]]) -> int:
    """The left margin that holds the axis's title (turned, at x 14) beside its widest label
    (the charts' 11 px text: about 7 px a character), so a million never runs into the title."""
    return max(80, 32 + 7 * max(len(label) for _, label in ticks))


def _money_axis(ticks: list[tuple[float, str]], y: Callable[[float], float], left: float, right: float, middle: float) -> str:
    """The USD axis: a grid line and a label per tick (the zero line darker) and its title."""
    lines = "".join(
        f'<line x1="{left - 4}" x2="{right}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="{"zero" if v == 0 else "grid"}"/>'
        f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{esc(label)}</text>'
        for v, label in ticks
    )
    return f'{lines}<text x="14" y="{middle}" text-anchor="middle" transform="rotate(-90 14 {middle})">cumulative profit (USD)</text>'


def profit_chart(totals: Sequence[float], title: str, *, width: int = 640, height: int = 240) -> str:
    """An inline SVG line of cumulative profit (USD) over entries in start order: title, both
    axes labelled with their units, the zero line, and the first and last values marked."""
    if not totals:
        return '<p class="empty">No entries with a USD buy-in to chart.</p>'
    low, high = min(0.0, *totals), max(0.0, *totals)
    ticks = _money_ticks(low, high)
    left, right, top, bottom = _money_margin(ticks), 16, 28, 40
    span = (high - low) or 1.0
    n = len(totals)

    def x(i: int) -> float:
        return left + (width - left - right) * (i / max(n - 1, 1))

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - (v - low) / span)

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(totals))
    colour = "#1a7f37" if totals[-1] >= 0 else "#c62828"
    body = (
        f"{_money_axis(ticks, y, left, width - right, (top + height - bottom) / 2)}"
        f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        f'<text x="{x(0):.1f}" y="{height - bottom + 16}" text-anchor="middle">1</text>'
        f'<text x="{x(n - 1):.1f}" y="{height - bottom + 16}" text-anchor="middle">{esc(count(n))}</text>'
        f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">entries, in start order (count)</text>'
    )
    return _svg(title, width, height, body)


def roi_chart(rows: list[Row], title: str, *, width: int = 600) -> str:
    """Each player's average ROI (a dot) with its 95 % interval (a bar), one row each, best first:
    green when the whole interval is above 0, red when below, grey when it crosses 0 (the sample
    cannot tell yet); each name with its entries, the profit beside it. ``rows``: the leaderboard's."""
    shown = [r for r in rows if r["avg_roi_pct"] is not None]
    if not shown:
        return '<p class="empty">No player with a paid entry to chart.</p>'
    shown.sort(key=lambda r: -(r["avg_roi_pct"] or 0))
    left, right, top, bottom, row_height = 190, 90, 44, 42, 22
    height = top + bottom + row_height * len(shown)
    values = [v for r in shown for v in (r["roi_ci_low_pct"], r["roi_ci_high_pct"], r["avg_roi_pct"]) if v is not None]
    low, high = min(0.0, *values), max(0.0, *values)
    span = (high - low) or 1.0

    def x(v: float) -> float:
        return left + (width - left - right) * (v - low) / span

    grid = "".join(
        f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top - 4}" y2="{height - bottom + 4}" class="{"zero" if v == 0 else "grid"}"/>'
        f'<text x="{x(v):.1f}" y="{height - bottom + 18}" text-anchor="middle">{esc(percent(v))}</text>'
        for v in _ticks(low, high)
    )
    marks = []
    for i, r in enumerate(shown):
        cy = top + row_height * i + row_height / 2
        lo, hi, mean = r["roi_ci_low_pct"], r["roi_ci_high_pct"], r["avg_roi_pct"]
        state = "win" if lo is not None and lo > 0 else "lose" if hi is not None and hi < 0 else "open"
        bar = (
            f'<line x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{cy:.1f}" y2="{cy:.1f}" class="interval {state}"/>'
            if lo is not None and hi is not None
            else ""
        )
        marks.append(
            f'<text x="{left - 8}" y="{cy + 4:.1f}" text-anchor="end" class="name">{esc(r["player"])} ({esc(count(r["entries"]))})</text>{bar}'
            f'<circle cx="{x(mean):.1f}" cy="{cy:.1f}" r="4" class="mean {state}"/>'
            f'<text x="{width - right + 8}" y="{cy + 4:.1f}" class="{"neg" if (r["profit_usd"] or 0) < 0 else "pos"}">'
            f"{esc(money(r['profit_usd']))}</text>"
        )
    body = (
        grid
        + "".join(marks)
        + f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">average ROI with its 95 % interval (%)</text>'
        + f'<text x="{left - 8}" y="{top - 10}" text-anchor="end" class="head">player (entries)</text>'
        + f'<text x="{width - right + 8}" y="{top - 10}" class="head">profit</text>'
    )
    return _svg(title, width, height, body)


def group_chart(days: list[Row], title: str, *, width: int = 560, height: int = 260) -> str:
    """The watchlist's cumulative profit (USD), day by day: a step line over the days played."""
    if not days:
        return '<p class="empty">No day with a USD profit to chart.</p>'
    totals = [float(d["cumulative_profit_usd"]) for d in days]
    first, last = days[0]["day"], days[-1]["day"]
    length = max((last - first).days, 1)
    low, high = min(0.0, *totals), max(0.0, *totals)
    ticks = _money_ticks(low, high)
    left, right, top, bottom = _money_margin(ticks), 16, 30, 42
    span = (high - low) or 1.0

    def x(day: date) -> float:
        return left + (width - left - right) * (day - first).days / length

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - (v - low) / span)

    points, before = [], 0.0  # a step: flat to the day, then up (or down) by the day's profit
    for d, total in zip(days, totals, strict=True):
        points += [f"{x(d['day']):.1f},{y(before):.1f}", f"{x(d['day']):.1f},{y(total):.1f}"]
        before = total
    colour = "#1a7f37" if totals[-1] >= 0 else "#c62828"
    body = (
        f"{_money_axis(ticks, y, left, width - right, (top + height - bottom) / 2)}"
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="2"/>'
        f'<text x="{left}" y="{height - bottom + 16}" text-anchor="start">{esc(first.isoformat())}</text>'
        f'<text x="{width - right}" y="{height - bottom + 16}" text-anchor="end">{esc(last.isoformat())}</text>'
        f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle">day the tournaments started (UTC)</text>'
    )
    return _svg(title, width, height, body)


# ------------------------------------------------------------------------------- the pages
_STYLE = """
body{font:14px/1.45 "@names",system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1f2328}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta,.note,.empty{color:#59636e}.wide{overflow-x:auto}table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #eaeef2;text-align:left;white-space:nowrap}th{background:#f6f8fa;font-weight:600}
td.num{text-align:right}.neg{color:#c62828}nav a{margin-right:14px}ul.players{columns:3}
.charts{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}
svg.chart text{font-family:"@names","DejaVu Sans",sans-serif;font-size:11px;fill:#59636e}svg.chart text.title{font-size:13px;fill:#1f2328;font-weight:600}
svg.chart text.name{font-size:12px;fill:#1f2328}svg.chart text.neg{fill:#c62828}svg.chart text.pos{fill:#1a7f37}
svg.chart line.grid{stroke:#d0d7de;stroke-width:1}svg.chart line.zero{stroke:#8c959f;stroke-width:1.2}
svg.chart line.interval{stroke-width:4;stroke-linecap:round;opacity:.45}svg.chart .win{stroke:#1a7f37;fill:#1a7f37}
svg.chart .lose{stroke:#c62828;fill:#c62828}svg.chart .open{stroke:#6e7781;fill:#6e7781}
""".replace("@names", NAMES_FAMILY)


def _page(title: str, body: str) -> str:
    """A whole page; the glyphs of its text that a browser's own fonts may lack (CJK names) come with it."""
    faces = font_face_css(html.unescape(re.sub(r"<[^>]*>", "", title + body)))
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{faces}{_STYLE}</style></head>'
        f"<body>{body}</body></html>\n"
    )


def _board(table_id: str, rows: list[Row], pages: dict[tuple[str, str], str], night_dir: str) -> str:
    qualified = [r for r in rows if r["qualified"]]
    shown = [
        [
            td(count(r["rank_by_profit"])),
            _player_cell(r, pages, night_dir),
            td(r["network"], numeric=False),
            td(count(r["entries"])),
            td(money(r["abi_usd"])),
            td(money(r["profit_usd"]), r["profit_usd"]),
            td(percent(r["total_roi_pct"]), r["total_roi_pct"]),
            td(percent(r["avg_roi_pct"]), r["avg_roi_pct"]),
            td(interval(r["roi_ci_low_pct"], r["roi_ci_high_pct"])),
            td("too few entries" if r["roi_sample_too_small"] else "", numeric=False),
            td(percent(r["itm_pct"])),
            td(count(r["wins"])),
        ]
        for r in qualified[:SHOWN]
    ]
    headers = ["#", "player", "network", "entries", "ABI", "profit", "total ROI", "average ROI", "average ROI: 95 % interval", "sample", "ITM", "wins"]  # fmt: skip
    table = _table(table_id, headers, shown, "No player has enough entries in this period yet.")
    if len(qualified) > SHOWN:
        table += f'<p class="note">… and {count(len(qualified) - SHOWN)} more ranked players (the leaderboard model).</p>'
    others = [r for r in rows if not r["qualified"] and r["entries"] is not None]
    if others:
        names = ", ".join(f"{esc(r['player'])} ({esc(count(r['entries']))})" for r in others)
        table += f'<p class="note">Not ranked (fewer than {esc(count(others[0]["min_entries"]))} entries): {names}.</p>'
    withheld = [r for r in rows if r["nights_withheld"]]
    if withheld:
        names = ", ".join(f"{esc(r['player'])} ({esc(count(r['nights_withheld']))} night(s))" for r in withheld)
        table += (
            f'<p class="note withheld">Withheld by the service (not authorised: the player has not opted in), left out of '
            f"the ranking and the sums, never counted as $0: {esc(count(len(withheld)))} player(s): {names}.</p>"
        )
    return table


def _biggest_moves(movers: list[Row]) -> list[Row]:
    """Movers by the size of their relative change (a change from 0 last, by its size)."""
    return sorted(movers, key=lambda m: (m["change_pct"] is None, -abs(m["change_pct"] or 0), -abs(m["change"] or 0)))


def _player_cell(row: Row, pages: dict[tuple[str, str], str], night_dir: str) -> str:
    page = pages.get((row["network"], row["player"]))
    return td(row["player"], numeric=False) if page is None else _link(f"{night_dir}/{page}", row["player"])


def _movers_section(data: _Data, pages: dict[tuple[str, str], str], night_dir: str) -> str:
    rows = [
        [
            _player_cell(m, pages, night_dir),
            td(m["filter_name"] or "unfiltered", numeric=False),
            td(m["statistic"], numeric=False),
            td(statistic_value(m["type"], m["previous_value_number"])),
            td(statistic_value(m["type"], m["value_number"])),
            td(statistic_value(m["type"], m["change"]), m["change"]),
            td(percent(m["change_pct"]), m["change_pct"]),
            td(money(m["change_usd"]) if m["change_usd"] is not None else "", m["change_usd"]),
        ]
        for m in _biggest_moves(data.movers)[:SHOWN]
    ]
    if len(data.movers) > SHOWN:
        rows.append([f'<td colspan="8" class="note">… and {count(len(data.movers) - SHOWN)} more on the players\' pages</td>'])
    return (
        '<h2 id="movers">Movers since the previous night</h2>'
        f'<p class="note">The {MOVERS_PER_PAIR} served statistics per player and filter that moved most, biggest relative change first.</p>'
        + _table(
            "movers",
            ["player", "filter", "statistic", "previous", "now", "change", "change (%)", "change (USD)"],
            rows,
            "Nothing moved: no statistic was harvested on two nights yet.",
        )
    )


def _coverage_line(cover: Row | None) -> str:
    if cover is None:
        return ""
    share = percent(100 * cover["pairs_not_called"] / cover["pairs_wanted"]) if cover["pairs_wanted"] else "—"
    return (
        f'<p id="coverage">Pairs (player, filter) of the watchlist: <b>{esc(count(cover["pairs_wanted"]))}</b>; '
        f"harvested this night: <b>{esc(count(cover['pairs_harvested']))}</b>; called without an answer: "
        f"<b>{esc(count(cover['pairs_failed']))}</b>; not called (deferred by the budget, or skipped): "
        f"<b>{esc(count(cover['pairs_not_called']))}</b> ({esc(share)} of the watchlist).</p>"
    )


def _bill_section(data: _Data) -> str:
    night = [
        [td(b["account"] or "(default)", numeric=False), td(b["resource"].replace("_", " "), numeric=False)]
        + [td(count(b[k])) for k in ("searches", "attempts", "retries", "failed_attempts", "fewest_searches_left")]
        for b in data.bill
    ]
    covered = {c["night"]: c for c in data.coverage}
    recent = [
        [td(r["night"].isoformat(), numeric=False)]
        + [td(count(r[k])) for k in ("searches", "retries", "fewest_searches_left")]
        + [td(count(covered[r["night"]][k]) if r["night"] in covered else "—") for k in ("pairs_harvested", "pairs_not_called")]
        for r in data.recent_bill
    ]
    month = [
        [td(m["account"] or "(default)", numeric=False)]
        + [td(count(m[k])) for k in ("nights", "searches", "players", "searches_per_player_month")]
        for m in data.month_bill
    ]
    return (
        '<h2 id="bill">The bill</h2>'
        + _coverage_line(covered.get(data.night))
        + _table("bill-night", ["account", "resource", "searches", "attempts", "retries", "failed", "searches left (fewest)"], night, "No searches booked to this night.")
        + "<h3>Recent nights</h3>"
        + _table("bill-recent", ["night", "searches", "retries", "searches left (fewest)", "pairs harvested", "pairs not called"], recent, "No searches booked yet.")
        + f"<h3>{esc(data.night.strftime('%B %Y'))}, month-to-date</h3>"
        + _table("bill-month", ["account", "nights", "searches", "players", "searches per player, month-to-date"], month, "No searches this month.")
    )  # fmt: skip


def _charts_section(data: _Data) -> str:
    """The front page's charts: the players' average ROI with its interval (every night held) and
    the watchlist's cumulative profit, day by day."""
    return (
        '<div class="charts" id="charts">'
        + roi_chart(data.all_time, "Each player over every night held: average ROI, 95 % interval, profit")
        + group_chart(data.group, "The watchlist together: cumulative profit (USD)")
        + "</div>"
        + '<p class="note">An interval in green lies wholly above 0 (a winner, on this sample), in red wholly below; '
        "grey crosses 0: the entries cannot tell yet.</p>"
    )


def _night_page(data: _Data, night_dir: str) -> str:
    pages = {(p["network"], p["player"]): p["page"] for p in data.players}
    players = "".join(
        f'<li><a href="{esc(night_dir)}/{esc(p["page"])}">{esc(p["player"])}</a> <span class="meta">{esc(p["network"])}</span></li>'
        for p in data.players
    )
    held = f"{data.nights[0]} to {data.nights[-1]}" if data.nights else "none"
    body = (
        f"<h1>tourneylake — the night of {esc(data.night.isoformat())}</h1>"
        f'<p class="meta">{esc(count(len(data.nights)))} night(s) held ({esc(held)}); written {esc(datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))}. '
        "Money in USD at the rates of the night each tournament started in; periods are UTC days, ISO weeks and months. "
        "Every formula: the documentation's models reference.</p>"
        '<nav><a href="#charts">Charts</a><a href="#leaderboard">Leaderboard</a><a href="#movers">Movers</a><a href="#bill">Bill</a><a href="#players">Players</a></nav>'
        + _charts_section(data)
        + f'<h2 id="leaderboard">Leaderboard — {esc(data.night.strftime("%B %Y"))}, month-to-date</h2>'
        '<p class="note">Ranked by profit among the players with enough entries started in the period. Total ROI = Σ profit ÷ Σ buy-ins; '
        "average ROI = the mean of each entry's ROI, with its 95 % interval (mean ± 1.96 · sd ÷ √n).</p>"
        + _board("leaderboard-month", data.month, pages, night_dir)
        + "<h3>Every night held</h3>"
        + _board("leaderboard-all", data.all_time, pages, night_dir)
        + _movers_section(data, pages, night_dir)
        + _bill_section(data)
        + f'<h2 id="players">Players ({esc(count(len(data.players)))})</h2><ul class="players">{players}</ul>'
    )  # fmt: skip
    return _page(f"tourneylake — {data.night.isoformat()}", body)


def _player_page(data: _Data, player: Row, back: str) -> str:
    key = (player["network"], player["player"])
    periods = data.results.get(key, {})
    chosen = [(label, periods[period]) for period, label in PLAYER_PERIODS if period in periods]
    name = f"{player['player']} ({player['network']})"
    body = (
        f'<p><a href="{esc(back)}">← the night of {esc(data.night.isoformat())}</a></p>'
        f"<h1>{esc(name)}</h1>"
        f'<p class="meta">Rolling windows end at the latest night held; month- and year-to-date are those of {esc(data.night.isoformat())}.</p>'
        + _table("player-results", ["period", "entries", "buy-ins", "ABI", "profit", "total ROI", "average ROI", "average ROI: 95 % interval", "ITM", "days played", "days won", "days lost", "longest run won (days)", "longest run lost (days)"], _result_rows(chosen), "No entries harvested for this player.")
        + "<h2>How the entries finished</h2>"
        '<p class="note">A final table is one of several tables: a field larger than the tournament\'s seats per table. '
        "Percent of the field beaten: (entrants − position) ÷ (entrants − 1), averaged.</p>"
        + _table("player-finishes", ["period", "won", "final table", "top 10 % of the field", "cashed lower", "out", "field beaten"], _finish_rows(chosen), "No entries.")
        + profit_chart(data.profits.get(key, []), f"{name} — cumulative profit (USD)")
        + "<h2>Moved since the previous night</h2>"
        + _table("player-movers", ["filter", "statistic", "previous", "now", "change"], _mover_rows(data, key), "Nothing moved.")
        + "<h2>Latest results</h2>"
        + _table("player-latest", ["start (UTC)", "tournament", "position", "finish", "buy-in", "profit"], _latest_rows(data, key), "No results.")
    )  # fmt: skip
    return _page(f"{name} — {data.night.isoformat()}", body)


def _result_rows(chosen: list[tuple[str, Row]]) -> list[list[str]]:
    """A player's results per period: volume, money, ROI (with its interval), ITM, days won and lost."""
    return [
        [
            td(label, numeric=False),
            td(count(r["entries"])),
            td(money(r["buy_ins_usd"])),
            td(money(r["abi_usd"])),
            td(money(r["profit_usd"]), r["profit_usd"]),
            td(percent(r["total_roi_pct"]), r["total_roi_pct"]),
            td(percent(r["avg_roi_pct"]), r["avg_roi_pct"]),
            td(interval(r["roi_ci_low_pct"], r["roi_ci_high_pct"]) + (" (too few entries)" if r["roi_sample_too_small"] else "")),
            td(percent(r["itm_pct"])),
            td(count(r["active_days"])),
            td(count(r["winning_days"])),
            td(count(r["losing_days"])),
            td(count(r["longest_winning_run_days"])),
            td(count(r["longest_losing_run_days"])),
        ]
        for label, r in chosen
    ]


def _finish_rows(chosen: list[tuple[str, Row]]) -> list[list[str]]:
    """How a player's entries finished per period, each with its share, and the field beaten."""
    return [
        [
            td(label, numeric=False),
            *(td(f"{count(r[f'finish_{k}'])} ({percent(100 * r[f'finish_{k}'] / r['entries'])})") for k in FINISHES),
            td(percent(r["field_beaten_pct"])),
        ]
        for label, r in chosen
    ]


def _mover_rows(data: _Data, key: tuple[str, str]) -> list[list[str]]:
    """The player's statistics that moved since the previous night."""
    return [
        [
            td(m["filter_name"] or "unfiltered", numeric=False),
            td(m["statistic"], numeric=False),
            td(statistic_value(m["type"], m["previous_value_number"])),
            td(statistic_value(m["type"], m["value_number"])),
            td(statistic_value(m["type"], m["change"]), m["change"]),
        ]
        for m in data.movers_by_player.get(key, [])
    ]


def _latest_rows(data: _Data, key: tuple[str, str]) -> list[list[str]]:
    """The player's latest results up to the night."""
    return [
        [
            td(str(e["started_at"])[:16], numeric=False),
            td(e["tournament_name"], numeric=False),
            td(f"{count(e['position'])} of {count(e['total_entrants'])}"),
            td(finish_words(e["finish"]), numeric=False),
            td(money(e["buy_in_usd"])),
            td(money(e["profit_usd"]), e["profit_usd"]),
        ]
        for e in data.latest.get(key, [])
    ]


def _preview(data: _Data, path: Path) -> str:
    """Markdown for Dagster's UI: where the page is, the month's top five, the night's bill."""
    lines = [f"**Report of the night of {data.night}**: `{path}`", "", f"{data.night:%B %Y}, month-to-date:", "", "| # | player | entries | profit (USD) | total ROI |", "|---|---|---|---|---|"]  # fmt: skip
    for r in [r for r in data.month if r["qualified"]][:5]:
        name = str(r["player"]).replace("|", "\\|")
        lines.append(
            f"| {count(r['rank_by_profit'])} | {name} | {count(r['entries'])} | {money(r['profit_usd'])} | {percent(r['total_roi_pct'])} |"
        )
    searches = sum(b["searches"] or 0 for b in data.bill)
    lines += [
        "",
        f"Searches booked to the night: {count(searches)}; movers: {count(len(data.movers))}; player pages: {count(len(data.players))}.",
    ]
    return "\n".join(lines)


def write_report(warehouse_path: Path, night: date | None = None, *, watchlist: Path | None = None) -> Report:
    """Write the report of ``night`` (default: the latest night the warehouse holds) beside the
    warehouse: ``reports/<night>.html`` and a page per player in ``reports/<night>/``."""
    if not warehouse_path.is_file():
        raise ReportError(f"no warehouse at {warehouse_path}: run `tourneylake run` first")
    with Warehouse(warehouse_path, read_only=True) as wh:
        held = latest_night(wh)
        if held is None:
            raise ReportError(f"the warehouse {warehouse_path} holds no night yet: run `tourneylake run` first")
        chosen = night or held
        nights = {r["night"] for r in _rows(wh, "SELECT DISTINCT snapshot_date AS night FROM player_snapshots")}
        if chosen not in nights:
            raise ReportError(f"the warehouse holds no night {chosen} (it holds {min(nights)} to {held})")
        data = _gather(wh, chosen, watchlist)
    out = reports_dir(warehouse_path.resolve())
    night_dir = chosen.isoformat()
    back = f"../{night_dir}.html"
    written = _write_folder(out / night_dir, ((p["page"], _player_page(data, p, back).encode()) for p in data.players))
    page = out / f"{night_dir}.html"
    atomic_write(page, _night_page(data, night_dir).encode(), fsync=False)
    counts = {"players": len(data.players), "movers": len(data.movers), "ranked": sum(1 for r in data.month if r["qualified"])}
    return Report(chosen, page, written, _preview(data, page), counts)


def _write_folder(folder: Path, files: Iterable[tuple[str, bytes]]) -> int:
    """Write ``folder`` anew with ``files`` (name, bytes), whole: made beside it under a temporary
    name, then renamed in place of the old one (a player no longer held leaves with it). One
    rename for the night's pages rather than one per page; a reader finds the old folder or the
    new one, or, for the instant between the two renames, none. Returns the number of files."""
    staging = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.tmp")
    staging.mkdir(parents=True)
    try:
        count = 0
        for name, data in files:
            (staging / name).write_bytes(data)
            count += 1
        old = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.old")
        if folder.exists():
            folder.rename(old)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return count
