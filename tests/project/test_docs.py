"""docs/tables.md and sql/models/sources.yml are exactly what docs/generate.py produces now:
every table the warehouse DDL creates and every dbt model, with every column, documented; the
dbt sources are the catalogue's tables."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from tests.helpers import REPO
from tourneylake.schemas import TABLES
from tourneylake.tables.models import SOURCES, ensure_manifest, sources_yaml
from tourneylake.tables.warehouse import Warehouse

DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documented(markdown: str) -> dict[str, set[str]]:
    """{table or view: columns} from the `### \\`name\\`` sections and their `| \\`column\\` |` rows."""
    out: dict[str, set[str]] = {}
    current: str | None = None
    for line in markdown.splitlines():
        heading = re.match(r"^#{2,4} `(\w+)`", line)
        if heading:
            current = heading.group(1)
            out.setdefault(current, set())
        elif line.startswith("#"):
            current = None
        elif current is not None:
            row = re.match(r"^\| `(\w+)` \| [^|]+ \| .*\S.* \|$", line)  # name, type and a meaning
            if row:
                out[current].add(row.group(1))
    return out


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], set[str]]:
    """{(name, 'BASE TABLE'): columns} of a fresh warehouse (the views are dbt's: see the manifest)."""
    path = tmp_path_factory.mktemp("docs") / "warehouse.duckdb"
    with Warehouse(path) as warehouse:
        warehouse.apply_schema()
        rows = warehouse.connection.execute(
            "SELECT t.table_name, t.table_type, c.column_name FROM information_schema.tables AS t "
            "JOIN information_schema.columns AS c USING (table_schema, table_name) WHERE t.table_schema = 'main'"
        ).fetchall()
    out: dict[tuple[str, str], set[str]] = {}
    for name, kind, column in rows:
        out.setdefault((name, kind), set()).add(column)
    return out


def test_tables_md_is_generated_and_current():
    committed = (DOCS / "tables.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), "docs/tables.md is out of date: run .venv/bin/python -m docs.generate"


def test_every_table_and_column_is_documented(catalog):
    documented = _documented((DOCS / "tables.md").read_text(encoding="utf-8"))
    tables = {name: columns for (name, kind), columns in catalog.items() if kind == "BASE TABLE"}
    assert "search_ledger" in tables
    for name, columns in sorted(tables.items()):
        assert name in documented, f"table {name} is not in docs/tables.md"
        assert not columns - documented[name], f"{name}: undocumented columns {sorted(columns - documented[name])}"


def test_sources_yml_is_generated_from_the_catalogue_and_current():
    committed = SOURCES.read_text(encoding="utf-8")
    assert committed == sources_yaml(), "sql/models/sources.yml is out of date: run .venv/bin/python -m docs.generate"
    declared = yaml.safe_load(committed)["sources"][0]["tables"]
    assert {t["name"]: [c["name"] for c in t["columns"]] for t in declared} == {
        name: [c for c, _, _ in spec.columns] for name, spec in TABLES.items()
    }


def test_every_model_and_column_is_documented():
    """Every model of the manifest has a section with every column (the contract's, so the
    built view's) and a meaning; no section documents a model that is gone."""
    documented = _documented((DOCS / "tables.md").read_text(encoding="utf-8"))
    manifest = json.loads(ensure_manifest().read_text(encoding="utf-8"))
    models = {
        node["name"]: node
        for node in manifest["nodes"].values()
        if node["resource_type"] == "model" and node["package_name"] == "tourneylake"
    }
    assert {"latest_player_statistics", "player_statistics_over_time", "player_results_usd", "roi_by_stake_usd"} <= set(models)
    for name, node in sorted(models.items()):
        assert node["config"]["contract"]["enforced"], f"{name}: its columns and types are not a contract"
        assert node["description"].strip(), f"model {name} has no description"
        assert name in documented, f"model {name} is not in docs/tables.md"
        assert set(node["columns"]) == documented[name], (
            f"{name}: docs list {sorted(documented[name] ^ set(node['columns']))} wrongly"
        )
    assert set(documented) == set(models) | set(TABLES)


def test_conventions_are_explained():
    text = (DOCS / "tables.md").read_text(encoding="utf-8")
    for phrase in ("TIMESTAMP WITH TIME ZONE", "UTC", "`_usd` twin", "usd_rate_missing", "search_ledger"):
        assert phrase in text, phrase
