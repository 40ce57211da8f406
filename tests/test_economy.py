"""The search economy against the in-process sandbox over real HTTP (issue 5, "Done when").

- a watchlist larger than the budget is harvested over several nights: nothing paid twice in a
  night, the never-fetched first, then the stalest, everything served in the end;
- what is known locally to fail (an invalid filter, an unknown network) costs nothing;
- the same question asked twice costs one search;
- the ledger's arithmetic: spent == sum of ledger costs == the drop in RemainingSearches;
- hand analysis: once per hand, stored, subscribers only; the budget report spends nothing;
- ``tourneylake filter check "Type:NOPE" --sandbox`` exits non-zero.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import orjson
import pytest
from rich.console import Console
from typer.testing import CliRunner

from tourneylake import economy
from tourneylake.api import Client
from tourneylake.config import Settings
from tourneylake.ledger import ledger_dates, night_entries
from tourneylake.night import Night, harvest_players, refresh_metadata
from tourneylake.sandbox import DEMO, FREE, running_sandbox
from tourneylake.watchlist import load_watchlist

# One worker runs the whole file, so every test shares the module's sandbox (and its clock).
pytestmark = pytest.mark.xdist_group("economy")

FIRST_NIGHT = date(2025, 3, 1)
CAP = 5

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


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def sandbox():
    with running_sandbox(seed=11, today=FIRST_NIGHT) as server:
        yield server


def make_settings(sandbox, data_dir: Path, **overrides) -> Settings:
    """Settings pointing at the module's running sandbox (a plain http URL: no second server)."""
    values = dict(
        base_url=sandbox.base_url,
        appname=DEMO.appname,
        appkey=DEMO.appkey,
        username=DEMO.username,
        password=DEMO.password,
        data_dir=data_dir,
        watchlist=data_dir / "watchlist.yaml",
        concurrency=2,
        max_attempts=2,
        retry_initial_wait_s=0.01,
    )
    values.update(overrides)
    return Settings().with_overrides(**values)


def remaining(settings: Settings) -> int:
    """Searches left, through the free Countries call."""
    with Client(settings) as client:
        value = client.countries().remaining_searches
    assert value is not None
    return value


def ledger_rows(settings: Settings, when: date | None = None) -> list[dict]:
    root = Night(settings, settings.base_url, FIRST_NIGHT).lake.root
    dates = [when] if when else ledger_dates(root)
    return [row for d in dates for row in night_entries(root, d)]


def write_watchlist(settings: Settings, text: str) -> None:
    settings.watchlist.parent.mkdir(parents=True, exist_ok=True)
    settings.watchlist.write_text(text, encoding="utf-8")


def key(row: dict) -> tuple[str, str, str]:
    return (row["network"], row["player"], row["filter_name"] or "")


# ------------------------------------------------------------------------------ several nights


def test_watchlist_larger_than_budget_is_served_over_several_nights(sandbox, tmp_path):
    roster = sandbox.world.roster(12)
    lines = [
        "filters:",
        '  sng: "Class:SNG"',
        '  recent: "Date:1Y"',
        "players:",
    ]
    for index, (network, name) in enumerate(roster):
        filters = "[sng, recent]" if index < 6 else "[]"
        lines.append(f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}, filters: {filters}}}")
    settings = make_settings(sandbox, tmp_path, max_searches_per_run=CAP)
    write_watchlist(settings, "\n".join(lines) + "\n")
    watchlist = load_watchlist(settings.watchlist)
    everything = {
        (p.network, p.name, f or "") for p, f in watchlist.targets()
    }
    assert len(everything) == 18  # 6 players x 2 filters + 6 unfiltered: more than 3 nights' cap

    # Before the first night: the report plans the cap and defers the rest, spending nothing.
    sandbox.world.set_today(FIRST_NIGHT)
    refresh_metadata(Night(settings, settings.base_url, FIRST_NIGHT))
    before = remaining(settings)
    report = economy.budget_report(settings, FIRST_NIGHT)
    assert remaining(settings) == before
    assert report.remaining == before
    assert len(report.planned) == CAP and report.searches_planned == CAP
    assert len(report.deferred) == 18 - CAP
    assert all("run cap" in why for _, why in report.deferred)
    assert ledger_rows(settings) == []

    last_served: dict[tuple[str, str, str], date] = {}
    served_nights: list[set[tuple[str, str, str]]] = []
    for number in range(5):
        night_date = FIRST_NIGHT + timedelta(days=number)
        sandbox.world.set_today(night_date)
        night = Night(settings, settings.base_url, night_date)
        refresh_metadata(night)
        before = remaining(settings)
        outcome = harvest_players(night, watchlist)
        after = remaining(settings)

        rows = ledger_rows(settings, night_date)
        paid = [row for row in rows if row["cost"]]
        served = [key(row) for row in rows if row["resource"] == "player_summary" and row["outcome"] == "ok"]
        # The ledger's arithmetic, night after night.
        assert outcome.searches_spent == sum(row["cost"] for row in rows) == before - after
        assert outcome.searches_spent <= CAP
        # Nothing paid twice in a night.
        assert len(served) == len(set(served)), Counter(served).most_common(3)
        assert len(paid) == len(served)
        assert outcome.failed == []

        never = everything - set(last_served)
        if len(never) >= CAP:
            assert set(served) <= never  # the never-fetched come first...
        else:
            assert never <= set(served)  # ...all of them, then the stalest
            others = set(served) - never
            waiting = set(last_served) - set(served)
            if others and waiting:
                assert max(last_served[k] for k in others) <= min(last_served[k] for k in waiting)
        for k in served:
            last_served[k] = night_date
        served_nights.append(set(served))

        # Re-running a finished night costs nothing.
        if number == 0:
            again = harvest_players(Night(settings, settings.base_url, night_date), watchlist)
            assert again.searches_spent == 0
            assert remaining(settings) == after

    assert set(last_served) == everything  # all served after enough nights
    assert [len(s) for s in served_nights] == [5, 5, 5, 5, 5]

    # The report's spend per night is the ledger's.
    report = economy.budget_report(settings, FIRST_NIGHT + timedelta(days=5))
    assert report.spend_per_night == {FIRST_NIGHT + timedelta(days=n): CAP for n in range(5)}
    with open(tmp_path / "report.txt", "w") as handle:
        report.print(Console(file=handle, width=160))
    assert "Spend per night" in (tmp_path / "report.txt").read_text()


# -------------------------------------------------------------------------- free when known bad


def test_invalid_filter_and_unknown_network_cost_nothing(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path)
    network, name = sandbox.world.roster(1)[0]
    write_watchlist(
        settings,
        "filters:\n"
        '  bad: "Type:NOPE"\n'
        "players:\n"
        f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}, filters: [bad]}}\n"
        '  - {network: "NoSuchNetwork", name: "Somebody"}\n'
        '  - {network: "pokerstars", name: "Somebody Else"}\n',
    )
    today = sandbox.world.today
    night = Night(settings, settings.base_url, today)
    refresh_metadata(night)
    before = remaining(settings)
    outcome = harvest_players(night, load_watchlist(settings.watchlist))
    assert remaining(settings) == before
    assert outcome.searches_spent == 0
    assert ledger_rows(settings) == []
    reasons = " | ".join(why for _, why in outcome.skipped)
    assert len(outcome.skipped) == 3
    assert "NOPE" in reasons and "unknown network 'NoSuchNetwork'" in reasons and "did you mean 'PokerStars'" in reasons

    problems = economy.check_filter(settings, "Type:NOPE")  # from the lake's metadata
    assert problems and "NOPE" in problems[0]
    assert economy.check_filter(settings, "Class:SNG;Date:30D") == []
    assert economy.check_filter(settings, "Type:O,,T")[0].startswith("syntax:")
    assert remaining(settings) == before


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


# ---------------------------------------------------------------------------------- questions


def test_same_question_twice_costs_one_search(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path)
    question = "sit and go turbos over $5 in the last 30 days"
    before = remaining(settings)
    expression, spent = economy.ask(settings, question, "UTC", "en-US")
    assert spent == 1
    assert "Class:SNG" in expression
    again, spent_again = economy.ask(settings, question, "UTC", "en-US")
    assert (again, spent_again) == (expression, 0)
    assert before - remaining(settings) == 1
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["question"]) for r in rows] == [("nlq", 1, question)]
    # Another locale is another question.
    _, spent_other = economy.ask(settings, question, "UTC", "de-DE")
    assert spent_other == 1
    assert sum(r["cost"] for r in ledger_rows(settings)) == before - remaining(settings) == 2


def test_budget_report_shows_unconverted_questions_without_converting(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path, max_searches_per_run=3)
    network, name = sandbox.world.roster(1)[0]
    write_watchlist(
        settings,
        "filters:\n"
        "  big: {question: 'scheduled tournaments over $50 in the last year'}\n"
        "players:\n"
        f"  - {{network: {orjson.dumps(network).decode()}, name: {orjson.dumps(name).decode()}, filters: [big]}}\n",
    )
    before = remaining(settings)
    report = economy.budget_report(settings, sandbox.world.today)
    assert remaining(settings) == before
    assert ledger_rows(settings) == []
    assert report.conversions == ["big"] and report.searches_planned == 2
    assert report.conversion_note(report.planned[0]) == "needs conversion (1 search)"
    with open(tmp_path / "out.txt", "w") as handle:
        report.print(Console(file=handle, width=200))
    assert "needs conversion (1 search)" in (tmp_path / "out.txt").read_text()


# -------------------------------------------------------------------------------------- hands


def test_hand_analysed_once_stored_and_free_the_second_time(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path)
    before = remaining(settings)
    analysis, spent = economy.analyze_hand(settings, HAND.encode(), None)
    assert spent == 5
    assert "AKo" in analysis
    digest = hashlib.sha256(HAND.encode()).hexdigest()
    record = orjson.loads((tmp_path / "hands" / f"{digest}.json").read_bytes())
    assert record["hand"] == HAND and record["analysis"] == analysis and record["searches"] == 5
    assert record["lang"] is None and record["analysed_at"]
    again, spent_again = economy.analyze_hand(settings, HAND.encode(), None)
    assert (again, spent_again) == (analysis, 0)
    assert before - remaining(settings) == 5
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["outcome"]) for r in rows] == [("hand_analysis", 5, "ok")]
    assert sum(r["cost"] for r in rows) == before - remaining(settings)
    # Nothing secret in what was written.
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert DEMO.password.encode() not in written and DEMO.encoded_password.encode() not in written


def test_hand_analysis_is_for_subscribers_only(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path, username=FREE.username, password=FREE.password)
    before = remaining(settings)
    with pytest.raises(economy.HandAnalysisRefused, match="hand analysis is for subscribers only"):
        economy.analyze_hand(settings, HAND.encode(), None)
    assert remaining(settings) == before
    assert not (tmp_path / "hands").exists()
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["error_code"]) for r in rows] == [("hand_analysis", 0, 102004)]
    assert FREE.password not in str(rows)


def test_inbox_hands_within_the_run_budget(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path, max_searches_per_run=5)
    inbox = economy.inbox_dir(settings)
    inbox.mkdir(parents=True)
    (inbox / "a.txt").write_text(HAND)
    (inbox / "b.txt").write_text(HAND.replace("[Ah Kd]", "[7c 2d]"))
    when = sandbox.world.today
    before = remaining(settings)
    first = economy.analyze_inbox(Night(settings, settings.base_url, when))
    assert first.analysed == ["a.txt"] and [n for n, _ in first.deferred] == ["b.txt"]
    assert first.searches_spent == 5 == before - remaining(settings)
    # A rerun of the same night: the cap is spent, a.txt is skipped for free.
    rerun = economy.analyze_inbox(Night(settings, settings.base_url, when))
    assert rerun.skipped == ["a.txt"] and rerun.analysed == [] and rerun.searches_spent == 0
    # The next night: b.txt is analysed, a.txt still skipped.
    nxt = economy.analyze_inbox(Night(settings, settings.base_url, when + timedelta(days=1)))
    assert nxt.analysed == ["b.txt"] and nxt.skipped == ["a.txt"]
    assert sum(r["cost"] for r in ledger_rows(settings)) == 10


def test_hands_asset_is_opt_in_and_analyses_the_inbox(sandbox, tmp_path):
    from dagster import AssetKey, DagsterInstance, materialize

    from assets.hands import hand_analyses
    from pipelines.definitions import defs
    from pipelines.resources import TourneylakeResource

    graph = defs.resolve_asset_graph()
    nightly = defs.resolve_job_def("nightly").asset_layer.selected_asset_keys
    hands = defs.resolve_job_def("hands").asset_layer.selected_asset_keys
    assert AssetKey("hand_analyses") in graph.get_all_asset_keys()
    assert AssetKey("hand_analyses") not in nightly
    assert hands == {AssetKey("hand_analyses")}

    settings = make_settings(sandbox, tmp_path, max_searches_per_run=5)
    inbox = economy.inbox_dir(settings)
    inbox.mkdir(parents=True)
    (inbox / "one.txt").write_text(HAND)
    before = remaining(settings)
    result = materialize(
        [hand_analyses],
        resources={"tourneylake": TourneylakeResource.from_settings(settings)},
        partition_key=sandbox.world.today.isoformat(),
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    metadata = result.asset_materializations_for_node("hand_analyses")[0].metadata
    assert metadata["analysed"].value == 1 and metadata["skipped"].value == 0
    assert metadata["searches_spent"].value == 5 == before - remaining(settings)


def test_wrong_credentials_are_named_not_mistaken_for_an_empty_budget(sandbox, tmp_path):
    settings = make_settings(sandbox, tmp_path, password="not-the-password")
    with pytest.raises(Exception, match="credentials refused") as caught:
        economy.ask(settings, "sit and gos last week")
    assert "not-the-password" not in str(caught.value)
    with pytest.raises(Exception, match="credentials refused"):
        economy.analyze_hand(settings, HAND.encode(), None)
    assert ledger_rows(settings) == []
