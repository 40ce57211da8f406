"""The nightly pipeline end to end: real Dagster runs, the sandbox over HTTP, real Parquet and DuckDB."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tests.helpers import DEMO_ACCOUNT, REPO, ledger_rows, shipped_dagster_home
from tourneylake.api import encode_password
from tourneylake.config import SANDBOX_APPKEY, SANDBOX_PASSWORD, SANDBOX_USERNAME, Settings
from tourneylake.lake.lake import Lake
from tourneylake.pipelines.nightly import run_models, run_night
from tourneylake.sandbox import running_sandbox
from tourneylake.sandbox.truth import truth

pytestmark = [pytest.mark.xdist_group("pipeline"), pytest.mark.slow]

NIGHT1 = date(2026, 11, 20)
NIGHT2 = date(2026, 11, 21)
SEED = 11

WATCHLIST = """
filters:
  sng_30d: "Class:SNG;Date:30D"
  big: "StakePlusRake:USD5~*"
  no_sats: "Type!:SAT"
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng_30d, big], priority: 1}
  - {network: GGNetwork, name: "José María", filters: [no_sats]}
  - {network: "888Poker(ES-PT)", name: "Ana Łukasz"}
  - {network: iPoker, name: "Zoë O'Brien"}
  - {network: PokerStars, name: "Dmitrij Šimek", filters: [sng_30d]}
  - {network: Winamax.fr, name: "Élodie.R"}
"""
TARGETS = 7  # (player, filter) pairs above

# Columns that legitimately differ between two harvests of the same data.
VOLATILE = {"fetched_at", "loaded_at", "run_id", "called_at", "duration_ms", "server_time", "listed_at"}


SANDBOX = dict(seed=SEED, today=NIGHT1)


@pytest.fixture
def make_settings(tmp_path: Path, sandbox):
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(WATCHLIST, encoding="utf-8")

    def make(name: str = "data", **overrides) -> Settings:
        base = dict(
            base_url=sandbox.base_url,
            **DEMO_ACCOUNT,
            data_dir=tmp_path / name,
            watchlist=watchlist,
            concurrency=4,
            retry_initial_wait_s=0.01,
            retry_max_wait_s=0.05,
            retry_pass_wait_s=0.05,
        )
        base.update(overrides)
        return Settings(**base)  # type: ignore[arg-type]

    return make


def tables(settings: Settings) -> dict[str, list[tuple]]:
    """Every warehouse table's rows, sorted, without the columns that differ between runs."""
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    try:
        out = {}
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema = 'main'"
            ).fetchall()
        ]
        for name in names:
            if name == "search_ledger":
                continue
            cols = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [name]
                ).fetchall()
            ]
            keep = [c for c in cols if c not in VOLATILE]
            rows = con.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in keep)} FROM "{name}"').fetchall()
            out[name] = sorted(rows, key=repr)
        return out
    finally:
        con.close()


def spent(settings: Settings, night: date) -> int:
    return sum(int(e["cost"]) for e in ledger_rows(settings, night))


def test_a_night_then_the_same_night_again(sandbox, make_settings) -> None:
    sandbox.world.set_today(NIGHT1)
    settings = make_settings()
    before = sandbox.accounts.remaining(SANDBOX_USERNAME)
    first = run_night(settings, NIGHT1)
    assert first.success, first.failure
    assert first.value("player_summaries", "players_fetched") == TARGETS
    assert first.value("player_summaries", "searches_spent") == TARGETS
    assert before - sandbox.accounts.remaining(SANDBOX_USERNAME) == TARGETS
    assert all(first.checks.values()), first.checks
    snapshot = tables(settings)
    assert len(snapshot["player_snapshots"]) == TARGETS
    assert snapshot["tournaments"] and snapshot["tournament_entries"] and snapshot["currencies"]

    again = run_night(settings, NIGHT1)
    assert again.success, again.failure
    assert again.value("player_summaries", "searches_spent") == 0
    assert again.value("player_summaries", "players_reused_from_lake") == TARGETS
    assert before - sandbox.accounts.remaining(SANDBOX_USERNAME) == TARGETS  # nothing more paid
    assert again.value("metadata", "called") is False  # the night already holds its metadata: no call
    assert tables(settings) == snapshot
    assert spent(settings, NIGHT1) == TARGETS


def test_a_second_night_grows_history_without_duplicates(sandbox, make_settings) -> None:
    settings = make_settings()
    sandbox.world.set_today(NIGHT1)
    assert run_night(settings, NIGHT1).success
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    first_tournaments = con.execute("SELECT count(*) FROM tournaments").fetchone()[0]
    con.close()

    sandbox.world.set_today(NIGHT2)
    second = run_night(settings, NIGHT2)
    assert second.success, second.failure
    assert second.value("player_summaries", "searches_spent") == TARGETS
    assert run_models(settings).success  # the views, as `tourneylake run` builds them after its last night
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(DISTINCT snapshot_date) FROM player_snapshots").fetchone()[0] == 2
        total, distinct = con.execute("SELECT count(*), count(DISTINCT (network, tournament_id)) FROM tournaments").fetchone()
        assert total == distinct >= first_tournaments
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (network, tournament_id, player)) FROM tournament_entries"
        ).fetchone()
        assert total == distinct
        # the view answers per player over time
        assert con.execute("SELECT count(*) FROM player_statistics_over_time").fetchone()[0] > 0
    finally:
        con.close()


def test_statistics_and_usd_amounts_equal_the_worlds_truth(sandbox, make_settings) -> None:
    sandbox.world.set_today(NIGHT1)
    settings = make_settings()
    assert run_night(settings, NIGHT1).success
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    try:
        for network, player, filter_name, expression in [
            ("PokerStars", "Borbas.Geri", "sng_30d", "Class:SNG;Date:30D"),
            ("PokerStars", "Borbas.Geri", "big", "StakePlusRake:USD5~*"),
            ("GGNetwork", "José María", "no_sats", "Type!:SAT"),
            ("iPoker", "Zoë O'Brien", "", ""),
        ]:
            expected = truth(sandbox.world, network, player, expression, today=NIGHT1)
            stored = dict(
                con.execute(
                    "SELECT statistic, value FROM player_statistics WHERE network = ? AND player = ? AND filter_name = ? AND snapshot_date = ?",
                    [network, player, filter_name, NIGHT1],
                ).fetchall()
            )
            assert stored == {k: v for k, v in expected.items() if k in stored} and set(expected) <= set(stored) | {None}
            assert stored["Count"] == expected["Count"]
        rates = sandbox.world.published_rates(NIGHT1)
        rows = con.execute("SELECT currency, stake, rake, stake_usd, rake_usd, usd_rate_missing FROM tournaments").fetchall()
        assert rows
        for currency, stake, rake, stake_usd, rake_usd, missing in rows:
            rate = rates.get(currency)
            if rate is None:
                assert stake_usd is None and missing is True
            else:
                assert stake_usd == pytest.approx(stake / float(rate), abs=1e-9)
                assert rake_usd == pytest.approx(rake / float(rate), abs=1e-9)
                assert missing is False
    finally:
        con.close()


def test_xml_and_json_nights_give_identical_tables(sandbox, make_settings) -> None:
    sandbox.world.set_today(NIGHT1)
    as_json = make_settings("json", format="json")
    as_xml = make_settings("xml", format="xml")
    assert run_night(as_json, NIGHT1).success
    assert run_night(as_xml, NIGHT1).success
    assert tables(as_json) == tables(as_xml)


def test_quota_running_out_mid_night_keeps_what_was_fetched(sandbox, make_settings) -> None:
    sandbox.world.set_today(NIGHT1)
    settings = make_settings(concurrency=1)
    original = sandbox.accounts.remaining(SANDBOX_USERNAME)
    sandbox.accounts.set_remaining(SANDBOX_USERNAME, 3)
    try:
        report = run_night(settings, NIGHT1)
    finally:
        sandbox.accounts.set_remaining(SANDBOX_USERNAME, original)
    assert report.success, report.failure  # a quota stop is not a failed night
    assert report.value("player_summaries", "players_fetched") == 3
    assert report.value("player_summaries", "deferred") == TARGETS - 3
    con = duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM player_snapshots").fetchone()[0] == 3
        outcomes = dict(con.execute("SELECT outcome, count(*) FROM search_ledger GROUP BY ALL").fetchall())
    finally:
        con.close()
    assert outcomes.get("ok") == 3

    # The next run (quota back) fetches only what is missing.
    again = run_night(settings, NIGHT1)
    assert again.success
    assert again.value("player_summaries", "players_fetched") == TARGETS - 3
    assert again.value("player_summaries", "players_reused_from_lake") == 3


def test_paid_responses_survive_a_failure_after_fetching(sandbox, make_settings, monkeypatch) -> None:
    """Normalising blows up after the responses were paid: they are in the lake, and the next
    run rebuilds the night from them without spending a search."""
    from tourneylake.tables.normalize import summary

    sandbox.world.set_today(NIGHT1)
    settings = make_settings()

    def explode(*args, **kwargs):
        raise RuntimeError("normaliser crashed")

    monkeypatch.setattr(summary.SummaryNormalizer, "add", explode)
    crashed = run_night(settings, NIGHT1)
    assert not crashed.success and "normaliser crashed" in crashed.failure
    monkeypatch.undo()
    assert Lake(settings.data_dir).raw.refs(NIGHT1, "player_summary", status=None)  # the paid answers are kept

    recovered = run_night(settings, NIGHT1)
    assert recovered.success, recovered.failure
    assert recovered.value("player_summaries", "players_reused_from_lake") >= 1
    assert spent(settings, NIGHT1) == TARGETS  # every target paid exactly once


def test_wrong_password_fails_the_night_with_a_clear_reason(sandbox, make_settings) -> None:
    settings = make_settings(password="not-the-password")
    report = run_night(settings, NIGHT1)
    assert not report.success
    assert "credentials" in report.failure.lower() and "\n" not in report.failure
    assert "not-the-password" not in report.failure


def test_no_secret_reaches_the_lake_the_warehouse_or_dagster(sandbox, make_settings, tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from tourneylake.assets.resource import TourneylakeResource
    from tourneylake.pipelines.definitions import build_definitions

    sandbox.world.set_today(NIGHT1)
    settings = make_settings()
    secrets = [SANDBOX_PASSWORD, SANDBOX_APPKEY, encode_password(SANDBOX_PASSWORD, SANDBOX_APPKEY)]
    job = build_definitions(TourneylakeResource.from_settings(settings), settings.schedule_cron, first=NIGHT1).resolve_job_def(
        "nightly"
    )
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(partition_key=NIGHT1.isoformat(), instance=instance)
        assert result.success
        log_text = "\n".join(str(record) for record in instance.all_logs(result.run_id))
    assert log_text and not any(s in log_text for s in secrets)
    for path in settings.data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), path


def test_a_foreign_source_is_refused(sandbox, make_settings) -> None:
    sandbox.world.set_today(NIGHT1)
    settings = make_settings()
    assert run_night(settings, NIGHT1).success
    other = settings.with_overrides(base_url="http://127.0.0.1:9")  # another service, same data dir
    report = run_night(other, NIGHT1)
    assert not report.success and "source" in report.failure.lower()
    shutil.rmtree(settings.data_dir)


def test_the_ledger_adds_up_to_the_services_count_even_with_faults(tmp_path: Path) -> None:
    """Slow bodies are charged by the service but time out here; truncated ones are charged and
    unreadable. Whatever happens on the wire, spent == sum of ledger costs == drop in searches."""
    from tourneylake.sandbox import Faults

    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(WATCHLIST, encoding="utf-8")
    with running_sandbox(seed=5, today=NIGHT1, faults=Faults.parse("slow=0.4,slow_s=1,truncate=0.2")) as server:
        settings = Settings(
            base_url=server.base_url,
            **DEMO_ACCOUNT,
            data_dir=tmp_path / "d",
            watchlist=watchlist,
            timeout_s=0.5,
            retry_initial_wait_s=0.01,
            retry_max_wait_s=0.05,
            retry_pass_wait_s=0.05,
            max_attempts=8,
            concurrency=2,
        )
        before = server.accounts.remaining(SANDBOX_USERNAME)
        report = run_night(settings, NIGHT1)
        dropped = before - server.accounts.remaining(SANDBOX_USERNAME)
    assert report.success, report.failure
    assert report.value("player_summaries", "players_fetched") == TARGETS
    entries = ledger_rows(settings, NIGHT1)
    assert {e["outcome"] for e in entries} > {"ok"}  # faults did happen
    assert sum(int(e["cost"]) for e in entries) == dropped == report.value("player_summaries", "searches_spent")


def test_no_secret_reaches_a_persistent_dagster_instance(sandbox, make_settings, tmp_path: Path, monkeypatch) -> None:
    """`tourneylake run` with DAGSTER_HOME set (as `make run` does) stores the run in the
    instance; the password and app key must be nowhere in it (run config, snapshots, event log)."""
    from dagster import DagsterInstance

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sandbox.world.set_today(NIGHT1)
    report = run_night(make_settings(), NIGHT1)
    assert report.success, report.failure
    DagsterInstance.get().dispose()
    secrets = [SANDBOX_PASSWORD, SANDBOX_APPKEY, encode_password(SANDBOX_PASSWORD, SANDBOX_APPKEY)]
    stored = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "runs.db" for p in stored)
    for path in stored:
        data = path.read_bytes()
        assert not any(s.encode() in data for s in secrets), path


def test_a_commands_nights_and_models_record_into_the_shipped_instance(
    sandbox, make_settings, tmp_path: Path, monkeypatch
) -> None:
    """``tourneylake run``'s nights and its models (the ``models`` job: dagster-dbt's build of
    the views and their tests) record into the instance of ``$DAGSTER_HOME``, which another
    instance on the same files (the UI's) reads."""
    from dagster import AssetKey, DagsterEventType, DagsterInstance, RunsFilter

    shipped_dagster_home(tmp_path, monkeypatch)
    sandbox.world.set_today(NIGHT1)
    settings = make_settings()
    assert run_night(settings, NIGHT1).success
    models = run_models(settings)
    assert models.success and models.checks and all(models.checks.values())
    with DagsterInstance.get() as reader:
        assert len(reader.get_runs(RunsFilter(job_name="nightly"))) == 1
        (run,) = reader.get_runs(RunsFilter(job_name="models"))
        assert run.run_id == models.run_id
        page = reader.get_latest_materialization_event(AssetKey("nightly_report"))
        assert page is not None and page.run_id == models.run_id
        evaluations = reader.all_logs(models.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
        assert {e.dagster_event.asset_check_evaluation_data.check_name for e in evaluations} == {
            name.split(":", 1)[1] for name in models.checks
        }


def test_the_shipped_instance_keeps_the_librarys_log_in_the_run(sandbox, make_settings, tmp_path: Path, monkeypatch) -> None:
    """With the checked-in dagster.yaml, the plan and the progress lines are in the run's log (the UI shows them)."""
    from dagster import DagsterInstance

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster_home" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sandbox.world.set_today(NIGHT1)
    report = run_night(make_settings(), NIGHT1)
    assert report.success, report.failure
    instance = DagsterInstance.get()
    try:
        messages = [e.user_message for e in instance.all_logs(report.run_id)]
    finally:
        instance.dispose()
    assert any(m.startswith(f"night {NIGHT1}: {TARGETS} to fetch") for m in messages)
    assert any(m.startswith(f"summaries: {TARGETS}/{TARGETS} (") for m in messages)
    # Every warehouse table is an asset with its row count; the file has one summary table.
    assert report.value("warehouse/player_snapshots", "dagster/row_count") == TARGETS
    summary = {r.data["table"]: r.data for r in report.value("warehouse", "tables").records}
    assert summary["player_snapshots"] == {"table": "player_snapshots", "loaded": TARGETS, "rows": TARGETS}
    assert all(report.checks.values()) and "warehouse/player_snapshots:night_snapshot_rows" in report.checks
