"""Fixtures every room's tests share: the sandbox, started once per module as the module asks."""

from __future__ import annotations

import os
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


# ------------------------------------------------------------------ PostgreSQL (shared state)
@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One PostgreSQL 16 server for the suite (PyPI's ``pgserver``: a wheel, started from Python,
    as root too), on a Unix socket, no TCP port. Test processes of one run (pytest-xdist's
    workers) share it: the last one to finish stops it and deletes its data."""
    import pgserver

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own folder, which its workers share (never another run's)
    server = pgserver.get_server(root / "postgres", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def state_url(postgres_server: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database of the suite's server for this test module: its URL, for
    ``TOURNEYLAKE_STATE_URL`` / ``Lake(state_url=…)``; dropped when the module ends."""
    import uuid

    import psycopg

    name = f"tl_{uuid.uuid4().hex[:12]}"
    admin = postgres_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.get_uri(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
