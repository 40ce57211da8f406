"""The rooms' dependencies point one way: pipelines → assets → tourneylake, and the library never
imports Dagster (a notebook or script uses it alone; the CLI starts without it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def imported_packages(folder: str) -> dict[str, set[str]]:
    """{module file: top-level packages it imports} for every Python file under ``folder``."""
    out: dict[str, set[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
        out[str(path.relative_to(REPO))] = found
    return out


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("tourneylake", {"assets", "pipelines", "dagster", "dagster_webserver"}),
        ("assets", {"pipelines"}),
    ],
)
def test_dependencies_point_one_way(folder: str, forbidden: set[str]) -> None:
    offenders = {module: sorted(found & forbidden) for module, found in imported_packages(folder).items() if found & forbidden}
    assert offenders == {}


def test_the_library_cli_does_not_import_dagster() -> None:
    code = "import sys, tourneylake.cli; print('dagster' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_console_script_imports_dagster_only_to_run_a_night() -> None:
    code = "import sys, pipelines.cli; print('dagster' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
