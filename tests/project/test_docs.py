"""docs/tables.md is exactly what docs/generate.py produces now, and documents every table and
view the warehouse DDL creates, with every column."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.helpers import REPO
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
    """{(name, 'BASE TABLE' | 'VIEW'): columns} of a fresh warehouse."""
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


def test_every_view_and_column_is_documented(catalog):
    documented = _documented((DOCS / "tables.md").read_text(encoding="utf-8"))
    views = {name: columns for (name, kind), columns in catalog.items() if kind == "VIEW"}
    assert {"latest_player_statistics", "player_statistics_over_time", "player_results_usd", "roi_by_stake_usd"} <= set(views)
    for name, columns in sorted(views.items()):
        assert name in documented, f"view {name} is not in docs/tables.md"
        assert columns == documented[name], f"{name}: docs list {sorted(documented[name] ^ columns)} wrongly"


def test_conventions_are_explained():
    text = (DOCS / "tables.md").read_text(encoding="utf-8")
    for phrase in ("TIMESTAMP WITH TIME ZONE", "UTC", "`_usd` twin", "usd_rate_missing", "search_ledger"):
        assert phrase in text, phrase
