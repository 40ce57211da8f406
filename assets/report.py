"""Small helpers for materialisation metadata: the night of a run, listings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from dagster import AssetExecutionContext, MetadataValue, OpExecutionContext

LISTED = 50  # lines of a listing shown in the UI; the rest are counted


def night_of(context: AssetExecutionContext | OpExecutionContext) -> date:
    return date.fromisoformat(context.partition_key)


def listing(lines: Sequence[str]) -> MetadataValue:
    """A markdown list of at most :data:`LISTED` lines, and how many more there are."""
    shown = [f"- {line}" for line in lines[:LISTED]]
    if len(lines) > LISTED:
        shown.append(f"- … and {len(lines) - LISTED} more")
    return MetadataValue.md("\n".join(shown) or "_none_")
