"""The lake's own reader of a Delta table's log, for the question the lake asks most: which parts
make each night in the current version, with their rows.

delta-rs answers it by opening the table, which on an object store asks for a missing
``_last_checkpoint``, lists the log and reads every commit since the last checkpoint twice (a
checkpoint in many ranged reads); a table kept open is brought up to date with as many requests
again. This reader lists the log once and reads only the commits and the checkpoint it has not
read before in this process: a log's objects never change once written (each is kept under its
name, size and tag, so a table made again from scratch is read again). It reads what the lake's
tables hold (reader version 1, one single-file checkpoint at most, partitioned by night); any
other log is :class:`Unreadable` and its caller opens the table with delta-rs.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from tourneylake.lake.storage import AnyPath, content_key, entries_of

__all__ = ["LOG_ENTRY", "Snapshot", "Unreadable", "recent_listing", "remember", "snapshot", "table_parts"]

#: A commit (``<version>.json``) or a checkpoint in one file (``<version>.checkpoint.parquet``);
#: a checkpoint in several parts is matched so that it is refused, not taken for a commit.
LOG_ENTRY = re.compile(r"^(?P<version>[0-9]{20})\.(?P<kind>json|checkpoint\.parquet|checkpoint\.[0-9]+\.[0-9]+\.parquet)$")
#: The actions read so far, by the object that held them (its path, size and tag).
_READ: dict[tuple[str, int, str], _Actions] = {}
_READ_LOCK = threading.Lock()
#: Each log's last listing in this process: when it began, what it found.
_LISTED: dict[str, tuple[float, list[AnyPath]]] = {}
#: Objects kept in :data:`_READ` at most (each a commit's or a checkpoint's parts): then it starts afresh.
_KEPT = 4096

#: A part in the log: its path (relative, as the log writes it), its night, its rows (``None``: unsaid).
Part = tuple[str, date, int | None]
#: A part with its size in bytes (what a commit's removal of it says).
SizedPart = tuple[str, date, int | None, int]


class Unreadable(Exception):
    """The log holds what this reader does not read: open the table with delta-rs."""


@dataclass(frozen=True)
class _Actions:
    """What one commit or checkpoint says of the table's parts (and its metadata, when it sets it)."""

    adds: tuple[SizedPart, ...]
    removes: tuple[str, ...]
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None


@dataclass(frozen=True)
class Snapshot:
    """A table's latest version as its log says: the version, its parts by path, its metadata."""

    version: int
    parts: dict[str, SizedPart]
    metadata: dict[str, Any]
    protocol: dict[str, Any]

    def columns(self) -> list[str]:
        """The table's columns, as its schema names them."""
        return [str(field["name"]) for field in orjson.loads(self.metadata.get("schemaString") or "{}").get("fields", [])]

    def setting(self, name: str) -> str | None:
        value = (self.metadata.get("configuration") or {}).get(name)
        return None if value is None else str(value)

    def plain_writes(self) -> bool:
        """Whether a commit of added and removed parts is all a writer of this table must write:
        writer version 2 at most, no writer feature, no append-only, change feed, constraint or
        invariant (a commit of such a table is delta-rs's, which knows them)."""
        settings = self.metadata.get("configuration") or {}
        return (
            int(self.protocol.get("minWriterVersion") or 0) <= 2
            and not self.protocol.get("writerFeatures")
            and str(settings.get("delta.appendOnly", "false")).lower() != "true"
            and str(settings.get("delta.enableChangeDataFeed", "false")).lower() != "true"
            and not any(str(key).startswith("delta.constraints.") for key in settings)
            and "delta.invariants" not in str(self.metadata.get("schemaString") or "")
        )


@dataclass(frozen=True)
class _Entry:
    name: str
    version: int
    kind: str
    key: tuple[str, int, str]
    path: AnyPath


def table_parts(log_dir: AnyPath, partition: str) -> list[Part] | None:
    """The parts of the table's current version (``None``: no table), from one listing of its
    log and the commits (and checkpoint) not read before; :class:`Unreadable` when the log is
    not one this reader reads."""
    found = snapshot(log_dir, partition)
    return None if found is None else [(path, night, rows) for path, night, rows, _ in found.parts.values()]


def snapshot(log_dir: AnyPath, partition: str) -> Snapshot | None:
    """The table's latest version (``None``: no table), read as :func:`table_parts` reads it."""
    entries = _listing(log_dir)
    commits = {e.version: e for e in entries if e.kind == "json"}
    if not commits:
        if entries:
            raise Unreadable("a log without commits")
        return None
    latest = max(commits)
    checkpoints = [e for e in entries if e.kind != "json" and e.version <= latest]
    base = max(checkpoints, key=lambda e: e.version) if checkpoints else None
    if base is not None and base.kind != "checkpoint.parquet":
        raise Unreadable("a checkpoint in several parts")
    first = 0 if base is None else base.version + 1
    if any(version not in commits for version in range(first, latest + 1)):
        raise Unreadable("commits missing from the log")
    parts: dict[str, SizedPart] = {}
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    for entry in ([base] if base is not None else []) + [commits[v] for v in range(first, latest + 1)]:
        actions = _actions(entry, partition)
        metadata = actions.metadata or metadata
        protocol = actions.protocol or protocol
        for path in actions.removes:
            parts.pop(path, None)
        for part in actions.adds:
            parts[part[0]] = part
    if metadata is None or protocol is None:
        raise Unreadable("a log without the table's metadata or protocol")
    return Snapshot(latest, parts, metadata, protocol)


def remember(log_dir: AnyPath, name: str, body: bytes, tag: str | None, partition: str) -> None:
    """Keep a commit this process wrote itself (``tag``: the store's for it), so that it is
    not read back."""
    found = LOG_ENTRY.match(name)
    if found is None or found.group("kind") != "json" or not tag:
        return
    key = (str(log_dir / name), len(body), tag)
    _keep(key, _commit_actions(body, partition))


def recent_listing(log_dir: AnyPath, max_age_s: float) -> list[AnyPath] | None:
    """What the last listing of this log in this process found, if it is at most ``max_age_s``
    old (``None`` otherwise): for a question a listing that old answers as well as a new one."""
    with _READ_LOCK:
        listed = _LISTED.get(str(log_dir))
    if listed is None or time.time() - listed[0] > max_age_s:
        return None
    return listed[1]


def _listing(log_dir: AnyPath) -> list[_Entry]:
    """The log's commits and checkpoints (one listing; none when there is no log)."""
    out = []
    started = time.time()
    found = entries_of(log_dir)
    with _READ_LOCK:
        _LISTED[str(log_dir)] = (started, found)
    for path in found:
        match = LOG_ENTRY.match(path.name)
        if match is not None:
            out.append(_Entry(path.name, int(match.group("version")), match.group("kind"), content_key(path), path))
    return out


def _actions(entry: _Entry, partition: str) -> _Actions:
    with _READ_LOCK:
        known = _READ.get(entry.key)
    if known is not None:
        return known
    body = entry.path.read_bytes()
    try:
        actions = _commit_actions(body, partition) if entry.kind == "json" else _checkpoint_actions(body, partition)
    except (ValueError, KeyError, TypeError, pa.ArrowException) as exc:  # delta-rs says what is wrong with it
        raise Unreadable(f"{entry.name} is not read here ({exc})") from None
    if len(body) == entry.key[1]:  # else the object changed since the listing: not kept under its key
        _keep(entry.key, actions)
    return actions


def _keep(key: tuple[str, int, str], actions: _Actions) -> None:
    with _READ_LOCK:
        if len(_READ) >= _KEPT:
            _READ.clear()
        _READ[key] = actions


def _commit_actions(body: bytes, partition: str) -> _Actions:
    adds: list[SizedPart] = []
    removes: list[str] = []
    metadata = protocol = None
    for line in body.splitlines():
        if not line.strip():
            continue
        action = orjson.loads(line)
        if "add" in action:
            adds.append(_part(action["add"], partition))
        elif "remove" in action:
            removes.append(str(action["remove"]["path"]))
        elif "protocol" in action:
            protocol = _check_protocol(action["protocol"])
        elif "metaData" in action:
            metadata = _check_metadata(action["metaData"], partition)
    return _Actions(tuple(adds), tuple(removes), metadata, protocol)


def _checkpoint_actions(body: bytes, partition: str) -> _Actions:
    """A checkpoint's active parts (its tombstones are not parts)."""
    table = pq.read_table(pa.BufferReader(body))
    names = set(table.column_names)
    protocol = None
    if "protocol" in names:
        for found in table.column("protocol").to_pylist():
            if found is not None:
                protocol = _check_protocol(found)
    metadata = None
    if "metaData" in names:
        for found in table.column("metaData").to_pylist():
            if found is not None:
                found = dict(found)
                found["configuration"] = dict(found.get("configuration") or [])
                metadata = _check_metadata(found, partition)
    adds: list[SizedPart] = []
    if "add" in names:
        for add in table.column("add").to_pylist():
            if add is not None:
                add = dict(add)
                add["partitionValues"] = dict(add.get("partitionValues") or [])
                adds.append(_part(add, partition))
    return _Actions(tuple(adds), (), metadata, protocol)


def _part(add: dict[str, Any], partition: str) -> SizedPart:
    if add.get("deletionVector"):
        raise Unreadable("a part with a deletion vector")
    night = (add.get("partitionValues") or {}).get(partition)
    if night is None:
        raise Unreadable(f"a part without its {partition}")
    return (str(add["path"]), date.fromisoformat(str(night)), _rows(add.get("stats")), int(add.get("size") or 0))


def _rows(stats: Any) -> int | None:
    if not stats:
        return None
    try:
        rows = orjson.loads(stats).get("numRecords")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return int(rows) if isinstance(rows, int) else None


def _check_protocol(protocol: dict[str, Any]) -> dict[str, Any]:
    features: Iterable[str] = protocol.get("readerFeatures") or ()
    if int(protocol.get("minReaderVersion") or 1) > 1 or any(features):
        raise Unreadable("a reader version or feature beyond this reader")
    return protocol


def _check_metadata(metadata: dict[str, Any], partition: str) -> dict[str, Any]:
    columns = metadata.get("partitionColumns")
    if columns is not None and list(columns) != [partition]:
        raise Unreadable(f"a table not partitioned by {partition} alone")
    return metadata
