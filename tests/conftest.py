"""Fixtures every room's tests share: the sandbox, started once per module as the module asks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tourneylake.sandbox import SandboxServer, running_sandbox


@pytest.fixture(scope="module")
def sandbox(request: pytest.FixtureRequest) -> Iterator[SandboxServer]:
    """The module's sandbox over real HTTP on loopback, shared by its tests: started with the
    module's ``SANDBOX`` options (``running_sandbox``'s keywords: seed, today, players,
    time_of_day, latency_ms, faults), with the accounts of ``SANDBOX_USERS`` added
    ((username, password, plan, searches a day) each)."""
    options: dict[str, Any] = getattr(request.module, "SANDBOX", {})
    with running_sandbox(**options) as server:
        for user in getattr(request.module, "SANDBOX_USERS", ()):
            server.app.accounts.add_user(*user)
        yield server


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., SandboxServer]]:
    """Start sandboxes of a test's own (``running_sandbox``'s keywords), all stopped when it ends."""
    with ExitStack() as running:
        yield lambda **options: running.enter_context(running_sandbox(**options))
