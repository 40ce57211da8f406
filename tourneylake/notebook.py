"""What the notebooks (``notebooks/``) use, so that a cell picks, plots and explains.

:func:`open_warehouse` finds the project's settings wherever the kernel starts (JupyterLab starts
it in the notebook's folder, not where ``make run`` ran): the first of the working directory and
its parents that holds a ``.env``, a ``watchlist.yaml`` or ``data/warehouse.duckdb`` is the
project directory, whose ``.env`` is read and against which relative paths (``./data``) are
resolved. It opens the warehouse read-only (a notebook never changes it) and picks players the
way a coach would. A missing warehouse or player is one line in the notebook, not a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from tourneylake.config import Settings, load_settings
from tourneylake.errors import TourneylakeError
from tourneylake.tables.warehouse import Warehouse

__all__ = [
    "NotebookError",
    "Player",
    "WarehouseReader",
    "chart_style",
    "nights_axis",
    "open_warehouse",
    "project_dir",
    "project_settings",
    "table",
]

#: What marks the directory tourneylake commands are run from.
PROJECT_MARKERS = (".env", "watchlist.yaml", "data/warehouse.duckdb")


class NotebookError(TourneylakeError):
    """Why a notebook cannot go on, shown in the notebook as one line (IPython asks an exception
    for ``_render_traceback_`` before it prints a traceback)."""

    def _render_traceback_(self) -> list[str]:
        return [" ".join(str(self).split())]


def project_dir(start: Path | None = None) -> Path:
    """The first of ``start`` (default: the working directory) and its parents holding one of
    :data:`PROJECT_MARKERS`; ``start`` itself when none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return here


def project_settings(start: Path | None = None) -> Settings:
    """The settings a ``tourneylake`` command run in the project directory would have: the
    environment, then that directory's ``.env``; relative paths resolved against it."""
    root = project_dir(start)
    settings = load_settings(_env_file=root / ".env")
    relative = {
        name: root / value
        for name in ("data_dir", "watchlist", "warehouse")
        if isinstance(value := getattr(settings, name), Path) and not value.is_absolute()
    }
    return settings.with_overrides(**relative)


@dataclass(frozen=True)
class Player:
    """A player to look at, and why this one."""

    network: str
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.name} ({self.network})"


class WarehouseReader:
    """The warehouse opened read-only with the settings it was found with."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.path = settings.warehouse_path
        self.warehouse = Warehouse(self.path, read_only=True)

    def frame(self, sql: str, **params: Any) -> Any:
        """A query's answer as a pandas data frame; ``params`` bound by name (``$player``)."""
        return self.warehouse.query(sql, params or None, output="pandas")

    def nights(self) -> list[date]:
        """The nights the warehouse holds, oldest first."""
        table = self.warehouse.query("SELECT DISTINCT snapshot_date FROM player_snapshots ORDER BY 1")
        return [] if table is None else table.column(0).to_pylist()

    def coverage(self) -> Any:
        """Per night: the watchlist's pairs harvested, called without an answer, and not called
        (deferred or skipped), a data frame; see :func:`tourneylake.report.coverage`."""
        import pyarrow as pa

        from tourneylake.report import coverage

        return pa.Table.from_pylist(coverage(self.warehouse, self.settings.watchlist)).to_pandas()

    def pick_player(self, name: str | None = None, network: str | None = None) -> Player:
        """``name`` (on ``network`` when it plays on several), else the watchlist's most important
        player the warehouse holds entries of (lowest priority, then file order; one only found, if
        none has entries yet), else the one with the most entries."""
        held = self.frame(
            "SELECT network, player FROM player_snapshots WHERE found UNION SELECT network, player FROM player_entries"
        )
        pairs = set(zip(held.network, held.player, strict=True))
        if name is not None:
            networks = sorted(n for n, p in pairs if p == name and network in (None, n))
            if not networks:
                where = f" on {network}" if network else ""
                raise NotebookError(
                    f"the warehouse holds nothing of {name!r}{where}: check PLAYER and NETWORK against the watchlist"
                )
            also = f" (also on {', '.join(networks[1:])}: set NETWORK)" if len(networks) > 1 else ""
            return Player(networks[0], name, "as asked" + also)
        played = self.frame("SELECT DISTINCT network, player FROM player_entries")
        with_entries = set(zip(played.network, played.player, strict=True))
        held = [c for c in self._by_priority() if (c.network, c.name) in pairs]
        # One found without a tournament yet has no results to show: those with entries first.
        for candidate in [c for c in held if (c.network, c.name) in with_entries] or held:
            return candidate
        top = self.frame(
            "SELECT network, player FROM player_entries GROUP BY ALL ORDER BY count(*) DESC, network, player LIMIT 1"
        )
        if top.empty:
            raise NotebookError(f"the warehouse {self.path} holds no player yet: run `make run` (or `tourneylake run`) first")
        return Player(top.network[0], top.player[0], "the player with the most entries")

    def pick_two(self) -> tuple[Player, Player]:
        """Two players to compare: the two best by profit over every night held among those with
        enough entries (the leaderboard), else the two with the most entries."""
        ranked = self.frame(
            "SELECT network, player, qualified FROM leaderboard WHERE period = 'all' "
            "ORDER BY qualified DESC, rank_by_profit NULLS LAST, entries DESC, network, player LIMIT 2"
        )
        if len(ranked) < 2:
            raise NotebookError("the warehouse holds fewer than two players with entries: nothing to compare")
        first, second = (
            Player(ranked.network[i], ranked.player[i], f"{place} by profit over every night held")
            for i, place in enumerate(("first", "second"))
        )
        return first, second

    def _by_priority(self) -> list[Player]:
        path = self.settings.watchlist
        if not path.is_file():
            return []
        from tourneylake.night.watchlist import WatchlistError, load_watchlist

        try:
            players = load_watchlist(path).players
        except WatchlistError:
            return []
        ranked = sorted(enumerate(players), key=lambda item: (item[1].priority, item[0]))
        return [
            Player(p.network, p.name, f"the watchlist's first by priority that the warehouse holds (priority {p.priority})")
            for _, p in ranked
        ]

    def close(self) -> None:
        self.warehouse.close()


def chart_style() -> None:
    """matplotlib's settings for the notebooks' charts: their size, a light grid, a layout that
    keeps titles apart, and fonts that draw every player's name (DejaVu Sans, then Noto Sans CJK
    from the lock file for the Chinese, Japanese and Korean glyphs it lacks: :mod:`tourneylake.fonts`)."""
    import matplotlib.pyplot as plt

    from tourneylake.fonts import matplotlib_families

    plt.rcParams.update(
        {
            "figure.figsize": (10, 4),
            "figure.dpi": 100,
            "figure.constrained_layout.use": True,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "font.family": matplotlib_families(),
        }
    )


def table(frame: Any) -> Any:
    """A data frame as people read it: each column's figures written by their kind (money with 2
    decimals, percentages with 1, counts whole: :mod:`tourneylake.figures`), headers in words,
    no index (a pandas ``Styler``, which the notebook shows as a table)."""
    from tourneylake.figures import figure, words

    plain = frame.reset_index(drop=True)
    shown = plain.astype(object).where(plain.notna(), None)
    shown.columns = [words(str(column)) for column in plain.columns]
    formats = {words(str(column)): (lambda value, column=str(column): figure(column, value)) for column in plain.columns}
    return shown.style.format(formats).hide(axis="index")


def nights_axis(ax: Any) -> None:
    """An x axis of nights: ticks on whole days (every day when there are few), labelled ``YYYY-MM-DD``."""
    import matplotlib.dates as mdates

    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=2, maxticks=10, interval_multiples=True))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))


def open_warehouse(start: Path | None = None) -> WarehouseReader:
    """The project's warehouse, read-only (see the module's docstring for how it is found);
    :class:`NotebookError` when there is none yet or it cannot be opened."""
    settings = project_settings(start)
    path = settings.warehouse_path
    if not path.is_file():
        where = (
            "TOURNEYLAKE_DATA_DIR" if os.environ.get("TOURNEYLAKE_DATA_DIR") else f"the project directory {project_dir(start)}"
        )
        raise NotebookError(
            f"No warehouse at {path} (from {where}): run `make run` in the repository first, then run this notebook again."
        )
    try:
        return WarehouseReader(settings)
    except TourneylakeError as exc:
        raise NotebookError(f"cannot open {path} read-only: {exc}") from None
