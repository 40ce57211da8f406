"""What the service stopped (or started) showing, night by night: the ``coverage_changes`` table.

Coverage changes after the fact (service-notes §6): a network's history can be removed at the
network's request, and a player can opt out. What the lake paid for stays (earlier nights keep
their partitions; nothing here deletes a row) and the change is news to the analyst. A night's
changes compare it with what the lake held before it, from the lake's own tables and raw answers
(no request), so a rebuild makes them again: ``network_removed`` / ``network_added`` (the
night's metadata against the previous one's; a watched pair on a removed network is skipped,
free), ``player_not_found`` (a "not found" for a pair the lake has a snapshot of),
``statistics_withheld`` / ``statistics_restored`` (every statistic not authorized now and
authorized in the pair's last earlier snapshot, or the reverse). A pair's earlier snapshot is
looked for over the :data:`LOOKBACK` previous nights that hold summaries; nights go in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tourneylake.lake.lake import Lake
from tourneylake.schemas import SCHEMAS
from tourneylake.tables.night_tables import TargetKey, not_found_targets, target_name

__all__ = ["LOOKBACK", "change_lines", "coverage_changes", "write_coverage_changes"]

#: Nights holding summaries that are searched back for a pair's last earlier snapshot.
LOOKBACK = 92
_KEY = ["network", "player", "filter_name"]
Row = dict[str, object]


def write_coverage_changes(lake: Lake, night: date) -> pa.Table:
    """The night's ``coverage_changes`` partition, written (dropped when there is none); returns it."""
    table = coverage_changes(lake, night)
    if table.num_rows:
        lake.write_table("coverage_changes", night, table)
    else:
        lake.drop_partition("coverage_changes", night)
    return table


def change_lines(table: pa.Table) -> list[str]:
    """A night's changes as people read them (``network/player [filter]: detail``)."""
    lines = []
    for row in table.to_pylist():
        who = row["network"] if row["subject"] == "network" else target_name((row["network"], row["player"], row["filter_name"]))
        lines.append(f"{who}: {row['detail']}")
    return lines


def coverage_changes(lake: Lake, night: date) -> pa.Table:
    """The night's changes of coverage (see the module docstring), without ``snapshot_date``."""
    rows = _network_changes(lake, night) + _player_changes(lake, night)
    schema = pa.schema([field for field in SCHEMAS["coverage_changes"] if field.name != "snapshot_date"])
    return pa.Table.from_pylist(rows, schema=schema)


def _earlier(lake: Lake, table: str, night: date) -> list[date]:
    """The nights before ``night`` holding ``table``, latest first."""
    return [d for d in reversed(lake.partitions(table)) if d < night]


def _network_changes(lake: Lake, night: date) -> list[Row]:
    if night not in lake.partitions("networks"):
        return []
    before = _earlier(lake, "networks", night)
    if not before:
        return []
    names = {
        n: set(lake.read_partition("networks", d, columns=["name"]).column("name").to_pylist())
        for n, d in (("now", night), ("then", before[0]))
    }
    rows = []
    for change, gone in (("network_removed", names["then"] - names["now"]), ("network_added", names["now"] - names["then"])):
        for network in sorted(gone):
            verb = "no longer lists" if change == "network_removed" else "lists"
            rows.append(
                _row("network", (network, "", ""), change, before[0], f"metadata {verb} {network} (compared with {before[0]})")
            )
    return rows


def _player_changes(lake: Lake, night: date) -> list[Row]:
    missing = not_found_targets(lake, night)
    tonight = _authorized(lake, night, None)
    last_seen = _last_seen(lake, night, missing | set(tonight))
    rows = [
        _row(
            "player",
            key,
            "player_not_found",
            last_seen[key],
            f"the service does not find {target_name(key)} (last seen {last_seen[key]})",
        )
        for key in sorted(missing)
        if key in last_seen
    ]
    by_night: dict[date, set[TargetKey]] = {}
    for key in tonight:
        if key in last_seen:
            by_night.setdefault(last_seen[key], set()).add(key)
    for then, keys in sorted(by_night.items()):
        earlier = _authorized(lake, then, keys)
        for key in sorted(keys):
            rows.extend(_statistics_rows(key, earlier.get(key, {}), tonight[key], then))
    return rows


def _statistics_rows(key: TargetKey, then: dict[str, bool], now: dict[str, bool], when: date) -> list[Row]:
    withheld = sorted(s for s, shown in now.items() if not shown and then.get(s))
    restored = sorted(s for s, shown in now.items() if shown and then.get(s) is False)
    rows = []
    if withheld:
        every = len(withheld) == sum(then.values())
        why = "every statistic it showed: the player may have opted out" if every else ", ".join(withheld)
        rows.append(_row("player", key, "statistics_withheld", when, f"not authorized any more: {why}", withheld))
    if restored:
        rows.append(_row("player", key, "statistics_restored", when, "authorized again: " + ", ".join(restored), restored))
    return rows


def _authorized(lake: Lake, night: date, keys: set[TargetKey] | None) -> dict[TargetKey, dict[str, bool]]:
    """Each pair's statistics on ``night`` and whether each was authorized (of ``keys`` only)."""
    if night not in lake.partitions("player_statistics"):
        return {}
    table = lake.read_partition("player_statistics", night, columns=[*_KEY, "statistic", "authorized"])
    out: dict[TargetKey, dict[str, bool]] = {}
    columns = [*(_values(table.column(name)) for name in (*_KEY, "statistic")), table.column("authorized").to_pylist()]
    for network, player, filter_name, statistic, shown in zip(*columns, strict=True):
        key = (str(network), str(player), str(filter_name or ""))
        if keys is None or key in keys:
            out.setdefault(key, {})[str(statistic)] = shown is not False
    return out


def _values(column: pa.ChunkedArray) -> list[Any]:
    """A column of few distinct values as a list: each value made a Python object once (a
    dictionary column's ``to_pylist`` makes one per row: 0.2 s for a night's 74,000 statistics)."""
    encoded = pc.dictionary_encode(column, null_encoding="encode").combine_chunks()
    values = encoded.dictionary.to_pylist()
    return list(map(values.__getitem__, encoded.indices.to_pylist()))


def _last_seen(lake: Lake, night: date, keys: Iterable[TargetKey]) -> dict[TargetKey, date]:
    """The last night before ``night`` holding a snapshot of each of ``keys`` (within :data:`LOOKBACK`)."""
    wanted = set(keys)
    found: dict[TargetKey, date] = {}
    for then in _earlier(lake, "player_snapshots", night)[:LOOKBACK]:
        if not wanted:
            break
        table = lake.read_partition("player_snapshots", then, columns=_KEY)
        held = set(zip(*(pc.cast(table.column(c), pa.string()).to_pylist() for c in _KEY), strict=True))
        for key in wanted & {(n, p, f or "") for n, p, f in held}:
            found[key] = then
        wanted -= set(found)
    return found


def _row(subject: str, key: TargetKey, change: str, last_seen: date, detail: str, statistics: list[str] | None = None) -> Row:
    network, player, filter_name = key
    return {
        "subject": subject,
        "network": network,
        "player": player,
        "filter_name": filter_name,
        "change": change,
        "last_seen": last_seen,
        "statistics": statistics,
        "detail": detail,
    }
