"""The documentation site builds with warnings as errors (a broken link or anchor fails), and
what it serves holds the generated references and dbt's own docs site."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from tourneylake.config import ENV_PREFIX, Settings


@pytest.mark.slow
def test_the_site_builds_strict_with_every_reference(tmp_path: Path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "DO_NOT_TRACK": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    settings = (site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert all(f"{ENV_PREFIX}{name.upper()}" in settings for name in Settings.model_fields)
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "tourneylake run" in cli and "--max-searches" in cli
    models = (site / "reference" / "models" / "index.html").read_text(encoding="utf-8")
    assert 'href="../dbt/"' in models or 'href="dbt/index.html"' in models or "dbt/index.html" in models
    for name in ("index.html", "manifest.json", "catalog.json"):
        assert (site / "reference" / "dbt" / name).stat().st_size > 0
    assert (site / "images" / "report.png").is_file()
