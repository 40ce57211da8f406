"""Between nights (``tourneylake.night.forecast``): the budget report, filter check and question
conversion against the sandbox over real HTTP — free where promised, one search per question."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from typer.testing import CliRunner

from tests.helpers import ledger_rows, player_line, remaining, sandbox_settings, write_watchlist
from tourneylake.night.forecast import budget_report
from tourneylake.night.harvest import refresh_metadata
from tourneylake.night.session import Session
from tourneylake.questions import ask as ask_question
from tourneylake.questions import check_filter
from tourneylake.sandbox import DEMO

pytestmark = pytest.mark.xdist_group("adhoc")


SANDBOX = dict(seed=11, today=date(2025, 3, 1))


def test_filter_check_uses_current_metadata_and_costs_nothing(sandbox, tmp_path):
    """The lake's metadata of an older night is not what the service checks now: its own is read
    (free) instead; the lake's of the night before is current, and no call is made."""
    settings = sandbox_settings(sandbox, tmp_path)
    refresh_metadata(Session.open(settings, settings.base_url, sandbox.world.today))  # a night long ago
    before, requests = remaining(settings), sandbox.app.requests
    problems = check_filter(settings, "Type:NOPE")
    assert problems and "NOPE" in problems[0] and sandbox.app.requests == requests + 1  # the service's metadata
    assert check_filter(settings, "Class:SNG;Date:30D") == []
    assert check_filter(settings, "Type:O,,T")[0].startswith("syntax:")
    yesterday = date.today() - timedelta(days=1)
    refresh_metadata(Session.open(settings, settings.base_url, yesterday))
    requests = sandbox.app.requests
    assert check_filter(settings, "Type:NOPE") and sandbox.app.requests == requests  # the lake's, current
    assert remaining(settings) == before


def test_filters_are_checked_against_the_services_metadata_before_a_search_with_an_empty_lake(sandbox, tmp_path, monkeypatch):
    """A live-like URL (the sandbox over HTTP) and an empty lake: digits of other scripts pass the
    syntax but not the service's metadata, read for free, by `filter check` and by the watchlist's
    check in `tourneylake budget` alike; nothing is written (a check is no night)."""
    from tourneylake.cli import app

    settings = sandbox_settings(sandbox, tmp_path / "data", watchlist=tmp_path / "watchlist.yaml")
    for name, value in (
        ("BASE_URL", sandbox.base_url), ("USERNAME", settings.username), ("PASSWORD", DEMO.password),
        ("APPNAME", DEMO.appname), ("APPKEY", DEMO.appkey),
    ):  # fmt: skip
        monkeypatch.setenv(f"TOURNEYLAKE_{name}", value)
    for expression, offending in (("Stake:USD٣~*", "'٣'"), ("Date:１D", "'１'")):
        checked = CliRunner().invoke(app, ["filter", "check", expression, "--data-dir", str(settings.data_dir)])
        assert checked.exit_code == 1 and offending in checked.output and "not ASCII" in checked.output, checked.output
    write_watchlist(
        settings,
        "filters:\n  stake: 'Stake:USD٣~*'\n  days: 'Class:SNG'\nplayers:\n"
        + "\n".join(player_line(n, p, "[stake, days]") for n, p in sandbox.world.roster(2))
        + "\n",
    )
    before = remaining(settings)
    report = budget_report(settings, date(2025, 2, 28))
    refused = [(t.player, why) for t, why in report.skipped if t.filter_name == "stake"]
    assert len(refused) == 2 and all("not ASCII" in why for _, why in refused)
    assert [t.filter_name for t in report.planned] == ["days", "days"]
    assert "filters and networks checked against the service's metadata (free, read now)" in report.notes
    assert remaining(settings) == before and not settings.data_dir.exists()


def test_filter_check_cli_exits_non_zero_for_an_invalid_filter(tmp_path, monkeypatch):
    from tourneylake.cli import app

    for name in ("BASE_URL", "APPNAME", "APPKEY", "USERNAME", "PASSWORD", "DATA_DIR"):
        monkeypatch.delenv(f"TOURNEYLAKE_{name}", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    runner = CliRunner()
    bad = runner.invoke(app, ["filter", "check", "Type:NOPE", "--sandbox", "--data-dir", str(tmp_path / "d")])
    assert bad.exit_code != 0
    assert "NOPE" in bad.output
    good = runner.invoke(app, ["filter", "check", "Class:SNG;Date:30D", "--sandbox", "--data-dir", str(tmp_path / "d")])
    assert good.exit_code == 0, good.output
    assert not (tmp_path / "d").exists()  # a free check claims nothing and records nothing


def test_same_question_twice_costs_one_search(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    question = "sit and go turbos over $5 in the last 30 days"
    before = remaining(settings)
    expression, spent = ask_question(settings, question, "UTC", "en-US")
    assert spent == 1
    assert "Class:SNG" in expression
    again, spent_again = ask_question(settings, question, "UTC", "en-US")
    assert (again, spent_again) == (expression, 0)
    assert before - remaining(settings) == 1
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["question"]) for r in rows] == [("nlq", 1, question)]
    # Another locale is another question.
    _, spent_other = ask_question(settings, question, "UTC", "de-DE")
    assert spent_other == 1
    assert sum(r["cost"] for r in ledger_rows(settings)) == before - remaining(settings) == 2


def test_budget_report_shows_unconverted_questions_without_converting(sandbox, tmp_path, monkeypatch):
    from rich.console import Console

    from tourneylake import cli

    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=3)
    network, name = sandbox.world.roster(1)[0]
    write_watchlist(
        settings,
        "filters:\n  big: {question: 'scheduled tournaments over $50 in the last year'}\nplayers:\n"
        + player_line(network, name, "[big]")
        + "\n",
    )
    before = remaining(settings)
    report = budget_report(settings, sandbox.world.today)
    assert remaining(settings) == before
    assert ledger_rows(settings) == []
    assert not (tmp_path / "lake").exists()  # a report claims and writes nothing
    assert report.conversions == ["big"] and report.searches_planned == 2
    assert report.needs_conversion(report.planned[0])
    with open(tmp_path / "out.txt", "w") as handle:
        monkeypatch.setattr(cli, "console", Console(file=handle, width=200))
        cli.print_budget(report)
    assert "needs conversion (1 search)" in (tmp_path / "out.txt").read_text()


def test_wrong_credentials_are_named_not_mistaken_for_an_empty_budget(sandbox, tmp_path):
    from tourneylake.errors import RunFailed

    settings = sandbox_settings(sandbox, tmp_path, password="not-the-password")
    with pytest.raises(RunFailed, match="credentials refused") as caught:
        ask_question(settings, "sit and gos last week")
    assert "not-the-password" not in str(caught.value)
    assert ledger_rows(settings) == []


def test_a_question_paid_for_but_not_cached_is_not_paid_again(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    expression, spent = ask_question(settings, "sit and gos in the last week")
    assert spent == 1
    (tmp_path / "lake" / "_state" / "nlq_cache.json").unlink()  # died after paying, before caching
    before = remaining(settings)
    assert ask_question(settings, "sit and gos in the last week") == (expression, 0)
    assert remaining(settings) == before


def test_a_question_shares_the_nights_cap(sandbox, tmp_path):
    from tourneylake.errors import BudgetRefused

    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=1)
    _, spent = ask_question(settings, "sit and gos this year", "UTC", "en-US")
    assert spent == 1
    before = remaining(settings)
    with pytest.raises(BudgetRefused, match="run cap"):
        ask_question(settings, "scheduled tournaments over $50", "UTC", "en-US")
    assert remaining(settings) == before


def test_two_processes_asking_the_same_question_at_once_pay_once(sandbox, tmp_path):
    """Two `filter ask` runs of one question at the same moment (each its own session, as two
    processes have): the second waits for the first's paid answer and takes it from the lake."""
    from concurrent.futures import ThreadPoolExecutor

    from tourneylake.sandbox import Faults
    from tourneylake.sandbox.faults import FaultPlan

    settings = sandbox_settings(sandbox, tmp_path)
    question = "rebuys over $20 in the last 90 days"
    before = remaining(settings)
    sandbox.app.plan = FaultPlan(Faults(), 0, 400.0)  # 400 ms a call: both runs in flight at once
    try:
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: ask_question(settings, question, "UTC", "en-US"), range(2)))
    finally:
        sandbox.app.plan = FaultPlan(Faults(), 0, 0.0)
    assert sorted(spent for _, spent in answers) == [0, 1] and answers[0][0] == answers[1][0]
    assert before - remaining(settings) == 1
    assert [(r["resource"], r["cost"]) for r in ledger_rows(settings) if r["resource"] == "nlq"] == [("nlq", 1)]


def test_questions_cached_at_once_are_all_kept(sandbox, tmp_path):
    """The question cache is one document: two runs adding an entry each at once keep both."""
    from concurrent.futures import ThreadPoolExecutor

    from tourneylake.lake.lake import Lake
    from tourneylake.lake.state import StateStore
    from tourneylake.night.session import NLQ_CACHE

    store = StateStore(Lake(tmp_path / "lake"))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: store.set_entry(NLQ_CACHE, f"question {i}", f"Class:{i}"), range(40)))
    assert store.read(NLQ_CACHE) == {f"question {i}": f"Class:{i}" for i in range(40)}
