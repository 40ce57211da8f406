"""One night's context (``tourneylake.night.session``) against the sandbox over real HTTP: bodies kept
and named by status, the searches left read only from a logged-in answer."""

from __future__ import annotations

from datetime import date

import pytest

from tests.helpers import remaining, sandbox_settings
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
    assert lake.raw.has(NIGHT, calls.COUNTRIES, {})
    statuses = {raw.resource: raw.status for raw in lake.raw.bodies(NIGHT, status=None)}
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
