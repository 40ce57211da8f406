"""What the service stopped (or started) showing, night by night: the ``coverage_changes`` table.

Coverage changes after the fact: a network's history can be removed at the
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
        lake.tables.write("coverage_changes", night, table)
    else:
        lake.tables.drop("coverage_changes", night)
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
    return [d for d in reversed(lake.tables.nights(table)) if d < night]


def _network_changes(lake: Lake, night: date) -> list[Row]:
    if night not in lake.tables.nights("networks"):
        return []
    before = _earlier(lake, "networks", night)
    if not before:
        return []
    names = {
        n: set(lake.tables.read("networks", d, columns=["name"]).column("name").to_pylist())
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
    earlier = _earlier(lake, "player_snapshots", night)[:LOOKBACK]
    if not earlier:
        return []  # no snapshot before the night: nothing changed since (its statistics are not read)
    missing = not_found_targets(lake, night)
    tonight = _shown(lake, night)
    watched = _pairs(tonight)
    last_seen = _last_seen(lake, earlier, missing | watched)
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
    for key in watched:
        if key in last_seen:
            by_night.setdefault(last_seen[key], set()).add(key)
    for then, keys in sorted(by_night.items()):
        earlier = _shown(lake, then)
        changed = keys & _pairs_that_changed(tonight, earlier)  # most nights none: no row is read in Python
        now_shown, then_shown = _by_pair(tonight, changed), _by_pair(earlier, changed)
        for key in sorted(changed):
            rows.extend(_statistics_rows(key, then_shown.get(key, {}), now_shown[key], then))
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


_SHOWN = pa.schema([("network", pa.string()), ("player", pa.string()), ("filter_name", pa.string()), ("statistic", pa.string()), ("shown", pa.bool_())])  # fmt: skip


def _shown(lake: Lake, night: date) -> pa.Table:
    """The night's statistics of each pair (no filter: ``""``) and whether each was shown
    (``authorized`` not false); empty when the night holds none."""
    if night not in lake.tables.nights("player_statistics"):
        return _SHOWN.empty_table()
    table = lake.tables.read("player_statistics", night, columns=[*_KEY, "statistic", "authorized"])
    text = {name: pc.cast(table.column(name), pa.string()) for name in (*_KEY, "statistic")}
    text["filter_name"] = pc.fill_null(text["filter_name"], "")
    return pa.table({**text, "shown": pc.fill_null(table.column("authorized"), True)}, schema=_SHOWN)


def _pairs(shown: pa.Table) -> set[TargetKey]:
    distinct = shown.group_by(_KEY).aggregate([])
    return set(zip(*(distinct.column(name).to_pylist() for name in _KEY), strict=True))


def _pairs_that_changed(now: pa.Table, then: pa.Table) -> set[TargetKey]:
    """The pairs with a statistic held on both nights and shown on one only: a statistic hidden
    on one night (few are) and shown on the other."""
    keys = [*_KEY, "statistic"]
    changed: set[TargetKey] = set()
    for one, other in ((now, then), (then, now)):
        hidden = one.filter(pc.invert(one.column("shown"))).select(keys)
        if hidden.num_rows:  # the few hidden statistics are the join's hash table; the other night probes it
            both = other.join(hidden, keys=keys, join_type="inner")
            changed |= _pairs(both.filter(both.column("shown")))
    return changed


def _by_pair(shown: pa.Table, keys: set[TargetKey]) -> dict[TargetKey, dict[str, bool]]:
    """Of ``keys`` only: each pair's statistics and whether each was shown."""
    out: dict[TargetKey, dict[str, bool]] = {}
    if not keys:
        return out
    columns = [shown.column(name).to_pylist() for name in (*_KEY, "statistic", "shown")]
    for network, player, filter_name, statistic, is_shown in zip(*columns, strict=True):
        if (key := (network, player, filter_name)) in keys:
            out.setdefault(key, {})[statistic] = is_shown
    return out


def _last_seen(lake: Lake, earlier: list[date], keys: Iterable[TargetKey]) -> dict[TargetKey, date]:
    """Of the nights ``earlier`` (latest first), the last holding a snapshot of each of ``keys``."""
    wanted = set(keys)
    found: dict[TargetKey, date] = {}
    for then in earlier:
        if not wanted:
            break
        table = lake.tables.read("player_snapshots", then, columns=_KEY)
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
