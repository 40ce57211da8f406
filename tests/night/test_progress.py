"""Progress a person can follow (``tourneylake.night.progress``): a line every few seconds and at the
end for logs and Dagster's run log, and every step for the terminal's bar."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

import tourneylake.pipelines.cli
from tourneylake.night.progress import ProgressSnapshot, Tracker, listening


def test_a_line_says_done_total_rate_time_left_and_searches() -> None:
    snapshot = ProgressSnapshot("summaries", 1_200, 2_000, 1_200, 10.0)
    assert snapshot.line() == "summaries: 1,200/2,000 (120.0/s, about 7 s left), 1,200 searches spent"
    assert ProgressSnapshot("summaries", 2_000, 2_000, None, 100.0).line() == "summaries: 2,000/2,000 (20.0/s)"
    assert ProgressSnapshot("summaries", 10, 9_000, 10, 10.0).eta_s == 8_990.0


def test_listeners_see_every_step_and_the_log_only_some(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    tracker = Tracker("summaries", 50, log_every_s=3600)
    with caplog.at_level(logging.INFO, logger="tourneylake.night.progress"), listening(lambda s: seen.append(s.done)):
        for spent in range(1, 51):
            tracker.advance(searches=spent)
        lines = [r.getMessage() for r in caplog.records if r.name == "tourneylake.night.progress"]
    tracker.advance()  # after the block: no listener any more
    assert seen == list(range(1, 51))
    assert len(lines) == 1 and lines[0].startswith("summaries: 50/50 (") and lines[0].endswith("50 searches spent")


def test_on_a_terminal_the_command_line_draws_a_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(tourneylake.pipelines.cli, "err", Console(file=screen, force_terminal=True, width=120))
    with tourneylake.pipelines.cli.progress_bar():
        tracker = Tracker("summaries", 4)
        for spent in range(1, 5):
            tracker.advance(searches=spent)
    drawn = screen.getvalue()
    assert "summaries" in drawn and "4/4" in drawn and "4 searches" in drawn and "━" in drawn
