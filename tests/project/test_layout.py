"""The floor plan holds: dependencies point one way (pipelines → assets → tourneylake), the
library never imports Dagster (a notebook or script uses it alone; the CLI starts without it),
no import circle anywhere in the library, and imports point down its floors."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

#: The library's rooms, by floor: a module imports its own room and rooms on lower floors only.
FLOORS: dict[str, int] = {
    "ground": 0,  # errors, config, schemas, figures, fonts, runtime/: import nothing of ours above them
    "api": 1,  # the wire
    "lake": 1,  # bytes at rest (neither the wire nor the lake imports the other)
    "sandbox": 2,  # the emulator: the ground and the wire only
    "tables": 2,  # answers → tables
    "night": 3,  # one night's work
    "top": 4,  # cli.py, questions.py, hands.py, report.py, notebook.py: beside the command line
}
GROUND = {
    "tourneylake",
    "tourneylake.errors",
    "tourneylake.config",
    "tourneylake.schemas",
    "tourneylake.figures",
    "tourneylake.fonts",
}
TOP = {"tourneylake.cli", "tourneylake.questions", "tourneylake.hands", "tourneylake.report", "tourneylake.notebook"}


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


def library_modules(root: Path) -> dict[str, Path]:
    """Dotted name → file of every module of the library under ``root``."""
    out = {}
    for path in sorted((root / "tourneylake").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the library's modules it imports, at any depth of its code (a function's
    lazy import too), except under ``if TYPE_CHECKING:``."""
    modules = library_modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skipped = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                found.update(r for alias in node.names if (r := resolve(alias.name)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                if base.split(".")[0] != "tourneylake":
                    continue
                found.update(r for alias in node.names if (r := resolve(f"{base}.{alias.name}")))
        graph[name] = found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def room(module: str) -> str:
    if module in GROUND or module.startswith("tourneylake.runtime"):
        return "ground"
    if module in TOP:
        return "top"
    found = module.split(".")[1]
    assert found in FLOORS, f"{module} is in no room of the floor plan (tests/project/test_layout.py FLOORS)"
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{source} ({room(source)}) imports {target} ({room(target)})"
        for source, targets in graph.items()
        for target in targets
        if room(source) != room(target) and FLOORS[room(target)] >= FLOORS[room(source)]
    )


def test_the_library_has_no_import_circle() -> None:
    assert circles(import_graph(REPO)) == []


def test_imports_point_down_the_floors() -> None:
    assert upward_imports(import_graph(REPO)) == []


def test_the_checks_find_a_circle_and_an_upward_import() -> None:
    """The two checks above see what they are for, on a graph that has both."""
    graph = {"tourneylake.lake.raw": {"tourneylake.lake.lake"}, "tourneylake.lake.lake": {"tourneylake.lake.raw"}}
    assert circles(graph) == [["tourneylake.lake.lake", "tourneylake.lake.raw"]]
    graph = {"tourneylake.api.client": {"tourneylake.night.session"}, "tourneylake.night.session": set()}
    assert upward_imports(graph) == ["tourneylake.api.client (api) imports tourneylake.night.session (night)"]


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
