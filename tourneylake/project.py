"""A project folder of one's own (``tourneylake init``): what a folder needs to run nights and to
show them in Dagster, wherever the tool is installed.

The files come from the package (:mod:`tourneylake.packaged`): the starter watchlist, the Dagster
instance and workspace (the same files the repository runs with: its code location is the
installed ``tourneylake.pipelines``), the notebooks; ``.env.example`` is written from the
settings' declaration, so it names every setting there is. Nothing is overwritten.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from tourneylake.config import ENV_PREFIX, IDENTITY, SANDBOX, Settings
from tourneylake.errors import ConfigError
from tourneylake.packaged import packaged

__all__ = ["LIVE_REQUIRED", "Project", "ProjectExists", "env_example", "init_project"]

#: What a live account must set (the sandbox needs none of it).
LIVE_REQUIRED = ("base_url", *IDENTITY)

#: Kept out of git: the data (lake, warehouse, reports), the secrets, Dagster's run storage.
GITIGNORE = """\
# tourneylake: the data (lake, warehouse, reports) and the secrets stay out of git
/data/
.env
*.duckdb
*.duckdb.wal
# Dagster's run history and logs; the instance's settings are kept
/dagster_home/*
!/dagster_home/dagster.yaml
.ipynb_checkpoints/
"""


class ProjectExists(ConfigError):
    """``tourneylake init`` would overwrite a file: nothing is written."""


@dataclass(frozen=True)
class Project:
    """A project folder ``init`` made: its files, relative to it."""

    folder: Path
    files: list[str]
    sandbox: bool


def _files(sandbox: bool) -> dict[str, bytes]:
    """Every file of a new project (its path in the folder → its bytes)."""
    files = {
        "watchlist.yaml": packaged("templates/watchlist.yaml").read_bytes(),
        ".env.example": env_example().encode(),
        ".gitignore": GITIGNORE.encode(),
        "dagster_home/dagster.yaml": packaged("templates/dagster.yaml").read_bytes(),
        "workspace.yaml": packaged("templates/workspace.yaml").read_bytes(),
        "NEXT.md": next_steps(sandbox).encode(),
    }
    if sandbox:
        files[".env"] = (
            f"# The built-in sandbox: a synthetic service, no account, nothing paid.\n{ENV_PREFIX}BASE_URL={SANDBOX}\n".encode()
        )
    for notebook in sorted(packaged("notebooks").glob("*.ipynb")):
        files[f"notebooks/{notebook.name}"] = notebook.read_bytes()
    return files


def init_project(folder: Path, *, sandbox: bool = False) -> Project:
    """Make ``folder`` a project (created if missing); :class:`ProjectExists` naming the files
    that are there already, before anything is written."""
    files = _files(sandbox)
    if folder.exists() and not folder.is_dir():
        raise ProjectExists(f"{folder} is a file, not a folder: choose another folder for the project")
    there = [name for name in files if (folder / name).exists()]
    if there:
        raise ProjectExists(
            f"{folder} already holds {', '.join(there[:3])}{' …' if len(there) > 3 else ''}: nothing written (init never overwrites; choose an empty folder)"
        )
    try:
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("xb") as out:  # never overwrite, even a file made meanwhile
                out.write(data)
    except OSError as exc:
        raise ConfigError(f"cannot write the project into {folder}: {exc.strerror or exc}") from None
    return Project(folder, list(files), sandbox)


def env_example() -> str:
    """``.env.example``: every setting, commented out at its default, with what it is and which
    are secrets; the ones a live account must set first."""
    lines = [
        "# tourneylake's settings. Copy this file to .env (git ignores it) and set what you need:",
        "# every line is commented out at its default. A variable in the environment wins over .env,",
        "# a command's flag over both. Secrets belong in .env or your secret store, never in git.",
        "#",
        f"# A live account: set the {len(LIVE_REQUIRED)} marked 'required' (the built-in sandbox, {ENV_PREFIX}BASE_URL=sandbox,",
        "# needs none of them), then run `tourneylake doctor` (free).",
    ]
    for name, field in Settings.model_fields.items():
        variable = ENV_PREFIX + name.upper()
        secret = SecretStr in (field.annotation, *getattr(field.annotation, "__args__", ()))
        notes = []
        if name in LIVE_REQUIRED and "required" not in (field.description or ""):
            notes.append("required for a live account")
        if secret:
            notes.append("secret")
        text = (field.description or "").replace("`", "")
        text = text[:1].upper() + text[1:] + (f" ({'; '.join(notes)})" if notes else "") + "."
        lines.append("")
        lines.extend(textwrap.wrap(text, width=98, initial_indent="# ", subsequent_indent="# "))
        if name in IDENTITY:
            lines.append(f"# {variable}=")  # the default is the sandbox's demo account
        else:
            lines.append(f"# {variable}={_shown_default(field.default)}")
    return "\n".join(lines) + "\n"


def _shown_default(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return str(value)


def next_steps(sandbox: bool) -> str:
    """``NEXT.md``: what to do in the folder, in order."""
    ui = """\
The Dagster UI shows the nights, the assets and the nightly schedule. With `dagster dev` running
(its daemon runs the schedule), switch `nightly_schedule` on under Automation: every night at
`TOURNEYLAKE_SCHEDULE_CRON` (03:00 UTC by default) it harvests the night that ended.

```sh
dagster dev            # http://127.0.0.1:3000 (installed with `uv tool install`: add --with-executables-from dagster)
```
"""
    if sandbox:
        return f"""\
# Next steps

This folder runs the built-in sandbox (`.env`: `TOURNEYLAKE_BASE_URL=sandbox`): a synthetic
service started on loopback by every command, no account, nothing paid.

```sh
export DAGSTER_HOME="$PWD/dagster_home"  # in every shell here: each run recorded where `dagster dev` shows it
tourneylake run                 # the night that ended (yesterday, UTC): its players, tables, models, report
tourneylake status              # the nights held, how each run ended, searches spent and left
tourneylake report --open       # the night's HTML report (data/reports/)
tourneylake query example       # players by profit in USD
```

{ui}
The notebooks (`notebooks/`) read `data/warehouse.duckdb` read-only (JupyterLab and matplotlib
are not installed with tourneylake).

For a live account, make another folder (`tourneylake init live-project`): synthetic and live
data never share a data directory.
"""
    return f"""\
# Next steps

1. In every shell you use here, `export DAGSTER_HOME="$PWD/dagster_home"`: this folder's Dagster
   instance, where every `tourneylake run` is recorded and `dagster dev` shows it.
2. Copy `.env.example` to `.env` and set the five settings marked "required for a live account":
   `TOURNEYLAKE_BASE_URL`, `TOURNEYLAKE_APPNAME`, `TOURNEYLAKE_APPKEY`, `TOURNEYLAKE_USERNAME`,
   `TOURNEYLAKE_PASSWORD`. `.env` stays out of git.
3. Put your players in `watchlist.yaml`.
4. `tourneylake doctor`: the service answers, the account and application are accepted, the
   searches left and the quota reset, each pair checked against the service's metadata, tonight's
   plan. Free: no search. Each problem is one line naming what to change.
5. A first night on a small cap: `tourneylake run --max-searches 5` (what is left is deferred,
   owed to that night), then `tourneylake status`, `tourneylake report --open`,
   `tourneylake query example`.
6. Leave it to the schedule (below), with a cap per night (`TOURNEYLAKE_MAX_SEARCHES_PER_RUN`)
   and a reserve the nights never spend (`TOURNEYLAKE_RESERVE_SEARCHES`).

{ui}"""
