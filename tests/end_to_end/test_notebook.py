"""notebooks/analysis.ipynb runs top to bottom on a real two-night warehouse (the sandbox over
HTTP, real Dagster runs) and draws its plots; on a missing warehouse it says so without failing.

The kernel: nbclient starts kernel ``python3``. So that it is always *this* interpreter (the
project's venv, where tourneylake is installed) whatever kernelspecs the machine has, the test
writes its own ``python3`` kernelspec (``ipykernel.kernelspec.install``, argv = ``sys.executable``)
into a temporary prefix and puts it first on ``JUPYTER_PATH``. The kernel inherits ``os.environ``,
which carries ``TOURNEYLAKE_DATA_DIR``.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from pipelines.nightly import run_models, run_night
from tests.helpers import REPO
from tourneylake.config import Settings
from tourneylake.sandbox import running_sandbox

pytestmark = [pytest.mark.xdist_group("notebook"), pytest.mark.slow]

NOTEBOOK = REPO / "notebooks" / "analysis.ipynb"
NIGHT1 = date(2026, 11, 20)
NIGHT2 = date(2026, 11, 21)
SEED = 11
CELL_TIMEOUT_S = 120

WATCHLIST = """
filters:
  sng_30d: "Class:SNG;Date:30D"
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng_30d]}
  - {network: iPoker, name: "Zoë O'Brien"}
  - {network: PartyPoker, name: "mr. Müller", priority: 1}
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of two sandbox nights, and its models."""
    root = tmp_path_factory.mktemp("notebook-data")
    watchlist = root / "watchlist.yaml"
    watchlist.write_text(WATCHLIST, encoding="utf-8")
    data = root / "data"
    with running_sandbox(seed=SEED, today=NIGHT1) as server:
        settings = Settings(
            base_url=server.base_url,
            data_dir=data,
            watchlist=watchlist,
            retry_initial_wait_s=0.01,
            retry_max_wait_s=0.05,
        )
        first = run_night(settings, NIGHT1)
        assert first.success, first.failure
        server.world.set_today(NIGHT2)
        second = run_night(settings, NIGHT2)
        assert second.success, second.failure
        models = run_models(settings)  # the views, once after the last night, as `tourneylake run` does
        assert models.success, models.failure
    assert (data / "warehouse.duckdb").is_file()
    return data


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``python3`` kernelspec running this interpreter, first on JUPYTER_PATH."""
    from ipykernel.kernelspec import install

    prefix = tmp_path / "jupyter-prefix"
    install(kernel_name="python3", prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable, spec.argv


def execute(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> nbformat.NotebookNode:
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(data_dir))  # inherited by the kernel
    monkeypatch.setenv("TOURNEYLAKE_WATCHLIST", str(data_dir.parent / "watchlist.yaml"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:  # the failing cell's source and traceback
        pytest.fail(f"the notebook failed:\n{error}")
    return notebook


def outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def markdown_text(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs(notebook))


def test_committed_notebook_has_no_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]
    first_code = next(c for c in notebook.cells if c.cell_type == "code")
    assert "PLAYER = None" in first_code.source, "the player is parameterised in the first code cell"


def test_notebook_runs_on_a_two_night_warehouse(data_dir: Path, kernel_env: None, monkeypatch: pytest.MonkeyPatch):
    notebook = execute(data_dir, monkeypatch)
    produced = outputs(notebook)
    assert not [o for o in produced if o.output_type == "error"]
    # one plot per section: statistics over time, cumulative profit in USD, ROI by stake
    images = [o for o in produced if "image/png" in o.get("data", {})]
    assert len(images) >= 3, f"{len(images)} plots"
    text = markdown_text(notebook)
    assert "opened read-only" in text
    assert "Skipped" not in text, text
    assert "excluded** (currency without a USD rate)" in text
    assert "**mr. Müller** on **PartyPoker**" in text  # the watchlist's first-priority player, not the first listed


def test_notebook_explains_a_missing_warehouse(tmp_path: Path, kernel_env: None, monkeypatch: pytest.MonkeyPatch):
    notebook = execute(tmp_path / "nothing-here", monkeypatch)
    produced = outputs(notebook)
    assert not [o for o in produced if o.output_type == "error"]
    assert not [o for o in produced if "image/png" in o.get("data", {})]
    assert "No warehouse at" in markdown_text(notebook)
    assert not (tmp_path / "nothing-here").exists(), "read-only: the notebook creates nothing"
