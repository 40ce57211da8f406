"""Small helpers for materialisation metadata (previews, row counts)."""

from datetime import date

import pyarrow as pa
from dagster import AssetExecutionContext, MetadataValue

def night_of(context: AssetExecutionContext) -> date:
    return date.fromisoformat(context.partition_key)

def preview(table: pa.Table | None, rows: int = 5) -> MetadataValue:
    """A markdown preview of the first rows (never anything secret: tables hold no credentials)."""
    if table is None or table.num_rows == 0:
        return MetadataValue.md("_no rows_")
    head = table.slice(0, rows).to_pylist()
    columns = list(head[0].keys())[:8]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head:
        lines.append("| " + " | ".join(str(row[c])[:40] for c in columns) + " |")
    return MetadataValue.md("\n".join(lines))
