"""pyarrow without pandas where no frame is made (tourneylake/runtime/without_pandas.py), in fresh interpreters:
pandas is imported by the test session itself, so only a new process shows what pyarrow does."""

from __future__ import annotations

import subprocess
import sys

SKIPPED = """
import sys
import pyarrow as pa
from tourneylake.runtime.without_pandas import skip_pandas_sniffing
skip_pandas_sniffing()
pa.array(["x", None]); pa.Table.from_pydict({"a": [1, 2]}); pa.array([1.5])
print("pandas" in sys.modules)
frame = pa.table({"a": [1, 2]}).to_pandas()  # a frame, when really wanted, still comes
import pandas
print(type(frame).__name__, pa.array(pandas.Series([3, 4])).to_pylist())
"""

REFUSED = """
import pyarrow as pa
from tourneylake.runtime.without_pandas import refuse_pandas
refuse_pandas()
print(pa.array(["x"]).to_pylist())
try:
    import pandas
except ModuleNotFoundError as exc:
    print("refused:", exc.name)
"""


def _run(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.splitlines()


def test_lists_convert_without_importing_pandas_and_frames_still_work() -> None:
    assert _run(SKIPPED) == ["False", "DataFrame [3, 4]"]


def test_the_worker_refuses_pandas_for_good() -> None:
    assert _run(REFUSED) == ["['x']", "refused: pandas"]
