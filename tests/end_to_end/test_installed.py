"""The tool as a stranger installs it: the wheel built from this tree, installed into a fresh
virtual environment outside the repository (the lock's versions, from uv's cache), run from empty
folders with nothing of the repository importable — the path README's "Your own account" walks:
``init``, a night, ``status``, ``query``, ``report``, and ``doctor`` against the sandbox served over
HTTP as a live service would be (good credentials, wrong ones, an unreachable URL)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import DEMO_ENV, REPO

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("installed")]


@dataclass(frozen=True)
class Installed:
    root: Path  # outside the repository: the venv, the projects
    venv: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.venv / "bin" / "tourneylake"), *args]
        return subprocess.run(command, cwd=cwd, env={**self.env, **env}, capture_output=True, text=True, timeout=timeout)

    def site_packages(self) -> Path:
        (found,) = (self.venv / "lib").glob("python3.*/site-packages")
        return found


def _uv(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build and install the wheel (`make sync` installs it)"
    done = subprocess.run([uv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (args, done.stderr[-3000:])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel built (offline) and installed into a virtual environment of its own: the
    dependencies at the lock's versions from uv's cache (linked, not copied), then the wheel."""
    root = tmp_path_factory.mktemp("installed")
    assert REPO not in root.parents
    _uv("build", "--wheel", "--offline", "--out-dir", str(root / "dist"), cwd=REPO)
    (wheel,) = (root / "dist").glob("tourneylake-*.whl")
    venv = root / "venv"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV", "PYTHON"))}
    _uv(
        "sync", "--frozen", "--offline", "--no-default-groups", "--no-install-project", "--project", str(REPO),
        cwd=root, env={**clean, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_LINK_MODE": "symlink", "UV_COMPILE_BYTECODE": "0"},
    )  # fmt: skip
    _uv("pip", "install", "--offline", "--no-deps", "--python", str(venv / "bin" / "python"), str(wheel), cwd=root, env=clean)
    env = {k: v for k, v in clean.items() if not k.startswith(("TOURNEYLAKE_", "DAGSTER_"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        XDG_CACHE_HOME=str(root / "cache"),  # dbt's parse of the installed project: not the user's cache
        PYTHONWARNINGS="ignore",
    )
    return Installed(root, venv, env)


def test_nothing_of_the_repository_is_importable(installed: Installed) -> None:
    empty = installed.root / "empty"
    empty.mkdir()
    code = (
        "import importlib.util as u, tourneylake, tourneylake.pipelines.cli, tourneylake.assets.resource; "
        "print(tourneylake.__file__); print([n for n in ('assets', 'pipelines', 'tests', 'sql') if u.find_spec(n)])"
    )
    done = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", code],
        cwd=empty,
        env=installed.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    where, generic = done.stdout.splitlines()
    assert Path(where).is_relative_to(installed.site_packages()) and generic == "[]"  # nothing generic at the top either


def test_a_sandbox_project_runs_its_nights_from_an_empty_folder(installed: Installed) -> None:
    made = installed.run("init", "nights", "--sandbox", cwd=installed.root)
    assert made.returncode == 0, made.stderr
    project = installed.root / "nights"
    package = sorted(p for p in installed.site_packages().rglob("*") if "__pycache__" not in p.parts)

    home = str(project / "dagster_home")  # README's `export DAGSTER_HOME="$PWD/dagster_home"`
    night = installed.run("run", "--max-searches", "3", cwd=project, DAGSTER_HOME=home)  # a first night on a small cap
    assert night.returncode == 0, (night.stdout[-2000:], night.stderr[-3000:])
    assert "searches spent: 3" in night.stdout and "run ok" in night.stdout and "models ok" in night.stdout
    assert "Traceback" not in night.stderr
    assert (
        sorted(p for p in installed.site_packages().rglob("*") if "__pycache__" not in p.parts) == package
    )  # nothing written there
    assert (project / "dagster_home" / "history" / "runs.db").is_file()  # the run is in the folder's instance, for `dagster dev`

    status = installed.run("status", cwd=project)
    assert status.returncode == 0 and "1 night(s) held" in status.stdout and "run cap 3" in status.stdout, status.stdout
    query = installed.run("query", "example", "--csv", cwd=project)
    assert query.returncode == 0 and query.stdout.startswith('"network","player",'), query.stderr
    report = installed.run("report", cwd=project)
    assert report.returncode == 0, report.stderr
    page = Path(report.stdout.split(": ", 1)[1].split(" (", 1)[0])
    assert page.is_file() and page.is_relative_to(project / "data" / "reports")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def served(installed: Installed) -> Iterator[str]:
    """The installed tool's sandbox served over HTTP, as a live service is: its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [str(installed.venv / "bin" / "tourneylake"), "sandbox", "--port", str(port)],
        cwd=installed.root, env=installed.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # "tourneylake sandbox on http://127.0.0.1:PORT/api/demo/ …" once it listens
        assert f"http://127.0.0.1:{port}/" in line, line
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_doctor_checks_a_live_account_for_free(installed: Installed, served: str) -> None:
    """A project for a live account: `.env` from `.env.example` with the five required settings
    (the served sandbox's URL and account), then `doctor`; a wrong password, an unreachable URL."""
    made = installed.run("init", "live", cwd=installed.root)
    assert made.returncode == 0, made.stderr
    project = installed.root / "live"
    values = {**DEMO_ENV, "TOURNEYLAKE_BASE_URL": served}
    lines = (project / ".env.example").read_text().splitlines()
    (project / ".env").write_text(
        "\n".join(
            next((f"{v}={values[v]}" for v in values if line == f"# {v}=" or line.startswith(f"# {v}=")), line) for line in lines
        )
    )
    ok = installed.run("doctor", cwd=project)
    assert ok.returncode == 0, (ok.stdout[-2000:], ok.stderr[-2000:])
    assert "✓ account: analyst@example.com: credentials accepted" in ok.stdout and "✓ plan: tonight's plan" in ok.stdout
    assert not (project / "data").exists()  # free and read-only

    wrong = installed.run("doctor", cwd=project, TOURNEYLAKE_PASSWORD="definitely-wrong")  # the environment wins over .env
    assert wrong.returncode == 1
    (problem,) = [line for line in wrong.stdout.splitlines() if line.startswith("✗")]
    assert problem.startswith("✗ account:") and "TOURNEYLAKE_PASSWORD" in problem
    assert "definitely-wrong" not in wrong.stdout + wrong.stderr

    closed = f"http://127.0.0.1:{_free_port()}"
    unreachable = installed.run("doctor", cwd=project, TOURNEYLAKE_BASE_URL=closed, TOURNEYLAKE_MAX_ATTEMPTS="2")
    assert unreachable.returncode == 1
    (problem,) = [line for line in unreachable.stdout.splitlines() if line.startswith("✗")]
    assert problem.startswith(f"✗ service: cannot reach the service at {closed}") and "TOURNEYLAKE_BASE_URL" in problem
