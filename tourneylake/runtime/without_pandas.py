"""Arrow without pandas, in processes that never make a data frame.

pyarrow imports pandas on its first conversion of a Python list (``pa.array``,
``pa.Table.from_pydict``), only to ask whether the list is a pandas object: a costly import
for a module a harvest never uses. :func:`refuse_pandas` refuses it for good (the tables
worker); :func:`skip_pandas_sniffing` lets pyarrow find no pandas once, on a list, and then
steps aside (``tourneylake run``): pyarrow remembers the answer and no longer looks, while
``to_pandas()`` and ``import pandas`` still work for whatever really wants a frame
(``tests/runtime/test_without_pandas.py`` checks both).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["refuse_pandas", "skip_pandas_sniffing"]


class _NoPandas:
    """A meta path finder that says pandas is not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used in this process", name=name)


def refuse_pandas() -> None:
    """Make ``import pandas`` fail in this process from now on."""
    sys.meta_path.insert(0, _NoPandas())


def skip_pandas_sniffing() -> None:
    """Have pyarrow convert Python lists without importing pandas (see the module docstring);
    nothing to do once pandas is imported."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([])  # pyarrow's one look for pandas: none
    finally:
        sys.meta_path.remove(finder)
