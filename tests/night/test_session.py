"""One night's context (``tourneylake.night.session``) against the sandbox over real HTTP: bodies kept
and named by status, the searches left read only from a logged-in answer, and the ledger's
reconciliations with the service's count."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from tests.helpers import ledger_rows, remaining, sandbox_settings
from tourneylake.api import calls
from tourneylake.errors import RunFailed
from tourneylake.night.session import Session
from tourneylake.sandbox import DEMO

pytestmark = pytest.mark.xdist_group("session")

NIGHT = date(2026, 11, 20)


SANDBOX = dict(seed=3, today=NIGHT)


def test_bodies_are_kept_and_named_by_their_status(sandbox, tmp_path):
    session = Session.open(sandbox_settings(sandbox, tmp_path), sandbox.base_url, NIGHT)
    with session.client() as client:
        client.countries()
        with pytest.raises(Exception, match="101012"):
            client.player_summary("NoSuchNetwork", "x")
    lake = session.lake
    assert lake.has_raw(NIGHT, calls.COUNTRIES, {})
    statuses = {raw.resource: raw.status for raw in lake.iter_raw(NIGHT, status=None)}
    assert statuses == {"countries": "ok", "player_summary": "refused-101012"}


def test_a_read_only_session_writes_nothing(sandbox, tmp_path):
    session = Session.open(sandbox_settings(sandbox, tmp_path / "d"), sandbox.base_url, NIGHT, writable=False)
    assert session.read_remaining() == remaining(session.settings)
    assert not (tmp_path / "d").exists()


def test_searches_left_come_only_from_a_logged_in_answer(sandbox, tmp_path):
    good = Session.open(sandbox_settings(sandbox, tmp_path), sandbox.base_url, NIGHT)
    assert good.read_remaining() == sandbox.accounts.remaining(DEMO.username)
    wrong = Session.open(sandbox_settings(sandbox, tmp_path, password="not-it"), sandbox.base_url, NIGHT)
    with pytest.raises(RunFailed, match="loggedIn=false") as caught:
        wrong.read_remaining()  # the anonymous allowance it reports is not the account's
    assert "not-it" not in str(caught.value)


def test_a_dead_runs_call_in_flight_is_booked_into_its_night(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    dying = Session.open(settings, sandbox.base_url, NIGHT)
    before = dying.read_remaining()
    writer = dying.ledger(before)
    writer.sent(calls.PLAYER_SUMMARY, "k", 1)  # announced, then the process dies mid-call...
    user = sandbox.accounts.users[DEMO.username]
    assert sandbox.accounts.charge(user, 1)  # ...and the service charged it
    writer._file.close()  # the kernel drops the lock; nothing else happens

    later = Session.open(settings, sandbox.base_url, date(2026, 11, 21))
    assert later.reconcile_dead_runs(None) == {}  # no reading now: nothing closed, nothing guessed
    assert later.reconcile_dead_runs(later.read_remaining()) == {NIGHT: 1}
    (booked,) = ledger_rows(settings, NIGHT)
    assert (booked["resource"], booked["cost"], booked["outcome"]) == ("unattributed", 1, "reconciled_after_crash")
    assert booked["run_id"] == dying.run_id
    assert later.reconcile_dead_runs(later.read_remaining()) == {}  # closed: never booked twice


def test_a_drained_account_is_not_booked_against_the_run(sandbox, tmp_path):
    settings = sandbox_settings(sandbox, tmp_path)
    session = Session.open(settings, sandbox.base_url, NIGHT)
    before = session.read_remaining()
    with session.ledger(before) as ledger:
        ledger.record(
            "k", called_at=datetime.now(UTC), run_id=session.run_id, resource=calls.PLAYER_SUMMARY,
            attempt=1, cost=0, outcome="transport_error", error="timed out",
        )  # fmt: skip
        original = sandbox.accounts.remaining(DEMO.username)
        sandbox.accounts.set_remaining(DEMO.username, original - 500)  # another client spends 500
        try:
            assert session.reconcile_run(ledger) == 1  # at most the one call we could not see answered
        finally:
            sandbox.accounts.set_remaining(DEMO.username, original)
    assert [r["cost"] for r in ledger_rows(settings, NIGHT) if r["resource"] == "unattributed"] == [1]
