"""The analysis notebook runs top to bottom against a warehouse built from the sandbox."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pipelines.nightly import run_night
from tourneylake.config import Settings
from tourneylake.sandbox import running_sandbox

pytestmark = pytest.mark.xdist_group("notebook")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "analysis.ipynb"
WATCHLIST = """
filters:
  sng_30d: "Class:SNG;Date:30D"
players:
  - {network: PokerStars, name: "Borbas.Geri", filters: [sng_30d]}
  - {network: iPoker, name: "Zoë O'Brien"}
  - {network: GGNetwork, name: "José María"}
  - {network: "888Poker(ES-PT)", name: "Ana Łukasz"}
"""


def test_the_notebook_runs_and_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    watchlist = tmp_path / "watchlist.yaml"
    watchlist.write_text(WATCHLIST, encoding="utf-8")
    data = tmp_path / "data"
    with running_sandbox(seed=9, today=date(2026, 11, 20)) as server:
        settings = Settings(base_url=server.base_url, data_dir=data, watchlist=watchlist)
        assert run_night(settings, date(2026, 11, 20)).success
        server.world.set_today(date(2026, 11, 21))
        assert run_night(settings, date(2026, 11, 21)).success

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), "commit it with outputs cleared"
    monkeypatch.setenv("TOURNEYLAKE_DATA_DIR", str(data))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3, "statistics over time, profit in USD and ROI by stake each plot"
    text = "".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", "")) for o in outputs)
    assert "warehouse not found" not in text.lower()
    assert os.environ["TOURNEYLAKE_DATA_DIR"] == str(data)
