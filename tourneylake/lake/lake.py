"""The lake under ``<data_dir>/lake``: where it is, which source it holds, and what it holds, each
by an object of its own: ``lake.raw`` (the paid answers: :mod:`~tourneylake.lake.raw_answers`),
``lake.tables`` (the Delta tables: :mod:`~tourneylake.lake.delta_tables`), ``lake.locks``
(:mod:`~tourneylake.lake.locks`). Its layout: :mod:`~tourneylake.lake.layout`.

Opening reads and writes nothing (an absent lake reads as empty); :meth:`Lake.claim` records the
source the first time and then refuses another (:class:`~tourneylake.errors.LakeSourceMismatch`):
synthetic and live data never mix. ``data_dir`` may be an fsspec URL
(:mod:`~tourneylake.lake.storage`). A local lake writes then renames, fsyncs and locks with
``flock``; an object store has atomic PUTs but no rename and no lock, so a settled body is a copy
then a delete (a kill in between leaves both, settled again next run), and one writer per account
and night is the rule (Dagster's pools serialise runs).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tourneylake.errors import LakeError, LakeSourceMismatch
from tourneylake.lake.delta_tables import DeltaTables
from tourneylake.lake.layout import RAW_DIR, SOURCE_FILE
from tourneylake.lake.legacy import legacy_tables
from tourneylake.lake.locks import LakeLocks
from tourneylake.lake.raw_answers import RawAnswers
from tourneylake.lake.storage import AnyPath, StorePath, atomic_write, location, read_if_there

if TYPE_CHECKING:
    from tourneylake.config import Settings
    from tourneylake.lake.postgres import SharedState

__all__ = ["Lake", "LakeError", "LakeSourceMismatch"]

#: The lake's layout, recorded in ``_source.json``: 1, tables as hive folders of Parquet parts
#: (none recorded); 2, Delta tables.
LAYOUT = 2


class Lake:
    """The lake under ``<data_dir>/lake``. Opening reads nothing and writes nothing; call
    :meth:`claim` before writing data of a source."""

    def __init__(self, data_dir: str | os.PathLike[str], *, fsync: bool = True, state_url: str | None = None) -> None:
        self.data_dir: AnyPath = location(data_dir)  # a Path, or a StorePath for a URL
        self.root: AnyPath = self.data_dir / "lake"
        #: A local directory (renames, fsync, flock), else an object store (see the docstring).
        self.local = isinstance(self.root, Path)
        #: The state shared in PostgreSQL (``TOURNEYLAKE_STATE_URL``: ledger, locks, documents),
        #: or ``None``: files in the lake (:mod:`tourneylake.lake.postgres`).
        self.shared: SharedState | None = None
        if state_url:
            from tourneylake.lake.postgres import shared_state

            name = os.path.abspath(self.data_dir) if isinstance(self.data_dir, Path) else str(self.data_dir)
            self.shared = shared_state(state_url, name)
        # fsync makes a paid response survive a power loss, not only a crash of this process;
        # it costs little next to a network call.
        self.fsync = fsync
        self.raw = RawAnswers(self.root / RAW_DIR, fsync=fsync)
        self.tables = DeltaTables(self.root)
        self.locks = LakeLocks(self.root, self.shared)

    def __repr__(self) -> str:
        return f"Lake({str(self.data_dir)!r})"

    @classmethod
    def of(cls, settings: Settings) -> Lake:
        """The lake of ``settings``: its data directory, and its shared state when set."""
        url = settings.state_url.get_secret_value() if settings.state_url is not None else None
        return cls(settings.data_dir, state_url=url)

    @property
    def filesystem(self) -> Any:
        """The fsspec filesystem of a lake on an object store (``None`` for a local lake)."""
        return self.root.fs if isinstance(self.root, StorePath) else None

    @property
    def reachable_from_other_processes(self) -> bool:
        """Whether a worker process can open this lake too (not a ``memory://`` store, which lives
        in this process alone)."""
        fs = self.filesystem
        return fs is None or "memory" not in ((fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol))

    # ------------------------------------------------------------------ its source
    @property
    def exists(self) -> bool:
        return (self.root / SOURCE_FILE).is_file()

    def _source_document(self) -> dict[str, Any] | None:
        marker = self.root / SOURCE_FILE
        data = read_if_there(marker)
        if data is None:
            return None
        try:
            content = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise LakeError(f'{marker} is damaged ({exc}): restore it or write {{"source": ...}} by hand') from None
        if not isinstance(content, dict):
            raise LakeError(f'{marker} is damaged (not a JSON object): restore it or write {{"source": ...}} by hand')
        return content

    @property
    def source(self) -> str | None:
        """The source this lake holds data of, or ``None`` before any was claimed."""
        content = self._source_document()
        return None if content is None else content.get("source")

    def claim(self, source: str) -> Lake:
        """Record ``source`` as this lake's (first time) or check it is the recorded one. A lake
        whose tables are of the first layout is refused until ``tourneylake rebuild --all``
        converts them (one of that layout without tables is simply marked current)."""
        if not source:
            raise LakeError("a lake needs a source ('sandbox' or 'live:<host>')")
        content = self._source_document()
        if content is not None:
            recorded = content.get("source")
            if recorded != source:
                raise LakeSourceMismatch(
                    f"the data directory {self.data_dir} holds data from source {recorded!r}, not "
                    f"{source!r}; synthetic and live data never mix: use another data directory"
                )
            if content.get("layout", 1) < LAYOUT:
                if legacy_tables(self.root):
                    raise LakeError(
                        f"the lake in {self.data_dir} holds tables of its first layout: run `tourneylake rebuild --all` "
                        "once to convert them to Delta tables from its raw answers (no search)"
                    )
                self.mark_current_layout()
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        content = {"source": source, "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "layout": LAYOUT}
        atomic_write(self.root / SOURCE_FILE, orjson.dumps(content, option=orjson.OPT_INDENT_2), fsync=self.fsync)
        return self

    def mark_current_layout(self) -> None:
        """Record that the lake's tables are of the current layout (Delta tables)."""
        content = self._source_document() or {}
        content["layout"] = LAYOUT
        atomic_write(self.root / SOURCE_FILE, orjson.dumps(content, option=orjson.OPT_INDENT_2), fsync=self.fsync)
