"""Small JSON documents beside the lake (``lake/_state/<name>.json``): the natural-language filter
cache, for one. Written atomically (on an object store: one PUT); a damaged document is a
one-line error naming the file. With shared state (``TOURNEYLAKE_STATE_URL``) they are rows of
the state database instead, changed under its locks (:mod:`tourneylake.lake.postgres`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson

from tourneylake.errors import LakeError
from tourneylake.lake.lake import Lake
from tourneylake.lake.storage import atomic_write, read_if_there

STATE_DIR = "_state"

log = logging.getLogger(__name__)


class StateStore:
    """Named JSON documents of one lake."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.directory = lake.root / STATE_DIR  # a Path, or a StorePath on an object store

    def read(self, name: str) -> dict[str, Any]:
        if self.lake.shared is not None:
            return self.lake.shared.read_document(name) or {}
        path = self.directory / f"{name}.json"
        data = read_if_there(path)
        if data is None:
            return {}
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise LakeError(
                f"state file {path} is damaged ({exc}): move it aside (it is a cache; nothing paid is lost)"
            ) from None
        if not isinstance(value, dict):
            raise LakeError(f"state file {path} does not hold a JSON object: move it aside")
        return value

    def write(self, name: str, value: dict[str, Any]) -> None:
        if self.lake.shared is not None:
            self.lake.shared.write_document(name, value)
            return
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        atomic_write(self.directory / f"{name}.json", data, fsync=self.lake.fsync)

    def set_entry(self, name: str, key: str, value: Any) -> None:
        """Set one entry of a document (see :meth:`update`)."""
        self.update(name, lambda document: document.__setitem__(key, value))

    def update(self, name: str, change: Callable[[dict[str, Any]], None], *, reset_damaged: bool = False) -> None:
        """Change a document in place, under the lake's lock for it: two processes changing it
        at once both keep their changes (a read-modify-write each, one after the other).
        ``reset_damaged``: a damaged document is started again from ``{}`` (logged), for one
        that is only a cache."""
        with self.lake.locks.hold(f"state-{name}"):
            try:
                document = self.read(name)
            except LakeError as exc:
                if not reset_damaged:
                    raise
                log.warning("%s: written again from this run's entries", exc)
                document = {}
            change(document)
            self.write(name, document)
