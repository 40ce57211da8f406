"""The three notebooks (player, watchlist, bill) run top to bottom on a real three-night warehouse
(``conftest.three_nights``), in a kernel started in ``notebooks/`` as JupyterLab starts it, and
every chart they draw has a title, labelled axes with a unit, and every night held.

The kernel: nbclient starts kernel ``python3``. So that it is always *this* interpreter (the
project's venv) whatever kernelspecs the machine has, the test writes its own ``python3``
kernelspec (argv = ``sys.executable``) into a temporary prefix first on ``JUPYTER_PATH``. The
charts are checked where the kernel renders them: a first cell (added here, not in the committed
notebook) records each figure's titles, labels and points as matplotlib's inline backend prints it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import duckdb
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from tests.end_to_end.conftest import NIGHTS, Harvest
from tests.helpers import REPO, copy_warehouse
from tourneylake.notebook import open_warehouse, project_dir, project_settings

pytestmark = [pytest.mark.xdist_group("notebook"), pytest.mark.slow]

FOLDER = REPO / "notebooks"
NOTEBOOKS = ("player", "watchlist", "bill")
CELL_TIMEOUT_S = 120
UNIT = re.compile(r"\([^)]*(USD|%|count|UTC)[^)]*\)")

RECORD = """
import json as _json
import matplotlib.backend_bases as _backend

_FIGURES = []
_print_figure = _backend.FigureCanvasBase.print_figure

def _recorded(self, *args, **kwargs):
    figure = self.figure
    _FIGURES.append({
        "suptitle": figure._suptitle.get_text() if figure._suptitle else "",
        "axes": [
            {"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
             "points": max([len(line.get_xdata()) for line in ax.lines] + [len(ax.patches)]
                           + [len(c.get_offsets()) for c in ax.collections] + [0])}
            for ax in figure.axes if ax.get_visible()
        ],
    })
    return _print_figure(self, *args, **kwargs)

_backend.FigureCanvasBase.print_figure = _recorded
"""


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``python3`` kernelspec running this interpreter, first on JUPYTER_PATH; matplotlib's
    inline backend (a JupyterLab kernel's), not a backend the test environment may name."""
    from ipykernel.kernelspec import install

    prefix = tmp_path / "jupyter-prefix"
    install(kernel_name="python3", prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable, spec.argv


def execute(name: str, monkeypatch: pytest.MonkeyPatch, data: Path, watchlist: Path) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>.ipynb`` in ``notebooks/`` with the figure recorder first and a
    cell that prints what it recorded last; errors stay in the outputs."""
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(data))  # inherited by the kernel
    monkeypatch.setenv("TOURNEYLAKE_WATCHLIST", str(watchlist))
    notebook = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    notebook.cells = [new_code_cell(RECORD), *notebook.cells, new_code_cell("print(_json.dumps(_FIGURES))")]
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(FOLDER)}}
    )
    client.execute()
    return notebook


def outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def markdown_text(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs(notebook))


def figures(notebook: nbformat.NotebookNode) -> list[dict]:
    printed = [o for o in notebook.cells[-1].outputs if o.output_type == "stream"]
    return json.loads(printed[-1].text)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebooks_have_no_outputs(name: str) -> None:
    notebook = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]
    assert "open_warehouse()" in "".join(c.source for c in notebook.cells), "the warehouse is found by the library"
    if name == "player":
        first_code = next(c for c in notebook.cells if c.cell_type == "code")
        assert "PLAYER = None" in first_code.source, "the player is parameterised in the first code cell"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_draws_every_chart_with_titles_units_and_every_night(
    name: str, three_nights: Harvest, kernel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = execute(name, monkeypatch, three_nights.data, three_nights.watchlist)
    errors = [f"{o.ename}: {o.evalue}" for o in outputs(notebook) if o.output_type == "error"]
    assert errors == []
    warnings = [o.text for o in outputs(notebook) if o.output_type == "stream" and o.name == "stderr"]
    assert warnings == [], "a notebook shows no warning"
    text = markdown_text(notebook)
    assert "opened read-only" in text and f"**{len(NIGHTS)} night(s)**" in text
    drawn = figures(notebook)
    images = [o for o in outputs(notebook) if "image/png" in o.get("data", {})]
    assert len(drawn) == len(images) >= 3, (len(drawn), len(images))
    for figure in drawn:
        assert figure["suptitle"] or all(ax["title"] for ax in figure["axes"]), figure
        for ax in figure["axes"]:
            assert ax["xlabel"] and ax["ylabel"], figure
            assert UNIT.search(ax["xlabel"]) or UNIT.search(ax["ylabel"]), f"no unit on {ax}"
            if "night" in ax["xlabel"]:
                assert ax["points"] >= len(NIGHTS), f"a chart by night shows {ax['points']} point(s): {ax}"
    if name == "player":  # the watchlist's first-priority player, not the first listed
        assert "**mr. Müller** on **PartyPoker**" in text


def test_the_player_picked_has_entries(three_nights: Harvest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchlist's first player by priority, found but without an entry yet, is passed over
    for the next one with entries (the player notebook shows results)."""
    copy_warehouse(three_nights.warehouse, tmp_path / "warehouse.duckdb")
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        con.execute("DELETE FROM player_entries WHERE network = 'PartyPoker' AND player = 'mr. Müller'")
        assert con.execute("SELECT count(*) FROM player_snapshots WHERE player = 'mr. Müller' AND found").fetchone()[0]
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TOURNEYLAKE_WATCHLIST", str(three_nights.watchlist))
    picked = open_warehouse().pick_player()
    assert (picked.network, picked.name) != ("PartyPoker", "mr. Müller") and "priority" in picked.why


def test_a_missing_warehouse_is_one_line_and_creates_nothing(
    tmp_path: Path, kernel_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nothing-here"
    notebook = execute("player", monkeypatch, missing, tmp_path / "watchlist.yaml")
    errors = [o for o in outputs(notebook) if o.output_type == "error"]
    assert errors, "the set-up cell stops the notebook"
    first = errors[0]
    assert first.traceback == [f"No warehouse at {missing / 'warehouse.duckdb'} (from TOURNEYLAKE_DATA_DIR): run `make run` "
                               "in the repository first, then run this notebook again."]  # fmt: skip
    assert not [o for o in outputs(notebook) if "image/png" in o.get("data", {})]
    assert not missing.exists(), "read-only: the notebook creates nothing"


def test_the_project_is_found_from_the_notebooks_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JupyterLab starts the kernel in notebooks/: the data directory is still the project's."""
    for name in ("TOURNEYLAKE_DATA_DIR", "TOURNEYLAKE_WATCHLIST", "TOURNEYLAKE_WAREHOUSE"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "clone"
    (project / "notebooks").mkdir(parents=True)
    (project / "watchlist.yaml").write_text("players: []\n", encoding="utf-8")
    assert project_dir(project / "notebooks") == project
    settings = project_settings(project / "notebooks")
    assert settings.warehouse_path == project / "data" / "warehouse.duckdb"
    assert settings.watchlist == project / "watchlist.yaml"
    (project / ".env").write_text("TOURNEYLAKE_DATA_DIR=elsewhere\n", encoding="utf-8")  # the project's .env, relative
    assert project_settings(project / "notebooks").warehouse_path == project / "elsewhere" / "warehouse.duckdb"
