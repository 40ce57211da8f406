"""The search ledger: every metered call, when, what, cost, searches left, outcome.

Each attempt is appended as one JSON line and flushed at once, so a killed process keeps its
record of what it paid for. At the end of a night the lines become the ``search_ledger`` table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import orjson
import pyarrow as pa

LEDGER_DIR = "_ledger"

SCHEMA = pa.schema(
    [
        pa.field("called_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("resource", pa.string(), nullable=False),
        pa.field("network", pa.string()),
        pa.field("player", pa.string()),
        pa.field("filter_name", pa.string()),
        pa.field("filter_expression", pa.string()),
        pa.field("question", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("cost", pa.int32(), nullable=False),
        pa.field("remaining_after", pa.int64()),
        pa.field("outcome", pa.string(), nullable=False),
        pa.field("error_code", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("duration_ms", pa.float64()),
    ]
)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    called_at: datetime
    run_id: str
    resource: str
    network: str | None
    player: str | None
    filter_name: str | None
    filter_expression: str | None
    question: str | None
    attempt: int
    cost: int
    remaining_after: int | None
    outcome: str
    error_code: int | None
    error: str | None
    duration_ms: float


class Ledger:
    """Append-only, one file per run under ``lake/_ledger/snapshot_date=D/``."""

    def __init__(self, lake_root: Path, snapshot_date: date, run_id: str) -> None:
        self.directory = Path(lake_root) / LEDGER_DIR / f"snapshot_date={snapshot_date.isoformat()}"
        self.run_id = run_id
        self.snapshot_date = snapshot_date
        self._lock = threading.Lock()
        self._file = None
        self.spent = 0
        self.attempts = 0

    def record(self, entry: LedgerEntry) -> None:
        line = orjson.dumps(asdict(entry), option=orjson.OPT_NAIVE_UTC) + b"\n"
        with self._lock:
            if self._file is None:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._file = open(self.directory / f"run-{self.run_id}.jsonl", "ab")  # noqa: SIM115
            self._file.write(line)
            self._file.flush()
            self.spent += entry.cost
            self.attempts += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def night_entries(lake_root: Path, snapshot_date: date) -> Iterator[dict]:
    """Every ledger line of one night, all runs."""
    directory = Path(lake_root) / LEDGER_DIR / f"snapshot_date={snapshot_date.isoformat()}"
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("run-*.jsonl")):
        with open(path, "rb") as handle:
            for line in handle:
                if line.strip():
                    try:
                        yield orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue  # a line cut by a killed process: the rest still counts


def night_table(lake_root: Path, snapshot_date: date) -> pa.Table:
    rows = list(night_entries(lake_root, snapshot_date))
    columns = {field.name: [row.get(field.name) for row in rows] for field in SCHEMA}
    columns["called_at"] = [datetime.fromisoformat(v).astimezone(UTC) for v in columns["called_at"]]
    return pa.table(columns, schema=SCHEMA)


def ledger_dates(lake_root: Path) -> list[date]:
    base = Path(lake_root) / LEDGER_DIR
    if not base.is_dir():
        return []
    return sorted(date.fromisoformat(p.name.split("=", 1)[1]) for p in base.glob("snapshot_date=*"))
