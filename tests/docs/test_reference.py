"""The generated references are complete: every command and option the CLI's own `--help`
shows, every setting of `Settings`, every table and column the warehouse creates, every dbt model,
column and test of the manifest; and `sql/models/sources.yml` is the catalogue's tables."""

from __future__ import annotations

import re

import pytest
import yaml
from typer.testing import CliRunner

from scripts import docs_reference
from tests.helpers import REPO
from tourneylake.config import ENV_PREFIX, Settings
from tourneylake.schemas import TABLES
from tourneylake.tables.models import SOURCES, sources_yaml
from tourneylake.tables.warehouse import Warehouse


def _sections(markdown: str) -> dict[str, str]:
    """{heading text without backticks: the text under it, up to the next heading}."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,4} `?([^`]+)`?\s*$", line)
        if heading:
            current = heading.group(1)
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


def _documented_columns(markdown: str) -> dict[str, set[str]]:
    """{table or model: columns with a type and a meaning} from the `| \\`column\\` | type | meaning |` rows."""
    return {
        name: {m.group(1) for m in re.finditer(r"^\| `(\w+)` \| [A-Z][^|`]* \| .*\S.* \|$", text, re.MULTILINE)}
        for name, text in _sections(markdown).items()
    }


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(docs_reference.cli_app(), [*args, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def _entries(help_text: str, section: str) -> list[str]:
    """The entries (first lines) of one section of a command's help (`Options`, `Arguments`,
    `Commands`), in click's plain layout or in Typer's rich panels, without a required `*`."""
    entries, inside = [], False
    for line in help_text.splitlines():
        header = re.match(r"^(?:╭─ )?(\w+)(?::\s*$| ─)", line)
        if header:
            inside = header.group(1) == section
            continue
        if line.startswith("╰") or (line and not line.startswith((" ", "│"))):
            inside = False
        elif inside and line.startswith("│"):
            line = " " + line.strip().strip("│").rstrip()  # a panel's row: one space more, as click indents
        if inside and re.match(r"^  \S", line):
            entries.append(line.strip().removeprefix("* "))
    return entries


def test_every_command_and_option_is_in_the_cli_reference():
    """Each command's `--help` (the CLI itself, not the walk the generator makes) against its
    section: its subcommands are sections, its options rows."""
    sections = _sections(docs_reference.render_cli())
    pending = [["tourneylake"]]
    seen = 0
    while pending:
        path = pending.pop()
        name = " ".join(path)
        assert name in sections, f"`{name}` has no section in the CLI reference"
        text = _help(path[1:])
        for row in _entries(text, "Options"):
            for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", row.split("  ")[0]):
                if flag != "--help":
                    assert f"`{flag}" in sections[name], f"`{name}`: option {flag} is not in its section"
                    seen += 1
        for row in _entries(text, "Arguments"):
            argument = row.split()[0].upper()
            assert f"`{argument}`" in sections[name], f"`{name}`: argument {argument} is not in its section"
        for row in _entries(text, "Commands"):
            pending.append([*path, row.split()[0]])
    assert {"tourneylake run", "tourneylake doctor", "tourneylake init", "tourneylake filter check"} <= set(sections)
    assert seen > 30
    silent = [row for row in re.findall(r"^\| `-.*$", docs_reference.render_cli(), re.MULTILINE) if row.endswith("|  |")]
    assert not silent, f"options without help: {silent}"


def test_every_setting_is_in_the_settings_reference():
    text = docs_reference.render_settings()
    for name, field in Settings.model_fields.items():
        row = re.search(rf"^\| `{ENV_PREFIX}{name.upper()}` \| (.*) \| (.*) \|$", text, re.MULTILINE)
        assert row, f"{ENV_PREFIX}{name.upper()} is not in the settings reference"
        assert row.group(2).strip() == " ".join((field.description or "").split()).replace("|", "\\|"), name


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """{table: columns} of a fresh warehouse (the models are dbt's: see the manifest)."""
    path = tmp_path_factory.mktemp("docs") / "warehouse.duckdb"
    with Warehouse(path) as warehouse:
        warehouse.apply_schema()
        rows = warehouse.connection.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'"
        ).fetchall()
    out: dict[str, set[str]] = {}
    for name, column in rows:
        out.setdefault(name, set()).add(column)
    return out


def test_every_table_and_column_is_in_the_tables_reference(tables):
    documented = _documented_columns(docs_reference.render_tables())
    assert "search_ledger" in tables
    for name, columns in sorted(tables.items()):
        assert name in documented, f"table {name} is not in the tables reference"
        assert not columns - documented[name], f"{name}: undocumented columns {sorted(columns - documented[name])}"
    text = docs_reference.render_tables()
    for phrase in ("TIMESTAMP WITH TIME ZONE", "UTC", "`_usd` twin", "usd_rate_missing", "search_ledger"):
        assert phrase in text, phrase


def test_every_model_column_and_test_is_in_the_models_reference():
    """Every model of the manifest has a section with every column (its contract's) and a meaning,
    and every test attached to it; no section documents a model that is gone."""
    manifest = docs_reference.manifest()
    text = docs_reference.render_models(manifest)
    sections = _sections(text)
    documented = _documented_columns(text)
    models = {node["name"]: node for node in docs_reference.project_models(manifest)}
    assert {"leaderboard", "player_results_by_period", "latest_player_statistics", "bill_nightly"} <= set(models)
    for name, node in sorted(models.items()):
        assert node["config"]["contract"]["enforced"], f"{name}: its columns and types are not a contract"
        assert node["description"].strip(), f"model {name} has no description"
        assert set(node["columns"]) == documented[name], (
            f"{name}: docs list {sorted(documented[name] ^ set(node['columns']))} wrongly"
        )
    for test in docs_reference.project_tests(manifest):
        attached = test.get("attached_node") or ""
        if attached.startswith("model."):
            owner = manifest["nodes"][attached]["name"]
            kind = (test.get("test_metadata") or {}).get("name") or test["name"]
            assert f"`{kind}`" in sections[owner], f"{owner}: test {test['name']} is not in its section"
    assert set(sections) - {"Models", "Tests on the tables"} == set(models)
    assert "(dbt/index.html)" in text


def test_sources_yml_is_generated_from_the_catalogue_and_current():
    committed = SOURCES.read_text(encoding="utf-8")
    assert committed == sources_yaml(), "sql/models/sources.yml is out of date: run .venv/bin/python -m scripts.docs_reference"
    declared = yaml.safe_load(committed)["sources"][0]["tables"]
    assert {t["name"]: [c["name"] for c in t["columns"]] for t in declared} == {
        name: [c for c, _, _ in spec.columns] for name, spec in TABLES.items()
    }


def test_tests_readme_names_every_test_module():
    readme = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    modules = sorted(path.relative_to(REPO / "tests") for path in (REPO / "tests").rglob("test_*.py"))
    missing = [str(m) for m in modules if f"`{m.name}`" not in readme]
    assert not missing, f"tests/README.md does not name {missing}"
