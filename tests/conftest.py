"""Fixtures every room's tests share: the sandbox, started once per module as the module asks, and
a real S3 API (moto) with the store's environment pointing at it, and a real PostgreSQL (pgserver)
for shared state."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tourneylake.sandbox import SandboxServer, running_sandbox

#: The S3 secret the tests' store environment holds: never to be seen in an error or a file.
S3_SECRET = "moto-secret-do-not-show-42"


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


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """A real S3 API (``moto_server``) on a loopback port, one per module; its endpoint URL."""
    from tests.s3_proxy import running_moto

    with running_moto() as endpoint:
        yield endpoint


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], None]:
    """Point the store's usual environment (``AWS_*``) at an S3 endpoint, for this test only."""
    none = tmp_path_factory.mktemp("aws") / "none"

    def point(endpoint: str) -> None:
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            monkeypatch.delenv(name)
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": S3_SECRET,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_SHARED_CREDENTIALS_FILE": str(none),
            "AWS_CONFIG_FILE": str(none),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    return point


@pytest.fixture
def s3(moto: str, s3_env: Callable[[str], None]) -> str:
    """A fresh bucket on the module's moto, the usual AWS environment pointing at it; the
    lake's ``s3://bucket/prefix`` URL."""
    import fsspec

    s3_env(moto)
    bucket = f"lake-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    return f"s3://{bucket}/prefix"


# ------------------------------------------------------------------ PostgreSQL (shared state)
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One PostgreSQL 16 server for the suite (PyPI's ``pgserver``: a wheel, started from Python,
    as root too), on a Unix socket, no TCP port. Test processes of one run (pytest-xdist's
    workers) share it: the last one to finish stops it and deletes its data."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with postgres_at(Path(tempfile.gettempdir()) / f"tourneylake-postgres-{run}") as server:
        yield server


@contextlib.contextmanager
def postgres_at(root: Path) -> Iterator[Any]:
    """A PostgreSQL server on ``root/data``, made or joined (one process at a time: pgserver
    races), stopped and deleted by the last process out. ``root`` is outside pytest's folders:
    run as root, the server runs as another user, which must traverse the folders above it, and
    every pytest session as root makes its own 0700 again. A test that restarts its server asks
    for one of its own (a module's ``postgres_server``), so the suite's goes on for the others."""
    import pgserver

    root.mkdir(exist_ok=True)
    with open(root / ".starting", "w") as starting:
        fcntl.flock(starting, fcntl.LOCK_EX)
        server = pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        if not (root / "data").exists():  # the last one out deleted its data: no server may outlive it
            _stop_postmasters_of(root / "data")
        (root / ".starting").unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            root.rmdir()  # the last one out (its data deleted)


def _stop_postmasters_of(pgdata: Path) -> None:
    """Stop what still runs on ``pgdata``: pgserver stops the postmaster it started, and a test
    that restarted the server (``pg_ctl restart``) left a new one it does not know."""
    import psutil

    for process in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.info["name"] == "postgres" and str(pgdata) in (process.info["cmdline"] or []):
                process.terminate()
                with contextlib.suppress(psutil.TimeoutExpired):
                    process.wait(10)
                if process.is_running():
                    process.kill()


@pytest.fixture(scope="module")
def state_url(postgres_server: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database of the suite's server for this test module: its URL, for
    ``TOURNEYLAKE_STATE_URL`` / ``Lake(state_url=…)``; dropped when the module ends."""
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
