"""docs/tables.md is generated from the code and documents every warehouse table and column."""

from __future__ import annotations

from pathlib import Path

from docs.generate import TARGET, render
from tourneylake.warehouse import Warehouse


def test_tables_doc_is_current() -> None:
    assert TARGET.read_text(encoding="utf-8") == render(), "run `python -m docs.generate` and commit docs/tables.md"


def test_every_warehouse_table_and_column_is_documented(tmp_path: Path) -> None:
    doc = TARGET.read_text(encoding="utf-8")
    warehouse = Warehouse(tmp_path / "w.duckdb")
    try:
        con = warehouse.connection
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()]
        assert "search_ledger" in tables and "tournaments" in tables
        for table in tables:
            section = doc.split(f"## `{table}`", 1)
            assert len(section) == 2, f"{table} is not documented"
            body = section[1].split("\n## ", 1)[0]
            for (column,) in con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall():
                assert f"`{column}`" in body, f"{table}.{column} is not documented"
    finally:
        warehouse.close()
