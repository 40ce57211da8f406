"""The floor plan holds: dependencies point one way (pipelines → assets → tourneylake), the
library never imports Dagster (a notebook or script uses it alone; the CLI starts without it),
no import circle between any modules of the project (a function's import and a type's count),
and the library's imports point down its floors (tables/ never imports night/, not even a type)."""

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
    "top": 4,  # cli.py, questions.py, hands.py, report.py, notebook.py, doctor.py, project.py: beside the command line
}
GROUND = {
    "tourneylake",
    "tourneylake.errors",
    "tourneylake.config",
    "tourneylake.schemas",
    "tourneylake.figures",
    "tourneylake.fonts",
    "tourneylake.packaged",
    "tourneylake.user_cache",
}
TOP = {
    "tourneylake.cli",
    "tourneylake.questions",
    "tourneylake.hands",
    "tourneylake.report",
    "tourneylake.notebook",
    "tourneylake.doctor",
    "tourneylake.project",
}


def imported_packages(folder: str) -> dict[str, set[str]]:
    """{module file: packages it imports} for every Python file under ``folder``: the top-level
    ones, and ``tourneylake.assets`` or ``tourneylake.pipelines`` for the Dagster code."""
    out: dict[str, set[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.append(node.module)
        out[str(path.relative_to(REPO))] = {
            ".".join(n.split(".")[:2]) if n.startswith("tourneylake.") else n.split(".")[0] for n in names
        }
    return out


#: The project's packages whose modules the import checks read: the folder → its package. The
#: Dagster code's folders are the package's ``tourneylake.assets`` and ``tourneylake.pipelines``
#: (links inside ``tourneylake/``, which a walk of that folder does not follow).
PACKAGES = {"tourneylake": "tourneylake", "assets": "tourneylake.assets", "pipelines": "tourneylake.pipelines"}
DAGSTER_CODE = ("tourneylake.assets", "tourneylake.pipelines")


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted name → file of every module of the project's packages under ``root``."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(root / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def import_graph(root: Path, *, type_imports: bool = True) -> dict[str, set[str]]:
    """Module → the project's modules it imports, at any depth of its code (a function's lazy
    import too); with ``type_imports=False``, not those under ``if TYPE_CHECKING:``."""
    modules = project_modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skipped = (
            set()
            if type_imports
            else {
                id(inner)
                for node in ast.walk(tree)
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                for inner in ast.walk(node)
            }
        )
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


def circles(graph: dict[str, set[str]]) -> list[str]:
    """Every import circle, one per group of modules that reach each other (the graph's
    strongly connected components of more than one module, by Tarjan's algorithm), named by its
    shortest round from its first module, and its other modules when the group holds more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    out = []
    for component in components:
        first = min(component)
        round_ = _shortest_round(graph, first, component)
        others = sorted(component - set(round_))
        out.append(" → ".join([*round_, first]) + (f" (with {', '.join(others)})" if others else ""))
    return sorted(out)


def _shortest_round(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path of imports from ``start`` back to it inside ``within`` (its last step
    back to ``start`` left out)."""
    paths = {start: [start]}
    queue = [start]
    for node in queue:  # breadth first: the queue grows as the loop reads it
        for nxt in sorted(graph.get(node, set()) & within):
            if nxt == start:
                return paths[node]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"{start} is in no circle")


def library(module: str) -> bool:
    """Whether ``module`` is the library's (not the Dagster code in ``tourneylake.assets`` and
    ``tourneylake.pipelines``)."""
    return module.split(".")[0] == "tourneylake" and not any(module == c or module.startswith(c + ".") for c in DAGSTER_CODE)


def room(module: str) -> str:
    if module in GROUND or module.startswith("tourneylake.runtime"):
        return "ground"
    if module in TOP:
        return "top"
    found = module.split(".")[1]
    assert found in FLOORS, f"{module} is in no room of the floor plan (tests/project/test_layout.py FLOORS)"
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """The library's imports of a room on its own floor or above (another room's)."""
    return sorted(
        f"{source} ({room(source)}) imports {target} ({room(target)})"
        for source, targets in graph.items()
        if library(source)
        for target in targets
        if library(target) and room(source) != room(target) and FLOORS[room(target)] >= FLOORS[room(source)]
    )


def imports_of(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    """The imports of the package ``target`` (or its modules) by the modules of ``source``."""

    def inside(module: str, package: str) -> bool:
        return module == package or module.startswith(f"{package}.")

    return sorted(f"{s} imports {t}" for s, ts in graph.items() if inside(s, source) for t in ts if inside(t, target))


def test_no_import_circle() -> None:
    """No two modules of the project import each other, directly or round a longer circle: not
    inside a function, not for a type either."""
    found = circles(import_graph(REPO))
    assert not found, "import circles:\n" + "\n".join(found)


def test_imports_point_down_the_floors() -> None:
    assert upward_imports(import_graph(REPO, type_imports=False)) == []


def test_the_tables_never_import_the_night() -> None:
    """tables/ is below night/: what it needs of a night comes as plain data, not even a type."""
    assert imports_of(import_graph(REPO), "tourneylake.tables", "tourneylake.night") == []


def test_the_checks_find_circles_and_upward_imports() -> None:
    """The checks above see what they are for, on graphs that have them."""
    graph = {
        "tourneylake.lake.raw": {"tourneylake.lake.lake"},
        "tourneylake.lake.lake": {"tourneylake.lake.raw"},
        "tourneylake.pipelines.a": {"tourneylake.pipelines.b", "tourneylake.lake.raw"},
        "tourneylake.pipelines.b": {"tourneylake.pipelines.c"},
        "tourneylake.pipelines.c": {"tourneylake.pipelines.a", "tourneylake.pipelines.d"},
        "tourneylake.pipelines.d": {"tourneylake.pipelines.b"},
    }
    assert circles(graph) == [
        "tourneylake.lake.lake → tourneylake.lake.raw → tourneylake.lake.lake",
        "tourneylake.pipelines.a → tourneylake.pipelines.b → tourneylake.pipelines.c → tourneylake.pipelines.a "
        "(with tourneylake.pipelines.d)",
    ]
    graph = {"tourneylake.api.client": {"tourneylake.night.session"}, "tourneylake.night.session": set()}
    assert upward_imports(graph) == ["tourneylake.api.client (api) imports tourneylake.night.session (night)"]
    assert imports_of(graph, "tourneylake.api", "tourneylake.night") == [
        "tourneylake.api.client imports tourneylake.night.session"
    ]
    graph = {"tourneylake.tables.worker": {"tourneylake.night"}, "tourneylake.tablesx": {"tourneylake.night.watchlist"}}
    assert imports_of(graph, "tourneylake.tables", "tourneylake.night") == ["tourneylake.tables.worker imports tourneylake.night"]


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("tourneylake", {"tourneylake.assets", "tourneylake.pipelines", "dagster", "dagster_webserver", "dagster_dbt"}),
        ("assets", {"tourneylake.pipelines"}),
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
    code = "import sys, tourneylake.pipelines.cli; print('dagster' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
