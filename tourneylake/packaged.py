"""What the package carries besides its code, found through :mod:`importlib.resources`: the
warehouse's tables and the dbt project (``sql/``), the example queries, the notebooks (the
templates ``tourneylake init`` copies) and the sandbox's data.

The same path in the repository and in an installed wheel: ``tourneylake/sql`` and
``tourneylake/notebooks`` are links to the repository's top-level folders, which the wheel holds
as folders. Nothing is looked up relative to a checkout, so the tool works from any folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tourneylake.errors import ConfigError

__all__ = ["NEEDED", "check_packaged", "packaged"]

#: What a night and the commands read from the package, by its path inside it.
NEEDED = {
    "sql/tables.sql": "the warehouse's tables",
    "sql/dbt_project.yml": "the dbt project",
    "sql/profiles.yml": "the dbt profile",
    "sql/models": "the dbt models",
    "sql/examples/top_players_usd.sql": "the example query",
    "sandbox/data/metadata_template.json": "the sandbox's metadata",
    "notebooks/player.ipynb": "the notebooks",
}


def packaged(relative: str) -> Path:
    """The file or folder ``relative`` (``sql/tables.sql``) of the installed package, on disk."""
    root = resources.files("tourneylake")
    if not isinstance(root, Path):  # imported from a zip file: dbt and DuckDB need files on disk
        raise ConfigError(f"tourneylake must be installed as files, not imported from {root}: reinstall it with pip or uv")
    return root.joinpath(*relative.split("/"))


def check_packaged() -> None:
    """Every file of :data:`NEEDED` is there, or one line naming the first missing ones (an
    installation that left them out: a night would fail after its first paid call)."""
    missing = [f"{name} ({what})" for name, what in NEEDED.items() if not packaged(name).exists()]
    if missing:
        raise ConfigError(
            f"this installation of tourneylake lacks {', '.join(missing[:3])} in {packaged('.').resolve()}: "
            "reinstall it (pip install --force-reinstall, or uv tool install --reinstall)"
        )
