"""The user's cache (``$XDG_CACHE_HOME``, else ``~/.cache``, under ``tourneylake/``): what is
made again from a folder when it is missing (dbt's parse of the project, the costs of a lake's
ledger files), kept outside that folder and outside the installed package, one entry per
folder (named by a hash of its resolved path), so two projects or lakes never share one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["user_cache"]


def user_cache(kind: str, made_from: Path) -> Path:
    """``<cache>/tourneylake/<kind>-<hash>``: the folder of what ``kind`` keeps for ``made_from``."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    where = hashlib.sha256(str(made_from.resolve()).encode()).hexdigest()[:12]
    return cache / "tourneylake" / f"{kind}-{where}"
