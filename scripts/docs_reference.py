"""The documentation site's references, generated from the code so they cannot drift from it.

* ``reference/cli.md``: every command and option, walked from the console script's Typer app
  (the ``tourneylake`` entry point of the installed package);
* ``reference/settings.md``: every field of :class:`tourneylake.config.Settings`;
* ``reference/tables.md``: every warehouse table and column, from the table catalogue
  (:func:`tourneylake.schemas.tables_markdown`);
* ``reference/models.md``: every dbt model, column and test, from dbt's manifest, with a link to
  dbt's own docs site (``dbt docs generate``, made by :func:`dbt_docs_site`);
* ``sql/models/sources.yml``: the catalogue's tables as dbt sources (dbt reads this one, so it is
  committed).

The site's build (``scripts/mkdocs_hooks.py``) renders the pages at every build; this module's
command line writes ``sources.yml`` and, with ``--out DIR``, the pages for a look::

    .venv/bin/python -m scripts.docs_reference            # write sql/models/sources.yml
    .venv/bin/python -m scripts.docs_reference --check    # exit 1 when it is out of date
    .venv/bin/python -m scripts.docs_reference --out /tmp/ref
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from pydantic import SecretStr

from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.schemas import tables_markdown
from tourneylake.tables.models import PROJECT, SOURCES, dbt_env, dbt_executable, ensure_manifest, sources_yaml

GENERATED = "<!-- Generated from the code by scripts/docs_reference.py at each build of the site: do not edit. -->"


# ------------------------------------------------------------------------------------- the CLI
def cli_app() -> typer.Typer:
    """The Typer app of the installed ``tourneylake`` console script."""
    (entry,) = (e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "tourneylake")
    return importlib.import_module(entry.module).app


def commands(app: typer.Typer | None = None) -> Iterator[tuple[str, Any]]:
    """(``tourneylake sub command``, the command) for the app and every command below it,
    as Typer hands them to its parser (groups in their own order)."""
    root = typer.main.get_command(app or cli_app())

    def walk(name: str, command: Any) -> Iterator[tuple[str, Any]]:
        yield name, command
        for sub_name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                yield from walk(f"{name} {sub_name}", sub)

    yield from walk("tourneylake", root)


def _clean(text: str | None) -> str:
    """A help text on one paragraph per blank line, Typer's `\\b` markers dropped."""
    paragraphs = [" ".join(p.replace("\b", "").split()) for p in (text or "").split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(param: Any) -> str:
    if (param.param_type_name == "option" and param.is_flag) or param.required:
        return ""
    default = param.default
    if callable(default) or default is None or default == () or default == "":
        return ""
    return f"`{default}`"


def _option_name(param: Any, context: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`"
    takes = "" if param.is_flag or param.count else f" {param.display_type(context)}"
    return " / ".join(f"`{name}{takes if i == 0 else ''}`" for i, name in enumerate([*param.opts, *param.secondary_opts]))


def render_cli(app: typer.Typer | None = None) -> str:
    lines = [
        "# Command line",
        "",
        GENERATED,
        "",
        "Every command of `tourneylake`, with every option, as `tourneylake COMMAND --help` shows them. "
        "Exit statuses: 0 ok, 1 failed, 2 a usage error, 3 a partial night (some pairs failed: running it "
        "again retries them), 4 pairs the watchlist kept from being attempted, 130 interrupted.",
        "",
    ]
    context = typer.main.get_command(app or cli_app()).make_context("tourneylake", [], resilient_parsing=True)
    for name, command in commands(app):
        depth = name.count(" ")
        lines += [f"{'#' * min(depth + 2, 4)} `{name}`", ""]
        if command.help:
            lines += [_clean(command.help), ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| option | default | meaning |", "|---|---|---|"]
            for param in params:
                meaning = _clean(getattr(param, "help", None)) or ("required" if param.required else "")
                lines.append(f"| {_option_name(param, context)} | {_default(param)} | {_cell(meaning)} |")
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------ settings
def _setting_default(name: str) -> str:
    value = Settings.model_fields[name].default
    if isinstance(value, SecretStr):
        return "the sandbox's"
    return "(unset)" if value is None else f"`{value}`"


def render_settings() -> str:
    lines = [
        "# Settings",
        "",
        GENERATED,
        "",
        "Every setting is an environment variable (a `.env` file in the working directory is read too); "
        "command-line flags override both; Dagster binds each one through `EnvVar`, so its UI shows the "
        "variable's name, never a secret's value. A bad value stops any command with one line naming the "
        "variable. Adding a setting is adding one field to `Settings` (`tourneylake/config.py`): this page, "
        "the flags' plumbing and the Dagster resource's configuration follow from it.",
        "",
        "| variable | default | meaning |",
        "|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        lines.append(f"| `{ENV_PREFIX}{name.upper()}` | {_setting_default(name)} | {_cell(field.description or '')} |")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------- tables
TABLES_INTRO = """\
# Tables

GENERATED

The DuckDB warehouse (`warehouse.duckdb` in the data directory, or `TOURNEYLAKE_WAREHOUSE`) holds
one table per lake table, loaded night by night by the `warehouse` asset, and the
[models](models.md) built over them by dbt. The lake's tables are Delta tables at
`<data dir>/lake/<table>`, partitioned by `snapshot_date`. Open the warehouse read-only for
analysis (`tourneylake query "SQL"`, or DuckDB with `read_only=True`).

## Conventions

* **Nights.** `snapshot_date` (DATE) is the night the row was harvested for. *snapshot* tables
  (`player_*`) keep every night (re-loading a night replaces that night); *whole* tables
  (`search_ledger`) are reloaded from every night's partition each time; *reference* tables
  (metadata but `currencies`, countries, news) hold the latest snapshot only; *dedup* tables
  (`tournaments`, `tournament_entries`) keep one row per key, from the latest night that saw it.
* **Times are UTC**, as `TIMESTAMPTZ` (= `TIMESTAMP WITH TIME ZONE`), converted from the
  service's epoch seconds; the warehouse session runs with `TimeZone = 'UTC'`.
* **Money** is `DOUBLE` in the currency the service served it in, and every money column of a
  table has a **`_usd` twin** = amount ÷ rate, with the rates of the metadata *in force the night
  that harvested the row* (`currencies.rate`, units per USD). The models convert each entry at the
  rates of **the night its tournament started in** instead (`player_results_usd`): a later night
  that lists the entry again never moves a finished night's USD. `currencies` keeps every night's
  rates for that.
* **`usd_rate_missing`** is true when the row's currency had no usable rate: the `_usd` columns
  are then NULL, never guessed. Models that sum USD leave such rows out and count them
  (`entries_without_rate`).
* **Withheld is NULL.** A statistic the service withholds (the player has not opted in) has a
  NULL value, never 0; the models that add results up leave it out and say how many they left out
  (`player_summaries_withheld`).
* **Keys are never NULL**: `filter_name` is `''` for the unfiltered view of a player.
* **`search_ledger`** records every metered call attempt: `cost` is the searches spent,
  `remaining_after` the account's searches left after it, `outcome` with `error_code` and
  `error`; `SELECT snapshot_date, sum(cost) FROM search_ledger GROUP BY ALL` is the bill per night.
* **As-of nights.** A summary harvested for night N describes tournaments started up to the end
  of N, whenever it was fetched: `player_snapshots.filter_sent` is the filter anchored to the
  night (`filter_expression` is the filter as written).
""".replace("GENERATED", GENERATED)


def render_tables() -> str:
    catalogue = tables_markdown().split("\n", 1)[1]  # its own "# Tables" heading is the intro's
    return (
        TABLES_INTRO
        + "\n## The tables\n"
        + "\n".join("#" + line if line.startswith("#") else line for line in catalogue.splitlines())
        + "\n"
    )


# -------------------------------------------------------------------------------------- models
def manifest() -> dict[str, Any]:
    return json.loads(ensure_manifest().read_text(encoding="utf-8"))


def project_models(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The project's models, by folder then name."""
    models = [n for n in document["nodes"].values() if n["resource_type"] == "model" and n["package_name"] == "tourneylake"]
    return sorted(models, key=lambda n: (str(Path(n["original_file_path"]).parent), n["name"]))


def project_tests(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in document["nodes"].values() if n["resource_type"] == "test" and n["package_name"] == "tourneylake"]


def _column_meaning(document: dict[str, Any], node: dict[str, Any], column: str) -> str:
    """A column's description, or (passed through) that of the table or model it comes from."""
    own = node["columns"].get(column, {}).get("description", "")
    if own:
        return own
    for parent_id in sorted(node["depends_on"]["nodes"], key=lambda p: not p.startswith("model.")):  # models first
        parent = document["sources"].get(parent_id) or document["nodes"][parent_id]
        if column in parent.get("columns", {}):
            meaning = _column_meaning(document, parent, column)
            return meaning if meaning.startswith("from `") else f"from `{parent['name']}`: {meaning}"
    raise ValueError(f"model {node['name']}: column {column!r} has no description and comes from no table it reads")


def _test_name(test: dict[str, Any]) -> str:
    generic = test.get("test_metadata") or {}
    return f"`{generic['name']}`" if generic else f"`{test['name']}` (`sql/{test['original_file_path']}`)"


def _tests_of(document: dict[str, Any], unique_id: str) -> list[dict[str, Any]]:
    attached = [t for t in project_tests(document) if t.get("attached_node") == unique_id]
    singular = [
        t
        for t in project_tests(document)
        if not t.get("attached_node") and not t.get("test_metadata") and unique_id in t["depends_on"]["nodes"]
    ]
    return sorted(attached + singular, key=lambda t: (t.get("column_name") or "", t["name"]))


def render_models(document: dict[str, Any] | None = None) -> str:
    document = document or manifest()
    variables = document.get("vars") or {}
    lines = [
        "# Models",
        "",
        GENERATED,
        "",
        "The dbt models of `sql/models/`, built into the warehouse after each night's load (the `models` job; "
        "`tourneylake run` after its last night; `tourneylake rebuild --all`). A query reads a model like any "
        "[table](tables.md). Each column's type is the model's contract, enforced at every build, and each "
        "model's tests run after it (dbt's `build`): in Dagster a model is an asset and a test an asset check.",
        "",
        "**dbt's own docs site** (every model, column and test, browsable, with the lineage graph): "
        "[open it](dbt/index.html). It is `dbt docs generate` over this project, without a warehouse's catalogue.",
        "",
    ]
    if variables:
        lines += ["Variables the build takes (`--vars`, `dbt_project.yml`):", "", "| variable | default |", "|---|---|"]
        lines += [f"| `{name}` | `{value}` |" for name, value in sorted(variables.items()) if name != "warehouse"]
        lines.append("")
    for node in project_models(document):
        reads = sorted(f"`{(document['sources'].get(p) or document['nodes'][p])['name']}`" for p in node["depends_on"]["nodes"])
        kind = node["config"].get("materialized", "view")
        lines += [f"## `{node['name']}`", "", " ".join(node["description"].split()), ""]
        lines += [f"A {kind}; reads {', '.join(reads)}. Defined in `sql/{node['original_file_path']}`.", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        for name, column in node["columns"].items():
            lines.append(f"| `{name}` | {column['data_type']} | {_cell(_column_meaning(document, node, name))} |")
        lines.append("")
        tests = _tests_of(document, node["unique_id"])
        if tests:
            lines += ["| test | column | severity |", "|---|---|---|"]
            for test in tests:
                column = f"`{test['column_name']}`" if test.get("column_name") else ""
                lines.append(f"| {_test_name(test)} | {column} | {test['config'].get('severity', 'ERROR').lower()} |")
            lines.append("")
    sources = [t for t in project_tests(document) if any(p.startswith("source.") for p in t["depends_on"]["nodes"])]
    lines += [
        "## Tests on the tables",
        "",
        f"The tables are dbt sources (`sql/models/sources.yml`, generated from the catalogue), tested at every "
        f"build: {len(sources)} tests (one row per key; coded columns hold only their codes).",
        "",
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------- dbt docs site
def dbt_docs_site() -> Path:
    """A folder holding dbt's own docs site for the project (``index.html``, ``manifest.json``,
    ``catalog.json``: what ``dbt docs serve`` serves), made by ``dbt docs generate`` without a
    warehouse (``--empty-catalog``) and kept in the user's cache per manifest, so a build of the
    site pays dbt's start-up only when the models changed."""
    source = ensure_manifest()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tourneylake" / f"dbt-docs-{digest}"
    if (cache / "index.html").is_file():
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache.parent, prefix=".docs-") as staging:
        shutil.copy(source, Path(staging) / "manifest.json")
        command = [
            dbt_executable(), "docs", "generate", "--no-compile", "--empty-catalog",
            "--project-dir", str(PROJECT), "--profiles-dir", str(PROJECT),
            "--target-path", staging, "--log-path", staging,
            "--vars", json.dumps({"warehouse": str(Path(staging) / "none.duckdb")}),
        ]  # fmt: skip
        done = subprocess.run(command, cwd=PROJECT, env=dbt_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (Path(staging) / "index.html").is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"dbt docs generate failed: {tail[0]}")
        site = Path(staging) / "site"
        site.mkdir()
        for name in ("index.html", "manifest.json", "catalog.json"):
            shutil.copy(Path(staging) / name, site / name)
        with contextlib.suppress(OSError):  # made by another build meanwhile
            os.replace(site, cache)
    return cache


# ---------------------------------------------------------------------------------------- pages
def pages() -> dict[str, str]:
    """{path under docs/: markdown} of every generated page."""
    return {
        "reference/cli.md": render_cli(),
        "reference/settings.md": render_settings(),
        "reference/tables.md": render_tables(),
        "reference/models.md": render_models(),
    }


def main(argv: list[str]) -> int:
    if "--out" in argv:
        out = Path(argv[argv.index("--out") + 1])
        for name, text in pages().items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")
            print(f"wrote {out / name}")
        return 0
    current = SOURCES.is_file() and SOURCES.read_text(encoding="utf-8") == sources_yaml()
    if "--check" in argv:
        if not current:
            print(f"{SOURCES} is out of date: run .venv/bin/python -m scripts.docs_reference", file=sys.stderr)
        return 0 if current else 1
    SOURCES.write_text(sources_yaml(), encoding="utf-8")
    print(f"wrote {SOURCES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
