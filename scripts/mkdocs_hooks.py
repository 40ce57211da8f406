"""MkDocs hooks (``mkdocs.yml``'s ``hooks:``): the references and dbt's docs site, generated
from the code at every build (``scripts/docs_reference.py``), so the site never shows a stale one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `scripts` as a package

from scripts.docs_reference import dbt_docs_site, pages


def on_files(files: Files, config: Any) -> Files:
    for path, markdown in pages().items():
        files.append(File.generated(config, path, content=markdown))
    site = dbt_docs_site()
    for name in ("index.html", "manifest.json", "catalog.json"):
        files.append(File.generated(config, f"reference/dbt/{name}", abs_src_path=str(site / name)))
    return files
