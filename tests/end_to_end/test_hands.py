"""Hand analysis (``tourneylake.hands``) against the sandbox over real HTTP: once per hand,
stored, subscribers only, within the run's budget; the opt-in Dagster asset."""

from __future__ import annotations

import hashlib
from datetime import date, timedelta

import orjson
import pytest

from tests.helpers import HAND, drop_status_records, ledger_rows, remaining, sandbox_settings
from tourneylake.errors import RunFailed
from tourneylake.hands import HandAnalysisRefused, analyze_hand, analyze_inbox, inbox_dir
from tourneylake.lake.segments import forget_indexes
from tourneylake.night.session import Session
from tourneylake.sandbox import DEMO, FREE

pytestmark = pytest.mark.xdist_group("hands")


SANDBOX = dict(seed=11, today=date(2025, 3, 1))


def test_hand_analysed_once_stored_and_free_the_second_time(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    before = remaining(settings)
    analysis, spent = analyze_hand(settings, HAND.encode(), None)
    assert spent == 5
    assert "AKo" in analysis
    digest = hashlib.sha256(HAND.encode()).hexdigest()
    record = orjson.loads((tmp_path / "hands" / f"{digest}.json").read_bytes())
    assert record["hand"] == HAND and record["analysis"] == analysis and record["searches"] == 5
    assert record["lang"] is None and record["analysed_at"]
    again, spent_again = analyze_hand(settings, HAND.encode(), None)
    assert (again, spent_again) == (analysis, 0)
    assert before - remaining(settings) == 5
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["outcome"]) for r in rows] == [("hand_analysis", 5, "ok")]
    assert sum(r["cost"] for r in rows) == before - remaining(settings)
    # Nothing secret in what was written.
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert DEMO.password.encode() not in written and DEMO.encoded_password.encode() not in written


def test_hand_analysis_is_for_subscribers_only(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path, username=FREE.username, password=FREE.password)
    before = remaining(settings)
    with pytest.raises(HandAnalysisRefused, match="hand analysis is for subscribers only"):
        analyze_hand(settings, HAND.encode(), None)
    assert remaining(settings) == before
    assert not (tmp_path / "hands").exists()
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"], r["error_code"]) for r in rows] == [("hand_analysis", 0, 102004)]
    assert FREE.password not in str(rows)


def test_wrong_credentials_stop_before_any_hand_is_sent(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path, password="not-the-password")
    with pytest.raises(RunFailed, match="credentials refused"):
        analyze_hand(settings, HAND.encode(), None)
    assert ledger_rows(settings) == []


def test_inbox_hands_within_the_run_budget(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=5)
    inbox = inbox_dir(settings)
    inbox.mkdir(parents=True)
    (inbox / "a.txt").write_text(HAND)
    (inbox / "b.txt").write_text(HAND.replace("[Ah Kd]", "[7c 2d]"))
    when = sandbox.world.today
    before = remaining(settings)
    first = analyze_inbox(Session.open(settings, settings.base_url, when))
    assert first.analysed == ["a.txt"] and [n for n, _ in first.deferred] == ["b.txt"]
    assert first.searches_spent == 5 == before - remaining(settings)
    # A rerun of the same night: the cap is spent, a.txt is skipped for free.
    rerun = analyze_inbox(Session.open(settings, settings.base_url, when))
    assert rerun.skipped == ["a.txt"] and rerun.analysed == [] and rerun.searches_spent == 0
    # The next night: b.txt is analysed, a.txt still skipped.
    nxt = analyze_inbox(Session.open(settings, settings.base_url, when + timedelta(days=1)))
    assert nxt.analysed == ["b.txt"] and nxt.skipped == ["a.txt"]
    assert sum(r["cost"] for r in ledger_rows(settings)) == 10


def test_hands_asset_is_opt_in_and_analyses_the_inbox(sandbox, tmp_path):
    from dagster import AssetKey, DagsterInstance, materialize

    from tourneylake.assets.hands import hand_analyses
    from tourneylake.assets.resource import TourneylakeResource
    from tourneylake.pipelines.definitions import defs as code_location

    defs = code_location()
    graph = defs.resolve_asset_graph()
    nightly = defs.resolve_job_def("nightly").asset_layer.selected_asset_keys
    hands = defs.resolve_job_def("hands").asset_layer.selected_asset_keys
    assert AssetKey("hand_analyses") in graph.get_all_asset_keys()
    assert AssetKey("hand_analyses") not in nightly
    assert hands == {AssetKey("hand_analyses")}

    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=5)
    inbox = inbox_dir(settings)
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


def test_a_hand_paid_for_but_not_kept_is_not_paid_again(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    analysis, spent = analyze_hand(settings, HAND.encode(), None)
    assert spent == 5
    for record in (tmp_path / "hands").iterdir():  # the process died after paying, before keeping it
        record.unlink()
    before = remaining(settings)
    again, spent_again = analyze_hand(settings, HAND.encode(), None)
    assert (again, spent_again) == (analysis, 0) and remaining(settings) == before  # the paid answer, from the lake


def test_a_hand_whose_answer_was_left_unread_is_not_paid_again(sandbox, tmp_path):
    """The process died after the answer was saved, before its envelope was read (the body is
    still ``received``): the re-run settles it and answers from it."""
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.raw import OK, RECEIVED

    settings = sandbox_settings(sandbox, tmp_path)
    analysis, spent = analyze_hand(settings, HAND.encode(), None)
    assert spent == 5
    for record in (tmp_path / "hands").iterdir():
        record.unlink()
    lake = Lake(settings.data_dir)
    (night,) = lake.raw.nights()
    (accepted,) = lake.raw.refs(night, "hand_analysis")
    drop_status_records(lake, night)  # as the save left it
    assert [ref.status for ref in lake.raw.refs(night, "hand_analysis", status=None)] == [RECEIVED]
    before = remaining(settings)
    again, spent_again = analyze_hand(settings, HAND.encode(), None)
    assert (again, spent_again) == (analysis, 0) and remaining(settings) == before  # not paid twice
    assert [ref.name for ref in lake.raw.refs(night, "hand_analysis", status=None)] == [f"{accepted.digest}.json.gz"]
    assert len(lake.raw.refs(night, "hand_analysis", status=OK)) == 1


def test_a_hand_charged_but_never_answered_is_booked_when_the_run_fails(sandbox, tmp_path):
    """The answer is slower than the client waits (the service charged; the client saw a
    timeout) and the run ends by that error: its ledger still adds up to the service's count."""
    from tourneylake.api import TransportError, calls
    from tourneylake.sandbox import Faults
    from tourneylake.sandbox.faults import FaultPlan

    settings = sandbox_settings(sandbox, tmp_path, timeout_s=0.25, max_attempts=1)
    session = Session.open(settings, settings.base_url, sandbox.world.today - timedelta(days=1))
    before = remaining(settings)
    with pytest.raises(TransportError), session.meter.metered(calls.HAND_ANALYSIS) as (budget, ledger):  # noqa: PT012
        try:
            sandbox.app.plan = FaultPlan(Faults(slow=1.0, slow_seconds=0.6), 0, 0.0)
            with session.client(**session.meter.hooks(budget, ledger)) as client:
                client.send(calls.hand_analysis(HAND))
        finally:
            sandbox.app.plan = FaultPlan(Faults(), 0, 0.0)
    spent = before - remaining(settings)
    assert spent == 5  # charged, though its answer never came
    assert sum(int(r["cost"]) for r in ledger_rows(settings)) == spent


def test_single_hands_share_the_nights_hand_cap(sandbox, tmp_path):
    """`hand analyze` runs one after another share the night's cap, as the inbox job does:
    each run no longer starts with the whole cap."""
    from tourneylake.errors import BudgetRefused

    settings = sandbox_settings(sandbox, tmp_path, max_searches_per_run=5)
    _, spent = analyze_hand(settings, HAND.encode(), None)
    assert spent == 5
    before = remaining(settings)
    with pytest.raises(BudgetRefused, match="run cap"):
        analyze_hand(settings, HAND.replace("Hand #", "Hand #9").encode(), None)
    assert remaining(settings) == before


def test_a_hand_whose_paid_answer_could_not_be_read_is_not_paid_again_that_night(sandbox, tmp_path):
    """An answer paid for and marked unusable (complete, unreadable: the service would answer
    the same) is not asked again that night; it stays in the lake for a rebuild."""
    from tourneylake.api import UnusableResponse
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.raw import UNUSABLE

    settings = sandbox_settings(sandbox, tmp_path)
    analyze_hand(settings, HAND.encode(), None)
    for record in (tmp_path / "hands").iterdir():
        record.unlink()
    lake = Lake(settings.data_dir)
    (night,) = lake.raw.nights()
    (accepted,) = lake.raw.refs(night, "hand_analysis")
    lake.raw.settle(accepted, UNUSABLE)  # as a read that failed leaves it
    before = remaining(settings)
    with pytest.raises(UnusableResponse, match=r"paid for and could not be read .*not asked again tonight"):
        analyze_hand(settings, HAND.encode(), None)
    assert remaining(settings) == before
    assert len(lake.raw.refs(night, "hand_analysis", status=UNUSABLE)) == 1


def test_a_hand_paid_for_on_another_night_is_not_paid_again(sandbox, tmp_path):
    """The hands job paid, then died before keeping its record; the next night's run answers
    from the lake (a hand's analysis does not depend on the night)."""
    from tourneylake.lake.lake import Lake

    settings = sandbox_settings(sandbox, tmp_path)
    analysis, _ = analyze_hand(settings, HAND.encode(), None)
    for record in (tmp_path / "hands").iterdir():
        record.unlink()
    lake = Lake(settings.data_dir)
    (night,) = lake.raw.nights()
    folder = lake.root / "_raw" / f"snapshot_date={night.isoformat()}"
    folder.rename(folder.with_name(f"snapshot_date={(night - timedelta(days=1)).isoformat()}"))  # paid the night before
    forget_indexes()
    before = remaining(settings)
    again, spent = analyze_hand(settings, HAND.encode(), None)
    assert (again, spent) == (analysis, 0) and remaining(settings) == before


def test_a_hand_analysed_while_another_client_spends_costs_what_a_hand_costs(sandbox, tmp_path):
    """Another client of the account (a harvest, a person on the website) spends 200 searches
    between the run's reading and the hand's answer: the hand is booked at 5, not 205 (its one
    reading is outvoted by the documented cost), and the 200 are shown as someone else's."""
    from tourneylake.lake.ledger import EXTERNAL_SPENDING

    settings = sandbox_settings(sandbox, tmp_path)
    original = sandbox.accounts.remaining(DEMO.username)
    drained = []

    def drain_after_the_reading(body: bytes, fmt: str) -> bytes:
        if not drained:
            drained.append(200)
            sandbox.accounts.set_remaining(DEMO.username, sandbox.accounts.remaining(DEMO.username) - 200)
        return body

    sandbox.app.answer_rewrites[("countries", "")] = drain_after_the_reading
    try:
        _, spent = analyze_hand(settings, HAND.replace("Hand #", "Hand #7").encode(), None)
    finally:
        del sandbox.app.answer_rewrites[("countries", "")]
        sandbox.accounts.set_remaining(DEMO.username, original)
    assert drained and spent == 5
    rows = ledger_rows(settings)
    assert [(r["resource"], r["cost"]) for r in rows if r["resource"] == "hand_analysis"] == [("hand_analysis", 5)]
    (external,) = [r for r in rows if r["outcome"] == EXTERNAL_SPENDING]
    assert external["cost"] == 0 and external["error"].startswith("200 searches spent by another client")


def test_one_hand_analysed_by_two_processes_at_once_is_paid_once(sandbox, tmp_path):
    """Two `hand analyze` runs of one hand at the same moment (each its own session, as two
    processes have): the second waits for the first's paid answer and takes it from the lake."""
    from concurrent.futures import ThreadPoolExecutor

    from tourneylake.sandbox import Faults
    from tourneylake.sandbox.faults import FaultPlan

    settings = sandbox_settings(sandbox, tmp_path)
    hand = HAND.replace("Hand #", "Hand #5").encode()
    before = remaining(settings)
    sandbox.app.plan = FaultPlan(Faults(), 0, 400.0)  # 400 ms a call: both runs in flight at once
    try:
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: analyze_hand(settings, hand, None), range(2)))
    finally:
        sandbox.app.plan = FaultPlan(Faults(), 0, 0.0)
    assert sorted(spent for _, spent in answers) == [0, 5] and answers[0][0] == answers[1][0]
    assert before - remaining(settings) == 5
    assert [r["cost"] for r in ledger_rows(settings) if r["resource"] == "hand_analysis"] == [5]


def _killed_mid_call(writer, resource: str) -> None:
    """A run's ledger as a process killed after sending one call of ``resource`` leaves it."""
    writer.sent(resource, "k1", 1)
    writer._file.close()


def test_a_hand_run_killed_mid_call_is_reconciled_by_the_next_hand_run(sandbox, tmp_path):
    """A `hand analyze` killed after sending (the service charged 5, no answer came) left its
    run open, with no account name; the next run of the same credentials books the 5 to that
    run's night (also with `accounts:` configured, when no harvest ever reconciles it), and
    writes that night's `search_ledger` partition again."""
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import RECONCILED_AFTER_CRASH, Ledger, LedgerWriter, login_digest

    settings = sandbox_settings(sandbox, tmp_path)
    lake = Lake(settings.data_dir)
    earlier = sandbox.world.today - timedelta(days=3)
    before = remaining(settings)
    _killed_mid_call(LedgerWriter(lake, earlier, "killed-hand", remaining_before=before), "hand_analysis")
    bob = login_digest("bob@example.com")
    _killed_mid_call(LedgerWriter(lake, earlier, "killed-bob", remaining_before=50, account="bob", login=bob), "player_summary")
    # (another account's: not these credentials' to reconcile)
    sandbox.accounts.set_remaining(DEMO.username, before - 5)  # ... after the service charged it
    _, spent = analyze_hand(settings, HAND.replace("Hand #", "Hand #3").encode(), None)
    assert spent == 5
    assert [run.run_id for run in Ledger(lake).dead_runs()] == ["killed-bob"]
    booked = [r for r in ledger_rows(settings, earlier) if r["outcome"] == RECONCILED_AFTER_CRASH]
    assert [(r["run_id"], r["cost"]) for r in booked] == [("killed-hand", 5)]
    assert sum(lake.tables.read_table("search_ledger", earlier).column("cost").to_pylist()) == 5
    assert sum(int(r["cost"]) for r in ledger_rows(settings)) == before - remaining(settings) == 10


def test_a_dead_run_is_left_to_later_while_a_harvest_of_its_credentials_runs(sandbox, tmp_path):
    """While a harvest of the same credentials holds its lock (spending, with charges not yet in
    the ledger), a hand run does not compare counts for a dead run (it would book the harvest's
    charges to it): the run stays open, and the next run without a harvest reconciles it."""
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import RECONCILED_AFTER_CRASH, Ledger, LedgerWriter

    settings = sandbox_settings(sandbox, tmp_path)
    lake = Lake(settings.data_dir)
    earlier = sandbox.world.today - timedelta(days=3)
    before = remaining(settings)
    _killed_mid_call(LedgerWriter(lake, earlier, "killed-hand", remaining_before=before), "hand_analysis")  # never charged
    sandbox.accounts.set_remaining(DEMO.username, before - 5)  # the harvest's charges, not in its ledger yet
    with lake.locks.hold("harvest-main"):  # a harvest (of an account that may share the username)
        _, spent = analyze_hand(settings, HAND.replace("Hand #", "Hand #4").encode(), None)
    assert spent == 5 and [run.run_id for run in Ledger(lake).dead_runs()] == ["killed-hand"]
    assert not (tmp_path / "lake" / "_state" / "cost_votes.json").exists()  # its reading may hold the harvest's
    sandbox.accounts.set_remaining(DEMO.username, remaining(settings) + 5)  # (the harvest's charges undone)
    analyze_hand(settings, HAND.replace("Hand #", "Hand #6").encode(), None)
    assert Ledger(lake).dead_runs() == []
    assert [r["cost"] for r in ledger_rows(settings, earlier) if r["outcome"] == RECONCILED_AFTER_CRASH] == [0]


def test_a_changed_price_is_learned_across_runs_of_one_call_each(sandbox, tmp_path):
    """The service starts charging 6 for a hand: one run's one reading is outvoted by the
    documented 5, but the votes are kept in the lake, so the second run's reading agrees with
    the first and the hand is booked at 6."""
    settings = sandbox_settings(sandbox, tmp_path)
    original = sandbox.accounts.remaining(DEMO.username)

    def one_more_after_the_reading(body: bytes, fmt: str) -> bytes:
        sandbox.accounts.set_remaining(DEMO.username, sandbox.accounts.remaining(DEMO.username) - 1)
        return body

    sandbox.app.answer_rewrites[("countries", "")] = one_more_after_the_reading
    try:
        costs = [analyze_hand(settings, HAND.replace("Hand #", f"Hand #8{i}").encode(), None)[1] for i in range(2)]
    finally:
        del sandbox.app.answer_rewrites[("countries", "")]
        sandbox.accounts.set_remaining(DEMO.username, original)
    assert costs == [5, 6]
    assert orjson.loads((tmp_path / "lake" / "_state" / "cost_votes.json").read_bytes()) == {"hand_analysis": [6, 6]}


def _killed_run_of_main(sandbox, tmp_path):
    """A run of the account name `main`, with the default username, killed two nights ago
    mid-call; returns (settings, lake, that night, the searches left when it started)."""
    from tourneylake.lake.lake import Lake
    from tourneylake.lake.ledger import LedgerWriter, login_digest

    settings = sandbox_settings(sandbox, tmp_path)
    lake = Lake(settings.data_dir)
    earlier = sandbox.world.today - timedelta(days=2)
    before = remaining(settings)
    main = LedgerWriter(lake, earlier, "killed-main", remaining_before=before, account="main", login=login_digest(DEMO.username))
    _killed_mid_call(main, "player_summary")
    return settings, lake, earlier, before


def test_a_dead_run_of_another_account_name_with_the_same_username_is_these_credentials(sandbox, tmp_path):
    """`accounts:` may name the default username again (`main: coach@...`): a killed run of
    `main` spent from the same count, so a hand run of the default credentials reconciles it."""
    from tourneylake.lake.ledger import RECONCILED_AFTER_CRASH, Ledger

    settings, lake, earlier, before = _killed_run_of_main(sandbox, tmp_path)
    sandbox.accounts.set_remaining(DEMO.username, before - 1)  # the service charged it
    analyze_hand(settings, HAND.replace("Hand #", "Hand #2").encode(), None)
    assert Ledger(lake).dead_runs() == []
    booked = [
        (r["run_id"], r["account"], r["cost"]) for r in ledger_rows(settings, earlier) if r["outcome"] == RECONCILED_AFTER_CRASH
    ]
    assert booked == [("killed-main", "main", 1)]


def test_a_damaged_cost_votes_file_is_started_again(sandbox, tmp_path):
    """The votes are a cache: a file that is not JSON, or holds no lists, costs nothing and is
    written again from the run's own votes."""
    settings = sandbox_settings(sandbox, tmp_path)
    votes = tmp_path / "lake" / "_state" / "cost_votes.json"
    for i, damage in enumerate([b"{not json", b'{"hand_analysis": 5}']):
        votes.parent.mkdir(parents=True, exist_ok=True)
        votes.write_bytes(damage)
        _, spent = analyze_hand(settings, HAND.replace("Hand #", f"Hand #9{i}").encode(), None)
        assert spent == 5 and orjson.loads(votes.read_bytes()) == {"hand_analysis": [5]}


def test_another_account_names_dead_run_waits_for_that_accounts_harvest(sandbox, tmp_path):
    """A harvest of `alice` may close a dead run of `main` (same username) only under `main`'s
    harvest lock: while `main`'s harvest runs, that harvest reconciles its own run."""
    from tourneylake.lake.ledger import Ledger

    settings, lake, earlier, before = _killed_run_of_main(sandbox, tmp_path)
    alice = Session.open(settings, settings.base_url, sandbox.world.today, account="alice")
    with lake.locks.hold("harvest-alice"):  # alice's harvest, reconciling at its start
        with lake.locks.hold("harvest-main"):  # main's harvest runs
            assert alice.meter.reconcile_dead_runs(before) == {}
        assert [run.run_id for run in Ledger(lake).dead_runs()] == ["killed-main"]
        assert alice.meter.reconcile_dead_runs(before) == {earlier: 0}  # main's lock free: closed (not charged)
    assert Ledger(lake).dead_runs() == []


def test_a_hands_vote_is_not_kept_when_a_harvest_started_during_its_call(sandbox, tmp_path, monkeypatch):
    from contextlib import ExitStack

    from tourneylake import hands
    from tourneylake.lake.lake import Lake

    settings = sandbox_settings(sandbox, tmp_path)
    analyse = hands._analyse_one
    harvest = ExitStack()

    def a_harvest_starts(*args, **kwargs):
        harvest.enter_context(Lake(settings.data_dir).locks.hold("harvest-other"))
        return analyse(*args, **kwargs)

    monkeypatch.setattr(hands, "_analyse_one", a_harvest_starts)
    with harvest:
        _, spent = analyze_hand(settings, HAND.replace("Hand #", "Hand #77").encode(), None)
    assert spent == 5 and not (tmp_path / "lake" / "_state" / "cost_votes.json").exists()
