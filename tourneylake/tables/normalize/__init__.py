"""Payloads → Arrow tables with fixed, documented schemas (see :mod:`.schemas`).

* :func:`normalize_metadata` and :class:`Rates` — ``/metadata`` reference tables and USD rates.
* :class:`SummaryNormalizer` — player summaries, streamed in batches.
* :func:`normalize_countries`, :func:`normalize_news` — free reference resources, read generically.

Nothing here performs I/O or imports Dagster: feed it :class:`tourneylake.api.tree.Node` responses.
"""

from tourneylake.schemas import SCHEMAS, TABLES, TableSpec, tables_markdown
from tourneylake.tables.normalize.metadata import Rates, axis_types, normalize_metadata, series_types, statistic_types
from tourneylake.tables.normalize.reference import NormalizeResult, normalize_countries, normalize_news
from tourneylake.tables.normalize.summary import SUMMARY_TABLES, SummaryNormalizer

__all__ = [
    "SCHEMAS",
    "SUMMARY_TABLES",
    "TABLES",
    "NormalizeResult",
    "Rates",
    "SummaryNormalizer",
    "TableSpec",
    "axis_types",
    "normalize_countries",
    "normalize_metadata",
    "normalize_news",
    "series_types",
    "statistic_types",
    "tables_markdown",
]
