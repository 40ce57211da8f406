"""The metering of a night's calls (``tourneylake.night.metering``): the budget's gate and the
ledger's write-ahead line before a call goes out, its row after, and the reconciliations of the
ledger with the service's count (this run's, and a dead run's) against the sandbox over HTTP."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from tests.helpers import ledger_rows, sandbox_settings
from tourneylake.api import Attempt, calls
from tourneylake.errors import BudgetRefused
from tourneylake.lake.lake import Lake
from tourneylake.night.budget import Budget, CostModel
from tourneylake.night.metering import Meter
from tourneylake.night.session import Session
from tourneylake.sandbox import DEMO

pytestmark = pytest.mark.xdist_group("metering")

NIGHT = date(2026, 11, 20)

SANDBOX = dict(seed=3, today=NIGHT)


def _attempt(call: calls.Call, outcome: str, remaining_after: int | None) -> Attempt:
    return Attempt(call, 1, datetime.now(UTC), 0.01, outcome, None, remaining_after, None)


def test_the_gate_writes_the_line_before_the_call_and_refuses_past_the_budget(sandbox, tmp_path) -> None:
    settings = sandbox_settings(sandbox, tmp_path)  # no call reaches it: the hooks alone are tried
    lake = Lake(tmp_path).claim("sandbox")
    meter = Meter(settings, lake, NIGHT, "run-1", None, lambda: 1)
    budget = Budget(remaining=1, max_searches_per_run=None, reserve=0, costs=CostModel())
    summary = calls.player_summary("PokerStars", "Borbas.Geri")
    with meter.ledger(1) as ledger:
        hooks = meter.hooks(budget, ledger)
        assert hooks["before_attempt"](calls.countries(), 1) is None  # free: no line, no budget
        written = hooks["before_attempt"](summary, 1)
        assert written is not None
        written.result(timeout=10)
        (open_run,) = (tmp_path / "lake" / "_ledger").rglob("run-run-1.open.jsonl")
        assert b'"kind":"sent"' in open_run.read_bytes()  # announced before it goes out
        with pytest.raises(BudgetRefused):
            hooks["before_attempt"](calls.player_summary("PokerStars", "someone else"), 1)
        hooks["on_attempt"](_attempt(summary, "ok", 0)).result(timeout=10)
    (row,) = [r for r in ledger_rows(settings, NIGHT) if r["resource"] == calls.PLAYER_SUMMARY]
    assert (row["cost"], row["remaining_after"], row["outcome"]) == (1, 0, "ok")


def test_a_call_whose_line_took_a_while_is_withdrawn_when_the_budget_stopped_meanwhile(sandbox, tmp_path) -> None:
    """On an object store a write-ahead line waits for its group's PUT, and its call's HTTP slot
    is another's meanwhile; a budget stop in that time withdraws the call before it goes out:
    its claim given back, its line closed by a `withdrawn` one (not a row), nothing unanswered."""
    from tourneylake.lake.ledger import Ledger

    settings = sandbox_settings(sandbox, tmp_path)  # no call reaches it: the hooks alone are tried
    meter = Meter(settings, Lake(tmp_path).claim("sandbox"), NIGHT, "run-3", None, lambda: 10)
    budget = Budget(remaining=10, max_searches_per_run=None, reserve=0, costs=CostModel())
    summary, other = calls.player_summary("PokerStars", "Borbas.Geri"), calls.player_summary("PokerStars", "x")
    with meter.ledger(10) as ledger:
        hooks = meter.hooks(budget, ledger)
        hooks["before_attempt"](summary, 1).result(timeout=10)
        hooks["before_attempt"](other, 1).result(timeout=10)
        hooks["confirm_attempt"](other, 1)  # no stop: it goes
        assert budget.in_flight == 2
        budget.stop("quota: exhausted")
        with pytest.raises(BudgetRefused, match="quota"):
            hooks["confirm_attempt"](summary, 1)
        assert budget.in_flight == 1 and dict(ledger.uncertain) == {calls.PLAYER_SUMMARY: 1}  # only the call that went
        hooks["on_attempt"](_attempt(other, "ok", 9)).result(timeout=10)
    (run,) = Ledger(Lake(tmp_path)).runs(NIGHT)
    assert run.closed and run.unanswered == [] and len(run.entries) == 1


def test_a_refused_or_lost_call_costs_nothing_in_its_row(sandbox, tmp_path) -> None:
    settings = sandbox_settings(sandbox, tmp_path)  # no call reaches it: the hooks alone are tried
    meter = Meter(settings, Lake(tmp_path).claim("sandbox"), NIGHT, "run-2", None, lambda: 10)
    summary = calls.player_summary("PokerStars", "Borbas.Geri")
    with meter.ledger(10) as ledger:
        hooks = meter.hooks(None, ledger)
        hooks["before_attempt"](summary, 1).result(timeout=10)
        hooks["on_attempt"](_attempt(summary, "transport_error", None)).result(timeout=10)
    (row,) = [r for r in ledger_rows(settings, NIGHT) if r["resource"] == calls.PLAYER_SUMMARY]
    assert (row["cost"], row["outcome"]) == (0, "transport_error")


def test_a_dead_runs_call_in_flight_is_booked_into_its_night(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    dying = Session.open(settings, sandbox.base_url, NIGHT)
    before = dying.read_remaining()
    writer = dying.meter.ledger(before)
    writer.sent(calls.PLAYER_SUMMARY, "k", 1)  # announced, then the process dies mid-call...
    user = sandbox.accounts.users[DEMO.username]
    assert sandbox.accounts.charge(user, 1)  # ...and the service charged it
    writer._file.close()  # the kernel drops the lock; nothing else happens

    later = Session.open(settings, sandbox.base_url, date(2026, 11, 21))
    assert later.meter.reconcile_dead_runs(None) == {}  # no reading now: nothing closed, nothing guessed
    assert later.meter.reconcile_dead_runs(later.read_remaining()) == {NIGHT: 1}
    (booked,) = ledger_rows(settings, NIGHT)
    assert (booked["resource"], booked["cost"], booked["outcome"]) == ("unattributed", 1, "reconciled_after_crash")
    assert booked["run_id"] == dying.run_id
    assert later.meter.reconcile_dead_runs(later.read_remaining()) == {}  # closed: never booked twice


def test_a_drained_account_is_not_booked_against_the_run(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    session = Session.open(settings, sandbox.base_url, NIGHT)
    before = session.read_remaining()
    with session.meter.ledger(before) as ledger:
        ledger.record(
            "k", called_at=datetime.now(UTC), run_id=session.run_id, resource=calls.PLAYER_SUMMARY,
            attempt=1, cost=0, outcome="transport_error", error="timed out",
        )  # fmt: skip
        original = sandbox.accounts.remaining(DEMO.username)
        sandbox.accounts.set_remaining(DEMO.username, original - 500)  # another client spends 500
        try:
            assert session.meter.reconcile_run(ledger) == 1  # at most the one call we could not see answered
        finally:
            sandbox.accounts.set_remaining(DEMO.username, original)
    assert [r["cost"] for r in ledger_rows(settings, NIGHT) if r["resource"] == "unattributed"] == [1]
