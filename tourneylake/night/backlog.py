"""The backlog: pairs owed to earlier nights, kept in the lake's state (``lake/_state/backlog.json``).

A (player, filter) pair a night's harvest deferred (the run cap, the reserve, an exhausted quota:
any backfill's nights too) is owed to that night: its summary as of that night, fetched with that
night's anchored filter whenever it is fetched, lands in that night's partitions, so history stays
exact. :func:`record_owed` notes a harvest's deferred pairs; :func:`owed` gives what is still owed,
night by night: a pair the night has since got (a re-run, a drain), or got an answer for that
cannot be asked again (not found, unusable), is owed no more. ``tourneylake drain``
(:mod:`tourneylake.night.drain`) spends the searches that would expire at the quota reset on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

from tourneylake.lake.lake import Lake
from tourneylake.lake.state import StateStore
from tourneylake.night.budget import Target
from tourneylake.tables.night_tables import TargetKey, stored_targets, unusable_targets

__all__ = ["BACKLOG", "forget", "key_of", "owed", "record_owed"]

BACKLOG = "backlog"
_SEPARATOR = "\x1f"


def key_of(target: Target) -> TargetKey:
    """A target's key as the lake writes it (``""``: unfiltered)."""
    return (target.network, target.player, target.filter_name or "")


def _text(key: TargetKey) -> str:
    return _SEPARATOR.join(key)


def _key(text: str) -> TargetKey | None:
    parts = text.split(_SEPARATOR)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def record_owed(lake: Lake, night: date, deferred: Iterable[tuple[Target, str]]) -> int:
    """Note ``deferred`` pairs as owed to ``night`` (with why); returns how many were new."""
    entries = {_text(key_of(target)): why for target, why in deferred}
    if not entries:
        return 0
    added = 0

    def add(document: dict[str, Any]) -> None:
        nonlocal added
        owed_then = document.setdefault(night.isoformat(), {})
        added = len(set(entries) - set(owed_then))
        for text, why in entries.items():
            owed_then.setdefault(text, why)

    StateStore(lake).update(BACKLOG, add)
    return added


def owed(lake: Lake) -> dict[date, dict[TargetKey, str]]:
    """Every night's pairs still owed (with why each was deferred), oldest night first."""
    document = StateStore(lake).read(BACKLOG)
    out: dict[date, dict[TargetKey, str]] = {}
    for night_text, entries in sorted(document.items()):
        if not isinstance(entries, Mapping):
            continue
        try:
            night = date.fromisoformat(night_text)
        except ValueError:
            continue
        held = stored_targets(lake, night) | unusable_targets(lake, night)
        still = {key: str(why) for text, why in entries.items() if (key := _key(text)) is not None and key not in held}
        if still:
            out[night] = still
    return out


def forget(lake: Lake, gone: Mapping[date, Iterable[TargetKey]]) -> None:
    """Drop pairs from the backlog (no longer watched, or never askable), and nights owed nothing more."""
    dropped = {night.isoformat(): {_text(key) for key in keys} for night, keys in gone.items()}

    def drop(document: dict[str, Any]) -> None:
        for night_text, texts in dropped.items():
            entries = document.get(night_text)
            if isinstance(entries, dict):
                for text in texts:
                    entries.pop(text, None)
                if not entries:
                    document.pop(night_text, None)

    StateStore(lake).update(BACKLOG, drop)
