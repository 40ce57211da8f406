"""The nightly report on the shared three-night warehouse (``conftest.three_nights``): the models
job wrote it, its numbers are the models', written by kind, its front page charts the players and
the group, its words are words, its links resolve, names are escaped and come with their glyphs,
and ``tourneylake report`` writes any night held. Content is checked, not pixels."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.end_to_end.conftest import CAPPED_NIGHT, NIGHTS, Harvest
from tests.helpers import copy_warehouse
from tourneylake.cli import app
from tourneylake.figures import count, figure, money, percent, words
from tourneylake.fonts import NAMES_FAMILY
from tourneylake.report import _board, group_chart, player_page_name, profit_chart, write_report
from tourneylake.tables.models import build_models

pytestmark = [pytest.mark.xdist_group("notebook"), pytest.mark.slow]

NASTY = '<script>alert("x")</script> & Zoë O\'Brien'


class Page(HTMLParser):
    """A page's tables (id → rows of cell texts), ids, links, elements and text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.elements: set[str] = set()
        self.text: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.elements.add(tag)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))
        if tag == "table":
            self._table = str(found.get("id"))
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, table: str) -> list[dict[str, str]]:
        header, *body = self.tables[table]
        return [dict(zip(header, row, strict=False)) for row in body]


def read(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def models(warehouse: Path, sql: str, *params: object) -> list[dict]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_the_models_job_writes_the_last_nights_report(three_nights: Harvest) -> None:
    meta = three_nights.models.assets["nightly_report"]
    page = three_nights.data / "reports" / f"{NIGHTS[-1]}.html"
    assert meta["path"] == str(page) and page.is_file()
    assert meta["night"] == NIGHTS[-1].isoformat() and meta["player_pages"] == 4
    assert f"Report of the night of {NIGHTS[-1]}" in meta["preview"] and "| # | player |" in meta["preview"]


def test_the_leaderboard_and_the_bill_are_the_models_numbers(three_nights: Harvest) -> None:
    night = NIGHTS[-1]
    page = read(write_report(three_nights.warehouse, night, watchlist=three_nights.watchlist).path)
    board = models(
        three_nights.warehouse,
        "SELECT * FROM leaderboard WHERE period = 'all' AND qualified ORDER BY rank_by_profit, entries DESC, network, player",
    )
    shown = page.rows("leaderboard-all")
    assert [r["player"] for r in shown] == [b["player"] for b in board] and board
    for row, expected in zip(shown, board, strict=True):
        assert row["profit"] == money(expected["profit_usd"]) and row["entries"] == count(expected["entries"])
        assert row["#"] == count(expected["rank_by_profit"])
    ledger = models(three_nights.warehouse, "SELECT sum(cost) AS searches FROM search_ledger WHERE snapshot_date = ?", night)
    assert sum(int(r["searches"].replace(",", "")) for r in page.rows("bill-night")) == ledger[0]["searches"] > 0
    movers = models(three_nights.warehouse, "SELECT count(*) AS n FROM movers WHERE snapshot_date = ? AND mover_rank <= 3 AND type <> 'Timestamp'", night)  # fmt: skip
    assert len(page.rows("movers")) == movers[0]["n"] > 0, "the statistics moved since the night before"


def test_a_capped_night_shows_the_pairs_it_did_not_harvest(three_nights: Harvest) -> None:
    page = read(write_report(three_nights.warehouse, CAPPED_NIGHT, watchlist=three_nights.watchlist).path)
    coverage = " ".join("".join(page.text).split())
    assert "Pairs (player, filter) of the watchlist: 5; harvested this night: 2; called without an answer: 0; not called (deferred by the budget, or skipped): 3 (60.0 % of the watchlist)" in coverage  # fmt: skip
    recent = {r["night"]: r for r in page.rows("bill-recent")}
    assert set(recent) == {n.isoformat() for n in NIGHTS[:2]}, "nights up to the report's"
    assert (
        recent[CAPPED_NIGHT.isoformat()]["pairs not called"] == "3" and recent[NIGHTS[0].isoformat()]["pairs not called"] == "0"
    )


def test_every_link_resolves_and_each_player_page_holds_their_numbers(three_nights: Harvest) -> None:
    written = write_report(three_nights.warehouse, watchlist=three_nights.watchlist)
    page = read(written.path)
    pages = [link for link in page.links if not link.startswith("#")]
    assert len(set(pages)) == written.player_pages == 4
    for link in page.links:
        if link.startswith("#"):
            assert link[1:] in page.ids, link
            continue
        target = written.path.parent / link
        assert target.is_file(), link
        player = read(target)
        assert all((target.parent / back).is_file() for back in player.links), player.links
    geri = read(written.path.parent / str(written.night) / player_page_name("PokerStars", "Borbas.Geri"))
    expected = {
        r["period"]: r
        for r in models(three_nights.warehouse, "SELECT * FROM player_results_by_period WHERE player = 'Borbas.Geri' AND period NOT IN ('day', 'week')")
    }  # fmt: skip
    shown = {r["period"]: r for r in geri.rows("player-results")}
    for period, label in (("all", "every night held"), ("last_7_days", "last 7 days"), ("last_30_days", "last 30 days"), ("year", "year-to-date")):  # fmt: skip
        row = expected[period]
        assert shown[label]["entries"] == count(row["entries"]) and shown[label]["profit"] == money(row["profit_usd"]), period
        assert shown[label]["days won"] == count(row["winning_days"]), period
        assert shown[label]["longest run lost (days)"] == count(row["longest_losing_run_days"]), period
    assert "svg" in geri.elements and "Borbas.Geri (PokerStars) — cumulative profit (USD)" in geri.text


def test_names_are_escaped(three_nights: Harvest, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse.duckdb"
    copy_warehouse(three_nights.warehouse, warehouse)
    with duckdb.connect(str(warehouse)) as con:  # a player renamed in the tables the models read
        for table in ("player_snapshots", "player_statistics", "tournament_entries", "search_ledger"):
            con.execute(f"UPDATE {table} SET player = ? WHERE player = 'Zoë O''Brien'", [NASTY])
    build_models(warehouse)  # the models kept as tables follow (the incremental history keeps the old name)
    written = write_report(warehouse, watchlist=three_nights.watchlist)
    for path in [written.path, *(written.path.parent / str(written.night)).glob("*.html")]:
        text = path.read_text(encoding="utf-8")
        assert "<script" not in text and 'alert("x")' not in text, path
    page = read(written.path)
    assert "script" not in page.elements
    assert NASTY in [r["player"] for r in page.rows("leaderboard-all")], "the name reads back exactly"
    nasty = read(written.path.parent / str(written.night) / player_page_name("iPoker", NASTY))
    assert f"{NASTY} (iPoker)" in nasty.text


def test_the_command_writes_any_night_held_and_says_why_not(three_nights: Harvest, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    monkeypatch.setenv("TOURNEYLAKE_WATCHLIST", str(three_nights.watchlist))
    data = str(three_nights.data)
    done = CliRunner().invoke(app, ["report", "--date", NIGHTS[0].isoformat(), "--data-dir", data, "--open"])
    assert done.exit_code == 0, done.output
    page = three_nights.data / "reports" / f"{NIGHTS[0]}.html"
    assert str(page) in " ".join(done.output.split()) and opened == [page.resolve().as_uri()]
    refused = CliRunner().invoke(app, ["report", "--date", "2026-01-01", "--data-dir", data])
    assert refused.exit_code == 1
    assert f"the warehouse holds no night 2026-01-01 (it holds {NIGHTS[0]} to {NIGHTS[-1]})" in " ".join(refused.output.split())


def test_a_report_needs_a_warehouse(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["report", "--data-dir", str(tmp_path)])
    assert done.exit_code == 1 and "no warehouse at" in done.output and not (tmp_path / "reports").exists()


def test_the_player_pages_are_written_as_one_folder(tmp_path: Path) -> None:
    """A night's pages replace the folder whole: a page no longer written is gone, nothing is
    left beside it, and a failure while writing leaves the old folder as it was."""
    from tourneylake.report import _write_folder

    night = tmp_path / "2026-11-20"
    assert _write_folder(night, [("a.html", b"a"), ("b.html", b"b")]) == 2
    assert _write_folder(night, [("a.html", b"a2")]) == 1
    assert {p.name: p.read_bytes() for p in night.iterdir()} == {"a.html": b"a2"}

    def failing() -> Iterator[tuple[str, bytes]]:
        yield "c.html", b"c"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _write_folder(night, failing())
    assert [p.name for p in tmp_path.iterdir()] == ["2026-11-20"] and (night / "a.html").read_bytes() == b"a2"


def test_the_front_page_charts_each_player_and_the_group(three_nights: Harvest) -> None:
    text = write_report(three_nights.warehouse, watchlist=three_nights.watchlist).path.read_text(encoding="utf-8")
    page = Page(text)
    assert "charts" in page.ids and "svg" in page.elements and "script" not in page.elements
    charts = text[text.index('id="charts"') : text.index('id="leaderboard"')]
    assert charts.count("<svg") == 2
    board = models(three_nights.warehouse, "SELECT player, entries, profit_usd FROM leaderboard WHERE period = 'all' AND avg_roi_pct IS NOT NULL")  # fmt: skip
    for player in board:  # each player with an interval, their entries and profit (escaped as the page escapes)
        assert f"{player['player']} ({count(player['entries'])})".replace("'", "&#x27;") in charts
        assert money(player["profit_usd"]) in charts
    assert "<polyline" in charts[charts.index("The watchlist together") :], "the group's cumulative line"
    assert "王小明" in charts and f'font-family:"{NAMES_FAMILY}"' in text, "the CJK glyphs come with the page"


def test_figures_are_written_by_kind_and_headers_in_words(three_nights: Harvest) -> None:
    written = write_report(three_nights.warehouse, watchlist=three_nights.watchlist)
    pages = [read(written.path), *(read(p) for p in (written.path.parent / str(written.night)).glob("*.html"))]
    kinds = {
        re.compile(r"^(−?\$[\d,]+\.\d\d|—)$"): ("profit", "ABI", "buy-ins", "buy-in", "change (USD)"),
        re.compile(r"^(−?[\d,]+\.\d %|—)$"): ("total ROI", "average ROI", "ITM", "change (%)", "field beaten"),
        re.compile(r"^([\d,]+|—)$"): ("#", "entries", "wins", "searches", "attempts", "retries", "nights", "players", "days won"),
    }
    checked = 0
    for page in pages:
        for table in page.tables:
            header = page.tables[table][0] if page.tables[table] else []
            assert not [h for h in header if "_" in h], (table, header)  # words, not snake_case
            for row in page.rows(table):
                for column, value in row.items():
                    for pattern, columns in kinds.items():
                        if column in columns and value:
                            assert pattern.match(value), (table, column, value)
                            checked += 1
    assert checked > 100
    latest = [r["finish"] for page in pages if "player-latest" in page.tables for r in page.rows("player-latest")]
    assert latest and not [f for f in latest if "_" in f] and set(latest) <= {"won", "final table", "top 10 %", "cashed", "out"}
    front = " ".join("".join(pages[0].text).split())
    assert f"{written.night:%B %Y}, month-to-date" in front and "searches per player, month-to-date" in front


def test_a_player_whose_results_are_withheld_is_said_never_ranked_as_zero() -> None:
    rows = [
        dict(player="ann", network="N", qualified=True, entries=12, min_entries=10, nights_withheld=0, rank_by_profit=1,
             abi_usd=1.0, profit_usd=3.0, total_roi_pct=25.0, avg_roi_pct=20.0, roi_ci_low_pct=-5.0, roi_ci_high_pct=45.0,
             roi_sample_too_small=True, itm_pct=20.0, wins=1),
        dict(player="王小明", network="N", qualified=False, entries=None, min_entries=10, nights_withheld=3, rank_by_profit=None,
             abi_usd=None, profit_usd=None, total_roi_pct=None, avg_roi_pct=None, roi_ci_low_pct=None, roi_ci_high_pct=None,
             roi_sample_too_small=None, itm_pct=None, wins=None),
    ]  # fmt: skip
    board = _board("board", rows, {}, "night")
    assert '<div class="wide"><table id="board">' in board, "a wide table scrolls in its box, not the page"
    page = Page(board)
    assert [r["player"] for r in page.rows("board")] == ["ann"]
    said = " ".join("".join(page.text).split())
    assert "Withheld by the service (not authorised" in said and "王小明 (3 night(s))" in said and "Not ranked" not in said


def test_a_chart_of_millions_keeps_its_labels_clear_of_the_axis_title() -> None:
    """The USD labels end 6 px left of the plot and take about 7 px a character: their left edge
    stays right of the turned axis title (centred at x 14, 11 px high), even for millions."""
    days = [
        dict(day=date(2025, 3, 2), cumulative_profit_usd=-1_250_000.0),
        dict(day=date(2026, 3, 2), cumulative_profit_usd=2_000_000.0),
    ]
    for svg in (group_chart(days, "the watchlist"), profit_chart([-1_250_000.0, 2_000_000.0], "a player")):
        labels = re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end">([^<]+)</text>', svg)
        assert any("$2,000,000.00" in label for _, label in labels)
        assert all(float(x) - 7 * len(label) >= 14 + 6 for x, label in labels), labels


def test_figures_read_the_same_everywhere() -> None:
    assert (money(1234.5), money(-3.2), money(None), money(-0.001)) == ("$1,234.50", "−$3.20", "—", "$0.00")
    assert (percent(12.345), percent(-4.0), count(13.0), count(1234), count(2.333)) == ("12.3 %", "−4.0 %", "13", "1,234", "2.3")
    assert figure("searches_per_player_month", 13.0) == "13" and figure("avg_roi_pct", -0.04) == "0.0 %"
    assert figure("profit_usd_a", 2.5) == "$2.50" and figure("name", "x") == "x" and figure("night", None) == "—"
    assert words("total_roi_pct") == "total ROI (%)" and words("profit_usd") == "profit (USD)"
    assert (
        words("top_10pct") == "top 10 %"
        and words("final_table") == "final table"
        and words("roi_ci_low_pct") == "ROI interval low (%)"
    )
